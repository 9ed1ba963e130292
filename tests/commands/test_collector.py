"""The cyclic garbage collector's settings per command (cli.py `_collect_for_batch`): a one-shot command
freezes what it imported and collects its young generation less often (a third of `check`'s CPU on 2,000
Provisioners went to rescanning the files' node trees), with the same output; a command that serves until stopped
keeps Python's defaults, whose pauses are short.

Each test runs the real CLI in a subprocess, so the test process's own collector is left as it is.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_policy.cli import BATCH_GC_THRESHOLD

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, tuned: bool = True) -> subprocess.CompletedProcess[str]:
    """`karpenter-policy ARGS` in a subprocess that prints the collector's settings to stderr when it ends;
    with `tuned=False`, `_collect_for_batch` does nothing (the defaults, as before it)."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('collector:', gc.get_threshold()[0], gc.get_freeze_count() > 0, "
        "file=sys.stderr))\n"
        "import karpenter_policy.cli as cli\n"
        + ("" if tuned else "cli._collect_for_batch = lambda: None\n")
        + f"cli.main({list(args)!r})\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)


def test_a_one_shot_command_freezes_its_imports_and_collects_less_often() -> None:
    done = run_cli("validate", "policies/", "--output", "json")

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"collector: {BATCH_GC_THRESHOLD} True" in done.stderr


@pytest.mark.parametrize("command", ["webhook", "reconcile", "simulate"])
def test_a_serving_command_keeps_the_default_collector(command: str) -> None:
    done = run_cli(command, "--no-such-flag")

    assert done.returncode == 2, done.stdout + done.stderr  # a usage error, after the group chose the settings
    assert "collector: 700 False" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("check", "examples/check/negative", "--output", "json"),
        ("check", "examples/workloads/policies", "--workloads", "examples/workloads/apps", "--output", "json"),
        ("compile", "policies/", "-o", "-"),
        ("fmt", "examples/positive"),
    ],
    ids=["check", "check-workloads", "compile", "fmt"],
)
def test_the_output_is_the_same_with_the_default_collector(args: tuple[str, ...]) -> None:
    tuned, default = run_cli(*args), run_cli(*args, tuned=False)

    assert (tuned.returncode, tuned.stdout) == (default.returncode, default.stdout)
    assert tuned.stdout  # each of them reports something
