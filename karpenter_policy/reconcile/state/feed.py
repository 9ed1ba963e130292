"""How the cluster state is kept up to date: watch events in, one change at a time.

* :class:`InformerFeed` (the threaded runner, a real API server): informers on pods, nodes, DaemonSets,
  namespaces, NodeClaims, NodePools and EC2NodeClasses call :meth:`ClusterState.apply` from their own threads for
  every event — the initial list and every relist arrive as ADDED/MODIFIED/DELETED events too — so the state follows
  the cluster without the controllers asking. :meth:`InformerFeed.health` says whether the state can be trusted
  (every informer synced, none failing). A pod is trimmed of what no reader looks at (`pods.trim_pod`) before the
  informer caches it; the step-driven feeds below trim theirs the same way.
* :class:`WatchFeed` (step-driven: tests and simulations, on a cluster that answers a watch at once — the
  in-memory one): :meth:`sync` drains each kind's changes since the last version it saw; a history that is gone
  is listed again. Deterministic: changes are applied in the cluster's order, when the caller says.
* :class:`ListFeed` (step-driven, any cluster): :meth:`sync` lists each kind and applies the difference.

The PersistentVolumeClaims, PersistentVolumes and StorageClasses (what provisioning and disruption read of a pod's
volumes) are read only once a pod with a claim, pending or on a node of ours, has been seen
(`ClusterState.wants_volumes`): the informers start then, the step-driven feeds list them from then on. Each feed
tells the state when a volume kind was listed and when its list failed (`ClusterState.volumes_listed`,
`volumes_failing`): a kind that cannot be listed is unavailable, never empty. They are optional kinds for the
state's health.

Namespaces, NodeClaims, NodePools and EC2NodeClasses are optional: a controller that may not list them (or an API
that does not serve them) still runs, pod-affinity terms with a namespaceSelector then seeing namespaces without
labels, a cluster without Karpenter v1's CRDs no NodeClaims and no NodePool readiness written on a NodePool's change
(only when the constraint sets change). A step-driven feed counts an optional kind the API does not serve (404) as not
failing: only the required kinds make the state unhealthy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, WatchEvent
from karpenter_policy.kube.errors import ClusterError, Gone, NotFound
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.volumes import VOLUME_KINDS
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.pods import trim_pod

KINDS: tuple[Kind, ...] = (
    objects.POD, objects.NODE, objects.DAEMON_SET, objects.NAMESPACE, objects.NODE_CLAIM, objects.NODE_POOL,
    objects.EC2_NODE_CLASS, *VOLUME_KINDS,
)
REQUIRED: tuple[Kind, ...] = (objects.POD, objects.NODE, objects.DAEMON_SET)
#: A watch failing this long makes the state unhealthy (readiness lost, no instance garbage collected).
FAILING_AFTER = 30.0


@dataclass(frozen=True, slots=True)
class FeedHealth:
    """Whether the state follows the cluster: `synced` (every required kind listed once), `failing` (kinds whose
    last list or watch failed, with why), `alive` (every feeding thread runs)."""

    synced: bool
    alive: bool = True
    failing: tuple[tuple[str, str], ...] = ()
    degraded: bool = False  # some required kind's list or watch is failing right now (however briefly)

    @property
    def healthy(self) -> bool:
        """Synced, alive and nothing failing."""
        return self.synced and self.alive and not self.failing

    @property
    def steady(self) -> bool:
        """Healthy and nothing failing even now: what a destructive decision (garbage collection) requires."""
        return self.healthy and not self.degraded


class StateFeed(Protocol):
    state: ClusterState

    def sync(self) -> None:
        """Bring the state up to date now (step-driven feeds; a no-op for informers, which push)."""

    def health(self) -> FeedHealth:
        """How the feed is doing: synced, alive, what is failing."""


class WatchFeed:
    """See the module docstring."""

    def __init__(self, cluster: Cluster, state: ClusterState, kinds: Sequence[Kind] = KINDS) -> None:
        self.cluster = cluster
        self.state = state
        self.kinds = tuple(kinds)
        self._versions: dict[Kind, str] = {}
        self._failing: dict[str, str] = {}

    def sync(self) -> None:
        """Apply every change since the last sync, kind by kind (a kind that fails is noted, the others go on)."""
        for kind in self.kinds:
            if not _wanted(self.state, kind):
                continue
            try:
                self._sync(kind)
            except ClusterError as error:
                _volumes_failing(self.state, kind, error)
                if not _unserved_optional(kind, error):
                    self._failing[kind.plural] = str(error)
                    continue
                self._failing.pop(kind.plural, None)
            else:
                _volumes_listed(self.state, kind)
                self._failing.pop(kind.plural, None)

    def _sync(self, kind: Kind) -> None:
        version = self._versions.get(kind)
        if version is not None:
            try:
                with self.cluster.watch(kind, version, timeout_seconds=0) as stream:
                    for event in stream:
                        self._apply(kind, event)
                return
            except Gone:
                pass
        listed = self.cluster.list(kind)
        replace(self.state, kind, _owned(kind, listed.items))
        self._versions[kind] = listed.resource_version

    def _apply(self, kind: Kind, event: WatchEvent) -> None:
        if event.resource_version:
            self._versions[kind] = event.resource_version
        self.state.apply(kind, event.type, _own(kind, event.object))

    def health(self) -> FeedHealth:
        """Synced once every required kind was listed; what failed at the last sync."""
        synced = all(kind in self._versions for kind in REQUIRED if kind in self.kinds)
        return FeedHealth(synced, failing=tuple(sorted(self._failing.items())))


class ListFeed:
    """See the module docstring."""

    def __init__(self, cluster: Cluster, state: ClusterState, kinds: Sequence[Kind] = KINDS) -> None:
        self.cluster = cluster
        self.state = state
        self.kinds = tuple(kinds)
        self._listed: set[Kind] = set()
        self._failing: dict[str, str] = {}

    def sync(self) -> None:
        """Replace the state's objects with a fresh list of each kind (a kind that fails is noted, the others go on)."""
        for kind in self.kinds:
            if not _wanted(self.state, kind):
                continue
            try:
                replace(self.state, kind, _owned(kind, self.cluster.list(kind).items))
            except ClusterError as error:
                _volumes_failing(self.state, kind, error)
                if not _unserved_optional(kind, error):
                    self._failing[kind.plural] = str(error)
                continue
            _volumes_listed(self.state, kind)
            self._listed.add(kind)
            self._failing.pop(kind.plural, None)

    def health(self) -> FeedHealth:
        """Synced once every required kind was listed; degraded while a kind fails."""
        failing = tuple(sorted(self._failing.items()))
        return FeedHealth(all(k in self._listed for k in REQUIRED), failing=failing, degraded=bool(failing))


class InformerFeed:
    """Informers that push every event into the state (see the module docstring). :meth:`start` them."""

    def __init__(self, cluster: Cluster, state: ClusterState, kinds: Sequence[Kind] = KINDS) -> None:
        self.state = state
        self.informers: dict[Kind, Informer] = {
            kind: Informer(
                cluster, kind, on_event=self._apply_to_state(kind), transform=_TRANSFORMS.get(kind),
                on_sync=self._listed(kind) if kind in VOLUME_KINDS else None,
            )
            for kind in kinds
        }
        self._started: set[Kind] = set()
        self._start_lock = threading.Lock()
        state.subscribe(self._on_change)

    def _listed(self, kind: Kind):  # type: ignore[no-untyped-def]
        def listed(_: object) -> None:
            self.state.volumes_listed(kind)

        return listed

    def _on_change(self, change: Change) -> None:
        """A pod with a claim was seen: start the volume kinds' informers (a thread each; nothing else here)."""
        if change.kind == "pod" and self._started and self.state.wants_volumes.is_set():
            self._start(VOLUME_KINDS)

    def _start(self, kinds: Sequence[Kind]) -> None:
        with self._start_lock:
            for kind in kinds:
                informer = self.informers.get(kind)
                if informer is not None and kind not in self._started:
                    self._started.add(kind)
                    informer.start()

    def _apply_to_state(self, kind: Kind):  # type: ignore[no-untyped-def]
        def apply(event: WatchEvent) -> None:
            self.state.apply(kind, event.type, event.object)

        return apply

    def start(self) -> InformerFeed:
        """Start every informer (the feed, for chaining); the volume kinds' once a pod with a claim is seen."""
        self._start([kind for kind in self.informers if kind not in VOLUME_KINDS])
        if self.state.wants_volumes.is_set():
            self._start(VOLUME_KINDS)
        return self

    def stop(self) -> None:
        """Stop every informer."""
        for informer in self.informers.values():
            informer.stop()

    def sync(self) -> None:
        """Nothing: the informers push their changes into the state."""
        return None  # informers push

    def required(self) -> list[Informer]:
        """The informers of the kinds the state needs before it is trusted."""
        return [self.informers[kind] for kind in REQUIRED if kind in self.informers]

    def wait_synced(self, timeout: float) -> bool:
        """Whether every required informer listed once within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        return all(informer.wait_synced(max(0.0, deadline - time.monotonic())) for informer in self.required())

    def health(self) -> FeedHealth:
        """Synced: every required informer listed once; alive: every informer's thread runs; failing: the kinds
        whose list or watch has failed for longer than :data:`FAILING_AFTER` seconds."""
        healths = {  # the volume kinds' informers count once started (they start only when needed)
            kind: informer.health() for kind, informer in self.informers.items()
            if kind not in VOLUME_KINDS or kind in self._started
        }
        synced = all(healths[kind].synced for kind in REQUIRED if kind in healths)
        alive = all(h.alive for h in healths.values())
        required = [h for kind, h in healths.items() if kind in REQUIRED]
        failing = tuple(
            (h.kind, h.last_error or "failing") for h in required if not h.ok and h.failing_for() >= FAILING_AFTER
        )
        return FeedHealth(synced, alive, failing, degraded=any(not h.ok for h in required))

    def malformed(self) -> dict[tuple[str, str], int]:
        """(kind, problem) → the malformed answers each informer met (what the metrics export)."""
        found: dict[tuple[str, str], int] = {}
        for informer in self.informers.values():
            health = informer.health()
            for problem, count in health.malformed.items():
                found[(health.kind, problem)] = count
        return found


#: What each kind's objects lose before the state keeps them (the pods' unread fields: `trim_pod`).
_TRANSFORMS: dict[Kind, Callable[[Obj], None]] = {objects.POD: trim_pod}


def _wanted(state: ClusterState, kind: Kind) -> bool:
    """Whether a step-driven feed reads `kind` now (a volume kind only once a pending pod with a claim was seen)."""
    return kind not in VOLUME_KINDS or state.wants_volumes.is_set()


def _volumes_listed(state: ClusterState, kind: Kind) -> None:
    if kind in VOLUME_KINDS:
        state.volumes_listed(kind)


def _volumes_failing(state: ClusterState, kind: Kind, error: ClusterError) -> None:
    if kind in VOLUME_KINDS:
        state.volumes_failing(kind, str(error))


def _unserved_optional(kind: Kind, error: ClusterError) -> bool:
    """An optional kind the API does not serve (404 on its list: its CRD is not installed): not a failure."""
    return kind not in REQUIRED and isinstance(error, NotFound)


def _own(kind: Kind, obj: Obj) -> Obj:
    """`obj` (the feed's own copy, as a cluster hands it out) trimmed in place as the informers trim theirs: one
    object, no list built for it (this runs for every watch event)."""
    transform = _TRANSFORMS.get(kind)
    if transform is not None and isinstance(obj, dict):
        transform(obj)
    return obj


def _owned(kind: Kind, items: Sequence[Obj]) -> Sequence[Obj]:
    """`items` (a fresh list) each made the feed's own (:func:`_own`)."""
    for obj in items:
        _own(kind, obj)
    return items


def replace(state: ClusterState, kind: Kind, items: Sequence[Obj]) -> None:
    """Apply the difference between what the state holds of `kind` and `items` (a fresh list)."""
    with state.lock:
        if kind == objects.POD:
            known = {record.uid: record.obj for record in state.pods()}
            fresh = {objects.uid(obj): obj for obj in items}
        elif kind == objects.NODE:
            known = {record.name: record.obj for record in state.nodes()}
            fresh = {objects.name(obj): obj for obj in items}
        else:
            names = {objects.key(obj) for obj in items}
            for gone in state.keys_of(kind):
                if gone not in names:
                    state.apply(kind, "DELETED", _stub(kind, gone))
            for obj in items:
                state.apply(kind, "ADDED", obj)
            return
        for key, obj in known.items():
            if key not in fresh:
                state.apply(kind, "DELETED", obj)
        for key, obj in fresh.items():
            previous = known.get(key)
            if previous is None:
                state.apply(kind, "ADDED", obj)
            elif objects.resource_version(previous) != objects.resource_version(obj):
                state.apply(kind, "MODIFIED", obj)


def _stub(kind: Kind, key: tuple[str | None, str]) -> Obj:
    namespace, name = key
    meta: dict[str, str] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}


__all__ = ["KINDS", "REQUIRED", "FeedHealth", "InformerFeed", "ListFeed", "StateFeed", "WatchFeed", "replace"]
