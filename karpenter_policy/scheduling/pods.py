"""The pods a scheduler places: identity, labels and a shared, hashable shape (what the pod asks of a node and of
its neighbours), with the relaxations Karpenter v0.31 applies when a pod cannot be placed.

Replicas of one workload share one :class:`PodShape`, so everything derived from the shape (requirements per
relaxation step, requests as a vector, which topology groups select it) is computed once per workload.

Relaxation (`scheduling/preferences.go`): each failed attempt removes one soft constraint, in this order — the
first required node-affinity term while more than one is left (terms are ORed), the heaviest preferred pod
affinity term, the heaviest preferred pod anti-affinity term, the heaviest preferred node-affinity term, a
`ScheduleAnyway` topology spread constraint, and last (only when some node claim template has a PreferNoSchedule taint)
a toleration of every PreferNoSchedule taint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from karpenter_policy.model.pods import TOLERATE_PREFER_NO_SCHEDULE, PodScheduling, PodSpecError, same_toleration
from karpenter_policy.model.podtopology import AffinityTerm, HostPort, PodTopology, SpreadConstraint, pod_topology
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.taints import Toleration
from karpenter_policy.scheduling.refusal import provisioning_refusal, provisioning_refusal_v1
from karpenter_policy.scheduling.vectors import ONE_POD, Vector, add, to_vector

__all__ = ["Attempt", "Pod", "PodShape", "PodSpecError", "shape_of"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One variant of a pod that the scheduler tries: after `relaxed` (in words, in order) was given up.

    `requirements` treat the heaviest preferred node-affinity term as required; `strict` are the required ones
    only (topology domains are narrowed by those alone, as Karpenter's `NewStrictPodRequirements`). `constrained`:
    `requirements` constrain some key (asked for every claim a pod is offered: a field, not a Python call)."""

    index: int
    requirements: Requirements
    strict: Requirements
    tolerations: tuple[Toleration, ...]
    spread: tuple[SpreadConstraint, ...]
    affinity: tuple[AffinityTerm, ...]
    anti_affinity: tuple[AffinityTerm, ...]
    relaxed: tuple[str, ...] = ()
    constrained: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "constrained", bool(self.requirements))

    @property
    def has_topology(self) -> bool:
        """Whether the attempt carries topology spread, affinity or anti-affinity terms."""
        return bool(self.spread or self.affinity or self.anti_affinity)


@dataclass(frozen=True)
class PodShape:
    """What a pod asks for: node requirements, tolerations and requests (`scheduling`), topology terms and host
    ports (`topology`), in a namespace with labels. Hashable; replicas of a workload share one."""

    scheduling: PodScheduling
    topology: PodTopology = PodTopology()
    namespace: str = "default"
    labels: tuple[tuple[str, str], ...] = ()
    #: why Karpenter v0.31 never provisions a node for the pod (`refusal`: a Provisioner's reading), None when it
    #: does; `refused_v1`: Karpenter v1.14.1's (a NodePool's reading)
    refused: str | None = None
    refused_v1: str | None = None
    #: Karpenter v1.14.1's volume topology when it says something else than v0.31.1's, whose requirements
    #: `scheduling` holds (`scheduling.volumes.with_volumes`): the alternatives a NodePool's node or claim tries in
    #: turn (`attempts_v1`), and the pod's scheduling without v0.31.1's (`unvolumed`); None: one reading for both
    volume_alternatives: tuple[Requirements, ...] | None = None
    unvolumed: PodScheduling | None = None

    def refused_by(self, v1: bool) -> str | None:
        """Why a template of one kind (a v1 NodePool: `v1`; a Provisioner) never provisions for the pod."""
        return self.refused_v1 if v1 else self.refused

    def refusal(self, provisioners: bool, nodepools: bool) -> str | None:
        """Why no template of the kinds present (Provisioners, v1 NodePools; no template at all reads as
        Provisioners) ever provisions for the pod, None when one kind may: the refusal of the one kind present, or
        both when both kinds refuse it (the same words once)."""
        if not nodepools:
            return self.refused
        if not provisioners:
            return self.refused_v1
        if self.refused is None or self.refused_v1 is None:
            return None
        if self.refused == self.refused_v1:
            return self.refused
        return f"{self.refused} (Karpenter v0.31, Provisioners); {self.refused_v1} (Karpenter v1.14.1, NodePools)"

    def __hash__(self) -> int:  # computed once: shapes key many caches, and hashing one walks all its parts
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = self.__dict__["_hash"] = hash((self.scheduling, self.topology, self.namespace, self.labels))
        return cached

    @cached_property
    def selection_key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """What a label selector and a namespace scope look at: the namespace and the labels (shapes that differ
        only in their requests share it)."""
        return (self.namespace, self.labels)

    @cached_property
    def label_map(self) -> Mapping[str, str]:
        """The pod's labels as a mapping."""
        return dict(self.labels)

    @cached_property
    def requests(self) -> Vector:
        """The pod's requests, one pod slot included."""
        vector, _ = to_vector(self.scheduling.resource_requests)
        return add(vector, ONE_POD)

    @cached_property
    def extended(self) -> Mapping[str, int]:
        """Requests of resources no instance type offers (other extended resources)."""
        return to_vector(self.scheduling.resource_requests)[1]

    @property
    def host_ports(self) -> tuple[HostPort, ...]:
        """The host ports the pod binds."""
        return self.topology.host_ports

    def attempts(self, tolerate_prefer_no_schedule: bool) -> tuple[Attempt, ...]:
        """The variants tried in turn, from the pod as written to the most relaxed (cached per flag)."""
        cache: dict[bool, tuple[Attempt, ...]] = self.__dict__.setdefault("_attempts", {})
        found = cache.get(tolerate_prefer_no_schedule)
        if found is None:
            found = cache[tolerate_prefer_no_schedule] = self._relaxations(tolerate_prefer_no_schedule)
        return found

    def attempts_v1(self, tolerate_prefer_no_schedule: bool, index: int) -> tuple[Attempt, ...]:
        """What a v1 NodePool's node or claim tries for relaxation step `index`, first that fits wins (Karpenter
        v1.14.1's `CanAdd` over `PodData.VolumeRequirements`): the step's attempt with each volume alternative in
        its requirements — not in `strict`, the pod's own, which topology counts (v1.14.1 adds the alternative to the
        node claim's requirements, not to the pod's affinity). Without alternatives: the step's attempt."""
        attempts = self.attempts(tolerate_prefer_no_schedule)
        alternatives, unvolumed = self.volume_alternatives, self.unvolumed
        if alternatives is None or unvolumed is None:
            return (attempts[index],)
        cache: dict[tuple[bool, int], tuple[Attempt, ...]] = self.__dict__.setdefault("_attempts_v1", {})
        found = cache.get((tolerate_prefer_no_schedule, index))
        if found is None:
            plain = PodShape(unvolumed, self.topology, self.namespace, self.labels)
            base = plain.attempts(tolerate_prefer_no_schedule)[index]
            found = tuple(
                Attempt(base.index, base.requirements.intersection(alternative), base.strict, base.tolerations,
                        base.spread, base.affinity, base.anti_affinity, base.relaxed)
                for alternative in alternatives
            ) or (base,)  # fmt: skip
            cache[(tolerate_prefer_no_schedule, index)] = found
        return found

    def _relaxations(self, tolerate_prefer_no_schedule: bool) -> tuple[Attempt, ...]:
        pod = self.scheduling
        required = list(pod.required_terms)
        preferred_nodes = list(pod.preferred_terms)
        topology = self.topology
        hard_affinity = [t for t in topology.affinity if t.required]
        soft_affinity = [t for t in topology.affinity if not t.required]
        hard_anti = [t for t in topology.anti_affinity if t.required]
        soft_anti = [t for t in topology.anti_affinity if not t.required]
        spread = list(topology.spread)
        tolerations = list(pod.tolerations)
        relaxed: list[str] = []
        dropped_required = 0
        attempts: list[Attempt] = []
        while True:
            strict = pod.node_selector
            if required:
                strict = strict.intersection(required[0])
            requirements = strict
            if preferred_nodes:
                requirements = strict.intersection(preferred_nodes[0].requirements)
            attempts.append(
                Attempt(
                    index=len(attempts),
                    requirements=requirements,
                    strict=strict,
                    tolerations=tuple(tolerations),
                    spread=tuple(spread),
                    affinity=(*hard_affinity, *soft_affinity),
                    anti_affinity=(*hard_anti, *soft_anti),
                    relaxed=tuple(relaxed),
                )
            )
            if len(required) > 1:
                relaxed.append(f"dropped required nodeSelectorTerms[{dropped_required}]")
                dropped_required += 1
                required = required[1:]
            elif soft_affinity:
                relaxed.append(f"dropped the {soft_affinity[0]}")
                soft_affinity = soft_affinity[1:]
            elif soft_anti:
                relaxed.append(f"dropped the {soft_anti[0]}")
                soft_anti = soft_anti[1:]
            elif preferred_nodes:
                relaxed.append(f"dropped the preferred term of weight {preferred_nodes[0].weight}")
                preferred_nodes = preferred_nodes[1:]
            elif any(c.soft for c in spread):
                soft = next(c for c in spread if c.soft)
                relaxed.append(f"dropped the ScheduleAnyway {soft}")
                spread.remove(soft)
            elif tolerate_prefer_no_schedule and not any(
                same_toleration(t, TOLERATE_PREFER_NO_SCHEDULE) for t in tolerations
            ):
                relaxed.append("tolerated PreferNoSchedule taints")
                tolerations.append(TOLERATE_PREFER_NO_SCHEDULE)
            else:
                return tuple(attempts)


def shape_of(spec: Mapping[str, Any], namespace: str = "default", labels: Mapping[str, Any] | None = None) -> PodShape:
    """The shape of a pod spec with its namespace and labels. Raises PodSpecError."""
    return PodShape(
        scheduling=PodScheduling.from_pod_spec(spec),
        topology=pod_topology(spec, namespace),
        namespace=namespace,
        labels=tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items())),
        refused=provisioning_refusal(spec),
        refused_v1=provisioning_refusal_v1(spec),
    )


@dataclass(eq=False)
class Pod:
    """A pod to place (or one already running on a node): `key` is `namespace/name`, unique in a batch. `owner`
    names what it belongs to (`Deployment/api`) for reports; `order` breaks ties in the queue as the creation
    time and UID do in Karpenter's. `daemon`: a DaemonSet pod (never provisioned for; adds to every node)."""

    name: str
    shape: PodShape
    owner: str = ""
    order: int = 0
    daemon: bool = False
    uid: str = field(default="")

    @property
    def namespace(self) -> str:
        """The pod's namespace."""
        return self.shape.namespace

    @cached_property
    def key(self) -> str:
        """`namespace/name` (made once: asked many times per placement)."""
        return f"{self.shape.namespace}/{self.name}"

    @property
    def labels(self) -> Mapping[str, str]:
        """The pod's labels."""
        return self.shape.label_map

    @cached_property
    def requests(self) -> Vector:
        """The pod's requests, one pod slot included."""
        return self.shape.requests

    def __repr__(self) -> str:
        return f"Pod({self.key})"
