"""`multi-arch` (warning, `check --workloads`): a workload whose pod spec says nothing of the CPU architecture but
whose planned nodes may be of an architecture other than amd64 — arm64 (Graviton) types among the instance types
Karpenter may launch for it. Karpenter picks a node's type at launch, among every type that fits, by price and
availability (CreateFleet's lowest-price or capacity-optimized strategy, karpenter-provider-aws
pkg/providers/instance/instance.go `launchInstance`), so a pool that admits both architectures can start an amd64
image on an arm64 node — `exec format error` unless the image is multi-arch. The finding names the architectures
and types, and the nodeSelector that pins one.

A workload that names `kubernetes.io/arch` anywhere in its node selector or affinity (required or preferred) has
chosen: no finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from karpenter_policy.api.violations import MULTI_ARCH, WARNING
from karpenter_policy.checks.findings import Finding
from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import InstanceTable

if TYPE_CHECKING:  # placement reports these findings: it imports this module
    from karpenter_policy.checks.proof.placement import Placement

__all__ = ["multi_arch_findings"]

_SHOWN = 3


def names_architecture(placement: Placement) -> bool:
    """Whether the workload's pod spec constrains `kubernetes.io/arch` (in any variant Karpenter tries)."""
    attempts = placement.workload.shape.attempts(False)
    return any(wk.ARCH in attempt.requirements or wk.ARCH in attempt.strict for attempt in attempts)


def architectures(placement: Placement, table: InstanceTable) -> dict[str, list[str]]:
    """Architecture → the instance types of that architecture a node for the workload may be: every option of the
    plan's nodes that hold its pods (cheapest first), then the types that fit its pod alone (a node claim's options:
    Karpenter launches one of them)."""
    outcome = placement.outcome
    names: dict[str, None] = {}
    for node in outcome.nodes if outcome is not None else ():
        names.update((option.instance_type, None) for option in node.options)
    names.update((name, None) for name in placement.instance_types)
    by_arch: dict[str, list[str]] = {}
    for name in names:
        position = table.position.get(name)
        if position is None:
            continue
        arch = table.types[position].linux_labels.get(wk.ARCH, "")
        by_arch.setdefault(arch, []).append(name)
    return by_arch


def multi_arch_findings(placements: Sequence[Placement], table: InstanceTable) -> list[Finding]:
    """A `multi-arch` warning per placed workload that does not name an architecture and may land on a node of
    another architecture than amd64 (see the module docstring)."""
    findings = []
    for placement in placements:
        if placement.provisioner is None or names_architecture(placement):
            continue
        found = architectures(placement, table)
        others = sorted(arch for arch in found if arch != wk.ARCH_AMD64)
        if not others:
            continue
        parts = []
        for arch in sorted(found):
            types = found[arch]
            more = f" and {len(types) - _SHOWN} more" if len(types) > _SHOWN else ""
            parts.append(f"{arch} ({', '.join(types[:_SHOWN])}{more})")
        choice = wk.ARCH_AMD64 if wk.ARCH_AMD64 in found else others[0]
        message = (
            f"no kubernetes.io/arch in its node selector or affinity, and its nodes may be {' or '.join(parts)}: "
            "Karpenter picks the type at launch by price and availability, so its images must be built for "
            f"{' and '.join(sorted(found))} — or pin one with nodeSelector: {{kubernetes.io/arch: {choice}}}"
        )
        w = placement.workload
        findings.append(Finding(MULTI_ARCH, WARNING, message, w.file, w.line, w.column, w.ref))
    return findings
