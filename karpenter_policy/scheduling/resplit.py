"""Re-splitting pairs of node claims: the cost strategy's last step, after packing.

Packing fills claims one pod at a time, each capped at the type that serves the waiting pods of its kind most
cheaply; what it cannot see is the end: the claims the last pods open, and claims whose type suits the batch's
cpu:memory mix but not their own share of it. This step takes two claims of one template at a time, pools the
pods either may hold — *bystanders*: pods that take part in no topology group (no spread or pod (anti-)affinity
of their own, counted by none), with no host ports, whose requirements neither claim narrows — and splits the pool
between them again: ordered from the most cpu-heavy to the most memory-heavy, cut where the two cheapest types
that hold the halves cost least (one half may be empty: the claim is dropped, the two merge). Every other pod
stays where packing put it. A split is taken only when it is cheaper, or as cheap on one node instead of two;
within the template's limits (each claim charged, as packing charges it, at the largest type it may launch). A
bounded number of pairs is tried, the most wasteful first, so the step costs a fraction of the packing.
Deterministic: ties keep the earlier claim and cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpenter_policy.scheduling.instances import indices
from karpenter_policy.scheduling.nodes import NodeClaim
from karpenter_policy.scheduling.pods import Attempt, Pod
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, ZERO, Vector, add, subtract

#: How much dearer than its price a re-split claim's fallback types may be (as packing's FALLBACK_PRICE_FACTOR).
FALLBACK_PRICE_FACTOR = 1.5
#: Pairs tried per round, at most, and rounds (a round that improves nothing ends the step).
PAIRS_PER_ROUND = 48
ROUNDS = 3
#: Cut points tried per pair and direction.
CUTS = 32
_SAVING = 1e-6  # $/h: less is no improvement (float noise)


@dataclass(slots=True)
class _Side:
    claim: NodeClaim
    base: int  # the types the claim may be, whatever it holds: its requirements, offerings and the limits


def resplit(
    claims: list[NodeClaim],
    remaining: Mapping[str, dict[int, int]],
    bystander: Callable[[Pod], bool],
    attempt_of: Callable[[Pod], Attempt],
    charge: Callable[[dict[int, int], NodeClaim], None],
) -> None:
    """Re-split pairs of `claims` (changed in place; a claim left empty is removed) — see the module docstring.
    `remaining`: what is left of each template's limits (updated); `bystander`: the pod takes part in no topology
    group; `attempt_of`: the attempt a pod was placed with; `charge`: count a claim against its template's limits
    at the largest type it may launch."""
    if len(claims) < 2:  # no pair to split again (most disruption simulations plan one claim at most)
        return
    for _ in range(ROUNDS):
        if not _round(claims, remaining, bystander, attempt_of, charge):
            return


def _round(
    claims: list[NodeClaim],
    remaining: Mapping[str, dict[int, int]],
    bystander: Callable[[Pod], bool],
    attempt_of: Callable[[Pod], Attempt],
    charge: Callable[[dict[int, int], NodeClaim], None],
) -> bool:
    prices = {id(claim): _price(claim, claim.launch_mask()) for claim in claims}
    waste = {id(claim): _waste(claim, prices[id(claim)]) for claim in claims}
    # the pairs of one template that have one of the most wasteful claims in them (a pair's other claim may be any)
    # (a claim with minValues keeps the options it has: a split would narrow them below what it must keep)
    priced = [claim for claim in claims if prices[id(claim)] is not None and not claim.min_values]
    wasteful = {id(c) for c in sorted(priced, key=lambda c: -waste[id(c)])[: 2 * PAIRS_PER_ROUND]}
    by_template: dict[int, list[NodeClaim]] = {}
    for claim in priced:
        by_template.setdefault(id(claim.template), []).append(claim)
    pairs = [
        (x, y)
        for group in by_template.values()
        for i, x in enumerate(group)
        for y in group[i + 1 :]
        if id(x) in wasteful or id(y) in wasteful
    ]
    pairs.sort(key=lambda pair: -(waste[id(pair[0])] + waste[id(pair[1])]))  # stable: creation order on ties
    improved = False
    gone: set[int] = set()
    changed: set[int] = set()
    for x, y in pairs[:PAIRS_PER_ROUND]:
        if id(x) in gone or id(y) in gone or id(x) in changed or id(y) in changed:
            continue
        before = prices[id(x)] or 0.0
        before += prices[id(y)] or 0.0
        if _resplit_pair(x, y, before, remaining[x.template.name], bystander, attempt_of, charge):
            improved = True
            changed.update((id(x), id(y)))
            gone.update(id(c) for c in (x, y) if not c.pods)
    if gone:
        claims[:] = [claim for claim in claims if id(claim) not in gone]
    return improved


def _resplit_pair(
    x: NodeClaim,
    y: NodeClaim,
    before: float,
    limits: dict[int, int],
    bystander: Callable[[Pod], bool],
    attempt_of: Callable[[Pod], Attempt],
    charge: Callable[[dict[int, int], NodeClaim], None],
) -> bool:
    """Split the movable pods of x and y again when that is cheaper (see the module docstring); True when done."""
    pool: list[Pod] = []
    fixed: dict[int, list[Pod]] = {id(x): [], id(y): []}
    for claim in (x, y):
        for pod in claim.pods:
            movable = bystander(pod) and all(_keeps(other, attempt_of(pod)) for other in (x, y))
            (pool if movable else fixed[id(claim)]).append(pod)
    if not pool:
        return False
    template = x.template
    available = {r: limits[r] + x.charged.get(r, 0) + y.charged.get(r, 0) for r in limits}
    within = template.shapes.capacity_within(available) if limits else template.table.everything
    sides = [_Side(claim, _base(claim) & within) for claim in (x, y)]
    cpu_total = sum(p.requests[CPU_I] for p in pool) or 1
    memory_total = sum(p.requests[MEMORY_I] for p in pool) or 1
    pool.sort(key=lambda p: (p.requests[MEMORY_I] / memory_total - p.requests[CPU_I] / cpu_total, p.order, p.key))
    prefix = [ZERO]
    for pod in pool:
        prefix.append(add(prefix[-1], pod.requests))
    total = prefix[-1]
    starts = [_sum(template.overhead, fixed[id(side.claim)]) for side in sides]
    n = len(pool)
    cuts = sorted({round(j * n / CUTS) for j in range(CUTS + 1)})
    best: tuple[float, int, int, int] | None = None  # (price, nodes, direction, cut)
    for direction in (0, 1):  # 0: x takes the cpu-heavy head; 1: y does
        first, second = (sides[0], sides[1]) if direction == 0 else (sides[1], sides[0])
        start_first, start_second = (starts[0], starts[1]) if direction == 0 else (starts[1], starts[0])
        for cut in cuts:
            head, tail = prefix[cut], subtract(total, prefix[cut])
            a = _split_price(first, fixed[id(first.claim)], cut > 0, add(start_first, head))
            if a is None:
                continue
            b = _split_price(second, fixed[id(second.claim)], cut < n, add(start_second, tail))
            if b is None:
                continue
            nodes = (1 if fixed[id(first.claim)] or cut > 0 else 0) + (1 if fixed[id(second.claim)] or cut < n else 0)
            if best is None or (round(a + b, 9), nodes) < (round(best[0], 9), best[1]):
                best = (a + b, nodes, direction, cut)
    if best is None or not (best[0] < before - _SAVING or (best[0] <= before + _SAVING and best[1] < 2)):
        return False  # neither cheaper nor, at the same price, one node instead of two
    _, _, direction, cut = best
    head_side, tail_side = (sides[0], sides[1]) if direction == 0 else (sides[1], sides[0])
    assignment = {id(head_side.claim): pool[:cut], id(tail_side.claim): pool[cut:]}
    released = {r: limits[r] + x.charged.get(r, 0) + y.charged.get(r, 0) for r in limits}
    trial = []
    for side in sides:
        pods = sorted([*fixed[id(side.claim)], *assignment[id(side.claim)]], key=lambda p: (p.order, p.key))
        trial.append((side, pods, _sum(template.overhead, pods)))
    charges = [_charges(side, requests, limits) for side, pods, requests in trial if pods]
    if limits and any(sum(c.get(r, 0) for c in charges) > released[r] for r in limits):
        return False  # the new types would take more of the limits than the two claims hold
    for r in limits:
        limits[r] = released[r]
    for side, pods, requests in trial:
        side.claim.charged.clear()
        _apply(side, pods, requests)
        if pods and limits:
            charge(limits, side.claim)
    return True


def _keeps(claim: NodeClaim, attempt: Attempt) -> bool:
    """A pod with `attempt` may join `claim` without narrowing it (its requirements already say as much)."""
    requirements = claim.requirements
    if not attempt.requirements:
        return True
    return requirements.admits(attempt.requirements, claim.template.well_known) and (
        requirements.intersection(attempt.requirements) == requirements
    )


def _base(claim: NodeClaim) -> int:
    """The types the claim may be, whatever it holds."""
    template = claim.template
    table = template.table
    return (
        template.types
        & table.type_mask(claim.requirements, os=template.os, type_keys=template.type_keys)
        & table.offering_mask(claim.zone, claim.capacity_type)
    )


def _sum(start: Vector, pods: Iterable[Pod]) -> Vector:
    total = start
    for pod in pods:
        total = add(total, pod.requests)
    return total


def _price(claim: NodeClaim, mask: int) -> float | None:
    """$/h of the cheapest offering of `mask` the claim may launch (None: none, or no price data)."""
    launch = claim.template.table.cheapest(mask, claim.zone, claim.capacity_type)
    return None if launch is None else launch.price


def _split_price(side: _Side, fixed: Sequence[Pod], takes_some: bool, requests: Vector) -> float | None:
    """What the side costs holding `requests` (its fixed pods and a part of the pool); 0 when it holds no pod."""
    if not fixed and not takes_some:
        return 0.0
    mask = side.base & side.claim.template.shapes.fitting(requests)
    return _price(side.claim, mask) if mask else None


def _waste(claim: NodeClaim, price: float | None) -> float:
    """$/h of the launch type the claim leaves unused (on its fuller resource)."""
    if price is None:
        return 0.0
    launch = claim.template.table.cheapest(claim.launch_mask(), claim.zone, claim.capacity_type)
    if launch is None:
        return 0.0
    template = claim.template
    allocatable = template.shapes.allocatable[template.table.position[launch.instance_type]]
    used = max(
        claim.requests[CPU_I] / allocatable[CPU_I] if allocatable[CPU_I] else 1.0,
        claim.requests[MEMORY_I] / allocatable[MEMORY_I] if allocatable[MEMORY_I] else 1.0,
    )
    return price * max(0.0, 1.0 - used)


def _masks(side: _Side, requests: Vector) -> tuple[int, int, float | None]:
    """The options (types within the price of the cheapest that holds `requests`), the fallback types (up to
    FALLBACK_PRICE_FACTOR × that price) and the price."""
    claim = side.claim
    table = claim.template.table
    fitting = side.base & claim.template.shapes.fitting(requests)
    price = _price(claim, fitting)
    if price is None:
        return fitting, -1, None
    options = fitting & table.at_most(price, claim.zone, claim.capacity_type)
    fallback = side.base & table.at_most(price * FALLBACK_PRICE_FACTOR, claim.zone, claim.capacity_type)
    return options, fallback, price


def _charges(side: _Side, requests: Vector, limits: Mapping[int, int]) -> dict[int, int]:
    """What the claim would be charged against the limits holding `requests`: the largest capacity it may launch."""
    options, fallback, _ = _masks(side, requests)
    capacity = side.claim.template.shapes.capacity
    may_launch = indices(options if fallback == -1 else options | fallback)
    return {r: max(capacity[i][r] for i in may_launch) for r in limits} if may_launch else {}


def _apply(side: _Side, pods: list[Pod], requests: Vector) -> None:
    claim = side.claim
    claim.pods[:] = pods
    if not pods:
        return
    claim.requests = requests
    options, fallback, price = _masks(side, requests)
    claim.set_options(options)
    claim.uncapped = side.base
    claim.price_cap = price
    claim.launchable = fallback


__all__ = ["resplit"]
