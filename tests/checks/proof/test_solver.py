"""The Z3 encoding: terms and their sources, Karpenter's per-key matching, verdicts, minimal cores, witnesses.

The strongest test is the last one: on random provisioners over the embedded catalog, the solver's verdict,
witness, instance-type list and cores agree with a brute-force filter of every (type, offering) pair.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import examples

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.table import custom_representatives, table_for
from karpenter_policy.checks.proof import solver as solver_module
from karpenter_policy.checks.proof.solver import (
    Origin,
    Solver,
    Term,
    Verdict,
    terms_of,
)
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering, known_price, price_key
from karpenter_policy.model.requirements import Requirement


def provisioner(
    requirements: Sequence[Mapping[str, Any]] = (), labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"requirements": [dict(r) for r in requirements]}
    if labels:
        spec["labels"] = dict(labels)
    return {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "p"}, "spec": spec}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    term: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        term["values"] = list(values)
    return term


def offerings(
    zones: Sequence[str] = ("z-1a", "z-1b"), capacity: Sequence[str] = ("on-demand", "spot")
) -> tuple[Offering, ...]:
    pairs = [(z, c) for z in zones for c in capacity]
    return tuple(Offering(z, c, 0.1 + 0.01 * i) for i, (z, c) in enumerate(pairs))


def instance_type(name: str, arch: str = "amd64", vcpu: int = 2, **kwargs: Any) -> InstanceType:
    kwargs.setdefault("offerings", offerings())
    return InstanceType(
        name=name, vcpu=vcpu, memory_mib=vcpu * 4096, architectures=(arch,), hypervisor="nitro", **kwargs
    )


SMALL = Catalog(
    "test-1",
    (
        instance_type("c5.large"),
        instance_type("c5.xlarge", vcpu=4),
        instance_type("m5.large", offerings=offerings(zones=("z-1a",))),
        instance_type("c7g.large", arch="arm64"),
        instance_type("g5.xlarge", vcpu=4, gpu_count=1, gpu_name="a10g", gpu_manufacturer="nvidia",
                      gpu_memory_mib=24576, offerings=offerings(capacity=("on-demand",))),
        instance_type("r5.large", offerings=()),  # no offering at all
    ),
)


def solve(doc: Mapping[str, Any], catalog: Catalog = SMALL, timeout_ms: int = 5000) -> tuple[list[Term], Any]:
    terms = terms_of(doc)
    return terms, Solver(catalog, timeout_ms).solve(terms)


def core_paths(outcome: Any) -> list[list[tuple[Any, ...]]]:
    return [[term.path for term in core] for core in outcome.cores]


# --- terms --------------------------------------------------------------------------------------------------


def test_terms_carry_their_source() -> None:
    doc = provisioner(
        [req(wk.INSTANCE_FAMILY, "In", "c5"), req("failure-domain.beta.kubernetes.io/zone", "In", "z")],
        labels={"team": "a"},
    )
    terms = terms_of(doc)
    assert [(t.key, t.path, t.origin) for t in terms] == [
        (wk.INSTANCE_FAMILY, ("spec", "requirements", 0), Origin.REQUIREMENT),
        (wk.ZONE, ("spec", "requirements", 1), Origin.REQUIREMENT),  # beta key read as the GA key
        (wk.OS, ("spec", "requirements"), Origin.DEFAULT),
        (wk.ARCH, ("spec", "requirements"), Origin.DEFAULT),
        (wk.CAPACITY_TYPE, ("spec", "requirements"), Origin.DEFAULT),
        ("team", ("spec", "labels", "team"), Origin.LABEL),
    ]
    assert str(terms[3]) == "kubernetes.io/arch In [amd64] (Karpenter default)"
    assert str(terms[5]) == "label team=a"


def test_shape_defaults_only_without_a_shape_key_and_region_is_ignored() -> None:
    terms = terms_of(provisioner([req(wk.REGION, "In", "us-west-2")]))
    assert {t.key for t in terms} == {wk.OS, wk.ARCH, wk.CAPACITY_TYPE, wk.INSTANCE_CATEGORY, wk.INSTANCE_GENERATION}


@pytest.mark.parametrize(
    ("operator", "values", "absent_ok"),
    [("In", ["a"], False), ("NotIn", ["a"], True), ("Exists", [], False), ("DoesNotExist", [], True),
     ("Gt", ["1"], False), ("Lt", ["9"], False)],
)
def test_a_type_without_the_label_satisfies_only_negative_operators(
    operator: str, values: list[str], absent_ok: bool
) -> None:
    term = Term(Requirement.new("k", operator, values), ("spec",), Origin.REQUIREMENT)
    assert term.accepts(None) is absent_ok


def test_custom_representatives_cover_every_class() -> None:
    requirements = [Requirement.new("k", "Gt", ["3"]), Requirement.new("k", "Lt", ["10"]),
                    Requirement.new("k", "NotIn", ["4", "9", "007"])]
    values = custom_representatives(requirements)
    signatures = {tuple(r.has(v) for r in requirements) for v in values if v is not None}
    brute = {tuple(r.has(str(n)) for r in requirements) for n in range(0, 50)} | {
        tuple(r.has(v) for r in requirements) for v in ("007", "x")
    }
    assert brute <= signatures
    assert None in values


# --- verdicts and cores --------------------------------------------------------------------------------------


def test_satisfiable_gives_a_witness_and_every_type() -> None:
    _, outcome = solve(provisioner([req(wk.INSTANCE_FAMILY, "In", "c5", "m5")]))
    assert outcome.verdict == Verdict.SAT
    assert outcome.instance_types == ("c5.large", "c5.xlarge", "m5.large")
    assert outcome.witness is not None and outcome.witness.instance_type in outcome.instance_types
    assert outcome.witness.capacity_type == "on-demand"  # the Karpenter default
    assert outcome.zones == ("z-1a", "z-1b") and outcome.capacity_types == ("on-demand",)


def test_arch_vs_family_core() -> None:
    _, outcome = solve(provisioner([req(wk.ARCH, "In", "arm64"), req(wk.INSTANCE_FAMILY, "In", "c5")]))
    assert outcome.verdict == Verdict.UNSAT
    assert core_paths(outcome) == [[("spec", "requirements", 0), ("spec", "requirements", 1)]]


def test_default_arch_is_in_the_core() -> None:
    terms, outcome = solve(provisioner([req(wk.INSTANCE_FAMILY, "In", "c7g")]))
    [core] = outcome.cores
    assert {(t.key, t.origin) for t in core} == {(wk.INSTANCE_FAMILY, Origin.REQUIREMENT), (wk.ARCH, Origin.DEFAULT)}


@pytest.mark.parametrize(
    ("requirements", "labels"),
    [
        ([req(wk.INSTANCE_FAMILY, "In", "c5"), req(wk.INSTANCE_FAMILY, "NotIn", "c5")], None),  # In vs NotIn
        ([req(wk.INSTANCE_CPU, "Gt", "2"), req(wk.INSTANCE_CPU, "Lt", "3")], None),  # Gt vs Lt
        ([req("team", "In", "b")], {"team": "a"}),  # label vs requirement
        ([req(wk.INSTANCE_FAMILY, "In", "c5"), req(wk.INSTANCE_GPU_COUNT, "Gt", "0")], None),  # GPU on non-GPU
        ([req("example.com/x", "DoesNotExist"), req("example.com/x", "Exists")], None),  # custom key
    ],
    ids=["in-notin", "gt-lt", "label-requirement", "gpu-family", "custom-exists"],
)
def test_two_member_conflicts(requirements: list[dict[str, Any]], labels: dict[str, str] | None) -> None:
    terms, outcome = solve(provisioner(requirements, labels))
    assert outcome.verdict == Verdict.UNSAT
    [core] = outcome.cores
    assert len(core) == 2
    assert all(t.origin != Origin.DEFAULT for t in core)


@pytest.mark.parametrize(
    "requirement",
    [req(wk.CAPACITY_TYPE, "In", "spot-ish"), req(wk.INSTANCE_CPU, "Gt", "64"), req(wk.ZONE, "In", "elsewhere"),
     req(wk.INSTANCE_TYPE, "In", "r5.large"), req(wk.ARCH, "DoesNotExist")],
    ids=["capacity-type", "cpu", "zone", "no-offering", "arch-absent"],
)
def test_single_member_cores(requirement: dict[str, Any]) -> None:
    _, outcome = solve(provisioner([requirement]))
    assert core_paths(outcome) == [[("spec", "requirements", 0)]]


def test_three_member_core_is_minimal() -> None:
    # m5.large is only in z-1a, g5 is on demand only: {type, zone z-1b} fine via g5, {type, spot} fine via m5 …
    doc = provisioner([
        req(wk.INSTANCE_TYPE, "In", "m5.large", "g5.xlarge"),
        req(wk.ZONE, "In", "z-1b"),
        req(wk.CAPACITY_TYPE, "In", "spot"),
        req(wk.OS, "In", "linux"),
        req(wk.INSTANCE_HYPERVISOR, "In", "nitro"),
    ])
    terms, outcome = solve(doc)
    [core] = outcome.cores
    assert [t.path for t in core] == [("spec", "requirements", i) for i in (0, 1, 2)]
    solver = Solver(SMALL)
    for dropped in range(3):  # minimal: without any one member the rest is satisfiable
        rest = [t for i, t in enumerate(core) if i != dropped]
        assert solver.solve(rest).verdict == Verdict.SAT


def test_independent_conflicts_are_all_reported() -> None:
    doc = provisioner([
        req(wk.ARCH, "In", "arm64"), req(wk.INSTANCE_FAMILY, "In", "c5"),
        req("tier", "Gt", "5"), req("tier", "Lt", "3"),
    ])
    _, outcome = solve(doc)
    assert sorted(core_paths(outcome)) == [
        [("spec", "requirements", 0), ("spec", "requirements", 1)],
        [("spec", "requirements", 2), ("spec", "requirements", 3)],
    ]


def test_an_empty_catalog_has_an_empty_core() -> None:
    _, outcome = solve(provisioner([]), Catalog("empty-1", ()))
    assert outcome.verdict == Verdict.UNSAT and outcome.cores == ((),)


def test_solving_is_deterministic() -> None:
    doc = provisioner([req(wk.INSTANCE_CATEGORY, "In", "c", "m"), req(wk.CAPACITY_TYPE, "In", "spot", "on-demand")])
    first, second = solve(doc)[1], solve(doc)[1]
    assert first.witness == second.witness and first.instance_types == second.instance_types


def test_one_solver_serves_many_provisioners() -> None:
    solver = Solver(SMALL)
    conflicting = terms_of(provisioner([req(wk.ARCH, "In", "arm64"), req(wk.INSTANCE_FAMILY, "In", "c5")]))
    fine = terms_of(provisioner([req(wk.INSTANCE_FAMILY, "In", "c5")]))
    verdicts = [solver.solve(t).verdict for t in (conflicting, fine, conflicting, fine)]
    assert verdicts == [Verdict.UNSAT, Verdict.SAT, Verdict.UNSAT, Verdict.SAT]


def test_a_timeout_is_a_verdict_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    solver = Solver(SMALL, timeout_ms=1)
    monkeypatch.setattr(solver_module.z3.Solver, "check", lambda *_: solver_module.z3.unknown)
    # unsatisfiable: the bit masks cannot decide it, Z3 must (and here gives up)
    outcome = solver.solve(terms_of(provisioner([req(wk.ARCH, "In", "arm64"), req(wk.INSTANCE_FAMILY, "In", "c5")])))
    assert outcome.verdict == Verdict.UNKNOWN and outcome.witness is None and outcome.cores == ()


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Solver(SMALL, timeout_ms=0)


def test_the_table_is_built_once_per_catalog() -> None:
    assert table_for(SMALL) is table_for(SMALL)
    assert Solver(SMALL).table is Solver(SMALL).table


# --- agreement with brute force on the embedded catalog -------------------------------------------------------

CATALOG = load_catalog()
TABLE = table_for(CATALOG)
LABELS = [it.labels() for it in CATALOG]


def brute_force(terms: Sequence[Term]) -> list[str]:
    """Every type that has an available offering every term accepts (Karpenter's rules, no solver)."""
    found = []
    for it, labels in zip(CATALOG, LABELS, strict=True):
        if not all(t.accepts(labels.get(t.key)) for t in terms if TABLE.is_catalog_key(t.key)):
            continue
        offers = [o for o in it.offerings if o.available]
        if any(
            all(t.accepts(o.zone) for t in terms if t.key == wk.ZONE)
            and all(t.accepts(o.capacity_type) for t in terms if t.key == wk.CAPACITY_TYPE)
            for o in offers
        ):
            found.append(it.name)
    return found


def custom_ok(terms: Sequence[Term]) -> bool:
    custom = {t.key for t in terms if not TABLE.is_catalog_key(t.key) and t.key not in (wk.ZONE, wk.CAPACITY_TYPE)}
    for key in custom:
        mine = [t for t in terms if t.key == key]
        values = custom_representatives([t.requirement for t in mine])
        if not any(all(t.accepts(v) for t in mine) for v in values):
            return False
    return True


def _values(key: str, count: int) -> st.SearchStrategy[list[str]]:
    domain = list(TABLE.zones if key == wk.ZONE else TABLE.capacity_types if key == wk.CAPACITY_TYPE
                  else ["linux", "windows"] if key == wk.OS else TABLE.domains[key])
    return st.lists(st.sampled_from(domain + ["nope"]), min_size=1, max_size=count, unique=True)


_KEYS = (wk.ARCH, wk.INSTANCE_FAMILY, wk.INSTANCE_CATEGORY, wk.INSTANCE_SIZE, wk.ZONE, wk.CAPACITY_TYPE,
         wk.INSTANCE_GPU_NAME, wk.INSTANCE_HYPERVISOR, wk.INSTANCE_TYPE, wk.OS)
_NUMERIC = (wk.INSTANCE_CPU, wk.INSTANCE_GENERATION, wk.INSTANCE_GPU_COUNT, wk.INSTANCE_LOCAL_NVME)


@st.composite
def requirement_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    result = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(("listed", "bound", "exists", "custom")))
        if kind == "listed":
            key = draw(st.sampled_from(_KEYS))
            result.append(req(key, draw(st.sampled_from(("In", "NotIn"))), *draw(_values(key, 4))))
        elif kind == "bound":
            key = draw(st.sampled_from(_NUMERIC))
            result.append(req(key, draw(st.sampled_from(("Gt", "Lt"))), str(draw(st.integers(0, 200)))))
        elif kind == "exists":
            key = draw(st.sampled_from(_KEYS + _NUMERIC))
            result.append(req(key, draw(st.sampled_from(("Exists", "DoesNotExist")))))
        else:
            operator = draw(st.sampled_from(("In", "NotIn", "Gt", "Lt", "Exists", "DoesNotExist")))
            values = [str(draw(st.integers(0, 9)))] if operator in ("Gt", "Lt") else (
                draw(st.lists(st.sampled_from("abc123"), min_size=1, max_size=3, unique=True))
                if operator in ("In", "NotIn") else [])
            result.append(req("example.com/x", operator, *values))
    return result


SOLVER = Solver(CATALOG)


def cheapest_offering(terms: Sequence[Term]) -> tuple[float | None, str, str, str]:
    """(price, type, zone, capacity type) of the cheapest available offering every term accepts (unpriced last)."""
    price, name, zone, capacity_type = min(
        (price_key(o.price), name, o.zone, o.capacity_type)
        for name in brute_force(terms)
        for o in CATALOG.get(name).offerings  # type: ignore[union-attr]
        if o.available
        and all(t.accepts(o.zone) for t in terms if t.key == wk.ZONE)
        and all(t.accepts(o.capacity_type) for t in terms if t.key == wk.CAPACITY_TYPE)
    )
    return known_price(price), name, zone, capacity_type


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requirement_lists())
def test_the_solver_agrees_with_brute_force(requirements: list[dict[str, Any]]) -> None:
    terms = terms_of(provisioner(requirements))
    outcome = SOLVER.solve(terms)
    expected = brute_force(terms) if custom_ok(terms) else []
    if outcome.verdict == Verdict.SAT:
        assert list(outcome.instance_types) == expected
        witness = outcome.witness
        assert witness is not None
        # the witness is the cheapest offering that satisfies every term (ties: type, zone, capacity type)
        assert (witness.price, witness.instance_type, witness.zone, witness.capacity_type) == cheapest_offering(terms)
    else:
        assert outcome.verdict == Verdict.UNSAT
        assert expected == []
        for core in outcome.cores:  # each core is unsatisfiable, and minimal
            assert not brute_force(core) or not custom_ok(core)
            for dropped in range(len(core)):
                rest = [t for i, t in enumerate(core) if i != dropped]
                assert brute_force(rest) and custom_ok(rest), (core, dropped)


# --- the bit masks decide what is satisfiable; Z3 only the rest -----------------------------------------------

FAST = {os: Solver(CATALOG, os=os, fast_path=True) for os in ("linux", "windows")}
Z3_ONLY = {os: Solver(CATALOG, os=os, fast_path=False) for os in ("linux", "windows")}


@st.composite
def provisioners(draw: st.DrawFn) -> dict[str, Any]:
    """Random requirements (as above, the OS and instance types included) and, sometimes, a custom label."""
    labels = {"example.com/x": draw(st.sampled_from("abc1"))} if draw(st.booleans()) else None
    return provisioner(draw(requirement_lists()), labels)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(provisioners(), st.sampled_from(("linux", "windows")))
def test_the_bit_masks_and_z3_give_the_same_verdict_and_outputs(document: dict[str, Any], os: str) -> None:
    terms = terms_of(document)
    fast, proven = FAST[os].solve(terms), Z3_ONLY[os].solve(terms)
    assert fast.verdict == proven.verdict
    assert (fast.instance_types, fast.zones, fast.capacity_types, fast.witness) == (
        proven.instance_types, proven.zones, proven.capacity_types, proven.witness)
    assert [[t.path for t in core] for core in fast.cores] == [[t.path for t in core] for core in proven.cores]
    if fast.verdict == Verdict.SAT:
        assert fast.checks == 0 and proven.checks > 0  # decided without Z3


def test_windows_nodes_satisfy_only_a_windows_os_requirement() -> None:
    windows = terms_of(provisioner([req(wk.OS, "In", "windows")]))
    assert FAST["windows"].solve(windows).verdict == Verdict.SAT
    assert FAST["linux"].solve(windows).verdict == Verdict.UNSAT


def test_what_z3_accumulates_stays_bounded() -> None:
    """Every unsatisfiable provisioner reaches Z3, its declarations named apart; a fresh context every
    PROBLEMS_PER_CONTEXT problems frees them. In one context for the whole run, Z3's memory (and the time of
    every call) grows with every provisioner ever checked."""
    solver = Solver(CATALOG, timeout_ms=5000)
    per_context = solver_module.PROBLEMS_PER_CONTEXT

    def unsatisfiable(index: int) -> list[Term]:
        return terms_of(provisioner([req(wk.INSTANCE_CPU, "Gt", str(1000 + index)), req("team", "In", f"t{index}")]))

    def allocated() -> int:
        gc.collect()  # contexts other tests left behind in this process are freed first, not during the loop
        return int(solver_module.z3.z3core.Z3_get_estimated_alloc_size())

    for index in range(per_context):
        assert solver.solve(unsatisfiable(index)).verdict == Verdict.UNSAT
    before = allocated()
    for index in range(per_context, 4 * per_context):
        assert solver.solve(unsatisfiable(index)).verdict == Verdict.UNSAT
    assert allocated() - before < 1_000_000  # in one context: ≈ 3 KB more per provisioner, ≈ 2.3 MB here
