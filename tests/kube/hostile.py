"""A hostile Kubernetes API server for tests: plain ``http.server`` over real HTTP, in a background thread.

It serves GETs the way an API server does — lists, single objects and watches of a small store it keeps
(:meth:`HostileServer.put`, :meth:`HostileServer.remove`), with resourceVersions, a change log a watch
replays, bookmarks, timeouts and 410 for a version older than the log — until a test scripts it to misbehave:

- :meth:`HostileServer.script` queues answers for the next requests of one resource and verb (``list``,
  ``watch``, ``get``); :meth:`HostileServer.always` answers every such request alike until :meth:`heal`.
- An :class:`Answer` is an HTTP status and a body (an empty 200, a 200 ``Status``, ``items: "abc"``, …), or
  watch lines (malformed ones, an ERROR 410, …) followed by the end of the stream, a hang (silent until the
  client gives up or the server stops) or the real changes; any answer may come after a ``delay``.
- Every request is recorded (method, resource, verb, monotonic time) so a test can count the LISTs a client
  sent over a window.

Only what the informer and the client adapter's reads need is served (GET on pods, nodes and the other kinds
of ``karpenter_policy.kube.objects``, and the claims, PersistentVolumes and StorageClasses the provisioner
reads); other methods answer 405.
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.volumes import VOLUME_KINDS

Verb = Literal["list", "watch", "get"]
Then = Literal["end", "hang", "serve"]

KINDS_BY_PLURAL = {kind.plural: kind for kind in (*objects.KINDS, *VOLUME_KINDS)}


@dataclass(frozen=True)
class Answer:
    """One scripted answer. ``body`` (bytes, or any JSON value) replaces the real body; ``lines`` are a watch's
    lines (bytes, or JSON values) sent before ``then``: the end of the stream, a hang, or the real changes."""

    status: int = 200
    body: Any = None
    lines: tuple[Any, ...] = ()
    then: Then = "end"
    delay: float = 0.0


def status_body(code: int, reason: str, message: str = "") -> Obj:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": code,
            "reason": reason, "message": message or reason}


GONE_LINE = {"type": "ERROR", "object": status_body(410, "Expired", "too old resource version")}
GONE = Answer(lines=(GONE_LINE,))
SERVER_ERROR = Answer(status=500, body=status_body(500, "InternalError", "etcd is on fire"))


@dataclass(frozen=True)
class Request:
    method: str
    plural: str
    verb: str
    at: float
    query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Change:
    version: int
    plural: str
    type: str
    object: Obj


class HostileServer:
    """Use as a context manager: ``with HostileServer() as server: KubeCluster.from_url(server.url)``."""

    def __init__(self, history: int = 1000) -> None:
        self._lock = threading.Condition()
        self._store: dict[str, dict[tuple[str | None, str], Obj]] = {}
        self._log: deque[_Change] = deque()
        self._history = history
        self._forgotten = 0
        self._version = 1
        self._scripts: dict[tuple[str, str], deque[Answer]] = {}
        self._always: dict[tuple[str, str], Answer] = {}
        self._stopping = threading.Event()
        self.requests: list[Request] = []
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    # -- the store -----------------------------------------------------------------------------------

    def put(self, kind: Kind, obj: Obj) -> Obj:
        """Create or replace an object (ADDED or MODIFIED for watchers)."""
        with self._lock:
            self._version += 1
            stored = objects.with_kind(kind, copy.deepcopy(obj))
            meta = stored.setdefault("metadata", {})
            if kind.namespaced:
                meta.setdefault("namespace", "default")
            meta["resourceVersion"] = str(self._version)
            key = (meta.get("namespace"), meta["name"])
            store = self._store.setdefault(kind.plural, {})
            event = "MODIFIED" if key in store else "ADDED"
            store[key] = stored
            self._append(_Change(self._version, kind.plural, event, copy.deepcopy(stored)))
            return copy.deepcopy(stored)

    def remove(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        with self._lock:
            key = ((namespace or "default") if kind.namespaced else None, name)
            gone = self._store.get(kind.plural, {}).pop(key)
            self._version += 1
            gone["metadata"]["resourceVersion"] = str(self._version)
            self._append(_Change(self._version, kind.plural, "DELETED", gone))

    def _append(self, change: _Change) -> None:
        self._log.append(change)
        if len(self._log) > self._history:
            self._forgotten = self._log.popleft().version
        self._lock.notify_all()

    def state(self, kind: Kind) -> list[Obj]:
        """What the server holds, sorted by namespace and name (as a healthy list answers)."""
        with self._lock:
            items = copy.deepcopy(list(self._store.get(kind.plural, {}).values()))
        return sorted(items, key=lambda obj: (objects.namespace(obj) or "", objects.name(obj)))

    # -- scripting -----------------------------------------------------------------------------------

    def script(self, kind: Kind, verb: Verb, *answers: Answer) -> None:
        """Answer the next requests of ``kind`` and ``verb`` with these, in order (then as before)."""
        with self._lock:
            self._scripts.setdefault((kind.plural, verb), deque()).extend(answers)

    def always(self, kind: Kind, verb: Verb, answer: Answer) -> None:
        """Answer every request of ``kind`` and ``verb`` (after any scripted ones) so, until :meth:`heal`."""
        with self._lock:
            self._always[(kind.plural, verb)] = answer

    def heal(self) -> None:
        """Forget every script: from now on, answer as a healthy API server."""
        with self._lock:
            self._scripts.clear()
            self._always.clear()
            self._lock.notify_all()

    def count(self, kind: Kind, verb: Verb, since: float = 0.0) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.plural == kind.plural and r.verb == verb and r.at >= since)

    def times(self, kind: Kind, verb: Verb) -> list[float]:
        with self._lock:
            return [r.at for r in self.requests if r.plural == kind.plural and r.verb == verb]

    # -- serving (handler threads) -------------------------------------------------------------------

    def _next_answer(self, plural: str, verb: str) -> Answer | None:
        with self._lock:
            queue = self._scripts.get((plural, verb))
            if queue:
                return queue.popleft()
            return self._always.get((plural, verb))

    def _record(self, method: str, plural: str, verb: str, query: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(Request(method, plural, verb, time.monotonic(), query))

    def list_body(self, kind: Kind, namespace: str | None = None) -> Obj:
        """What a healthy list of ``kind`` answers now (to script it as a later, stale answer)."""
        with self._lock:
            items = [copy.deepcopy(obj) for obj in self._store.get(kind.plural, {}).values()
                     if namespace is None or objects.namespace(obj) == namespace]
            version = self._version
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List",
                "metadata": {"resourceVersion": str(version)}, "items": items}

    def _get_body(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        with self._lock:
            obj = self._store.get(kind.plural, {}).get((namespace if kind.namespaced else None, name))
            return copy.deepcopy(obj) if obj is not None else None

    def compact(self) -> None:
        """Forget the change log: a watch from any earlier version gets 410 Gone."""
        with self._lock:
            self._log.clear()
            self._forgotten = self._version

    def _changes(self, kind: Kind, namespace: str | None, since: int, deadline: float, bookmarks: bool) -> Any:
        """The watch's real lines after ``since``: replayed, then live until the deadline (a generator)."""
        position = since
        while not self._stopping.is_set():
            with self._lock:
                gone = position < self._forgotten
                changes = [c for c in self._log if c.version > position]
                newest = self._version
                if not gone and not changes and deadline > time.monotonic():
                    self._lock.wait(min(deadline - time.monotonic(), 0.5))
                    continue
            if gone:
                yield GONE_LINE
                return
            if not changes:
                if bookmarks:
                    meta = {"resourceVersion": str(newest)}
                    yield {"type": "BOOKMARK", "object": {"apiVersion": kind.api_version, "kind": kind.kind,
                                                          "metadata": meta}}
                return
            for change in changes:
                position = change.version
                if change.plural == kind.plural and namespace in (None, objects.namespace(change.object)):
                    yield {"type": change.type, "object": change.object}


def _handler(server: HostileServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # for chunked watch streams; every answer then closes the connection

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (read timeout)
                self._get()

        def _get(self) -> None:
            url = urlsplit(self.path)
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            parsed = _parse_path(url.path)
            if parsed is None:
                self._send(404, status_body(404, "NotFound", f"{url.path} is not served"))
                return
            kind, namespace, name = parsed
            verb = "watch" if query.get("watch") in ("true", "1") else "get" if name else "list"
            server._record("GET", kind.plural, verb, query)
            answer = server._next_answer(kind.plural, verb)
            if answer is not None and answer.delay:
                server._stopping.wait(answer.delay)
            if verb == "watch":
                self._watch(kind, namespace, query, answer)
            elif answer is not None and (answer.body is not None or answer.status != 200):
                self._send(answer.status, answer.body)
            elif verb == "list":
                self._send(200, server.list_body(kind, namespace))
            else:
                obj = server._get_body(kind, namespace, name or "")
                self._send(200 if obj else 404, obj or status_body(404, "NotFound", f"{name} not found"))

        def _reject(self) -> None:
            server._record(self.command, "", "", {})
            self._send(405, status_body(405, "MethodNotAllowed", f"{self.command} is not served here"))

        do_POST = do_PUT = do_PATCH = do_DELETE = _reject  # noqa: N815

        def _send(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def _watch(self, kind: Kind, namespace: str | None, query: dict[str, str], answer: Answer | None) -> None:
            if answer is not None and answer.status != 200:
                self._send(answer.status, answer.body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            timeout = float(query.get("timeoutSeconds") or 60)
            deadline = time.monotonic() + timeout
            for line in answer.lines if answer is not None else ():
                self._line(line)
            then = answer.then if answer is not None else "serve"
            if then == "hang":
                while not server._stopping.is_set() and time.monotonic() < deadline + 120:
                    server._stopping.wait(0.1)
            elif then == "serve":
                since = int(query.get("resourceVersion") or 0)
                bookmarks = query.get("allowWatchBookmarks") == "true"
                for event in server._changes(kind, namespace, since, deadline, bookmarks):
                    self._line(event)
            if then != "hang":
                self.wfile.write(b"0\r\n\r\n")  # the end of a chunked stream: a clean end

        def _line(self, line: Any) -> None:
            data = (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _parse_path(path: str) -> tuple[Kind, str | None, str | None] | None:
    """(kind, namespace, name) of a resource URL (/api/v1/…, /apis/group/version/…), or None."""
    parts = [part for part in path.split("/") if part]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        rest = parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or rest[0] not in KINDS_BY_PLURAL:
        return None
    return KINDS_BY_PLURAL[rest[0]], namespace, rest[1] if len(rest) > 1 else None
