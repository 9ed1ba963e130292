"""Typo hints on what workloads ask of nodes (`check --workloads`): a nodeSelector or node-affinity key that looks
like a well-known key (`unknown-label-key`), a value of a well-known key that no instance type or offering of the
catalog carries (`unknown-label-value`, with the nearest valid value). Warnings: the verdict on the workload says
whether it can still be placed. The words and the nearest value are the Provisioner checks' (`domains`)."""

from __future__ import annotations

from collections.abc import Iterable

from karpenter_policy.api.validation import unknown_key_message
from karpenter_policy.api.violations import UNKNOWN_LABEL_KEY, UNKNOWN_LABEL_VALUE, WARNING
from karpenter_policy.catalog.table import CatalogTable
from karpenter_policy.model import labels as wk
from karpenter_policy.policy.findings import Finding
from karpenter_policy.policy.proof.absence import known_name
from karpenter_policy.policy.proof.domains import known_values, unknown_value_message
from karpenter_policy.policy.source.workloads import LabelUse

__all__ = ["label_hint_findings"]


def label_hint_findings(uses: Iterable[LabelUse], table: CatalogTable) -> list[Finding]:
    """The key and value hints of every label constraint the workloads write."""
    findings: list[Finding] = []
    for use in uses:
        key = wk.normalize_key(use.key)
        message = unknown_key_message(key)
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
