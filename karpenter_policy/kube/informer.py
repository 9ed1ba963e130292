"""``Informer``: a local cache of one kind kept up to date from list + watch, on any Cluster.

A background thread lists, then watches from the list's resourceVersion (with bookmarks, so a quiet
watch still advances). When the server ends a watch (its timeout, a dropped connection) the informer
watches again from the last version it saw; on ``Gone`` it lists again and turns the difference with its
cache into ADDED/MODIFIED/DELETED callbacks, so a consumer misses no deletion. As client-go's reflector, it
backs off (exponentially, with jitter, up to a ceiling) on failures: an unavailable server, a malformed
answer (which also makes it list again: a stream that lied once cannot be trusted to have skipped nothing),
a watch that ends within a second with nothing in it, and 410s that repeat (the first relists at once). The
thread survives anything, a bug of its own included, and says how it fares: :meth:`Informer.health` and
:attr:`Informer.stats`. Consumers read the cache (:meth:`get`, :meth:`items`, or without copies
:meth:`get_shared`, :meth:`items_shared`), wait on :meth:`wait_for_change` or :meth:`wait_until`, or pass
``on_event`` and ``on_sync``. Every object is trimmed before it is cached: its ``managedFields`` dropped, then
whatever ``transform`` drops (as controller-runtime's cache transforms), so the cache holds only what is read.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from karpenter_policy.kube import objects, shape
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.cluster import DEFAULT_WATCH_TIMEOUT, Cluster, ObjectList, WatchEvent, WatchStream
from karpenter_policy.kube.errors import ClusterError, Gone, Malformed, Unavailable
from karpenter_policy.kube.objects import Kind, Obj

log = logging.getLogger(__name__)

_Key = tuple[str | None, str]

MIN_HEALTHY_WATCH = 1.0
"""Seconds a watch must stay open (or deliver an event) to count as working: client-go's "very short watch"
bound. A shorter, empty one is a failure (backed off), and only a working watch ends a run of failures."""

BACKOFF_RESET = 120.0
"""Seconds without a failure after which the next one waits the initial delay again (client-go's reset)."""

LOG_INTERVAL = 300.0
"""Each kind of failure is logged once, then again at most this often (with how many happened since)."""


@dataclass
class InformerStats:
    """Counters since the informer started (for metrics and tests); only the informer's thread writes them.

    ``errors`` counts every failed list or watch except 410 Gone (``gone``): unavailable, malformed (also
    counted by problem in ``malformed``, see :data:`karpenter_policy.kube.shape.PROBLEMS`), very short
    watches (``short_watches``) and unexpected exceptions (``internal``)."""

    lists: int = 0
    watches: int = 0
    gone: int = 0
    errors: int = 0
    short_watches: int = 0
    internal: int = 0
    malformed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class InformerHealth:
    """How an informer fares, as of :attr:`at` (``time.monotonic()``): what ``/healthz`` and ``/readyz`` read.

    - ``alive``: its thread runs (False before ``start()`` and after ``stop()``).
    - ``synced``: it has listed successfully at least once (its cache is usable).
    - ``ok``: no failure since the watch last worked (one that delivered an event or stayed open
      :data:`MIN_HEALTHY_WATCH` seconds); a successful list alone does not end a run of failures, so a
      server that lists fine but breaks every watch stays not ok.
    - ``consecutive_failures`` and ``failing_since`` (monotonic): that run of failures (0 and None when ok).
    - ``last_list_at`` (monotonic): when the last successful list completed (None: never).
    - ``last_error``: the most recent failure, even if it has since recovered.
    - ``malformed``: malformed answers so far, by problem; ``stats``: a copy of all the counters.
    """

    kind: str
    at: float
    alive: bool
    synced: bool
    ok: bool
    consecutive_failures: int
    failing_since: float | None
    last_list_at: float | None
    last_error: str | None
    malformed: Mapping[str, int]
    stats: InformerStats

    def failing_for(self) -> float:
        """Seconds the current run of failures has lasted (0 when ok)."""
        return 0.0 if self.failing_since is None else self.at - self.failing_since


@dataclass(frozen=True)
class Synced:
    """A list replaced the cache (``on_sync``): the first since start (``initial``) or a relist, with how
    many objects it holds and how many ADDED/MODIFIED/DELETED events it delivered just before."""

    initial: bool
    resource_version: str
    items: int
    added: int
    modified: int
    deleted: int


def _strip(obj: Obj) -> None:
    """Drop what no reader of the cache looks at before the object is kept: its ``metadata.managedFields`` (the
    server-side apply bookkeeping, a third of a typical pod's decoded size — 29 → 18 KiB — and as many dicts and
    key strings again per object), as controller-runtime's ``TransformStripManagedFields`` (pkg/cache/cache.go)
    does for a cache. The object is the informer's own (decoded or copied for it) and ``shape`` checked its
    metadata is a map. An update built from a cached object leaves the server's managedFields as they are (an
    absent field is not a change)."""
    obj["metadata"].pop("managedFields", None)


class _ShortWatch(Unavailable):
    """The server ended a watch within MIN_HEALTHY_WATCH seconds without sending anything."""


class Informer:
    """See the module docstring. ``on_event`` sees every change (those of each list included, as synthetic
    events); ``on_sync`` is told each time a list has replaced the cache. Both run on the informer's thread,
    one call at a time, in order, after the cache already shows the change; an exception in them is logged
    and the informer carries on. Objects they get are the cached ones: read-only."""

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
        on_sync: Callable[[Synced], None] | None = None,
        transform: Callable[[Obj], None] | None = None,
    ) -> None:
        self.kind = kind
        self._transform = transform
        self._cluster = cluster
        self._selection = (namespace, label_selector, field_selector)
        self._on_event = on_event
        self._on_sync = on_sync
        self._watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self._gone_backoff = Backoff(self._backoff.initial, self._backoff.maximum, self._backoff.factor)
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
        # health (guarded by self._changed)
        self._failures = 0
        self._failing_since: float | None = None
        self._last_failure_at = -BACKOFF_RESET
        self._last_list_at: float | None = None
        self._last_error_text: str | None = None
        self._watch_opened_at: float | None = None
        self._gone_streak = 0
        self._last_gone_at = -BACKOFF_RESET
        self._logged: dict[str, tuple[float, int]] = {}  # what was logged → (when, occurrences since)

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
        """A copy of a cached object; a namespaced kind given no namespace looks in "default", as Cluster.get does."""
        obj = self.get_shared(name, namespace)
        return copy.deepcopy(obj) if obj is not None else None

    def items(self) -> list[Obj]:
        """A copy of the cache, sorted by namespace and name: the caller may change it."""
        snapshot = [copy.deepcopy(obj) for obj in self.items_shared()]
        return sorted(snapshot, key=lambda obj: (objects.namespace(obj) or "", objects.name(obj)))

    def get_shared(self, name: str, namespace: str | None = None) -> Obj | None:
        """The cached object itself, not a copy: read-only for the caller. The informer never changes an
        object it stored (a change replaces it), so what the caller holds stays as it was when read."""
        with self._changed:
            return self._cache.get(((namespace or "default") if self.kind.namespaced else None, name))

    def items_shared(self) -> list[Obj]:
        """The cached objects themselves, in no particular order: read-only for the caller (see :meth:`get_shared`)."""
        with self._changed:
            return list(self._cache.values())

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

    def wait_answered(self, timeout: float | None = None) -> bool:
        """Block until the server has answered: the first list done (synced), or a list or watch failed (refused,
        unreachable …), or the informer stopped; True once synced. What waits for a first list need not wait out its
        timeout when no list can come."""
        with self._changed:
            self._changed.wait_for(
                lambda: self.synced.is_set() or self._failures > 0 or self._stopping.is_set(), timeout
            )
        return self.synced.is_set()

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

    def health(self) -> InformerHealth:
        """How the informer fares now (see :class:`InformerHealth`); cheap, from any thread."""
        with self._changed:
            now = time.monotonic()
            failures, since = self._failures, self._failing_since
            opened = self._watch_opened_at
            if opened is not None and now - opened >= MIN_HEALTHY_WATCH:
                failures, since = 0, None  # the watch open now has proved itself
            stats = copy.deepcopy(self.stats)
            return InformerHealth(
                kind=self.kind.plural,
                at=now,
                alive=self._thread is not None and self._thread.is_alive(),
                synced=self.synced.is_set(),
                ok=failures == 0,
                consecutive_failures=failures,
                failing_since=since,
                last_list_at=self._last_list_at,
                last_error=self._last_error_text,
                malformed=dict(stats.malformed),
                stats=stats,
            )

    # -- the loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        must_list = True
        try:
            while not self._stopping.is_set():
                delay = 0.0
                try:
                    if must_list:
                        self._list()
                        must_list = False
                    self._watch()
                except Gone as error:
                    must_list = True  # the history we need is gone: relist (at once the first time)
                    delay = self._gone(error)
                except Malformed as error:
                    must_list = True  # what the server sent cannot be trusted to have skipped nothing
                    delay = self._failed(error, error.problem, f"malformed answer ({error.problem})")
                except _ShortWatch as error:
                    self.stats.short_watches += 1
                    delay = self._failed(error, "short-watch", "very short watch")
                except ClusterError as error:
                    delay = self._failed(error, type(error).__name__, type(error).__name__)
                except Exception as error:  # a bug (ours or a Cluster's) must not end the informer
                    must_list = True
                    self.stats.internal += 1
                    name = type(error).__name__
                    delay = self._failed(error, f"internal-{name}", f"unexpected {name}")
                if delay > 0:
                    self._stopping.wait(delay)
        finally:
            with self._changed:
                self._stream = None
                self._watch_opened_at = None
                self._changed.notify_all()

    def _list(self) -> None:
        namespace, label_selector, field_selector = self._selection
        self.stats.lists += 1
        snapshot = self._cluster.list(self.kind, namespace, label_selector, field_selector)
        what = f"list {self.kind.plural}"
        if not isinstance(snapshot, ObjectList) or not isinstance(snapshot.items, list):
            raise Malformed(f"{what}: not an ObjectList: {type(snapshot).__name__}", shape.NOT_AN_OBJECT)
        for obj in snapshot.items:
            shape.check_object(obj, what)
            self._own(obj)
        self._replace(snapshot)

    def _watch(self) -> None:
        """One watch, until it ends; raises on failure, _ShortWatch when it ended at once with nothing."""
        namespace, label_selector, field_selector = self._selection
        self.stats.watches += 1
        started = time.monotonic()  # before the request, as client-go: a server timeout of 1 s lasts 1 s
        stream = self._cluster.watch(
            self.kind, self.resource_version, namespace, label_selector=label_selector,
            field_selector=field_selector, timeout_seconds=self._watch_timeout, bookmarks=True,
        )
        with self._changed:
            self._stream = stream
            self._watch_opened_at = time.monotonic()
        if self._stopping.is_set():
            stream.close()
        delivered = 0
        try:
            with stream:
                for event in stream:
                    if self._apply(event):
                        delivered += 1
        except Exception as error:
            worked = delivered > 0 and isinstance(error, ClusterError) and not isinstance(error, Malformed)
            if worked or time.monotonic() - started >= MIN_HEALTHY_WATCH:
                self._working(delivered)
            raise
        finally:
            with self._changed:
                self._stream = None
                self._watch_opened_at = None
        if delivered or time.monotonic() - started >= MIN_HEALTHY_WATCH:
            self._working(delivered)
        elif not self._stopping.is_set():  # a bookmark alone does not make a watch: a server could loop on it
            raise _ShortWatch(f"watch {self.kind.plural}: the server ended it at once, with no change in it")

    def _replace(self, snapshot: ObjectList) -> None:
        """The list becomes the cache, the difference handed to ``on_event``. An object whose resourceVersion did
        not change keeps its cached copy (the one the handlers were given and may keep, as the cluster state's
        records do): caching the list's copy instead left two copies of every unchanged object alive after a
        relist, the handlers' and the cache's — at 100,000 pods, RSS up by hundreds of MiB after each 410. An
        object without a resourceVersion (a server that breaks the API's contract) is taken from the list, as
        nothing says it is unchanged."""
        fresh = {self._key(obj): obj for obj in snapshot.items}
        with self._changed:
            previous = self._cache
            events = [WatchEvent("DELETED", obj) for key, obj in previous.items() if key not in fresh]
            deleted = len(events)
            added = 0
            for key, obj in fresh.items():
                kept = previous.get(key)
                if kept is None:
                    events.append(WatchEvent("ADDED", obj))
                    added += 1
                elif objects.resource_version(kept) != objects.resource_version(obj):
                    events.append(WatchEvent("MODIFIED", obj))
                elif objects.resource_version(obj):  # unchanged: keep the object every handler holds, drop the copy
                    fresh[key] = kept
            self._cache = fresh
            self._resource_version = snapshot.resource_version
            self._version += 1
            self._last_list_at = time.monotonic()
            self._changed.notify_all()
        initial = not self.synced.is_set()
        for event in events:
            self._notify(event)
        on_sync = self._on_sync
        if on_sync is not None:
            synced = Synced(initial, snapshot.resource_version, len(fresh), added, len(events) - added - deleted,
                            deleted)
            self._call(lambda: on_sync(synced), "on_sync")
        # Synced once every handler has seen the list: a state fed by `on_event` is whole when waiters wake.
        self.synced.set()
        with self._changed:
            self._changed.notify_all()  # `wait_answered`

    def _apply(self, event: WatchEvent) -> bool:
        """Apply a watch event to the cache; True if it changed an object (not a BOOKMARK)."""
        shape.check_event(event, f"watch {self.kind.plural}")
        self._own(event.object)
        with self._changed:
            if event.type != "BOOKMARK":
                if event.type == "DELETED":
                    self._cache.pop(self._key(event.object), None)
                else:
                    self._cache[self._key(event.object)] = event.object
                self._version += 1
            self._resource_version = event.resource_version or self._resource_version
            self._changed.notify_all()
        if event.type == "BOOKMARK":
            return False
        self._notify(event)
        return True

    def _own(self, obj: Obj) -> None:
        """Make a checked object the cache's: managedFields dropped, then the consumer's ``transform`` (what it
        never reads dropped too, in place), before anything keeps or sees it."""
        _strip(obj)
        if self._transform is not None:
            try:
                self._transform(obj)
            except Exception as error:  # a consumer's bug keeps the object whole rather than failing the watch
                self._log_limited("transform", logging.ERROR, "%s: the cache's transform failed; the object is kept "
                                  "whole", self.kind.plural, exc_info=error)

    def _key(self, obj: Obj) -> _Key:
        return (objects.namespace(obj) if self.kind.namespaced else None, objects.name(obj))

    def _notify(self, event: WatchEvent) -> None:
        on_event = self._on_event
        if on_event is not None:
            self._call(lambda: on_event(event), f"on_event for {event.type}")

    def _call(self, call: Callable[[], None], what: str) -> None:
        try:
            call()
        except Exception:  # a consumer's bug must not stop the cache from following the cluster
            log.exception("%s informer: %s failed", self.kind.plural, what)

    # -- failures and recovery -----------------------------------------------------------------------

    def _working(self, delivered: int) -> None:
        """A watch worked: the run of failures (if any) is over, and the backoff starts afresh."""
        self._backoff.reset()
        if delivered:
            self._gone_streak = 0
            self._gone_backoff.reset()
        with self._changed:
            failures = self._failures
            self._failures = 0
            self._failing_since = None
        if failures:
            log.info("%s informer: watching again after %d failure(s)", self.kind.plural, failures)

    def _gone(self, error: Gone) -> float:
        """A 410: relist at once the first time; when 410s repeat with no event in between, back off."""
        self.stats.gone += 1
        now = time.monotonic()
        if now - self._last_gone_at > BACKOFF_RESET:
            self._gone_streak = 0
            self._gone_backoff.reset()
        self._last_gone_at = now
        self._gone_streak += 1
        self._record(error, now)
        if self._gone_streak == 1:
            return 0.0
        delay = self._gone_backoff.next_delay()
        self._log_limited("gone", logging.WARNING, "%s informer: 410 Gone %d times in a row; relisting in %.1f s",
                          self.kind.plural, self._gone_streak, delay)
        return delay

    def _failed(self, error: Exception, key: str, what: str) -> float:
        """Count a failure, log it (once per kind of failure, then at most every LOG_INTERVAL), and return
        how long to back off."""
        self.stats.errors += 1
        if isinstance(error, Malformed):
            with self._changed:  # health() copies the stats under this lock
                self.stats.malformed[error.problem] = self.stats.malformed.get(error.problem, 0) + 1
        if isinstance(error, ClusterError):
            self.last_error = error
        now = time.monotonic()
        if now - self._last_failure_at > BACKOFF_RESET:
            self._backoff.reset()
        self._record(error, now)
        delay = self._backoff.next_delay()
        internal = not isinstance(error, ClusterError)
        self._log_limited(
            key, logging.ERROR if internal else logging.WARNING, "%s informer: %s: %s; retrying in %.2f s",
            self.kind.plural, what, error, delay, exc_info=error if internal else None,
        )
        return delay

    def _record(self, error: Exception, now: float) -> None:
        self._last_failure_at = now
        with self._changed:
            self._failures += 1
            if self._failing_since is None:
                self._failing_since = now
            problem = f" ({error.problem})" if isinstance(error, Malformed) else ""
            self._last_error_text = f"{type(error).__name__}{problem}: {error}"
            self._changed.notify_all()  # `wait_answered`

    def _log_limited(self, key: str, level: int, message: str, *args: object,
                     exc_info: BaseException | None = None) -> None:
        now = time.monotonic()
        last = self._logged.get(key)
        if last is not None and now - last[0] < LOG_INTERVAL:
            self._logged[key] = (last[0], last[1] + 1)
            log.debug(message, *args)
            return
        if last is not None and last[1]:
            message += f" ({last[1]} more since last logged)"
        self._logged[key] = (now, 0)
        log.log(level, message, *args, exc_info=exc_info if last is None else None)
