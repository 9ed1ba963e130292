"""The proof `migrate` gives each Provisioner and its NodePool (`checks/proof/equivalence.py`, through
`solver.equivalence`): proven equivalent when the NodePool admits exactly the same offerings, labels and taints,
else a counter-example that is true of the catalog — and the verdict agrees with a brute-force walk of every
offering of the catalog (Hypothesis). The NodePool's side is read as Karpenter v1.14.1 reads it (its labels,
`Gte`/`Lte`, `minValues`), the Provisioner's as v0.31.1."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.proof.equivalence import migration_solver, node_pool_terms, prove_migration
from karpenter_policy.checks.proof.solver import Solver, Term, terms_of
from karpenter_policy.commands.compile.manifests import V1Options, to_v1
from karpenter_policy.model import labels as wk
from tests.profiles import deterministic


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def solver(catalog: Catalog) -> Solver:
    return migration_solver(catalog)


def _provisioner(requirements: Sequence[Mapping[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "default"},
        "spec": {"requirements": list(requirements), "providerRef": {"name": "default"}, **spec},
    }


def _node_pool(provisioner: Mapping[str, Any]) -> dict[str, Any]:
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "default"},
        "spec": {"subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}, "instanceProfile": "p"},
    }
    objects, _ = to_v1([provisioner], {"default": template}, V1Options())
    return next(o for o in objects if o["kind"] == "NodePool")


def _requirements(pool: dict[str, Any]) -> list[dict[str, Any]]:
    requirements: list[dict[str, Any]] = pool["spec"]["template"]["spec"]["requirements"]
    return requirements


def test_a_converted_provisioner_is_proven_equivalent(solver: Solver) -> None:
    provisioner = _provisioner(
        [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5", "m5"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1e"]},
            {"key": "team", "operator": "In", "values": ["a", "b"]},
        ],
        labels={"tier": "batch"},
        taints=[{"key": "batch", "effect": "NoSchedule"}],
    )

    verdict = prove_migration(provisioner, _node_pool(provisioner), solver)

    assert verdict.proven, verdict.reason


def test_a_narrower_node_pool_gives_an_offering_only_the_provisioner_admits(solver: Solver) -> None:
    provisioner = _provisioner([{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5"]}])
    pool = _node_pool(provisioner)
    _requirements(pool).append({"key": "karpenter.k8s.aws/instance-size", "operator": "NotIn", "values": ["large"]})

    verdict = prove_migration(provisioner, pool, solver)

    assert not verdict.proven and verdict.difference is not None
    assert verdict.difference.first and verdict.difference.instance_type == "c5.large"
    assert verdict.reason.startswith("Provisioner default admits c5.large on-demand in us-east-1")
    assert verdict.reason.endswith("NodePool default does not")


def test_a_custom_label_the_node_pool_drops_is_a_difference(solver: Solver) -> None:
    provisioner = _provisioner([{"key": "team", "operator": "Exists"}])
    pool = _node_pool(provisioner)
    pool["spec"]["template"]["spec"]["requirements"] = [r for r in _requirements(pool) if r["key"] != "team"]

    verdict = prove_migration(provisioner, pool, solver)

    assert not verdict.proven and verdict.difference is not None
    labels = dict(verdict.difference.labels)
    # one side's nodes carry team, the other's never do
    assert verdict.difference.first is (labels["team"] is not None), verdict.reason


def test_labels_and_taints_must_match_too(solver: Solver) -> None:
    provisioner = _provisioner([], labels={"tier": "batch"}, taints=[{"key": "batch", "effect": "NoSchedule"}])
    pool = _node_pool(provisioner)
    no_taint = copy.deepcopy(pool)
    del no_taint["spec"]["template"]["spec"]["taints"]
    other_label = copy.deepcopy(pool)
    other_label["spec"]["template"]["metadata"]["labels"] = {"tier": "web"}

    assert prove_migration(provisioner, pool, solver).proven
    no_taint_reason = prove_migration(provisioner, no_taint, solver).reason
    assert no_taint_reason == "taints: only Provisioner default has batch=:NoSchedule"
    assert (
        prove_migration(provisioner, other_label, solver).reason
        == "label tier: Provisioner default sets batch, NodePool default sets web"
    )


# --- the NodePool read as Karpenter v1.14.1 reads it ----------------------------------------------------------------

FLEX = "karpenter.k8s.aws/instance-capability-flex"
CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"


def _v1_label(catalog: Catalog, instance_type: str, key: str) -> str | None:
    found = catalog.get(instance_type)
    assert found is not None
    return found.v1_labels.get(key)


def test_a_node_pool_requiring_a_v1_only_label_value_is_refused_naming_the_label(
    catalog: Catalog, solver: Solver
) -> None:
    """Edited after migration to require `instance-cpu-manufacturer: amd` (a label only Karpenter v1.14.1 sets), the
    NodePool keeps m5a but drops m5: the counter-example is an Intel type, with the label's value on it."""
    family = {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "m5a"]}
    provisioner = _provisioner([family])
    pool = _node_pool(provisioner)
    _requirements(pool).append({"key": CPU_MANUFACTURER, "operator": "In", "values": ["amd"]})

    verdict = prove_migration(provisioner, pool, solver)

    assert not verdict.proven and verdict.difference is not None
    d = verdict.difference
    assert d.first and d.instance_type.startswith("m5.")
    value = _v1_label(catalog, d.instance_type, CPU_MANUFACTURER)
    assert value == "intel"
    assert verdict.reason == (
        f"Provisioner default admits {d.instance_type} {d.capacity_type} in {d.zone} (node labels: "
        f"{CPU_MANUFACTURER}={value}), NodePool default does not"
    )


def test_a_node_pool_requiring_flex_types_is_refused_with_a_non_flex_offering(solver: Solver, catalog: Catalog) -> None:
    provisioner = _provisioner([{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c"]}])
    pool = _node_pool(provisioner)
    _requirements(pool).append({"key": FLEX, "operator": "In", "values": ["true"]})

    verdict = prove_migration(provisioner, pool, solver)

    assert not verdict.proven and verdict.difference is not None and verdict.difference.first
    assert _v1_label(catalog, verdict.difference.instance_type, FLEX) == "false"
    assert f"(node labels: {FLEX}=false)" in verdict.reason


def test_gte_lte_and_a_v1_label_equal_to_in_lists_are_proven_equivalent(catalog: Catalog, solver: Solver) -> None:
    """The Provisioner lists every vCPU count from 4 to 16 the catalog has and asks for arm64; the NodePool says
    `instance-cpu Gte 4`, `Lte 16` and `instance-cpu-manufacturer In [aws]` (v1.14.1's label: Graviton, which is
    exactly the catalog's arm64 types) — the same offerings."""
    cpus = sorted(
        {it.labels("linux")["karpenter.k8s.aws/instance-cpu"] for it in catalog.instance_types},
        key=int,
    )
    listed = [c for c in cpus if 4 <= int(c) <= 16]
    assert len(listed) < len(cpus)  # the bounds do cut
    provisioner = _provisioner(
        [
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": listed},
            {"key": wk.ARCH, "operator": "In", "values": ["arm64"]},
        ]
    )
    pool = _node_pool(provisioner)
    kept = [r for r in _requirements(pool) if r["key"] not in ("karpenter.k8s.aws/instance-cpu", wk.ARCH)]
    pool["spec"]["template"]["spec"]["requirements"] = [
        *kept,
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lte", "values": ["16"]},
        {"key": CPU_MANUFACTURER, "operator": "In", "values": ["aws"]},
    ]

    verdict = prove_migration(provisioner, pool, solver)

    assert verdict.proven, verdict.reason
    # one bound off is a difference: a Graviton type with 16 vCPUs
    pool["spec"]["template"]["spec"]["requirements"][-2]["values"] = ["15"]
    narrower = prove_migration(provisioner, pool, solver)
    assert not narrower.proven and narrower.difference is not None and narrower.difference.first
    found = catalog.get(narrower.difference.instance_type)
    assert found is not None and found.labels("linux")["karpenter.k8s.aws/instance-cpu"] == "16"


def test_the_tenancy_the_provisioner_never_restricted_is_read_as_v1_reads_it(solver: Solver) -> None:
    """`instance-tenancy In [default, dedicated]` is every value v1.14.1 gives a node: the same offerings as no
    requirement; `In [dedicated]` drops the default-tenancy nodes, and the counter-example says so."""
    provisioner = _provisioner([{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}])
    pool = _node_pool(provisioner)
    _requirements(pool).append({"key": wk.INSTANCE_TENANCY, "operator": "In", "values": ["default", "dedicated"]})

    assert prove_migration(provisioner, pool, solver).proven

    _requirements(pool)[-1]["values"] = ["dedicated"]
    verdict = prove_migration(provisioner, pool, solver)
    assert not verdict.proven and verdict.difference is not None and verdict.difference.first
    assert f"(node labels: {wk.INSTANCE_TENANCY}=default)" in verdict.reason


def test_a_node_pool_whose_min_values_no_offering_set_meets_admits_nothing(catalog: Catalog, solver: Solver) -> None:
    """Karpenter's default Strict minValues policy launches no node for a NodePool whose admitted types carry fewer
    values than a `minValues` asks: the Provisioner's cheapest offering is the counter-example. Met, it changes
    nothing."""
    provisioner = _provisioner(
        [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5", "m5"]}]
    )
    pool = _node_pool(provisioner)
    family = next(r for r in _requirements(pool) if r["key"] == "karpenter.k8s.aws/instance-family")
    family["minValues"] = 2

    assert prove_migration(provisioner, pool, solver).proven, "two families meet minValues 2"

    family["minValues"] = 3
    verdict = prove_migration(provisioner, pool, solver)

    assert not verdict.proven and verdict.difference is not None and verdict.difference.first
    witness = solver.solve(terms_of(provisioner)).witness
    assert witness is not None and verdict.difference.instance_type == witness.instance_type
    assert verdict.reason.endswith(
        "NodePool default does not: karpenter.k8s.aws/instance-family minValues 3: the "
        f"{len([it for it in catalog.instance_types if it.family in ('c5', 'm5')])} instance types it admits carry "
        "2 values, so under Karpenter's default Strict minValues policy it launches no node"
    )


def test_reserved_capacity_adds_no_offering_of_the_catalog(solver: Solver) -> None:
    """`capacity-type: reserved` is v1.14.1's capacity reservations, which the catalog has none of."""
    provisioner = _provisioner([{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}])
    pool = _node_pool(provisioner)
    capacity = next(r for r in _requirements(pool) if r["key"] == wk.CAPACITY_TYPE)
    capacity["values"] = ["on-demand", "reserved", "spot"]

    assert prove_migration(provisioner, pool, solver).proven


def test_a_provisioner_naming_a_v1_only_label_is_not_proven(solver: Solver) -> None:
    """v0.31 refuses the label (`restricted-label`: `validate` stops it before `migrate` proves); the proof does not
    read it with v1.14.1's meaning either."""
    provisioner = _provisioner([{"key": FLEX, "operator": "In", "values": ["true"]}])
    pool = _node_pool(_provisioner([]))

    verdict = prove_migration(provisioner, pool, solver)

    assert not verdict.proven
    assert verdict.reason == f"Provisioner default names {FLEX}, a label Karpenter v0.31 does not know (v1.14.1's)"


def test_a_v0_31_solver_is_refused(catalog: Catalog) -> None:
    provisioner = _provisioner([])

    with pytest.raises(ValueError, match="migration_solver"):
        prove_migration(provisioner, _node_pool(provisioner), Solver(catalog))


# --- the verdict against a walk of the whole catalog --------------------------------------------------------------

_KEYS = {
    "karpenter.k8s.aws/instance-category": ["c", "m", "r", "t", "g"],
    "karpenter.k8s.aws/instance-size": ["large", "xlarge", "2xlarge", "metal"],
    wk.CAPACITY_TYPE: ["spot", "on-demand"],
    wk.ZONE: ["us-east-1a", "us-east-1b", "us-east-1c"],
    wk.ARCH: ["amd64", "arm64"],
}


@st.composite
def _requirement_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for key in draw(st.lists(st.sampled_from(sorted(_KEYS)), max_size=3)):
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        requirement: dict[str, Any] = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            requirement["values"] = draw(st.lists(st.sampled_from(_KEYS[key]), min_size=1, max_size=3, unique=True))
        out.append(requirement)
    return out


_V1_KEYS = {
    FLEX: ["true", "false"],
    CPU_MANUFACTURER: ["intel", "amd", "aws"],
    wk.INSTANCE_EBS_BANDWIDTH: ["4750", "10000", "20000"],
}


@st.composite
def _v1_requirement_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Requirements on v1.14.1's labels, with v1's operators (`Gte`/`Lte` too), and a `minValues` now and then."""
    out = []
    for key in draw(st.lists(st.sampled_from(sorted(_V1_KEYS)), max_size=2)):
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gte", "Lte"]))
        requirement: dict[str, Any] = {"key": key, "operator": operator}
        if operator in ("In", "NotIn"):
            requirement["values"] = draw(st.lists(st.sampled_from(_V1_KEYS[key]), min_size=1, max_size=2, unique=True))
        elif operator in ("Gte", "Lte"):
            requirement["key"] = wk.INSTANCE_EBS_BANDWIDTH
            requirement["values"] = [draw(st.sampled_from(_V1_KEYS[wk.INSTANCE_EBS_BANDWIDTH]))]
        if draw(st.booleans()) and operator != "DoesNotExist":
            requirement["minValues"] = draw(st.integers(1, 3))
        out.append(requirement)
    return out


def _admitted(terms: Sequence[Term], catalog: Catalog, v1: bool = False) -> set[tuple[str, str, str]]:
    """Every offering of the catalog that each term accepts, found by walking them all (no solver); `v1`: the
    types carry v1.14.1's labels too."""
    found = set()
    for instance_type in catalog.instance_types:
        labels = {**instance_type.labels("linux"), **(instance_type.v1_labels if v1 else {})}
        for offering in instance_type.offerings:
            if not offering.available:
                continue
            values = {**labels, wk.ZONE: offering.zone, wk.CAPACITY_TYPE: offering.capacity_type}
            if all(term.accepts(values.get(term.key)) for term in terms):
                found.add((instance_type.name, offering.zone, offering.capacity_type))
    return found


def _launched(pool: Mapping[str, Any], admitted: set[tuple[str, str, str]], catalog: Catalog) -> bool:
    """Whether every minValues of `pool` is met by the types of `admitted` (walked: each key's distinct values)."""
    names = {name for name, _, _ in admitted}
    for requirement in _requirements(dict(pool)):
        wanted = requirement.get("minValues")
        if wanted is None:
            continue
        values = set()
        for name in names:
            found = catalog.get(name)
            assert found is not None
            value = {**found.labels("linux"), **found.v1_labels}.get(requirement["key"])
            if value is not None:
                values.add(value)
        if len(values) < wanted:
            return False
    return True


@given(_requirement_lists(), _requirement_lists(), _v1_requirement_lists())
@deterministic(25)
def test_the_verdict_is_what_walking_every_offering_finds(
    catalog: Catalog,
    solver: Solver,
    mine: list[dict[str, Any]],
    theirs: list[dict[str, Any]],
    v1: list[dict[str, Any]],
) -> None:
    provisioner = _provisioner(mine)
    pool = _node_pool(_provisioner(theirs))
    _requirements(pool).extend(v1)
    first = _admitted(terms_of(provisioner), catalog)
    second = _admitted(node_pool_terms(pool), catalog, v1=True)
    if not _launched(pool, second, catalog):
        second = set()  # Karpenter's Strict minValues policy: no node

    verdict = prove_migration(provisioner, pool, solver)

    assert verdict.proven is (first == second), verdict.reason
    if verdict.difference is not None:
        offering = (verdict.difference.instance_type, verdict.difference.zone, verdict.difference.capacity_type)
        assert (offering in first) is verdict.difference.first
        assert (offering in second) is not verdict.difference.first
