"""The room on the fleet's nodes between the plan's waves, and where a wave's evicted pods go: onto existing nodes
with room first, onto new nodes only for the rest — as Karpenter v0.31.1's deprovisioning decides a command
(`pkg/controllers/deprovisioning/helpers.go`, `simulateScheduling`: the provisioning scheduler over every active
state node but the candidates, then new machines for what is left) and as its provisioner places the evicted pods
(`pkg/controllers/provisioning/scheduling/scheduler.go`, `Solve`: existing nodes before new ones).

:class:`Room` keeps every node the plan has not deleted — the snapshot's, then the replacements the plan launched and
the nodes a static NodePool adds (:meth:`Room.join`: launched without a scheduling plan, its template's allocatable and
DaemonSet overhead), in that order — with what its pods request (`FleetPod.requests`, DaemonSet pods included) against
its allocatable (`status.allocatable`, else its instance type's under a HEAD template's node arithmetic; a node of a
type no template knows offers no room). A node the snapshot shows deleting offers none either. It keeps too which pods a
node's replacement would move (:meth:`Room.moved_pods`): its own, and those an earlier wave put there — a pod moved onto
a drifted node moves again when that node is replaced. :meth:`Room.plan` runs the
scheduler (`scheduling.Scheduler`) with those nodes, less the wave's own, as existing nodes; :meth:`Room.carry_out`
moves the pods onto the nodes the scheduler chose, the rest onto the new nodes it launches, which join the room
with the time they are initialized at. A disruption command's plan that puts a pod on a node not initialized yet
(:meth:`Room.uninitialized`) is not carried out: Karpenter's simulation refuses it (v0.31.1
`deprovisioning/helpers.go:115`, "would schedule against a non-initialized node"; v1.14.1
`disruption/helpers.go:138`, `UninitializedNodeError`) and the candidate waits. The snapshot's nodes count as
initialized, but those a v1 plan is told are still starting (`starting`: a NodePool's node not registered or not
initialized yet), which are in flight as a replacement is until then. :meth:`Room.would_wait` tells, without a
scheduling run, that a command's plan surely puts a pod on a node not initialized (a run only fills nodes: a pod
that the initialized nodes cannot take goes onto one not initialized that takes it), so a dense fleet's waiting
candidates cost no run each.

The scheduler asks existing nodes first fit, in its order (by name); a replacement is offered after the
snapshot's nodes (its name is made to sort last: the controller's names are not known before). Offering every
node to every wave would copy the whole fleet per wave, so the nodes are offered as a growing prefix of that order
(those with room for the wave's smallest pod, found by `scheduling.firstfit.FirstFit` over free cpu, memory and
pod slots): a run that puts every pod on the prefix is the run over all of them — each pod takes the first node
that accepts it, and the prefix's nodes are asked first and in the same state — and a run that does not is made
again with a prefix four times longer, up to every node. Topology domains are every node's labels whatever the
prefix (`node_domains`).

What it does not model: the running pods' topology spread and affinity (as the plan's replacements never did), the
DaemonSet pods a replacement will run beyond their requests (the template's overhead), and limits counting the
fleet (HEAD's limits are checked against the replacements alone, as before).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from itertools import islice

from karpenter_policy.commands.plan.fleet import Fleet, FleetNode, FleetPod
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import owner_labels
from karpenter_policy.model.taints import PREFER_NO_SCHEDULE, untolerated
from karpenter_policy.scheduling import Attempt, ClaimPlan, ExistingNode, NodeClaimTemplate, Plan, Pod, Scheduler
from karpenter_policy.scheduling.firstfit import FirstFit
from karpenter_policy.scheduling.vectors import ZERO, Vector, add, fits, subtract

__all__ = ["FIRST_OFFER", "Room"]

#: How many nodes with room a wave is offered first (then four times more, until every node).
FIRST_OFFER = 16
#: How many nodes with room for a pod :meth:`Room.would_wait` asks before it leaves the answer to the scheduler.
_ASKED = 64
#: Sorts after every node name (a DNS subdomain: lowercase letters, digits, '-' and '.').
_LAST = "~"


class Room:
    """The nodes the plan has not deleted and what their pods request (see the module docstring)."""

    def __init__(self, fleet: Fleet, templates: Sequence[NodeClaimTemplate], extra: int,
                 kind: str = "replacement", starting: Mapping[str, float] | None = None) -> None:
        """`extra`: how many replacements are offered room at most (slots kept for them in first-fit order; later ones
        take no more pods); `kind`: how their names begin (a plan with two rooms — Provisioners' and NodePools' —
        names their replacements apart); `starting`: the snapshot's nodes not initialized yet (in flight) → when
        each will be (seconds from the start)."""
        self._templates = {t.name: t for t in templates}
        #: whether the scheduler over these templates relaxes a pod into tolerating PreferNoSchedule taints
        self._tolerate = any(t.effect == PREFER_NO_SCHEDULE for template in templates for t in template.taints)
        self._kind = kind
        #: told of the nodes each `remove` deletes (the reservations they were in get room back: `reservedlaunches`)
        self.on_remove: Callable[[Collection[str], float | None], None] | None = None
        #: how many times the room changed (nodes gone, pods moved, nodes launched): a plan made at the same count is
        #: the same plan
        self.version = 0
        #: the room's version when each node last changed (pods onto it, gone, launched; not here: never)
        self._stamp: dict[str, int] = {}
        #: whether a node takes a pod's shape (`_takes`), by node and id of the shape: the node's stamp then, the answer
        self._taken: dict[tuple[str, int], tuple[int, bool]] = {}
        #: `_holding`'s walks: the version they were made at, the positions by requests
        self._walked: tuple[int, dict[Vector, list[int]]] = (-1, {})
        #: `_plain` by id of the shape
        self._plains: dict[int, bool] = {}
        self._nodes: list[ExistingNode | None] = []
        self._position: dict[str, int] = {}
        self._domains: dict[str, Counter[str]] = defaultdict(Counter)
        #: the pods a wave would move off each node: the snapshot's, then those earlier waves put there
        self._moved: dict[str, list[FleetPod]] = {}
        self._fleet_pod = {id(form): p for pods in fleet.pods_on.values() for p in pods  # either form it is placed in
                           for form in (p.pod, p.pending_pod) if form is not None}
        for name in sorted(fleet.nodes):
            node = fleet.nodes[name]
            if node.deleting:
                continue
            self._moved[name] = fleet.moved_pods(name)  # a node offering no room still has pods to move
            allocatable = node.allocatable if node.allocatable is not None else self._type_allocatable(node)
            if allocatable is None:
                continue
            requested = ZERO
            for pod in fleet.pods_on.get(name, ()):
                requested = add(requested, pod.requests)
            self._append(ExistingNode(name=name, labels=node.labels, taints=node.taints, allocatable=allocatable,
                                      requested=requested, template=node.owner))
        capacities = [(n.allocatable, n.requested) if n is not None else (ZERO, ZERO) for n in self._nodes]
        self._first_fit = FirstFit(capacities + [(ZERO, ZERO)] * max(extra, 0))
        self._launched = 0
        #: when each replacement is initialized (seconds from the plan's start; the snapshot's nodes: only those
        #: `starting`)
        self._ready: dict[str, float] = {name: at for name, at in (starting or {}).items() if name in self._position}

    def _type_allocatable(self, node: FleetNode) -> Vector | None:
        """The node's type's allocatable under its own template's node arithmetic, else the first template's
        that knows the type (None: no template knows it)."""
        own = self._templates.get(node.owner or "")
        for template in ([own] if own is not None else []) + list(self._templates.values()):
            position = template.table.position.get(node.instance_type)
            if position is not None:
                return template.shapes.allocatable[position]
        return None

    def _append(self, node: ExistingNode) -> None:
        self._position[node.name] = len(self._nodes)
        self._nodes.append(node)
        for key, value in node.labels.items():
            self._domains[key][value] += 1

    def _domain_values(self, key: str) -> Collection[str]:
        return [value for value, count in self._domains.get(key, Counter()).items() if count > 0]

    def _set(self, node: ExistingNode) -> None:
        position = self._position[node.name]
        if position < self._first_fit.size:
            self._first_fit.update(position, node.allocatable, node.requested)

    def moved_pods(self, name: str) -> list[FleetPod]:
        """The pods on the node that its replacement would move: the snapshot's (a node that offers no room, of a
        type no template knows: those alone) and those earlier waves put there; none once it is gone."""
        return list(self._moved.get(name, ()))

    def stamp(self, name: str) -> int:
        """The room's :attr:`version` when the node last changed (pods onto it, gone); 0: never."""
        return self._stamp.get(name, 0)

    def moves_pods(self, name: str) -> bool:
        """Whether the node's replacement would move any pod (:meth:`moved_pods` is not empty)."""
        return bool(self._moved.get(name))

    def remove(self, names: Collection[str], terminated: float | None = None) -> None:
        """The nodes are gone (deleted by a wave): no room any more, their labels no topology domain; their instances
        are terminated `terminated` seconds from the start (after their drains; None: now), which :attr:`on_remove`
        is told."""
        self.version += 1
        if self.on_remove is not None:
            self.on_remove(names, terminated)
        for name in names:
            self._stamp[name] = self.version
            self._moved.pop(name, None)
            position = self._position.get(name)
            node = self._nodes[position] if position is not None else None
            if position is None or node is None:
                continue
            self._nodes[position] = None
            for key, value in node.labels.items():
                self._domains[key][value] -= 1
            if position < self._first_fit.size:
                self._first_fit.update(position, ZERO, ZERO)

    def _offers(self, pods: Sequence[Pod], without: Collection[str]) -> Iterator[ExistingNode]:
        """The nodes, in first-fit order, with room for the smallest of `pods` (cpu, memory, pod slots), but
        `without`."""
        if not pods:
            return
        smallest = pods[0].requests
        for pod in pods[1:]:
            smallest = tuple(map(min, smallest, pod.requests))
        for position in self._first_fit.candidates(smallest):
            node = self._nodes[position] if position < len(self._nodes) else None
            if node is not None and node.name not in without:
                yield node

    def plan(self, pods: Sequence[Pod], without: Collection[str],
             solve: Callable[[Sequence[ExistingNode]], Plan]) -> Plan:
        """Where `pods` would go with the nodes `without` gone (see the module docstring): `solve` runs the
        scheduler over the existing nodes it is given (:meth:`scheduler`). Nothing moves until :meth:`carry_out`."""
        offers = self._offers(pods, without)
        offered: list[ExistingNode] = []
        size = FIRST_OFFER
        while True:
            offered += [node for _, node in zip(range(size - len(offered)), offers, strict=False)]
            plan = solve(offered)
            if (not plan.claims and not plan.failures) or len(offered) < size:
                return plan  # every pod on the prefix, or every node with room offered
            size *= 4

    def scheduler(self, templates: Sequence[NodeClaimTemplate], daemons: Sequence[Pod],
                  existing: Sequence[ExistingNode]) -> Scheduler:
        """The scheduler over `existing` (HEAD's limits counted against the new nodes alone; every room node's
        labels as topology domains)."""
        return Scheduler(templates, existing, daemons, used={}, node_counts={}, node_domains=self._domain_values)

    def uninitialized(self, plan: Plan, at: float) -> float | None:
        """When the last node `plan` puts pods on that is not initialized at `at` (seconds from the start) will be;
        None: every node it puts pods on is initialized by then."""
        later = [self._ready.get(name, 0.0) for name, pods in plan.existing.items() if pods]
        waited = [ready for ready in later if ready > at]
        return max(waited) if waited else None

    def would_wait(self, pods: Sequence[Pod], without: Collection[str], at: float) -> float | None:
        """A lower bound of :meth:`uninitialized` for the plan of `pods` with `without` gone, found without running
        the scheduler when that plan surely puts a pod on a node not initialized at `at`; None: not known (run it).

        A run (whichever of the scheduler's orders) only ever fills nodes, and a pod tries the existing nodes
        before new ones; while no pod is on a node not initialized, those are as the room has them now. So the plan
        puts a pod on one when some pod fits no initialized node now but fits one not initialized (at its turn
        every initialized node is full for it), or when every pod fits a node not initialized and the pods
        together request more of some resource than the initialized nodes that take any of them have free (some
        pod finds them full). Asked only of pods that the scheduler places in one attempt by their requirements,
        tolerations and requests alone (no preferences to relax, no topology terms, host ports or other extended
        resources, no kind of Karpenter refusing them). The bound: the soonest such node any pod fits is
        initialized."""
        waiting = [(name, ready) for name, ready in self._ready.items()  # those offered room: first-fit slots
                   if ready > at and name in self._moved and self._position[name] < self._first_fit.size]
        if not waiting:
            return None
        shapes = {id(pod.shape): pod for pod in pods if not pod.daemon}
        if not shapes or not all(self._plain(pod) for pod in shapes.values()):
            return None
        plain = [(pod, pod.shape.attempts(self._tolerate)[0]) for pod in shapes.values()]
        late = {name for name, _ in waiting}
        readies = [[ready for name, ready in waiting if (node := self._node(name)) is not None
                    and self._takes(node, pod, attempt)] for pod, attempt in plain]
        found = [ready for fitting in readies for ready in fitting]
        if not found:
            return None
        soonest = min(found)
        for (pod, attempt), fitting in zip(plain, readies, strict=True):
            if fitting and self._initialized_takers([(pod, attempt)], without, late, pod.requests) is False:
                return soonest
        if not all(readies):
            return None
        total = ZERO
        for pod in pods:
            if not pod.daemon:
                total = add(total, pod.requests)
        return soonest if self._initialized_takers(plain, without, late, total) is False else None

    def _takes(self, node: ExistingNode, pod: Pod, attempt: Attempt) -> bool:
        """`_takes`, remembered until the node changes."""
        key = (node.name, id(pod.shape))
        stamp = self._stamp.get(node.name, 0)
        found = self._taken.get(key)
        if found is None or found[0] != stamp:
            found = self._taken[key] = (stamp, _takes(node, pod, attempt))
        return found[1]

    def _holding(self, requests: Vector) -> list[int]:
        """The first :data:`_ASKED` + 1 positions with room for `requests` in first-fit order, remembered until the
        room changes (the candidates of one poll ask alike)."""
        if self._walked[0] != self.version:
            self._walked = (self.version, {})
        found = self._walked[1].get(requests)
        if found is None:
            found = self._walked[1][requests] = list(islice(self._first_fit.candidates(requests), _ASKED + 1))
        return found

    def _plain(self, pod: Pod) -> bool:
        """`_plain`, remembered per shape."""
        found = self._plains.get(id(pod.shape))
        if found is None:
            found = self._plains[id(pod.shape)] = _plain(pod, self._tolerate)
        return found

    def _node(self, name: str) -> ExistingNode | None:
        position = self._position.get(name)
        return self._nodes[position] if position is not None else None

    def _initialized_takers(self, plain: Sequence[tuple[Pod, Attempt]], without: Collection[str],
                            late: Collection[str], wanted: Vector) -> bool | None:
        """Whether the initialized nodes but `without` that take one of the `plain` pods as the room is now have
        `wanted` free together, in every resource (None: not known after :data:`_ASKED` nodes with room for the
        smallest of them)."""
        smallest = plain[0][0].requests
        for pod, _ in plain[1:]:
            smallest = tuple(map(min, smallest, pod.requests))
        free = ZERO
        for asked, position in enumerate(self._holding(smallest)):
            if asked >= _ASKED:
                return None
            node = self._nodes[position] if position < len(self._nodes) else None
            if node is None or node.name in without or node.name in late:
                continue
            if any(self._takes(node, pod, attempt) for pod, attempt in plain):
                free = add(free, tuple(max(0, a - r) for a, r in zip(node.allocatable, node.requested, strict=True)))
                if fits(wanted, free):
                    return True
        return False

    def carry_out(self, plan: Plan, ready_at: float = 0.0) -> list[tuple[str, list[FleetPod], int | None]]:
        """The plan's pods onto the existing nodes it chose, its new claims into the room as nodes initialized at
        `ready_at` (seconds from the start): each node that takes pods, with them and, for a new one, its claim's
        index in the plan."""
        self.version += 1
        landed: list[tuple[str, list[FleetPod], int | None]] = []
        for name, pods in plan.existing.items():
            node = self._nodes[self._position[name]]
            assert node is not None
            requested = node.requested
            for pod in pods:
                requested = add(requested, pod.requests)
            node.requested = requested
            self._set(node)
            self._stamp[name] = self.version
            joined = [self._fleet_pod[id(pod)] for pod in pods if id(pod) in self._fleet_pod]
            self._moved[name] += joined
            landed.append((name, joined, None))
        for index, claim in enumerate(plan.claims):
            name = self._launch(claim)
            self._stamp[name] = self.version
            self._ready[name] = ready_at
            self._moved[name] = [self._fleet_pod[id(pod)] for pod in claim.pods if id(pod) in self._fleet_pod]
            landed.append((name, list(self._moved[name]), index))
        return landed

    def launch(self, plan: Plan, ready_at: float) -> list[str]:
        """The plan's new claims into the room without the plan's pods, initialized at `ready_at` (a command that
        failed: Karpenter keeps the nodes it launched, and the pods stay where they were): their names, in the
        plan's order."""
        self.version += 1
        names = []
        for claim in plan.claims:
            requested = claim.requests
            for pod in claim.pods:
                requested = subtract(requested, pod.requests)
            name = self._launch(claim, requested)
            self._stamp[name] = self.version
            self._ready[name] = ready_at
            self._moved[name] = []
            names.append(name)
        return names

    def _launch(self, claim: ClaimPlan, requested: Vector | None = None) -> str:
        """A replacement joins the room: its launch's type, zone and capacity type, its template's labels and
        taints, what the scheduler put on it (DaemonSet overhead included), or `requested`."""
        launch = claim.launch
        return self._add(self._templates.get(claim.template), claim.template,
                         (launch.instance_type, launch.zone, launch.capacity_type) if launch is not None else None,
                         claim.allocatable, claim.requests if requested is None else requested)

    def join(self, template: NodeClaimTemplate, offering: tuple[str, str, str], daemons: Sequence[Pod],
             ready_at: float) -> str | None:
        """A node launched without a scheduling plan (a static NodePool's: v1.14.1 creates its NodeClaim from the
        template, `static/provisioning/controller.go`) joins the room, initialized at `ready_at`: its `offering`
        (instance type, zone, capacity type), the template's node arithmetic for the type's allocatable, the
        DaemonSet pods it will run (`daemons` its template admits, Karpenter's `getDaemonOverhead`) as requested.
        Its name in the room; None when the template does not know the type (no room)."""
        position = template.table.position.get(offering[0])
        if position is None:
            return None
        self.scheduler([template], daemons, [])  # works the template's DaemonSet overhead out (`overhead`)
        name = self._add(template, template.name, offering, template.shapes.allocatable[position], template.overhead)
        self.version += 1
        self._stamp[name] = self.version
        self._ready[name] = ready_at
        self._moved[name] = []
        return name

    def _add(self, template: NodeClaimTemplate | None, owner: str, offering: tuple[str, str, str] | None,
             allocatable: Vector, requested: Vector) -> str:
        """A new node joins the room (named to sort after the snapshot's): its offering's type, zone and capacity
        type, its template's labels and taints."""
        self._launched += 1
        name = f"{_LAST}{self._kind}-{self._launched:06d}"
        labels: dict[str, str] = {}
        if template is not None and offering is not None:
            position = template.table.position.get(offering[0])
            if position is not None:
                labels.update(template.table.types[position].labels(template.os))
            labels.update(template.labels)
        if offering is not None:
            labels.update({wk.ZONE: offering[1], wk.CAPACITY_TYPE: offering[2]})
        labels.update(owner_labels(owner))
        labels[wk.HOSTNAME] = name
        node = ExistingNode(name=name, labels=labels, taints=template.taints if template is not None else (),
                            allocatable=allocatable, requested=requested, template=owner)
        self._append(node)
        self._set(node)
        return name


def _plain(pod: Pod, tolerate: bool) -> bool:
    """The scheduler (relaxing into tolerating PreferNoSchedule taints or not: `tolerate`) places the pod in one
    attempt by its requirements, tolerations and requests alone."""
    shape = pod.shape
    attempts = shape.attempts(tolerate)
    return (shape.refused is None and shape.refused_v1 is None and not shape.extended and not shape.host_ports
            and len(attempts) == 1 and not attempts[0].has_topology)


def _takes(node: ExistingNode, pod: Pod, attempt: Attempt) -> bool:
    """`ExistingNode.try_add` of a plain pod (`_plain`) onto the node as the room has it, without placing it."""
    if node.taints and untolerated(node.taints, attempt.tolerations):
        return False
    if not fits(add(node.requested, pod.requests), node.allocatable):
        return False
    return not node.requirements.incompatibilities(attempt.requirements, frozenset())
