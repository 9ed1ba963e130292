"""Typo hints on what workloads ask of nodes (`check --workloads`): a nodeSelector or node-affinity key that looks
like a well-known key (`unknown-label-key`), a value of a well-known key that no instance type or offering of the
catalog carries (`unknown-label-value`, with the nearest valid value), a topology key no node of the provisioners
has (`unknown-topology-key`, with the nearest key they do have), a placement group partition the tool cannot know
the group has (`placement-group-partition`). Warnings: the verdict on the workload says
whether it can still be placed. The words and the nearest value are the Provisioner checks' (`domains`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from karpenter_policy.api.provisionerrules import unknown_key_message
from karpenter_policy.api.v1.launchsettings import MAX_PARTITIONS
from karpenter_policy.api.violations import (
    PLACEMENT_GROUP_PARTITION,
    UNKNOWN_LABEL_KEY,
    UNKNOWN_LABEL_VALUE,
    UNKNOWN_TOPOLOGY_KEY,
    WARNING,
)
from karpenter_policy.catalog.table import CatalogTable
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.proof.absence import known_name
from karpenter_policy.checks.proof.domains import known_values, unknown_value_message
from karpenter_policy.checks.source.workloads import LabelUse, TopologyKeyUse
from karpenter_policy.model import labels as wk
from karpenter_policy.model.spelling import nearest_name

__all__ = ["label_hint_findings", "partition_findings", "topology_key_findings"]


def label_hint_findings(
    uses: Iterable[LabelUse], table: CatalogTable, v1_labels: Collection[str] = frozenset()
) -> list[Finding]:
    """The key and value hints of every label constraint the workloads write; `v1_labels`: the labels of Karpenter
    v1 that v0.31 did not know (`model.labels.V1_INSTANCE_LABELS`), no typo when a NodePool is checked."""
    findings: list[Finding] = []
    for use in uses:
        key = wk.normalize_key(use.key)
        message = None if key in v1_labels else unknown_key_message(key)
        # a restricted key in an affinity term: the workload's refusal already names it, with the same hint
        if message is not None and not (use.affinity and wk.restricted_label_reason(key) is not None):
            findings.append(Finding(UNKNOWN_LABEL_KEY, WARNING, message, use.file, use.line, use.column, use.workload))
        if use.operator not in ("In", "NotIn"):
            continue
        known = known_values(key, table)
        if known is None:
            continue
        known_set = set(known)
        for value, line, column in dict.fromkeys(v for v in use.values if v[0] not in known_set):
            named = key in (wk.INSTANCE_TYPE, wk.INSTANCE_FAMILY)
            if named and known_name(table.catalog, value, family=key == wk.INSTANCE_FAMILY) is not None:
                continue  # a type of another region or generation: the verdict explains it
            text = unknown_value_message(key, value, table)
            if use.operator == "NotIn":
                text += " This NotIn excludes nothing."
            findings.append(Finding(UNKNOWN_LABEL_VALUE, WARNING, text, use.file, line, column, use.workload))
    return findings


def partition_findings(uses: Iterable[LabelUse], topology: Iterable[TopologyKeyUse] = ()) -> list[Finding]:
    """A `placement-group-partition` warning for each partition 1 … 7 a workload requires (`In`), and for each
    required topology spread or pod (anti-)affinity over the partition key: offline a class's placement group offers
    them all (`launchsettings.offline_placement_offerings`), and whether the group is a partition group, and of how
    many partitions, is EC2's to say (v1.14.1 reads the strategy from DescribePlacementGroups; a cluster group has
    no partition). Call it only when some checked class has a `placementGroupSelector`."""
    findings: list[Finding] = []
    for spread in topology:
        if wk.normalize_key(spread.key) != wk.PLACEMENT_GROUP_PARTITION or not spread.required:
            continue
        message = (
            f"{spread.kind} on {spread.key}: check takes its EC2NodeClass's placement group to be a partition group "
            f"of {MAX_PARTITIONS} partitions (EC2's most per zone) and asks no cloud; a partition group of fewer "
            "partitions has fewer domains, and a cluster or spread group none — there the pods stay pending"
        )
        where = (spread.file, spread.line, spread.column, spread.workload)
        findings.append(Finding(PLACEMENT_GROUP_PARTITION, WARNING, message, *where))
    for use in uses:
        if wk.normalize_key(use.key) != wk.PLACEMENT_GROUP_PARTITION or use.operator != "In":
            continue
        for value, line, column in use.values:
            if not value.isdigit() or not 1 <= int(value) <= MAX_PARTITIONS:
                continue  # not a partition any group has: the workload's verdict says so
            message = (
                f"partition {value} of its EC2NodeClass's placement group exists only if the group is a partition "
                f"group with at least {value} partitions (EC2 allows {MAX_PARTITIONS} per zone): check asks no "
                "cloud, so it places the pod as if it did"
            )
            findings.append(Finding(PLACEMENT_GROUP_PARTITION, WARNING, message, use.file, line, column, use.workload))
    return findings


def topology_key_findings(uses: Iterable[TopologyKeyUse], keys: Collection[str]) -> list[Finding]:
    """An `unknown-topology-key` warning for each topology key of the workloads that no node of the provisioners
    has (`keys`: the label keys their nodes may have — the scheduler's topology domains —, the hostname aside)."""
    findings: list[Finding] = []
    known = sorted({*keys, wk.HOSTNAME})
    for use in uses:
        key = wk.normalize_key(use.key)
        if key in known:
            continue
        what = (
            "leaves the pods pending: it finds no domain for them"
            if use.required
            else "drops it, as a preference it cannot meet"
        )
        message = f"{use.kind} on {use.key}: no node the provisioners launch has this label, so Karpenter v0.31 {what}"
        hint = topology_key_hint(key, known)
        if hint is not None:
            message += f"; did you mean {hint}?"
        findings.append(Finding(UNKNOWN_TOPOLOGY_KEY, WARNING, message, use.file, use.line, use.column, use.workload))
    return findings


def topology_key_hint(key: str, known: Collection[str]) -> str | None:
    """The known key `key` is probably a typo of: the one with the same name in another domain
    (`topology.kubernetes.io/hostname` → kubernetes.io/hostname), else the nearest spelling of the whole key or of
    its name; None when none is close."""
    name = key.rpartition("/")[2]
    same_name = [k for k in known if k.rpartition("/")[2] == name]
    if len(same_name) == 1:
        return same_name[0]
    near = nearest_name(key, sorted(known))
    if near is not None:
        return near
    names = {k.rpartition("/")[2]: k for k in known}
    near_name = nearest_name(name, sorted(names)) if name else None
    return names[near_name] if near_name is not None else None
