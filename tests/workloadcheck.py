"""`karpenter-policy check POLICIES --workloads APPS --output json` through the real CLI, on files a test writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def check_workloads(tmp_path: Path, policies: str, apps: str) -> tuple[int, dict[str, Any]]:
    """Write `policies` to tmp_path/policies/p.yaml and `apps` to tmp_path/apps/a.yaml, run the check on them, and
    give its exit code (0 or 1: it ran) and JSON report."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "apps").mkdir()
    (tmp_path / "policies" / "p.yaml").write_text(policies)
    (tmp_path / "apps" / "a.yaml").write_text(apps)
    result = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "check", str(tmp_path / "policies"), "--workloads",
         str(tmp_path / "apps"), "--output", "json"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, report


def line_of(tmp_path: Path, text: str) -> int:
    """The line of the workloads file that holds `text` (the first one)."""
    lines = (tmp_path / "apps" / "a.yaml").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line)
