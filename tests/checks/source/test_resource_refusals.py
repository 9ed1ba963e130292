"""Pods the Kubernetes API server refuses for their resources (`ValidateResourceRequirements`,
pkg/apis/core/validation/validation.go) are `invalid-workload` errors at the field, in the API server's words, and
never placed — in `check --workloads`, `diff --workloads` (HEAD) and the webhook's pod path (tests/webhook). They
used to be placed as if the API server would create them (`nvidia.com/gpu` requested without a limit landed on a
GPU node). What they are held to is `model.podadmission`; a pod the API server holds is not (docs/plan.md)."""

from __future__ import annotations

import copy
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_cli as cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter_policy.api.violations import INVALID_WORKLOAD
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.source.workloads import WorkloadError, read_documents, workload_from_data

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"

GPU, EFA, HUGE = "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"


def deployment(spec: dict[str, Any], name: str = "trainer") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


def resources(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


def main(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "main", "image": "x", "resources": resources(requests, limits)}


#: id → (the pod spec, the path of the field refused from the pod spec, the API server's words).
REFUSED: dict[str, tuple[dict[str, Any], tuple[str | int, ...], str]] = {
    "extended-without-limit": (
        {"containers": [main({"cpu": "1", GPU: 1})]},
        ("containers", 0, "resources", "requests", GPU),
        "Required value: Limit must be set for non overcommitable resources",
    ),
    "efa-request-below-limit": (
        {"containers": [main({"cpu": "1", EFA: 1}, {EFA: 2})]},
        ("containers", 0, "resources", "requests", EFA),
        f'Invalid value: "1": must be equal to {EFA} limit of 2',
    ),
    "cpu-request-above-limit": (
        {"containers": [main({"cpu": "2"}, {"cpu": "1"})]},
        ("containers", 0, "resources", "requests", "cpu"),
        'Invalid value: "2": must be less than or equal to cpu limit of 1',
    ),
    "memory-above-limit-in-an-init-container": (
        {"initContainers": [main({"memory": "2Gi"}, {"memory": "1Gi"})], "containers": [main({"cpu": "1"})]},
        ("initContainers", 0, "resources", "requests", "memory"),
        'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi',
    ),
    "ephemeral-storage-above-limit": (
        {"containers": [main({"cpu": "1", "ephemeral-storage": "20Gi"}, {"ephemeral-storage": "10Gi"})]},
        ("containers", 0, "resources", "requests", "ephemeral-storage"),
        "must be less than or equal to ephemeral-storage limit of 10Gi",
    ),
    "gpu-without-limit-in-a-sidecar": (
        {
            "initContainers": [{**main({"cpu": "100m", GPU: 1}), "restartPolicy": "Always"}],
            "containers": [main({"cpu": "1"})],
        },
        ("initContainers", 0, "resources", "requests", GPU),
        "Limit must be set for non overcommitable resources",
    ),
    "hugepages-request-below-limit": (
        {"containers": [main({"memory": "1Gi", HUGE: "2Mi"}, {"memory": "1Gi", HUGE: "4Mi"})]},
        ("containers", 0, "resources", "requests", HUGE),
        f'Invalid value: "2Mi": must be equal to {HUGE} limit of 4Mi',
    ),
    "hugepages-part-of-a-page": (
        {"containers": [main({"memory": "1Gi"}, {"memory": "1Gi", HUGE: "3Mi"})]},
        ("containers", 0, "resources", "limits", HUGE),
        f'Invalid value: "3Mi": 3Mi is not positive integer multiple of {HUGE}',
    ),
    "hugepages-without-cpu-or-memory": (
        {"containers": [main(None, {HUGE: "4Mi"})]},
        ("containers", 0, "resources"),
        "Forbidden: HugePages require cpu or memory",
    ),
    "negative-quantity": (
        {"containers": [main({"cpu": "-1"})]},
        ("containers", 0, "resources", "requests", "cpu"),
        'Invalid value: "-1": must be greater than or equal to 0',
    ),
    "a-name-without-a-domain": (
        {"containers": [main({"cpu": "1"}, {"gpu": 1})]},
        ("containers", 0, "resources", "limits", "gpu"),
        'Invalid value: "gpu": must be a standard resource type or fully qualified',
    ),
    "a-quota-name-in-a-container": (
        {"containers": [main({"cpu": "1", "pods": 1})]},
        ("containers", 0, "resources", "requests", "pods"),
        'Invalid value: "pods": must be a standard resource for containers',
    ),
    "a-name-that-is-not-qualified": (
        {"containers": [main({"cpu": "1"}, {"Example.com/gpu": 1})]},
        ("containers", 0, "resources", "limits", "Example.com/gpu"),
        "prefix part must be a lowercase DNS subdomain",
    ),
    "a-quota-prefix-on-an-extended-name": (
        {"containers": [main({"cpu": "1"}, {"requests.example.com/x": 1})]},
        ("containers", 0, "resources", "limits", "requests.example.com/x"),
        "doesn't follow extended resource name standard",
    ),
    "overhead-hugepages-alone": (
        {"containers": [main({"cpu": "1"})], "overhead": {HUGE: "2Mi"}},
        ("overhead",),
        "Forbidden: HugePages require cpu or memory",
    ),
    "overhead-a-name-without-a-domain": (
        {"containers": [main({"cpu": "1"})], "overhead": {"cpu": "250m", "gpu": 1}},
        ("overhead", "gpu"),
        'Invalid value: "gpu": must be a standard resource type or fully qualified',
    ),
    "pod-level-request-above-limit": (
        {"containers": [main()], "resources": resources({"cpu": "2"}, {"cpu": "1"})},
        ("resources", "requests", "cpu"),
        'Invalid value: "2": must be less than or equal to cpu limit of 1',
    ),
}

#: Pods the API server creates: what it defaults or allows next to each rule above.
ADMITTED: dict[str, dict[str, Any]] = {
    "extended-limit-only": {"containers": [main({"cpu": "1"}, {GPU: 1})]},
    "extended-request-equal-to-limit": {"containers": [main({"cpu": "1", EFA: 2}, {EFA: 2})]},
    "cpu-request-below-limit": {"containers": [main({"cpu": "500m", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"})]},
    "kubernetes-io-name-without-limit": {"containers": [main({"cpu": "1", "example.kubernetes.io/thing": 1})]},
    "hugepages-whole-with-memory": {"containers": [main({"memory": "1Gi", HUGE: "4Mi"}, {HUGE: "4Mi"})]},
    "overhead-cpu-memory": {"containers": [main({"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}},
    "pod-level-request-below-limit": {"containers": [main()], "resources": resources({"cpu": "1"}, {"cpu": "2"})},
}


def read(spec: dict[str, Any]) -> Any:
    return read_documents(parse("apps/trainer.yaml", yaml.safe_dump(deployment(spec), sort_keys=False)))


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_each_refusal_is_an_invalid_workload_at_its_field_and_never_placed(case: str) -> None:
    """One per rule of ValidateResourceRequirements (init containers, sidecars, overhead and pod-level resources
    too): an error at the field, in the API server's words; the workload is not among those placed."""
    assert_refused_at(*REFUSED[case])


@pytest.mark.parametrize("case", sorted(ADMITTED))
def test_what_the_api_server_admits_is_read_and_placed(case: str) -> None:
    assert_admitted(ADMITTED[case])


def assert_refused_at(spec: dict[str, Any], path: tuple[str | int, ...], words: str) -> None:
    """`spec` is an `invalid-workload` error saying `words`, at `path` from the pod spec, and is not placed."""
    found = read(spec)
    assert found.workloads == [], "a pod the API server refuses must not be placed"
    errors = [f for f in found.findings if f.rule == INVALID_WORKLOAD]
    assert errors and all(f.severity == "error" for f in errors)
    assert any(words in f.message for f in errors), [f.message for f in errors]
    with pytest.raises(WorkloadError) as raised:
        workload_from_data(deployment(spec))
    every = [(raised.value.path, raised.value.message), *raised.value.also]
    assert any(p == ("spec", "template", "spec", *path) and words in m for p, m in every), every


def assert_admitted(spec: dict[str, Any]) -> None:
    """`spec` is read without a finding and placed."""
    found = read(spec)
    assert [f.message for f in found.findings] == [] and len(found.workloads) == 1


def test_every_refused_field_of_a_pod_is_its_own_finding_in_order() -> None:
    spec = {
        "containers": [main({"cpu": "2", GPU: 1}, {"cpu": "1"})],
        "initContainers": [main({"memory": "2Gi"}, {"memory": "1Gi"})],
    }
    found = read(spec)
    assert [(f.line, f.message.split(": ", 1)[1]) for f in found.findings] == [
        (found.findings[0].line, 'Invalid value: "2": must be less than or equal to cpu limit of 1'),
        (found.findings[1].line, "Required value: Limit must be set for non overcommitable resources "
                                 f"({GPU} has no limit)"),
        (found.findings[2].line, 'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'),
    ]
    assert all(f.message.startswith("the API server refuses this pod: ") for f in found.findings)


def test_check_workloads_reports_them_at_file_line_column_and_places_none(tmp_path: Path) -> None:
    apps = tmp_path / "apps.yaml"
    apps.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: trainer\nspec:\n  template:\n    spec:\n"
        "      tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
        "      containers:\n        - name: main\n          image: x\n          resources:\n"
        "            requests:\n              cpu: \"1\"\n              nvidia.com/gpu: 1\n"
    )
    result = cli("check", str(POLICIES), "--workloads", str(apps))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert (
        f"{apps}:15:31: error: Deployment/trainer: the API server refuses this pod: Required value: Limit must be set "
        f"for non overcommitable resources ({GPU} has no limit) [invalid-workload]"
    ) in result.stdout, result.stdout
    assert "capacity: 0 pods on 0 new nodes" in result.stdout, "never placed"
    apps.write_text(apps.read_text().replace("            requests:\n", "            limits:\n"))
    fixed = cli("check", str(POLICIES), "--workloads", str(apps))
    assert "invalid-workload" not in fixed.stdout and "capacity: 1 pod on 1 new node" in fixed.stdout, fixed.stdout


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo, check=True, capture_output=True,
    )


def test_diff_workloads_reports_heads_refusal_and_fails(tmp_path: Path) -> None:
    """diff read HEAD's workloads and dropped those it could not read without a word; a refused one is now an
    `invalid-workload` error of HEAD's report (exit 1), at its file and line."""
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(POLICIES), str(repo / "policies")], check=True)
    web = deployment({"containers": [main({"cpu": "1"})]}, "web")
    (repo / "apps" / "web.yaml").write_text(yaml.safe_dump(web, sort_keys=False))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    broken = copy.deepcopy(web)
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "500m"}
    (repo / "apps" / "web.yaml").write_text(yaml.safe_dump(broken, sort_keys=False))
    _git(repo, "commit", "-qam", "head")
    result = cli("diff", "HEAD~1", "HEAD", "policies/", "--workloads", "apps/", cwd=repo)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert (
        'HEAD apps/web.yaml:17:18: error: the API server refuses this pod: Invalid value: "1": must be less than or '
        "equal to cpu limit of 500m [invalid-workload]"
    ) in result.stdout, result.stdout


# --- the property -----------------------------------------------------------------------------------------------

NAMES = ("cpu", "memory", "ephemeral-storage", GPU, EFA, HUGE, "example.kubernetes.io/thing")
_PAGE = 2 * 2**20


def _quantity(name: str) -> st.SearchStrategy[tuple[str, Decimal]]:
    """(as written, value) of a quantity fit for `name` — huge pages sometimes a part of a page."""
    if name == HUGE:
        return st.integers(0, 8).map(lambda mi: (f"{mi}Mi", Decimal(mi * 2**20)))
    if name == "cpu":
        return st.integers(0, 4000).map(lambda m: (f"{m}m", Decimal(m) / 1000))
    if name in ("memory", "ephemeral-storage"):
        return st.integers(0, 4096).map(lambda mi: (f"{mi}Mi", Decimal(mi * 2**20)))
    return st.integers(0, 8).map(lambda n: (str(n), Decimal(n)))


@st.composite
def resource_lists(draw: st.DrawFn) -> dict[str, tuple[str, Decimal]]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    return {name: draw(_quantity(name)) for name in names}


@st.composite
def containers(draw: st.DrawFn) -> tuple[dict[str, tuple[str, Decimal]], dict[str, tuple[str, Decimal]]]:
    return draw(resource_lists()), draw(resource_lists())


def _refused(requests: dict[str, tuple[str, Decimal]], limits: dict[str, tuple[str, Decimal]]) -> bool:
    """The rules as the Kubernetes docs state them, for this test's names: the oracle."""
    exact = {GPU, EFA, HUGE}  # not overcommitable: a request needs a limit, and equal to it
    for name, (_, value) in requests.items():
        if name in exact and (name not in limits or limits[name][1] != value):
            return True
        if name in limits and value > limits[name][1]:
            return True
    for name, (_, value) in (*requests.items(), *limits.items()):
        if name == HUGE and value % _PAGE:
            return True
    named = set(requests) | set(limits)
    return HUGE in named and not named & {"cpu", "memory"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(containers(), min_size=1, max_size=2), st.lists(containers(), max_size=1))
def test_a_pod_the_rules_accept_is_read_and_one_they_refuse_is_never_placed(
    apps: list[Any], inits: list[Any]
) -> None:
    def written(pair: Any) -> dict[str, Any]:
        requests, limits = pair
        return main({n: q for n, (q, _) in requests.items()}, {n: q for n, (q, _) in limits.items()})

    spec = {"containers": [written(c) for c in apps], "initContainers": [written(c) for c in inits]}
    refused = any(_refused(*pair) for pair in [*apps, *inits])
    found = read(spec)
    if refused:
        assert found.workloads == [] and found.findings
        assert {f.rule for f in found.findings} == {INVALID_WORKLOAD}
    else:
        assert [f.message for f in found.findings] == [] and len(found.workloads) == 1


def test_a_4000_digit_value_is_not_echoed_whole_in_the_refusal() -> None:
    """Hostile pass: huge pages of a 4,000-digit amount are refused, and the message shows the amount's start, not
    8,000 characters of it (as `quantity-out-of-range` abbreviates)."""
    amount = "9" * 4000
    found = read({"containers": [main({"memory": "1Gi", HUGE: amount}, {HUGE: amount})]})
    errors = [f.message for f in found.findings if f.rule == INVALID_WORKLOAD]
    assert errors and found.workloads == []
    assert all(len(message) < 300 and "9" * 37 + "..." in message for message in errors), errors
