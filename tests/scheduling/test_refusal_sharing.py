"""A scheduling run remembers each template's refusal of a pod that holds whatever its claims hold — it admits no
type, its kind's Karpenter ignores the pod, taints, requirements — per template and attempt
(`Scheduler.template_refusal`): a pod that fits nowhere is refused by every template again at each retry, and its
replicas share their shape's attempts. Remembering changes no answer (hypothesis): for replicas of many node
selectors, tolerations, requests and relaxations, a run is the run of a scheduler that works every refusal out
afresh — the same claims, the same pods left pending with the same refusal per template in the same words (the
message, the fix, Karpenter's sentence), the same relaxations."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling import InstanceTable, Plan, Pod, Scheduler, SchedulerOptions, shape_of
from karpenter_policy.scheduling.pods import Attempt
from karpenter_policy.scheduling.reasons import Refusal
from karpenter_policy.scheduling.scheduler import template_refusal

from .cluster import provisioner, requirement
from .support import assorted_types

TABLE = InstanceTable(assorted_types())
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")


def templates() -> list[Any]:
    """Pools that refuse pods for every template-wide reason (requirements, taints, no type) and for room (limits,
    sizes), some defining the custom label `team`."""
    return [
        provisioner("spot-a", requirement("karpenter.sh/capacity-type", "In", "spot"),
                    requirement("topology.kubernetes.io/zone", "In", "test-zone-1"), table=TABLE),
        provisioner("arm", requirement("kubernetes.io/arch", "In", "arm64"), table=TABLE, labels={"team": "a"}),
        provisioner("gpu", requirement("kubernetes.io/arch", "In", "amd64"), table=TABLE,
                    taints=[Taint("gpu", "NoSchedule", "true")]),
        provisioner("small", requirement("karpenter.k8s.aws/instance-cpu", "Lt", "3"), table=TABLE,
                    labels={"team": "b"}, limits={"cpu": Decimal(8)}),
        provisioner("none", requirement("kubernetes.io/arch", "In", "s390x"), table=TABLE),
        provisioner("default", table=TABLE, limits={"cpu": Decimal(40)}),
    ]  # fmt: skip


class Afresh(Scheduler):
    """The uncached path: every template-wide refusal worked out again, as `fresh_claim` did before the run
    remembered them."""

    def template_refusal(self, position: int, pod: Pod, attempt: Attempt, ruled_out: bool = False) -> Refusal | None:
        return template_refusal(self.templates[position], pod, attempt, ruled_out)


SELECTORS = st.fixed_dictionaries({}, optional={
    "topology.kubernetes.io/zone": st.sampled_from(ZONES),
    "kubernetes.io/arch": st.sampled_from(("amd64", "arm64")),
    "karpenter.sh/capacity-type": st.sampled_from(("spot", "on-demand")),
    "team": st.sampled_from(("a", "b", "c", "bb")),
})  # fmt: skip


@st.composite
def workloads(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """A pod spec and how many replicas of it."""
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {
            "cpu": draw(st.sampled_from(("100m", "1", "2", "7", "100"))), "memory": "1Gi"}}}],
    }
    selector = draw(SELECTORS)
    if selector:
        spec["nodeSelector"] = selector
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    if draw(st.booleans()):  # a preferred term: the pod is relaxed (a second attempt) when it fits nowhere
        zone = draw(st.sampled_from(ZONES))
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}}]}}
    return spec, draw(st.integers(1, 4))


def told(plan: Plan) -> tuple[Any, ...]:
    """What a report says of a plan."""
    return (
        [(c.template, [p.key for p in c.pods], c.options, c.requests) for c in plan.claims],
        {key: ({name: (r.kind, r.message, r.fix, r.karpenter) for name, r in f.reasons.items()}, f.relaxed)
         for key, f in plan.failures.items()},
        plan.relaxed,
    )


@given(st.lists(workloads(), min_size=1, max_size=10), st.sampled_from(("cost", "karpenter")))
@deterministic(150)
def test_remembered_refusals_are_the_ones_worked_out_afresh(
    specs: list[tuple[dict[str, Any], int]], strategy: str
) -> None:
    pods = []
    for i, (spec, replicas) in enumerate(specs):
        shape = shape_of(spec, "default", {"app": f"w{i}"})
        pods += [Pod(f"w{i}-{r}", shape, order=len(pods)) for r in range(replicas)]
    options = SchedulerOptions(strategy)
    remembered = Scheduler(templates(), options=options).solve(pods)
    afresh = Afresh(templates(), options=options).solve(pods)
    assert told(remembered) == told(afresh)


def test_a_pod_that_fits_nowhere_is_refused_in_the_same_words_at_every_retry_and_by_every_replica() -> None:
    """Three replicas no template takes (too large for every type): each template's refusal of one attempt is one
    object, worded once."""
    shape = shape_of({"containers": [{"name": "app", "resources": {"requests": {"cpu": "1000"}}}],
                      "nodeSelector": {"team": "a"}})
    pods = [Pod(f"big-{r}", shape, order=r) for r in range(3)]
    plan = Scheduler(templates()).solve(pods)
    reasons = [plan.failures[p.key].reasons for p in pods]
    assert all(r.keys() == reasons[0].keys() for r in reasons)
    for name in ("spot-a", "gpu", "small", "none", "default"):  # refused whatever their claims hold
        assert reasons[0][name] is reasons[1][name] is reasons[2][name]
    assert reasons[0]["gpu"].kind == "taint" and reasons[0]["default"].kind == "requirements"
    assert reasons[0]["none"].kind == "requirements" or reasons[0]["none"].kind == "unavailable"
