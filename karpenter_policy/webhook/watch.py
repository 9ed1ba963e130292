"""Noticing that files changed on disk: a fingerprint of their contents, and a thread that polls a check.

Contents, not modification times: kubelet updates a mounted Secret or ConfigMap by swapping a symbolic link
(`..data`) to a new directory, and mtimes can be coarse. The serving certificate (`tls`) and the policy context
(`reload`) are watched this way, each by a `Poller` of its own.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)


def fingerprint(files: Iterable[str | Path]) -> bytes:
    """A digest of each file's name and contents, in the order given (a file that cannot be read counts by its
    error, so that it appearing or disappearing is a change too)."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file).encode("utf-8", "surrogateescape") + b"\0")
        try:
            digest.update(Path(file).read_bytes())
        except OSError as error:
            digest.update(f"unreadable: {type(error).__name__}".encode())
        digest.update(b"\0")
    return digest.digest()


def directory_files(directory: str | Path) -> list[Path]:
    """The files directly in `directory`, sorted, hidden ones (kubelet's `..data`, `..2024_…`) left out; symbolic
    links count as the files they point to. Empty when the directory cannot be listed."""
    try:
        entries = sorted(Path(directory).iterdir())
    except OSError:
        return []
    return [entry for entry in entries if not entry.name.startswith(".") and entry.is_file()]


class Poller:
    """Calls `check` every `interval` seconds in a daemon thread of its own, until `stop`; an exception is logged
    and the polling goes on (a poller that dies silently would stop every reload for good)."""

    def __init__(self, name: str, interval: float, check: Callable[[], object]) -> None:
        self.name, self.interval, self._check = name, interval, check
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._check()
            except Exception:
                log.exception("%s: check failed", self.name)

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.interval + 1)
