"""Prove that a v1 NodePool admits what the v1alpha5 Provisioner it was migrated from admitted (`migrate`).

Three things are compared:

* **the offerings** — every (instance type, zone, capacity type) of the catalog with an available offering, and
  every value of each custom label either side mentions — with Z3 (`solver.equivalence`): the Provisioner's side
  is what `solver.terms_of` proves (its requirements, Karpenter's default requirements, its labels as
  `key In [value]`); the NodePool's side is read from the v1 document itself through the engine's one view of a
  NodePool (`api.v1.objects.NodePool` and `provisioner_document`, what `check` proves of NodePools):
  `spec.template.spec.requirements` intersected with `spec.template.metadata.labels`, no default requirements
  (Karpenter v1.14.1 `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go` `NewNodeClaimTemplate` reads a
  NodePool so). A custom label (one the catalog does not define) that one side does not mention is absent on its
  nodes: a pod requiring it is refused there (Karpenter's `Requirements.Compatible`, undefined labels allowed only
  when well known) — so that side gets `key DoesNotExist`. Keys Karpenter ignores when scheduling (the region)
  are left out on both sides. Both sides are read against the same catalog, with the label values it has.
* **the labels** — the Provisioner's `spec.labels` (beta keys as GA) against the NodePool's template labels;
* **the taints** — `taints` and `startupTaints`, each as a set of (key, value, effect).

The outcome says "proven equivalent" or names the first difference: an offering one side admits and the other
does not (with the custom label values), or a label or taint that differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.objects import taints_of
from karpenter_policy.api.v1.objects import NodePool, provisioner_document
from karpenter_policy.catalog.table import OFFERING_KEYS
from karpenter_policy.checks.proof.solver import (
    Difference,
    Origin,
    Solver,
    Term,
    Verdict,
    equivalence,
    terms_of,
)
from karpenter_policy.model.labels import normalize_key
from karpenter_policy.model.requirements import Requirement

__all__ = ["Equivalence", "node_pool_terms", "prove_migration"]

@dataclass(frozen=True, slots=True)
class Equivalence:
    """The verdict on one Provisioner and its NodePool: `proven` or why not (`reason`, and for an offering the
    solver's `difference`)."""

    proven: bool
    reason: str = ""
    difference: Difference | None = None
    seconds: float = 0.0


def _mapping(data: Any, *path: str) -> Mapping[str, Any]:
    for part in path:
        data = data.get(part) if isinstance(data, Mapping) else None
    return data if isinstance(data, Mapping) else {}


def node_pool_terms(node_pool: Mapping[str, Any]) -> list[Term]:
    """The terms of a v1 NodePool document: its template requirements and its template labels, as `check` proves
    them (`api.v1.objects.provisioner_document`: no default requirements)."""
    return terms_of(provisioner_document(NodePool.from_document(node_pool)))


def _absent_custom_labels(terms: Sequence[Term], other: Sequence[Term], solver: Solver) -> list[Term]:
    """`key DoesNotExist` for each custom label `other` mentions and `terms` does not."""
    mentioned = {t.key for t in terms}
    custom = sorted(
        {t.key for t in other}
        - mentioned
        - set(OFFERING_KEYS)
        - {k for k in (t.key for t in other) if solver.table.is_catalog_key(k)}
    )
    return [Term(Requirement(key, False), ("spec",), Origin.DEFAULT) for key in custom]


def _describe_labels(labels: Sequence[tuple[str, str | None]]) -> str:
    parts = [f"{k}={v}" if v is not None else f"no {k} label" for k, v in labels]
    return f" (node labels: {', '.join(parts)})" if parts else ""


def prove_migration(
    provisioner: Mapping[str, Any], node_pool: Mapping[str, Any], solver: Solver
) -> Equivalence:
    """Whether `node_pool` admits exactly the offerings, labels and taints `provisioner` admits (module doc)."""
    spec = _mapping(provisioner, "spec")
    name = str(_mapping(provisioner, "metadata").get("name"))
    pool_name = str(_mapping(node_pool, "metadata").get("name"))
    pool = NodePool.from_document(node_pool)
    labels = {normalize_key(str(k)): str(v) for k, v in _mapping(spec, "labels").items()}
    pool_labels = dict(pool.labels)
    if labels != pool_labels:
        key = sorted(set(labels.items()) ^ set(pool_labels.items()))[0][0]
        return Equivalence(
            False,
            f"label {key}: Provisioner {name} sets {labels.get(key, '(nothing)')}, NodePool {pool_name} sets "
            f"{pool_labels.get(key, '(nothing)')}",
        )
    for field_name, theirs in (("taints", set(pool.taints)), ("startupTaints", set(pool.startup_taints))):
        mine = set(taints_of(spec, field_name))
        if mine != theirs:
            taint = sorted(mine ^ theirs, key=lambda t: (t.key, t.value, t.effect))[0]
            holder = f"Provisioner {name}" if taint in mine else f"NodePool {pool_name}"
            return Equivalence(False, f"{field_name}: only {holder} has {taint.key}={taint.value}:{taint.effect}")
    first = terms_of(provisioner)
    second = node_pool_terms(node_pool)
    first += _absent_custom_labels(first, second, solver)
    second += _absent_custom_labels(second, first, solver)
    result = equivalence(solver, first, second)
    if result.verdict == Verdict.UNSAT:
        return Equivalence(True, seconds=result.seconds)
    if result.verdict == Verdict.UNKNOWN or result.difference is None:
        return Equivalence(False, f"the solver gave up ({result.reason or 'unknown'})", seconds=result.seconds)
    d = result.difference
    admits, refuses = (f"Provisioner {name}", f"NodePool {pool_name}")
    if not d.first:
        admits, refuses = refuses, admits
    return Equivalence(
        False,
        f"{admits} admits {d.instance_type} {d.capacity_type} in {d.zone}{_describe_labels(d.labels)}, "
        f"{refuses} does not",
        d,
        result.seconds,
    )
