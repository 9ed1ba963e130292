"""A TCP proxy that can pause: real sockets between a client and a server, nothing patched in-process.

While paused it accepts connections and reads what either side sends, but delivers nothing, both ways — as a
frozen API server or a partitioned network looks to a client: connections open, requests sent, no answer. On
:meth:`PausingProxy.resume` what it held is delivered late (a request the client gave up on reaches the server
then, as it can on a real network). ``pause_for(seconds)`` pauses in the background.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class PausingProxy:
    """Listens on 127.0.0.1 (a free port) and forwards every connection to ``(host, port)``."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, name="pausing-proxy", daemon=True).start()

    @property
    def paused(self) -> bool:
        return not self._flowing.is_set()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def pause_for(self, seconds: float) -> threading.Thread:
        """Pause now, resume after `seconds` (on a thread of its own, returned: join it to wait for the resume)."""
        self.pause()

        def later() -> None:
            self._closed.wait(seconds)
            self.resume()

        thread = threading.Thread(target=later, name="pausing-proxy-timer", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def __enter__(self) -> PausingProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        """Move bytes from `source` to `target`, holding them while paused; an end or an error closes both."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                if self._closed.is_set():
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
