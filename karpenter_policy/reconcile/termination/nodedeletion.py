"""The node-deletion path: how interruption handling (and any other caller that decides a Node must go) removes a
Node of ours, and how garbage collection releases a Node whose instance is gone.

:func:`delete_node` requests the Node's deletion: the API server sets its ``deletionTimestamp`` and the
``karpenter.sh/termination`` finalizer keeps it while the termination controller (`terminator`) cordons it,
evicts its pods through the Eviction API (respecting disruption budgets; ``karpenter.sh/do-not-evict`` does not
stop a deletion, as in Karpenter v0.31), terminates the instance and removes the finalizer — as Karpenter does for
an interruption: the pods move during the two minutes of a spot warning instead of dying with the instance.

Every step is idempotent, so a caller that failed half-way (the API could not be reached) simply calls again: a
Node already being deleted, an instance already terminated or unknown, a finalizer already gone are fine.
"""

from __future__ import annotations

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import NotFound
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk


def delete_node(cluster: Cluster, node: Obj) -> None:
    """Request the deletion of a Node of ours; termination drains it and terminates its instance (see the module
    docstring). Raises ClusterError when the API refused; calling again resumes."""
    _request_deletion(cluster, objects.name(node))


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
    if current is None or wk.TERMINATION_FINALIZER not in objects.finalizers(current):
        return
    remaining = [f for f in objects.finalizers(current) if f != wk.TERMINATION_FINALIZER]
    patch = {"metadata": {"finalizers": remaining or None, "resourceVersion": objects.resource_version(current)}}
    try:
        cluster.patch(objects.NODE, name, patch)
    except NotFound:
        return


__all__ = ["delete_node", "release", "remove_finalizer"]
