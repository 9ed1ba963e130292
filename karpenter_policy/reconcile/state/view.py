"""What the controller reads of the cluster each pass: pods, nodes, DaemonSets and namespaces.

:class:`ListView` lists them from the cluster on every pass (consistent and current; what step-driven tests and
simulations use). :class:`InformerView` reads the caches of informers kept up to date by watches (what the
threaded runner uses against a real API server: a pass costs no request). A cache may lag behind the controller's
own writes; the in-flight registry covers that gap (see `inflight`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, WatchEvent
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.memory import MemoryCluster
from karpenter_policy.kube.objects import Kind, Obj


@dataclass(frozen=True, slots=True)
class Snapshot:
    pods: list[Obj]
    nodes: list[Obj]
    daemon_sets: list[Obj]
    namespaces: list[Obj]


class ClusterView(Protocol):
    def snapshot(self) -> Snapshot: ...

    def version(self) -> object | None:
        """Equal between two calls only if nothing the snapshot shows changed meanwhile (None: cannot tell)."""
        ...


class ListView:
    """Lists everything on every call. On the in-memory cluster its resourceVersion (one counter for every
    write) tells whether anything changed; an API server's list has no such cheap answer."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def version(self) -> object | None:
        return self.cluster.resource_version if isinstance(self.cluster, MemoryCluster) else None

    def snapshot(self) -> Snapshot:
        return Snapshot(
            pods=self.cluster.list(objects.POD).items,
            nodes=self.cluster.list(objects.NODE).items,
            daemon_sets=self.cluster.list(objects.DAEMON_SET).items,
            namespaces=self.cluster.list(objects.NAMESPACE).items,
        )


class InformerView:
    """Informers on pods, nodes, DaemonSets and namespaces; `on_event(kind, event)` sees every change.

    Namespaces matter only to pod-affinity terms with a namespaceSelector; a controller that may not list them
    (or an API that does not serve them) still runs, those terms seeing namespaces without labels."""

    KINDS: tuple[Kind, ...] = (objects.POD, objects.NODE, objects.DAEMON_SET, objects.NAMESPACE)
    REQUIRED: tuple[Kind, ...] = (objects.POD, objects.NODE, objects.DAEMON_SET)

    def __init__(self, cluster: Cluster, on_event: Callable[[Kind, WatchEvent], None] | None = None) -> None:
        self.informers = {
            kind: Informer(cluster, kind, on_event=self._callback(kind, on_event)) for kind in self.KINDS
        }

    @staticmethod
    def _callback(
        kind: Kind, on_event: Callable[[Kind, WatchEvent], None] | None
    ) -> Callable[[WatchEvent], None] | None:
        if on_event is None:
            return None
        return lambda event: on_event(kind, event)

    def start(self) -> InformerView:
        for informer in self.informers.values():
            informer.start()
        return self

    def version(self) -> object:
        return tuple(informer.version for informer in self.informers.values())

    def required(self) -> list[Informer]:
        """The informers a pass cannot do without (each must have listed once before the first pass)."""
        return [self.informers[kind] for kind in self.REQUIRED]

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def snapshot(self) -> Snapshot:
        return Snapshot(
            pods=self.informers[objects.POD].items(),
            nodes=self.informers[objects.NODE].items(),
            daemon_sets=self.informers[objects.DAEMON_SET].items(),
            namespaces=self.informers[objects.NAMESPACE].items(),
        )


__all__ = ["ClusterView", "InformerView", "ListView", "Snapshot"]
