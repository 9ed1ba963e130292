"""The policy context and pinning rules reload when their files change (issue #12), over HTTPS.

`--policies DIR`: a new AWSNodeTemplate changes what a Provisioner is proven against, a new taint what a pinned
pod tolerates; `--constraints DIR` mounted as kubelet mounts a ConfigMap (a `..data` symbolic link swapped to a new
directory) with `--pinning`: a recompiled set's taints reach the pods. A version that does not load — a pinning
rule naming an unknown provisioner, a constraint set whose hash does not match or whose content compile would never
write — is refused with a log line (one per version), and the last good version keeps serving until a good one
arrives. The worker processes are replaced, not added to.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from api.tampering import tamper_directory

from karpenter_policy.commands.compile.compiler import compile_command
from karpenter_policy.commands.flags import CompileFlags
from karpenter_policy.webhook.command import Webhook, WebhookOptions
from karpenter_policy.webhook.watch import fingerprint

from .support import Client, patch_of

PROVISIONER = """\
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
{more_taints}  providerRef:
    name: nodes
"""
NODE_TEMPLATE = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: nodes
spec:
  amiFamily: {ami_family}
  subnetSelector: {{karpenter.sh/discovery: prod}}
  securityGroupSelector: {{karpenter.sh/discovery: prod}}
"""
PINNING = """\
apiVersion: karpenter-policy.dev/v1alpha1
kind: PinningPolicy
metadata:
  name: ml
spec:
  rules:
    - name: training-on-gpu
      match:
        namespaces: [ml]
      provisioner: {provisioner}
"""
NEW_TAINT = "    - key: example.com/new\n      effect: NoExecute\n"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train"}, "spec": {"containers": [{"name": "c"}]}}
#: A Provisioner for Linux nodes that launches with the `nodes` template: proven against Windows types when the
#: template's AMI family is a Windows one.
LINUX_ONLY = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "linux"},
    "spec": {
        "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
        "providerRef": {"name": "nodes"},
    },
}


def write_policies(
    directory: Path, *, more_taints: str = "", ami_family: str = "AL2", provisioner: str = "gpu"
) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "gpu.yaml").write_text(PROVISIONER.format(more_taints=more_taints))
    (directory / "template.yaml").write_text(NODE_TEMPLATE.format(ami_family=ami_family))
    (directory / "pinning.yaml").write_text(PINNING.format(provisioner=provisioner))


@contextlib.contextmanager
def between_checks(server: Webhook) -> Iterator[None]:
    """The reloader held between two of its checks while a version is written: the version changes all at once, as
    a ConfigMap volume's does (its `..data` link swapped), never seen half written — a half-written version that
    does not load would be one more refusal counted."""
    with server.reloader._lock:
        yield


def wait_for(predicate: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def tolerated(client: Client) -> list[str]:
    """The taint keys the pinning rule makes a pod in namespace ml tolerate."""
    response = client.review("/mutate/pods", POD, namespace="ml")
    assert response["allowed"] is True
    operations = [op for op in patch_of(response) if op["path"].startswith("/spec/tolerations")]
    return [t["key"] for op in operations for t in (op["value"] if isinstance(op["value"], list) else [op["value"]])]


def admitted(client: Client, obj: dict[str, Any]) -> bool:
    return bool(client.review("/validate/provisioners", obj)["allowed"])


def reloads(server: Webhook, result: str) -> float:
    return float(server.metrics.context_reloads.labels(result)._value.get())


@contextlib.contextmanager
def serve(options: WebhookOptions) -> Iterator[Webhook]:
    server = Webhook(options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def policies(tmp_path: Path, cert_dir: Path) -> Iterator[tuple[Webhook, Path]]:
    directory = tmp_path / "policies"
    write_policies(directory)
    options = WebhookOptions(
        self_signed=str(cert_dir), address="127.0.0.1", port=0, policies=[str(directory)], reload_interval=0.2
    )
    with serve(options) as server:
        yield server, directory


def counting_checks(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many times the reloader has looked at the files so far (each check fingerprints them once)."""
    checks = 0

    def counted(files: Iterable[str | Path]) -> bytes:
        nonlocal checks
        checks += 1
        return fingerprint(files)

    monkeypatch.setattr("karpenter_policy.webhook.reload.fingerprint", counted)
    return lambda: checks


def test_policies_reload_when_their_files_change(
    policies: tuple[Webhook, Path], cert_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, directory = policies
    checks = counting_checks(monkeypatch)
    client = Client(server.port, cert_dir / "ca.crt")
    assert tolerated(client) == ["nvidia.com/gpu"]
    assert admitted(client, LINUX_ONLY)

    # A new taint on the provisioner and a Windows AMI for its template: pods tolerate the taint, and a
    # Provisioner that requires Linux on that template is now denied (its nodes would run Windows).
    with between_checks(server):
        write_policies(directory, more_taints=NEW_TAINT, ami_family="Windows2022")
    wait_for(lambda: tolerated(client) == ["nvidia.com/gpu", "example.com/new"])
    assert not admitted(client, LINUX_ONLY)
    wait_for(lambda: reloads(server, "ok") == 1)  # counted just after the new version serves
    wait_for(lambda: len(server.pool) == server.options.workers)  # the old workers are gone, not added to

    # A pinning rule naming a provisioner that does not exist: refused, logged; the last good version serves.
    with caplog.at_level(logging.WARNING, logger="karpenter_policy.webhook.reload"):
        with between_checks(server):
            write_policies(directory, more_taints=NEW_TAINT, ami_family="Windows2022", provisioner="nope")
        wait_for(lambda: reloads(server, "error") == 1)
    assert f"--policies {directory} changed but does not load; keeping the version in use" in caplog.text
    assert "nope" in caplog.text
    assert tolerated(client) == ["nvidia.com/gpu", "example.com/new"]
    assert not admitted(client, LINUX_ONLY)
    seen = checks()
    wait_for(lambda: checks() >= seen + 5)  # five more looks at the same refused version: not refused again
    assert reloads(server, "error") == 1

    # Fixed: the next version loads.
    with between_checks(server):
        write_policies(directory)
    wait_for(lambda: tolerated(client) == ["nvidia.com/gpu"])
    assert admitted(client, LINUX_ONLY)
    wait_for(lambda: reloads(server, "ok") == 2)
    metrics = client.get("/metrics").body.decode()
    assert 'karpenter_policy_webhook_context_reloads_total{result="ok"} 2.0' in metrics
    assert 'karpenter_policy_webhook_context_reloads_total{result="error"} 1.0' in metrics
    client.close()


def mount(configmap: Path, mounted: Path, version: str) -> None:
    """What kubelet does with a ConfigMap volume: the keys in a new hidden directory, `..data` pointing at it
    (swapped atomically), and one symbolic link per key through `..data`."""
    data = yaml.safe_load(configmap.read_text())["data"]
    (mounted / version).mkdir(parents=True)
    for key, value in data.items():
        (mounted / version / key).write_text(value)
    (mounted / "..data_tmp").symlink_to(version)
    os.replace(mounted / "..data_tmp", mounted / "..data")
    for key in data:
        if not (mounted / key).is_symlink():
            (mounted / key).symlink_to(Path("..data") / key)


def compiled_configmap(policies: Path, out: Path) -> Path:
    result = compile_command(CompileFlags(paths=(str(policies),), out=str(out)))
    assert result.exit_code == 0, result
    (configmap,) = [p for p in (out / "manifests").iterdir() if p.name.startswith("configmap")]
    return configmap


def serving_constraints(tmp_path: Path, cert_dir: Path, constraints: Path) -> tuple[WebhookOptions, Path, Path]:
    """The policies of this module under tmp_path/policies and their pinning rule, and the options of a webhook
    serving `constraints` with it, reloading every 0.2 s; (options, policies, pinning file)."""
    sources = tmp_path / "policies"
    write_policies(sources)
    pinning = tmp_path / "pinning.yaml"
    pinning.write_text(PINNING.format(provisioner="gpu"))
    options = WebhookOptions(
        self_signed=str(cert_dir),
        address="127.0.0.1",
        port=0,
        constraints=str(constraints),
        pinning=[str(pinning)],
        reload_interval=0.2,
    )
    return options, sources, pinning


def test_a_mounted_constraint_set_configmap_reloads(tmp_path: Path, cert_dir: Path) -> None:
    mounted = tmp_path / "constraints"
    options, sources, _ = serving_constraints(tmp_path, cert_dir, mounted)
    mount(compiled_configmap(sources, tmp_path / "v1"), mounted, "..v1")
    with serve(options) as server:
        client = Client(server.port, cert_dir / "ca.crt")
        assert tolerated(client) == ["nvidia.com/gpu"]

        write_policies(sources, more_taints=NEW_TAINT)
        mount(compiled_configmap(sources, tmp_path / "v2"), mounted, "..v2")
        wait_for(lambda: tolerated(client) == ["nvidia.com/gpu", "example.com/new"])
        wait_for(lambda: reloads(server, "ok") == 1)  # counted just after the new version serves

        # A set whose content no longer matches the hash its index records: refused, the last good one serves.
        configmap = compiled_configmap(sources, tmp_path / "v3")
        document = yaml.safe_load(configmap.read_text())
        key = next(k for k in document["data"] if k != "index.json")
        document["data"][key] = document["data"][key].replace("example.com/new", "example.com/forged")
        configmap.write_text(yaml.safe_dump(document))
        mount(configmap, mounted, "..v3")
        wait_for(lambda: reloads(server, "error") == 1)
        assert tolerated(client) == ["nvidia.com/gpu", "example.com/new"]
        client.close()


def test_a_constraint_set_compile_would_never_write_is_refused_once_in_one_line(
    tmp_path: Path, cert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    current = tmp_path / "current"  # swapped atomically to each new version, as a deployment tool would
    options, sources, pinning = serving_constraints(tmp_path, cert_dir, current)
    result = compile_command(CompileFlags(paths=(str(sources),), out=str(tmp_path / "v1")))
    assert result.exit_code == 0, result
    current.symlink_to("v1")
    with serve(options) as server:
        client = Client(server.port, cert_dir / "ca.crt")
        assert tolerated(client) == ["nvidia.com/gpu"]

        # hashes fixed after the edit: only the check of the content stands in its way
        tamper_directory(tmp_path / "v1", "gpu", lambda d: d.__setitem__("taints", "x"), copy_to=tmp_path / "v2")
        with caplog.at_level(logging.WARNING, logger="karpenter_policy.webhook"):
            (tmp_path / "next").symlink_to("v2")
            os.replace(tmp_path / "next", current)
            wait_for(lambda: reloads(server, "error") == 1)
            assert [server.reloader.check() for _ in range(3)] == [False] * 3  # what every later poll does
        records = [r for r in caplog.records if r.name.startswith("karpenter_policy.webhook")]
        assert len(records) == 1, [r.getMessage() for r in records]
        message = records[0].getMessage()
        assert message.startswith(f"--constraints {current}, --pinning {pinning} changed but does not load; ")
        assert f"{current / 'constraintsets' / 'gpu.json'}: taints must be a list, not string" in message
        assert "\n" not in message and records[0].exc_info is None
        assert reloads(server, "error") == 1
        assert tolerated(client) == ["nvidia.com/gpu"]
        client.close()
