"""api.workloads: the workload kinds, where their pod template and their number of pods are, what a number of pods
may be, and the base every reader of a workload shares (`check --workloads`, `simulate`)."""

from __future__ import annotations

import pytest

from karpenter_policy.api.workloads import (
    DAEMON_SET,
    MAX_REPLICAS,
    WORKLOAD_KINDS,
    ReplicasError,
    Workload,
    replicas_of,
    replicas_problem,
    template_labels,
    template_path_of,
)


def test_the_kinds_table_covers_the_issue() -> None:
    assert {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod"} <= set(WORKLOAD_KINDS)
    for kind in WORKLOAD_KINDS.values():
        assert kind.api_version in kind.api_versions  # what an owner reference says is one of the kind's


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"apiVersion": "apps/v1", "kind": "Deployment"}, ("spec", "template")),
        ({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet"}, ("spec", "template")),
        ({"apiVersion": "batch/v1beta1", "kind": "CronJob"}, ("spec", "jobTemplate", "spec", "template")),
        ({"apiVersion": "v1", "kind": "PodTemplate"}, ("template",)),
        ({"apiVersion": "v1", "kind": "Pod"}, ()),
        ({"kind": "Pod"}, ()),  # a bare pod template may leave its apiVersion out
        ({"kind": "Deployment"}, None),  # a Deployment must say which API it is
        ({"apiVersion": "batch/v1", "kind": "Deployment"}, None),
        ({"apiVersion": ["apps/v1"], "kind": "Deployment"}, None),
        ({"apiVersion": "v1", "kind": "ConfigMap"}, None),
        ("not a mapping", None),
    ],
)
def test_template_paths(data: object, expected: tuple[str, ...] | None) -> None:
    assert template_path_of(data) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kind": "Deployment", "spec": {"replicas": 3}}, 3),
        ({"kind": "Deployment", "spec": {}}, 1),  # absent: 1, as the API server defaults it
        ({"kind": "StatefulSet", "spec": {"replicas": 0}}, 0),
        ({"kind": "Job", "spec": {"parallelism": 4, "replicas": 9}}, 4),
        ({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"parallelism": 2}}}}, 2),
        ({"kind": "DaemonSet", "spec": {"replicas": 7}}, 1),  # no number of pods of its own
        ({"kind": "Pod", "spec": {}}, 1),
        ({"kind": "Deployment", "spec": {"replicas": MAX_REPLICAS}}, MAX_REPLICAS),
    ],
)
def test_replicas_of(data: dict[str, object], expected: int) -> None:
    assert replicas_of(data) == expected


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"kind": "Deployment", "spec": {"replicas": -1}}, ("spec", "replicas"), "spec.replicas -1 cannot be negative"),
        ({"kind": "Deployment", "spec": {"replicas": "3"}}, ("spec", "replicas"), "must be an integer of 0 to 100,000"),
        ({"kind": "Job", "spec": {"parallelism": True}}, ("spec", "parallelism"), "must be an integer"),
        ({"kind": "ReplicaSet", "spec": {"replicas": MAX_REPLICAS + 1}}, ("spec", "replicas"), "is more than 100,000"),
        ({"kind": "Deployment", "spec": {"replicas": 10**50}}, ("spec", "replicas"), "(a number of 51 digits)"),
    ],
)
def test_a_number_of_pods_the_tool_does_not_plan_is_refused_at_its_field(
    data: dict[str, object], path: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ReplicasError) as raised:
        replicas_of(data)
    assert raised.value.path == path
    assert message in raised.value.message


def test_replicas_problem() -> None:
    assert [replicas_problem(v) for v in (0, 1, MAX_REPLICAS)] == [None, None, None]
    assert replicas_problem(-1) == "cannot be negative"
    assert replicas_problem(1.0) == replicas_problem(False) == "must be an integer of 0 to 100,000"


def test_the_base_workload() -> None:
    template = {"metadata": {"labels": {"app": "web", "tier": 2}}, "spec": {}}
    web = Workload("Deployment", "web", None, template, 3)
    assert (web.ref, web.is_daemon_set, web.pod_namespace, web.labels) == (
        "Deployment/web", False, "default", {"app": "web", "tier": "2"},
    )
    agent = Workload(DAEMON_SET, "agent", "kube-system")
    assert (agent.is_daemon_set, agent.pod_namespace, agent.labels, agent.replicas) == (True, "kube-system", {}, 1)
    assert template_labels({"metadata": {"labels": ["not", "a", "mapping"]}}) == template_labels(None) == {}
