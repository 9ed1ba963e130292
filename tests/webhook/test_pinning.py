"""`/mutate/pods` over HTTPS: the pinning rules' nodeSelector entries and tolerations, as a JSONPatch.

The expected side is the CLI: `karpenter-policy pin` (`policy.pin.pin_text`) on the same pod manifest; the
webhook's patch applied with `jsonpatch` must give the pod `pin --write` writes. Plus: tolerations of a named
provisioner's taints (from --policies, and from --constraints with --pinning), idempotence, a differing
nodeSelector value overwritten with a warning, pods no rule matches, and objects that are not pods.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from karpenter_policy.checks.source.loader import parse
from karpenter_policy.commands.compile.compiler import compile_command
from karpenter_policy.commands.flags import CompileFlags
from karpenter_policy.commands.pin import pin_text
from karpenter_policy.webhook.command import Webhook, WebhookOptions
from karpenter_policy.webhook.pinning import workload_kind
from karpenter_policy.webhook.review import shorten

from .support import ROOT, Client, patch_of

APPS = sorted((ROOT / "examples" / "pinning" / "apps").glob("*.yaml"))


def pinned(client: Client, pod: dict[str, Any], namespace: str = "spark") -> tuple[dict[str, Any], dict[str, Any]]:
    """The response and the pod with its patch applied (checked to be idempotent)."""
    response = client.review("/mutate/pods", pod, namespace=namespace)
    assert response["allowed"] is True
    result: dict[str, Any] = jsonpatch.apply_patch(pod, patch_of(response))
    again = client.review("/mutate/pods", result, namespace=namespace)
    assert again["allowed"] is True and patch_of(again) == [], again
    return response, result


@pytest.mark.parametrize("manifest", APPS, ids=[p.name for p in APPS])
def test_pods_are_pinned_as_pin_writes_them(manifest: Path, webhook: Webhook, client: Client) -> None:
    text = manifest.read_text()
    plan, findings = pin_text(str(manifest), text, webhook.pinner.rules)
    assert plan.changed and not findings
    expected = parse(str(manifest), plan.updated)[0].data
    pod = parse(str(manifest), text)[0].data
    _, result = pinned(client, pod, namespace="")
    assert result == expected


def test_spark_roles(client: Client) -> None:
    driver: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "pi-", "labels": {"spark-role": "driver"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    response, result = pinned(client, driver)
    assert result["spec"]["nodeSelector"] == {"app": "kspark", "karpenter.sh/capacity-type": "on-demand"}
    assert patch_of(response) == [
        {
            "op": "add",
            "path": "/spec/nodeSelector",
            "value": {"app": "kspark", "karpenter.sh/capacity-type": "on-demand"},
        }
    ]
    executor = copy.deepcopy(driver)
    executor["metadata"]["labels"] = {"spark-role": "executor"}
    executor["spec"]["nodeSelector"] = {"team": "analytics"}  # kept; the pins are added key by key
    response, result = pinned(client, executor)
    assert result["spec"]["nodeSelector"] == {
        "team": "analytics",
        "app": "kspark",
        "karpenter.sh/capacity-type": "spot",
    }
    assert {op["path"] for op in patch_of(response)} == {
        "/spec/nodeSelector/app",
        "/spec/nodeSelector/karpenter.sh~1capacity-type",
    }


def test_a_differing_value_is_overwritten_with_a_warning(client: Client) -> None:
    driver = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "d", "labels": {"spark-role": "driver"}},
        "spec": {"containers": [{"name": "c"}], "nodeSelector": {"karpenter.sh/capacity-type": "spot"}},
    }
    response, result = pinned(client, driver)
    assert result["spec"]["nodeSelector"]["karpenter.sh/capacity-type"] == "on-demand"
    assert len(response["warnings"]) == 1
    assert response["warnings"][0].startswith(
        "nodeSelector karpenter.sh/capacity-type is 'spot'; PinningPolicy/emr-spark"
    )


def test_unmatched_pods_and_other_objects(client: Client) -> None:
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": [{"name": "c"}]}}
    response = client.review("/mutate/pods", plain, namespace="default")
    assert response["allowed"] is True and "patch" not in response and "warnings" not in response
    no_spec = {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"spark-role": "driver"}}}
    assert client.review("/mutate/pods", no_spec)["allowed"] is True
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}
    response = client.review("/mutate/pods", deployment)
    assert response["allowed"] is False
    assert response["status"]["message"] == "expected a v1 Pod, not apps/v1 Deployment"
    assert client.review("/mutate/pods", None, operation="DELETE")["allowed"] is True


def test_workload_kind() -> None:
    assert workload_kind({}) == "Pod"
    owner = {"kind": "ReplicaSet", "controller": True, "name": "web-5d8f"}
    assert workload_kind({"ownerReferences": [owner]}) == "ReplicaSet"
    assert workload_kind({"ownerReferences": [owner], "labels": {"pod-template-hash": "5d8f"}}) == "Deployment"
    assert workload_kind({"ownerReferences": [{"kind": "Job", "controller": False}]}) == "Pod"


POLICIES = {
    "gpu.yaml": """\
        apiVersion: karpenter.sh/v1alpha5
        kind: Provisioner
        metadata:
          name: gpu
        spec:
          requirements:
            - key: karpenter.k8s.aws/instance-family
              operator: In
              values: ["g5"]
          taints:
            - key: nvidia.com/gpu
              value: "true"
              effect: NoSchedule
            - key: dedicated
              effect: NoExecute
          provider:
            subnetSelector: {karpenter.sh/discovery: prod}
            securityGroupSelector: {karpenter.sh/discovery: prod}
        """,
    "pinning.yaml": """\
        apiVersion: karpenter-policy.dev/v1alpha1
        kind: PinningPolicy
        metadata:
          name: ml
        spec:
          rules:
            - name: training-on-gpu
              match:
                namespaces: [ml]
                labels: {team: ml}
              provisioner: gpu
              tolerations:
                - key: example.com/preemptible
                  operator: Exists
        """,
}


@pytest.fixture(scope="module")
def gpu_policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("gpu-policies")
    for name, text in POLICIES.items():
        (directory / name).write_text(textwrap.dedent(text))
    return directory


def _serve(options: WebhookOptions) -> Iterator[Webhook]:
    server = Webhook(options)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def from_policies(gpu_policies: Path, cert_dir: Path) -> Iterator[Webhook]:
    yield from _serve(
        WebhookOptions(self_signed=str(cert_dir), address="127.0.0.1", port=0, policies=[str(gpu_policies)])
    )


@pytest.fixture(scope="module")
def from_constraints(gpu_policies: Path, cert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    out = tmp_path_factory.mktemp("compiled") / "out"
    result = compile_command(CompileFlags(paths=(str(gpu_policies),), out=str(out)))
    assert result.exit_code == 0, result
    options = WebhookOptions(
        self_signed=str(cert_dir),
        address="127.0.0.1",
        port=0,
        constraints=str(out),
        pinning=[str(gpu_policies / "pinning.yaml")],
    )
    yield from _serve(options)


@pytest.mark.parametrize("source", ["from_policies", "from_constraints"])
def test_a_provisioner_rule_tolerates_its_taints(source: str, request: pytest.FixtureRequest, cert_dir: Path) -> None:
    server: Webhook = request.getfixturevalue(source)
    client = Client(server.port, cert_dir / "ca.crt")
    existing = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "labels": {"team": "ml"}},
        "spec": {"containers": [{"name": "c"}], "tolerations": [existing]},
    }
    response, result = pinned(client, pod, namespace="ml")
    assert result["spec"]["nodeSelector"] == {"karpenter.sh/provisioner-name": "gpu"}
    assert result["spec"]["tolerations"] == [
        existing,
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "example.com/preemptible", "operator": "Exists"},
    ]
    elsewhere = client.review("/mutate/pods", pod, namespace="web")
    assert "patch" not in elsewhere
    client.close()


def test_pinning_example_policies_load(webhook: Webhook) -> None:
    assert len(webhook.pinner) == 2
    assert (
        yaml.safe_load((ROOT / "examples/pinning/policies/spark-pinning.yaml").read_text())["kind"] == "PinningPolicy"
    )


def test_the_compiled_configmap_mounted_as_a_directory(gpu_policies: Path, tmp_path: Path) -> None:
    """deploy/webhook mounts compile's ConfigMap (index.json and one key per set) as --constraints."""
    from karpenter_policy.webhook.context import load_constraints

    out = tmp_path / "out"
    assert compile_command(CompileFlags(paths=(str(gpu_policies),), out=str(out))).exit_code == 0
    (configmap,) = [p for p in (out / "manifests").iterdir() if p.name.startswith("configmap")]
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    for key, value in yaml.safe_load(configmap.read_text())["data"].items():
        (mounted / key).write_text(value)
    context = load_constraints(str(mounted), "us-east-1")
    assert [str(t) for t in context.provisioner_taints["gpu"]] == [
        "nvidia.com/gpu=true:NoSchedule",
        "dedicated:NoExecute",
    ]


DRIVER_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: driver
  labels:
    spark-role: driver
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - key: karpenter.sh/capacity-type
                operator: In
                values: [{capacity_types}]
  containers:
    - name: c
      image: i
"""


def _pin_write(manifest: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "karpenter_policy.cli", "pin", str(manifest), "--write"]
    policies = str(ROOT / "examples" / "pinning" / "policies")
    return subprocess.run([*command, "--policies", policies, *extra], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("prove", [True, False], ids=["proven", "no-prove"])
def test_a_pin_the_pods_affinity_rejects_is_refused_by_both(prove: bool, client: Client, tmp_path: Path) -> None:
    """Issue #8, item 12: a driver pod that requires spot capacity is not pinned to on-demand — `pin --write`
    writes nothing and exits 1, the webhook admits the pod unpatched with the same reason as a warning."""
    manifest = tmp_path / "driver.yaml"
    text = DRIVER_MANIFEST.format(capacity_types="spot")
    manifest.write_text(text)
    done = _pin_write(manifest, *(() if prove else ("--no-prove",)))
    assert done.returncode == 1, done.stderr
    assert manifest.read_text() == text
    reason = (
        "the pod's required node affinity (karpenter.sh/capacity-type In [spot]) rejects nodeSelector "
        "karpenter.sh/capacity-type=on-demand of PinningPolicy/emr-spark rule spark-drivers-on-demand: "
        "pinned, it could never be scheduled"
    )
    assert reason in done.stderr and "[pinning-conflict]" in done.stderr
    response = client.review("/mutate/pods", yaml.safe_load(text), namespace="spark")
    assert response["allowed"] is True and "patch" not in response, response
    assert response["warnings"] == [shorten(f"not pinned: {reason}")]


def test_a_pod_whose_affinity_allows_the_pin_is_pinned_by_both(client: Client, tmp_path: Path) -> None:
    manifest = tmp_path / "driver.yaml"
    text = DRIVER_MANIFEST.format(capacity_types="spot, on-demand")
    manifest.write_text(text)
    done = _pin_write(manifest)
    assert done.returncode == 0, done.stderr
    _, result = pinned(client, yaml.safe_load(text))
    assert result == yaml.safe_load(manifest.read_text())


def _driver(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "pi-", "labels": {"spark-role": "driver"}},
        "spec": {"containers": [{"name": "spark", "image": "spark:3.5"}], **spec},
    }


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (
            _driver(tolerations=[{"key": f"k{i}", "operator": "Exists"} for i in range(50_000)]),
            "the pod's spec holds 50000 nodeSelector entries and tolerations, over the webhook's limit of 200",
        ),
        (
            _driver(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                       "values": [f"x{i}.large" for i in range(100_000)]}]}
            ]}}}),
            "the pod's node affinity holds 100000 values, over the webhook's limit of 2000",
        ),
        (
            _driver(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [
                    {"key": f"example.com/k{i}", "operator": "Exists"} for i in range(5_000)
                ]}}
            ]}}),
            "the pod's node affinity holds 5000 expressions, over the webhook's limit of 100",
        ),
        (
            {**_driver(), "metadata": {"generateName": "pi-", "labels": {f"k{i}": "v" for i in range(20_000)}}},
            "the pod's metadata holds 20000 labels and annotations, over the webhook's limit of 500",
        ),
    ],
    ids=["tolerations", "values", "expressions", "labels"],
)
def test_a_pod_over_the_work_caps_is_refused_before_pinning(pod: dict[str, Any], reason: str, client: Client) -> None:
    """#27: `/mutate/pods` had no work caps (the Provisioner routes had); a pod far beyond any real one is denied at
    once, naming the cap — not pinned, nor admitted unpinned (which would let it skip its pins)."""
    started = time.monotonic()
    response = client.review("/mutate/pods", pod, namespace="spark")
    assert response["allowed"] is False and reason in response["status"]["message"], response
    assert time.monotonic() - started < 3.0
    pinned(client, _driver(), namespace="spark")  # the webhook still pins the next pod


def test_a_pod_at_the_caps_is_pinned(client: Client) -> None:
    pod = _driver(tolerations=[{"key": f"k{i}", "operator": "Exists"} for i in range(197)])  # 200 with the pins added
    response, _ = pinned(client, pod)
    assert patch_of(response)


def test_a_pod_the_api_server_refuses_is_denied_in_its_words_not_pinned(client: Client) -> None:
    """#26: `/mutate/pods` pinned a pod whose resources the API server refuses (a GPU requested without a limit, a
    request above its limit) — the webhook runs before the API server's validation. It is denied now, naming each
    field as the API server does; the same pod with its limits set is pinned."""
    pod = _driver(containers=[
        {"name": "spark", "image": "spark:3.5", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": 1},
                                                              "limits": {"cpu": "1"}}},
    ])
    response = client.review("/mutate/pods", pod, namespace="spark")
    assert response["allowed"] is False and "patch" not in response, response
    assert response["status"]["message"] == (
        "karpenter-policy webhook: not pinned, the API server refuses it: "
        'spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1; '
        "spec.containers[0].resources.requests[nvidia.com/gpu]: Required value: Limit must be set for non "
        "overcommitable resources (nvidia.com/gpu has no limit)"
    )
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "nvidia.com/gpu": 1}}
    response, result = pinned(client, pod)
    assert patch_of(response) and result["spec"]["nodeSelector"]["app"] == "kspark"


def test_a_pod_whose_pod_level_resources_the_api_server_refuses_is_denied(client: Client) -> None:
    """#26: pod-level `spec.resources` (Kubernetes v1.34 `validatePodResourceConsistency`): a pod-level cpu request
    below its two containers' sum is denied in the API server's words, not pinned; with the request at the sum it is
    pinned."""
    pod = _driver(containers=[
        {"name": "a", "image": "spark:3.5", "resources": {"requests": {"cpu": "600m"}}},
        {"name": "b", "image": "spark:3.5", "resources": {"requests": {"cpu": "600m"}}},
    ])
    pod["spec"]["resources"] = {"requests": {"cpu": "1"}}
    response = client.review("/mutate/pods", pod, namespace="spark")
    assert response["allowed"] is False and "patch" not in response, response
    assert response["status"]["message"] == (
        "karpenter-policy webhook: not pinned, the API server refuses it: "
        'spec.resources.requests[cpu]: Invalid value: "1": must be greater than or equal to aggregate container '
        "requests of 1200m"
    )
    pod["spec"]["resources"] = {"requests": {"cpu": "1200m"}}
    response, result = pinned(client, pod)
    assert patch_of(response) and result["spec"]["nodeSelector"]["app"] == "kspark"


@pytest.fixture(scope="module")
def from_v1_policies(cert_dir: Path) -> Iterator[Webhook]:
    policies = ROOT / "examples" / "v1" / "pinning" / "policies"
    yield from _serve(WebhookOptions(self_signed=str(cert_dir), address="127.0.0.1", port=0, policies=[str(policies)]))


def test_a_nodepool_rule_pins_the_v1_label_and_tolerates_its_taints(from_v1_policies: Webhook, cert_dir: Path) -> None:
    """examples/v1/pinning: the rule names the NodePool `batch`; a Job's pod gets `karpenter.sh/nodepool` (never
    `karpenter.sh/provisioner-name`, which no v1 node carries) and the toleration of the NodePool's taint."""
    client = Client(from_v1_policies.port, cert_dir / "ca.crt")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nightly-report-x",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "n", "uid": "u", "controller": True}],
        },
        "spec": {"containers": [{"name": "c"}]},
    }
    _, result = pinned(client, pod, namespace="analytics")
    assert result["spec"]["nodeSelector"] == {"karpenter.sh/nodepool": "batch"}
    assert result["spec"]["tolerations"] == [{"key": "example.com/batch", "operator": "Exists", "effect": "NoSchedule"}]
    client.close()
