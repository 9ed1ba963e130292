"""docs/plan.md's worked examples (Karpenter v0.31 Provisioners, examples/plan/; Karpenter v1 NodePools,
examples/plan/v1/; capacity reservations with a saved answer, examples/plan/v1/reservations/) are what the command
prints: each fenced session is run and compared."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = re.findall(r"```\n(\$ karpenter-policy plan .*?)```", (ROOT / "docs" / "plan.md").read_text("utf-8"),
                      re.DOTALL)


def test_the_page_has_every_worked_example() -> None:
    assert [s.split("\n", 1)[0].split()[3] for s in SESSIONS] == [
        "examples/plan/base", "examples/plan/v1/base", "examples/plan/v1/reservations/base"]


@pytest.mark.parametrize("session", SESSIONS, ids=["v1alpha5", "v1", "v1-reservations"])
def test_the_worked_example_prints_what_the_page_shows(session: str) -> None:
    command, rest = session.split("\n", 1)
    shown, code = rest.split("$ echo $?\n")
    args = shlex.split(command.removeprefix("$ karpenter-policy "))

    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)

    assert (done.stdout, done.returncode) == (shown, int(code))
