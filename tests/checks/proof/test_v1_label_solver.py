"""The solver on the instance labels Karpenter v1.14.1 added (`model.labels.V1_INSTANCE_LABELS`: CPU manufacturer,
sustained clock speed, EBS bandwidth, flex, tenancy), per API version (issue #25).

A v1 NodePool's types carry them (aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go
`computeRequirements`: each type's value, a type without one has none, and every type offers both tenancies), so
Z3's verdict on a NodePool's terms must be brute force's over the embedded catalog with those labels; a v1alpha5
Provisioner's types carry none of them (v0.31.1 had none), so there they stay custom labels, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import examples

from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.catalog import load_catalog
from karpenter_policy.catalog.table import custom_representatives, table_for
from karpenter_policy.checks.proof.solver import Solver, Term, Verdict, terms_of
from karpenter_policy.model import labels as wk

CATALOG = load_catalog()
V1_TABLE = table_for(CATALOG, v1=True)
#: Each type's labels as a v1 NodePool's node has them (v0.31's and v1.14.1's), but the tenancy (a launch label).
V1_LABELS = [{**it.labels(), **it.v1_labels} for it in CATALOG]
V0_LABELS = [it.labels() for it in CATALOG]
V1_KEYS = frozenset(V1_TABLE.domains)
V0_KEYS = frozenset(table_for(CATALOG).domains)

Z3_V1 = Solver(CATALOG, fast_path=False, v1=True)
FAST_V1 = Solver(CATALOG, fast_path=True, v1=True)
Z3_V0 = Solver(CATALOG, fast_path=False)


def document(kind: str, requirements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A pool's scheduling view as the proofs read it: a NodePool's has no defaults, a Provisioner's has v0.31's."""
    api = "karpenter.sh/v1" if kind == NODEPOOL_KIND else "karpenter.sh/v1alpha5"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "p"}, "spec": {"requirements": list(requirements)}}


def brute_force(terms: Sequence[Term], v1: bool) -> list[str]:
    """Every type with an available offering that every term accepts, by Karpenter's per-key rule over the labels
    of the API version (`v1`: v1.14.1's too, a tenancy every term on it accepts); the other keys custom."""
    keys, labels = (V1_KEYS, V1_LABELS) if v1 else (V0_KEYS, V0_LABELS)
    launch = wk.V1_LAUNCH_LABELS if v1 else {}
    for key in {t.key for t in terms} - keys - {wk.ZONE, wk.CAPACITY_TYPE}:  # custom or launch: some value
        mine = [t for t in terms if t.key == key]
        values = launch.get(key) or custom_representatives([t.requirement for t in mine])
        if not any(all(t.accepts(v) for t in mine) for v in values):
            return []
    found = []
    for it, carried in zip(CATALOG, labels, strict=True):
        if not all(t.accepts(carried.get(t.key)) for t in terms if t.key in keys):
            continue
        if any(
            all(t.accepts(o.zone) for t in terms if t.key == wk.ZONE)
            and all(t.accepts(o.capacity_type) for t in terms if t.key == wk.CAPACITY_TYPE)
            for o in it.offerings
            if o.available
        ):
            found.append(it.name)
    return found


def _values(key: str) -> st.SearchStrategy[list[str]]:
    domain = list(wk.TENANCIES if key == wk.INSTANCE_TENANCY else V1_TABLE.capacity_types
                  if key == wk.CAPACITY_TYPE else V1_TABLE.domains[key])
    return st.lists(st.sampled_from([*domain, "nope"]), min_size=1, max_size=3, unique=True)


_LISTED = (wk.INSTANCE_CPU_MANUFACTURER, wk.INSTANCE_CAPABILITY_FLEX, wk.INSTANCE_TENANCY, wk.INSTANCE_FAMILY,
           wk.ARCH, wk.CAPACITY_TYPE)
_NUMERIC = (wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, wk.INSTANCE_EBS_BANDWIDTH, wk.INSTANCE_CPU)
_BOUNDS = st.sampled_from([0, 1, 2500, 3000, 3500, 4750, 10000, 20000, 100000])


@st.composite
def requirements(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Up to five requirements, most on v1.14.1's labels (every operator), some on v0.31's."""
    found: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 5))):
        shape = draw(st.sampled_from(("listed", "bound", "exists")))
        if shape == "listed":
            key = draw(st.sampled_from(_LISTED))
            found.append({"key": key, "operator": draw(st.sampled_from(("In", "NotIn"))), "values": draw(_values(key))})
        elif shape == "bound":
            key = draw(st.sampled_from(_NUMERIC))
            found.append({"key": key, "operator": draw(st.sampled_from(("Gt", "Lt"))), "values": [str(draw(_BOUNDS))]})
        else:
            key = draw(st.sampled_from((*_LISTED[:3], *_NUMERIC[:2])))
            found.append({"key": key, "operator": draw(st.sampled_from(("Exists", "DoesNotExist")))})
    return found


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requirements())
def test_z3s_verdict_on_a_nodepool_is_brute_forces_over_the_catalog_with_v1s_labels(
    written: list[dict[str, Any]],
) -> None:
    terms = terms_of(document(NODEPOOL_KIND, written))
    expected = brute_force(terms, v1=True)
    proven = Z3_V1.solve(terms)
    assert proven.verdict == (Verdict.SAT if expected else Verdict.UNSAT)
    if proven.verdict == Verdict.SAT:
        assert list(proven.instance_types) == expected
    for core in proven.cores:  # each core unsatisfiable, and minimal
        assert not brute_force(core, v1=True)
        for dropped in range(len(core)):
            assert brute_force([t for i, t in enumerate(core) if i != dropped], v1=True), (core, dropped)
    fast = FAST_V1.solve(terms)  # the bit masks decide the same, with the same outputs and cores
    assert (fast.verdict, fast.instance_types, fast.witness) == (proven.verdict, proven.instance_types, proven.witness)
    assert [[t.path for t in core] for core in fast.cores] == [[t.path for t in core] for core in proven.cores]


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requirements())
def test_a_provisioners_solver_still_reads_v1s_labels_as_custom_labels(written: list[dict[str, Any]]) -> None:
    terms = terms_of(document("Provisioner", written))
    expected = brute_force(terms, v1=False)
    assert Z3_V0.solve(terms).verdict == (Verdict.SAT if expected else Verdict.UNSAT)
    assert not wk.V1_INSTANCE_LABELS & V0_KEYS


def test_two_tenancies_required_together_conflict_though_every_type_offers_both() -> None:
    """Karpenter intersects a NodePool's requirements on one key: `In [default]` and `In [dedicated]` leave no
    tenancy, whatever the type (each offers both, so a per-type mask of each alone admits every type)."""
    terms = terms_of(document(NODEPOOL_KIND, [
        {"key": wk.INSTANCE_TENANCY, "operator": "In", "values": ["default"]},
        {"key": wk.INSTANCE_TENANCY, "operator": "In", "values": ["dedicated"]},
    ]))
    for solver in (FAST_V1, Z3_V1):
        outcome = solver.solve(terms)
        assert outcome.verdict == Verdict.UNSAT
        assert [[t.path for t in core] for core in outcome.cores] == [
            [("spec", "requirements", 0), ("spec", "requirements", 1)]
        ]
