"""`karpenter-policy pin` with Karpenter v1 NodePools, through the CLI on examples/v1/pinning: a rule naming a
`nodePool` pins `karpenter.sh/nodepool` (not `karpenter.sh/provisioner-name`, which no v1 node carries) and
tolerates the NodePool's taints; the pinned workload is proven to fit the NodePool; a NodePool the policies do
not define, or a NodePool named as a provisioner, is a `pinning-conflict` that says what to write; `check
--workloads` reports the workload that lacks the pins."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "pinning"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=180, check=False)


def copy(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "pinning")
    return tmp_path / "pinning"


def test_a_rule_naming_a_nodepool_pins_its_v1_label_and_taint(tmp_path: Path) -> None:
    example = copy(tmp_path)
    apps, policies = example / "apps", example / "policies"
    original = (apps / "report.yaml").read_text()
    done = run("pin", str(apps), "--policies", str(policies), "--write")
    assert done.returncode == 0, done.stdout + done.stderr
    pinned = (apps / "report.yaml").read_text()
    assert pinned.startswith(original)  # every line no rule changes stays byte-identical
    spec = yaml.safe_load(pinned)["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "batch"}
    assert spec["tolerations"] == [{"key": "example.com/batch", "operator": "Exists", "effect": "NoSchedule"}]
    again = run("pin", str(apps), "--policies", str(policies))
    assert again.returncode == 0 and again.stdout == ""


def test_check_workloads_reports_the_missing_v1_pin_then_none(tmp_path: Path) -> None:
    example = copy(tmp_path)
    apps, policies = example / "apps", example / "policies"
    before = run("check", str(policies), "--workloads", str(apps))
    assert "karpenter.sh/nodepool" in before.stdout and "[pinning-" in before.stdout
    assert run("pin", str(apps), "--policies", str(policies), "--write").returncode == 0
    after = run("check", str(policies), "--workloads", str(apps))
    assert after.returncode == 0, after.stdout
    assert "[pinning-" not in after.stdout


def test_a_pinned_workload_no_node_of_the_nodepool_can_hold_is_refused(tmp_path: Path) -> None:
    example = copy(tmp_path)
    report = example / "apps" / "report.yaml"
    report.write_text(report.read_text().replace('{cpu: "2", memory: 4Gi}', '{cpu: "2000", memory: 4Gi}'))
    done = run("pin", str(example / "apps"), "--policies", str(example / "policies"), "--write")
    assert done.returncode == 1
    assert "after pinning" in done.stderr and "[workload-unschedulable]" in done.stderr
    assert "NodePool/batch: no instance type in us-east-1 has 2000 vCPU" in done.stderr
    assert "nodeSelector" not in report.read_text()  # nothing written


def test_a_nodepool_the_policies_do_not_define_or_named_as_a_provisioner_is_a_conflict(tmp_path: Path) -> None:
    example = copy(tmp_path)
    pinning = example / "policies" / "pinning.yaml"
    text = pinning.read_text()
    pinning.write_text(text.replace("nodePool: batch", "nodePool: nightly"))
    unknown = run("pin", str(example / "apps"), "--policies", str(example / "policies"))
    assert unknown.returncode == 1
    assert (
        "PinningPolicy/batch-jobs rule reports-on-batch names NodePool 'nightly', which the policies do not define "
        "(known: batch, default) [pinning-conflict]"
    ) in unknown.stderr
    pinning.write_text(text.replace("nodePool: batch", "provisioner: batch"))
    as_provisioner = run("pin", str(example / "apps"), "--policies", str(example / "policies"))
    assert as_provisioner.returncode == 1
    assert (
        "names provisioner 'batch', which the policies do not define (known: none); batch is a NodePool: name it "
        "with `nodePool` (v1 labels its nodes karpenter.sh/nodepool) [pinning-conflict]"
    ) in as_provisioner.stderr


def test_a_rule_naming_a_provisioner_and_a_nodepool_is_invalid(tmp_path: Path) -> None:
    example = copy(tmp_path)
    pinning = example / "policies" / "pinning.yaml"
    pinning.write_text(pinning.read_text().replace("nodePool: batch", "nodePool: batch\n      provisioner: default"))
    done = run("validate", str(example / "policies"))
    assert done.returncode == 1
    assert "the rule names a provisioner and a nodePool: a pod lands on one of them; give one" in done.stdout
