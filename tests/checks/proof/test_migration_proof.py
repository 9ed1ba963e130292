"""The proof `migrate` gives each Provisioner and its NodePool (`checks/proof/equivalence.py`, through
`solver.equivalence`): proven equivalent when the NodePool admits exactly the same offerings, labels and taints,
else a counter-example that is true of the catalog — and the verdict agrees with a brute-force walk of every
offering of the catalog (Hypothesis)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.proof.equivalence import node_pool_terms, prove_migration
from karpenter_policy.checks.proof.solver import Solver, Term, terms_of
from karpenter_policy.commands.compile.manifests import V1Options, to_v1
from karpenter_policy.model import labels as wk
from tests.profiles import deterministic


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def solver(catalog: Catalog) -> Solver:
    return Solver(catalog)


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


def _admitted(terms: Sequence[Term], catalog: Catalog) -> set[tuple[str, str, str]]:
    """Every offering of the catalog that each term accepts, found by walking them all (no solver)."""
    found = set()
    for instance_type in catalog.instance_types:
        labels = instance_type.labels("linux")
        for offering in instance_type.offerings:
            if not offering.available:
                continue
            values = {**labels, wk.ZONE: offering.zone, wk.CAPACITY_TYPE: offering.capacity_type}
            if all(term.accepts(values.get(term.key)) for term in terms):
                found.add((instance_type.name, offering.zone, offering.capacity_type))
    return found


@given(_requirement_lists(), _requirement_lists())
@deterministic(25)
def test_the_verdict_is_what_walking_every_offering_finds(
    catalog: Catalog, solver: Solver, mine: list[dict[str, Any]], theirs: list[dict[str, Any]]
) -> None:
    provisioner = _provisioner(mine)
    pool = _node_pool(_provisioner(theirs))
    first = _admitted(terms_of(provisioner), catalog)
    second = _admitted(node_pool_terms(pool), catalog)

    verdict = prove_migration(provisioner, pool, solver)

    assert verdict.proven is (first == second)
    if verdict.difference is not None:
        offering = (verdict.difference.instance_type, verdict.difference.zone, verdict.difference.capacity_type)
        assert (offering in first) is verdict.difference.first
        assert (offering in second) is not verdict.difference.first
