"""What Karpenter v0.31 did that no v1 field carries over, as findings with their mitigation (the `migration-*`
rules of `api/rules/migrate.py`), each at the field of the v1alpha5 document it is about.

Per migrated Provisioner: its disruption pace (`migration-budget`: v0.31 disrupted one node at a time), drift
(`migration-drift`: always on in v1), and, when set, `ttlSecondsAfterEmpty` (`migration-emptiness`),
`ttlSecondsUntilExpired` (`migration-expiry`), `kubeletConfiguration` (`migration-kubelet`) and an inline
`provider` (`migration-inline-provider`). Per migrated node template (or inline provider) without an
`amiSelector`: the alias its `amiFamily` became (`migration-ami`).

With `--to v1beta1` (Karpenter v0.32–v0.37) the notes say what v1beta1 does instead: budgets are read from v0.34
(the CRD of aws/karpenter-provider-aws v0.34.0 is the first with `disruption.budgets`); drift is the `drift` feature
gate, off by default in v0.32 and on from v0.33 (charts/karpenter/values.yaml at those tags); expiry stays a
graceful disruption, as in v0.31; kubelet settings stay on the NodePool (`spec.template.spec.kubelet`), so there is
no note for them; and there is no alias, so no AMI note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND
from karpenter_policy.api.violations import (
    MIGRATION_AMI,
    MIGRATION_BUDGET,
    MIGRATION_DRIFT,
    MIGRATION_EMPTINESS,
    MIGRATION_EXPIRY,
    MIGRATION_INLINE_PROVIDER,
    MIGRATION_KUBELET,
    WARNING,
    Path,
)
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.commands.compile.manifests import duration

__all__ = ["node_template_notes", "provisioner_notes"]


def _at(doc: Document, rule: str, path: Path, message: str, kind: str, at_key: bool = True) -> Finding:
    line, column = doc.position(path, at_key)
    name = str(doc.data["metadata"]["name"])
    return Finding(rule, WARNING, message, doc.file, line, column, f"{kind}/{name}")


@dataclass(frozen=True)
class _Wording:
    """What the notes of one target API say: budgets, drift, emptiness and expiry (the names, durations and class
    filled in by `provisioner_notes`)."""

    budget: str
    drift: str
    emptiness: str
    expiry: str


_V1 = _Wording(
    budget="Karpenter v0.31 disrupted one node at a time; NodePool {name} gets budgets [{{nodes: \"{budget}\"}}] to "
    "keep a pace (v1's default would be 10% of its nodes at once); --budget sets another",
    drift="drift is always on in v1: NodePool {name}'s nodes are replaced when they no longer match it or its "
    "EC2NodeClass {node_class} (a new AMI, an edited requirement); add a budget "
    "{{nodes: \"0\", reasons: [Drifted]}} to keep v0.31's default (featureGates.driftEnabled: false)",
    emptiness="ttlSecondsAfterEmpty {ttl} becomes consolidationPolicy: WhenEmpty, consolidateAfter: {duration}: "
    "empty nodes are removed by the disruption controller, within the NodePool's budgets",
    expiry="ttlSecondsUntilExpired {ttl} becomes expireAfter: {duration}, which is forceful in v1: an expired node "
    "is deleted without waiting for budgets or replacement capacity; set "
    "spec.template.spec.terminationGracePeriod to bound its drain, or expireAfter: Never and let drift replace "
    "nodes within the budgets",
)
_V1BETA1 = _Wording(
    budget="Karpenter v0.31 disrupted one node at a time; NodePool {name} gets budgets [{{nodes: \"{budget}\"}}] "
    "(--budget sets another), which Karpenter reads from v0.34: v0.32 and v0.33 have no budgets and drop the "
    "field; from v0.34 a NodePool without budgets may disrupt 10% of its nodes at once",
    drift="drift is the `drift` feature gate in v1beta1: off by default in v0.32, on from v0.33, when NodePool "
    "{name}'s nodes are replaced once they no longer match it or its EC2NodeClass (a new AMI, an edited "
    "requirement); set settings.featureGates.drift: false to keep v0.31's default",
    emptiness="ttlSecondsAfterEmpty {ttl} becomes consolidationPolicy: WhenEmpty, consolidateAfter: {duration}: "
    "empty nodes are removed by the disruption controller (within the NodePool's budgets from v0.34)",
    expiry="ttlSecondsUntilExpired {ttl} becomes disruption.expireAfter: {duration}, a graceful disruption in "
    "v1beta1 as in v0.31 (replacement first, pod disruption budgets respected); v1 makes expiry forceful, so "
    "revisit it when moving on to v1",
)


def provisioner_notes(
    doc: Document, node_pool: Mapping[str, Any], budget: str, node_class: str, v1beta1: bool = False
) -> list[Finding]:
    """The behaviour changes of migrating the Provisioner `doc` to `node_pool` (module doc): to a v1 NodePool, or
    with `v1beta1` to a `karpenter.sh/v1beta1` one (no kubelet note: the settings stay on the NodePool)."""
    spec: Mapping[str, Any] = doc.data.get("spec") or {}
    name = str(doc.data["metadata"]["name"])
    words = _V1BETA1 if v1beta1 else _V1
    at_name = ("metadata", "name")
    found = [
        _at(doc, MIGRATION_BUDGET, at_name, words.budget.format(name=name, budget=budget), PROVISIONER_KIND),
        _at(doc, MIGRATION_DRIFT, at_name, words.drift.format(name=name, node_class=node_class), PROVISIONER_KIND),
    ]
    for field, rule, wording in (
        ("ttlSecondsAfterEmpty", MIGRATION_EMPTINESS, words.emptiness),
        ("ttlSecondsUntilExpired", MIGRATION_EXPIRY, words.expiry),
    ):
        ttl = spec.get(field)
        if ttl is not None:
            message = wording.format(ttl=ttl, duration=duration(int(ttl)))
            found.append(_at(doc, rule, ("spec", field), message, PROVISIONER_KIND))
    if not v1beta1 and spec.get("kubeletConfiguration"):
        found.append(
            _at(
                doc,
                MIGRATION_KUBELET,
                ("spec", "kubeletConfiguration"),
                f"kubeletConfiguration moves to EC2NodeClass {node_class} (spec.kubelet): v1 keeps kubelet "
                "settings there" + (
                    f"; {node_class} is this Provisioner's own, as its AWSNodeTemplate serves Provisioners with "
                    "other kubelet settings"
                    if node_class != _template_name(spec)
                    else ""
                ),
                PROVISIONER_KIND,
            )
        )
    if isinstance(spec.get("provider"), Mapping):
        inline_class = name if v1beta1 else node_class
        found.append(
            _at(
                doc,
                MIGRATION_INLINE_PROVIDER,
                ("spec", "provider"),
                f"the inline provider becomes EC2NodeClass {inline_class}, written before NodePool {name}",
                PROVISIONER_KIND,
            )
        )
    return found


def _template_name(spec: Mapping[str, Any]) -> str | None:
    reference = spec.get("providerRef")
    return str(reference.get("name")) if isinstance(reference, Mapping) else None


def node_template_notes(
    doc: Document, node_class: Mapping[str, Any], base: Path = ("spec",), kind: str = NODE_TEMPLATE_KIND
) -> list[Finding]:
    """The behaviour changes of migrating the node template at `base` of `doc` (an AWSNodeTemplate's spec, or a
    Provisioner's inline `provider`) to `node_class` (module doc)."""
    spec: Any = doc.data
    for part in base:
        spec = spec.get(part) if isinstance(spec, Mapping) else None
    spec = spec if isinstance(spec, Mapping) else {}
    terms = (node_class.get("spec") or {}).get("amiSelectorTerms") or []
    aliases = [str(t["alias"]) for t in terms if isinstance(t, Mapping) and "alias" in t]
    if spec.get("amiSelector") or not aliases:
        return []
    family = str(spec.get("amiFamily") or "AL2")
    path: Path = (*base, "amiFamily") if "amiFamily" in spec else ("metadata", "name")
    return [
        _at(
            doc,
            MIGRATION_AMI,
            path,
            f"amiFamily {family} becomes amiSelectorTerms [{{alias: {aliases[0]}}}], the latest EKS-optimised AMI "
            "as v0.31 chose; with drift always on, each new AMI replaces the nodes: pin a version "
            f"({aliases[0].split('@')[0]}@v20240807) to choose when",
            kind,
        )
    ]
