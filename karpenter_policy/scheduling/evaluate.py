"""Which node claim templates could launch a node for one pod on its own, and why the others cannot.

`check --workloads` asks this of every workload: the pod alone, on an empty cluster, against every template (not
only the first that takes it, as a scheduling run stops at), at the first relaxation step where some template
takes it. The answer comes from the scheduler's own `fresh_claim`, so it is what a scheduling run would decide
for that pod, with the same reasons.

Pod templates that differ only in what no template looks at share one evaluation (`evaluation_key`): a pod that asks
nothing of its neighbours (no spread, affinity, anti-affinity or host port) is judged by its scheduling part alone —
node selector and affinity, tolerations, requests — so its name, namespace and labels do not matter.
`Evaluation.for_pod` hands it over with the pod's own attempt.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace

from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.scheduling.pods import Attempt, Pod, PodShape
from karpenter_policy.scheduling.reasons import Refusal
from karpenter_policy.scheduling.scheduler import Scheduler, cheapest_launch, fresh_claim
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.topology import Topology


@dataclass(frozen=True, slots=True)
class Candidate:
    """A template that takes the pod: the instance types a new node of it may be (bits of its table, every type
    that holds the pod: Karpenter's options), the cheapest offering of those, and the zones and capacity types
    the claim's requirements allow (None: any)."""

    template: NodeClaimTemplate
    options: int
    launch: ChosenOffering | None
    zone: Requirement | None = None
    capacity_type: Requirement | None = None

    @property
    def instance_types(self) -> tuple[str, ...]:
        """The names of the instance types the claim may launch, sorted."""
        return self.template.table.names_of(self.options)

    def offerings(self) -> set[tuple[str, str]]:
        """The (zone, capacity type) pairs a node of this claim may be launched in: an available offering of one of
        its options in a zone and capacity type its requirements allow."""
        return {
            (zone, capacity_type)
            for zone, capacity_type in self.template.table.offered_pairs(self.options)
            if (self.zone is None or self.zone.has(zone))
            and (self.capacity_type is None or self.capacity_type.has(capacity_type))
        }

    def label_values(self) -> dict[str, set[str]]:
        """Per instance-type label key (arch, instance family, ...), the values its options carry."""
        return self.template.table.label_values(self.options)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The deciding attempt (the first one some template takes; the last tried when none does), the templates
    that take it there (in the scheduler's order: weight, then name) and why the others do not."""

    attempt: Attempt
    candidates: tuple[Candidate, ...] = ()
    refusals: dict[str, Refusal] = field(default_factory=dict)

    @property
    def chosen(self) -> Candidate | None:
        """The template that takes the pod (the first candidate in the scheduler's order), None when none does."""
        return self.candidates[0] if self.candidates else None

    def for_pod(self, shape: PodShape, tolerate_prefer_no_schedule: bool) -> Evaluation:
        """This evaluation of another pod with the same `evaluation_key`, told with `shape`'s own attempt (at the
        same step of relaxation; equal to this one's, as the key makes the attempts alike)."""
        attempt = shape.attempts(tolerate_prefer_no_schedule)[self.attempt.index]
        return replace(self, attempt=attempt, refusals=dict(self.refusals))


def evaluation_key(shape: PodShape) -> Hashable:
    """What `evaluate` depends on of a pod's shape: the scheduling part (requirements, tolerations, requests; why
    Karpenter refuses the pod) when the pod has no topology terms and no host ports — a fresh claim on an empty
    cluster then never looks at its name, namespace or labels; v1.14.1's volume alternatives when it has them) —
    else the whole shape."""
    if not shape.topology.empty:
        return shape
    if shape.volume_alternatives is None:
        return (shape.scheduling, shape.refused, shape.refused_v1)
    return (shape.scheduling, shape.refused, shape.refused_v1, shape.volume_alternatives, shape.unvolumed)


def evaluate(pod: Pod, scheduler: Scheduler) -> Evaluation:
    """Every template of `scheduler` against `pod` alone (see the module docstring)."""
    return Evaluator(scheduler).evaluate(pod)


class Evaluator:
    """`evaluate` for many pods of one scheduler, remembering per pod requirements which templates' requirements
    admit them: the answer `fresh_claim` would work out for every pod again. A template they do not admit is
    handed to it as ruled out, which refuses it for its requirements after the checks that come first (types,
    taints), as `fresh_claim` does when it finds them incompatible itself."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._asked: dict[Requirements, tuple[int, int]] = {}  # requirements → (templates asked, those admitting)

    def _admitted(self, requirements: Requirements, among: int) -> int:
        """Of the templates `among` (bits of the scheduler's order), those whose requirements admit
        `requirements`; each template is asked once per requirements."""
        asked, admitting = self._asked.get(requirements, (0, 0))
        new = among & ~asked
        if new:
            templates = self.scheduler.templates
            for position in range(new.bit_length()):
                template = templates[position] if new >> position & 1 else None
                if template is not None and template.requirements.admits(requirements, template.well_known):
                    admitting |= 1 << position
            asked |= new
            self._asked[requirements] = (asked, admitting)
        return among & admitting

    def evaluate(self, pod: Pod) -> Evaluation:
        """Every template against `pod` alone (see the module docstring)."""
        scheduler = self.scheduler
        templates: Sequence[NodeClaimTemplate] = scheduler.templates
        attempts = pod.shape.attempts(scheduler.tolerate_prefer_no_schedule)
        evaluation = Evaluation(attempts[0])
        domains = scheduler.template_domains
        for attempt in attempts:
            topology = Topology(domains, (), scheduler.namespace_labels)
            topology.update(pod, attempt)
            candidates: list[Candidate] = []
            refusals: dict[str, Refusal] = {}
            maybe = scheduler.index.candidates(attempt.requirements, attempt.tolerations)
            maybe = self._admitted(attempt.requirements, maybe)
            for number, template in enumerate(templates, start=1):
                limits = scheduler.remaining[template.name]
                nodes = scheduler.nodes.get(template.name, 0)
                for variant in scheduler.variants(pod, attempt, template.v1):  # v1.14.1: the first alternative
                    if variant is attempt:
                        ruled_out = not maybe >> (number - 1) & 1
                    else:
                        ruled_out = not template.requirements.admits(variant.requirements, template.well_known)
                    claim = fresh_claim(template, pod, variant, topology, limits, limits, number, ruled_out, nodes)
                    if not isinstance(claim, Refusal):
                        break
                if isinstance(claim, Refusal):
                    refusals[template.name] = claim
                    continue
                launch = cheapest_launch(template.table, claim.options, claim.zone, claim.capacity_type)
                candidates.append(Candidate(template, claim.options, launch, claim.zone, claim.capacity_type))
                if not topology.empty:  # undo what the claim recorded
                    topology = Topology(domains, (), scheduler.namespace_labels)
                    topology.update(pod, attempt)
            evaluation = Evaluation(attempt, tuple(candidates), refusals)
            if candidates:
                break
        return evaluation
