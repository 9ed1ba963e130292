"""Prove that a v1 NodePool admits what the v1alpha5 Provisioner it was migrated from admitted (`migrate`).

Three things are compared:

* **the offerings** — every (instance type, zone, capacity type) of the catalog with an available offering, and
  every value of each custom label either side mentions — with Z3 (`solver.equivalence`), each side read as its
  own Karpenter reads it, through the readings `check` proves:
  - the Provisioner's side as Karpenter v0.31.1: what `solver.terms_of` proves (its requirements, v0.31's default
    requirements, its labels as `key In [value]`), against the catalog's v0.31 labels. v0.31 knows none of the
    labels v1.14.1 added (`model.labels.V1_INSTANCE_LABELS`: they lie in its restricted domain
    `karpenter.k8s.aws`, which validation refuses in a Provisioner), so its side never restricts them.
  - the NodePool's side as Karpenter v1.14.1: the engine's one view of a NodePool (`api.v1.objects.NodePool` and
    `provisioner_document`, what `check` proves of NodePools): `spec.template.spec.requirements` intersected with
    `spec.template.metadata.labels`, no default requirements (v1.14.1
    `pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go` `NewNodeClaimTemplate`), `Gte`/`Lte` as
    written, read against the catalog's v1.14.1 labels (`Solver(v1=True)`: the CPU manufacturer, sustained clock
    speed, EBS bandwidth and flex capability of each type; the tenancy, which a node takes from its launch).
    `karpenter.sh/capacity-type: reserved` names the EC2NodeClass's capacity reservations, of which the catalog
    has none: it adds no offering. Its `minValues` (`NodePool.min_values`, merged per key) are met or not as
    `check` decides (`InstanceTable.unmet_min_values` over the types the NodePool admits): under Karpenter's
    default Strict policy a NodePool whose minValues its types cannot meet launches nothing, so it admits no
    offering and the counter-example names the minValues.
  Both sides are one Z3 problem over the v1.14.1 table; the Provisioner's terms read only v0.31's labels, whose
  values are the same in both. A custom label (one the catalog does not define) that one side does not mention
  is absent on its nodes: a pod requiring it is refused there (Karpenter's `Requirements.Compatible`, undefined
  labels allowed only when well known) — so that side gets `key DoesNotExist`. Keys Karpenter ignores when
  scheduling (the region) are left out on both sides.
* **the labels** — the Provisioner's `spec.labels` (beta keys as GA) against the NodePool's template labels;
* **the taints** — `taints` and `startupTaints`, each as a set of (key, value, effect).

The outcome says "proven equivalent" or names the first difference: an offering one side admits and the other
does not (with the custom label values, and the offering's value of each v1.14.1 label either side names), or a
label or taint that differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.objects import taints_of
from karpenter_policy.api.v1.objects import NodePool, provisioner_document
from karpenter_policy.catalog import Catalog
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
from karpenter_policy.model import labels as wk
from karpenter_policy.model.labels import normalize_key
from karpenter_policy.model.requirements import Requirement

__all__ = ["Equivalence", "migration_solver", "node_pool_terms", "prove_migration"]


@dataclass(frozen=True, slots=True)
class Equivalence:
    """The verdict on one Provisioner and its NodePool: `proven` or why not (`reason`, and for an offering the
    solver's `difference`)."""

    proven: bool
    reason: str = ""
    difference: Difference | None = None
    seconds: float = 0.0


def migration_solver(catalog: Catalog, os: str = "linux") -> Solver:
    """The solver the proofs of a migration read the catalog with: v1.14.1's labels (`Solver(v1=True)`), which the
    NodePool's side needs and the Provisioner's side does not name (module doc)."""
    return Solver(catalog, os=os, v1=True)


def _mapping(data: Any, *path: str) -> Mapping[str, Any]:
    for part in path:
        data = data.get(part) if isinstance(data, Mapping) else None
    return data if isinstance(data, Mapping) else {}


def node_pool_terms(node_pool: Mapping[str, Any]) -> list[Term]:
    """The terms of a v1 NodePool document: its template requirements and its template labels, as `check` proves
    them (`api.v1.objects.provisioner_document`: no default requirements)."""
    return terms_of(provisioner_document(NodePool.from_document(node_pool)))


def _absent_custom_labels(terms: Sequence[Term], other: Sequence[Term], solver: Solver) -> list[Term]:
    """`key DoesNotExist` for each custom label `other` mentions and `terms` does not (a label the catalog gives
    its values — a column or the tenancy — is no custom label)."""
    mentioned = {t.key for t in terms}
    defined = {t.key for t in other if solver.table.defines(t.key)}
    custom = sorted({t.key for t in other} - mentioned - set(OFFERING_KEYS) - defined)
    return [Term(Requirement(key, False), ("spec",), Origin.DEFAULT) for key in custom]


def _describe_labels(labels: Sequence[tuple[str, str | None]]) -> str:
    parts = [f"{k}={v}" if v is not None else f"no {k} label" for k, v in labels]
    return f" (node labels: {', '.join(parts)})" if parts else ""


def _v1_labels(difference: Difference, terms: Sequence[Term], solver: Solver) -> tuple[tuple[str, str | None], ...]:
    """The offering's instance type's value of each v1.14.1 instance-type label `terms` name (a launch label's,
    the tenancy's, is among the difference's own labels)."""
    instance_type = solver.table.catalog.get(difference.instance_type)
    keys = sorted({t.key for t in terms} & wk.V1_INSTANCE_LABELS - solver.table.launch_values.keys())
    return tuple((k, instance_type.v1_labels.get(k) if instance_type is not None else None) for k in keys)


def _unmet_min_values(pool: NodePool, terms: Sequence[Term], solver: Solver) -> str:
    """Why the NodePool launches nothing under Karpenter's default Strict minValues policy — a key whose
    `minValues` the instance types it admits do not meet, as `check` decides it (`InstanceTable.unmet_min_values`)
    — or "" when every minValues is met (or it has none)."""
    wanted = pool.min_values
    if not wanted:
        return ""
    admitted = solver.solve(terms)
    if admitted.verdict != Verdict.SAT:
        return ""  # it admits nothing anyway; the equivalence says so
    table = solver.instances
    mask = table.mask_of_names(admitted.instance_types)
    unmet = table.unmet_min_values(wanted, mask)
    if not unmet:
        return ""
    key = sorted(unmet)[0]
    count = len(admitted.instance_types)
    return (
        f"{key} minValues {wanted[key]}: the {count} instance type{'s' if count != 1 else ''} it admits carry "
        f"{unmet[key]} value{'s' if unmet[key] != 1 else ''}, so under Karpenter's default Strict minValues policy "
        "it launches no node"
    )


def prove_migration(
    provisioner: Mapping[str, Any], node_pool: Mapping[str, Any], solver: Solver
) -> Equivalence:
    """Whether `node_pool` admits exactly the offerings, labels and taints `provisioner` admits (module doc).
    `solver` reads v1.14.1's labels (`migration_solver`; ValueError otherwise): the NodePool's side needs them."""
    if not solver.v1:
        raise ValueError("a NodePool is proven with the labels of its own API version: migration_solver(catalog)")
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
    unknown = sorted({t.key for t in first} & wk.V1_INSTANCE_LABELS)
    if unknown:  # validation refuses them (a restricted domain in v0.31): only a caller that skipped it gets here
        return Equivalence(
            False, f"Provisioner {name} names {unknown[0]}, a label Karpenter v0.31 does not know (v1.14.1's)"
        )
    second = node_pool_terms(node_pool)
    first += _absent_custom_labels(first, second, solver)
    second += _absent_custom_labels(second, first, solver)
    unmet = _unmet_min_values(pool, second, solver)
    if unmet:
        admitted = solver.solve(first)
        if admitted.verdict == Verdict.SAT and admitted.witness is not None:
            w = admitted.witness
            d = Difference(True, w.instance_type, w.zone, w.capacity_type)
            return Equivalence(
                False,
                f"Provisioner {name} admits {w.instance_type} {w.capacity_type} in {w.zone}, NodePool {pool_name} "
                f"does not: {unmet}",
                d,
                admitted.seconds,
            )
        return Equivalence(True, seconds=admitted.seconds)  # neither side launches anything
    result = equivalence(solver, first, second)
    if result.verdict == Verdict.UNSAT:
        return Equivalence(True, seconds=result.seconds)
    if result.verdict == Verdict.UNKNOWN or result.difference is None:
        return Equivalence(False, f"the solver gave up ({result.reason or 'unknown'})", seconds=result.seconds)
    d = result.difference
    admits, refuses = (f"Provisioner {name}", f"NodePool {pool_name}")
    if not d.first:
        admits, refuses = refuses, admits
    described = _describe_labels((*_v1_labels(d, second, solver), *d.labels))
    return Equivalence(
        False,
        f"{admits} admits {d.instance_type} {d.capacity_type} in {d.zone}{described}, {refuses} does not",
        d,
        result.seconds,
    )
