"""Karpenter v1.14.1's consolidation order and its `Balanced` consolidation policy (core
pkg/controllers/disruption/balanced.go, types.go, consolidation.go at v1.14.1), ported from its tests: the scoring
arithmetic (balanced_test.go, balanced_scoring_test.go) as data, and the controller end to end on
tests/reconcile/data/v1balanced (a `Balanced` NodePool beside a `WhenEmptyOrUnderutilized` one). Each test names the
Go test it follows and its line."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.disruption import balanced
from karpenter_policy.reconcile.disruption.balanced import Evaluator, PoolTotals, score_move
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1balanced"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
HOUR = 3600.0
#: balanced_test.go's RFC pool: eight m7i.xlarge and two m7i.2xlarge ($58.08/day), 10 nodes and 80 pods.
RFC = PoolTotals(58.08, 90.0)


@pytest.mark.parametrize(
    ("savings", "disruption", "totals", "k", "approved", "line"),
    [
        (7.26, 4.0, RFC, 2, True, 38),  # approve an oversized node consolidation
        (4.84, 5.0, RFC, 2, True, 53),  # approve a spare capacity delete
        (2.42, 9.0, RFC, 2, False, 66),  # reject a marginal move
        (0.0, 11.0, RFC, 2, False, 77),  # reject a well-packed node with zero savings
        (2.42, 9.0, PoolTotals(48.40, 90.0), 2, True, 88),  # approve a replace in a uniform pool
        (4.84, 5.0, PoolTotals(58.08, 117.0), 2, True, 105),  # low-disruption node approved …
        (4.84, 32.0, PoolTotals(58.08, 117.0), 2, False, 105),  # … high-disruption node rejected
        (4.84, 0.0, RFC, 2, True, 151),  # +Inf score when move disruption is zero
        (0.0, 0.0, RFC, 2, False, 157),  # both zero
        (4.84, 5.0, PoolTotals(0.0, 90.0), 2, False, 162),  # nodepool cost zero
        (2.42, 9.0, RFC, 2, False, 175),  # k=2 rejects the marginal move …
        (2.42, 9.0, RFC, 3, True, 180),  # … k=3 approves it
        (2.42, 9.0, RFC, 1, False, 185),  # … k=1 rejects it
    ],
)
def test_score_move(
    savings: float, disruption: float, totals: PoolTotals, k: int, approved: bool, line: int
) -> None:
    """ScoreMove — balanced_test.go, the It at the given line: approved exactly when (savings / pool cost) /
    (disruption / pool disruption) ≥ 1/k; the score as Karpenter computes it."""
    result = score_move("pool", savings, disruption, totals, k)
    assert result.approved is approved, (line, result.score)
    if totals.cost > 0 and savings > 0:
        expected = math.inf if disruption == 0 else (savings / totals.cost) / (disruption / totals.disruption)
        assert result.score == pytest.approx(expected)
    else:
        assert result.score == 0


@pytest.mark.parametrize(
    ("savings", "disruption", "score", "approved"),
    [(20.0, 5.0, 4.0, True), (10.0, 10.0, 1.0, True), (5.0, 50.0, 0.10, False), (10.0, 0.0, math.inf, True),
     (0.0, 10.0, 0.0, False), (-5.0, 10.0, 0.0, False)],
)
def test_score_move_entries(savings: float, disruption: float, score: float, approved: bool) -> None:
    """ScoreMove (SavingsRatio) entries — balanced_scoring_test.go:465–:470 (pool totals 100 / 100)."""
    result = score_move("pool", savings, disruption, PoolTotals(100.0, 100.0))
    assert result.score == pytest.approx(score) and result.approved is approved


def test_scores_are_scale_invariant() -> None:
    """scale invariance — balanced_test.go:131: the same move scores the same in a pool ten times the size."""
    small = score_move("p", 7.26, 4.0, RFC)
    large = score_move("p", 7.26, 4.0, PoolTotals(580.80, 900.0))
    assert small.score == pytest.approx(large.score)
    assert small.score == pytest.approx((7.26 / 58.08) / (4.0 / 90.0))


def test_cross_pool_moves_score_proportionally() -> None:
    """cross-NodePool scoring — balanced_test.go:192: proportionally equal moves in an on-demand and a spot pool
    score the same."""
    on_demand = score_move("od", 4.84, 4.0, PoolTotals(48.40, 90.0))
    spot = score_move("spot", 1.45, 4.0, PoolTotals(14.50, 90.0))
    assert on_demand.score == pytest.approx(spot.score, abs=0.01) and on_demand.approved and spot.approved


@dataclass(frozen=True)
class _Candidate:
    name: str
    provisioner: str
    price: float | None
    reschedule_cost: float


def test_evaluate_skips_pools_that_are_not_balanced() -> None:
    """EvaluateBalancedMove > should skip non-Balanced pools and approve unconditionally — balanced_scoring_test.go:244;
    > should reject when command has zero candidates — :233."""
    evaluator = Evaluator({"other": "WhenEmptyOrUnderutilized"}, {})
    assert evaluator.evaluate([_Candidate("n", "other", 1.0, 50.0)], 0.01) == (True, ())
    assert evaluator.evaluate([], 1.0) == (False, ())


def test_evaluate_rejects_a_balanced_pool_missing_from_the_totals() -> None:
    """EvaluateBalancedMove > should reject when candidate NodePool is missing from totals map —
    balanced_scoring_test.go:264 (zero totals score nothing)."""
    approved, scores = Evaluator({"b": "Balanced"}, {}).evaluate([_Candidate("n", "b", 1.0, 2.0)], 1.0)
    assert not approved and scores[0].score == 0


def test_evaluate_approves_a_delete_in_one_balanced_pool() -> None:
    """EvaluateBalancedMove > should approve a delete command for a single Balanced NodePool —
    balanced_scoring_test.go:283."""
    evaluator = Evaluator({"b": "Balanced"}, {"b": PoolTotals(10.0, 20.0)})
    approved, (score,) = evaluator.evaluate([_Candidate("n", "b", 2.0, 2.0)], 2.0)
    assert approved and score.score == pytest.approx((2.0 / 10.0) / (2.0 / 20.0))


def test_evaluate_attributes_savings_in_proportion_and_needs_every_pool() -> None:
    """EvaluateBalancedMove > should attribute savings proportionally in cross-NodePool scenarios —
    balanced_scoring_test.go:310; AllPoolsMustApprove > should reject when any Balanced pool rejects — :343."""
    totals = {"a": PoolTotals(10.0, 10.0), "b": PoolTotals(10.0, 10.0)}
    evaluator = Evaluator({"a": "Balanced", "b": "Balanced"}, totals)
    moved = [_Candidate("x", "a", 3.0, 2.0), _Candidate("y", "b", 1.0, 3.0)]  # b: 0.1 / 0.3 < 0.5
    approved, scores = evaluator.evaluate(moved, 4.0)  # a delete: savings are the source prices
    by_pool = {s.pool: s for s in scores}
    assert by_pool["a"].savings_fraction == pytest.approx(0.3) and by_pool["b"].savings_fraction == pytest.approx(0.1)
    assert by_pool["a"].approved and not by_pool["b"].approved and not approved


def test_nan_prices_do_not_poison_the_totals() -> None:
    """Adversarial > should not allow NaN price to poison NodePool totals — balanced_adversarial_test.go:34."""
    totals = balanced.pool_totals(
        ["b"], [("n1", "b", math.nan, 2.0), ("n2", "b", 1.5, 3.0)], [_Candidate("n1", "b", math.nan, 2.0)]
    )
    assert totals["b"] == PoolTotals(1.5, 5.0)


def test_candidates_are_ordered_by_savings_ratio() -> None:
    """sortCandidates > should sort candidates by savings ratio (highest first) — balanced_scoring_test.go:563 and
    :598 (every NodePool, Balanced or not); Candidate.SavingsRatio — :425 (price / reschedule cost, 0 without a
    price)."""
    cheap_busy = _Candidate("a", "p", 1.0, 5.0)  # 0.2
    dear_idle = _Candidate("b", "p", 4.0, 2.0)  # 2.0
    unpriced = _Candidate("c", "p", None, 1.5)  # 0
    middle = _Candidate("d", "p", 2.0, 2.0)  # 1.0
    assert [c.name for c in balanced.ordered([cheap_busy, dear_idle, unpriced, middle])] == ["b", "d", "a", "c"]


def test_single_node_order_interleaves_the_pools() -> None:
    """SingleNodeConsolidation > SortCandidates interweaves NodePools (singlenodeconsolidation.go:141), the pools a
    timeout left unseen first."""
    found = [_Candidate("a1", "a", 3.0, 1.5), _Candidate("a2", "a", 2.0, 1.5), _Candidate("b1", "b", 1.0, 1.5)]
    assert [c.name for c in balanced.interleaved(found)] == ["a1", "b1", "a2"]
    assert [c.name for c in balanced.interleaved(found, first=["b"])] == ["b1", "a1", "a2"]


# --- the controller, end to end -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1balanced") / "build")


def _node(scene: Scene, pool: str, instance_type: str) -> str:
    return scene.add_node(f"NodePool/{pool}", instance_type, age=HOUR)


def test_balanced_replaces_an_oversized_node_and_says_why(compiled: Path) -> None:
    """Balanced Consolidation > Single-Node > should approve replacing an oversized node —
    balanced_integration_test.go:56: one 500m pod alone on the dearest type is replaced by a cheaper node, with a
    `ConsolidationApproved` Event whose message carries `k: 2` and `>= threshold 0.50`, and the move counted."""
    scene = Scene(compiled, types=M5)
    node = _node(scene, "balanced", "m5.2xlarge")
    scene.add_pod("app", cpu="500m", node=node, nodeSelector={wk.NODEPOOL: "balanced"})
    controller = scene.controller(consolidation_validation=15)
    results = scene.run(controller, 120)
    assert node not in scene.nodes()
    held = [r.disrupted.held for r in results if r.disrupted is not None and r.disrupted.held]
    assert held and "consolidation replace" in held[0] and "from types m5.large" in held[0], held
    assert "m5.2xlarge" not in held[0].split("from types")[1]
    messages = [e["message"] for e in scene.events("ConsolidationApproved")]
    assert any("k: 2" in m and ">= threshold 0.50" in m for m in messages), messages
    exposed = controller.metrics.exposition().decode()
    assert ('karpenter_consolidation_moves_total{decision="approved",nodepool="balanced",policy="Balanced"}'
            in exposed)
    # v1.14.1's ConsolidationScoreHistogram: its labels and buckets (pkg/controllers/disruption/metrics.go:132)
    edges = re.findall(
        r'karpenter_consolidation_score_bucket\{decision="approved",le="([^"]+)",nodepool="balanced",policy="Balanced"\}',
        exposed,
    )
    assert edges == ["0.1", "0.25", "0.33", "0.5", "1.0", "2.0", "5.0", "10.0", "+Inf"], edges


def test_balanced_keeps_a_well_packed_node(compiled: Path) -> None:
    """Balanced Consolidation > Single-Node > should reject replacing a well-packed node —
    balanced_integration_test.go:126 (there eight 3500m pods on the cheapest type; here one 1500m pod on m5.large,
    the cheapest type of the pool, which it needs whole): no command, no ConsolidationApproved Event."""
    scene = Scene(compiled, types=M5)
    node = _node(scene, "balanced", "m5.large")
    scene.add_pod("app", cpu="1500m", node=node, nodeSelector={wk.NODEPOOL: "balanced"})
    scene.run(scene.controller(consolidation_validation=15), 90)
    assert list(scene.nodes()) == [node]
    assert scene.events("ConsolidationApproved") == []


@pytest.mark.parametrize(("pool", "replaced"), [("balanced", False), ("under", True)])
def test_balanced_refuses_a_move_whose_savings_do_not_pay_for_its_disruption(
    compiled: Path, pool: str, replaced: bool
) -> None:
    """The policy's point (designs/balanced-consolidation.md, "Mixed-Policy NodePools" —
    balanced_integration_test.go:697): a node whose one pod is costly to evict (priority 10⁹: eviction cost 10) on
    an m5.xlarge, beside a node whose pod needs its m5.xlarge. Replacing it by an m5.large saves a quarter of the
    pool's cost for 11/13 of its disruption: score 0.30 < 0.5 — a Balanced pool keeps it and says so, a
    WhenEmptyOrUnderutilized pool replaces it."""
    scene = Scene(compiled, types=M5)
    costly = _node(scene, pool, "m5.xlarge")
    full = _node(scene, pool, "m5.xlarge")
    scene.add_pod("precious", cpu="1500m", node=costly, priority=1_000_000_000, nodeSelector={wk.NODEPOOL: pool})
    scene.add_pod("big", cpu="3000m", node=full, nodeSelector={wk.NODEPOOL: pool})
    controller = scene.controller(consolidation_validation=15)
    results = scene.run(controller, 120)
    assert (costly not in scene.nodes()) is replaced
    assert full in scene.nodes()
    if not replaced:
        blocked = [r.disrupted.blocked.get(costly, "") for r in results if r.disrupted is not None]
        assert any("Balanced score refuses the move (score 0.30 < threshold 0.50" in why for why in blocked), blocked
        exposed = controller.metrics.exposition().decode()
        rejected = 'karpenter_consolidation_moves_total{decision="rejected",nodepool="balanced",policy="Balanced"}'
        assert rejected in exposed


def test_an_empty_node_by_eviction_cost_goes_through_emptiness(compiled: Path) -> None:
    """Candidate.IsEmpty (types.go:153) and Emptiness.ShouldDisrupt (emptiness.go): a NodePool's node whose only
    pod's eviction cost is not positive (priority −10⁹: cost −10, clamped to 0 in the reschedule cost) is empty, and
    emptiness deletes it without a replacement."""
    scene = Scene(compiled, types=M5)
    node = _node(scene, "under", "m5.2xlarge")
    scene.add_pod("expendable", cpu="6", node=node, priority=-1_000_000_000, nodeSelector={wk.NODEPOOL: "under"})
    results = scene.run(scene.controller(), 60)
    assert node not in scene.nodes()
    held = [r.disrupted.held for r in results if r.disrupted is not None and r.disrupted.held]
    assert any("consolidation delete" in h and "(empty)" in h for h in held), held


def test_multi_node_consolidation_tries_the_highest_savings_ratio_first(compiled: Path) -> None:
    """Ratio Sort in Multi-Node > should select highest-ratio candidates first when nodes have heterogeneous prices
    and pod counts — balanced_integration_test.go:555 (on every NodePool: consolidation.go:151 `sortCandidates`). A:
    m5.2xlarge, 10 pods (ratio 0.384 / 11); B: m5.xlarge, 1 pod (0.192 / 2); C: m5.large, 8 pods (0.096 / 9). The
    search tries B, A first: both go, their pods onto C. (v0.31's order, by disruption cost — B, C, A — would delete B
    and C onto A.)"""
    scene = Scene(compiled, types=M5)
    a, b, c = _node(scene, "under", "m5.2xlarge"), _node(scene, "under", "m5.xlarge"), _node(scene, "under", "m5.large")
    for node, count in ((a, 10), (b, 1), (c, 8)):
        for i in range(count):
            scene.add_pod(f"{node}-{i}", cpu="100m", node=node, nodeSelector={wk.NODEPOOL: "under"})
    results = scene.run(scene.controller(consolidation_validation=15), 60)
    held = [r.disrupted.held for r in results if r.disrupted is not None and r.disrupted.held]
    assert held and "consolidation delete, terminating 2 machines" in held[0], held
    assert a in held[0] and b in held[0] and c not in held[0]
    assert c in scene.nodes()
