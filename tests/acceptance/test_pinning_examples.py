"""Acceptance: `check --workloads`, `pin` and `diff` as installed, run as subprocesses on examples/pinning/.

The EMR on EKS case (seeds/004): a PinningPolicy puts Spark drivers on on-demand and executors on spot capacity,
both on the kspark provisioner (`app: kspark`). The pod templates as shipped violate it; `pin --write` fixes them
(on a copy), after which `check` passes and places drivers on on-demand, executors on spot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pinning"


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_check_reports_the_unpinned_spark_templates() -> None:
    result = cli("check", "examples/pinning/policies", "--workloads", "examples/pinning/apps", "--output", "json")
    assert result.returncode == 1 and result.stderr == ""
    findings = json.loads(result.stdout)["findings"]
    assert sorted((f["file"], f["line"], f["rule"]) for f in findings) == [
        ("examples/pinning/apps/karpenter-driver-pod-template.yaml", 6, "pinning-violation"),
        ("examples/pinning/apps/karpenter-driver-pod-template.yaml", 6, "pinning-violation"),
        ("examples/pinning/apps/karpenter-executor-pod-template.yaml", 7, "pinning-violation"),
        ("examples/pinning/apps/karpenter-executor-pod-template.yaml", 9, "pinning-violation"),
    ]


@pytest.mark.slow
def test_pin_then_check(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "pinning")
    work = tmp_path / "pinning"
    originals = {p.name: p.read_bytes() for p in (work / "apps").iterdir()}

    dry = cli("pin", "apps/", cwd=work)
    assert dry.returncode == 1
    assert dry.stdout.count("--- a/apps/") == 2
    assert {p.name: p.read_bytes() for p in (work / "apps").iterdir()} == originals

    written = cli("pin", "apps/", "--write", cwd=work)
    assert written.returncode == 0, written.stderr
    assert "pinned 2 workloads in 2 files" in written.stderr
    for name, before in originals.items():  # only additions, and the one value the rule changes
        after = (work / "apps" / name).read_text()
        kept = [line for line in before.decode().splitlines() if "'on-demand'   # <- pin rewrites" not in line]
        assert all(line in after.splitlines() for line in kept), name

    checked = cli("check", "policies", "--workloads", "apps", "--output", "json", cwd=work)
    assert checked.returncode == 0, checked.stdout
    placed = {w["object"]: w["launch"]["capacity_type"] for w in json.loads(checked.stdout)["workloads"]}
    assert placed == {"Pod/karpenter-driver-pod-template": "on-demand", "Pod/karpenter-executor-pod-template": "spot"}

    assert cli("pin", "apps/", cwd=work).returncode == 0  # nothing left to pin


def test_pinning_that_no_provisioner_can_honour_is_refused(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "pinning")
    work = tmp_path / "pinning"
    policy = work / "policies" / "spark-pinning.yaml"
    policy.write_text(policy.read_text().replace("karpenter.sh/capacity-type: spot", "kubernetes.io/arch: arm64"))
    before = (work / "apps" / "karpenter-executor-pod-template.yaml").read_bytes()
    result = cli("pin", "apps/", "--write", cwd=work)
    assert result.returncode == 1
    assert "Pod/karpenter-executor-pod-template: after pinning, no provisioner can launch a node" in result.stderr
    assert "kubernetes.io/arch In [arm64] not in [amd64]" in result.stderr
    assert "nothing written" in result.stderr
    assert (work / "apps" / "karpenter-executor-pod-template.yaml").read_bytes() == before


def test_diff_of_the_example_directories(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE / "policies", tmp_path / "new")
    provisioner = tmp_path / "new" / "kspark-provisioner.yaml"
    provisioner.write_text(
        provisioner.read_text().replace('values: ["us-east-1a"]', 'values: ["us-east-1a", "us-east-1b"]')
    )
    result = cli("diff", "examples/pinning/policies", str(tmp_path / "new"), "--output", "markdown")
    assert result.returncode == 0, result.stderr
    assert "| `emr-eks-workshop-kspark` | zones | +us-east-1b; e.g." in result.stdout
    assert "unconfirmed" not in result.stdout and "solver" not in result.stdout
