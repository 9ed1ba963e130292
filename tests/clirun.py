"""The real command line in a child process, as a user runs it: `python -m karpenter_policy.cli ARGS`, its output
captured as text. The tests that check what a user sees (exit status, stdout, stderr) run it through here."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A bound on one command, so a hang fails its test instead of the run (every command here ends in seconds).
TIMEOUT = 300


def run_cli(
    *args: str | os.PathLike[str],
    cwd: Path | str = ROOT,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Run `karpenter-policy ARGS` from `cwd` with this checkout first on the import path (so a `cwd` outside it runs
    the same code), `stdin` as its input, and `env` (when given) as its whole environment besides that path."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *map(str, args)],
        cwd=cwd, input=stdin, env=base, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
