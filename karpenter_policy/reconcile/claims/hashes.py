"""The hash controllers of Karpenter v1.14.1 on the NodePool and its EC2NodeClass (core pkg/controllers/nodepool/hash/
controller.go, aws pkg/controllers/nodeclass/hash/controller.go): the object carries the static-drift hash its
nodes are stamped with and the hash version (`karpenter.sh/nodepool-hash` and `-hash-version` on the NodePool,
`karpenter.k8s.aws/ec2nodeclass-hash` and `-hash-version` on the EC2NodeClass; the values `api.v1.statichash` makes
of the constraint set in force), and a **hash-version bump** re-stamps the NodeClaims.

When the object's stamped version is not the current one (an upgrade that changed how the hash is computed, or an
object no controller stamped), each NodeClaim of the NodePool (its `karpenter.sh/nodepool` label; of the class: its
`spec.nodeClassRef`) whose own version is not current gets the current version, and the current hash unless it has a
`Drifted` condition (then it stays drifted: its old hash differs under the new version) — `updateNodeClaimHash`,
`statichash.restamped` — by a merge patch of its metadata; then the object gets the current hash and version. An
upgrade so never drifts the fleet, and a later change to a hashed field does. A claim that cannot be patched stops
there: the object keeps its stale version, so the next look tries again (Karpenter returns the error and requeues).

With the object's version current, a missing annotation is written and a differing hash is left: Karpenter
overwrites it, but its value is Go's, not this project's, and neither is the other's to overwrite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from karpenter_policy.api.v1.objects import NodeClassRef
from karpenter_policy.api.v1.statichash import (
    EC2NODECLASS_HASH,
    EC2NODECLASS_HASH_VERSION_KEY,
    NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION_KEY,
    restamped,
)
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.kube.objects import EC2_NODE_CLASS, NODE_CLAIM, NODE_POOL, Kind, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims import conditions

#: A NodeClaim the object's hash controller re-stamps.
Belongs = Callable[[Obj], bool]


def _pair(current: Mapping[str, str], hash_key: str, version_key: str) -> dict[str, str]:
    return {key: current[key] for key in (hash_key, version_key) if key in current} \
        if hash_key in current and version_key in current else {}


def _drifted(claim: Obj) -> bool:
    status = claim.get("status")
    found = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(found, list) and conditions.status_of(
        [c for c in found if isinstance(c, dict)], conditions.DRIFTED) is not None


def _of_nodepool(name: str) -> Belongs:
    return lambda claim: objects.labels(claim).get(wk.NODEPOOL) == name


def _of_node_class(name: str) -> Belongs:
    def belongs(claim: Obj) -> bool:
        spec = claim.get("spec")
        reference = spec.get("nodeClassRef") if isinstance(spec, dict) else None
        return isinstance(reference, dict) and reference.get("name") == name \
            and NodeClassRef.from_api(reference).is_ec2_node_class
    return belongs


def annotate_nodepool(cluster: Cluster, nodepool: Obj, current: Mapping[str, str]) -> list[str]:
    """The NodePool hash controller on `nodepool` (as read), `current` its set's `static_hash_annotations`; the
    errors met (see the module docstring)."""
    name = objects.name(nodepool)
    return _annotate(cluster, NODE_POOL, nodepool, _pair(current, NODEPOOL_HASH, NODEPOOL_HASH_VERSION_KEY),
                     _of_nodepool(name), f"{wk.NODEPOOL}={name}")


def annotate_node_class(cluster: Cluster, node_class: Obj, current: Mapping[str, str]) -> list[str]:
    """The EC2NodeClass hash controller on `node_class` (as read), `current` the `static_hash_annotations` of a set
    launched with it; the errors met (see the module docstring)."""
    return _annotate(cluster, EC2_NODE_CLASS, node_class,
                     _pair(current, EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION_KEY),
                     _of_node_class(objects.name(node_class)), None)


def _annotate(cluster: Cluster, kind: Kind, obj: Obj, wanted: dict[str, str], belongs: Belongs,
              selector: str | None) -> list[str]:
    if not wanted:
        return []
    name = objects.name(obj)
    hash_key, version_key = sorted(wanted, key=lambda key: key.endswith("-version"))
    present = objects.annotations(obj)
    if present.get(version_key) != wanted[version_key]:
        errors = restamp_claims(cluster, wanted, belongs, selector)
        if errors:
            return errors
        patch = dict(wanted)
    else:
        patch = {key: value for key, value in wanted.items() if key not in present}
    if not patch:
        return []
    try:
        cluster.patch(kind, name, {"metadata": {"annotations": patch}})
    except NotFound:
        return []
    except ClusterError as error:
        return [f"its {hash_key} annotation not written, {error}"]
    return []


def restamp_claims(cluster: Cluster, current: Mapping[str, str], belongs: Belongs,
                   selector: str | None = None) -> list[str]:
    """Re-stamp every NodeClaim that `belongs` whose version of `current`'s hash is not current (`updateNodeClaimHash`:
    the version, and the hash unless it is drifted); the errors met (a claim gone meanwhile is none)."""
    try:
        found = cluster.list(NODE_CLAIM, label_selector=selector)
    except NotFound:
        return []  # a cluster that does not serve NodeClaims has none to re-stamp
    except ClusterError as error:
        return [f"its NodeClaims could not be listed, {error}"]
    errors: list[str] = []
    for claim in sorted(found.items, key=objects.name):
        if not isinstance(claim, dict) or not belongs(claim):
            continue
        changes = restamped(objects.annotations(claim), current, _drifted(claim))
        if not changes:
            continue
        try:
            cluster.patch(NODE_CLAIM, objects.name(claim), {"metadata": {"annotations": changes}})
        except NotFound:
            continue
        except ClusterError as error:
            errors.append(f"NodeClaim {objects.name(claim)} not re-stamped, {error}")
    return errors


__all__ = ["annotate_node_class", "annotate_nodepool", "restamp_claims"]
