"""Karpenter v1.14.1's static-drift hashes of a NodePool and of its EC2NodeClass, for the nodes the controller
launches from a NodePool's constraint set.

Karpenter v1 stamps each NodeClaim with `karpenter.sh/nodepool-hash` (`NodePool.Hash`, core pkg/apis/v1/nodepool.go:
`spec.template` less its `hash:"ignore"` requirements — template labels and annotations, taints, startup taints,
nodeClassRef, expireAfter, terminationGracePeriod; slices as sets) with `karpenter.sh/nodepool-hash-version`, and
`karpenter.k8s.aws/ec2nodeclass-hash` (`EC2NodeClass.Hash`, aws pkg/apis/v1/ec2nodeclass.go: the spec less
subnet, security-group, capacity-reservation and AMI selector terms, `ipPrefixCount` and `amiFamily`, with the AMI
family the class resolves to instead) with its `-hash-version`. A node drifts statically when a hash differs from
its object's now and the versions match (core pkg/controllers/nodeclaim/disruption/drift.go
`areStaticFieldsDrifted`; aws pkg/cloudprovider/drift.go `areStaticFieldsDrifted`); a missing or stale version
means no static drift.

The hashes here cover those same fields, read from the constraint set (what the controller runs), normalised as
Karpenter's `hashstructure` options read them: taints as sets, empty maps and lists as absent, durations as their
length (`1h` is `60m`, `expireAfter: Never` absent). The value is this project's (`content_hash`, SHA-256), not Go's
FNV bits: only nodes the controller launched carry it. `commands/plan` compares the same fields of two revisions and
reads these annotation names and versions from here. A node stamped under another version is re-stamped
(`restamped`) as Karpenter's hash controllers do after a version bump, so later changes drift it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpenter_policy.api.constraintset import ConstraintSet, content_hash
from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration
from karpenter_policy.api.v1.objects import EC2NodeClass

NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION_KEY: Final = "karpenter.sh/nodepool-hash-version"
#: `NodePoolHashVersion` in core v1.14.1 `pkg/apis/v1/nodepool.go`.
NODEPOOL_HASH_VERSION: Final = "v3"
EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
EC2NODECLASS_HASH_VERSION_KEY: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"
#: `EC2NodeClassHashVersion` in aws v1.14.1 `pkg/apis/v1/ec2nodeclass.go`.
EC2NODECLASS_HASH_VERSION: Final = "v5"
#: The EC2NodeClass spec fields tagged `hash:"ignore"`.
UNHASHED_CLASS_FIELDS: Final = frozenset({
    "subnetSelectorTerms", "securityGroupSelectorTerms", "capacityReservationSelectorTerms", "ipPrefixCount",
    "amiSelectorTerms", "amiFamily",
})  # fmt: skip
NEVER: Final = "Never"


def _duration(value: Any) -> Any:
    """A duration as `hashstructure` reads it: its length in seconds; `Never` and absence as absent; text that is
    not a duration as itself."""
    if value is None or value == NEVER:
        return None
    if not isinstance(value, str):
        return value
    try:
        return parse_go_duration(value).total_seconds()
    except GoDurationError:
        return value


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Zero values (None, empty maps and lists) left out, as `hashstructure` with ZeroNil reads a struct."""
    return {key: value for key, value in sorted(fields.items()) if value not in (None, {}, [])}


def nodepool_hashed_fields(constraint_set: ConstraintSet) -> dict[str, Any]:
    """The NodePool fields `NodePool.Hash` covers, from its constraint set (see the module docstring)."""
    extras = constraint_set.nodepool or {}
    node_class = constraint_set.provider.name if constraint_set.provider is not None else None
    return _present({
        "labels": dict(sorted(constraint_set.labels.items())),
        "annotations": dict(sorted(constraint_set.annotations.items())),
        "taints": sorted((t.key, t.value, t.effect) for t in set(constraint_set.taints)),
        "startupTaints": sorted((t.key, t.value, t.effect) for t in set(constraint_set.startup_taints)),
        "nodeClassRef": None if node_class is None else
        {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
        "expireAfter": _duration(extras.get("expireAfter")),
        "terminationGracePeriod": _duration(extras.get("terminationGracePeriod")),
    })  # fmt: skip


def node_class_hashed_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The EC2NodeClass spec fields `EC2NodeClass.Hash` covers, with the AMI family it resolves to."""
    fields = {key: value for key, value in spec.items() if key not in UNHASHED_CLASS_FIELDS}
    fields["amiFamily (resolved)"] = EC2NodeClass.from_document({"spec": dict(spec)}).ami_family or "Custom"
    return _present(fields)


def static_hash_annotations(constraint_set: ConstraintSet) -> dict[str, str]:
    """The four annotations a node launched from a NodePool's set carries (none for a Provisioner's set; the class
    hash only when the set carries its EC2NodeClass's spec)."""
    if not constraint_set.is_nodepool:
        return {}
    out = {
        NODEPOOL_HASH: content_hash(nodepool_hashed_fields(constraint_set)),
        NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION,
    }
    spec = constraint_set.provider.spec if constraint_set.provider is not None else None
    if spec is not None:
        out[EC2NODECLASS_HASH] = content_hash(node_class_hashed_fields(spec))
        out[EC2NODECLASS_HASH_VERSION_KEY] = EC2NODECLASS_HASH_VERSION
    return out


def static_drift(annotations: Mapping[str, str], current: Mapping[str, str]) -> str:
    """Why a node has drifted statically from `current` (`static_hash_annotations` of its set now), "" when it has
    not: a hash that differs under the same version; a missing or stale version is no drift (drift.go)."""
    for hash_key, version_key, what in (
        (NODEPOOL_HASH, NODEPOOL_HASH_VERSION_KEY, "its NodePool's"),
        (EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION_KEY, "its EC2NodeClass's"),
    ):
        stamped, version = annotations.get(hash_key), annotations.get(version_key)
        if stamped is None or version is None or hash_key not in current:
            continue
        if version == current.get(version_key) and stamped != current[hash_key]:
            kind = "NodePoolDrifted" if hash_key == NODEPOOL_HASH else "NodeClassDrifted"
            return f"{kind}: {what} static fields changed ({hash_key})"
    return ""


def restamped(annotations: Mapping[str, str], current: Mapping[str, str], drifted: bool) -> dict[str, str]:
    """The annotations to write on a node whose stamped hash version is not `current`'s (missing or stale), as
    Karpenter's hash controllers re-stamp a NodeClaim after a hash-version bump (core pkg/controllers/nodepool/hash/
    controller.go `updateNodeClaimHash`, aws pkg/controllers/nodeclass/hash/controller.go `updateNodeClaimHash`):
    the current version, and the current hash unless the node is already drifted (then it stays drifted: its old
    hash now differs under the current version). Empty when every stamped version is current."""
    out: dict[str, str] = {}
    for hash_key, version_key in ((NODEPOOL_HASH, NODEPOOL_HASH_VERSION_KEY),
                                  (EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION_KEY)):
        if hash_key not in current or annotations.get(version_key) == current.get(version_key):
            continue
        out[version_key] = current[version_key]
        if not drifted:
            out[hash_key] = current[hash_key]
    return out


__all__ = [
    "EC2NODECLASS_HASH",
    "EC2NODECLASS_HASH_VERSION",
    "EC2NODECLASS_HASH_VERSION_KEY",
    "NODEPOOL_HASH",
    "NODEPOOL_HASH_VERSION",
    "NODEPOOL_HASH_VERSION_KEY",
    "UNHASHED_CLASS_FIELDS",
    "node_class_hashed_fields",
    "nodepool_hashed_fields",
    "restamped",
    "static_drift",
    "static_hash_annotations",
]
