"""Karpenter v1.14.1's consolidation order and its `Balanced` policy's scoring, for NodePools.

v1.14.1 (core `pkg/controllers/disruption/balanced.go`, `types.go`, `consolidation.go`) gives every NodePool
candidate a *reschedule disruption cost* — 1 (`PerNodeBaseDisruptionCost`) plus each reschedulable pod's eviction
cost where positive — and orders consolidation's candidates by price over that cost, highest first
(`sortCandidates`: the batch a multi-node search tries first is the one most worth packing). A node whose cost is 1
(no pod with a positive eviction cost) is *empty* (`Candidate.IsEmpty`): only emptiness takes it.

A NodePool whose `consolidationPolicy` is `Balanced` consolidates like `WhenEmptyOrUnderutilized`, but a move is
approved only when its share of the pool's cost saved is at least half its share of the pool's disruption
(`ScoreMove`: score = (savings / pool cost) / (disruption / pool disruption) ≥ 1/k, k = 2). The pool's cost is the
sum of its nodes' offering prices (Karpenter's `ClusterCost`; the candidates' when none is known) and its disruption
the sum over all its nodes of 1 plus their non-DaemonSet pods' positive eviction costs (candidates: their reschedule
cost). A move over several pools attributes its savings to each pool in proportion to the price it removes there, and
passes only if every Balanced pool approves (`EvaluateBalancedMove`). A candidate whose best case — deleting it, saving
its whole price — cannot pass is not simulated at all (`CanPassThreshold`). Other policies are never scored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

#: The inherent cost of draining a node (v1.14.1 `PerNodeBaseDisruptionCost`).
PER_NODE_BASE_DISRUPTION_COST = 1.0
#: The Balanced policy's scoring parameter (v1.14.1 `v1.BalancedK`): a move passes at a score of 1/k or more.
BALANCED_K = 2
BALANCED = "Balanced"


class Scored(Protocol):
    """What scoring reads of a consolidation candidate."""

    @property
    def name(self) -> str: ...
    @property
    def provisioner(self) -> str: ...
    @property
    def price(self) -> float | None: ...
    @property
    def reschedule_cost(self) -> float: ...


def reschedule_cost(eviction_costs: Iterable[float]) -> float:
    """1 plus the positive eviction costs of a node's reschedulable pods (v1.14.1 `computeRescheduleDisruptionCost`,
    and `StateNode.DisruptionCost` over its non-DaemonSet pods)."""
    return PER_NODE_BASE_DISRUPTION_COST + sum(max(0.0, cost) for cost in eviction_costs if math.isfinite(cost))


def is_empty(cost: float) -> bool:
    """v1.14.1's `Candidate.IsEmpty`: no pod contributes a positive reschedule cost."""
    return cost <= PER_NODE_BASE_DISRUPTION_COST


def price_of(candidate: Scored) -> float:
    """v1.14.1's `resolveNodePrice`: the node's offering price, 0 when unknown."""
    return candidate.price if candidate.price is not None and math.isfinite(candidate.price) else 0.0


def savings_ratio(candidate: Scored) -> float:
    """Price per unit of disruption (v1.14.1 `Candidate.SavingsRatio`): higher goes first."""
    return price_of(candidate) / candidate.reschedule_cost


def ordered(candidates: Iterable[Scored]) -> list[Scored]:
    """v1.14.1's `sortCandidates`: by savings ratio, highest first (ties by name: Go's `sort.Slice` is not stable,
    so Karpenter's order among equal ratios is arbitrary; ours is fixed)."""
    return sorted(candidates, key=lambda c: (-savings_ratio(c), c.name))


def interleaved(candidates: Sequence[Scored], first: Iterable[str] = ()) -> list[Scored]:
    """Single-node consolidation's order (v1.14.1 `SortCandidates` → `shuffleCandidates`): each NodePool's candidates
    in `ordered` order, taken one from each pool in turn — the pools single-node consolidation did not reach last
    time (`first`) before the others. Karpenter walks the other pools in Go's map order (random); here by name."""
    by_pool: dict[str, list[Scored]] = {}
    for candidate in candidates:
        by_pool.setdefault(candidate.provisioner, []).append(candidate)
    early = [pool for pool in sorted(set(first)) if pool in by_pool]
    pools = early + sorted(pool for pool in by_pool if pool not in early)
    longest = max((len(members) for members in by_pool.values()), default=0)
    return [by_pool[pool][i] for i in range(longest) for pool in pools if i < len(by_pool[pool])]


@dataclass(frozen=True, slots=True)
class PoolTotals:
    """A NodePool's cost ($/h of all its nodes) and disruption (the sum of its nodes' disruption costs)."""

    cost: float
    disruption: float


@dataclass(frozen=True, slots=True)
class Score:
    """One Balanced pool's score of a move (v1.14.1 `ScoreResult`)."""

    pool: str
    savings_fraction: float
    disruption_fraction: float
    k: int = BALANCED_K

    @property
    def score(self) -> float:
        if self.savings_fraction <= 0:
            return 0.0
        if self.disruption_fraction == 0:
            return math.inf
        return self.savings_fraction / self.disruption_fraction

    @property
    def threshold(self) -> float:
        return 1.0 / self.k

    @property
    def approved(self) -> bool:
        return self.score >= self.threshold

    def message(self) -> str:
        """v1.14.1's `consolidationScoreMessage` (its `ConsolidationApproved` Event), with `<` for a refusal."""
        relation = ">=" if self.approved else "<"
        return (
            f"score {_go_float(self.score)} {relation} threshold {_go_float(self.threshold)} (k: {self.k}, savings "
            f"{self.savings_fraction * 100:.1f}%, disruption {self.disruption_fraction * 100:.1f}%)"
        )


def _go_float(value: float) -> str:
    """Go's `%.2f` (`+Inf` for infinity)."""
    return "+Inf" if math.isinf(value) and value > 0 else f"{value:.2f}"


def score_move(pool: str, savings: float, disruption: float, totals: PoolTotals, k: int = BALANCED_K) -> Score:
    """v1.14.1 `ScoreMove`: zero totals score nothing (a zero score, not approved)."""
    if totals.cost <= 0 or totals.disruption <= 0:
        return Score(pool, 0.0, 0.0, k)
    return Score(pool, savings / totals.cost, disruption / totals.disruption, k)


class Evaluator:
    """Scores moves of Balanced NodePools against their totals (v1.14.1's `balancedEvaluator`); every other pool's
    moves pass unscored."""

    def __init__(self, policies: Mapping[str, str], totals: Mapping[str, PoolTotals]) -> None:
        self.policies = policies
        self.totals = totals

    def pools_of(self, candidates: Iterable[Scored]) -> tuple[tuple[str, str], ...]:
        """(NodePool, its consolidation policy) of each pool among `candidates`, by name."""
        return tuple((pool, self.policies.get(pool, "")) for pool in sorted({c.provisioner for c in candidates}))

    def balanced(self, pool: str) -> bool:
        return self.policies.get(pool) == BALANCED

    def can_pass(self, candidate: Scored) -> bool:
        """v1.14.1 `CanPassThreshold`: deleting the candidate outright — the best any move of it can do — passes."""
        if not self.balanced(candidate.provisioner):
            return True
        totals = self.totals.get(candidate.provisioner)
        if totals is None or totals.cost <= 0:
            return True
        return score_move(candidate.provisioner, price_of(candidate), candidate.reschedule_cost, totals).approved

    def evaluate(self, candidates: Sequence[Scored], savings: float | None) -> tuple[bool, tuple[Score, ...]]:
        """v1.14.1 `EvaluateBalancedMove`: whether every Balanced pool among the candidates approves a move that
        saves `savings` $/h, and each such pool's score."""
        if not candidates:
            return False, ()
        by_pool: dict[str, list[Scored]] = {}
        for candidate in candidates:
            by_pool.setdefault(candidate.provisioner, []).append(candidate)
        total_saved = savings if savings is not None and math.isfinite(savings) else 0.0
        source = sum(price_of(c) for c in candidates)
        scores = []
        for pool in sorted(by_pool):
            if not self.balanced(pool):
                continue
            members = by_pool[pool]
            pool_savings = total_saved
            if source > 0 and len(by_pool) > 1:
                pool_savings = total_saved * (sum(price_of(c) for c in members) / source)
            disruption = sum(c.reschedule_cost for c in members)
            scores.append(score_move(pool, pool_savings, disruption, self.totals.get(pool, PoolTotals(0.0, 0.0))))
        return all(s.approved for s in scores), tuple(scores)


def pool_totals(
    pools: Iterable[str],
    nodes: Iterable[tuple[str, str, float | None, float]],
    candidates: Sequence[Scored],
) -> dict[str, PoolTotals]:
    """v1.14.1 `computeNodePoolTotals` for `pools`: `nodes` are every node of ours as (name, pool, price or None, its
    disruption cost); a candidate's reschedule cost stands for its node's. The cost is the pool's nodes' prices
    (Karpenter's cluster cost), or its candidates' when that is 0."""
    wanted = set(pools)
    by_name = {c.name: c for c in candidates}
    cost: dict[str, float] = dict.fromkeys(wanted, 0.0)
    disruption: dict[str, float] = dict.fromkeys(wanted, 0.0)
    for name, pool, price, node_cost in nodes:
        if pool not in wanted:
            continue
        cost[pool] += price if price is not None and math.isfinite(price) else 0.0
        candidate = by_name.get(name)
        disruption[pool] += candidate.reschedule_cost if candidate is not None else node_cost
    fallback: dict[str, float] = dict.fromkeys(wanted, 0.0)
    for candidate in candidates:
        if candidate.provisioner in wanted:
            fallback[candidate.provisioner] += price_of(candidate)
    return {
        pool: PoolTotals(cost[pool] if cost[pool] > 0 else fallback[pool], disruption[pool]) for pool in sorted(wanted)
    }


__all__ = [
    "BALANCED",
    "BALANCED_K",
    "PER_NODE_BASE_DISRUPTION_COST",
    "Evaluator",
    "PoolTotals",
    "Score",
    "interleaved",
    "is_empty",
    "ordered",
    "pool_totals",
    "price_of",
    "reschedule_cost",
    "savings_ratio",
    "score_move",
]
