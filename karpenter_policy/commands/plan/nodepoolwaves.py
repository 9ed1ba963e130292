"""The replacement waves of Karpenter v1 NodePools' nodes: Karpenter v1.14.1's disruption in virtual time, with the
pieces the v0.31 waves use (`waves`: PodDisruptionBudget arithmetic, the scheduler on HEAD's NodePools) and the
NodePools' disruption budgets as Karpenter computes them (`api.v1.budgets`).

Karpenter v1.14.1 (core `pkg/controllers/disruption/`, `nodeclaim/expiration/`, `node/termination/`):

* **removed NodePools**: their NodeClaims go at once (owner references), drained, their pods provisioned for
  afterwards;
* **forceful expiry** (`nodeclaim/expiration/controller.go`, `Reconcile`): an expired NodeClaim is deleted at once,
  one that expires later within the plan's horizon at its expiry time (the controller requeues until then) — no
  budget,
  no replacement first, the node's `do-not-disrupt` annotation ignored; its drain honours PDBs and pods'
  `karpenter.sh/do-not-disrupt` until its `terminationGracePeriod` ends, then the pods go regardless; without one a
  blocked drain never ends. Its pods are provisioned for as they go. A drifted node still waiting for its budget
  when it expires goes by expiry instead; an expiring node holds its NodePool's budget from its expiry until gone;
* **drift** (`drift.go`, `Drift.ComputeCommands`): one candidate per command, empty ones first, then in the order
  they drifted — NodeClaims already `Drifted` in the snapshot by their condition's time, then the others by
  creation (their conditions all turn true at the merge); a command starts only while the candidate's NodePool
  allows a `Drifted` disruption: `MustGetAllowedDisruptions` at that moment (budgets with their reasons and cron
  windows; percentages of the NodePool's initialized nodes, rounded up) less its nodes disrupting — deleting,
  marked for deletion or NotReady (`helpers.go`, `BuildDisruptionBudgetMapping`). After a command the controller
  looks again at once (`controller.go`: `RequeueImmediately`), else every :data:`POLLING_SECONDS`; so commands run
  side by side, as many as the budget allows. Replace before delete: the replacements are initialized
  (`node_startup`) before the node drains. A replacement counts toward its NodePool's total once initialized, a
  drained node leaves it;
* a candidate is **blocked** by the node's `karpenter.sh/do-not-disrupt: "true"` (`ValidateNodeDisruptable`), by a
  pod's `do-not-disrupt` or a PDB allowing no eviction (`ValidatePodsDisruptable`) — unless its NodeClaim has a
  `terminationGracePeriod`: then it is a candidate all the same (`NewCandidate`, the eventual disruption class) and
  its drain ends after that period at the latest —, when its pods would not all schedule, or by a budget that
  allows no `Drifted` disruption for as far ahead as the budgets' schedules repeat (a week, or a year): the rollout
  never finishes.

What this does not model: nodes being deleted in the snapshot (assumed gone), pods landing on existing nodes, the
PDBs' state between waves, consolidation (`Underutilized`, `Empty`: with BASE = HEAD, NodePools' nodes are left out
of `simulate/consolidation.py`'s answer with a note), static NodePools (`replicas`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from karpenter_policy.api.v1.budgets import DRIFTED, UNBOUNDED, Budget, allowance, budgets_of
from karpenter_policy.api.v1.budgettimeline import horizon, spans
from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import Fleet, FleetNode, FleetPod
from karpenter_policy.commands.plan.waves import (
    DRIFT,
    EXPIRATION,
    GRACED,
    POLLING_SECONDS,
    REMOVED,
    Blocked,
    Drain,
    PdbBudgets,
    Pending,
    Replacement,
    Replacements,
    Rollout,
    Timing,
    Wave,
    add_wave,
    drain_of,
    finish_wave,
)
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import is_nodepool, pool_key, pool_name

__all__ = ["nodepool_budgets", "plan_nodepool_waves"]


def nodepool_budgets(nodepools: Mapping[str, Mapping[str, object]]) -> dict[str, tuple[Budget, ...]]:
    """Each NodePool's disruption budgets, from its stored form (`spec.disruption.budgets`, defaulted)."""
    out = {}
    for name, doc in nodepools.items():
        spec = doc.get("spec")
        disruption = spec.get("disruption") if isinstance(spec, Mapping) else None
        out[name] = budgets_of(disruption if isinstance(disruption, Mapping) else None)
    return out


def _graced(drain: Drain, grace: float | None) -> Drain:
    """A drain blocked by a pod or a PDB, ended by the NodeClaim's terminationGracePeriod when it has one."""
    blocked = drain.blocked
    if blocked is None or grace is None or blocked.by.startswith("Node/"):
        return drain
    return Drain(grace, {**drain.slowed, f"{blocked.by}{GRACED}": grace}, None)


@dataclass(slots=True)
class _Candidate:
    """A drifted node Karpenter would replace: its NodePool, the pods it moves and its drain."""

    name: str
    pool: str
    pods: list[FleetPod]
    drain: Drain
    #: when it expires (seconds from the start; None: not within the plan's horizon)
    expires: float | None = None


class _Pools:
    """Each NodePool's initialized nodes and nodes disrupting, changed by events at virtual times (seconds from the
    start)."""

    def __init__(self, fleet: Fleet) -> None:
        self.total: Counter[str] = Counter()
        self.disrupting: Counter[str] = Counter()
        for node in fleet.nodes.values():
            if node.nodepool is not None and not node.deleting:
                self.total[node.nodepool] += 1
                self.disrupting[node.nodepool] += not node.ready
        self.events: list[tuple[float, str, str]] = []  # (when, "gone" | "ready" | "disrupting", pool)

    def disrupt(self, pool: str, gone_at: float | None, since: float = 0.0) -> None:
        """A node of `pool` disrupting from `since` (seconds; at once when 0) until `gone_at` (None: for ever)."""
        if since > 0:
            self.events.append((since, "disrupting", pool))
        else:
            self.disrupting[pool] += 1
        if gone_at is not None:
            self.events.append((gone_at, "gone", pool))

    def launch(self, launched: Sequence[Replacement], ready_at: float) -> None:
        """Replacements count toward their NodePool's total once initialized (a Provisioner's: not counted)."""
        self.events += [(ready_at, "ready", pool_name(r.provisioner)) for r in launched if is_nodepool(r.provisioner)]

    def advance(self, now: float) -> None:
        due = [e for e in self.events if e[0] <= now]
        self.events = [e for e in self.events if e[0] > now]
        for _, kind, pool in due:
            if kind == "gone":
                self.disrupting[pool] -= 1
                self.total[pool] -= 1
            elif kind == "disrupting":
                self.disrupting[pool] += 1
            else:
                self.total[pool] += 1

    def next_event(self, after: float) -> float | None:
        later = [e[0] for e in self.events if e[0] > after]
        return min(later) if later else None


def plan_nodepool_waves(
    fleet: Fleet,
    drift: Mapping[str, NodeDrift],
    budgets: Mapping[str, Sequence[Budget]],
    start: dt.datetime,
    timing: Timing,
    pdbs: PdbBudgets,
    replacements: Replacements,
) -> Rollout:
    """The waves that carry out `drift` on the NodePools' nodes of `fleet` from `start` under HEAD's `budgets`
    (see the module docstring)."""
    rollout = Rollout()
    pools = _Pools(fleet)
    drift = {n: d for n, d in drift.items() if fleet.nodes[n].nodepool is not None and not fleet.nodes[n].deleting}
    removed = sorted(n for n, d in drift.items() if d.removed)
    if removed:
        _at_once(rollout, fleet, removed, drift, pools, REMOVED, start, timing, pdbs, replacements)
    expired = sorted((n for n, d in drift.items() if d.expires and not d.removed and _offset(d, start) <= 0),
                     key=lambda n: (drift[n].expires_at or start, n))
    if expired:
        _at_once(rollout, fleet, expired, drift, pools, EXPIRATION, start, timing, pdbs, replacements)
    later = {n for n, d in drift.items() if d.expires and not d.removed and n not in expired}
    drifted = [n for n, d in drift.items() if d.drifted and not d.removed and n not in expired]
    drifted.sort(key=lambda n: (bool(fleet.moved_pods(n)), _drifted_since(fleet.nodes[n], start),
                                fleet.nodes[n].created or start, n))
    queue = []
    for name in drifted:
        candidate = _candidate(rollout, fleet, name, drift[name], pdbs, replacements, timing)
        if candidate is not None:
            candidate.expires = _offset(drift[name], start) if name in later else None
            queue.append(candidate)
        elif name in later:  # held from drift, but its expiry deletes it all the same
            rollout.blocked = [b for b in rollout.blocked if b.node != name]
            rollout.pending = [p for p in rollout.pending if p.node != name or not p.held]
    expiring = sorted(later - {c.name for c in queue}, key=lambda n: (_offset(drift[n], start), n))
    for at in sorted({_offset(drift[n], start) for n in expiring}):
        names = [n for n in expiring if _offset(drift[n], start) == at]
        _at_once(rollout, fleet, names, drift, pools, EXPIRATION, start, timing, pdbs, replacements, at)

    def expire(names: list[str], at: float) -> None:
        _at_once(rollout, fleet, names, drift, pools, EXPIRATION, start, timing, pdbs, replacements, at)

    _drift(rollout, queue, budgets, pools, start, timing, replacements, expire)
    return Rollout().merged(rollout)  # the waves by start: expiring ones were planned first


def _offset(drift: NodeDrift, start: dt.datetime) -> float:
    """When a node expires, in seconds from the start (0 at or before it)."""
    return max(0.0, ((drift.expires_at or start) - start).total_seconds())


def _drifted_since(node: FleetNode, start: dt.datetime) -> dt.datetime:
    """When Karpenter marked the node drifted: its NodeClaim's Drifted condition's time, else the change (`start`)."""
    claim = node.claim
    return claim.drifted_since if claim is not None and claim.drifted_since is not None else start


def _candidate(rollout: Rollout, fleet: Fleet, name: str, drift: NodeDrift, pdbs: PdbBudgets,
               replacements: Replacements, timing: Timing) -> _Candidate | None:
    node, pods = fleet.nodes[name], fleet.moved_pods(name)
    drain = _graced(drain_of(node, pods, pdbs, timing, v1=True), drift.termination_grace)
    if drain.blocked is not None:
        rollout.blocked.append(drain.blocked)
        return None
    failures = replacements.place([p.pod for p in pods if p.pod is not None]).failures
    if failures:
        movable = [p for p in pods if p.pod is not None]
        for index, why in sorted(failures.items()):
            rollout.pending.append(Pending(movable[index].key, movable[index].workload, name, why, held=True))
        rollout.blocked.append(Blocked(name, f"{len(failures)} of its pods would not schedule on HEAD's "
                                       "NodePools", "scheduling", True))
        return None
    return _Candidate(name, node.nodepool or "", pods, drain)


def _room(budgets: Sequence[Budget], pools: _Pools, pool: str, moment: dt.datetime) -> int:
    return allowance(budgets, DRIFTED, moment, pools.total[pool]).enforced - pools.disrupting[pool]


def _drift(rollout: Rollout, queue: list[_Candidate], budgets: Mapping[str, Sequence[Budget]], pools: _Pools,
           start: dt.datetime, timing: Timing, replacements: Replacements,
           expire: Callable[[list[str], float], None]) -> None:
    """The drift commands of `queue` as budgets allow; a candidate still waiting when it expires goes by `expire`
    (names, seconds from the start) instead."""
    waiting: dict[str, deque[tuple[int, _Candidate]]] = {}
    for order, candidate in enumerate(queue):
        waiting.setdefault(candidate.pool, deque()).append((order, candidate))
    for pool in sorted(waiting):
        answer = allowance(budgets.get(pool, ()), DRIFTED, start, pools.total[pool])
        allowed = "any number" if answer.enforced >= UNBOUNDED else str(answer.enforced)
        rollout.notes.append(f"nodepool {pool}: HEAD's budgets allow {allowed} of its {pools.total[pool]} nodes "
                             f"to be disrupted for drift at {start:%Y-%m-%dT%H:%M:%SZ}"
                             + (f" ({pools.disrupting[pool]} disrupting already)" if pools.disrupting[pool] else ""))
    now = POLLING_SECONDS
    expiring = any(c.expires is not None for c in queue)  # else no need to look for expiries at each turn
    while waiting:
        if expiring:
            _expire_waiting(waiting, now, expire)
            if not waiting:
                return
        pools.advance(now)
        moment = start + dt.timedelta(seconds=now)
        room = {pool: _room(budgets.get(pool, ()), pools, pool, moment) for pool in waiting}
        started = False
        while True:  # Karpenter looks again at once after a command: as many start now as the budgets allow
            open_pools = [pool for pool in waiting if room[pool] > 0]
            if not open_pools:
                break
            pool = min(open_pools, key=lambda p: waiting[p][0][0])
            _, chosen = waiting[pool].popleft()
            if not waiting[pool]:
                del waiting[pool]
            _start(rollout, chosen, pools, moment, now, timing, replacements)
            room[pool] -= 1
            started = True
        if not waiting:
            return
        rest = [c for line in waiting.values() for _, c in line]
        expiries = [c.expires for c in rest if c.expires is not None] if expiring else []
        wake = [t for t in (pools.next_event(now), _budget_opens(rest, budgets, pools, start, now),
                            min(expiries, default=None)) if t is not None]
        if not wake and not started:
            for candidate in sorted(rest, key=lambda c: c.name):
                rollout.blocked.append(Blocked(candidate.name, _never_why(candidate.pool, budgets, pools, moment),
                                               pool_key(candidate.pool, True), True))
            return
        polls = math.ceil((min(wake) - now) / POLLING_SECONDS) if wake else 1
        now += max(polls, 1) * POLLING_SECONDS


def _expire_waiting(waiting: dict[str, deque[tuple[int, _Candidate]]], now: float,
                    expire: Callable[[list[str], float], None]) -> None:
    """Take out of `waiting` the candidates expired by `now`, and have them expire at their times."""
    gone: dict[float, list[str]] = {}
    for pool in list(waiting):
        kept = deque(e for e in waiting[pool] if e[1].expires is None or e[1].expires > now)
        for _, candidate in waiting[pool]:
            if candidate.expires is not None and candidate.expires <= now:
                gone.setdefault(candidate.expires, []).append(candidate.name)
        if kept:
            waiting[pool] = kept
        else:
            del waiting[pool]
    for at in sorted(gone):
        expire(sorted(gone[at]), at)


def _start(rollout: Rollout, candidate: _Candidate, pools: _Pools, moment: dt.datetime, now: float,
           timing: Timing, replacements: Replacements) -> None:
    launched = replacements.place([p.pod for p in candidate.pods if p.pod is not None]).replacements
    startup = timing.node_startup if launched else 0.0
    wave = Wave(len(rollout.waves), moment, DRIFT, [candidate.name], launched,
                Counter(p.workload for p in candidate.pods), candidate.drain.seconds, dict(candidate.drain.slowed))
    wave.seconds = startup + candidate.drain.seconds
    pools.disrupt(candidate.pool, now + wave.seconds)
    pools.launch(launched, now + startup)
    add_wave(rollout, wave)


def _budget_opens(queue: Sequence[_Candidate], budgets: Mapping[str, Sequence[Budget]], pools: _Pools,
                  start: dt.datetime, now: float) -> float | None:
    """The first time (seconds from the start) after `now` at which a waiting NodePool's budget leaves room, its
    counts as they are; None: not within the budgets' horizon."""
    moment = start + dt.timedelta(seconds=now)
    found: list[float] = []
    for pool in {c.pool for c in queue}:
        written = budgets.get(pool, ())
        for span in spans(written, DRIFTED, moment, moment + horizon(written), pools.total[pool]):
            if span.start > moment and span.allowed - pools.disrupting[pool] > 0 and not span.unreadable:
                found.append((span.start - start).total_seconds())
                break
    return min(found) if found else None


def _never_why(pool: str, budgets: Mapping[str, Sequence[Budget]], pools: _Pools, moment: dt.datetime) -> str:
    written = budgets.get(pool, ())
    answer = allowance(written, DRIFTED, moment, pools.total[pool])
    if answer.errors:
        return f"nodepool {pool}'s disruption budgets cannot be read ({answer.errors[0]}): Karpenter allows 0"
    shown = ", ".join(f"nodes {b.nodes!r}" + (f" at {b.schedule!r} for {b.duration}" if b.schedule else "")
                      for b in written if b.applies_to(DRIFTED))
    disrupting = pools.disrupting[pool]
    held = f"; {disrupting} of its nodes stay disrupting" if disrupting else ""
    return f"nodepool {pool}'s disruption budgets allow no Drifted disruption ({shown}){held}"


def _at_once(rollout: Rollout, fleet: Fleet, names: Sequence[str], drift: Mapping[str, NodeDrift], pools: _Pools,
             method: str, start: dt.datetime, timing: Timing, pdbs: PdbBudgets, replacements: Replacements,
             at: float = 0.0) -> None:
    """Nodes deleted without a budget `at` seconds from the start (a removed NodePool's, expired ones): drained —
    PDBs and do-not-disrupt pods hold a drain until the terminationGracePeriod, for ever without one —, their pods
    provisioned for afterwards."""
    wave = Wave(len(rollout.waves), start + dt.timedelta(seconds=at), method, list(names), replaced_first=False)
    movable: list[FleetPod] = []
    seconds = 0.0
    for name in names:
        node, pods = fleet.nodes[name], fleet.moved_pods(name)
        plain = drain_of(node, pods, pdbs, timing, v1=True)
        if plain.blocked is not None and plain.blocked.by.startswith("Node/"):  # the annotation holds no deletion
            plain = drain_of(_without_annotation(node), pods, pdbs, timing, v1=True)
        drain = _graced(plain, drift[name].termination_grace)
        pool = node.nodepool or ""
        if drain.blocked is not None:
            blocked = drain.blocked
            rollout.blocked.append(Blocked(name, f"deleting ({method}), but its drain never ends: {blocked.reason} "
                                           "and its NodeClaim has no terminationGracePeriod", blocked.by,
                                           blocked.forever))
            if method != REMOVED:
                pools.disrupt(pool, None, at)  # deleting for ever: it holds its NodePool's budget
            continue
        movable += pods
        seconds = max(seconds, drain.seconds)
        wave.slowed.update(drain.slowed)
        if method != REMOVED:
            pools.disrupt(pool, at + drain.seconds, at)
    launched = finish_wave(rollout, wave, movable, replacements, seconds, timing)
    pools.launch(launched, at + wave.seconds)
    add_wave(rollout, wave)


def _without_annotation(node: FleetNode) -> FleetNode:
    return replace(node, annotations={k: v for k, v in node.annotations.items() if k != wk.DO_NOT_DISRUPT})
