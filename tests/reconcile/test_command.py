"""`karpenter-policy reconcile`, the real CLI as a subprocess: configuration errors exit 2 with one clear line,
and the wiring runs end to end — KubeCluster over HTTP to the API emulator of tests/kube (kmock), the AWS
provider over HTTP to moto behind the fault proxy, informers, leader election, metrics — until SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from api.tampering import Edit, tamper_directory
from kube.emulator import EmulatorThread
from profiles import fast_first

from karpenter_policy.cli import main
from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.optionspec import OptionValueError, from_flags
from karpenter_policy.reconcile.flags import ReconcileOptions

from .conftest import CLUSTER, AwsWorkloads
from .support import ROOT, inflate, run_cli

GENEROUS = 60.0


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": server}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
                "users": [{"name": "test", "user": {"token": "not-checked"}}],
            }
        )
    )
    return path


def reconcile(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("reconcile", *args, timeout=60)


@pytest.fixture()
def offline_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig naming a server nothing listens on (start-up fails before any request is made)."""
    return kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")


@pytest.mark.slow
def test_log_level_warn_writes_warnings_and_no_info_line(compiled: Path, offline_kubeconfig: Path) -> None:
    """`--log-level` (any case, Karpenter's names): the informers' warnings about a server nothing listens on are
    written; the start-up and SIGTERM lines, INFO, are not."""
    command = [
        sys.executable, "-m", "karpenter_policy.cli", "reconcile", "--constraints", str(compiled),
        "--cluster-name", CLUSTER, "--kubeconfig", str(offline_kubeconfig), "--kubernetes-version", "1.27",
        "--metrics-port", "0", "--log-level", "WARN",
    ]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    assert process.stderr is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + GENEROUS
        while time.monotonic() < deadline and not any("\tWARN\t" in line for line in lines):
            line = process.stderr.readline()  # the informers warn within seconds; EOF ends the loop too
            if not line:
                break
            lines.append(line)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            lines.extend(process.communicate(timeout=GENEROUS)[1].splitlines())
        finally:
            process.kill()
    assert process.returncode == 0, lines
    assert any("\tWARN\tkube.informer\t" in line for line in lines), lines
    assert not [line for line in lines if "\tINFO\t" in line], "no 'reconciling cluster', no 'received SIGTERM'"


def test_an_unknown_log_level_is_refused() -> None:
    result = reconcile("--constraints", ".", "--cluster-name", CLUSTER, "--log-level", "verbose")
    assert result.returncode == 2 and "'verbose' is not one of 'debug', 'info', 'warn', 'error'" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    fast_first([
        (["--constraints", "{missing}"], "not a directory (nor configmap/NAMESPACE/NAME)"),
        (["--constraints", "configmap/only-a-name"], "expected configmap/NAMESPACE/NAME"),
        (["--batch-idle-duration", "1x"], "--batch-idle-duration '1x': expected a positive finite duration"),
        (["--batch-idle-duration", "20s"], "--batch-max-duration must be at least --batch-idle-duration"),
        (["--kubernetes-version", ""], "--kubernetes-version is required"),
        (["--registration-ttl", "0m"], "--registration-ttl '0m': expected a positive finite duration"),
        (["--kubeconfig", "{missing}"], "kubeconfig"),
    ], unpack=True),
)
def test_configuration_errors_exit_2_with_one_clear_line(
    arguments: list[str], message: str, compiled: Path, offline_kubeconfig: Path, tmp_path: Path
) -> None:
    base = {
        "--constraints": str(compiled),
        "--cluster-name": CLUSTER,
        "--kubeconfig": str(offline_kubeconfig),
        "--kubernetes-version": "1.27",
        "--metrics-port": "0",
    }
    for flag, value in zip(arguments[::2], arguments[1::2], strict=True):
        base[flag] = value.format(missing=tmp_path / "missing")
    result = reconcile(*(part for pair in base.items() for part in pair))
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_registration_ttl_is_read_from_the_command_line() -> None:
    command = main.commands["reconcile"]
    given = ["--constraints", "build", "--cluster-name", CLUSTER]
    default = command.make_context("reconcile", list(given)).params
    assert from_flags(ReconcileOptions, default).registration_ttl == 900.0, "Karpenter's 15 minutes"
    five = command.make_context("reconcile", [*given, "--registration-ttl", "5m"]).params
    assert from_flags(ReconcileOptions, five).registration_ttl == 300.0


def test_a_corrupted_directory_at_start_up_is_refused(compiled: Path, offline_kubeconfig: Path, tmp_path: Path) -> None:
    broken = tmp_path / "build"
    (broken / "constraintsets").mkdir(parents=True)
    for file in (compiled / "constraintsets").iterdir():
        (broken / "constraintsets" / file.name).write_text(file.read_text())
    path = broken / "constraintsets" / "gpu.json"
    path.write_text(path.read_text().replace('"weight":50', '"weight":99').replace('"weight": 50', '"weight": 99'))
    result = reconcile(
        "--constraints", str(broken), "--cluster-name", CLUSTER, "--kubeconfig", str(offline_kubeconfig),
        "--kubernetes-version", "1.27", "--metrics-port", "0",
    )
    assert result.returncode == 2, result.stderr
    assert f"cannot load the constraint sets from {broken}: " in result.stderr and "gpu.json" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.__setitem__("weight", float("inf")), "default.json: weight Infinity is out of range"),
        (lambda d: d.__setitem__("taints", "x"), 'default.json: taints must be a list, not string "x"'),
        (lambda d: d.__setitem__("provider", "x"), "default.json: provider must be a mapping of source, name and spec"),
        (lambda d: d["requirements"].__setitem__(0, {"operator": "In"}), "requirements[0]: missing required field"),
    ],
    ids=["weight Infinity", "taints a string", "provider a string", "requirement without a key"],
)
@pytest.mark.slow
def test_a_set_compile_would_never_write_at_start_up_is_a_configuration_error(
    edit: Edit, message: str, compiled: Path, offline_kubeconfig: Path, tmp_path: Path
) -> None:
    broken = tamper_directory(compiled, "default", edit, copy_to=tmp_path / "build")
    result = reconcile(
        "--constraints", str(broken), "--cluster-name", CLUSTER, "--kubeconfig", str(offline_kubeconfig),
        "--kubernetes-version", "1.27", "--metrics-port", "0",
    )
    assert result.returncode == 2, result.stderr
    assert f"cannot load the constraint sets from {broken}: " in result.stderr and message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture()
def api_server() -> Iterator[EmulatorThread]:
    with EmulatorThread() as server:
        yield server


@pytest.mark.slow
def test_the_command_provisions_a_cluster_end_to_end_until_sigterm(
    compiled: Path, api_server: EmulatorThread, aws_workloads: AwsWorkloads, tmp_path: Path
) -> None:
    cluster = KubeCluster.from_url(api_server.url)
    for item in inflate(0, 3):
        cluster.create(objects.POD, item)
    port = free_port()
    command = [
        sys.executable, "-m", "karpenter_policy.cli", "reconcile",
        "--constraints", str(compiled),
        "--cluster-name", CLUSTER,
        "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", api_server.url)),
        "--endpoint-url", aws_workloads.env.proxy.url,
        "--kubernetes-version", "1.27",
        "--default-instance-profile", "KarpenterNodeInstanceProfile-workloads",
        "--provision-all-pending",
        "--batch-idle-duration", "200ms",
        "--metrics-port", str(port), "--metrics-address", "127.0.0.1",
    ]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + GENEROUS
        while time.monotonic() < deadline and process.poll() is None:
            if all(p["spec"].get("nodeName") for p in cluster.list(objects.POD).items):
                break
            time.sleep(0.2)
        metrics = ""
        if process.poll() is None:
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        lease = cluster.get(objects.LEASE, "karpenter-policy-reconcile", "default")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, stderr = process.communicate(timeout=GENEROUS)
        finally:
            process.kill()
    nodes = cluster.list(objects.NODE).items
    pods = cluster.list(objects.POD).items
    cluster.close()
    assert len(nodes) == 1, stderr
    (node,) = nodes
    assert {p["spec"].get("nodeName") for p in pods} == {objects.name(node)}, stderr
    assert objects.labels(node)["karpenter.sh/provisioner-name"] == "default"
    (instance,) = aws_workloads.instances()
    assert node["spec"]["providerID"].endswith(instance["InstanceId"])
    assert 'karpenter_policy_nodes_launched_total{capacity_type="spot",provisioner="default"} 1.0' in metrics
    assert lease is not None and lease["spec"]["holderIdentity"], "leader election took the lease"
    assert process.returncode == 0, stderr
    messages = [line.split("\t")[3] for line in stderr.splitlines() if line.count("\t") >= 4]
    assert "found 3 provisionable pod(s)" in messages
    assert f"Bound 3 pod(s) to node {objects.name(node)}" in messages
    assert "received SIGTERM, stopping" in messages and messages[-1] == "stopped"


@pytest.mark.parametrize("value", ["9" * 4000 + "s", "1e99999999s", ".infs", "nan", "0s", "-5s"])
def test_a_duration_no_timer_can_wait_for_is_refused_naming_the_flag(value: str) -> None:
    """A 4,000-digit duration read as float infinity was accepted (a registration TTL that never ran out)."""
    given = {"constraints": "build", "cluster_name": CLUSTER, "registration_ttl": value}
    with pytest.raises(OptionValueError, match="--registration-ttl .*positive finite duration") as refused:
        from_flags(ReconcileOptions, given)
    assert len(str(refused.value)) < 200
