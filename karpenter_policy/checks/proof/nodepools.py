"""Karpenter v1 NodePools through the provisioners' proofs (`proof.provisioners`): each valid NodePool becomes its
scheduling view (`api.v1.objects.provisioner_document`, with the EC2NodeClass its nodeClassRef names when the
repository has it) in a `NodePoolDocument`, which places every finding on the view's fields at the NodePool's own
file:line. And the proofs v1 adds: `minValues` (`min_values_findings`), under Karpenter's `--min-values-policy`; and
whether any type it admits can launch with its EC2NodeClass's `networkInterfaces` and `cpuOptions`
(`launch_findings`, v1.14.1's `IsCompatibleWithNodeClass` on the catalog's network facts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.kinds import object_ref
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.v1.objects import EC2NodeClass, NodePool, nodepool_path, provisioner_document
from karpenter_policy.api.violations import ERROR, MIN_VALUES, NO_INSTANCE_TYPE, WARNING
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import node_configuration
from karpenter_policy.model.minvalues import BEST_EFFORT, RELAXED_ANNOTATION, STRICT
from karpenter_policy.scheduling import InstanceTable
from karpenter_policy.scheduling.templates import launchable_mask, unlaunchable_text

__all__ = ["NodePoolDocument", "launch_findings", "min_values_findings", "nodepool_views"]

_SHOWN = 5


@dataclass(slots=True)
class NodePoolDocument(Document):
    """A NodePool's scheduling view as the proofs read it: `data` is the view (a Provisioner-shaped document of
    kind NodePool), the node tree and every position the NodePool's (`nodepool_path`)."""

    def position(self, path: FieldPath, at_key: bool = False) -> tuple[int, int]:
        return Document.position(self, nodepool_path(path), at_key)

    def text_position(self, path: FieldPath, line: int, column: int) -> tuple[int, int]:
        return Document.text_position(self, nodepool_path(path), line, column)


def nodepool_views(
    nodepools: Iterable[tuple[Document, Mapping[str, Any]]], node_classes: Mapping[str, Mapping[str, Any]]
) -> list[NodePoolDocument]:
    """The view of each NodePool (its document, and its stored form: defaults applied) with the EC2NodeClass
    (stored form, by name) its nodeClassRef names; without one (not in the repository: `unresolved-reference`
    says so) the view has no kubelet settings and Karpenter's default AMI family's arithmetic."""
    views = []
    for doc, stored in nodepools:
        pool = NodePool.from_document(stored)
        ref = pool.node_class_ref
        found = node_classes.get(ref.name) if ref is not None and ref.is_ec2_node_class else None
        node_class = EC2NodeClass.from_document(found) if found is not None else None
        views.append(NodePoolDocument(doc.file, doc.index, provisioner_document(pool, node_class), doc.node))
    return views


def _consequence(policy: str, have: int) -> tuple[str, str]:
    """The severity and the words of an unmet minValues under `policy`, as Karpenter v1.14.1 acts on it: Strict,
    no NodeClaim is ever made for the NodePool (`Truncate` refuses the types and the scheduler drops a template whose
    types miss it: `filterInstanceTypesByRequirements`); BestEffort, each NodeClaim keeps the values that remain,
    its minValues lowered to their count (`NodeClaim.CanAdd`), and says so in an annotation."""
    if policy == BEST_EFFORT:
        return WARNING, (
            f"under the BestEffort minValues policy (--min-values-policy {BEST_EFFORT}) Karpenter launches its "
            f"nodes with minValues lowered to {have} ({RELAXED_ANNOTATION}), without the flexibility asked for; "
            "lower minValues or widen the requirements"
        )
    return ERROR, (
        f"under the {STRICT} minValues policy (Karpenter's default) no node is ever launched for it; lower "
        "minValues or widen the requirements"
    )


def min_values_findings(
    doc: Document, instance_types: Sequence[str], table: InstanceTable, policy: str = STRICT
) -> list[Finding]:
    """`min-values` for each requirement of a satisfiable NodePool view whose `minValues` the instance types it
    admits (`instance_types`, proven by the solver) cannot meet, at that requirement's `minValues`: an error under
    Karpenter's Strict `policy` (nothing launches), a warning under BestEffort (nodes launch with fewer values)."""
    if doc.data.get("kind") != NODEPOOL_KIND:
        return []
    names = [n for n in instance_types if n in table.position]
    ref = object_ref(NODEPOOL_KIND, (doc.data.get("metadata") or {}).get("name"))
    findings = []
    for index, raw in enumerate((doc.data.get("spec") or {}).get("requirements") or []):
        wanted = raw.get("minValues") if isinstance(raw, Mapping) else None
        if not isinstance(wanted, int) or isinstance(wanted, bool):
            continue
        key = wk.normalize_key(str(raw.get("key", "")))
        values = table.values_carried(key, table.mask_of_names(names))
        if len(values) >= wanted:
            continue
        ordered = sorted(values)
        listed = ", ".join(ordered[:_SHOWN]) + (f" and {len(ordered) - _SHOWN} others" if len(ordered) > _SHOWN else "")
        have = f"only {len(values)} ({listed})" if values else "none"
        if not values and key not in (wk.INSTANCE_TYPE, wk.ZONE, wk.CAPACITY_TYPE) and not table.is_type_key(key):
            have += f" — no instance type carries the label {key}"
        count = len(names)
        severity, consequence = _consequence(policy, len(values))
        message = (
            f"{key} minValues {wanted}: the {count} instance type{'s' if count != 1 else ''} the NodePool admits "
            f"carry {have}: {consequence}"
        )
        line, column = doc.position(("spec", "requirements", index, "minValues"))
        findings.append(Finding(MIN_VALUES, severity, message, doc.file, line, column, ref))
    return findings


def launch_findings(
    doc: Document, instance_types: Sequence[str], table: InstanceTable, node_template: Mapping[str, Any] | None
) -> list[Finding]:
    """`no-instance-type` at a satisfiable NodePool view's `nodeClassRef` when none of the instance types it admits
    (`instance_types`, proven by the solver) can launch with its EC2NodeClass's `networkInterfaces` and
    `cpuOptions` (`node_template`, the class's fields the view carries): Karpenter v1.14.1 leaves such types out
    (`IsCompatibleWithNodeClass`), so no node is ever launched for it. Nothing when the class sets neither."""
    if doc.data.get("kind") != NODEPOOL_KIND or not node_template:
        return []
    node = node_configuration(None, node_template)
    if node.interfaces is None and not node.nested_virtualization:
        return []
    admitted = table.mask_of_names(instance_types)
    if not admitted or admitted & launchable_mask(table, node):
        return []
    count = bin(admitted).count("1")
    subject = f"none of the {count} instance type{'s' if count != 1 else ''} it admits"
    message = (
        f"{unlaunchable_text(node, subject)}, so no node is ever launched for it; change the EC2NodeClass's fields "
        "or admit types that take them"
    )
    ref = object_ref(NODEPOOL_KIND, (doc.data.get("metadata") or {}).get("name"))
    line, column = doc.position(("spec", "provider"))
    return [Finding(NO_INSTANCE_TYPE, ERROR, message, doc.file, line, column, ref)]
