"""Node registration and initialization: the controller's writes to Nodes.

:func:`register` creates the Node of a launched instance (:func:`~karpenter_policy.reconcile.nodes.node_object`),
before the kubelet joins (a NodePool's after its NodeClaim, `reconcile.claims`, which the Node names as owner) —
the kubelet then adopts it. When the kubelet was first (or an earlier attempt's answer was lost), the Node exists:
it gets the controller's labels, annotations and finalizer by a strategic-merge patch. :func:`initialize` labels a
node of ours `karpenter.sh/initialized=true` once it is Ready with every startup taint gone (Karpenter's rule: until
then its startup taints are ignored for scheduling). Nodes the controller did not register are never written to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import AlreadyExists, ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims import objects as claim_objects
from karpenter_policy.reconcile.claims.writer import ClaimWriter
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.inflight import InFlightNode


def register(cluster: Cluster, entry: InFlightNode, claims: ClaimWriter | None = None) -> ClusterError | None:
    """Register the entry's Node (marking the entry registered); the error that prevented it, if any. A NodePool's
    launch (`entry.claim`) gets its NodeClaim first (`claims`), and the Node names it as its owner."""
    if entry.claim is not None and not entry.claim_created and claims is not None:
        try:
            stored = claims.create(entry.claim, entry.claim_status)
        except ClusterError as error:
            return error
        entry.claim_created = True
        if stored is not None:
            entry.node["metadata"]["ownerReferences"] = [claim_objects.node_reference(stored)]
    try:
        cluster.create(objects.NODE, entry.node)
    except AlreadyExists:
        try:
            existing = cluster.get(objects.NODE, entry.name) or {}
            patch = node_info.registration_patch(entry.node, existing)
            cluster.patch(objects.NODE, entry.name, patch, patch_type="strategic")
        except ClusterError as error:
            return error
    except ClusterError as error:
        return error
    entry.registered = True
    return None


@dataclass(slots=True)
class Initialized:
    """What :func:`initialize` did: the nodes it labelled, and those it could not (with why)."""

    labelled: list[str] = field(default_factory=list)
    failed: list[tuple[str, ClusterError]] = field(default_factory=list)


def initialize(cluster: Cluster, nodes: Mapping[str, Obj], done: set[str]) -> Initialized:
    """Label our Ready nodes without startup taints initialized. `done` holds the uids known to be labelled
    (updated), so that each node is labelled once however late a watch cache shows the label."""
    result = Initialized()
    for name, node in nodes.items():
        uid = objects.uid(node)
        if uid in done or not node_info.is_ours(node):
            continue
        if node_info.labelled_initialized(node):
            done.add(uid)
        elif node_info.is_initialized(node) and not objects.is_deleting(node):
            try:
                cluster.patch(objects.NODE, name, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
            except ClusterError as error:
                result.failed.append((name, error))
                continue
            done.add(uid)
            result.labelled.append(name)
    if len(done) > 100_000:
        done.intersection_update(objects.uid(n) for n in nodes.values())
    return result


__all__ = ["Initialized", "initialize", "register"]
