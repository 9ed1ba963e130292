"""The ``Cluster`` protocol: everything the reconciler asks of Kubernetes, and the values it gets back.

Two implementations keep the same semantics and pass the same behavioural tests:
:class:`~karpenter_policy.fakes.cluster.MemoryCluster` (in memory, for tests and simulation) and
:class:`~karpenter_policy.kube.client.KubeCluster` (the API server, through the official client).
Objects are JSON dicts (:mod:`karpenter_policy.kube.objects`); failures are
:mod:`karpenter_policy.kube.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.patches import PatchType

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
EventSeverity = Literal["Normal", "Warning"]

DEFAULT_WATCH_TIMEOUT = 300
"""Seconds a watch lasts before the server ends it (the caller then watches again from where it was)."""

DEFAULT_EVENT_SOURCE = "karpenter-policy"


@dataclass(frozen=True)
class ObjectList:
    """A consistent snapshot: the items (sorted by namespace, name) and the resourceVersion to watch from."""

    items: list[Obj]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    """One change. A BOOKMARK (asked for with ``bookmarks=True``) only moves ``object``'s resourceVersion."""

    type: EventType
    object: Obj = field(default_factory=dict)

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class WatchStream(Iterator[WatchEvent], Protocol):
    """The events of one watch, in resourceVersion order. Iteration ends when the server's timeout ends the
    watch or the connection breaks (watch again from the last resourceVersion seen); ``close()`` ends it
    early from any thread."""

    def close(self) -> None: ...

    def __enter__(self) -> WatchStream: ...

    def __exit__(self, *exc_info: object) -> None: ...


class Cluster(Protocol):
    """List/watch/get/create/update/patch/delete objects, bind and evict pods, record events.

    Namespaced kinds need ``namespace`` for get/patch/delete; list and watch span all namespaces when it
    is None. Every returned object carries ``apiVersion`` and ``kind``.
    """

    def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList: ...

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
        """Changes after ``resource_version`` ("" starts with an ADDED per existing object).

        Raises :class:`~karpenter_policy.kube.errors.Gone` (on open or while iterating) when that version
        is older than the history the server keeps: list again and watch from the list's version. With
        selectors, an object that stops matching arrives as DELETED and one that starts as ADDED.
        """
        ...

    def get(self, kind: Kind, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Obj | None:
        """The object, or None when it does not exist. ``timeout`` (seconds) bounds the whole call, retries
        included: when it runs out the call raises Unavailable (None: the cluster's own timeouts)."""
        ...

    def create(self, kind: Kind, obj: Obj, *, timeout: float | None = None) -> Obj:
        """Create; ``metadata.generateName`` works. Raises AlreadyExists. ``timeout`` as for :meth:`get`."""
        ...

    def update(self, kind: Kind, obj: Obj, subresource: str | None = None, *, timeout: float | None = None) -> Obj:
        """Replace; raises Conflict when ``metadata.resourceVersion`` is stale (none: unconditional).

        For kinds with a status subresource (pods, nodes, ...) the object's status is kept unless
        ``subresource="status"``, which writes only the status, as the API server does. ``timeout`` as for
        :meth:`get` (a write that ran out may still have been carried out).
        """
        ...

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        """Patch (merge, JSON Patch or strategic merge); a ``metadata.resourceVersion`` in the patch is a
        precondition (Conflict when stale). ``subresource`` as for :meth:`update`."""
        ...

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        """Delete; an object with finalizers gets ``metadata.deletionTimestamp`` and stays until they are
        all removed (by update or patch). Raises NotFound."""
        ...

    def bind(self, namespace: str, pod_name: str, node_name: str) -> None:
        """Assign a pod to a node (the Binding subresource). Raises Conflict if it is already bound."""
        ...

    def evict(self, namespace: str, pod_name: str) -> None:
        """Evict a pod (the policy/v1 Eviction subresource). Raises TooManyRequests when a
        PodDisruptionBudget forbids it now; otherwise the pod is deleted."""
        ...

    def record_event(
        self,
        involved: Obj,
        reason: str,
        message: str,
        type: EventSeverity = "Normal",
        source: str = DEFAULT_EVENT_SOURCE,
    ) -> Obj:
        """Record a core/v1 Event about ``involved``; a repeat of the same event bumps its count."""
        ...
