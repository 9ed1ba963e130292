"""benchmarks/soak.py refuses arguments that would lose or hang something, before it simulates anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def soak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("args", "message"), [
    (["--report", "benchmarks/.work/soak/ttl/report.html"], "inside"),  # a directory each run rewrites
    (["--report", "examples/workloads/apps/inflate.yaml"], "it is the input"),  # its manifest
    (["--report", "examples/workloads/policies/report.html"], "inside the input directory"),  # its policies
    (["--hours", "inf"], "--hours"),
    (["--hours", "nan"], "--hours"),
    (["--hours", "1e99999999"], "--hours"),
    (["--spot-price-ratio", "nan"], "--spot-price-ratio"),
])
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    before = {p: p.read_bytes() for p in sorted((ROOT / "examples" / "workloads").rglob("*")) if p.is_file()}
    result = soak(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr
    after = {p: p.read_bytes() for p in sorted((ROOT / "examples" / "workloads").rglob("*")) if p.is_file()}
    assert after == before, "nothing written among the inputs"
