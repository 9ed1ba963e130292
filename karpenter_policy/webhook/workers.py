"""Admission work in worker processes, every request under a deadline.

A request's checks run the CLI's functions on whatever the object holds. Most slow paths are pure Python, but
some are not: a C-level operation (a huge integer or Decimal conversion, a regular expression) holds the GIL
for as long as it runs, and no thread of the process — not the one that would answer "too late", not /healthz,
not the SIGTERM handler — runs until it is done. So the work does not run in the server's process: the server
parses the request, hands it to one of `size` worker processes (forked from the warmed-up server: they share
its catalog and solver tables copy-on-write) and waits for the answer until the request's deadline. A worker
that has not answered by then is killed (SIGKILL) and replaced by a fresh fork in the background; the server
answers the request itself (`handlers.deadline_response`: a Provisioner denied, a pod admitted unpinned).
A request that finds no idle worker before its deadline gets the same answer.

Each worker serves one request at a time: the path and the request body in (the body the server has already
parsed and found a well-formed review: the worker parses it again rather than receive a pickle, which could not
carry an object nested as deeply as JSON allows), (AdmissionResponse, the solver cache's counters) pickled out,
over a socket pair. The whole-check and solver caches live in the
workers; the server sums their counters for /metrics.

Fork hygiene: the child closes every inherited descriptor but its own socket (the listener and the client
connections must close when the server closes them), moves every inherited object out of the garbage
collector's reach (`gc.freeze`: a stale socket object of the parent must never close a descriptor number the
child reuses), ignores SIGINT/SIGTERM/SIGHUP (the server decides when workers end) and leaves with `os._exit`.
A worker also ends when the server's end of its socket closes.

Reloading (`reload`: the policy context changed, `reload` module): a worker holds the routes it was forked with,
so new routes take new workers. The pool forks `size` workers of the new generation at once (from the server,
which now holds the new checker and pinner) and ends the old ones as they come back idle: a request under way in
an old worker finishes with the old context, every request that takes a worker after the reload gets a new one.
For a moment the pool runs up to twice its size.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection

from karpenter_policy.webhook.handlers import Route, guarded
from karpenter_policy.webhook.review import AdmissionResponse, parse_review

DEFAULT_WORKERS = 2
log = logging.getLogger(__name__)

CacheStats = Callable[[], tuple[int, int, int]]


@dataclass(eq=False, slots=True)
class _Worker:
    pid: int
    connection: Connection
    generation: int
    stats: tuple[int, int, int] = (0, 0, 0)


def _serve(connection: Connection, routes: Mapping[str, Route], stats: CacheStats) -> None:
    """The worker's loop: one request in, its response out, until the server's end closes."""
    while True:
        try:
            path, _, body = connection.recv_bytes().partition(b"\n")
        except (EOFError, OSError):
            return
        response = guarded(routes[path.decode()], parse_review(body))
        connection.send_bytes(pickle.dumps((response, stats()), protocol=pickle.HIGHEST_PROTOCOL))


def _fork(routes: Mapping[str, Route], stats: CacheStats, generation: int) -> _Worker:
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            gc.freeze()
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
            keep = theirs.fileno()
            os.closerange(3, keep)
            os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
            _serve(Connection(theirs.detach()), routes, stats)
        except BaseException:  # noqa: BLE001 - nothing may escape into the server's code in this process
            log.exception("webhook worker %d failed", os.getpid())
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    return _Worker(pid, Connection(ours.detach()), generation)


class WorkerPool:
    """`size` worker processes running `routes`; `run` answers within a deadline or returns None."""

    def __init__(
        self,
        routes: Mapping[str, Route],
        size: int = DEFAULT_WORKERS,
        stats: CacheStats = lambda: (0, 0, 0),
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.routes, self.size, self._stats, self._on_restart = routes, size, stats, on_restart
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._workers: set[_Worker] = set()
        self._retired = (0, 0)  # hits and misses of workers that were replaced
        self._lock = threading.Lock()
        self._stopped = False
        self.generation = 0
        self.restarts = 0

    def start(self) -> None:
        for _ in range(self.size):
            self._add()

    def _add(self) -> None:
        with self._lock:
            if self._stopped:
                return
            worker = _fork(self.routes, self._stats, self.generation)
            self._workers.add(worker)
        self._idle.put(worker)

    def reload(self, routes: Mapping[str, Route], stats: CacheStats) -> None:
        """Serve `routes` from now on: `size` new workers at once, the old ones ended as they come back idle."""
        with self._lock:
            if self._stopped:
                return
            self.routes, self._stats = routes, stats
            self.generation += 1
        for _ in range(self.size):
            self._add()
        idle: list[_Worker] = []
        while True:
            try:
                idle.append(self._idle.get_nowait())
            except queue.Empty:
                break
        for worker in idle:
            if worker.generation == self.generation:
                self._idle.put(worker)
            else:
                self._retire(worker, replace=False)

    def _take(self, deadline: float) -> _Worker | None:
        """An idle worker of the current generation (older ones met on the way are ended), or None at the
        deadline."""
        while True:
            try:
                worker = self._idle.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                return None
            if worker.generation == self.generation:
                return worker
            self._retire(worker, replace=False)

    def run(self, path: str, body: bytes, deadline: float) -> AdmissionResponse | None:
        """The response of `routes[path]` to the review in `body` (well-formed: `review.parse_review` accepted
        it), or None when it is not ready by `deadline` (monotonic)."""
        worker = self._take(deadline)
        if worker is None:
            return None
        try:
            worker.connection.send_bytes(path.encode() + b"\n" + body)
            if worker.connection.poll(max(deadline - time.monotonic(), 0.0)):
                response, worker.stats = pickle.loads(worker.connection.recv_bytes())
                if worker.generation == self.generation:
                    self._idle.put(worker)
                else:  # the context was reloaded while it worked
                    self._retire(worker, replace=False)
                return response  # type: ignore[no-any-return]
            log.warning("webhook worker %d did not answer %s by its deadline: replaced", worker.pid, path)
        except (EOFError, OSError):  # it died (out of memory?)
            log.error("webhook worker %d ended while serving %s: replaced", worker.pid, path)
        except BaseException:
            self._retire(worker)
            raise
        self._retire(worker)
        return None

    def _retire(self, worker: _Worker, replace: bool = True) -> None:
        """End `worker` in the background; fork its replacement when `replace` and it is of the current
        generation (a worker that failed or missed its deadline, not one a reload made old)."""
        threading.Thread(target=self._replace, args=(worker, replace), name="worker-replace", daemon=True).start()

    def _replace(self, worker: _Worker, replace: bool) -> None:
        self._end(worker)
        with self._lock:
            self._workers.discard(worker)
            self._retired = (self._retired[0] + worker.stats[0], self._retired[1] + worker.stats[1])
            replace = replace and worker.generation == self.generation
            if replace:
                self.restarts += 1
        if replace:
            if self._on_restart is not None:
                self._on_restart()
            self._add()

    @staticmethod
    def _end(worker: _Worker) -> None:
        try:
            os.kill(worker.pid, signal.SIGKILL)
            os.waitpid(worker.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        worker.connection.close()

    def __len__(self) -> int:
        """Worker processes running (of every generation: for a moment after a reload, up to twice `size`)."""
        with self._lock:
            return len(self._workers)

    def cache_stats(self) -> tuple[int, int, int]:
        """Solver cache (hits, misses, entries) over every worker, the replaced ones' hits and misses included."""
        with self._lock:
            stats = [w.stats for w in self._workers]
            hits, misses = self._retired
        return hits + sum(s[0] for s in stats), misses + sum(s[1] for s in stats), sum(s[2] for s in stats)

    def stop(self) -> None:
        """End every worker (a request still running in one is cut off: call after the server has drained)."""
        with self._lock:
            self._stopped = True
            workers = list(self._workers)
            self._workers.clear()
        for worker in workers:
            self._end(worker)
