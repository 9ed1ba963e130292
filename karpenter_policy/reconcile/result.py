"""What one step of the controllers did (step-driven runs read it; the threaded runner logs and counts it): one
result type per controller, and :class:`ReconcileResult` holding them for a step of all of them."""

from __future__ import annotations

from dataclasses import dataclass, field

from karpenter_policy.scheduling import Plan


@dataclass(frozen=True, slots=True)
class BatchWindow:
    opened: float
    closed: float
    triggers: int

    @property
    def seconds(self) -> float:
        return self.closed - self.opened


@dataclass(slots=True)
class Emptied:
    marked: list[str] = field(default_factory=list)
    unmarked: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    due: float | None = None  # seconds from now until the next node's TTL runs out
    expired: int = 0  # nodes found past their TTL (deleted, or their deletion failed)


@dataclass(slots=True)
class Terminated:
    """What a pass of termination did, per node name."""

    cordoned: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)  # pod keys
    blocked: dict[str, str] = field(default_factory=dict)  # pod key → why it stays (a PDB refused its eviction)
    deleted: list[str] = field(default_factory=list)  # nodes released: instance terminated (or gone), finalizer removed
    errors: list[str] = field(default_factory=list)
    due: float | None = None  # clock time of the next step it needs (a node still draining)


@dataclass(slots=True)
class Disrupted:
    """What a pass of disruption did."""

    decided: str | None = None  # the message of a command acted on this pass
    held: str | None = None  # a consolidation command waiting for its validation
    replacements: list[str] = field(default_factory=list)  # nodes launched as replacements this pass
    deleted: list[str] = field(default_factory=list)  # nodes whose deletion was requested this pass
    abandoned: str | None = None
    blocked: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    due: float | None = None  # clock time of the next pass it needs
    stopped: str = ""  # why the decision stopped early (its budget ran out)


@dataclass(slots=True)
class Collected:
    """What one collection did: instances terminated (ids), Nodes deleted (names), launch templates deleted (names),
    and what failed."""

    terminated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    launch_templates: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LaunchedNode:
    """A node the pass launched and registered (or tried to register)."""

    node: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    provisioner: str
    pods: tuple[str, ...]  # pod keys planned onto it
    price: float | None = None  # $/h; None: no price data for it


@dataclass(slots=True)
class ReconcileResult:
    """What one pass did. `due`: when the controller wants its next pass (monotonic clock; None: on a change)."""

    started: float
    pending: int = 0
    batch: BatchWindow | None = None
    loaded: str | None = None  # a new constraint-set version taken (its origin)
    refused: str | None = None  # a new version refused (why)
    plans: list[Plan] = field(default_factory=list)
    launched: list[LaunchedNode] = field(default_factory=list)
    bound: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node → pod keys bound this pass
    nominated: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node → pod keys left to kube-scheduler
    held: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node not joined yet → pod keys planned onto it
    unregistered: list[str] = field(default_factory=list)  # nodes deleted: their kubelet never joined (liveness)
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key → why (PodFailure.message())
    errors: list[str] = field(default_factory=list)
    due: float | None = None
    garbage: Collected | None = None  # what garbage collection did, when it ran this pass
    emptied: Emptied | None = None  # emptiness: nodes marked, unmarked, deleted
    terminated: Terminated | None = None  # termination: nodes cordoned, pods evicted or blocked, nodes deleted
    disrupted: Disrupted | None = None  # expiry, drift, consolidation: the command acted on or followed
    interrupted: dict[str, str] = field(default_factory=dict)  # node → the action an interruption message took
    failed: bool = False  # a step failed without raising (the interruption queue could not be read)

    @property
    def scheduled(self) -> bool:
        """The pass closed a batch and scheduled it."""
        return self.batch is not None


__all__ = ["BatchWindow", "Collected", "Disrupted", "Emptied", "LaunchedNode", "ReconcileResult", "Terminated"]
