"""The replacement waves: in what order, when and with what effect Karpenter v0.31 replaces the nodes a change
disrupts — with the pieces the controller uses (PodDisruptionBudget arithmetic: `kube.disruption`; "would these
pods schedule?": the provisioning scheduler on HEAD's Provisioners, `scheduling.Scheduler`).

Karpenter v0.31.1's deprovisioning (`pkg/controllers/deprovisioning/`):

* one command at a time (`controller.go:114-140`, `Reconcile`): after a command the loop looks again at once
  (`RequeueAfter: immediately`; after a failed one, the rate limiter's milliseconds), after a poll that took none
  :data:`POLLING_SECONDS` later (`pollingPeriod`) — the next command starts as the previous one ends, its
  synchronous wait for the replacements and the deletion over; expiration before drift
  (`controller.go`'s deprovisioner order; `expiration.go`, `drift.go`); the empty candidates of a method all in one
  command, else one candidate per command — expired ones the most expired first, drifted ones in the order they
  drifted (all at the merge here: by creation, then name). A node that expires later within the plan's horizon
  becomes an expiration candidate at its expiry time (`Expiration.ShouldDeprovision`: the clock after it), taken
  at the next command from then — before any drift left; the loop idles until then when nothing else is left;
* a node being deleted already is no candidate; a candidate is skipped while a PodDisruptionBudget allows no
  eviction of one of its pods, while one of its pods has `karpenter.sh/do-not-evict` (or `do-not-disrupt`) set to
  "true", or while the node has the `karpenter.sh/do-not-disrupt` annotation (`helpers.go`, `filterCandidates`;
  `types.go`, `NewCandidate`), and when its pods would not all schedule (`simulateScheduling`): Karpenter keeps
  the node, and the plan lists those pods as what would be left pending;
* a command's pods go onto the other nodes with room first, new nodes only for the rest (`simulateScheduling`;
  :mod:`~karpenter_policy.commands.plan.room`): a command whose pods all fit elsewhere launches nothing, and a pod
  moved onto a node that is a candidate later moves again with it;
* replace before delete (`executeCommand`): the replacements are launched and must be initialized
  (`node_startup` seconds) before the candidate is deleted (`launchReplacementMachines`, `waitForReadiness`); the
  controller waits for that at most :data:`WAIT_SECONDS` (`waitRetryOptions`) — past it the command fails, the
  candidate is uncordoned and kept, the launched nodes stay, and the loop goes on: a wave that deletes nothing
  (`Wave.kept`), and the candidate is a candidate again at the next polls, its pods going onto the node its failed
  command launched once that is initialized (before, the simulation refuses it: it waits). The drain evicts
  through the Eviction API, which lets as many pods of a budget go at once as it allows at that moment
  (`pdbstate`: the pods healthy then, earlier waves' evicted pods included), the next ones once the evicted pods'
  replacements are Ready (`pod_startup` seconds each round); the controller waits for the node to go
  (`waitForDeletion`), at most :data:`WAIT_SECONDS`, before its next command;
* the loop runs in virtual time over one room: a candidate whose simulation puts a pod on a replacement not
  initialized at the command's time (`helpers.go:115`, "would schedule against a non-initialized node") or whose
  budget allows no eviction then because pods evicted before are not Ready yet (`filterCandidates`) waits — the next
  candidate is tried, and the loop polls again once one could go;
* a removed Provisioner's nodes are deleted at once (their Machines' owner reference), drained, and their pods
  provisioned for afterwards: no replacement first. Their drains share the budgets (:func:`drains_together`: the
  Eviction API checks each pod against its budget's allowance at that moment, whichever node it is on).

Planning has a budget (`--rollout-timeout`, `rolloutbudget`, shared with v1's waves): past it, the waves so far,
the nodes not planned blocked by it, a note saying how far it got (:func:`cut_short`).

What this does not model: how long deleting empty nodes takes (their wave counts one polling period, and the next
command starts after it).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import Fleet, FleetNode, FleetPod
from karpenter_policy.commands.plan.pdbstate import Evictions, PdbBudgets, PdbState
from karpenter_policy.commands.plan.reservedlaunches import ReservedLaunches
from karpenter_policy.commands.plan.rolloutbudget import BY, OutOfTime, RolloutClock
from karpenter_policy.commands.plan.room import Room
from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import ExistingNode, NodeClaimTemplate, Plan, Pod, Scheduler

__all__ = [
    "GRACED",
    "POLLING_SECONDS",
    "WAIT_SECONDS",
    "Blocked",
    "Drain",
    "Landing",
    "PdbBudgets",
    "Pending",
    "Placed",
    "Replacement",
    "Replacements",
    "Rollout",
    "Timing",
    "Wave",
    "add_wave",
    "finish_wave",
    "drain_of",
    "drains_together",
    "plan_waves",
    "record_drains",
    "slowed_by",
]

#: Karpenter v0.31's deprovisioning loop period (`pkg/controllers/deprovisioning/controller.go`, `pollingPeriod`).
POLLING_SECONDS = 10.0
#: How long it waits for a replacement to be initialized (`waitForReadiness`), and for a candidate to be gone before its
#: next command (`waitForDeletion`): `waitRetryOptions`, "~9.5 minutes".
WAIT_SECONDS = 570.0
#: How many failed commands of one candidate the plan follows before it calls the candidate blocked (Karpenter
#: retries for ever; a candidate whose pods fit on a node its failed command launched goes at its first retry).
MAX_FAILURES = 8
EXPIRATION, DRIFT, REMOVED = "expiration", "drift", "removed"
#: The suffix of a `Wave.slowed` key whose drain a terminationGracePeriod ends (Karpenter v1): what held it first.
GRACED = " (until terminationGracePeriod)"


@dataclass(frozen=True, slots=True)
class Timing:
    """How long a new node takes to be initialized and an evicted pod's replacement to be Ready (seconds)."""

    node_startup: float = 60.0
    pod_startup: float = 15.0


@dataclass(frozen=True, slots=True)
class Replacement:
    """A node launched for a wave: its provisioner and launch choice ($/h; None: no price data), and the capacity
    reservation it launches into (`reservation_id`, as printed; "": none)."""

    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None
    reservation_id: str = ""


@dataclass(frozen=True, slots=True)
class Landing:
    """Where some of a wave's evicted pods go: an existing node with room, or a `replacement` the wave launches
    (`node` is then its name in the plan's room, never shown)."""

    node: str
    pods: tuple[FleetPod, ...]
    replacement: Replacement | None = None


@dataclass(frozen=True, slots=True)
class Placed:
    """What placing a wave's pods gave: the new nodes, the pods (by position) that fit nowhere with why, where the
    others went (None: not followed — every pod placed went to the new nodes), and, for a command's plan that put
    pods on nodes not initialized at its time, when they will be (`waiting_until`, seconds from the start; nothing
    was carried out), and whether the command failed (`failed`: launched, nothing moved)."""

    replacements: list[Replacement]
    failures: dict[int, str]
    landings: list[Landing] | None = None
    waiting_until: float | None = None
    #: the command failed (its new nodes not initialized within Karpenter's wait): they joined the room empty,
    #: `landings` names them with no pods, and nothing moved
    failed: bool = False


@dataclass(slots=True)
class Wave:
    """One command: its `index`, `start`, `method` (expiration, drift, removed), the nodes it deletes, the
    replacements, the pods evicted per workload, how long the drain takes (`drain_seconds`), the budgets that
    made it take longer (`slowed`: PDB → seconds), how long it lasts (`seconds`), whether the replacements come
    first (`replaced_first`), and, for a v0.31 command that failed, the candidates it kept (`kept`: it deletes
    nothing)."""

    index: int
    start: dt.datetime
    method: str
    nodes: list[str]
    replacements: list[Replacement] = field(default_factory=list)
    evicted: Counter[str] = field(default_factory=Counter)
    drain_seconds: float = 0.0
    slowed: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    #: replace before delete (False: the nodes go first, their pods provisioned for afterwards)
    replaced_first: bool = True
    #: where its evicted pods go (None: onto its replacements, not followed pod by pod)
    landings: list[Landing] | None = None
    #: a command that failed (Karpenter v0.31's readiness wait gave up): the candidates it kept — `nodes` is empty,
    #: its `replacements` were launched and stay
    kept: list[str] = field(default_factory=list)

    @property
    def evicted_pods(self) -> int:
        return sum(self.evicted.values())


@dataclass(frozen=True, slots=True)
class Blocked:
    """A disrupted node Karpenter would not replace: why, the budget or pod that holds it (`by`), and whether
    that never changes by itself (`forever`: the rollout never finishes)."""

    node: str
    reason: str
    by: str
    forever: bool


@dataclass(frozen=True, slots=True)
class Pending:
    """A pod no HEAD provisioner takes: its node, workload and why (`held`: Karpenter keeps the node for it)."""

    pod: str
    workload: str
    node: str
    reason: str
    held: bool


@dataclass(slots=True)
class Rollout:
    """The waves in order of start, the nodes blocked, the pods left pending, each node's wave, and what the reader
    should know of how they were timed (`notes`)."""

    waves: list[Wave] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    wave_of: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def merged(self, other: Rollout) -> Rollout:
        """This rollout and `other` (of other nodes) as one: the waves by start (this one's first at a tie),
        numbered again."""
        waves = sorted([*self.waves, *other.waves], key=lambda w: w.start)  # a stable sort keeps ties in order
        out = Rollout(blocked=[*self.blocked, *other.blocked], pending=[*self.pending, *other.pending],
                      notes=[*self.notes, *other.notes])
        for index, wave in enumerate(waves):
            wave.index = index
            add_wave(out, wave)
        return out

    @property
    def end(self) -> dt.datetime | None:
        """When the last wave ends (waves of Karpenter v1 run side by side: the latest end, not the last's)."""
        if not self.waves:
            return None
        return max(w.start + dt.timedelta(seconds=w.seconds) for w in self.waves)

    @property
    def never_finishes(self) -> bool:
        return any(b.forever for b in self.blocked)


@dataclass(frozen=True, slots=True)
class Drain:
    """How long a node's drain takes (`seconds`), the budgets that make it longer (`slowed`), or what blocks it;
    the node's pods per budget (`groups`); timed at a moment of the rollout (:func:`drain_at`), its evictions, or
    when budgets that allow none then will allow one again (`waiting_until`)."""

    seconds: float
    slowed: dict[str, float]
    blocked: Blocked | None
    groups: tuple[tuple[str, int], ...] = ()
    evictions: Evictions | None = None
    waiting_until: float | None = None


def drain_of(node: FleetNode, pods: Sequence[FleetPod], pdbs: PdbBudgets, timing: Timing, *,
             v1: bool = False) -> Drain:
    """How long draining `node` takes, or what blocks it (Karpenter's `filterCandidates`; with `v1`, v1.14.1's
    `ValidateNodeDisruptable` and `ValidatePodsDisruptable`: the node's annotation must be "true", and only
    `karpenter.sh/do-not-disrupt` holds a pod)."""
    annotation = node.annotations.get(wk.DO_NOT_DISRUPT)
    if (annotation == "true") if v1 else annotation is not None:
        return Drain(0, {}, Blocked(node.name, f"the node has the {wk.DO_NOT_DISRUPT} annotation",
                                    f"Node/{node.name}", True))
    groups: Counter[str] = Counter()
    for pod in pods:
        if pod.do_not_disrupt if v1 else pod.do_not_evict:
            held = wk.DO_NOT_DISRUPT if v1 else "do-not-evict"
            return Drain(0, {}, Blocked(node.name, f"pod {pod.key} has {held}", f"Pod/{pod.key}", True))
        covering = pdbs.covering(pod.obj)
        if len(covering) > 1:
            return Drain(0, {}, Blocked(node.name, f"pod {pod.key} is covered by {len(covering)} PDBs "
                                         f"({', '.join(covering)}): the Eviction API refuses it",
                                         f"Pod/{pod.key}", True))
        if covering:
            groups[covering[0]] += 1
    seconds, slowed = 0.0, {}
    for name, count in sorted(groups.items()):
        budget = pdbs.budget[name]
        allowed = budget.disruptions_allowed
        if allowed <= 0:
            return Drain(0, {}, _stuck(node.name, name, pdbs))
        rounds = math.ceil(count / allowed)
        took = rounds * timing.pod_startup
        if rounds > 1:
            slowed[name] = took
        seconds = max(seconds, took)
    if pods and seconds == 0:
        seconds = timing.pod_startup
    return Drain(seconds, slowed, None, tuple(sorted(groups.items())))


def _stuck(node: str, name: str, pdbs: PdbBudgets) -> Blocked:
    """The node's drain held by budget `name`, which allows no eviction and will not by itself (for ever when it
    keeps every expected pod healthy; else until the snapshot's pods not Ready are)."""
    budget = pdbs.budget[name]
    forever = budget.desired_healthy >= budget.expected
    why = (f"PDB {name} allows no disruption (needs {budget.desired_healthy} healthy of {budget.expected})"
           if forever else f"PDB {name} allows no disruption now ({budget.healthy} healthy, needs "
           f"{budget.desired_healthy}): until its pods are Ready")
    return Blocked(node, why, f"PodDisruptionBudget/{name}", forever)


def drain_at(node: str, drain: Drain, state: PdbState, at: float, timing: Timing, *, wait: bool = True) -> Drain:
    """`drain` (:func:`drain_of`, of `node`) timed `at` seconds from the start, with the budgets as the rollout's
    evictions so far leave them (`state`): as many pods of a budget go at once as it allows then, the next ones
    as evicted pods are Ready again; with `wait`, a budget that allows none then because of earlier evictions makes
    the drain wait (`Drain.waiting_until`: Karpenter does not take the candidate now, `filterCandidates`)."""
    if drain.blocked is not None or not drain.groups:
        return drain
    found = state.evictions(dict(drain.groups), at, timing.pod_startup, wait=wait)
    if found.stuck is not None:
        return Drain(0, {}, _stuck(node, found.stuck, state.pdbs), drain.groups)
    if found.waiting_until is not None:
        return Drain(0, {}, None, drain.groups, waiting_until=found.waiting_until)
    return Drain(found.seconds, found.slowed, None, drain.groups, found)


def drains_together(drains: Sequence[tuple[str, Drain]], state: PdbState, at: float, timing: Timing) -> list[Drain]:
    """The drains (:func:`drain_of`, each with its node's name) of nodes deleted at once, started `at`, timed against
    the budgets together: the Eviction API checks each pod against its budget's `disruptionsAllowed` at that moment
    whichever node it is on, so a budget lets as many of all those nodes' pods go at once as it allows, the next
    ones as evicted pods are Ready again — handed out in turn, node by node in the given order (the evictions
    alternate). Each drain comes back timed (`Drain.evictions`: its own pods' times), or blocked by a budget that
    allows none and never will by itself; a drain blocked already, or without pods of any budget, as it was."""
    out: dict[str, Drain] = {name: drain for name, drain in drains if drain.blocked is not None or not drain.groups}
    while True:
        timed = [(name, dict(drain.groups)) for name, drain in drains if name not in out]
        together: Counter[str] = Counter()
        for _, groups in timed:
            together.update(groups)
        if not together:
            break
        found = state.evictions(dict(together), at, timing.pod_startup, wait=False)
        if found.stuck is not None:  # every drain with a pod of it is held, the others are timed again without them
            for name, groups in timed:
                if found.stuck in groups:
                    out[name] = Drain(0, {}, _stuck(name, found.stuck, state.pdbs), tuple(sorted(groups.items())))
            continue
        mine: dict[str, dict[str, list[float]]] = {name: {} for name, _ in timed}
        for budget, times in found.at.items():
            left = {name: groups[budget] for name, groups in timed if budget in groups}
            turn = deque(left)
            for moment in times:  # in turn: the next node that still has a pod of it
                while not left[turn[0]]:
                    turn.popleft()
                name = turn[0]
                mine[name].setdefault(budget, []).append(moment)
                left[name] -= 1
                turn.rotate(-1)
        for name, groups in timed:
            seconds, slowed = 0.0, {}
            for budget, went in sorted(mine[name].items()):
                took = went[-1] - at + timing.pod_startup
                if went[-1] > found.at[budget][0]:  # a round later than the budget's first eviction: it waited
                    slowed[budget] = took
                seconds = max(seconds, took)
            out[name] = Drain(seconds, slowed, None, tuple(sorted(groups.items())),
                              Evictions(seconds, slowed, mine[name]))
        break
    return [out[name] for name, _ in drains]


class Replacements:
    """The new nodes HEAD's provisioners launch for a set of pods (one scheduling run per distinct set of shapes
    when no existing node is offered), and, given the fleet's :class:`~karpenter_policy.commands.plan.room.Room`,
    where pods go with existing nodes offered first."""

    def __init__(self, templates: Sequence[NodeClaimTemplate], daemons: Sequence[Pod],
                 reserved: ReservedLaunches | None = None) -> None:
        """`reserved`: the capacity reservations HEAD's NodePools may launch into and their room (`reservedlaunches`;
        None: none)."""
        self.templates = list(templates)
        self.daemons = list(daemons)
        self.reserved = reserved
        self._cache: dict[tuple[int, ...], Plan] = {}

    def offered(self) -> list[NodeClaimTemplate]:
        """HEAD's templates as a scheduling run now gets them: with the reserved offerings that have room left."""
        return self.templates if self.reserved is None else self.reserved.templates(self.templates)

    def solve(self, pods: Sequence[Pod], existing: Sequence[ExistingNode] = (), room: Room | None = None) -> Plan:
        """The scheduler's plan for `pods` over `existing` nodes (from `room`) and HEAD's templates."""
        if room is not None:  # a plan of these very pods: the room follows each one
            return room.scheduler(self.offered(), self.daemons, existing).solve(list(pods))
        version = self.reserved.version if self.reserved is not None else 0
        key = (version, *sorted(id(p.shape) for p in pods))
        cached = self._cache.get(key)
        if cached is None:
            cached = Scheduler(self.offered(), daemons=self.daemons).solve(list(pods))
            if not cached.failures:
                self._cache[key] = cached
        return cached

    def place(self, pods: Sequence[Pod], room: Room | None = None, without: Collection[str] = (),
              keep_partial: bool = False, at: float | None = None, ready_at: float = 0.0,
              readiness_wait: float | None = None) -> Placed:
        """The replacements, and the pods (by position) that fit nowhere with why. With `room`, existing nodes but
        `without` are offered first, and the plan is carried out on the room when every pod was placed (or,
        `keep_partial`, whatever was placed), its new nodes initialized at `ready_at`; with `at` too (a disruption
        command's time, seconds from the start), not when it puts a pod on a node not initialized by then
        (`Placed.waiting_until`, whether or not some pod fits nowhere); with `readiness_wait` too, a plan that
        launches nodes initialized more than that after `at` fails: its new nodes join the room empty
        (`Placed.failed`; v0.31.1 `launchReplacementMachines` keeps them when `waitForReadiness` gives up)."""
        if room is None:
            plan = self.solve(pods)
        else:
            plan = room.plan(pods, without, lambda existing: self.solve(pods, existing, room))
        reserved = self.reserved
        chosen = {i: reserved.choose(c) for i, c in enumerate(plan.claims)} if reserved is not None else {}
        new = {i: Replacement(c.template, c.launch.instance_type, c.launch.zone, c.launch.capacity_type,
                              c.launch.price, reserved.shown(chosen[i]) if reserved is not None else "")
               for i, c in enumerate(plan.claims) if c.launch is not None}
        replacements = list(new.values())
        failures: dict[int, str] = {}
        if plan.failures:  # the plan is of these very pods (a plan with failures is never cached)
            position = {p.key: i for i, p in enumerate(pods)}
            failures = {position[k]: f.message() for k, f in plan.failures.items() if k in position}
        if room is None:
            return Placed(replacements, failures)
        waiting = room.uninitialized(plan, at) if at is not None else None
        if waiting is not None:  # first: Karpenter skips the candidate for either, and this one may pass
            return Placed(replacements, failures, waiting_until=waiting)
        if failures and not keep_partial:
            return Placed(replacements, failures)
        if readiness_wait is not None and at is not None and plan.claims and ready_at - at > readiness_wait:
            launched = room.launch(plan, ready_at)
            self._take(chosen, dict(enumerate(launched)))
            return Placed(replacements, failures, [Landing(node, (), new.get(index))
                                                   for index, node in enumerate(launched)], failed=True)
        carried = room.carry_out(plan, ready_at)
        self._take(chosen, {index: node for node, _, index in carried if index is not None})
        landings = [Landing(node, tuple(moved), new.get(index) if index is not None else None)
                    for node, moved, index in carried]
        return Placed(replacements, failures, landings)

    def _take(self, chosen: Mapping[int, str], nodes: Mapping[int, str]) -> None:
        """The launched claims (by index → their room names) take their reservations' room."""
        if self.reserved is None:
            return
        for index, reservation_id in sorted(chosen.items()):
            if reservation_id and index in nodes:
                self.reserved.take(reservation_id, nodes[index])


def _timestamp(start: dt.datetime, seconds: float) -> dt.datetime:
    return start + dt.timedelta(seconds=seconds)


def plan_waves(
    fleet: Fleet,
    drift: Mapping[str, NodeDrift],
    templates: Sequence[NodeClaimTemplate],
    start: dt.datetime,
    timing: Timing = Timing(),
    pdbs: PdbBudgets | None = None,
    replacements: Replacements | None = None,
    budget: RolloutClock | None = None,
) -> Rollout:
    """The waves that carry out `drift` on `fleet` from `start` (see the module docstring); `pdbs` and
    `replacements` when the caller has them already. Planning them may take what is left of `budget`
    (`--rollout-timeout`; None: no limit); past it, the waves planned so far, the nodes not planned blocked by it
    and a note saying how far it got (:func:`cut_short`)."""
    drift = {n: d for n, d in drift.items() if not fleet.nodes[n].deleting}  # going already: not a candidate
    loop = _Deprovisioning(fleet, drift, start, timing, pdbs if pdbs is not None else PdbBudgets(
        fleet.pdbs, fleet.pod_objects), replacements if replacements is not None else Replacements(
        templates, fleet.daemons), templates, budget or RolloutClock(None))
    try:
        loop.run()
    except OutOfTime:
        cut_short(loop.rollout, "v0.31 Provisioners'", [n for n, d in drift.items() if d.disrupted], loop.budget,
                  _timestamp(start, loop.clock))
    return loop.rollout


def cut_short(rollout: Rollout, model: str, candidates: Collection[str], budget: RolloutClock,
              reached: dt.datetime) -> None:
    """The planning of `model`'s rollout ("v1 NodePools'", "v0.31 Provisioners'") ran out of `budget` at virtual
    time `reached`: every node of `candidates` neither in a wave nor blocked yet is blocked by `--rollout-timeout`
    (for ever: the plan cannot say it finishes), and a note says how far the plan got."""
    planned = {name for wave in rollout.waves for name in wave.nodes}
    held = {b.node for b in rollout.blocked}
    left = sorted(name for name in set(candidates) if name not in planned and name not in held)
    shown = f"{budget.seconds or 0.0:.6f}".rstrip("0").rstrip(".")
    rollout.notes.append(
        f"the {model} rollout was not planned to its end: planning took longer than {BY} {shown}s; "
        f"{len(rollout.waves)} waves planned up to {reached:%Y-%m-%dT%H:%M:%SZ}, {len(left)} drifted or expiring "
        "nodes not planned")
    for name in left:
        rollout.blocked.append(Blocked(name, f"not planned: the plan took longer than {BY}", BY, True))


class _Deprovisioning:
    """Karpenter v0.31's deprovisioning loop in virtual time (`clock`: seconds from the start when its last command
    was taken): the waves so far, the room on the nodes not deleted, the budgets' evicted pods (`state`)."""

    def __init__(self, fleet: Fleet, drift: Mapping[str, NodeDrift], start: dt.datetime, timing: Timing,
                 pdbs: PdbBudgets, replacements: Replacements, templates: Sequence[NodeClaimTemplate],
                 budget: RolloutClock) -> None:
        self.fleet, self.drift, self.start, self.timing = fleet, drift, start, timing
        self.pdbs, self.replacements, self.budget = pdbs, replacements, budget
        self.rollout = Rollout()
        self.state = PdbState(pdbs)
        self.room = Room(fleet, templates, 2 * sum(len(fleet.moved_pods(n)) for n in drift) + 16)
        self.clock = 0.0
        #: how long after `clock` the loop polls next: at once after a command (`controller.go:134`, `RequeueAfter:
        #: immediately`; a failed one too: the rate limiter's milliseconds), :data:`POLLING_SECONDS` after a poll
        #: that took none (`controller.go:139`, `pollingPeriod`) — and, as before, after the merge, an expiry or a
        #: removed Provisioner's wave
        self.lag = POLLING_SECONDS
        #: replaced, or found blocked: no candidate any more
        self.settled: set[str] = set()
        self.timed_out = False
        #: each candidate's failed commands (`failed`)
        self.failures: Counter[str] = Counter()

    def expiry_rank(self, name: str) -> tuple[dt.datetime, str]:
        return self.drift[name].expires_at or self.start, name

    def drift_rank(self, name: str) -> tuple[dt.datetime, str]:
        return self.fleet.nodes[name].created or self.start, name

    def run(self) -> None:
        drift, start = self.drift, self.start
        removed = sorted(n for n, d in drift.items() if d.removed)
        if removed:
            self.clock = _removed_wave(self.rollout, self.fleet, removed, self.pdbs, self.replacements, start,
                                       self.timing, self.room, self.state)
        expiring = sorted((n for n, d in drift.items() if d.expires and not d.removed), key=self.expiry_rank)
        drifted = sorted((n for n, d in drift.items() if d.drifted and not d.removed), key=self.drift_rank)
        # each method's candidates in order, the empty ones apart (they go together); the expiring ones join as
        # they expire
        due: tuple[deque[str], deque[str]] = (deque(), deque())
        waiting = (deque(n for n in drifted if not self.fleet.moved_pods(n)),
                   deque(n for n in drifted if self.fleet.moved_pods(n)))
        later = deque(expiring)
        while True:
            now = _timestamp(start, self.clock)
            while later and (drift[later[0]].expires_at or start) <= now:
                name = later.popleft()
                due[bool(self.room.moved_pods(name))].append(name)
            for line in (*due, *waiting):
                while line and line[0] in self.settled:
                    line.popleft()
            expires = ((drift[later[0]].expires_at or start) - start).total_seconds() if later else None
            if not any(due) and not any(waiting):
                if expires is None:
                    return
                self.clock = max(self.clock, expires)  # idle until the next node expires: noticed at the next poll
                self.lag = POLLING_SECONDS
                continue
            self.budget.check()
            self.state.forget(self.clock)
            at = self.clock + self.lag
            waits: list[float] = []
            after = None
            for method, lines, rank in ((EXPIRATION, due, self.expiry_rank), (DRIFT, waiting, self.drift_rank)):
                if any(lines):
                    after, waited = self.command(method, lines, at, rank)
                    waits += waited
                    if after is not None:
                        break
            if after is not None:
                self.clock, self.lag = after, 0.0
            elif waits:  # every candidate left waits: the first poll once one can go
                polls = max(1, math.ceil((min(waits) - at) / POLLING_SECONDS))
                self.clock, self.lag = at + (polls - 1) * POLLING_SECONDS, POLLING_SECONDS
                if expires is not None:  # a node expiring before then is noticed at the poll after its expiry
                    self.clock = min(self.clock, expires)

    def command(self, method: str, lines: tuple[deque[str], deque[str]], at: float,
                rank: Callable[[str], tuple[dt.datetime, str]]) -> tuple[float | None, list[float]]:
        """Karpenter v0.31's next command of `method` at `at` among its candidates (`lines`: the empty ones, the
        others, each in order): every empty one in one wave, else the first other that is neither blocked nor
        waiting, its pods onto the room of the other nodes first (which the command changes); those taken or
        found blocked are settled. When the loop takes its next command after it (None: no command), and when the
        candidates that wait could go — on a replacement not initialized yet (`helpers.go:115`, "would schedule
        against a non-initialized node"), or on a budget whose evicted pods are not Ready yet (`filterCandidates`)."""
        empties, names = lines
        empty = []
        busy = []  # given pods by an earlier wave since: no longer empty
        while empties:
            name = empties.popleft()
            if name in self.settled:
                continue
            if self.room.moved_pods(name):
                busy.append(name)
                continue
            self.settled.add(name)
            held = drain_of(self.fleet.nodes[name], [], self.pdbs, self.timing).blocked  # the node's annotation
            if held is not None:
                self.rollout.blocked.append(held)
            else:
                empty.append(name)
        if busy:
            names.extendleft(reversed(sorted(busy, key=rank)))  # before the others: Karpenter's order is by time
        if empty:
            self.room.remove(empty)
            add_wave(self.rollout, Wave(len(self.rollout.waves), _timestamp(self.start, at), method, empty,
                                        seconds=POLLING_SECONDS, landings=[]))
            return at + POLLING_SECONDS, []  # the empty nodes' deletion counted as a poll's time, as before
        skipped: list[str] = []
        waits: list[float] = []
        try:
            while names:
                self.budget.check()
                name = names.popleft()
                if name in self.settled:
                    continue
                outcome = self.candidate(method, name, at)
                if isinstance(outcome, tuple):
                    skipped.append(name)
                    waits.append(outcome[0])
                elif outcome is not None:
                    if name not in self.settled:  # its command failed: a candidate again, in its place
                        skipped.append(name)
                    return outcome, waits
        finally:
            names.extendleft(reversed(skipped))  # waiting ones keep their place
        return None, waits

    def candidate(self, method: str, name: str, at: float) -> float | tuple[float] | None:
        """Candidate `name`'s command at `at`: when the loop goes on after it; (when it could go,): it waits; None:
        it is settled without a command (blocked, or its pods would not all schedule)."""
        timing, room = self.timing, self.room
        node, pods = self.fleet.nodes[name], room.moved_pods(name)
        steady = drain_of(node, pods, self.pdbs, timing)
        drain = drain_at(name, steady, self.state, at, timing)
        if drain.blocked is not None:
            self.settled.add(name)
            self.rollout.blocked.append(drain.blocked)
            return None
        if drain.waiting_until is not None:
            return (drain.waiting_until,)
        movable = [p for p in pods if p.pod is not None]
        placed = self.replacements.place([p.pod for p in movable if p.pod is not None], room, {name}, at=at,
                                         ready_at=at + timing.node_startup, readiness_wait=WAIT_SECONDS)
        if placed.waiting_until is not None:
            return (placed.waiting_until,)
        if placed.failed:
            return self.failed(method, name, at, placed)
        self.settled.add(name)
        if placed.failures:
            for index, why in sorted(placed.failures.items()):
                pod = movable[index]
                self.rollout.pending.append(Pending(pod.key, pod.workload, name, why, held=True))
            self.rollout.blocked.append(Blocked(name, f"{len(placed.failures)} of its pods would not schedule on "
                                                "HEAD's provisioners", "scheduling", True))
            return None
        room.remove([name])
        launched = placed.replacements
        startup = timing.node_startup if launched else 0.0
        drain = drain_at(name, steady, self.state, at + startup, timing, wait=False)  # once they are initialized
        if drain.evictions is not None:
            self.state.record(drain.evictions, pod_startup=timing.pod_startup)
        wave = Wave(len(self.rollout.waves), _timestamp(self.start, at), method, [name], launched,
                    Counter(p.workload for p in pods), drain.seconds, drain.slowed)
        wave.seconds = startup + drain.seconds
        wave.landings = placed.landings
        add_wave(self.rollout, wave)
        return at + startup + min(drain.seconds, WAIT_SECONDS)

    def failed(self, method: str, name: str, at: float, placed: Placed) -> float:
        """Candidate `name`'s command at `at` launched nodes that are not initialized within Karpenter's wait
        (`launchReplacementMachines`: `waitForReadiness` gives up after :data:`WAIT_SECONDS`): the command fails,
        the candidate is uncordoned and kept — a candidate again at the next polls, when its pods may go onto the
        nodes it launched once they are initialized (`helpers.go:115` refuses them before) —, and the launched
        nodes stay (in the room, empty). A wave that deletes nothing records the launch (`Wave.kept`); the loop
        polls again at once (the failed reconcile is requeued by the rate limiter, milliseconds)."""
        startup = self.timing.node_startup
        self.failures[name] += 1
        if self.failures[name] >= MAX_FAILURES:  # the plan's bound, not Karpenter's: it would go on retrying
            self.settled.add(name)
            self.rollout.blocked.append(Blocked(
                name, f"its command failed {MAX_FAILURES} times: each replacement takes longer than Karpenter v0.31 "
                "waits for it and its pods fit on none launched before", "waitForReadiness", True))
        if not self.timed_out:
            self.timed_out = True
            self.rollout.notes.append(
                f"a replacement takes {startup:.0f}s to be initialized (--node-startup), longer than Karpenter "
                f"v0.31 waits for it ({WAIT_SECONDS:.0f}s, waitForReadiness): its command fails, the candidate is "
                "kept and the launched node stays; the candidate is tried again at the next polls, its pods going "
                "onto that node once it is up")
        wave = Wave(len(self.rollout.waves), _timestamp(self.start, at), method, [], placed.replacements,
                    seconds=WAIT_SECONDS, landings=placed.landings, kept=[name])
        add_wave(self.rollout, wave)
        return at + WAIT_SECONDS


def finish_wave(
    rollout: Rollout,
    wave: Wave,
    movable: Sequence[FleetPod],
    replacements: Replacements,
    drain_seconds: float,
    timing: Timing,
    room: Room | None = None,
    at: float = 0.0,
) -> list[Replacement]:
    """Place the wave's `movable` pods, as the provisioner reads them once pending (`FleetPod.provisioned`), on
    replacements (those that fit nowhere, or that Karpenter v1.14.1 ignores for their claims, become pending), and
    set what the wave launches, evicts and takes: the drain, then a node's start-up when anything was launched.
    With `room`, on the other nodes' room first (the new nodes join it initialized when the wave, started `at`
    seconds from the plan's start, ends), and the wave's nodes are gone from it."""
    pending = [p.provisioned for p in movable if p.provisioned is not None]
    placed = replacements.place(pending, room, set(wave.nodes), keep_partial=True,
                                ready_at=at + drain_seconds + timing.node_startup)
    launched, failures = placed.replacements, placed.failures
    wave.landings = placed.landings
    if room is not None:
        room.remove(wave.nodes, at + drain_seconds)  # terminated once drained
    scheduled = [p for p in movable if p.pod is not None]
    for index, why in sorted(failures.items()):
        pod = scheduled[index]
        rollout.pending.append(Pending(pod.key, pod.workload, pod.node, why, held=False))
    wave.replacements = launched
    wave.evicted = Counter(p.workload for p in movable)
    wave.drain_seconds = drain_seconds
    wave.seconds = drain_seconds + (timing.node_startup if launched else 0.0)
    return launched


def add_wave(rollout: Rollout, wave: Wave) -> None:
    rollout.waves.append(wave)
    for name in wave.nodes:
        rollout.wave_of[name] = wave.index


def _removed_wave(
    rollout: Rollout,
    fleet: Fleet,
    names: Sequence[str],
    pdbs: PdbBudgets,
    replacements: Replacements,
    start: dt.datetime,
    timing: Timing,
    room: Room,
    state: PdbState,
) -> float:
    """The nodes of removed provisioners, deleted at once: drained (PDBs slow it, nothing holds it), their pods
    provisioned for afterwards (onto the other nodes' room first); a pod no provisioner takes stays pending."""
    wave = Wave(0, start, REMOVED, list(names), replaced_first=False)
    movable: list[FleetPod] = [p for n in names for p in fleet.moved_pods(n)]
    seconds = 0.0
    drains = []
    steady = [(name, drain_of(fleet.nodes[name], fleet.moved_pods(name), pdbs, timing)) for name in names]
    for drain in drains_together(steady, state, 0.0, timing):
        if drain.blocked is not None:
            rollout.blocked.append(drain.blocked)
            continue
        seconds = max(seconds, drain.seconds)
        slowed_by(wave, drain)
        drains.append(drain)
    finish_wave(rollout, wave, movable, replacements, seconds, timing, room)
    record_drains(state, pdbs, drains, wave, timing, 0.0)
    add_wave(rollout, wave)
    return min(wave.seconds, WAIT_SECONDS)


def slowed_by(wave: Wave, drain: Drain) -> None:
    """The budgets that slowed one of the wave's drains slowed the wave: each for its longest drain."""
    for name, seconds in drain.slowed.items():
        wave.slowed[name] = max(wave.slowed.get(name, 0.0), seconds)


def record_drains(state: PdbState, pdbs: PdbBudgets, drains: Sequence[Drain], wave: Wave, timing: Timing,
                  at: float) -> None:
    """The evictions of a wave that deletes its nodes first (`drains`, started `at`): its pods that went onto the
    nodes it launched are Ready again only once those are initialized (`at` + the drain + `node_startup`)."""
    late: Counter[str] = Counter()  # per budget: its pods that went onto the wave's new nodes
    for landing in wave.landings or ():
        if landing.replacement is not None:
            late.update(name for pod in landing.pods for name in pdbs.covering(pod.obj)[:1])
    ready = at + wave.drain_seconds + timing.node_startup
    for drain in drains:
        if drain.evictions is None:
            continue
        returns = {}
        for name, went in drain.evictions.at.items():
            taken = min(len(went), late[name])
            late[name] -= taken
            returns[name] = [ready] * taken
        state.record(drain.evictions, returns, timing.pod_startup)
