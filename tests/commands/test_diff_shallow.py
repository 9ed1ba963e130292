"""`diff BASE HEAD` in a shallow clone (actions/checkout fetches one commit unless told `fetch-depth: 0`): BASE is
not in the clone, and the message says how to fetch it; a full clone's unknown revision gets no such advice."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **IDENTITY}, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()


def diff(base: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "diff", base, "HEAD", "policies/"], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def upstream(path: Path) -> str:
    """A repository of two commits; the first one's id (the BASE a pull request compares with)."""
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    shutil.copytree(ROOT / "policies", path / "policies")
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "policies", cwd=path)
    first = git("rev-parse", "HEAD", cwd=path)
    (path / "README").write_text("policies\n")
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "a readme", cwd=path)
    return first


def test_an_unknown_base_in_a_shallow_clone_says_fetch_depth_0(tmp_path: Path) -> None:
    base = upstream(tmp_path / "upstream")
    git("clone", "-q", "--depth", "1", f"file://{tmp_path / 'upstream'}", "clone", cwd=tmp_path)

    done = diff(base, tmp_path / "clone")

    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert f"'{base}' is neither a directory nor a git revision" in done.stderr
    assert "this clone is shallow" in done.stderr and "set fetch-depth: 0 on actions/checkout" in done.stderr


def test_the_same_base_in_a_full_clone_is_compared(tmp_path: Path) -> None:
    base = upstream(tmp_path / "upstream")
    git("clone", "-q", f"file://{tmp_path / 'upstream'}", "clone", cwd=tmp_path)

    assert diff(base, tmp_path / "clone").returncode == 0
    unknown = diff("no-such-branch", tmp_path / "clone")
    assert unknown.returncode == 2 and "shallow" not in unknown.stderr and "fetch-depth" not in unknown.stderr
