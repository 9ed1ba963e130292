"""model.pods: a pod template's requirements (Karpenter's NewPodRequirements), its relaxation sequence
(Karpenter's Preferences.Relax), its tolerations and its requests as Kubernetes computes them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from karpenter_policy.model.pods import (
    TOLERATE_PREFER_NO_SCHEDULE,
    PodScheduling,
    PodSpecError,
    describe_requests,
    pod_requests,
)
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.taints import Taint, Toleration
from karpenter_policy.scheduling.pods import shape_of

GI = 2**30
MI = 2**20


def container(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "x", "resources": resources, **extra}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    data: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        data["values"] = list(values)
    return data


def term(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(expressions)}


# --- requests -----------------------------------------------------------------------------------------------


def test_app_containers_are_summed() -> None:
    spec = {"containers": [container({"cpu": "500m", "memory": "1Gi"}), container({"cpu": 1, "memory": "512Mi"})]}
    assert pod_requests(spec) == {"cpu": Decimal("1.5"), "memory": Decimal(GI + 512 * MI)}


def test_limits_stand_in_for_missing_requests() -> None:
    spec = {"containers": [container({"cpu": "1"}, {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": 1})]}
    assert pod_requests(spec) == {"cpu": Decimal(1), "memory": Decimal(2 * GI), "nvidia.com/gpu": Decimal(1)}


def test_init_containers_take_the_maximum_not_the_sum() -> None:
    spec = {
        "initContainers": [container({"cpu": "4", "memory": "256Mi"}), container({"cpu": "1", "memory": "3Gi"})],
        "containers": [container({"cpu": "500m", "memory": "1Gi"}), container({"cpu": "250m", "memory": "1Gi"})],
    }
    assert pod_requests(spec) == {"cpu": Decimal(4), "memory": Decimal(3 * GI)}


def test_sidecars_run_next_to_the_app_and_to_later_init_containers() -> None:
    spec = {
        "initContainers": [
            container({"cpu": "100m"}, restartPolicy="Always"),  # sidecar: started first, runs throughout
            container({"cpu": "2"}),  # runs with the sidecar: 2.1
        ],
        "containers": [container({"cpu": "1"})],  # runs with the sidecar: 1.1
    }
    assert pod_requests(spec)["cpu"] == Decimal("2.1")
    spec["initContainers"][1]["resources"]["requests"]["cpu"] = "500m"
    assert pod_requests(spec)["cpu"] == Decimal("1.1")


def test_pod_overhead_is_added() -> None:
    spec = {"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_requests(spec) == {"cpu": Decimal("1.25"), "memory": Decimal(120 * MI)}


def test_pod_level_requests_replace_the_containers_sum_for_cpu_memory_and_huge_pages() -> None:
    """Kubernetes 1.32+ `spec.resources` (component-helpers' PodRequests): the pod-level request wins for CPU,
    memory and huge pages; other resources (a GPU) stay the containers' sum; overhead is added on top."""
    spec = {
        "resources": {"requests": {"cpu": "3", "memory": "4Gi", "hugepages-2Mi": "64Mi"}},
        "containers": [container({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1}), container({"cpu": "500m"})],
        "overhead": {"cpu": "250m"},
    }
    assert pod_requests(spec) == {
        "cpu": Decimal("3.25"),
        "memory": Decimal(4 * GI),
        "hugepages-2Mi": Decimal(64 * MI),
        "nvidia.com/gpu": Decimal(1),
    }


def test_pod_level_limits_default_the_pod_request_only_where_no_container_requests_it() -> None:
    """The API server's defaultPodRequests: with pod-level limits and no pod-level request for a resource, the
    request is the containers' sum when any container requests it, else the pod-level limit."""
    spec = {
        "resources": {"limits": {"cpu": "8", "memory": "16Gi"}},
        "containers": [container({"cpu": "1"}), container()],
    }
    assert pod_requests(spec) == {"cpu": Decimal(1), "memory": Decimal(16 * GI)}
    spec["resources"]["requests"] = {"cpu": "2"}
    assert pod_requests(spec) == {"cpu": Decimal(2), "memory": Decimal(16 * GI)}


def test_a_partial_spark_template_requests_nothing() -> None:
    spec = {
        "nodeSelector": {"karpenter.sh/capacity-type": "spot"},
        "containers": [{"name": "spark-kubernetes-executor"}],
    }
    assert PodScheduling.from_pod_spec(spec).requests == ()


def test_zero_requests_are_left_out_and_requests_sorted() -> None:
    spec = {"containers": [container({"memory": "1Gi", "cpu": "0", "amd.com/gpu": 1})]}
    assert PodScheduling.from_pod_spec(spec).requests == (("amd.com/gpu", Decimal(1)), ("memory", Decimal(GI)))


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"containers": [container({"cpu": "lots"})]}, ("containers", 0, "resources", "requests", "cpu")),
        ({"containers": [container({"cpu": "-1"})]}, ("containers", 0, "resources", "requests", "cpu")),
        (
            {"initContainers": [container(limits={"memory": "1Gb"})]},
            ("initContainers", 0, "resources", "limits", "memory"),
        ),
        ({"containers": "nope"}, ("containers",)),
        ({"containers": [container()], "overhead": {"cpu": []}}, ("overhead", "cpu")),
        ({"containers": [container()], "resources": "4 cpus"}, ("resources",)),
        (
            {"containers": [container()], "resources": {"requests": {"memory": "4GB!"}}},
            ("resources", "requests", "memory"),
        ),
    ],
)
def test_malformed_resources_name_their_path(spec: dict[str, Any], path: tuple[Any, ...]) -> None:
    with pytest.raises(PodSpecError) as raised:
        PodScheduling.from_pod_spec(spec)
    assert raised.value.path == path


@pytest.mark.parametrize(
    ("name", "value", "whole"),
    [
        ("nvidia.com/gpu", "1.5", False),
        ("vpc.amazonaws.com/efa", "500m", False),
        ("vpc.amazonaws.com/efa", 1.25, False),
        ("nvidia.com/gpu", "2", True),
        ("nvidia.com/gpu", "1k", True),  # 1,000 devices: whole
        ("cpu", "1.5", True),  # native resources may be fractional
        ("hugepages-2Mi", "1.5Gi", True),
        ("example.kubernetes.io/thing", "1.5", True),  # a kubernetes.io name is native, not extended
    ],
)
def test_an_extended_resource_is_refused_unless_whole_as_the_api_server_refuses_it(
    name: str, value: Any, whole: bool
) -> None:
    """Kubernetes' ValidateResourceQuantityValue: an extended resource (IsExtendedResourceName: a domain outside
    kubernetes.io) must be an integer — the API server refuses `nvidia.com/gpu: 1.5`, so `check` must not place it."""
    spec = {"containers": [container(limits={name: value})]}
    if whole:
        PodScheduling.from_pod_spec(spec)
        return
    with pytest.raises(PodSpecError) as raised:
        PodScheduling.from_pod_spec(spec)
    assert raised.value.path == ("containers", 0, "resources", "limits", name)
    assert "must be an integer" in str(raised.value)


# --- requirements -------------------------------------------------------------------------------------------


def test_node_selector_entries_are_in_requirements() -> None:
    pod = PodScheduling.from_pod_spec({"nodeSelector": {"app": "kspark", "karpenter.sh/capacity-type": "spot"}})
    assert pod.requirements == Requirements(
        [Requirement.new("app", "In", ["kspark"]), Requirement.new("karpenter.sh/capacity-type", "In", ["spot"])]
    )


def test_beta_keys_are_normalised_and_scalars_stringified() -> None:
    pod = PodScheduling.from_pod_spec({"nodeSelector": {"beta.kubernetes.io/arch": "arm64", "gpu": True, "n": 3}})
    assert str(pod.requirements) == "gpu In [true], kubernetes.io/arch In [arm64], n In [3]"


def test_first_required_term_and_heaviest_preferred_term_are_intersected() -> None:
    spec = {
        "nodeSelector": {"app": "web"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        term(expression("kubernetes.io/arch", "In", "arm64", "amd64")),
                        term(expression("kubernetes.io/arch", "In", "amd64")),
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": term(expression("topology.kubernetes.io/zone", "In", "us-east-1b"))},
                    {"weight": 90, "preference": term(expression("kubernetes.io/arch", "In", "arm64"))},
                ],
            }
        },
    }
    pod = PodScheduling.from_pod_spec(spec)
    assert [t.weight for t in pod.preferred_terms] == [90, 10]
    assert str(pod.requirements) == "app In [web], kubernetes.io/arch In [arm64]"


def test_relaxation_follows_karpenter_order() -> None:
    """Required terms first (while more than one is left), then preferred terms heaviest first, then, when a
    provisioner has PreferNoSchedule taints, a toleration for them."""
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expression("a", "Exists")), term(expression("b", "Exists"))]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": term(expression("light", "Exists"))},
                    {"weight": 50, "preference": term(expression("heavy", "Exists"))},
                ],
            }
        }
    }
    pod = shape_of(spec)
    attempts = pod.attempts(tolerate_prefer_no_schedule=True)
    assert [sorted(a.requirements) for a in attempts] == [
        ["a", "heavy"],
        ["b", "heavy"],
        ["b", "light"],
        ["b"],
        ["b"],
    ]
    assert attempts[-1].tolerations == (TOLERATE_PREFER_NO_SCHEDULE,)
    assert attempts[-1].relaxed == (
        "dropped required nodeSelectorTerms[0]",
        "dropped the preferred term of weight 50",
        "dropped the preferred term of weight 5",
        "tolerated PreferNoSchedule taints",
    )
    assert len(pod.attempts(False)) == 4  # no PreferNoSchedule taint anywhere: no toleration added


def test_the_prefer_no_schedule_toleration_is_not_added_twice() -> None:
    spec = {"tolerations": [{"operator": "Exists", "effect": "PreferNoSchedule"}]}
    assert len(shape_of(spec).attempts(tolerate_prefer_no_schedule=True)) == 1


def test_a_pod_without_preferences_is_one_attempt() -> None:
    [attempt] = shape_of({}).attempts(False)
    assert attempt.requirements == Requirements() and attempt.relaxed == ()
    assert len(shape_of({}).attempts(tolerate_prefer_no_schedule=True)) == 2


def test_match_fields_are_ignored_and_empty_terms_match_everything() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                    ]
                }
            }
        }
    }
    assert PodScheduling.from_pod_spec(spec).requirements == Requirements()


@pytest.mark.parametrize(
    ("expression_", "where"),
    [
        ({"key": "a", "operator": "Equals", "values": ["x"]}, "operator"),
        ({"key": "a", "operator": "In", "values": []}, "values"),
        ({"key": "a", "operator": "Exists", "values": ["x"]}, "values"),
        ({"key": "a", "operator": "Gt", "values": ["five"]}, "values"),
        ({"operator": "Exists"}, "key"),
    ],
)
def test_malformed_expressions_name_their_field(expression_: dict[str, Any], where: str) -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": term(expression_)}]
            }
        }
    }
    with pytest.raises(PodSpecError) as raised:
        PodScheduling.from_pod_spec(spec)
    assert raised.value.path[-1] == where
    assert raised.value.path[:4] == ("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0)


# --- tolerations --------------------------------------------------------------------------------------------


def test_tolerations_are_read_as_written() -> None:
    pod = PodScheduling.from_pod_spec(
        {
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"operator": "Exists"},
            ]
        }
    )
    assert pod.tolerations == (
        Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),
        Toleration(operator="Exists"),
    )
    assert pod.tolerations[0].tolerates(Taint("nvidia.com/gpu", "NoSchedule", "true"))


@pytest.mark.parametrize(
    "toleration",
    [
        {"key": "a", "operator": "In"},
        {"key": "a", "effect": "Sometimes"},
        {"key": "a", "operator": "Exists", "value": "v"},
    ],
)
def test_malformed_tolerations_are_refused(toleration: dict[str, Any]) -> None:
    with pytest.raises(PodSpecError):
        PodScheduling.from_pod_spec({"tolerations": [toleration]})


def test_identical_templates_are_equal_and_hash_alike() -> None:
    spec = {
        "nodeSelector": {"a": "b"},
        "containers": [container({"cpu": "1"})],
        "tolerations": [{"operator": "Exists"}],
    }
    assert PodScheduling.from_pod_spec(spec) == PodScheduling.from_pod_spec(dict(spec))
    assert len({PodScheduling.from_pod_spec(spec), PodScheduling.from_pod_spec(dict(spec))}) == 1


# --- words --------------------------------------------------------------------------------------------------


def test_requests_in_words() -> None:
    requests = {"cpu": Decimal(96), "memory": Decimal(128 * GI), "nvidia.com/gpu": Decimal(2)}
    assert describe_requests(requests) == "96 vCPU, 128Gi memory and 2 GPUs"
    assert describe_requests({"cpu": Decimal("0.5")}) == "0.5 vCPU"
    assert describe_requests({"aws.amazon.com/neuron": Decimal(1), "memory": Decimal(1536 * MI)}) == (
        "1536Mi memory and 1 Neuron device"
    )
    assert describe_requests(requests, ["cpu", "nvidia.com/gpu"]) == "96 vCPU and 2 GPUs"
