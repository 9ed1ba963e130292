"""AMI drift of Karpenter v1 NodeClaims, where the policy repository alone decides it.

Karpenter v1.14.1 (aws `pkg/cloudprovider/drift.go`, `isAMIDrifted`) drifts a NodeClaim whose `status.imageID` is
not the AMI its EC2NodeClass maps to the NodeClaim's instance type (`amifamily.MapToInstanceTypes` over the class's
`status.amis`, which the AMI provider resolves from `spec.amiSelectorTerms` through EC2). Of those terms, only one
kind is resolved without EC2: **`id` terms** name the AMIs themselves. So, for HEAD's EC2NodeClass whose every
`amiSelectorTerms` entry is an `id` term:

* a NodeClaim whose `status.imageID` is none of those ids drifts (`AMIDrift`), whatever its architecture — the
  mapped AMI is always one of them (`suite_test.go` "should return drifted if the AMI is not valid", "… no longer
  matches the existing NodeClaims instance type");
* one whose `status.imageID` is among them does not. That is exact for one id per architecture; with several ids
  that fit the same instance type, Karpenter keeps the newest (EC2's creation dates, `compareAMI`), which the plan
  cannot see, and assumes the node's;
* a NodeClaim without `status.imageID` is not drifted: Karpenter's check errors ("no ami ID found in nodeClaim
  status") and drifts nothing.

HEAD's classes selecting by `alias`, `tags`, `name` or `owner` resolve through EC2 (and an alias's `@latest` moves
with every release). Where the snapshot holds the cluster's EC2NodeClass of that name with the very terms HEAD
keeps, its `status.amis` is what they resolve to (the AMI provider sorts it newest first): the AMI mapped to a
NodeClaim is the first whose `requirements` its labels meet (`MapToInstanceTypes`; a key the labels lack meets only
`NotIn` and `DoesNotExist`, as an instance type without a GPU has no GPU count), and a NodeClaim on another one
drifts — a new release of `al2023@latest` the cluster has already resolved. None fits: Karpenter's check errors, no
drift. Otherwise their AMI drift is not planned, and when BASE → HEAD changes those terms (`amiSelectorTerms` is
outside the class's hash, so nothing else would show it) a note says how many nodes that leaves unassessed.
Subnet, security-group, capacity-reservation and placement-group drift compare the EC2 *instance* with the class's
resolved status: neither is in a snapshot, so they are not planned either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import Claim
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.requirements import Requirements

__all__ = ["AMI_DRIFT", "AmiDriftRules", "mapped_ami", "selected_ami_ids"]

#: Karpenter's drift reason (aws v1.14.1 `pkg/cloudprovider/drift.go`, `AMIDrift`).
AMI_DRIFT: Final = "AMIDrift"


def _terms(node_class: Mapping[str, Any]) -> list[Any]:
    spec = node_class.get("spec")
    terms = spec.get("amiSelectorTerms") if isinstance(spec, Mapping) else None
    return terms if isinstance(terms, list) else []


def selected_ami_ids(node_class: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The AMIs a class's `amiSelectorTerms` name when every term is an `id` term (in their order), else None."""
    terms = _terms(node_class)
    ids = [term.get("id") for term in terms if isinstance(term, Mapping) and set(term) == {"id"}]
    if not terms or len(ids) != len(terms) or not all(isinstance(i, str) and i for i in ids):
        return None
    return tuple(str(i) for i in ids)


def mapped_ami(amis: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> str | None:
    """The first of a class's resolved `amis` (its `status.amis`) whose requirements `labels` meet, or None."""
    offered = Requirements.from_labels(dict(labels))
    for ami in amis:
        try:
            wanted = Requirements.from_node_selector(ami.get("requirements") or [])
        except ValueError:
            continue
        if offered.admits(wanted, frozenset()):
            return str(ami["id"])
    return None


class AmiDriftRules:
    """AMI drift (the module docstring) of one BASE → HEAD change, each class's terms read once; `cluster` holds
    the snapshot's EC2NodeClasses (their `status.amis`)."""

    def __init__(self, base: PolicySide, head: PolicySide, cluster: Sequence[Obj] = ()) -> None:
        self.base, self.head = base, head
        self.cluster = {objects.name(c): c for c in cluster}
        #: EC2NodeClass → nodes whose AMI drift could not be assessed (HEAD changed its non-id terms)
        self.unassessed: Counter[str] = Counter()

    def notes(self) -> list[str]:
        return [f"{count} node{'s' if count != 1 else ''} of EC2NodeClass {name}: HEAD changes spec.amiSelectorTerms, "
                "which EC2 resolves (alias, tags, name, owner): their AMI drift is not planned"
                for name, count in sorted(self.unassessed.items())]

    def __call__(self, node_class: str, claim: Claim | None) -> str | None:
        """The AMIDrift reason of a NodeClaim of `node_class` (None: no AMI drift the plan can tell)."""
        head = self.head.node_classes.get(node_class)
        if head is None or claim is None:
            return None
        ids = selected_ami_ids(head)
        if ids is not None:
            if not claim.image_id or claim.image_id in ids:
                return None
            return (f"{AMI_DRIFT}: NodeClaim {claim.name}'s status.imageID {claim.image_id} is not among "
                    f"EC2NodeClass {node_class}'s spec.amiSelectorTerms ids ({', '.join(ids)})")
        resolved = self.cluster.get(node_class)
        amis = ((resolved.get("status") or {}).get("amis") or []) if resolved is not None else []
        if amis and _terms(resolved or {}) == _terms(head):
            mapped = mapped_ami(amis, claim.labels)
            if not claim.image_id or mapped is None or claim.image_id == mapped:
                return None
            return (f"{AMI_DRIFT}: NodeClaim {claim.name}'s status.imageID {claim.image_id} is not {mapped}, the AMI "
                    f"EC2NodeClass {node_class}'s status.amis maps to its instance type in the snapshot")
        base = self.base.node_classes.get(node_class)
        if base is not None and _terms(base) != _terms(head):
            self.unassessed[node_class] += 1
        return None
