"""The `karpenter-policy` command as a user runs it: exit codes, default paths, flags, what it imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_validate_defaults_to_the_policy_repo() -> None:
    result = run("validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith(": 0 errors, 0 warnings")
    assert "Provisioner" in result.stdout and result.stderr == ""


def test_missing_path_cannot_run(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "nope"), "--output", "json")
    assert result.returncode == 2
    finding = json.loads(result.stdout)["findings"][0]
    assert finding["rule"] == "parse-error" and "no such file or directory" in finding["message"]


def test_bad_flag_is_a_usage_error() -> None:
    result = run("validate", "--output", "yaml")
    assert result.returncode == 2
    assert "Invalid value for '--output'" in result.stderr and "Traceback" not in result.stderr


def _write(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "p.yaml"
    file.write_text(text)
    return file


WARNING_ONLY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: zoned
spec:
  requirements:
    - key: failure-domain.beta.kubernetes.io/zone
      operator: In
      values: [us-east-1a]
  provider:
    subnetSelector: {karpenter.sh/discovery: demo}
    securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def test_warnings_fail_only_with_fail_on_warn(tmp_path: Path) -> None:
    file = _write(tmp_path, WARNING_ONLY)
    assert run("validate", str(file)).returncode == 0
    strict = run("validate", str(file), "--fail-on-warn")
    assert strict.returncode == 1
    assert f"{file}:7:12: warning: Provisioner/zoned: label failure-domain.beta.kubernetes.io/zone" in strict.stdout


def test_errors_exit_1_and_point_at_the_line(tmp_path: Path) -> None:
    file = _write(tmp_path, WARNING_ONLY.replace("operator: In", "operator: Within"))
    result = run("validate", str(file), "--output", "json")
    assert result.returncode == 1
    errors = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert [(f["rule"], f["line"], f["column"]) for f in errors] == [("invalid-requirement", 8, 17)]


def test_validate_does_not_load_cloud_cluster_or_solver_clients() -> None:
    code = (
        "import sys; from karpenter_policy.policy.validate import validate_paths;"
        "r = validate_paths(['policies']); assert r.errors == 0;"
        "print(sorted(m for m in ('kubernetes', 'boto3', 'z3', 'ruamel') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version(flag: str) -> None:
    result = run(flag)
    assert result.returncode == 0 and result.stdout
