"""`plan --redact` through the real CLI: every output (text, JSON, markdown, and what it writes to stderr) names the
snapshot's nodes, pods, namespaces and workloads by stable hashes and holds none of its env, images or foreign
annotations; the snapshot is never written to the working directory; the plan itself is the unredacted one's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from karpenter_policy.commands.plan.redact import hashed
from tests.plan.snapshots import node, pdb, pod, policies, provisioner, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

ROOT = Path(__file__).resolve().parents[2]
START = "2026-11-30T09:00:00Z"
SECRETS = ("acme-prod", "payments", "ip-10-9-8-7.acme.internal", "ip-10-9-8-8.acme.internal", "AKIAEXAMPLESECRET",
           "registry.acme.example", "alice@acme.example", "acme-config", "hunter2", "i-0abc123", "claim-acme")


def _secret_pod(name: str, node_name: str) -> dict[str, Any]:
    made = pod(name, node_name, "payments", namespace="acme-prod",
               annotations={"acme.example/owner": "alice@acme.example"})
    made["spec"]["containers"][0].update(
        image="registry.acme.example/payments:1", env=[{"name": "AWS_KEY", "value": "AKIAEXAMPLESECRET"}],
        args=["--password=hunter2"])
    return made


def snapshot(tmp_path: Path) -> str:
    drifting, kept = "ip-10-9-8-7.acme.internal", "ip-10-9-8-8.acme.internal"
    first = node(drifting, annotations={"karpenter.sh/provisioner-hash": "1", "acme.example/team": "hunter2"})
    first["status"] = {"images": [{"names": ["registry.acme.example/node:1"]}], "nodeInfo": {"machineID": "x"}}
    first["spec"] = {"providerID": "aws:///us-east-1a/i-0abc123"}
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "acme-config", "namespace": "acme-prod"},
              "data": {"password": "hunter2"}}
    tmp_path.mkdir(exist_ok=True)
    return write(tmp_path / "snapshot.json", first, node(kept, annotations={}),
                 _secret_pod("payments-7f9-a", drifting), _secret_pod("payments-7f9-b", kept),
                 pdb("payments", "payments", namespace="acme-prod", maxUnavailable=1), config)


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT)})


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_no_output_of_a_redacted_plan_holds_a_name_env_image_or_annotation_of_the_snapshot(tmp_path: Path) -> None:
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))
    file = snapshot(tmp_path / "in")
    work = tmp_path / "work"
    work.mkdir()
    runs = {output: cli(work, base, head, "--snapshot", file, "--start", START, "--output", output, "--redact")
            for output in ("text", "json", "markdown")}

    for output, done in runs.items():
        assert done.returncode == 0, done.stderr
        assert leaks(done.stdout + done.stderr) == [], output
    doc = json.loads(runs["json"].stdout)
    node_name = hashed("node", "ip-10-9-8-7.acme.internal")
    assert [(w["method"], w["nodes"]) for w in doc["waves"]] == [("drift", [node_name])]
    workload = f"{hashed('ns', 'acme-prod')}/Deployment/{hashed('wl', 'payments')}"
    assert {w["workload"] for w in doc["cost"]["workloads"]} == {workload}
    assert doc["waves"][0]["evicted"] == {workload: 1}
    assert f"`{workload}`" in runs["markdown"].stdout and node_name in runs["text"].stdout
    # the ConfigMap's warning names it by hash, not by name
    assert f"ConfigMap {hashed('obj', 'acme-config')}: not read by plan" in "\n".join(doc["notes"])
    # nothing was written where the command ran
    assert [p for p in work.rglob("*")] == []


def test_a_redacted_plan_is_stable_and_the_same_plan_as_the_unredacted_one(tmp_path: Path) -> None:
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))
    file = snapshot(tmp_path / "in")
    args = (base, head, "--snapshot", file, "--start", START, "--output", "json")

    first, second = cli(tmp_path, *args, "--redact").stdout, cli(tmp_path, *args, "--redact").stdout
    plain = json.loads(cli(tmp_path, *args).stdout)

    assert first == second
    redacted = json.loads(first)
    assert [(w["start"], w["seconds"], w["evicted_pods"]) for w in redacted["waves"]] == [
        (w["start"], w["seconds"], w["evicted_pods"]) for w in plain["waves"]]
    assert redacted["cost"]["before_monthly"] == plain["cost"]["before_monthly"]


def test_a_malformed_snapshot_is_refused_without_its_names_or_values(tmp_path: Path) -> None:
    base = policies(tmp_path / "p", provisioner())
    bad = _secret_pod("payments-7f9-a", "ip-10-9-8-7.acme.internal")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"  # a value the plan reads is shown
    file = write(tmp_path / "snapshot.json", node("ip-10-9-8-7.acme.internal"), bad)

    done = cli(tmp_path, base, base, "--snapshot", file, "--start", START, "--redact")

    assert done.returncode == 2 and done.stdout == ""
    assert "cannot be trusted" in done.stderr and "lots" in done.stderr and leaks(done.stderr) == []
    assert hashed("pod", "payments-7f9-a") in done.stderr


def test_v1_nodeclaims_are_redacted_too(tmp_path: Path) -> None:
    base = v1_policies(tmp_path / "base", nodepool())
    head = v1_policies(tmp_path / "head", nodepool(labels="team: platform"))
    name = "ip-10-9-8-7.acme.internal"
    made = claim(name, name="claim-acme")
    made["status"]["providerID"] = "aws:///us-east-1a/i-0abc123"
    its_node = pool_node(name)
    its_node["spec"]["providerID"] = made["status"]["providerID"]  # the pairing survives the hashing
    file = write(tmp_path / "snapshot.json", its_node, made, _secret_pod("payments-7f9-a", name))

    done = cli(tmp_path, base, head, "--snapshot", file, "--start", START, "--output", "json", "--redact")

    assert done.returncode == 0, done.stderr
    assert leaks(done.stdout + done.stderr) == []
    doc = json.loads(done.stdout)
    assert [w["nodes"] for w in doc["waves"]] == [[hashed("node", name)]]
    assert re.fullmatch(r"node-[0-9a-f]{10}", doc["nodes"][0]["name"])
