"""The replacement waves of Karpenter v1 NodePools' nodes: Karpenter v1.14.1's disruption in virtual time, with the
pieces the v0.31 waves use (`waves`: PodDisruptionBudget arithmetic, the scheduler on HEAD's NodePools, the room on
the nodes not deleted — `room`) and the NodePools' disruption budgets as Karpenter computes them (`api.v1.budgets`).

Karpenter v1.14.1 (core `pkg/controllers/disruption/`, `nodeclaim/expiration/`, `node/termination/`), every event in
the order of its time — the nodes that expire between two polls go before the next poll's commands:

* **removed NodePools**: their NodeClaims go at once (owner references), drained, their pods provisioned for
  afterwards; nodes deleted at the same moment (these, or expiring together) drain against the budgets together
  (`waves.drains_together`: the Eviction API checks each pod against its budget's allowance then, whichever node
  it is on);
* **forceful expiry** (`nodeclaim/expiration/controller.go`, `Reconcile`): an expired NodeClaim is deleted at once,
  one that expires later within the plan's horizon at its expiry time (the controller requeues until then) — no
  budget, no replacement first, the node's `do-not-disrupt` annotation ignored; its drain honours PDBs and pods'
  `karpenter.sh/do-not-disrupt` until its `terminationGracePeriod` ends, then the pods go regardless; without one a
  blocked drain never ends. Its pods are provisioned for as they go: onto nodes with room first, in-flight ones
  too (`provisioning/scheduling/scheduler.go:594`, `add`: "first try to schedule against an in-flight real
  node"), new nodes for the rest. A drifted node still waiting for its budget when it expires goes by expiry
  instead; an expiring node holds its NodePool's budget from its expiry until gone;
* **drift** (`drift.go:63`, `Drift.ComputeCommands`): one candidate per command, empty ones first (a node given
  pods by an earlier wave is empty no more), then in the order they drifted — NodeClaims already `Drifted` in the
  snapshot by their condition's time, then the others by creation (their conditions all turn true at the merge); a
  command starts only while the candidate's NodePool allows a `Drifted` disruption: `MustGetAllowedDisruptions` at
  that moment (budgets with their reasons and cron windows; percentages of the NodePool's initialized nodes, rounded
  up) less its nodes disrupting — deleting, marked for deletion or NotReady (`helpers.go`,
  `BuildDisruptionBudgetMapping`). After a command the controller looks again at once (`controller.go:177`:
  `RequeueImmediately`), else every :data:`POLLING_SECONDS`; so commands run side by side, as many as the budget
  allows. Each command's pods go onto the nodes that are not candidates and have room first — the snapshot's and
  earlier waves' replacements, in-flight or not —, new nodes for the rest (`helpers.go:53`, `SimulateScheduling`:
  the scheduler over the active nodes but the candidate; a candidate is marked for deletion when its command starts,
  `queue.go:346`, and offers no room after); a plan that puts a pod on a replacement not initialized yet is refused
  (`helpers.go:138`, `UninitializedNodeError`; before a pod that fits nowhere: both skip the candidate): the
  candidate waits, the next one is tried — told by the room without a scheduling run when it surely would
  (`Room.would_wait`). Replace before delete:
  the replacements are initialized (`node_startup`) before the node drains (`queue.go:218`). A replacement counts
  toward its NodePool's total once initialized, a drained node leaves it;
* **static NodePools** (`replicas`; `staticnodepools.StaticWork`): static provisioning's nodes launched at the start (no
  pod placed on them then; they join the room, `Room.join`, and later pods take them as any node); static
  deprovisioning's nodes deleted at once with the removed NodePools' (its NodeClaims deleted,
  `static/deprovisioning/controller.go`), drained as any deleted node, their pods provisioned for on the dynamic
  NodePools (`templates_for` leaves the static ones out); a drifted static node replaced one for one by a node of its
  template (`disruption/staticdrift.go`: no simulation; its pods onto that node, which takes its place in the room),
  ahead of the other drift commands, under its NodePool's `Drifted` budget, replace before delete;
* a candidate is **blocked** by the node's `karpenter.sh/do-not-disrupt: "true"` (`ValidateNodeDisruptable`), by a
  pod's `do-not-disrupt` or a PDB allowing no eviction (`ValidatePodsDisruptable`) — unless its NodeClaim has a
  `terminationGracePeriod`: then it is a candidate all the same (`NewCandidate`, the eventual disruption class) and
  its drain ends after that period at the latest —, when its pods would not all schedule (drift.go:93), or by a
  budget that allows no `Drifted` disruption for as far ahead as the budgets' schedules repeat (a week, or a year):
  the rollout never finishes. A blocked candidate that expires later goes by expiry;
* a snapshot's node **not registered or not initialized yet** (`FleetNode.initialized`: the
  `karpenter.sh/unregistered` taint, or its NodeClaim's `Registered`/`Initialized` not "True") is no candidate
  until it is (`ValidateNodeDisruptable`: "node isn't initialized"), assumed `--node-startup` after its NodeClaim's
  creation; it counts toward its NodePool's total from then (`BuildDisruptionBudgetMapping` counts initialized
  nodes), and until then it is in flight to the room (pods provisioned onto it; a command whose pods would go onto it
  waits, `UninitializedNodeError`). Its expiry deletes it whatever its state, as the expiration controller does.
* a reserved node's **capacity reservation gets its room back when the instance is terminated** — after its drain,
  the wave's end for that node (`MarkTerminated`, from the termination controller), not when its command starts —
  and a capacity block is read at each launch's time (`expiring` from 40 minutes before its end):
  `ReservedLaunches.advance` at every poll and every forceful deletion.

A pod with a claim is placed with its volumes' zones in its required terms wherever it goes, and one v1.14.1 ignores
for its claims is left pending when a forceful deletion's pods are provisioned for (`FleetPod.provisioned`;
`commands/plan/volumes.py`).

Planning has a budget (`--rollout-timeout`, `rolloutbudget`: one for both models' waves): past it, the waves so
far, the nodes not planned blocked by it, a note saying how far it got.

PodDisruptionBudgets are those of the pods healthy at each moment (`pdbstate`, shared with v0.31's waves): a
command's drain, and a candidate's check (`ValidatePodsDisruptable`), see what drains side by side have evicted and
not seen Ready again; a candidate whose budget allows none then waits for those pods (with a
terminationGracePeriod it is taken all the same and its drain waits).

What this does not model: nodes being deleted in the snapshot (assumed gone), consolidation *during* a rollout
(`Underutilized`, `Empty` commands between drift commands; with BASE = HEAD, NodePool consolidation is planned on
its own: `simulate/consolidation.py`, handed to `plan` through `commands/plan/consolidation.py`), the nodes a static
NodePool adds taking pods; in a snapshot of Provisioners' nodes too, each model's waves see the other's nodes as the
snapshot has them (and their budgets' evictions apart).
"""

from __future__ import annotations

import datetime as dt
import math
from bisect import insort
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from heapq import merge
from itertools import chain

from karpenter_policy.api.v1.budgets import DRIFTED, UNBOUNDED, Budget, allowance, budgets_of
from karpenter_policy.api.v1.budgettimeline import horizon, spans
from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import Fleet, FleetNode, FleetPod
from karpenter_policy.commands.plan.pdbstate import PdbState
from karpenter_policy.commands.plan.rolloutbudget import OutOfTime, RolloutClock
from karpenter_policy.commands.plan.room import Room
from karpenter_policy.commands.plan.staticnodepools import StaticWork
from karpenter_policy.commands.plan.waves import (
    DRIFT,
    EXPIRATION,
    GRACED,
    POLLING_SECONDS,
    REMOVED,
    Blocked,
    Drain,
    Landing,
    PdbBudgets,
    Pending,
    Replacement,
    Replacements,
    Rollout,
    Timing,
    Wave,
    add_wave,
    cut_short,
    drain_at,
    drain_of,
    drains_together,
    finish_wave,
    record_drains,
    slowed_by,
)
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import is_nodepool, pool_key, pool_name
from karpenter_policy.scheduling import NodeClaimTemplate

__all__ = ["STATIC_DEPROVISIONING", "STATIC_DRIFT", "STATIC_PROVISIONING", "nodepool_budgets", "plan_nodepool_waves"]

#: The methods of a static NodePool's waves (`StaticWork`): nodes launched to reach `replicas`, nodes deleted to come
#: down to it, a drifted node replaced one for one.
STATIC_PROVISIONING, STATIC_DEPROVISIONING = "static provisioning", "static deprovisioning"
STATIC_DRIFT = "static drift"


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


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A drifted node: its NodePool, its place in Karpenter's order (by when it drifted), its NodeClaim's
    terminationGracePeriod (seconds; None: not set) and when it expires (seconds from the start; None: not within
    the plan's horizon)."""

    name: str
    pool: str
    order: int
    grace: float | None
    expires: float | None = None
    #: a static NodePool's drifted node: its one-for-one replacement (static drift, no simulation)
    static: Replacement | None = None


class _Pools:
    """Each NodePool's initialized nodes and nodes disrupting, changed by events at virtual times (seconds from the
    start)."""

    def __init__(self, fleet: Fleet) -> None:
        self.total: Counter[str] = Counter()
        self.disrupting: Counter[str] = Counter()
        for node in fleet.nodes.values():  # a node not initialized counts once it is (`launch`'s "ready")
            if node.nodepool is not None and not node.deleting and node.initialized:
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
    clock: RolloutClock | None = None,
    static: StaticWork | None = None,
) -> Rollout:
    """The waves that carry out `drift` on the NodePools' nodes of `fleet` from `start` under HEAD's `budgets`
    (see the module docstring), and `static`'s (`staticnodepools`: nodes launched and deleted at the start, drifted
    ones replaced one for one; their nodes must be in `drift`). Planning them may take what is left of `clock`'s
    budget (None: no limit); past it, the waves planned so far, the nodes not planned blocked by `--rollout-timeout`
    and a note saying how far it got (`waves.cut_short`)."""
    drift = {n: d for n, d in drift.items() if fleet.nodes[n].nodepool is not None and not fleet.nodes[n].deleting}
    static = static if static is not None else StaticWork()
    planner = _Planner(fleet, drift, budgets, start, timing, pdbs, replacements, clock or RolloutClock(None),
                       len(static.added))
    if static.added:
        planner.launch_static(static.added, static.templates)
    gone = set(static.removed)
    removed = sorted(n for n, d in drift.items() if d.removed and n not in gone)
    if removed:
        planner.at_once(removed, REMOVED, 0.0)
    if static.removed:  # static deprovisioning deletes its NodeClaims at once (no budget), in its order
        planner.at_once([n for n in static.removed if n in drift], STATIC_DEPROVISIONING, 0.0)
    expired = sorted((n for n, d in drift.items()
                      if d.expires and not d.removed and n not in gone and _offset(d, start) <= 0),
                     key=lambda n: (drift[n].expires_at or start, n))
    if expired:
        planner.at_once(expired, EXPIRATION, 0.0)
    later = {n: _offset(d, start) for n, d in drift.items()
             if d.expires and not d.removed and n not in expired and n not in gone}
    drifted = [n for n, d in drift.items() if d.drifted and not d.removed and n not in expired and n not in gone
               and (n not in static.nodes or n in static.replaced)]  # a static node: static drift's, else expiry's
    drifted.sort(key=lambda n: (_drifted_since(fleet.nodes[n], start), fleet.nodes[n].created or start, n))
    queue = [_Candidate(name, fleet.nodes[name].nodepool or "", order, drift[name].termination_grace,
                        later.get(name), static.replaced.get(name)) for order, name in enumerate(drifted)]
    try:
        planner.run(queue, {n: at for n, at in later.items() if n not in set(drifted)})
    except OutOfTime:
        cut_short(planner.rollout, "v1 NodePools'", [c.name for c in queue] + sorted(planner.expiring),
                  planner.clock, start + dt.timedelta(seconds=planner.now))
    return Rollout().merged(planner.rollout)


def _offset(drift: NodeDrift, start: dt.datetime) -> float:
    """When a node expires, in seconds from the start (0 at or before it)."""
    return max(0.0, ((drift.expires_at or start) - start).total_seconds())


def _initialized_at(node: FleetNode, start: dt.datetime, timing: Timing) -> float:
    """When a snapshot's node not initialized yet is assumed to be (seconds from the start): `--node-startup` after
    its NodeClaim's creation (else the Node's; neither: after the start), at the start at the earliest."""
    claim = node.claim
    born = claim.created if claim is not None and claim.created is not None else node.created
    since = (born - start).total_seconds() if born is not None else 0.0
    return max(0.0, since + timing.node_startup)


def _drifted_since(node: FleetNode, start: dt.datetime) -> dt.datetime:
    """When Karpenter marked the node drifted: its NodeClaim's Drifted condition's time, else the change (`start`)."""
    claim = node.claim
    return claim.drifted_since if claim is not None and claim.drifted_since is not None else start


def _room(budgets: Sequence[Budget], pools: _Pools, pool: str, moment: dt.datetime) -> int:
    return allowance(budgets, DRIFTED, moment, pools.total[pool]).enforced - pools.disrupting[pool]


class _Line:
    """A NodePool's drift candidates still waiting, in `ComputeCommands`' order: the empty ones, then the others,
    each by when they drifted (a candidate given pods by an earlier wave is no longer empty)."""

    def __init__(self) -> None:
        self.empty: list[_Candidate] = []
        self.busy: list[_Candidate] = []

    def __bool__(self) -> bool:
        return bool(self.empty or self.busy)

    def __iter__(self) -> Iterator[_Candidate]:
        return chain(self.empty, self.busy)

    def add(self, candidate: _Candidate, room: Room) -> None:
        insort(self.busy if room.moves_pods(candidate.name) else self.empty, candidate, key=_order)

    def refresh(self, room: Room) -> None:
        """The empty candidates that earlier waves gave pods join the others."""
        filled = [c for c in self.empty if room.moves_pods(c.name)]
        if filled:
            self.empty = [c for c in self.empty if not room.moves_pods(c.name)]
            for candidate in filled:
                insort(self.busy, candidate, key=_order)

    def remove(self, candidate: _Candidate) -> None:
        (self.empty if candidate in self.empty else self.busy).remove(candidate)


def _order(candidate: _Candidate) -> int:
    return candidate.order


class _Planner:
    """The rollout being planned in virtual time (seconds from the start): the waves so far, each NodePool's counts,
    the room on the nodes not deleted (`commands.plan.room`, one for the whole rollout) and the nodes still to
    expire."""

    def __init__(self, fleet: Fleet, drift: Mapping[str, NodeDrift], budgets: Mapping[str, Sequence[Budget]],
                 start: dt.datetime, timing: Timing, pdbs: PdbBudgets, replacements: Replacements,
                 clock: RolloutClock, added: int = 0) -> None:
        """`added`: how many nodes static provisioning adds to the room."""
        self.rollout = Rollout()
        self.clock = clock
        #: virtual time reached (seconds from the start)
        self.now = 0.0
        self.fleet, self.drift, self.budgets, self.start = fleet, drift, budgets, start
        self.timing, self.pdbs, self.replacements = timing, pdbs, replacements
        self.pools = _Pools(fleet)
        self.state = PdbState(pdbs)
        #: the snapshot's NodePool nodes not initialized yet → when they will be (seconds from the start)
        self.starting = {name: _initialized_at(node, start, timing) for name, node in sorted(fleet.nodes.items())
                         if node.nodepool is not None and not node.deleting and not node.initialized}
        for name, at in self.starting.items():
            self.pools.events.append((at, "ready", fleet.nodes[name].nodepool or ""))
            self.rollout.notes.append(
                f"node {name}: {'not registered' if not fleet.nodes[name].registered else 'not initialized'} yet "
                f"(v1.14.1: no disruption candidate before it is initialized): drift waits for it, assumed "
                f"initialized at {start + dt.timedelta(seconds=at):%Y-%m-%dT%H:%M:%SZ} (--node-startup after its "
                "creation); the pods the plan places may go onto it as onto a node in flight")
        self.room = Room(fleet, replacements.templates,
                         2 * sum(len(fleet.moved_pods(n)) for n in drift) + 16 + added, "nodeclaim", self.starting)
        if replacements.reserved is not None:  # a node deleted gives its capacity reservation one back
            self.room.on_remove = replacements.reserved.release
        #: nodes deleted when they expire (seconds from the start), not drift candidates (any more)
        self.expiring: dict[str, float] = {}
        #: each candidate's drain: the room's stamp of its node then, the drain
        self.drains: dict[str, tuple[int, Drain]] = {}
        #: candidates whose pods would go onto nodes not initialized yet: the room's version then, and until when
        self.waiting: dict[str, tuple[int, float]] = {}

    def at_once(self, names: Sequence[str], method: str, at: float) -> None:
        """Nodes deleted without a budget `at` seconds from the start (a removed NodePool's, expired ones): drained
        — PDBs and do-not-disrupt pods hold a drain until the terminationGracePeriod, for ever without one —,
        their pods provisioned for afterwards, onto the room of the nodes not deleted first (the provisioner's
        `Solve`: in-flight nodes too), then new nodes."""
        wave = Wave(len(self.rollout.waves), self.start + dt.timedelta(seconds=at), method, list(names),
                    replaced_first=False)
        self.advance(at)
        movable: list[FleetPod] = []
        seconds = 0.0
        drains = []
        steady = []
        for name in names:
            node, pods = self.fleet.nodes[name], self.room.moved_pods(name)
            plain = drain_of(node, pods, self.pdbs, self.timing, v1=True)
            if plain.blocked is not None and plain.blocked.by.startswith("Node/"):  # it holds no deletion
                plain = drain_of(_without_annotation(node), pods, self.pdbs, self.timing, v1=True)
            steady.append((name, plain))
        for name, plain in zip(names, drains_together(steady, self.state, at, self.timing), strict=True):
            node, pods = self.fleet.nodes[name], self.room.moved_pods(name)
            drain = _graced(plain, self.drift[name].termination_grace)
            pool = node.nodepool or ""
            if drain.blocked is not None:
                blocked = drain.blocked
                self.rollout.blocked.append(Blocked(
                    name, f"deleting ({method}), but its drain never ends: {blocked.reason} and its NodeClaim has "
                    "no terminationGracePeriod", blocked.by, blocked.forever))
                if method != REMOVED:
                    self.pools.disrupt(pool, None, at)  # deleting for ever: it holds its NodePool's budget
                continue
            movable += pods
            seconds = max(seconds, drain.seconds)
            slowed_by(wave, drain)
            drains.append(drain)
            if method != REMOVED:
                self.pools.disrupt(pool, at + drain.seconds, at)
        launched = finish_wave(self.rollout, wave, movable, self.replacements, seconds, self.timing, self.room, at)
        record_drains(self.state, self.pdbs, drains, wave, self.timing, at)
        self.pools.launch(launched, at + wave.seconds)
        add_wave(self.rollout, wave)

    def advance(self, at: float) -> None:
        """The capacity reservations as they are `at` seconds from the start (`ReservedLaunches.advance`): room
        given back by the instances terminated by then, capacity blocks `expiring` by then."""
        if self.replacements.reserved is not None:
            self.replacements.reserved.advance(at)

    def launch_static(self, added: Sequence[Replacement], templates: Mapping[str, NodeClaimTemplate]) -> None:
        """Static provisioning's new nodes, launched at the start (no pod scheduled: v1.14.1 creates the NodeClaims
        from the template, `static/provisioning/controller.go`), counted in their NodePool once initialized. Each
        joins the room with its template's allocatable, initialized after `--node-startup`: once launched it is an
        ordinary node to the scheduler, and the pods later waves evict or leave pending may take it (its landing
        here, with no pod, prices it for the workloads' cost)."""
        wave = Wave(len(self.rollout.waves), self.start, STATIC_PROVISIONING, [], list(added))
        wave.seconds = self.timing.node_startup
        landings = []
        for replacement in added:
            template = templates.get(replacement.provisioner)
            offering = (replacement.instance_type, replacement.zone, replacement.capacity_type)
            name = self.room.join(template, offering, self.replacements.daemons, wave.seconds) if template else None
            if name is not None:
                landings.append(Landing(name, (), replacement))
        wave.landings = landings or None
        self.pools.launch(added, self.timing.node_startup)
        add_wave(self.rollout, wave)

    def static_command(self, candidate: _Candidate, replacement: Replacement, now: float) -> float | bool:
        """Static drift's command for `candidate` at `now` (core disruption/staticdrift.go): no scheduling
        simulation — a node of its template launched, initialized, then the candidate drained (PDBs and
        `do-not-disrupt` pods as any drain), its pods onto the replacement, which takes its place in the room (the
        same template). Held (False) when its drain is blocked; a budget allowing no eviction yet: when it could."""
        name = candidate.name
        drain = self.drain(candidate, now)
        if drain.blocked is not None:
            self.held(candidate, drain.blocked)
            return False
        if drain.waiting_until is not None:
            self.waiting[name] = (self.room.version, drain.waiting_until)
            return drain.waiting_until
        startup = self.timing.node_startup
        later = self.drain(candidate, now + startup, wait=False)  # it drains once its replacement is initialized
        if later.blocked is None:
            drain = later
        if drain.evictions is not None:
            self.state.record(drain.evictions, pod_startup=self.timing.pod_startup)
        pods = self.room.moved_pods(name)
        wave = Wave(len(self.rollout.waves), self.start + dt.timedelta(seconds=now), STATIC_DRIFT, [name],
                    [replacement], Counter(p.workload for p in pods), drain.seconds, dict(drain.slowed))
        wave.seconds = startup + drain.seconds
        # its pods onto the replacement (the workloads' cost); the room keeps the node's name for it
        wave.landings = [Landing(f"{name} (static drift)", tuple(pods), replacement)]
        self.pools.disrupt(candidate.pool, now + wave.seconds)
        self.pools.launch([replacement], now + startup)
        add_wave(self.rollout, wave)
        return True

    def expire_due(self, lines: dict[str, _Line], now: float) -> None:
        """The nodes that expire by `now` — drift candidates still waiting among them — deleted at their times."""
        due: dict[float, list[str]] = {}
        for pool, line in list(lines.items()):
            for candidate in [c for c in line if c.expires is not None and c.expires <= now]:
                line.remove(candidate)
                due.setdefault(candidate.expires or 0.0, []).append(candidate.name)
            if not line:
                del lines[pool]
        for name, at in list(self.expiring.items()):
            if at <= now:
                del self.expiring[name]
                due.setdefault(at, []).append(name)
        for at in sorted(due):
            self.at_once(sorted(due[at]), EXPIRATION, at)

    def held(self, candidate: _Candidate, blocked: Blocked, pending: Sequence[Pending] = ()) -> None:
        """A candidate Karpenter does not drift: blocked — unless it expires later: its expiry deletes it all the
        same."""
        if candidate.expires is not None:
            self.expiring[candidate.name] = candidate.expires
        else:
            self.rollout.blocked.append(blocked)
            self.rollout.pending += pending

    def drain(self, candidate: _Candidate, at: float | None = None, *, wait: bool = True) -> Drain:
        """The candidate's drain with the pods it has now (`drain_of`, remembered until pods land on it); timed
        `at` a moment with the budgets' pods evicted so far (`drain_at`; None: the snapshot's steady state), ended
        by its terminationGracePeriod when it has one."""
        stamp = self.room.stamp(candidate.name)
        found = self.drains.get(candidate.name)
        if found is None or found[0] != stamp:
            node = self.fleet.nodes[candidate.name]
            drain = drain_of(node, self.room.moved_pods(candidate.name), self.pdbs, self.timing, v1=True)
            found = self.drains[candidate.name] = (stamp, drain)
        drain = found[1]
        if at is not None:  # with a terminationGracePeriod Karpenter takes it whatever its budgets allow now
            drain = drain_at(candidate.name, drain, self.state, at, self.timing, wait=wait and candidate.grace is None)
        return _graced(drain, candidate.grace)

    def command(self, candidate: _Candidate, now: float) -> float | bool:
        """Karpenter's drift command for `candidate` at `now` (`Drift.ComputeCommands`): held (False) when its
        drain is blocked or its pods would not all schedule; when its pods would go onto nodes not initialized yet,
        the time they will be (it waits: `UninitializedNodeError`); else started (True) — replace before delete,
        its pods onto the other nodes' room first, new nodes for the rest (`SimulateScheduling`)."""
        name = candidate.name
        starting = self.starting.get(name, 0.0)
        if starting > now:  # not initialized: no candidate yet (v1.14.1 `ValidateNodeDisruptable`)
            self.waiting[name] = (self.room.version, starting)
            return starting
        drain = self.drain(candidate)  # the snapshot's steady state: blocked for good
        if drain.blocked is not None:
            self.held(candidate, drain.blocked)
            return False
        if candidate.static is not None:
            return self.static_command(candidate, candidate.static, now)
        pods = self.room.moved_pods(name)
        movable = [p for p in pods if p.pod is not None]
        wanted = [p.pod for p in movable if p.pod is not None]
        surely = self.room.would_wait(wanted, {name}, now)  # without a scheduling run when the room tells
        if surely is not None:  # it waits whatever its budgets allow now: they are asked when it could go
            self.waiting[name] = (self.room.version, surely)
            return surely
        drain = self.drain(candidate, now)
        if drain.blocked is not None:
            self.held(candidate, drain.blocked)
            return False
        if drain.waiting_until is not None:  # a budget allows no eviction until pods evicted before are Ready
            self.waiting[name] = (self.room.version, drain.waiting_until)
            return drain.waiting_until
        placed = self.replacements.place(wanted, self.room, {name}, at=now, ready_at=now + self.timing.node_startup)
        if placed.waiting_until is not None:
            self.waiting[name] = (self.room.version, placed.waiting_until)
            return placed.waiting_until
        if placed.failures:
            self.held(candidate, Blocked(name, f"{len(placed.failures)} of its pods would not schedule on HEAD's "
                                         "NodePools", "scheduling", True),
                      [Pending(movable[i].key, movable[i].workload, name, why, held=True)
                       for i, why in sorted(placed.failures.items())])
            return False
        launched = placed.replacements
        startup = self.timing.node_startup if launched else 0.0
        later = self.drain(candidate, now + startup, wait=False)  # it drains once its replacements are initialized
        if later.blocked is None:
            drain = later
        self.room.remove([name], now + startup + drain.seconds)  # terminated once drained: its reservation's room
        if drain.evictions is not None:
            self.state.record(drain.evictions, pod_startup=self.timing.pod_startup)
        wave = Wave(len(self.rollout.waves), self.start + dt.timedelta(seconds=now), DRIFT, [name], launched,
                    Counter(p.workload for p in pods), drain.seconds, dict(drain.slowed))
        wave.seconds = startup + drain.seconds
        wave.landings = placed.landings
        self.pools.disrupt(candidate.pool, now + wave.seconds)
        self.pools.launch(launched, now + startup)
        add_wave(self.rollout, wave)
        return True

    def run(self, queue: Sequence[_Candidate], expiring: Mapping[str, float]) -> None:
        """The drift commands of `queue` (in Karpenter's order) as budgets allow, interleaved in time with the
        nodes that expire (`expiring`: names, seconds from the start); a candidate still waiting when it expires
        goes by expiry instead."""
        self.expiring.update(expiring)
        lines: dict[str, _Line] = {}
        for candidate in queue:  # blocked ones are no candidates (`GetCandidates`), whatever the budgets
            blocked = self.drain(candidate).blocked
            if blocked is not None:
                self.held(candidate, blocked)
            else:
                lines.setdefault(candidate.pool, _Line()).add(candidate, self.room)
        start = self.start
        for pool in sorted(lines):
            answer = allowance(self.budgets.get(pool, ()), DRIFTED, start, self.pools.total[pool])
            allowed = "any number" if answer.enforced >= UNBOUNDED else str(answer.enforced)
            disrupting = self.pools.disrupting[pool]
            self.rollout.notes.append(
                f"nodepool {pool}: HEAD's budgets allow {allowed} of its {self.pools.total[pool]} nodes to be "
                f"disrupted for drift at {start:%Y-%m-%dT%H:%M:%SZ}"
                + (f" ({disrupting} disrupting already)" if disrupting else ""))
        now = POLLING_SECONDS
        while lines:
            self.state.forget(self.now)  # nothing is asked before the last poll any more
            self.now = now
            self.clock.check()
            self.expire_due(lines, now)
            if not lines:
                break
            self.pools.advance(now)
            self.advance(now)
            started, waits = self.poll(lines, now)
            if not lines:
                break
            rest = [c for line in lines.values() for c in line]
            expiries = [c.expires for c in rest if c.expires is not None] + list(self.expiring.values())
            wake = [t for t in (self.pools.next_event(now), _budget_opens(rest, self.budgets, self.pools, start, now),
                                min(expiries, default=None), min(waits, default=None)) if t is not None]
            if not wake and not started:
                moment = start + dt.timedelta(seconds=now)
                for candidate in sorted(rest, key=lambda c: c.name):
                    self.rollout.blocked.append(Blocked(
                        candidate.name, _never_why(candidate.pool, self.budgets, self.pools, moment),
                        pool_key(candidate.pool, True), True))
                break
            polls = math.ceil((min(wake) - now) / POLLING_SECONDS) if wake else 1
            now += max(polls, 1) * POLLING_SECONDS
        self.expire_due({}, math.inf)

    def poll(self, lines: dict[str, _Line], now: float) -> tuple[bool, list[float]]:
        """One poll at `now`: commands start while a budget allows one — Karpenter looks again at once after a
        command (`controller.go`: `RequeueImmediately`), in `ComputeCommands`' order over the NodePools with room
        in their budgets. Whether any started, and when the candidates waiting on nodes not initialized yet could
        go."""
        moment = self.start + dt.timedelta(seconds=now)
        room = {pool: _room(self.budgets.get(pool, ()), self.pools, pool, moment) for pool in lines}
        started = False
        while True:
            skipped: dict[str, float] = {}  # waiting on nodes not initialized: until when
            held: list[_Candidate] = []
            chosen: _Candidate | None = None
            for line in lines.values():
                line.refresh(self.room)
            for candidate in merge(*(line for pool, line in lines.items() if room[pool] > 0),
                                   key=lambda c: (c.static is None, self.room.moves_pods(c.name), c.order)):
                self.clock.check()
                version, until = self.waiting.get(candidate.name, (-1, 0.0))
                if version == self.room.version and until > now:  # the room as then: the same plan, still waiting
                    skipped[candidate.name] = until
                    continue
                outcome = self.command(candidate, now)
                if isinstance(outcome, bool) and not outcome:
                    held.append(candidate)
                elif outcome is True:
                    chosen = candidate
                    break
                else:
                    skipped[candidate.name] = outcome
            for candidate in held + ([chosen] if chosen is not None else []):
                lines[candidate.pool].remove(candidate)
                if not lines[candidate.pool]:
                    del lines[candidate.pool]
            if chosen is None:
                return started, list(skipped.values())
            room[chosen.pool] -= 1
            started = True  # the room changed: Karpenter simulates the others again


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


def _without_annotation(node: FleetNode) -> FleetNode:
    return replace(node, annotations={k: v for k, v in node.annotations.items() if k != wk.DO_NOT_DISRUPT})
