"""Re-stamping the static-drift hashes of a NodePool's nodes after a hash-version bump, as Karpenter v1.14.1's hash
controllers do (core pkg/controllers/nodepool/hash/controller.go and aws pkg/controllers/nodeclass/hash/
controller.go, `updateNodeClaimHash`): a node whose `karpenter.sh/nodepool-hash-version` or
`karpenter.k8s.aws/ec2nodeclass-hash-version` is not the current one gets the current version, and its set's
current hash unless the decision saw it drifted (`api.v1.statichash.restamped`). Without it a stale version would
be "no static drift" for ever; with it, a later change to a hashed field drifts the node.

Here the hashes are on the Node (where the controller stamps them at launch), and this runs after each disruption
decision on the nodes of ours it looked at. Karpenter runs it when the NodePool's (or class's) own stamped version
is stale, i.e. once after an upgrade; the effect is the same. A patch that fails is tried after the next decision.
"""

from __future__ import annotations

from collections.abc import Mapping

from karpenter_policy.api.v1.statichash import restamped, static_hash_annotations
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.reconcile.disruption.decider import Inputs


def restamp(cluster: Cluster, inputs: Inputs, drifted: Mapping[str, str]) -> list[str]:
    """Patch the stale hash versions of the NodePool nodes of ours in `inputs` (`drifted`: the nodes the decision
    saw drifted, by name); the errors met."""
    errors: list[str] = []
    current: dict[str, dict[str, str]] = {}
    for name, node in sorted(inputs.view.nodes.items()):
        pool = node.provisioner or ""
        constraint_set = inputs.templates.sets.get(pool)
        if not node.ours or node.deleting or constraint_set is None or not constraint_set.is_nodepool:
            continue
        if pool not in current:
            current[pool] = static_hash_annotations(constraint_set)
        changes = restamped(node.annotations, current[pool], name in drifted)
        if not changes:
            continue
        try:
            cluster.patch(objects.NODE, name, {"metadata": {"annotations": changes}})
        except NotFound:
            continue  # gone meanwhile
        except ClusterError as error:
            errors.append(f"could not re-stamp the drift hashes of node {name}, {error}")
    return errors


__all__ = ["restamp"]
