"""Helpers of the deploy tests: this working tree as a user gets it.

`repository_copy` makes what a user clones: the tracked and new (not ignored) files of this working tree committed
in a fresh repository — so a test sees uncommitted changes too — optionally tagged as a release; `tree_copy` the
same files without git metadata (a Docker build context).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
