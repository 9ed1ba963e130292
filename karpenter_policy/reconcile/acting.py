"""Only the leader changes anything: the cluster and the cloud as the controllers see them, every change asked of
`acting()` first.

The controller wraps the cluster and the cloud it is given in :class:`ActingCluster` and :class:`ActingCloud` (as it
wraps the cloud in `cloudmetrics`), so every controller calls through them. Reads pass through. Every call that
changes something — create, update, patch, delete, bind, evict and record_event on the cluster; create (launch)
and delete (terminate) on the cloud — first asks `acting()` (the runner's: the Lease is ours and its renew deadline
has not passed) and, when this replica no longer leads, raises :class:`NotLeading` or :class:`NotLeadingInCloud`:
a ClusterError or a CloudError, so each controller's own handling of a failed call applies (logged, tried again at
its next step — which runs only once this replica leads again). A leader whose lease lapses in the middle of a step
therefore stops at its next change, not at the end of the step, and well before another replica can take over.

A call already sent when the deadline passes is not recalled: as with client-go's leader election, the margin
between the renew deadline and the lease duration is what covers it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import CloudProvider, Instance, LaunchRequest, Network, NodeClassResolution
from karpenter_policy.kube.cluster import (
    DEFAULT_EVENT_SOURCE,
    DEFAULT_WATCH_TIMEOUT,
    Cluster,
    EventSeverity,
    ObjectList,
    WatchStream,
)
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.patches import PatchType
from karpenter_policy.model.instancetypes import InstanceType

NOT_LEADING = "this replica does not lead (the Lease is another's, or its renew deadline passed)"


class NotLeading(ClusterError):
    """A change to the cluster refused: this replica does not lead now."""


class NotLeadingInCloud(CloudError):
    """A change in the cloud refused: this replica does not lead now."""


class ActingCluster:
    """See the module docstring. Anything else of the wrapped cluster (a test double's helpers) passes through."""

    def __init__(self, cluster: Cluster, acting: Callable[[], bool]) -> None:
        self.inner = cluster
        self._acting = acting

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check(self, what: str) -> None:
        if not self._acting():
            raise NotLeading(f"{what}: {NOT_LEADING}")

    # -- reading -------------------------------------------------------------------------------------

    def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        return self.inner.list(kind, namespace, label_selector, field_selector)

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
        return self.inner.watch(kind, resource_version, namespace, label_selector=label_selector,
                                field_selector=field_selector, timeout_seconds=timeout_seconds, bookmarks=bookmarks)

    def get(self, kind: Kind, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Obj | None:
        if timeout is None:  # as the controllers call it: a cluster (or a double) without timeouts is fine
            return self.inner.get(kind, name, namespace)
        return self.inner.get(kind, name, namespace, timeout=timeout)

    # -- changing ------------------------------------------------------------------------------------

    def create(self, kind: Kind, obj: Obj, *, timeout: float | None = None) -> Obj:
        self._check(f"create {kind.plural}")
        if timeout is None:
            return self.inner.create(kind, obj)
        return self.inner.create(kind, obj, timeout=timeout)

    def update(self, kind: Kind, obj: Obj, subresource: str | None = None, *, timeout: float | None = None) -> Obj:
        self._check(f"update {kind.plural}")
        if timeout is None:
            return self.inner.update(kind, obj, subresource)
        return self.inner.update(kind, obj, subresource, timeout=timeout)

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        self._check(f"patch {kind.plural}/{name}")
        return self.inner.patch(kind, name, patch, namespace, patch_type, subresource)

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        self._check(f"delete {kind.plural}/{name}")
        self.inner.delete(kind, name, namespace, grace_period_seconds)

    def bind(self, namespace: str, pod_name: str, node_name: str) -> None:
        self._check(f"bind {namespace}/{pod_name}")
        self.inner.bind(namespace, pod_name, node_name)

    def evict(self, namespace: str, pod_name: str) -> None:
        self._check(f"evict {namespace}/{pod_name}")
        self.inner.evict(namespace, pod_name)

    def record_event(
        self,
        involved: Obj,
        reason: str,
        message: str,
        type: EventSeverity = "Normal",  # noqa: A002 (the protocol's name)
        source: str = DEFAULT_EVENT_SOURCE,
    ) -> Obj:
        self._check(f"record event {reason}")
        return self.inner.record_event(involved, reason, message, type, source)


class ActingCloud:
    """See the module docstring. Anything else of the wrapped provider passes through."""

    def __init__(self, cloud: CloudProvider, acting: Callable[[], bool]) -> None:
        self.inner = cloud
        self._acting = acting

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check(self, operation: str) -> None:
        if not self._acting():
            raise NotLeadingInCloud("leader election", NOT_LEADING, operation)

    def create(self, request: LaunchRequest) -> Instance:
        self._check("create")
        return self.inner.create(request)

    def delete(self, instance_id: str) -> None:
        self._check("delete")
        self.inner.delete(instance_id)

    def get(self, instance_id: str) -> Instance | None:
        return self.inner.get(instance_id)

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        return self.inner.list(cluster_name)

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        return self.inner.instance_types(region, provider)

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        self.inner.mark_unavailable(instance_type, zone, capacity_type, reason)

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        return self.inner.current_image(instance_type, provider)

    def node_class(self, provider: Mapping[str, Any] | None) -> NodeClassResolution:
        return self.inner.node_class(provider)

    def network(self, provider: Mapping[str, Any] | None) -> Network | None:
        return self.inner.network(provider)

    def unlaunchable(self, provider: Mapping[str, Any] | None) -> str | None:
        return self.inner.unlaunchable(provider)

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        self._check("collect_launch_templates")  # it deletes launch templates: a change like any other
        return self.inner.collect_launch_templates(cluster_name)


__all__ = ["NOT_LEADING", "ActingCloud", "ActingCluster", "NotLeading", "NotLeadingInCloud"]
