"""Karpenter v1 disruption budgets on the controller's NodePool nodes (tests/reconcile/data/v1budgets: NodePools that
differ only in their budget). Each test names the Go test it follows (kubernetes-sigs/karpenter v1.14.1,
pkg/controllers/disruption) and its line; a NodeClaim "Consolidatable" there is an empty node past its
consolidateAfter (0 s) here, a "Drifted" one a node stamped with a stale node hash. The allowance is
`api.v1.budgets`' arithmetic (the one `check` and `plan` use: tests/api/v1 port its cases) applied by
`reconcile.disruption.budgets`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import examples

from karpenter_policy.kube import objects
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.reconcile.disruption.budgets import within_budgets
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1budgets"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
NUM_NODES = 10  # emptiness_test.go's numNodes


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1budgets") / "build")


def _first_command(scene: Scene, controller: Controller, seconds: float = 60) -> list[str]:
    """Step until the first disruption command is acted on; the nodes it deletes (being deleted right after it)."""
    end = scene.clock.now + seconds
    while scene.clock.now <= end:
        result: ReconcileResult = scene.step(controller)
        if result.disrupted is not None and result.disrupted.decided:
            return sorted(name for name, node in scene.nodes().items() if objects.is_deleting(node))
        scene.advance(1.0)
    return []


def _empty_nodes(scene: Scene, pool: str, count: int = NUM_NODES, **options: object) -> list[str]:
    return [scene.add_node(f"NodePool/{pool}", "m5.large", age=3600, **options) for _ in range(count)]  # type: ignore[arg-type]


def test_should_allow_all_empty_nodes_to_be_disrupted(compiled: Path) -> None:
    """Emptiness > Budgets > should allow all empty nodes to be disrupted — emptiness_test.go:111."""
    scene = Scene(compiled, types=M5)
    nodes = _empty_nodes(scene, "all")
    assert _first_command(scene, scene.controller()) == sorted(nodes)


def test_should_allow_no_empty_nodes_to_be_disrupted(compiled: Path) -> None:
    """Emptiness > Budgets > should allow no empty nodes to be disrupted — emptiness_test.go:153."""
    scene = Scene(compiled, types=M5)
    nodes = _empty_nodes(scene, "none")
    assert _first_command(scene, scene.controller()) == []
    assert sorted(scene.nodes()) == sorted(nodes)


def test_should_only_allow_3_empty_nodes_to_be_disrupted(compiled: Path) -> None:
    """Emptiness > Budgets > should only allow 3 empty nodes to be disrupted — emptiness_test.go:194 (30 % of 10)."""
    scene = Scene(compiled, types=M5)
    _empty_nodes(scene, "thirty")
    assert len(_first_command(scene, scene.controller())) == 3


def test_nodes_being_deleted_use_up_the_allowance(compiled: Path) -> None:
    """BuildDisruptionBudgetMapping (helpers.go:262): a node of the NodePool being deleted counts in its total and as
    disrupting — 30 % of 10 is 3, less the 2 being deleted (held by another finalizer): one empty node goes."""
    scene = Scene(compiled, types=M5)
    _empty_nodes(scene, "thirty", 8)
    for name in _empty_nodes(scene, "thirty", 2, finalizers=["example.com/hold"]):
        scene.cluster.delete(objects.NODE, name)
    controller = scene.controller()
    before = {name for name, node in scene.nodes().items() if objects.is_deleting(node)}
    assert len(before) == 2
    assert len(set(_first_command(scene, controller)) - before) == 1


def test_a_budget_naming_only_drifted_leaves_empty_nodes_unbounded_and_drift_one_at_a_time(compiled: Path) -> None:
    """Drift > Budgets > should only consider 3 nodes allowed to be disrupted because of budgets — drift_test.go:121,
    with a budget of 1 naming Drifted: the drifted empty nodes go one a command; the same nodes, empty but not drifted,
    all go together (no budget names Empty)."""
    scene = Scene(compiled, types=M5)
    _empty_nodes(scene, "driftone", 4, drifted=True)
    assert len(_first_command(scene, scene.controller())) == 1
    scene = Scene(compiled, types=M5)
    _empty_nodes(scene, "driftone", 4)
    assert len(_first_command(scene, scene.controller())) == 4


@dataclass(frozen=True)
class _Candidate:
    name: str
    provisioner: str


@settings(max_examples=examples(500))
@given(
    st.lists(st.sampled_from(["NodePool/a", "NodePool/b", "legacy"]), max_size=30),
    st.dictionaries(st.sampled_from(["NodePool/a", "NodePool/b"]), st.integers(0, 40)),
)
def test_within_budgets_keeps_each_nodepools_allowance_in_order_and_every_provisioners_candidate(
    pools: list[str], allowance: dict[str, int]
) -> None:
    candidates = [_Candidate(f"n{i}", pool) for i, pool in enumerate(pools)]
    kept = within_budgets(candidates, allowance)
    assert kept == [c for c in candidates if c in kept]  # the order is kept
    for pool, allowed in allowance.items():
        offered = [c for c in candidates if c.provisioner == pool]
        assert [c for c in kept if c.provisioner == pool] == offered[:allowed]
    unbudgeted = [c for c in candidates if c.provisioner not in allowance]
    assert [c for c in kept if c.provisioner not in allowance] == unbudgeted
