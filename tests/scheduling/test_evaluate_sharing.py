"""`check --workloads` evaluates each pod template alone (`scheduling.evaluate`) once per `evaluation_key` and
remembers, per pod requirements, which templates admit them (`Evaluator`). Neither changes an answer (hypothesis):
for pods of many node selectors, tolerations, requests, names and labels — some with topology terms — the shared
`Evaluator`'s evaluation, and one handed over from another pod of the same key (`Evaluation.for_pod`), are the
evaluation a fresh scheduler gives that pod on its own: the same candidates, the same refusal per template in the
same words, at the same attempt — the pod's own."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling import InstanceTable, Pod, Scheduler, shape_of
from karpenter_policy.scheduling.evaluate import Evaluation, Evaluator, evaluate, evaluation_key

from .cluster import provisioner, requirement
from .support import assorted_types

TABLE = InstanceTable(assorted_types())
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")


def templates() -> list[Any]:
    """Pools that refuse pods for every reason fresh_claim has: requirements, taints, limits, no type."""
    return [
        provisioner("spot-a", requirement("karpenter.sh/capacity-type", "In", "spot"),
                    requirement("topology.kubernetes.io/zone", "In", "test-zone-1"), table=TABLE),
        provisioner("arm", requirement("kubernetes.io/arch", "In", "arm64"), table=TABLE, labels={"team": "a"}),
        provisioner("gpu", requirement("kubernetes.io/arch", "In", "amd64"), table=TABLE,
                    taints=[Taint("gpu", "NoSchedule", "true")]),
        provisioner("small", requirement("karpenter.k8s.aws/instance-cpu", "Lt", "3"), table=TABLE,
                    labels={"team": "b"}),
        provisioner("none", requirement("kubernetes.io/arch", "In", "s390x"), table=TABLE),
        provisioner("default", table=TABLE),
    ]  # fmt: skip


SELECTORS = st.fixed_dictionaries({}, optional={
    "topology.kubernetes.io/zone": st.sampled_from(ZONES),
    "kubernetes.io/arch": st.sampled_from(("amd64", "arm64")),
    "karpenter.sh/capacity-type": st.sampled_from(("spot", "on-demand")),
    "team": st.sampled_from(("a", "b", "c")),
})  # fmt: skip


@st.composite
def pod_specs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str]]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {
            "cpu": draw(st.sampled_from(("100m", "1", "2", "7", "100"))), "memory": "1Gi"}}}],
    }
    selector = draw(SELECTORS)
    if selector:
        spec["nodeSelector"] = selector
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    if draw(st.booleans()):
        zone = draw(st.sampled_from(ZONES))
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}}]}}
    labels = {"app": draw(st.sampled_from(("x", "y", "z")))}
    if draw(st.integers(0, 4)) == 0:  # a pod with topology terms: keyed by its whole shape
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": labels}}]
    return spec, labels


def told(evaluation: Evaluation) -> tuple[Any, ...]:
    """What a report says of an evaluation."""
    return (
        evaluation.attempt,
        [(c.template.name, c.options, c.launch, c.zone, c.capacity_type) for c in evaluation.candidates],
        {name: (r.kind, r.message, r.fix) for name, r in evaluation.refusals.items()},
    )


@given(st.lists(pod_specs(), min_size=1, max_size=12))
@deterministic(150)
def test_shared_evaluations_are_each_pods_own(specs: list[tuple[dict[str, Any], dict[str, str]]]) -> None:
    pods = [Pod(f"p{i}", shape_of(spec, "default", labels)) for i, (spec, labels) in enumerate(specs)]
    evaluator = Evaluator(Scheduler(templates()))
    first: dict[Any, tuple[Pod, Evaluation]] = {}
    for pod in pods:
        alone = evaluate(pod, Scheduler(templates()))
        shared = evaluator.evaluate(pod)
        assert told(shared) == told(alone)
        key = evaluation_key(pod.shape)
        if key in first:
            handed = first[key][1].for_pod(pod.shape, evaluator.scheduler.tolerate_prefer_no_schedule)
            assert told(handed) == told(alone)
            assert handed.attempt is pod.shape.attempts(False)[alone.attempt.index]
        else:
            first[key] = (pod, shared)


def test_pods_differing_only_in_name_and_labels_share_a_key_and_topology_keeps_them_apart() -> None:
    plain = {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}
    assert evaluation_key(shape_of(plain, "a", {"app": "x"})) == evaluation_key(shape_of(plain, "b", {"app": "y"}))
    spread = {**plain, "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                      "whenUnsatisfiable": "DoNotSchedule",
                                                      "labelSelector": {"matchLabels": {"app": "x"}}}]}
    assert evaluation_key(shape_of(spread, "a", {"app": "x"})) != evaluation_key(shape_of(spread, "a", {"app": "y"}))
