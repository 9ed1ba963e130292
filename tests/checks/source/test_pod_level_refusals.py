"""Pod-level `spec.resources` (Kubernetes `PodLevelResources`, on by default since v1.34): what the API server
refuses beyond "a request above its limit", ported from kubernetes/kubernetes pkg/apis/core/validation/validation.go
`validatePodResources` → `validatePodResourceRequirements` (`validatePodResourceName`: a qualified name, a standard
one, and one of component-helpers' `SupportedPodLevelResources` — cpu, memory, huge pages) and
`validatePodResourceConsistency` (pod-level requests not below `AggregateContainerRequests`; no container limit
above the pod-level limit). Each refusal is an `invalid-workload` error at its field in the API server's words and
the workload is never placed (`model/podadmission.py`); each case fails on the code before this port, which held
pod-level resources to "request ≤ limit" only. The property draws pods with random pod-level and container cpu and
memory and checks them against an independent statement of the rules: a pod they accept is never refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter_policy.api.violations import INVALID_WORKLOAD
from tests.checks.source.test_resource_refusals import (
    assert_admitted,
    assert_refused_at,
    main,
    read,
    resources,
)

HUGE = "hugepages-2Mi"

#: id → (the pod spec, the path of the field refused from the pod spec, the API server's words).
REFUSED: dict[str, tuple[dict[str, Any], tuple[str | int, ...], str]] = {
    "pod-level-unsupported-name": (
        {"containers": [main({"cpu": "1"})], "resources": resources({"cpu": "1", "ephemeral-storage": "1Gi"})},
        ("resources", "requests", "ephemeral-storage"),
        'Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"',
    ),
    "pod-level-extended-name": (
        {"containers": [main({"cpu": "1"})], "resources": resources(None, {"cpu": "1", "nvidia.com/gpu": 1})},
        ("resources", "limits", "nvidia.com/gpu"),
        'Unsupported value: "nvidia.com/gpu": supported values: "cpu", "hugepages-", "memory"',
    ),
    "pod-level-name-without-a-domain": (
        {"containers": [main({"cpu": "1"})], "resources": resources({"cpu": "1", "gpu": 1})},
        ("resources", "requests", "gpu"),
        'Invalid value: "gpu": must be a standard resource type or fully qualified',
    ),
    "pod-level-hugepages-without-limit": (
        {"containers": [main({"cpu": "1"})], "resources": resources({"memory": "1Gi", HUGE: "4Mi"})},
        ("resources", "requests", HUGE),
        "Required value: Limit must be set for non overcommitable resources",
    ),
    "pod-level-hugepages-request-below-limit": (
        {"containers": [main({"cpu": "1"})], "resources": resources({"memory": "1Gi", HUGE: "2Mi"}, {HUGE: "4Mi"})},
        ("resources", "requests", HUGE),
        f'Invalid value: "2Mi": must be equal to {HUGE} limit of 4Mi',
    ),
    "pod-level-hugepages-part-page": (
        {"containers": [main({"cpu": "1"})], "resources": resources({"memory": "1Gi"}, {HUGE: "3Mi"})},
        ("resources", "limits", HUGE),
        f'Invalid value: "3Mi": 3Mi is not positive integer multiple of {HUGE}',
    ),
    "pod-level-hugepages-alone": (
        {"containers": [main({"cpu": "1"})], "resources": resources({HUGE: "4Mi"}, {HUGE: "4Mi"})},
        ("resources",),
        "Forbidden: HugePages require cpu or memory",
    ),
    "pod-level-request-below-the-containers": (
        {"containers": [main({"cpu": "600m"}), main({"cpu": "600m"})], "resources": resources({"cpu": "1"})},
        ("resources", "requests", "cpu"),
        'Invalid value: "1": must be greater than or equal to aggregate container requests of 1200m',
    ),
    "pod-level-memory-below-the-containers-binary": (
        {"containers": [main({"memory": "1Gi"}), main({"memory": "512Mi"})], "resources": resources({"memory": "1Gi"})},
        ("resources", "requests", "memory"),
        'Invalid value: "1Gi": must be greater than or equal to aggregate container requests of 1536Mi',
    ),
    "pod-level-request-below-an-init-container": (
        {
            "containers": [main({"cpu": "500m"})],
            "initContainers": [main({"cpu": "2"})],
            "resources": resources({"cpu": "1"}),
        },
        ("resources", "requests", "cpu"),
        'Invalid value: "1": must be greater than or equal to aggregate container requests of 2',
    ),
    "pod-level-request-below-containers-and-a-sidecar": (
        {
            "containers": [main({"cpu": "500m"})],
            "initContainers": [{**main({"cpu": "1"}), "restartPolicy": "Always"}],
            "resources": resources({"cpu": "1"}),
        },
        ("resources", "requests", "cpu"),
        'Invalid value: "1": must be greater than or equal to aggregate container requests of 1500m',
    ),
    "pod-level-hugepages-limit-below-the-containers": (
        {
            "containers": [main({"memory": "1Gi", HUGE: "4Mi"}, {HUGE: "4Mi"}), main({"memory": "1Gi"})],
            "initContainers": [main({"memory": "1Gi", HUGE: "2Mi"}, {HUGE: "2Mi"})],
            "resources": resources({"memory": "2Gi"}, {HUGE: "2Mi"}),
        },
        ("resources", "limits", HUGE),
        'Invalid value: "2Mi": must be greater than or equal to aggregate container requests of 4Mi',
    ),
    "container-limit-above-the-pod-limit": (
        {"containers": [main({"cpu": "500m"}, {"cpu": "2"})], "resources": resources(None, {"cpu": "1"})},
        ("containers", 0, "resources", "limits", "cpu"),
        'Invalid value: "2": must be less than or equal to pod limits of 1',
    ),
}

#: What the API server creates next to each rule above.
ADMITTED: dict[str, dict[str, Any]] = {
    "pod-level-covers-the-containers": {
        "containers": [main({"cpu": "500m"}), main({"cpu": "500m"})],
        "resources": resources({"cpu": "1"}, {"cpu": "2"}),
    },
    "pod-level-limit-only": {
        "containers": [main({"cpu": "500m", "memory": "1Gi"})],
        "resources": resources(None, {"cpu": "2"}),
    },
    "pod-level-hugepages-with-memory": {
        "containers": [main({"cpu": "1"})],
        "resources": resources({"memory": "1Gi", HUGE: "4Mi"}, {HUGE: "4Mi"}),
    },
    "container-limit-at-the-pod-limit": {
        "containers": [main({"cpu": "500m"}, {"cpu": "1"})],
        "resources": resources(None, {"cpu": "1"}),
    },
    "ephemeral-storage-in-containers-only": {
        "containers": [main({"cpu": "500m", "ephemeral-storage": "1Gi"})],
        "resources": resources({"cpu": "1"}),
    },
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_each_pod_level_refusal_is_an_invalid_workload_at_its_field(case: str) -> None:
    assert_refused_at(*REFUSED[case])


@pytest.mark.parametrize("case", sorted(ADMITTED))
def test_what_the_api_server_admits_at_pod_level_is_read_and_placed(case: str) -> None:
    assert_admitted(ADMITTED[case])


# --- the property -----------------------------------------------------------------------------------------------

Amounts = dict[str, int]  # resource → millicores (cpu) or MiB (memory)
_UNITS = {"cpu": "m", "memory": "Mi"}


def _written(amounts: Amounts) -> dict[str, str]:
    return {name: f"{value}{_UNITS[name]}" for name, value in amounts.items()}


amounts = st.dictionaries(st.sampled_from(sorted(_UNITS)), st.integers(0, 3000), max_size=2)
container = st.tuples(amounts, amounts)  # (requests, limits)


def _effective(requests: Amounts, limits: Amounts) -> Amounts:
    return {**limits, **requests}


def _rules_refuse(
    apps: list[tuple[Amounts, Amounts]],
    inits: list[tuple[Amounts, Amounts, bool]],
    pod: tuple[Amounts, Amounts],
) -> bool:
    """The rules, stated apart from the code: request ≤ limit in every container and at pod level; a pod-level
    request at least the containers' aggregate (apps and sidecars summed, each other init container with the
    sidecars before it, the larger); no app container limit above the pod-level limit."""
    every = [*apps, *((r, lim) for r, lim, _ in inits), pod]
    if any(r[n] > lim[n] for r, lim in every for n in r if n in lim):
        return True
    for name, request in pod[0].items():
        running = sum(_effective(*c).get(name, 0) for c in apps)
        sidecars, peak = 0, 0
        for requests, limits, sidecar in inits:
            own = _effective(requests, limits).get(name, 0)
            if sidecar:
                sidecars += own
                peak = max(peak, sidecars)
            else:
                peak = max(peak, own + sidecars)
        if max(running + sidecars, peak) > request:
            return True
    return any(limits[n] > pod[1][n] for _, limits in apps for n in limits if n in pod[1])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(container, min_size=1, max_size=2),
    st.lists(st.tuples(amounts, amounts, st.booleans()), max_size=2),
    st.tuples(amounts, amounts),
)
def test_a_pod_the_pod_level_rules_accept_is_never_refused(
    apps: list[tuple[Amounts, Amounts]], inits: list[tuple[Amounts, Amounts, bool]], pod: tuple[Amounts, Amounts]
) -> None:
    def shaped(requests: Amounts, limits: Amounts) -> dict[str, Any]:
        return main(_written(requests) or None, _written(limits) or None)

    spec: dict[str, Any] = {
        "containers": [shaped(r, lim) for r, lim in apps],
        "resources": resources(_written(pod[0]) or None, _written(pod[1]) or None),
    }
    if inits:
        spec["initContainers"] = [
            {**shaped(r, lim), **({"restartPolicy": "Always"} if sidecar else {})} for r, lim, sidecar in inits
        ]
    found = read(spec)
    if _rules_refuse(apps, inits, pod):
        assert found.workloads == [] and found.findings
        assert {f.rule for f in found.findings} == {INVALID_WORKLOAD}
    else:
        assert [f.message for f in found.findings] == [] and len(found.workloads) == 1
