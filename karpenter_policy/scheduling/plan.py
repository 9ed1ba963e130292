"""What a scheduling run decides: pods onto existing nodes, pods onto new node claims (each with every instance
type that fits it, cheapest first, and the launch choice), and the pods that fit nowhere with the reason per
node claim template.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.pools import pool_ref, pools_noun
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling.pods import Pod
from karpenter_policy.scheduling.reasons import Refusal
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, ZERO, Vector, utilisation


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """A node to launch: from `template`, for `pods`, with `requirements` (its pods' and topology's included; the
    placeholder hostname dropped), every fitting instance type with its cheapest allowed offering
    (`options`, cheapest first) and the launch choice (the first). `requests` counts the DaemonSet pods the node
    will run; `allocatable` is the launch type's."""

    template: str
    pods: tuple[Pod, ...]
    requirements: Requirements
    options: tuple[ChosenOffering, ...]
    requests: Vector
    allocatable: Vector = ZERO
    template_hash: str = ""
    #: a v1 NodePool's minValues was lowered to launch it (the BestEffort policy; Karpenter annotates the NodeClaim
    #: `karpenter.sh/nodeclaim-min-values-relaxed: "true"`)
    min_values_relaxed: bool = False
    #: a v1 NodePool's minValues by key, as the launch keeps them (lowered when BestEffort relaxed them): its
    #: NodeClaim's requirements carry them
    min_values: Mapping[str, int] = field(default_factory=dict)

    @property
    def launch(self) -> ChosenOffering | None:
        """The launch choice (the first option), None when there is none."""
        return self.options[0] if self.options else None

    @property
    def price(self) -> float | None:
        """$/h of the launch choice; None when the catalog has no price data for it."""
        return self.launch.price if self.launch is not None else 0.0

    @property
    def instance_type(self) -> str:
        """The instance type of the launch choice (empty when there is none)."""
        return self.launch.instance_type if self.launch is not None else ""

    def cpu_utilisation(self) -> float:
        """The share of the chosen type's allocatable cpu the pods request."""
        return utilisation(self.requests, self.allocatable, CPU_I)

    def memory_utilisation(self) -> float:
        """The share of the chosen type's allocatable memory the pods request."""
        return utilisation(self.requests, self.allocatable, MEMORY_I)


@dataclass(frozen=True, slots=True)
class PodFailure:
    """A pod no node can take: the reason per template at its last (most relaxed) attempt, and what was relaxed.
    `existing`: why it fits no existing node, when there were any (the first few)."""

    pod: Pod
    reasons: Mapping[str, Refusal]
    relaxed: tuple[str, ...] = ()
    #: why Karpenter ignores the pod on every kind of template present (`Scheduler.refusal`), when it does
    refused: str | None = None

    def message(self) -> str:
        """Why the pod fits nowhere: its own refusal (a spec the scheduler cannot read), or the reason per template."""
        if self.refused:
            return refused_message(self.refused)
        return refusals_message(self.reasons, self.relaxed)


#: Refusal kinds (`scheduling.reasons`), the closest first: the provisioner took the pod's taints and requirements
#: and lacked room (limits, topology, ports; then instance sizes), before those that keep the pod away.
CLOSEST_REFUSALS = ("limits", "topology", "host-ports", "resources", "instance-types", "min-values",
                    "requirements", "taint", "unavailable")
#: The kinds that say the provisioner accepted the pod and only room was missing: they come before a fix.
_ROOM = frozenset({"limits", "topology", "host-ports"})


def ranked_refusals(reasons: Mapping[str, Refusal]) -> list[tuple[str, Refusal]]:
    """The refusals, the most relevant provisioner first: one the pod targets (it tolerates its taint, or selects a
    label only it defines); then one that refused for want of room (limits, topology, ports) — it accepted the
    pod's taints and requirements; then one that one stated change to the pod would make take it (a `fix`: the
    toleration, the misspelt value); then by kind (`CLOSEST_REFUSALS`: sizes before requirements before taints);
    ties in the scheduler's order. One order for every message: the controller's FailedScheduling Event says what
    `check --workloads` says."""
    order = {kind: i for i, kind in enumerate(CLOSEST_REFUSALS)}

    def rank(item: tuple[int, tuple[str, Refusal]]) -> tuple[bool, bool, bool, int, int]:
        position, (_, refusal) = item
        room = refusal.kind in _ROOM
        return (not refusal.targeted, not room, room or refusal.fix is None,
                order.get(refusal.kind, len(order)), position)

    return [pair for _, pair in sorted(enumerate(reasons.items()), key=rank)]


#: How each line of a multi-line message is indented under its first line.
INDENT = "  "


def refusal_lines(name: str, refusal: Refusal) -> list[str]:
    """`provisioner gpu: taint … not tolerated` (`NodePool/gpu: …` for a NodePool, `pool_ref`), and under it the fix
    when there is one (`  fix: add …`)."""
    lines = [f"{pool_ref(name)}: {refusal}"]
    fix = refusal.fix
    if fix is not None:
        lines.append(f"{INDENT}fix: {fix}")
    return lines


def refusals_message(
    reasons: Mapping[str, Refusal],
    relaxed: Sequence[str] = (),
    nothing: str = "there is no provisioner that admits an instance type",
    pools: Iterable[str] = (),
) -> str:
    """Why each template refused a pod, one pool per line under `no provisioner can launch a node for it:` (`no
    NodePool …` when every template is a NodePool's, `no pool …` for both kinds: `pools_noun`), the most relevant
    first (`ranked_refusals`), each with the change to the pod that would make it take the pod when there is one;
    what Karpenter relaxed first on the last line. `nothing`: what to say when there is no template; `pools`: the
    pools the repository holds then (whose kind names them)."""
    noun = pools_noun(reasons or pools, 1)
    if not reasons:
        return f"no {noun} can launch a node for it: {nothing}"
    lines = [f"no {noun} can launch a node for it:"]
    for name, reason in ranked_refusals(reasons):
        lines += [INDENT + line for line in refusal_lines(name, reason)]
    if relaxed:
        lines.append(f"{INDENT}(after Karpenter relaxed the pod: {', '.join(relaxed)})")
    return "\n".join(lines)


def one_line(message: str) -> str:
    """A multi-line message (`refusals_message`) on one line, for a log line: its lines after the first joined by
    "; " (`no provisioner can launch a node for it: provisioner gpu: …; fix: …; provisioner default: …`)."""
    first, *rest = message.split("\n")
    return " ".join([first, "; ".join(line.strip() for line in rest)]) if rest else first


def refused_message(reason: str) -> str:
    """What is said of a pod Karpenter ignores (`refusal`)."""
    return f"Karpenter ignores the pod and never provisions a node for it: {reason}"


@dataclass(slots=True)
class Plan:
    """The result of one scheduling run."""

    existing: dict[str, list[Pod]] = field(default_factory=dict)
    claims: list[ClaimPlan] = field(default_factory=list)
    failures: dict[str, PodFailure] = field(default_factory=dict)
    relaxed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pod key → what was relaxed to place it
    template_of: dict[str, str] = field(default_factory=dict)  # pod key → the template of its new claim

    @property
    def cost(self) -> float | None:
        """$/h of the new nodes at their launch offerings; None when some has no price data (`unpriced`)."""
        return None if self.unpriced else self.known_cost

    @property
    def known_cost(self) -> float:
        """$/h of the new nodes that have a price."""
        return sum(price for claim in self.claims if (price := claim.price) is not None)

    @property
    def unpriced(self) -> int:
        """How many new nodes have no price data."""
        return sum(1 for claim in self.claims if claim.price is None)

    @property
    def scheduled(self) -> int:
        """How many pods the plan places, on new claims and existing nodes."""
        return sum(len(c.pods) for c in self.claims) + sum(len(p) for p in self.existing.values())

    def node_of(self) -> dict[str, str]:
        """pod key → the existing node it goes to, or `claim-<i>` for the i-th new claim."""
        out = {pod.key: node for node, pods in self.existing.items() for pod in pods}
        for i, claim in enumerate(self.claims):
            for pod in claim.pods:
                out[pod.key] = f"claim-{i}"
        return out
