"""Where pods go: nodes that exist (or are being launched) and node claims the plan makes, each with Karpenter's
`Add` — may this pod join, and what does the node become if it does.

:class:`ExistingNode` (Karpenter's `ExistingNode`): a node with labels, taints, allocatable and the pods already on
it; a pod joins when its taints are tolerated, its host ports are free, its requests fit what is left (the
DaemonSet pods still to come counted), the node's labels are compatible with its requirements (every key the pod
constrains must be a label of the node, unless it only excludes) and its topology allows the node's domains.

:class:`NodeClaim` (Karpenter's `NodeClaim`): a node to launch from a template. It keeps every instance type that
could still hold all its pods (`options`, a mask); a pod joins when the template's taints are tolerated, host
ports are free, the requirements are compatible (undefined well-known labels allowed), the topology leaves a
domain, and some option still fits the requests together. A claim may carry a price cap (the cost strategy: it
is filled up to the most cost-efficient type for the pods at hand instead of growing to the largest type). A
claim of a v1 NodePool with `minValues` keeps at least that many distinct values per key among its options: a pod
that would leave fewer is refused (`min-values`), as Karpenter v1.14.1's `filterInstanceTypesByRequirements`
(core pkg/controllers/provisioning/scheduling/nodeclaim.go) empties the options then — except for the first pod of
a new claim under the BestEffort policy, where the claim's minValues is lowered to what is left and the claim
says so (`min_values_relaxed`: Karpenter's `karpenter.sh/nodeclaim-min-values-relaxed: "true"`, set in
`addToNewNodeClaim`; a claim in flight is never relaxed again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.model import labels as wk
from karpenter_policy.model.minvalues import RELAXED_ANNOTATION, unmet_text
from karpenter_policy.model.podtopology import HostPort
from karpenter_policy.model.pools import is_nodepool, pool_of_labels
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.taints import Taint, untolerated
from karpenter_policy.scheduling.pods import Attempt, Pod
from karpenter_policy.scheduling.reasons import Refusal, requirements_text, untolerated_text
from karpenter_policy.scheduling.reservedclaims import RunReservations
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.topology import Topology, TopologyError
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, Vector, add, fits

_NO_ROOM = Refusal("resources", "no instance type has room for the pods together")
_NO_DOMAIN = Refusal("topology", "the topology leaves the node no domain")
NOTHING_UNDEFINED: frozenset[str] = frozenset()


def _port_conflict(ports: Sequence[HostPort], used: Sequence[HostPort]) -> HostPort | None:
    for port in ports:
        for other in used:
            if port.conflicts(other):
                return port
    return None


@dataclass(eq=False)
class ExistingNode:
    """A node of the cluster (or an in-flight claim the controller launched): see the module docstring.

    `requested` is what the pods already on it request; `daemon_remaining` what the DaemonSets that will run
    there but have no pod there yet request; `template` the provisioner that launched it (None: not ours). `v1`,
    set from its owner label (`model.pools.pool_of_labels`): a NodePool's node (True), a Provisioner's (False),
    neither's (None) — a pod the kind's Karpenter ignores never joins that kind's node (`Scheduler.ignored_nodes`).
    """

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Vector
    requested: Vector
    extended_allocatable: Mapping[str, int] = field(default_factory=dict)
    extended_requested: Mapping[str, int] = field(default_factory=dict)
    host_ports: list[HostPort] = field(default_factory=list)
    template: str | None = None
    initialized: bool = True
    capacity: Vector | None = None
    daemon_remaining: Vector | None = None
    pods: list[Pod] = field(default_factory=list)

    def __post_init__(self) -> None:
        hostname = self.labels.get(wk.HOSTNAME, self.name)
        self.hostname = hostname
        pool = pool_of_labels(self.labels)
        self.v1: bool | None = None if pool is None else is_nodepool(pool)
        self.requirements = Requirements.from_labels(self.labels).add(
            Requirement.new(wk.HOSTNAME, Operator.IN, [hostname])
        )
        self._labelled = self.requirements  # the node's own requirements, before any placement narrowed them
        self.requests: Vector = self._unplaced_requests()
        self._extended = dict(self.extended_requested)

    def fresh(self) -> ExistingNode:
        """A copy with none of this run's placements (each scheduling run starts from the node as it is). The
        requirements its labels make are shared, not made again: they are never changed in place (a placement
        replaces them), and a disruption decision copies every node for each of its simulations."""
        node = type(self).__new__(type(self))  # `copy.copy` without its reduce protocol (many copies a decision)
        node.__dict__.update(self.__dict__)
        node.requirements = self._labelled
        node.requests = self._unplaced_requests()
        node._extended = dict(self.extended_requested)
        node.host_ports = list(self.host_ports)
        node.pods = []
        return node

    def pristine(self) -> bool:
        """Whether the node is as :meth:`fresh` would make it: no placement (a placement changes its pods, requests,
        requirements, extended requests and host ports together), its own requirements and requests. A scheduling
        run reads such a node as it is and copies it only when it offers it a pod (`scheduler._Run.own`)."""
        if self.pods or self.requirements is not self._labelled or self._extended != self.extended_requested:
            return False
        return self.requests == self._unplaced_requests()

    def _unplaced_requests(self) -> Vector:
        """What the node requests before any placement: its pods' requests and the DaemonSets' still to come."""
        return self.requested if self.daemon_remaining is None else add(self.requested, self.daemon_remaining)

    def try_add(self, pod: Pod, attempt: Attempt, topology: Topology) -> str | None:
        """Place the pod here (None), or say why not."""
        if self.taints and untolerated(self.taints, attempt.tolerations):
            return untolerated_text(self.taints, attempt.tolerations)
        ports = pod.shape.host_ports
        if ports and (clash := _port_conflict(ports, self.host_ports)) is not None:
            return f"{clash} is in use"
        requests = add(self.requests, pod.requests)
        if not fits(requests, self.allocatable):
            return "exceeds node resources"
        for name, count in pod.shape.extended.items():
            if self._extended.get(name, 0) + count > self.extended_allocatable.get(name, 0):
                return f"exceeds node resources ({name})"
        errors = self.requirements.incompatibilities(attempt.requirements, NOTHING_UNDEFINED)
        if errors:
            return "; ".join(errors)
        merged = self.requirements.intersection(attempt.requirements)
        if topology.involves(pod):
            try:
                merged = topology.add_requirements(pod, attempt, merged, NOTHING_UNDEFINED)
            except TopologyError as error:
                return str(error)
            if _emptied(merged, self.requirements):
                return "its topology domain is not allowed for the pod"
        self.pods.append(pod)
        self.requests = requests
        for name, count in pod.shape.extended.items():
            self._extended[name] = self._extended.get(name, 0) + count
        self.requirements = merged
        topology.record(pod, merged, NOTHING_UNDEFINED, self.taints)
        self.host_ports.extend(ports)
        return None


def _emptied(narrowed: Requirements, before: Requirements) -> bool:
    """Topology narrowed some key the node had to nothing (Karpenter's second Compatible check). A requirement
    `narrowed` shares with `before` (the same object) was not narrowed: it is not asked."""
    for key, requirement in narrowed.unordered():
        if requirement is before.get(key):
            continue
        if requirement.is_empty() and not before.get_or_exists(key).is_empty():
            return True
    return False


@dataclass(eq=False)
class NodeClaim:
    """A node the plan launches (see the module docstring). `options`: the instance types (bits of the template's
    table) that satisfy its requirements, have an offering in its zones and capacity types, and fit `requests`."""

    template: NodeClaimTemplate
    hostname: str
    requirements: Requirements
    options: int
    requests: Vector
    price_cap: float | None = None
    launchable: int = -1  # cost strategy: the types it may launch (a superset of `options` at creation; -1: those)
    uncapped: int = 0  # cost strategy: its options before the price cap
    charged: dict[int, int] = field(default_factory=dict)  # what it counts against its template's limits
    pods: list[Pod] = field(default_factory=list)
    host_ports: list[HostPort] = field(default_factory=list)
    created_for: str = ""
    #: v1 minValues by key its options keep (the template's; lowered when BestEffort relaxed them)
    min_values: Mapping[str, int] = field(default_factory=dict)
    min_values_relaxed: bool = False
    #: the run's capacity reservations (`reservedclaims`), when its templates have reserved offerings: told of each
    #: pod the claim takes, and (strict mode) asked before
    reservations: RunReservations | None = None

    def __post_init__(self) -> None:
        self._admits: dict[int, bool] = {}
        self._room: tuple[int, int] | None = None  # the most cpu and memory any option has (a quick reject)
        self._zone = self.requirements.get_or_exists(wk.ZONE)
        self._capacity_type = self.requirements.get_or_exists(wk.CAPACITY_TYPE)

    @classmethod
    def new(
        cls, template: NodeClaimTemplate, hostname: str, options: int, reservations: RunReservations | None = None
    ) -> NodeClaim:
        """A new claim of the template, named `hostname` (its hostname requirement added), that may launch the types of
        `options` (`reservations`: the run's, when it has any)."""
        requirements = template.requirements.add(Requirement.new(wk.HOSTNAME, Operator.IN, [hostname]))
        return cls(
            template, hostname, requirements, options, template.overhead, min_values=template.min_values,
            reservations=reservations,
        )

    def min_values_relaxation(self) -> str:
        """What BestEffort relaxed on this claim, in words (`min_values_relaxed`; a pod placed on it says so)."""
        lowered = ", ".join(
            f"{key} {self.template.min_values[key]} → {count}"
            for key, count in sorted(self.min_values.items())
            if count < self.template.min_values.get(key, 0)
        )
        return f"lowered the NodePool's minValues ({lowered}) under the BestEffort policy ({RELAXED_ANNOTATION})"

    def set_options(self, options: int) -> None:
        """Narrow the types the claim may launch (the room for more pods is computed again)."""
        self.options = options
        self._room = None

    def launch_mask(self) -> int:
        """The types the claim may launch: its options and, with a price cap, the fallback types that hold its
        pods too."""
        if self.launchable == -1:
            return self.options
        template = self.template
        table = template.table
        return self.options | (
            self.launchable
            & table.type_mask(self.requirements, os=template.os, type_keys=template.type_keys)
            & table.offering_mask(self._zone, self._capacity_type)
            & template.shapes.fitting(self.requests)
        )

    @property
    def zone(self) -> Requirement:
        """The zones the claim may be launched in (its zone requirement)."""
        return self._zone

    @property
    def capacity_type(self) -> Requirement:
        """The capacity types the claim may be launched as (its capacity-type requirement)."""
        return self._capacity_type

    def try_add(
        self, pod: Pod, attempt: Attempt, topology: Topology, refusal_asked: bool = False
    ) -> Refusal | None:
        """Place the pod on this claim (None), or say why not (`refusal_asked`: as in :meth:`check`)."""
        fit = self.check(pod, attempt, topology, refusal_asked)
        if isinstance(fit, Refusal):
            return fit
        self.commit(fit, topology)
        return None

    def check(self, pod: Pod, attempt: Attempt, topology: Topology, refusal_asked: bool = False) -> Fit | Refusal:
        """Whether the pod may join, and what the claim becomes if it does; changes nothing. `refusal_asked`: the
        caller has already asked `Topology.refusal` of this claim (it refused nothing)."""
        template = self.template
        requested = pod.requests
        shapes = template.shapes
        # The quickest reject first (most claims a pod is offered are full). The refusals of a claim that holds pods
        # are never shown (callers only ask whether it took the pod), so their order changes no answer; a new
        # claim's are (`fresh_claim`), and keep Karpenter's order.
        requests = add(self.requests, requested)
        fitting = shapes.fitting(requests)
        if self.pods:
            if not self.options & fitting:
                return _NO_ROOM
        else:
            room = self._room
            if room is None:
                room = self._room = (shapes.most(CPU_I, self.options), shapes.most(MEMORY_I, self.options))
            if requests[CPU_I] > room[0] or requests[MEMORY_I] > room[1]:
                return _NO_ROOM
        involved = topology.involves(pod)
        if involved and self.pods and not refusal_asked and topology.refuses(pod, attempt, self.requirements):
            return _NO_DOMAIN  # its hostname has its share already (a claim with pods: never a shown refusal)
        if template.taints and untolerated(template.taints, attempt.tolerations):
            return Refusal("taint", lambda: untolerated_text(template.taints, attempt.tolerations))
        shape = pod.shape
        ports = shape.topology.host_ports
        if ports and (clash := _port_conflict(ports, self.host_ports)) is not None:
            return Refusal("host-ports", f"{clash} is in use on the node")
        if shape.extended:
            return Refusal("resources", f"no instance type offers {', '.join(sorted(shape.extended))}")
        constrained = attempt.constrained
        if constrained:
            key = id(attempt)
            admitted = self._admits.get(key)
            if admitted is None:
                admitted = self._admits[key] = self.requirements.admits(attempt.requirements, template.well_known)
            if not admitted:
                requirements = self.requirements
                well_known = template.well_known
                return Refusal(
                    "requirements", lambda: requirements_text(requirements, attempt.requirements, well_known)
                )
            if template.offered and (unoffered := template.unoffered(attempt.requirements)) is not None:
                return Refusal("requirements", unoffered)
        merged = self.requirements.intersection(attempt.requirements) if constrained else self.requirements
        table = template.table
        narrowed: list[str] = []
        if involved:
            before = merged
            try:
                merged = topology.add_requirements(pod, attempt, merged, template.well_known)
            except TopologyError as error:
                return Refusal("topology", str(error))
            if merged is not self.requirements and _emptied(merged, self.requirements):
                return Refusal("topology", "the topology leaves the node no domain")
            if merged is not before:
                # A domain of an instance-type label (arch, instance type ...) limits the types as Karpenter's
                # `filterInstanceTypesByRequirements` does with the topology requirements added in `NodeClaim.Add`.
                keys = template.type_keys
                narrowed = [k for k, r in merged.unordered() if table.is_type_key(k, keys) and r != before.get(k)]
        mask = self.options
        if constrained:
            mask &= table.type_mask(attempt.requirements, os=template.os, type_keys=template.type_keys)
        if narrowed:
            mask &= table.type_mask(merged, narrowed, os=template.os, type_keys=template.type_keys)
        if merged is self.requirements:  # nothing narrowed: the claim's own zones and capacity types
            zone, capacity_type = self._zone, self._capacity_type
        else:
            zone = merged.get_or_exists(wk.ZONE)
            capacity_type = merged.get_or_exists(wk.CAPACITY_TYPE)
            if mask and (
                (zone is not self._zone and zone != self._zone)
                or (capacity_type is not self._capacity_type and capacity_type != self._capacity_type)
            ):
                mask &= table.offering_mask(zone, capacity_type)
        if not mask:
            return Refusal("instance-types", "no instance type satisfies the requirements of the node and the pod")
        mask &= fitting
        if not mask:
            return _NO_ROOM
        relaxed = None
        # the options of a claim that holds pods meet its minValues: only fewer of them need counting again
        if self.min_values and (mask != self.options or not self.pods):
            unmet = table.unmet_min_values(self.min_values, mask)
            if unmet:
                if self.pods or not template.relaxes_min_values:
                    return min_values_refusal(self.min_values, unmet)
                relaxed = {**self.min_values, **unmet}
        if self.reservations is not None and self.reservations.strict:
            refusal = self.reservations.refusal(self.hostname, template.table, mask, merged)
            if refusal is not None:
                return refusal
        return Fit(pod, merged, mask, requests, zone, capacity_type, relaxed)

    def commit(self, fit: Fit, topology: Topology) -> None:
        """Add the pod as `check` found it may join."""
        self.pods.append(fit.pod)
        self.requests = fit.requests
        if fit.options != self.options:
            self.options = fit.options
            self._room = None
        if fit.min_values is not None:
            self.min_values = fit.min_values
            self.min_values_relaxed = True
        if fit.requirements is not self.requirements and fit.requirements != self.requirements:
            self.requirements = fit.requirements
            self._admits.clear()
            self._zone, self._capacity_type = fit.zone, fit.capacity_type
        topology.record(fit.pod, fit.requirements, self.template.well_known, self.template.taints)
        ports = fit.pod.shape.topology.host_ports
        if ports:
            self.host_ports.extend(ports)
        if self.reservations is not None:
            self.reservations.add(self.hostname, self.template.table, self.options, self.requirements)


@dataclass(slots=True)
class Fit:
    """What a claim becomes with one more pod (from `NodeClaim.check`; never changed: not frozen only because a
    frozen dataclass is slower to make, and one is made for every claim a pod may join)."""

    pod: Pod
    requirements: Requirements
    options: int
    requests: Vector
    zone: Requirement
    capacity_type: Requirement
    min_values: dict[str, int] | None = None  # the claim's minValues lowered (BestEffort), None: unchanged


def min_values_refusal(min_values: Mapping[str, int], unmet: Mapping[str, int]) -> Refusal:
    """A claim's types would carry fewer distinct values than its minValues asks (the Strict policy)."""

    def message() -> str:
        counts = ", ".join(f"{count} {key} (minValues {min_values[key]})" for key, count in sorted(unmet.items()))
        return (
            f"{unmet_text(unmet)}: the instance types that meet the requirements and hold the pods carry only "
            f"{counts}; under the Strict minValues policy Karpenter launches no such node"
        )

    return Refusal("min-values", message, karpenter=lambda: unmet_text(unmet))
