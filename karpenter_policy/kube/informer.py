"""``Informer``: a local cache of one kind kept up to date from list + watch, on any Cluster.

A background thread lists, then watches from the list's resourceVersion (with bookmarks, so a quiet
watch still advances). When the server ends a watch (its timeout, a dropped connection) the informer
watches again from the last version it saw; on ``Gone`` it lists again and turns the difference with its
cache into ADDED/MODIFIED/DELETED callbacks, so a consumer misses no deletion; on any other error it
waits an exponential backoff with jitter before trying again. Consumers read the cache (:meth:`get`,
:meth:`items`), wait on :meth:`wait_for_change` or :meth:`wait_until`, or pass ``on_event``.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from karpenter_policy.kube import objects
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.cluster import DEFAULT_WATCH_TIMEOUT, Cluster, ObjectList, WatchEvent, WatchStream
from karpenter_policy.kube.errors import ClusterError, Gone
from karpenter_policy.kube.objects import Kind, Obj

log = logging.getLogger(__name__)

_Key = tuple[str | None, str]


@dataclass
class InformerStats:
    """How often the informer listed, watched, met Gone and failed (for metrics and tests)."""

    lists: int = 0
    watches: int = 0
    gone: int = 0
    errors: int = 0


class Informer:
    def __init__(
        self,
        cluster: Cluster,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_event: Callable[[WatchEvent], None] | None = None,
        watch_timeout: float = DEFAULT_WATCH_TIMEOUT,
        backoff: Backoff | None = None,
    ) -> None:
        self.kind = kind
        self._cluster = cluster
        self._selection = (namespace, label_selector, field_selector)
        self._on_event = on_event
        self._watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self._changed = threading.Condition()
        self._cache: dict[_Key, Obj] = {}
        self._resource_version = ""
        self._version = 0
        self._stopping = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self.synced = threading.Event()
        self.stats = InformerStats()
        self.last_error: ClusterError | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind.plural}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching (closing the open watch at once) and wait for the thread to end."""
        self._stopping.set()
        with self._changed:
            stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Informer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- reading the cache ---------------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        """A cached object; a namespaced kind given no namespace looks in "default", as Cluster.get does."""
        with self._changed:
            obj = self._cache.get(((namespace or "default") if self.kind.namespaced else None, name))
            return copy.deepcopy(obj) if obj is not None else None

    def items(self) -> list[Obj]:
        """A snapshot of the cache, sorted by namespace and name."""
        with self._changed:
            snapshot = [copy.deepcopy(obj) for obj in self._cache.values()]
        return sorted(snapshot, key=lambda obj: (objects.namespace(obj) or "", objects.name(obj)))

    @property
    def resource_version(self) -> str:
        with self._changed:
            return self._resource_version

    @property
    def version(self) -> int:
        """Increases each time the cache changes; pass it to :meth:`wait_for_change`."""
        with self._changed:
            return self._version

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.synced.wait(timeout)

    def wait_for_change(self, after: int, timeout: float | None = None) -> int:
        """Block until the cache changed since ``after`` (a :attr:`version`); returns the current version."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != after or self._stopping.is_set(), timeout)
            return self._version

    def wait_until(self, predicate: Callable[[list[Obj]], bool], timeout: float) -> bool:
        """Block until ``predicate(items)`` holds; False if it still does not after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            version = self.version
            if predicate(self.items()):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._stopping.is_set():
                return False
            self.wait_for_change(version, remaining)

    # -- the loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        namespace, label_selector, field_selector = self._selection
        must_list = True
        while not self._stopping.is_set():
            try:
                if must_list:
                    self.stats.lists += 1
                    self._replace(self._cluster.list(self.kind, namespace, label_selector, field_selector))
                    must_list = False
                self.stats.watches += 1
                stream = self._cluster.watch(
                    self.kind, self.resource_version, namespace, label_selector=label_selector,
                    field_selector=field_selector, timeout_seconds=self._watch_timeout, bookmarks=True,
                )
                with self._changed:
                    self._stream = stream
                if self._stopping.is_set():
                    stream.close()
                with stream:
                    for event in stream:
                        self._apply(event)
                self._backoff.reset()
            except Gone:
                self.stats.gone += 1
                must_list = True  # the history we need is gone: relist at once, as client-go does
            except ClusterError as error:
                self.stats.errors += 1
                self.last_error = error
                delay = self._backoff.next_delay()
                log.warning("%s informer: %s; retrying in %.1f s", self.kind.plural, error, delay)
                self._stopping.wait(delay)
            finally:
                with self._changed:
                    self._stream = None
        with self._changed:
            self._changed.notify_all()

    def _replace(self, snapshot: ObjectList) -> None:
        fresh = {self._key(obj): obj for obj in snapshot.items}
        with self._changed:
            previous = self._cache
            events = [WatchEvent("DELETED", obj) for key, obj in previous.items() if key not in fresh]
            for key, obj in fresh.items():
                if key not in previous:
                    events.append(WatchEvent("ADDED", obj))
                elif objects.resource_version(previous[key]) != objects.resource_version(obj):
                    events.append(WatchEvent("MODIFIED", obj))
            self._cache = fresh
            self._resource_version = snapshot.resource_version
            self._version += 1
            self._changed.notify_all()
        self.synced.set()
        self._backoff.reset()
        for event in events:
            self._notify(event)

    def _apply(self, event: WatchEvent) -> None:
        with self._changed:
            if event.type != "BOOKMARK":
                if event.type == "DELETED":
                    self._cache.pop(self._key(event.object), None)
                else:
                    self._cache[self._key(event.object)] = event.object
                self._version += 1
            self._resource_version = event.resource_version or self._resource_version
            self._changed.notify_all()
        if event.type != "BOOKMARK":
            self._notify(event)

    def _key(self, obj: Obj) -> _Key:
        return (objects.namespace(obj) if self.kind.namespaced else None, objects.name(obj))

    def _notify(self, event: WatchEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # a consumer's bug must not stop the cache from following the cluster
            log.exception("%s informer: on_event failed for %s", self.kind.plural, event.type)
