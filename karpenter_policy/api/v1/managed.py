"""Which NodePools Karpenter's AWS provider manages: those whose `spec.template.spec.nodeClassRef` is
`karpenter.k8s.aws`/`EC2NodeClass` (`NodeClassRef.is_ec2_node_class`).

Karpenter v1.14.1 filters NodePools by the node classes its cloud provider supports (core
pkg/utils/nodepool/nodepool.go `IsManaged`, aws pkg/cloudprovider/cloudprovider.go `GetSupportedNodeClasses`: the
EC2NodeClass only) wherever it provisions, disrupts or makes a NodePool Ready: a NodePool naming another provider's
class (`karpenter.azure.com`/`AKSNodeClass`) launches nothing. The tool checks NodePools as the AWS provider runs them,
so such a NodePool is an error it checks no further, `foreign-node-class` at the reference's group or kind
(`foreign_class_violations`, run by `api.v1.admission.check` on an admitted NodePool), never a pool read with an
EC2NodeClass that merely has the same name. `not_managed` (a NodePool) and `ref_not_managed` (any reference: a
NodeClaim's) say why `plan` and `simulate` leave one's nodes out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpenter_policy.api.provisionerrules import shown_long
from karpenter_policy.api.v1.crds import EC2NODECLASS_GROUP, EC2NODECLASS_KIND
from karpenter_policy.api.v1.objects import NodeClassRef
from karpenter_policy.api.violations import FOREIGN_NODE_CLASS, Violation

__all__ = ["EC2_CLASS", "foreign_class_violations", "not_managed", "ref_not_managed"]

#: The one node class Karpenter's AWS provider supports, as `group/kind`.
EC2_CLASS: Final = f"{EC2NODECLASS_GROUP}/{EC2NODECLASS_KIND}"

_REF: Final = ("spec", "template", "spec", "nodeClassRef")


def _shown(ref: NodeClassRef) -> str:
    return f"{shown_long(ref.group) or '(no group)'}/{shown_long(ref.kind) or '(no kind)'}"


def foreign_class_violations(stored: Mapping[str, Any]) -> list[Violation]:
    """`foreign-node-class` at the nodeClassRef's group (its kind when the group is the EC2NodeClass's) of an admitted
    NodePool (its stored form) whose reference is not an EC2NodeClass; none else (no reference: the CRD's)."""
    ref = NodeClassRef.of_nodepool(stored)
    if ref is None or ref.is_ec2_node_class:
        return []
    field = "kind" if ref.group == EC2NODECLASS_GROUP else "group"
    message = (
        f"names {_shown(ref)}, not {EC2_CLASS}: Karpenter's AWS provider manages only NodePools whose "
        f"nodeClassRef is {EC2_CLASS}, so it launches nothing for this NodePool, and this tool checks nothing more of "
        f"it; point nodeClassRef at an EC2NodeClass (group: {EC2NODECLASS_GROUP}, kind: {EC2NODECLASS_KIND}), or keep "
        "the NodePool out of the files this tool checks (--exclude)"
    )
    return [Violation(FOREIGN_NODE_CLASS, (*_REF, field), message)]


def not_managed(nodepool: Mapping[str, Any]) -> str | None:
    """Why Karpenter's AWS provider does not manage `nodepool` (a NodePool document: stored, or a snapshot's), None
    when it does — its nodeClassRef is an EC2NodeClass — or when it has no reference to judge."""
    return ref_not_managed(NodeClassRef.of_nodepool(nodepool))


def ref_not_managed(ref: NodeClassRef | None) -> str | None:
    """Why Karpenter's AWS provider does not manage what has the node class reference `ref` (a NodePool's, a
    NodeClaim's `spec.nodeClassRef`): None when it is an EC2NodeClass, or when there is none to judge."""
    if ref is None or ref.is_ec2_node_class:
        return None
    return (f"its nodeClassRef is {_shown(ref)}, not {EC2_CLASS}: Karpenter's AWS provider does not manage it "
            "(IsManaged)")
