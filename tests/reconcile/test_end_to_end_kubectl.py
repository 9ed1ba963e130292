"""End to end with real clients: `karpenter-policy reconcile` as a subprocess against the test API server (over
HTTP) and moto's EC2 (over HTTP, behind the fault proxy), driven by kubectl — a client nobody here wrote.

kubectl creates pods; the controller launches an instance, registers its Node (kubectl sees it with Karpenter's
labels) and binds the pods; `kubectl delete node` drains it through the termination finalizer and terminates its
instance; the pods, created again, get a new node; deleting them (scaling to zero) empties the node, whose
`ttlSecondsAfterEmpty` then deletes it and terminates its instance. The probes answer on the metrics port.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube.conftest import kubectl_binary
from kube.emulator import EmulatorThread

from .conftest import CLUSTER, AwsWorkloads
from .support import POLICIES, ROOT, compile_policies, inflate

GENEROUS = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def until(predicate: Callable[[], bool], what: str, stderr: Callable[[], str], timeout: float = GENEROUS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout:g} s\n{stderr()}")


@pytest.fixture()
def compiled_quick_ttl(tmp_path: Path) -> Path:
    """The example policies with `default` deleting its empty nodes after 2 s (not 30)."""
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    default = yaml.safe_load((policies / "default.yaml").read_text())
    default["spec"]["ttlSecondsAfterEmpty"] = 2
    (policies / "default.yaml").write_text(yaml.safe_dump(default))
    return compile_policies(policies, tmp_path / "build")


class Kubectl:
    """kubectl on one kubeconfig; ``transcript`` records each command but the ``items`` reads, with its output."""

    def __init__(self, kubeconfig: Path, cache: Path, timeout: float = 60) -> None:
        self.binary = kubectl_binary()
        self.kubeconfig = kubeconfig
        self.cache = cache
        self.timeout = timeout
        self.transcript: list[str] = []

    def run(self, *args: str, stdin: str | None = None, record: bool = True) -> subprocess.CompletedProcess[str]:
        command = [self.binary, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache}",
                   "--request-timeout=30s", *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=self.timeout,
                              check=False)
        if record:
            self.transcript.append(f"$ kubectl {' '.join(args)}\n{done.stdout}{done.stderr}".rstrip())
        return done

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        done = self.run(*args, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr}"
        return done.stdout

    def items(self, *args: str) -> list[dict[str, Any]]:
        done = self.run("get", *args, "-o", "json", record=False)
        assert done.returncode == 0, f"kubectl get {' '.join(args)} failed: {done.stderr}"
        listed: list[dict[str, Any]] = json.loads(done.stdout)["items"]
        return listed


@pytest.fixture()
def controller(
    compiled_quick_ttl: Path, aws_workloads: AwsWorkloads, tmp_path: Path
) -> Iterator[tuple[Kubectl, int, Callable[[], str]]]:
    with EmulatorThread(seed_namespaces=True) as server:
        config = server.write_kubeconfig(tmp_path / "kubeconfig")
        port = free_port()
        log = tmp_path / "reconcile.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "karpenter_policy.cli", "reconcile",
                    "--constraints", str(compiled_quick_ttl), "--cluster-name", CLUSTER,
                    "--kubeconfig", str(config), "--endpoint-url", aws_workloads.env.proxy.url,
                    "--kubernetes-version", "1.27",
                    "--default-instance-profile", "KarpenterNodeInstanceProfile-workloads",
                    "--provision-all-pending", "--batch-idle-duration", "200ms",
                    "--metrics-port", str(port), "--metrics-address", "127.0.0.1",
                ],
                cwd=ROOT, stderr=stderr, text=True, env=dict(os.environ),
            )
        try:
            yield Kubectl(config, tmp_path / "kubectl-cache"), port, log.read_text
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=GENEROUS)
            finally:
                process.kill()
        assert process.returncode == 0, log.read_text()


def pods_manifest(first: int, count: int) -> str:
    pods = []
    for item in inflate(first, count):
        pods.append({"apiVersion": "v1", "kind": "Pod", **item})
    return yaml.safe_dump_all(pods)


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except urllib.error.URLError:
        return 0  # not serving yet


@pytest.mark.slow
def test_kubectl_drives_the_controller_from_pods_to_nodes_and_back_to_nothing(
    controller: tuple[Kubectl, int, Callable[[], str]], aws_workloads: AwsWorkloads
) -> None:
    kubectl, port, log = controller
    until(lambda: probe(port, "/readyz") == 200, "readiness", log)
    assert probe(port, "/healthz") == 200

    kubectl("create", "-f", "-", stdin=pods_manifest(0, 3))

    def bound() -> bool:
        pods = kubectl.items("pods", "-l", "app=inflate")
        return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

    until(bound, "the 3 pods bound", log)
    (node,) = kubectl.items("nodes")
    labels = node["metadata"]["labels"]
    assert labels["karpenter.sh/provisioner-name"] == "default"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    assert "karpenter.sh/termination" in node["metadata"]["finalizers"]
    (instance,) = aws_workloads.instances()
    assert node["spec"]["providerID"].endswith(instance["InstanceId"])
    launched = kubectl.items("events", "--field-selector", f"involvedObject.name={node['metadata']['name']}")
    assert any(e["reason"] == "Launched" for e in launched)

    # kubectl delete node: the finalizer holds it while the controller cordons, drains and terminates.
    kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    until(lambda: not kubectl.items("nodes"), "the node drained and gone", log)
    until(lambda: not aws_workloads.instances(), "its instance terminated", log)

    # The evicted pods' controller would create them again: kubectl does, and they get a node of their own.
    kubectl("create", "-f", "-", stdin=pods_manifest(10, 3))
    until(lambda: len(kubectl.items("nodes")) == 1 and len(aws_workloads.instances()) == 1, "a new node", log)

    # The kubelet joins and reports the node Ready (kubectl does it here): the controller labels it initialized.
    (node,) = kubectl.items("nodes")
    ready = '{"status": {"conditions": [{"type": "Ready", "status": "True"}]}}'
    kubectl("patch", "node", node["metadata"]["name"], "--subresource=status", "--type=merge", "-p", ready)
    until(lambda: kubectl.items("nodes")[0]["metadata"]["labels"].get("karpenter.sh/initialized") == "true",
          "the node labelled initialized", log)

    # Scale to zero: the node empties, and its ttlSecondsAfterEmpty (2 s) deletes it and its instance.
    kubectl("delete", "pods", "--all", "--wait=false")
    until(lambda: not kubectl.items("nodes"), "the empty node deleted", log)
    until(lambda: not aws_workloads.instances(), "its instance terminated", log)
    messages = [line.split("\t")[3] for line in log().splitlines() if line.count("\t") >= 4]
    assert "Cordoned node" in messages and "Added TTL to empty node" in messages
    assert any(m.startswith("Triggering termination after 2s for empty node") for m in messages)
