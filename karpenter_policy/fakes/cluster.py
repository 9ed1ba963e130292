"""``MemoryCluster``: a :class:`~karpenter_policy.kube.cluster.Cluster` held in memory, for tests and
simulation, with the API server's semantics.

One resourceVersion counter spans every kind (as etcd's revision does) and increases on each write. Each
change is kept in a bounded history: a watch replays the changes after its resourceVersion, and one from
a version older than the window (or than a :meth:`MemoryCluster.compact`) raises ``Gone``. Deletion honours
finalizers (``deletionTimestamp`` first, removal once the last finalizer goes); Binding, Eviction (with
PodDisruptionBudgets), Events and Leases behave as on a real cluster. Thread-safe: one lock guards the
state, and watchers wait on its condition. Pods are deleted at once (there is no kubelet to honour a
grace period); create keeps the status it is given so tests can seed running pods and ready nodes. A NodePool's and an
EC2NodeClass's ``metadata.generation`` is counted as the API server counts it. Calls answer
at once: a ``timeout`` is accepted and has nothing to bound. A test sees the writes made to it as they happen
(:meth:`MemoryCluster.observe`: each create, update, patch, delete, bind and eviction, with its answer), to record
them or to act in the middle of a controller's pass.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import datetime
import hashlib
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from karpenter_policy.kube import disruption, objects, shape
from karpenter_policy.kube.cluster import (
    DEFAULT_EVENT_SOURCE,
    DEFAULT_WATCH_TIMEOUT,
    EventSeverity,
    ObjectList,
    WatchEvent,
    WatchStream,
)
from karpenter_policy.kube.errors import (
    AlreadyExists,
    ClusterError,
    Conflict,
    Gone,
    Invalid,
    Malformed,
    NotFound,
    error_for_status,
)
from karpenter_policy.kube.events import EventRecorder
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.patches import PatchType, apply_patch
from karpenter_policy.kube.selectors import label_selector_matches, parse_field_selector, parse_label_selector

DEFAULT_HISTORY_WINDOW = 10_000
"""Changes a watch can replay; etcd keeps about five minutes of them on a real cluster."""

_UID_NAMESPACE = uuid.UUID("6f0c1a52-6f1b-4c61-9a3c-7d3f8e1a2b4c")
_Key = tuple[str | None, str]


@dataclass(frozen=True, slots=True)
class ClusterCall:
    """A write made to the cluster and its answer: `verb` (create, update, patch, delete, bind, evict), the kind,
    namespace and name of the object, and the error it answered (None: done)."""

    verb: str
    kind: Kind
    namespace: str | None
    name: str
    error: ClusterError | None = None

    @property
    def allowed(self) -> bool:
        """Whether the call was done (an eviction: the pod was evicted, not refused by a budget)."""
        return self.error is None


Observer = Callable[[ClusterCall], None]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class _Change:
    version: int
    kind: Kind
    type: str  # ADDED, MODIFIED, DELETED
    object: Obj
    previous: Obj | None  # the state before a MODIFIED (selectors turn it into ADDED/DELETED)


class MemoryCluster:
    """An in-memory cluster. ``clock`` stamps creation, deletion and event times (inject it to replay)."""

    #: A watch with a timeout of 0 returns the changes after its resourceVersion at once (step-driven feeds).
    drains_watches = True

    def __init__(
        self, history_window: int = DEFAULT_HISTORY_WINDOW, clock: Callable[[], datetime.datetime] = _utc_now
    ) -> None:
        self._changed = threading.Condition(threading.RLock())
        self._objects: dict[Kind, dict[_Key, Obj]] = {}
        self._version = 1  # as etcd's revision, never 0: a watch from "0" means "from the current state"
        self._history: list[_Change] = []
        self._forgotten = 0  # changes at or below this version are no longer replayable
        self._window = history_window
        self._clock = clock
        self._recorder = EventRecorder(self, clock)
        self._observers: list[Observer] = []
        self._observing = threading.local()  # the call being observed on this thread (its nested calls are not)

    def observe(self, observer: Observer) -> Callable[[], None]:
        """From now on `observer` is told of each write made (:class:`ClusterCall`), once done or refused, outside
        the cluster's lock; writes made by an observer, and those a write makes itself (an eviction deleting its
        pod), are not told. The function that stops it."""
        with self._changed:
            self._observers.append(observer)

        def stop() -> None:
            with self._changed:
                if observer in self._observers:
                    self._observers.remove(observer)

        return stop

    @contextlib.contextmanager
    def _observed(self, verb: str, kind: Kind, namespace: str | None, name: str) -> Iterator[None]:
        """Tell the observers of the call made inside (unless it is nested in one already being told)."""
        if not self._observers or getattr(self._observing, "active", False):
            yield
            return
        self._observing.active = True
        error: ClusterError | None = None
        try:
            yield
        except ClusterError as refused:
            error = refused
            raise
        finally:
            try:
                call = ClusterCall(verb, kind, namespace if kind.namespaced else None, name, error)
                with self._changed:
                    observers = list(self._observers)
                for observer in observers:
                    observer(call)
            finally:
                self._observing.active = False

    @contextlib.contextmanager
    def stamping(self, clock: Callable[[], datetime.datetime]) -> Iterator[None]:
        """Writes inside the block are stamped by `clock` (a test backdates the objects it creates)."""
        with self._changed:
            previous, self._clock = self._clock, clock
        try:
            yield
        finally:
            with self._changed:
                self._clock = previous

    # -- reading -------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The cluster's current resourceVersion (one counter over every kind, as etcd's revision)."""
        with self._changed:
            return str(self._version)

    def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """The objects of `kind` the selectors match (copies, by namespace and name), with the resourceVersion a watch
        continues from."""
        matches = _Filter(kind, namespace, label_selector, field_selector)
        with self._changed:
            items = [copy.deepcopy(obj) for obj in self._store(kind).values() if matches(obj)]
            version = str(self._version)
        return ObjectList(sorted(items, key=_sort_key), version)

    def get(self, kind: Kind, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Obj | None:
        """A copy of the object, None when there is none."""
        with self._changed:
            obj = self._store(kind).get(self._key(kind, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: float = DEFAULT_WATCH_TIMEOUT,
        bookmarks: bool = False,
    ) -> WatchStream:
        """The changes after `resource_version` (from the current state when it is empty or "0"); `Gone` when that
        version is no longer replayable."""
        matches = _Filter(kind, namespace, label_selector, field_selector)
        with self._changed:
            if resource_version in ("", "0"):
                current = [obj for obj in self._store(kind).values() if matches(obj)]
                initial = [WatchEvent("ADDED", copy.deepcopy(obj)) for obj in sorted(current, key=_sort_key)]
                start = self._version
            else:
                initial, start = [], _parse_version(resource_version)
                if start < self._forgotten:
                    raise Gone(f"too old resource version: {start} ({self._forgotten})", reason="Expired")
        return _MemoryWatch(self, matches, initial, start, timeout_seconds, bookmarks)

    # -- writing -------------------------------------------------------------------------------------

    def create(self, kind: Kind, obj: Obj, *, timeout: float | None = None) -> Obj:
        """Store a new object (uid, creationTimestamp and resourceVersion set; a name from generateName);
        `AlreadyExists` when the name is taken."""
        with self._observed("create", kind, objects.namespace(obj) or "default", objects.name(obj)):
            new = objects.with_kind(kind, copy.deepcopy(obj))
            meta = new.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise Invalid(f"{kind.kind}: metadata is not an object")
            if kind.namespaced:
                meta["namespace"] = meta.get("namespace") or "default"
            else:
                meta.pop("namespace", None)
            with self._changed:
                if not meta.get("name"):
                    if not meta.get("generateName"):
                        raise Invalid(f"{kind.kind}: metadata.name or metadata.generateName is required")
                    meta["name"] = self._generate_name(kind, meta.get("namespace"), meta["generateName"])
                _check_writable(kind, new)
                key = self._key(kind, meta.get("namespace"), meta["name"])
                if key in self._store(kind):
                    raise AlreadyExists(f'{kind.plural} "{meta["name"]}" already exists', reason="AlreadyExists")
                version = self._next_version()
                meta.pop("deletionTimestamp", None)
                meta["uid"] = str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{key}/{version}"))
                meta["creationTimestamp"] = objects.format_time(self._clock())
                meta["resourceVersion"] = str(version)
                if kind in _GENERATIONS:
                    meta["generation"] = 1
                self._store(kind)[key] = new
                self._record(_Change(version, kind, "ADDED", copy.deepcopy(new), None))
                return copy.deepcopy(new)

    def update(self, kind: Kind, obj: Obj, subresource: str | None = None, *, timeout: float | None = None) -> Obj:
        """Replace the object (or its status, `subresource="status"`), as the API does: `Conflict` when its
        resourceVersion is not the current one."""
        with self._observed("update", kind, objects.namespace(obj), objects.name(obj)), self._changed:
            current = self._existing(kind, objects.namespace(obj), objects.name(obj))
            self._check_version(kind, current, objects.resource_version(obj))
            return self._write(kind, current, copy.deepcopy(obj), subresource)

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        """Apply a merge, strategic-merge or JSON patch to the object (or its status) and store the result."""
        with self._observed("patch", kind, namespace, name), self._changed:
            current = self._existing(kind, namespace, name)
            patched = apply_patch(current, patch, patch_type)
            self._check_version(kind, current, objects.resource_version(patched))
            return self._write(kind, current, patched, subresource)

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        """Delete the object: removed at once without finalizers, else marked with a deletionTimestamp until the last
        finalizer goes."""
        with self._observed("delete", kind, namespace, name), self._changed:
            current = self._existing(kind, namespace, name)
            if not objects.finalizers(current):
                self._remove(kind, current)
            elif not objects.is_deleting(current):
                deleting = copy.deepcopy(current)
                deleting["metadata"]["deletionTimestamp"] = objects.format_time(self._clock())
                if grace_period_seconds is not None:
                    deleting["metadata"]["deletionGracePeriodSeconds"] = grace_period_seconds
                self._replace(kind, current, deleting)

    def bind(self, namespace: str, pod_name: str, node_name: str) -> None:
        """Bind a pending pod to a node (the Binding subresource): `Conflict` when it is bound already or being
        deleted."""
        with self._observed("bind", objects.POD, namespace, pod_name), self._changed:
            pod = self._existing(objects.POD, namespace, pod_name)
            bound_to = (pod.get("spec") or {}).get("nodeName")
            if bound_to:
                raise Conflict(f'pod {pod_name} is already assigned to node "{bound_to}"', reason="Conflict")
            if objects.is_deleting(pod):
                raise Conflict(f"pod {pod_name} is being deleted, cannot be assigned to a host", reason="Conflict")
            bound = copy.deepcopy(pod)
            bound.setdefault("spec", {})["nodeName"] = node_name
            status = bound.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            now = objects.format_time(self._clock())
            status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}]
            self._replace(objects.POD, pod, bound)

    def evict(self, namespace: str, pod_name: str) -> None:
        """Evict a pod (the Eviction subresource): 429 TooManyRequests when a PodDisruptionBudget does not allow it,
        else the pod is deleted."""
        with self._observed("evict", objects.POD, namespace, pod_name), self._changed:
            pod = self._existing(objects.POD, namespace, pod_name)
            pdbs = [pdb for (ns, _), pdb in self._store(objects.POD_DISRUPTION_BUDGET).items() if ns == namespace]
            pods = [other for (ns, _), other in self._store(objects.POD).items() if ns == namespace]
            verdict = disruption.eviction_verdict(pod, pdbs, pods)
            if not verdict.allowed:
                raise error_for_status(verdict.status, verdict.message, "TooManyRequests")
            self.delete(objects.POD, pod_name, namespace)

    def record_event(
        self,
        involved: Obj,
        reason: str,
        message: str,
        type: EventSeverity = "Normal",
        source: str = DEFAULT_EVENT_SOURCE,
    ) -> Obj:
        """Record a Kubernetes Event about `involved` through the event recorder, as on a real cluster."""
        return self._recorder.record(involved, reason, message, type, source)

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: watches from any earlier version get Gone."""
        with self._changed:
            self._history.clear()
            self._forgotten = self._version
            self._changed.notify_all()

    def trim_history(self, keep: int) -> None:
        """Forget all but the last ``keep`` changes now (as the batch trim of a full history does): two moments
        trimmed alike hold as many changes, so a memory measurement compares them without the history's swing
        between its window and twice that. A watch from a forgotten version gets Gone, as after compaction."""
        with self._changed:
            if len(self._history) > keep:
                self._forgotten = self._history[-keep - 1].version
                del self._history[: len(self._history) - keep]
            self._changed.notify_all()

    # -- internals (called with the lock held) ---------------------------------------------------------

    def _store(self, kind: Kind) -> dict[_Key, Obj]:
        return self._objects.setdefault(kind, {})

    @staticmethod
    def _key(kind: Kind, namespace: str | None, name: str) -> _Key:
        return ((namespace or "default") if kind.namespaced else None, name)

    def _existing(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._store(kind).get(self._key(kind, namespace, name))
        if obj is None:
            raise NotFound(f'{kind.plural} "{name}" not found', reason="NotFound")
        return obj

    @staticmethod
    def _check_version(kind: Kind, current: Obj, expected: str) -> None:
        if expected and expected != objects.resource_version(current):
            raise Conflict(
                f'Operation cannot be fulfilled on {kind.plural} "{objects.name(current)}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                reason="Conflict",
            )

    def _write(self, kind: Kind, current: Obj, proposed: Obj, subresource: str | None) -> Obj:
        if subresource not in (None, "status") or (subresource == "status" and not kind.status_subresource):
            raise NotFound(f"{kind.plural} has no subresource {subresource!r}", reason="NotFound")
        new = objects.with_kind(kind, objects.written_part(kind, subresource, current, proposed))
        if not isinstance(new.get("metadata"), dict):
            raise Invalid(f"{kind.kind}: metadata is not an object")
        meta = new["metadata"]
        for immutable in _SERVER_OWNED_METADATA:
            if immutable in current["metadata"]:
                meta[immutable] = current["metadata"][immutable]
            else:
                meta.pop(immutable, None)
        if kind in _GENERATIONS and _spec_part(new) != _spec_part(current):
            meta["generation"] = int(meta.get("generation") or 0) + 1
        _check_writable(kind, new)
        if objects.is_deleting(new) and not objects.finalizers(new):
            self._remove(kind, new)
            return copy.deepcopy(new)
        return self._replace(kind, current, new)

    def _replace(self, kind: Kind, current: Obj, new: Obj) -> Obj:
        version = self._next_version()
        new["metadata"]["resourceVersion"] = str(version)
        self._store(kind)[self._key(kind, objects.namespace(new), objects.name(new))] = new
        self._record(_Change(version, kind, "MODIFIED", copy.deepcopy(new), copy.deepcopy(current)))
        return copy.deepcopy(new)

    def _remove(self, kind: Kind, last: Obj) -> None:
        version = self._next_version()
        gone = copy.deepcopy(last)
        gone["metadata"]["resourceVersion"] = str(version)
        del self._store(kind)[self._key(kind, objects.namespace(last), objects.name(last))]
        self._record(_Change(version, kind, "DELETED", gone, None))

    def _next_version(self) -> int:
        self._version += 1
        return self._version

    def _record(self, change: _Change) -> None:
        self._history.append(change)
        if len(self._history) > 2 * self._window:  # trim in batches: amortised O(1) per change
            dropped = self._history[: -self._window]
            self._forgotten = dropped[-1].version
            del self._history[: -self._window]
        self._changed.notify_all()

    def _generate_name(self, kind: Kind, namespace: str | None, prefix: str) -> str:
        for attempt in range(100):
            digest = hashlib.sha256(f"{prefix}/{self._version}/{attempt}".encode()).hexdigest()
            suffix = "".join(_NAME_ALPHABET[int(digest[i : i + 2], 16) % len(_NAME_ALPHABET)] for i in range(0, 10, 2))
            name = prefix + suffix
            if self._key(kind, namespace, name) not in self._store(kind):
                return name
        raise AlreadyExists(f"no free name with prefix {prefix!r}", reason="AlreadyExists")

    def _changes_after(self, version: int) -> Iterator[_Change]:
        """The changes after ``version`` (iterate with the lock held); raises Gone if some were forgotten."""
        if version < self._forgotten:
            raise Gone(f"too old resource version: {version} ({self._forgotten})", reason="Expired")
        start = bisect.bisect_right(self._history, version, key=lambda change: change.version)
        return itertools.islice(self._history, start, None)


_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_OWNED_METADATA = (
    "name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"
)  # what the API server draws generateName suffixes from
#: Kinds whose ``metadata.generation`` the API server counts: 1 at creation, one more at each change of anything
#: but their metadata and status (Karpenter's NodePool and EC2NodeClass, whose `NodeRegistrationHealthy` compares
#: generations: ``reconcile.claims.nodepoolstatus``).
_GENERATIONS = frozenset({objects.NODE_POOL, objects.EC2_NODE_CLASS})


def _spec_part(obj: Obj) -> dict[str, Any]:
    """What a change of bumps the generation: all but metadata and status."""
    return {key: value for key, value in obj.items() if key not in ("metadata", "status", "apiVersion", "kind")}


def _check_writable(kind: Kind, obj: Obj) -> None:
    """Refuse (422, as the API server does) an object whose metadata a reader could not trust, so that this
    cluster never hands out what :mod:`~karpenter_policy.kube.shape` would call malformed."""
    try:
        shape.check_object(obj, kind.plural)
    except Malformed as error:
        raise Invalid(error.message) from None


def _parse_version(resource_version: str) -> int:
    try:
        return int(resource_version)
    except ValueError:
        raise Invalid(f"invalid resourceVersion {resource_version!r}") from None


def _sort_key(obj: Obj) -> tuple[str, str]:
    return objects.namespace(obj) or "", objects.name(obj)


class _Filter:
    """The namespace, label and field selectors of a list or watch (parsed once: bad ones raise early)."""

    def __init__(self, kind: Kind, namespace: str | None, label_selector: str | None, field_selector: str | None):
        parse_label_selector(label_selector)
        self.kind = kind
        self._namespace = namespace
        self._labels = label_selector
        self._fields = parse_field_selector(kind.kind, field_selector)

    def __call__(self, obj: Obj) -> bool:
        if self._namespace is not None and objects.namespace(obj) != self._namespace:
            return False
        return label_selector_matches(self._labels, objects.labels(obj)) and self._fields(obj)


class _MemoryWatch(Iterator[WatchEvent]):
    def __init__(
        self,
        cluster: MemoryCluster,
        matches: _Filter,
        initial: list[WatchEvent],
        start: int,
        timeout_seconds: float,
        bookmarks: bool,
    ) -> None:
        self._cluster = cluster
        self._matches = matches
        self._pending = list(initial)
        self._position = start
        self._deadline = time.monotonic() + timeout_seconds
        self._bookmarks = bookmarks
        self._closed = False

    def __iter__(self) -> _MemoryWatch:
        return self

    def __enter__(self) -> _MemoryWatch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._cluster._changed:
            self._closed = True
            self._cluster._changed.notify_all()

    def __next__(self) -> WatchEvent:
        lock = self._cluster._changed
        with lock:
            while True:
                if self._closed:
                    raise StopIteration
                if self._pending:
                    return self._pending.pop(0)
                for change in self._cluster._changes_after(self._position):
                    self._position = change.version
                    event = self._translate(change)
                    if event is not None:
                        return event
                newest = self._cluster._version
                self._position = newest
                remaining = self._deadline - time.monotonic()
                if remaining <= 0:
                    self._closed = True
                    if self._bookmarks:
                        return WatchEvent("BOOKMARK", _bookmark(self._matches.kind, newest))
                    raise StopIteration
                lock.wait(remaining)

    def _translate(self, change: _Change) -> WatchEvent | None:
        if change.kind != self._matches.kind:
            return None
        now = self._matches(change.object)
        before = change.previous is not None and self._matches(change.previous)
        if change.type == "MODIFIED" and before != now:
            return WatchEvent("ADDED" if now else "DELETED", copy.deepcopy(change.object))
        if now:
            return WatchEvent(change.type, copy.deepcopy(change.object))  # type: ignore[arg-type]
        return None


def _bookmark(kind: Kind, version: int) -> Obj:
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"resourceVersion": str(version)}}

