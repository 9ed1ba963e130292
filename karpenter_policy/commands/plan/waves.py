"""The replacement waves: in what order, when and with what effect Karpenter v0.31 replaces the nodes a change
disrupts — with the pieces the controller uses (PodDisruptionBudget arithmetic: `kube.disruption`; "would these
pods schedule?": the provisioning scheduler on HEAD's Provisioners, `scheduling.Scheduler`).

Karpenter v0.31.1's deprovisioning (`pkg/controllers/deprovisioning/`):

* one command at a time, every :data:`POLLING_SECONDS` (`controller.go`, `pollingPeriod`), expiration before drift
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
  (`node_startup` seconds) before the candidate is deleted; the drain evicts through the Eviction API, which lets
  as many pods of a budget go at once as it allows, the next ones once the evicted pods' replacements are Ready
  (`pod_startup` seconds each round); the controller waits for the node to go (`waitForDeletion`), at most
  :data:`WAIT_FOR_DELETION_SECONDS`, before its next command.
* a removed Provisioner's nodes are deleted at once (their Machines' owner reference), drained, and their pods
  provisioned for afterwards: no replacement first.

What this does not model yet: the PDBs' state between waves (each wave sees the snapshot's steady state: the pods
evicted before are Ready again).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import Fleet, FleetNode, FleetPod
from karpenter_policy.commands.plan.room import Room
from karpenter_policy.kube import disruption as budgets
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import ExistingNode, NodeClaimTemplate, Plan, Pod, Scheduler

__all__ = [
    "GRACED",
    "POLLING_SECONDS",
    "WAIT_FOR_DELETION_SECONDS",
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
    "plan_waves",
]

#: Karpenter v0.31's deprovisioning loop period (`pkg/controllers/deprovisioning/controller.go`, `pollingPeriod`).
POLLING_SECONDS = 10.0
#: How long it waits for a candidate to be gone before its next command (`waitRetryOptions`: "~9.5 minutes").
WAIT_FOR_DELETION_SECONDS = 570.0
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
    """A node launched for a wave: its provisioner and launch choice ($/h; None: no price data)."""

    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None


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
    was carried out)."""

    replacements: list[Replacement]
    failures: dict[int, str]
    landings: list[Landing] | None = None
    waiting_until: float | None = None


@dataclass(slots=True)
class Wave:
    """One command: its `index`, `start`, `method` (expiration, drift, removed), the nodes it deletes, the
    replacements, the pods evicted per workload, how long the drain takes (`drain_seconds`), the budgets that
    made it take longer (`slowed`: PDB → seconds), how long it lasts (`seconds`) and whether the replacements come
    first (`replaced_first`)."""

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


class PdbBudgets:
    """Each PodDisruptionBudget's allowance in the snapshot's steady state (`kube.disruption`), and which budgets
    cover a pod (by namespace and labels, computed once per distinct label set)."""

    def __init__(self, pdbs: Sequence[Obj], pods: Sequence[Obj]) -> None:
        self.pdbs = list(pdbs)
        self._selectors = [(pdb, budgets.budget_selector(pdb)) for pdb in self.pdbs]
        self._covering: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
        groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[Obj]] = {}
        for pod in pods:  # pods of the same namespace and labels: a budget selects all of them or none
            groups.setdefault(_group(pod), []).append(pod)
        selected: dict[str, list[Obj]] = {_key(pdb): [] for pdb in self.pdbs}
        for group, members in groups.items():
            for name in self._covering_group(group, members[0]):
                selected[name].extend(members)
        self.budget = {_key(pdb): budgets.disruption_budget(pdb, selected[_key(pdb)]) for pdb in self.pdbs}

    def _covering_group(self, group: tuple[str, tuple[tuple[str, str], ...]], pod: Obj) -> list[str]:
        found = self._covering.get(group)
        if found is None:
            labels = objects.labels(pod)
            found = [_key(pdb) for pdb, selector in self._selectors
                     if (objects.namespace(pdb) or "default") == group[0] and selector.matches(labels)]
            self._covering[group] = found
        return found

    def covering(self, pod: Obj) -> list[str]:
        """The budgets that select `pod`."""
        return self._covering_group(_group(pod), pod)


def _group(pod: Obj) -> tuple[str, tuple[tuple[str, str], ...]]:
    return objects.namespace(pod) or "default", tuple(sorted(objects.labels(pod).items()))


def _key(pdb: Obj) -> str:
    return f"{objects.namespace(pdb) or 'default'}/{objects.name(pdb)}"


@dataclass(frozen=True, slots=True)
class Drain:
    seconds: float
    slowed: dict[str, float]
    blocked: Blocked | None


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
            forever = budget.desired_healthy >= budget.expected
            why = (f"PDB {name} allows no disruption (needs {budget.desired_healthy} healthy of "
                   f"{budget.expected})" if forever else
                   f"PDB {name} allows no disruption now ({budget.healthy} healthy, needs "
                   f"{budget.desired_healthy}): until its pods are Ready")
            return Drain(0, {}, Blocked(node.name, why, f"PodDisruptionBudget/{name}", forever))
        rounds = math.ceil(count / allowed)
        took = rounds * timing.pod_startup
        if rounds > 1:
            slowed[name] = took
        seconds = max(seconds, took)
    if pods and seconds == 0:
        seconds = timing.pod_startup
    return Drain(seconds, slowed, None)


class Replacements:
    """The new nodes HEAD's provisioners launch for a set of pods (one scheduling run per distinct set of shapes
    when no existing node is offered), and, given the fleet's :class:`~karpenter_policy.commands.plan.room.Room`,
    where pods go with existing nodes offered first."""

    def __init__(self, templates: Sequence[NodeClaimTemplate], daemons: Sequence[Pod]) -> None:
        self.templates = list(templates)
        self.daemons = list(daemons)
        self._cache: dict[tuple[int, ...], Plan] = {}

    def solve(self, pods: Sequence[Pod], existing: Sequence[ExistingNode] = (), room: Room | None = None) -> Plan:
        """The scheduler's plan for `pods` over `existing` nodes (from `room`) and HEAD's templates."""
        if room is not None:  # a plan of these very pods: the room follows each one
            return room.scheduler(self.templates, self.daemons, existing).solve(list(pods))
        key = tuple(sorted(id(p.shape) for p in pods))
        cached = self._cache.get(key)
        if cached is None:
            cached = Scheduler(self.templates, daemons=self.daemons).solve(list(pods))
            if not cached.failures:
                self._cache[key] = cached
        return cached

    def place(self, pods: Sequence[Pod], room: Room | None = None, without: Collection[str] = (),
              keep_partial: bool = False, at: float | None = None, ready_at: float = 0.0) -> Placed:
        """The replacements, and the pods (by position) that fit nowhere with why. With `room`, existing nodes but
        `without` are offered first, and the plan is carried out on the room when every pod was placed (or,
        `keep_partial`, whatever was placed), its new nodes initialized at `ready_at`; with `at` too (a disruption
        command's time, seconds from the start), not when it puts a pod on a node not initialized by then
        (`Placed.waiting_until`, whether or not some pod fits nowhere)."""
        if room is None:
            plan = self.solve(pods)
        else:
            plan = room.plan(pods, without, lambda existing: self.solve(pods, existing, room))
        new = {i: Replacement(c.template, c.launch.instance_type, c.launch.zone, c.launch.capacity_type,
                              c.launch.price)
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
        landings = [Landing(node, tuple(moved), new.get(index) if index is not None else None)
                    for node, moved, index in room.carry_out(plan, ready_at)]
        return Placed(replacements, failures, landings)


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
) -> Rollout:
    """The waves that carry out `drift` on `fleet` from `start` (see the module docstring); `pdbs` and
    `replacements` when the caller has them already."""
    rollout = Rollout()
    pdbs = pdbs if pdbs is not None else PdbBudgets(fleet.pdbs, fleet.pod_objects)
    replacements = replacements if replacements is not None else Replacements(templates, fleet.daemons)
    clock = 0.0
    drift = {n: d for n, d in drift.items() if not fleet.nodes[n].deleting}  # going already: not a candidate
    room = Room(fleet, templates, 2 * sum(len(fleet.moved_pods(n)) for n in drift) + 16)
    removed = sorted(n for n, d in drift.items() if d.removed)
    if removed:
        clock = _removed_wave(rollout, fleet, removed, pdbs, replacements, start, timing, room)

    def _expiry_rank(name: str) -> tuple[dt.datetime, str]:
        return drift[name].expires_at or start, name

    def _drift_rank(name: str) -> tuple[dt.datetime, str]:
        return fleet.nodes[name].created or start, name

    expiring = sorted((n for n, d in drift.items() if d.expires and not d.removed), key=_expiry_rank)
    drifted = sorted((n for n, d in drift.items() if d.drifted and not d.removed), key=_drift_rank)
    settled: set[str] = set()  # replaced, or found blocked: no candidate any more
    # each method's candidates in order, the empty ones apart (they go together); the expiring ones join as they expire
    due: tuple[deque[str], deque[str]] = (deque(), deque())
    waiting = (deque(n for n in drifted if not fleet.moved_pods(n)), deque(n for n in drifted if fleet.moved_pods(n)))
    later = deque(expiring)
    while True:
        now = _timestamp(start, clock)
        while later and (drift[later[0]].expires_at or start) <= now:
            name = later.popleft()
            due[bool(room.moved_pods(name))].append(name)
        for line in (*due, *waiting):
            while line and line[0] in settled:
                line.popleft()
        if any(due):
            method, lines = EXPIRATION, due
        elif any(waiting):
            method, lines = DRIFT, waiting
        elif later:  # nothing to do until the next node expires: the loop notices it at its next poll
            clock = max(clock, ((drift[later[0]].expires_at or start) - start).total_seconds())
            continue
        else:
            return rollout
        rank = _expiry_rank if method == EXPIRATION else _drift_rank
        clock = _command(rollout, fleet, method, lines, settled, pdbs, replacements, start, clock, timing, room,
                         rank)


def _command(rollout: Rollout, fleet: Fleet, method: str, lines: tuple[deque[str], deque[str]], settled: set[str],
             pdbs: PdbBudgets, replacements: Replacements, start: dt.datetime, clock: float, timing: Timing,
             room: Room, rank: Callable[[str], tuple[dt.datetime, str]]) -> float:
    """Karpenter v0.31's next command of `method` among its candidates (`lines`: the empty ones, the others, each in
    order): every empty one in one wave, else the first other that is not blocked, its pods onto the room of the
    other nodes first (`room`, which the command changes); those taken or found blocked are settled. The clock
    after it."""
    empties, names = lines
    empty = []
    busy = []  # given pods by an earlier wave since: no longer empty
    while empties:
        name = empties.popleft()
        if name in settled:
            continue
        if room.moved_pods(name):
            busy.append(name)
            continue
        settled.add(name)
        held = drain_of(fleet.nodes[name], [], pdbs, timing).blocked  # only the node's own annotation applies
        if held is not None:
            rollout.blocked.append(held)
        else:
            empty.append(name)
    if busy:
        lines[1].extendleft(reversed(sorted(busy, key=rank)))  # before the others: Karpenter's order is by time
    if empty:
        room.remove(empty)
        clock += POLLING_SECONDS
        add_wave(rollout, Wave(len(rollout.waves), _timestamp(start, clock), method, empty, seconds=POLLING_SECONDS))
        return clock
    while names:
        name = names.popleft()
        if name in settled:
            continue
        settled.add(name)
        node, pods = fleet.nodes[name], room.moved_pods(name)
        drain = drain_of(node, pods, pdbs, timing)
        if drain.blocked is not None:
            rollout.blocked.append(drain.blocked)
            continue
        placed = replacements.place([p.pod for p in pods if p.pod is not None], room, {name})
        launched, failures = placed.replacements, placed.failures
        if failures:
            movable = [p for p in pods if p.pod is not None]
            for index, why in sorted(failures.items()):
                pod = movable[index]
                rollout.pending.append(Pending(pod.key, pod.workload, name, why, held=True))
            rollout.blocked.append(Blocked(name, f"{len(failures)} of its pods would not schedule on HEAD's "
                                           "provisioners", "scheduling", True))
            continue
        room.remove([name])
        clock += POLLING_SECONDS
        wave = Wave(len(rollout.waves), _timestamp(start, clock), method, [name], launched,
                    Counter(p.workload for p in pods), drain.seconds, drain.slowed)
        wave.seconds = (timing.node_startup if launched else 0.0) + drain.seconds
        wave.landings = placed.landings
        add_wave(rollout, wave)
        return clock + (timing.node_startup if launched else 0.0) + min(drain.seconds, WAIT_FOR_DELETION_SECONDS)
    return clock


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
        room.remove(wave.nodes)
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
) -> float:
    """The nodes of removed provisioners, deleted at once: drained (PDBs slow it, nothing holds it), their pods
    provisioned for afterwards (onto the other nodes' room first); a pod no provisioner takes stays pending."""
    wave = Wave(0, start, REMOVED, list(names), replaced_first=False)
    movable: list[FleetPod] = [p for n in names for p in fleet.moved_pods(n)]
    seconds = 0.0
    for name in names:
        drain = drain_of(fleet.nodes[name], fleet.moved_pods(name), pdbs, timing)
        if drain.blocked is not None:
            rollout.blocked.append(drain.blocked)
            continue
        seconds = max(seconds, drain.seconds)
        wave.slowed.update(drain.slowed)
    finish_wave(rollout, wave, movable, replacements, seconds, timing, room)
    add_wave(rollout, wave)
    return min(wave.seconds, WAIT_FOR_DELETION_SECONDS)
