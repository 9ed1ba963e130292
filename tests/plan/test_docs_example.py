"""docs/plan.md's worked example is what the command prints: its fenced session is run and compared."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_worked_example_prints_what_the_page_shows() -> None:
    page = (ROOT / "docs" / "plan.md").read_text(encoding="utf-8")
    session = re.search(r"```\n(\$ karpenter-policy plan .*?)```", page, re.DOTALL)
    assert session is not None
    command, rest = session.group(1).split("\n", 1)
    shown, code = rest.split("$ echo $?\n")
    args = shlex.split(command.removeprefix("$ karpenter-policy "))

    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)

    assert (done.stdout, done.returncode) == (shown, int(code))
