"""A NodePool's `Ready`, `ValidationSucceeded` and `NodeClassReady` status conditions, as Karpenter v1.14.1 decides
them (core pkg/apis/v1/nodepool_status.go `StatusConditions`: `NewReadyConditions(ValidationSucceeded,
NodeClassReady)`; pkg/controllers/nodepool/validation/controller.go, pkg/controllers/nodepool/readiness/controller.go;
the root condition as awslabs/operatorpkg's status/condition_set.go `recomputeRootCondition` computes it).

- **ValidationSucceeded**: True (its type as reason) when the NodePool passes `RuntimeValidate`
  (`api.v1.nodepool.runtime_violations`), else False `NodePoolValidationFailed` with Go's error (the problems joined
  by `; `, as multierr prints them).
- **NodeClassReady**: False `NodeClassNotFound` "NodeClass not found on cluster" without its EC2NodeClass, False
  `NodeClassTerminating` "NodeClass is Terminating" while the class is being deleted, else the class's Ready:
  Unknown → False `NodeClassReadinessUnknown` "Node Class Readiness Unknown", False → False with the class's reason
  and message, True → True.
- **Ready**: True once both are True at the NodePool's generation; else False `UnhealthyDependents` when one is
  False at its generation, Unknown `ReconcilingDependents` otherwise, the message naming the dependents that are
  not True (`ValidationSucceeded=False, NodeClassReady=Unknown`).

The **EC2NodeClass's Ready** is what aws v1.14.1's nodeclass status controller (pkg/controllers/nodeclass/) would
write, for the dependents this controller can tell (`class_ready`), in v1.14.1's order: `AMIsReady` False
`AMINotFound` "AMISelector did not match any AMIs" (ami.go) when its `amiSelectorTerms` resolve to no image for the
catalog's instance types (`CloudProvider.node_class`: DescribeImages, or the alias's SSM parameters); `SubnetsReady`
False `SubnetsNotFound` "SubnetSelector did not match any Subnets" (subnet.go) and `SecurityGroupsReady` False
`SecurityGroupsNotFound` "SecurityGroupSelector did not match any SecurityGroups" (securitygroup.go) when its selector
terms resolve to none in EC2 now (`CloudProvider.network`); `InstanceProfileReady` False `InstanceProfileNotFound`
when IAM has no instance profile of the name its launches use (its `instanceProfile`, else
`--default-instance-profile`; none at all is not found either) — v1.14.1 creates a role's profile and takes a named
one as given, so it never writes that False: this controller creates none, and says so before a launch fails;
`PlacementGroupReady` False when EC2 has no available placement group of its `placementGroupSelector`
(placementgroup.go, `CloudProvider.node_class`). Its Ready is then False `UnhealthyDependents` with the dependents
that are not True in its message, as operatorpkg computes a root. The other dependent (its own validation's dry
runs) is taken as True here. A
cloud that cannot answer leaves each dependent as last told (Unknown before any answer). The class's stored status is
not read: no AWS controller writes it in a cluster this controller runs.

Only a NodePool whose `nodeClassRef` is `karpenter.k8s.aws`/`EC2NodeClass` is managed (v1.14.1's `IsManaged`);
another is left alone. Pure: `nodepoolstatus.RegistrationHealth` reads and writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.api.v1.nodepool import runtime_violations
from karpenter_policy.api.v1.objects import NodeClassRef
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile.claims import conditions

READY: Final = "Ready"
VALIDATION_SUCCEEDED: Final = "ValidationSucceeded"
NODE_CLASS_READY: Final = "NodeClassReady"
#: The dependents of a NodePool's Ready, in v1.14.1's order.
DEPENDENTS: Final = (VALIDATION_SUCCEEDED, NODE_CLASS_READY)
VALIDATION_FAILED: Final = "NodePoolValidationFailed"
NODE_CLASS_NOT_FOUND: Final = ("NodeClassNotFound", "NodeClass not found on cluster")
NODE_CLASS_TERMINATING: Final = ("NodeClassTerminating", "NodeClass is Terminating")
NODE_CLASS_UNKNOWN: Final = ("NodeClassReadinessUnknown", "Node Class Readiness Unknown")
UNHEALTHY_DEPENDENTS: Final = "UnhealthyDependents"
RECONCILING_DEPENDENTS: Final = "ReconcilingDependents"
#: An EC2NodeClass's dependents this controller tells, with their False reason and message (aws v1.14.1).
SUBNETS_READY: Final = ("SubnetsReady", "SubnetsNotFound", "SubnetSelector did not match any Subnets")
SECURITY_GROUPS_READY: Final = (
    "SecurityGroupsReady", "SecurityGroupsNotFound", "SecurityGroupSelector did not match any SecurityGroups",
)
AMIS_READY: Final = ("AMIsReady", "AMINotFound", "AMISelector did not match any AMIs")
#: v1.14.1 sets InstanceProfileReady True only (it creates a role's profile and takes a named one as given); its
#: False here is this controller's: the profile launches would use does not exist.
INSTANCE_PROFILE_READY: Final = ("InstanceProfileReady", "InstanceProfileNotFound", "Instance profile not found")
#: False when EC2 has no available placement group of the class's `placementGroupSelector` (v1.14.1's
#: pkg/controllers/nodeclass/placementgroup.go: `PlacementGroupNotFound`); True when it names none.
PLACEMENT_GROUP_READY: Final = "PlacementGroupReady"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One condition's status ("True", "False", "Unknown"), reason and message."""

    status: str
    reason: str
    message: str = ""

    @property
    def true(self) -> bool:
        return self.status == "True"


UNKNOWN: Final = Verdict("Unknown", conditions.AWAITING, conditions.AWAITING_MESSAGE)


def node_class_name(nodepool: Obj) -> str | None:
    """The name of the EC2NodeClass the NodePool references; None when it references another kind (not managed)."""
    spec = nodepool.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    inner = template.get("spec") if isinstance(template, Mapping) else None
    reference = inner.get("nodeClassRef") if isinstance(inner, Mapping) else None
    if not isinstance(reference, Mapping) or not isinstance(reference.get("name"), str) or \
            not NodeClassRef.from_api(reference).is_ec2_node_class:
        return None
    return str(reference["name"])


def validation(nodepool: Obj) -> Verdict:
    """ValidationSucceeded (see the module docstring)."""
    found = runtime_violations(nodepool)
    if found:
        return Verdict("False", VALIDATION_FAILED, "; ".join(v.message for v in found))
    return Verdict("True", VALIDATION_SUCCEEDED)


def class_ready(network_subnets: int | None, network_groups: int | None, images: int | None = 1,
                instance_profile: bool | None = True, placement_group: bool | None = True) -> Verdict:
    """The EC2NodeClass's Ready from how many AMIs, subnets and security groups it resolves to and whether its
    instance profile and placement group exist (None: the cloud could not tell: that dependent Unknown), as
    operatorpkg computes the root of v1.14.1's dependents (see the module docstring)."""
    found = [(kind, None if count is None else count > 0) for kind, count in (
        (AMIS_READY[0], images), (SUBNETS_READY[0], network_subnets), (SECURITY_GROUPS_READY[0], network_groups),
    )] + [(INSTANCE_PROFILE_READY[0], instance_profile), (PLACEMENT_GROUP_READY, placement_group)]
    if all(ok for _, ok in found):
        return Verdict("True", READY)
    named = ", ".join(f"{kind}={'Unknown' if ok is None else ok}" for kind, ok in found if not ok)
    if any(ok is False for _, ok in found):
        return Verdict("False", UNHEALTHY_DEPENDENTS, named)
    return Verdict("Unknown", RECONCILING_DEPENDENTS, named)


def node_class_ready(node_class: Obj | None, ready: Verdict) -> Verdict:
    """NodeClassReady from the class (None: not in the cluster) and its Ready (see the module docstring)."""
    if node_class is None:
        return Verdict("False", *NODE_CLASS_NOT_FOUND)
    if objects.metadata(node_class).get("deletionTimestamp"):
        return Verdict("False", *NODE_CLASS_TERMINATING)
    if ready.status == "True":
        return Verdict("True", NODE_CLASS_READY)
    if ready.status == "False":
        return Verdict("False", ready.reason, ready.message)
    return Verdict("False", *NODE_CLASS_UNKNOWN)


def _generation(obj: Obj) -> int:
    value = objects.metadata(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def root(found: Sequence[Mapping[str, Any]], generation: int) -> Verdict:
    """Ready from its dependents as operatorpkg recomputes a root: True when each is True at `generation`; else
    False when one is False at it, Unknown otherwise, naming the others (the latest to change first)."""
    dependents = [c for c in found if c.get("type") in DEPENDENTS]
    missing = [kind for kind in DEPENDENTS if not any(c.get("type") == kind for c in dependents)]
    unhealthy = [c for c in dependents
                 if c.get("status") != "True" or c.get("observedGeneration") != generation]
    if not unhealthy and not missing:
        return Verdict("True", READY)
    unhealthy.sort(key=lambda c: str(c.get("lastTransitionTime") or ""), reverse=True)
    named = [f"{c.get('type')}={c.get('status')}" for c in unhealthy] + [f"{kind}=Unknown" for kind in missing]
    false = any(c.get("status") == "False" and c.get("observedGeneration") == generation for c in unhealthy)
    return Verdict("False" if false else "Unknown", UNHEALTHY_DEPENDENTS if false else RECONCILING_DEPENDENTS,
                   ", ".join(named))


def set_readiness(nodepool: Obj, node_class: Obj | None, ready: Verdict, now: dt.datetime) -> bool:
    """Set the NodePool's ValidationSucceeded, NodeClassReady and Ready in place (each at its generation); whether
    anything changed. A NodePool not managed (another kind of class) is left alone."""
    if node_class_name(nodepool) is None:
        return False
    status = nodepool.get("status")
    if not isinstance(status, dict):
        status = nodepool["status"] = {}
    found = status.get("conditions")
    kept = [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []
    generation = _generation(nodepool)
    changed = False
    for kind, verdict in ((VALIDATION_SUCCEEDED, validation(nodepool)),
                          (NODE_CLASS_READY, node_class_ready(node_class, ready))):
        changed |= conditions.set_condition(kept, kind, verdict.status, verdict.reason, verdict.message, now,
                                            generation)
    top = root(kept, generation)
    changed |= conditions.set_condition(kept, READY, top.status, top.reason, top.message, now, generation)
    if changed or found is not kept:
        status["conditions"] = kept
    return changed


def ready_of(nodepool: Obj) -> Verdict | None:
    """The NodePool's Ready condition as it stands (None: it has none)."""
    status = nodepool.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in found if isinstance(found, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == READY:
            return Verdict(str(condition.get("status")), str(condition.get("reason") or ""),
                           str(condition.get("message") or ""))
    return None


__all__ = [
    "DEPENDENTS", "NODE_CLASS_READY", "READY", "VALIDATION_SUCCEEDED", "Verdict", "class_ready", "node_class_name",
    "node_class_ready", "ready_of", "root", "set_readiness", "validation",
]
