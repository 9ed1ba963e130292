"""The node-deletion path: how interruption handling (and any other caller that decides a Node must go) removes a
Node of ours and its instance.

:func:`delete_node` requests the Node's deletion: the API server sets its ``deletionTimestamp`` and the
``karpenter.sh/termination`` finalizer keeps it. In Karpenter the termination controller then cordons the Node,
drains it (evictions that respect disruption budgets), terminates the instance and removes the finalizer. Until
this project's termination controller exists, :func:`delete_node` does the last two steps itself, at once:
terminate the instance, remove the finalizer. The pods still bound to the Node are then left to Kubernetes' pod
garbage collector (their controllers recreate them, and the reconciler provisions for them) — the same end as a
spot reclaim two minutes later. Replacing this stand-in with the termination controller changes only
:func:`delete_node`: its callers stay as they are.

Every step is idempotent, so a caller that failed half-way (the API or EC2 could not be reached) simply calls
again: a Node already being deleted, an instance already terminated or unknown, a finalizer already gone are fine.
"""

from __future__ import annotations

import contextlib

from karpenter_policy.cloud.errors import NotFound as InstanceNotFound
from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import NotFound
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile import nodes as node_info


def delete_node(cluster: Cluster, cloud: CloudProvider, node: Obj) -> None:
    """Delete a Node of ours and terminate its instance (see the module docstring). Raises ClusterError or
    CloudError when a step failed; calling again resumes."""
    name = objects.name(node)
    if not _request_deletion(cluster, name):
        return
    instance_id = node_info.instance_id(node)
    if instance_id:
        with contextlib.suppress(InstanceNotFound):
            cloud.delete(instance_id)
    remove_finalizer(cluster, name)


def release(cluster: Cluster, name: str) -> None:
    """Delete a Node whose instance is gone: request the deletion, then remove the termination finalizer (there is
    nothing left to terminate). Other finalizers stay. A Node already gone is fine."""
    if _request_deletion(cluster, name):
        remove_finalizer(cluster, name)


def _request_deletion(cluster: Cluster, name: str) -> bool:
    """Delete the Node (it stays while finalizers hold it); False when it is gone already."""
    try:
        cluster.delete(objects.NODE, name)
    except NotFound:
        return False
    return True


def remove_finalizer(cluster: Cluster, name: str) -> None:
    current = cluster.get(objects.NODE, name)
    if current is None or node_info.TERMINATION_FINALIZER not in objects.finalizers(current):
        return
    remaining = [f for f in objects.finalizers(current) if f != node_info.TERMINATION_FINALIZER]
    patch = {"metadata": {"finalizers": remaining or None, "resourceVersion": objects.resource_version(current)}}
    try:
        cluster.patch(objects.NODE, name, patch)
    except NotFound:
        return


__all__ = ["delete_node", "release", "remove_finalizer"]
