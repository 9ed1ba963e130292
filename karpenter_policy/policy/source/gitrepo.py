"""Run git on one repository, found without git, with nothing in the checked-out tree able to make it run a command.

A policy tree is untrusted data: a pull request's checkout, or Argo CD's copy of a repository. Left to itself, git
finds "its" repository by walking up from the working directory and takes any directory holding `HEAD`,
`objects/` and `refs/` for one; that directory's `config` can name commands git then runs (`core.fsmonitor` on
every index refresh, a promisor remote's `uploadpack` on a missing object, hooks). Such a folder is ordinary
files, so it can be committed into the tree. Hence:

* The repository is found here, in Python: the nearest directory at or above the path given that holds a `.git`
  entry — a directory with a `HEAD` file or a `gitdir:` file (worktrees, submodules). git never commits a path
  named `.git`, so such an entry is made by a clone, not by the tree's content; bare-repository-shaped folders are
  never taken. The walk stops at a file-system boundary, as git's does.
* git runs as `git -C <root>` with `GIT_CEILING_DIRECTORIES=<root's parent>`: it looks at that root and nowhere
  else, and applies its own ownership check there (`safe.directory`: a repository owned by another user is
  refused). The user's own git configuration (global, system) is read — that is where `safe.directory` lives;
  the environment's other `GIT_*` variables (GIT_DIR, GIT_WORK_TREE, GIT_CONFIG_PARAMETERS, ...) are not passed on.
* `-c` overrides, which win over every configuration file, turn off what could run a command or reach the
  network: `core.fsmonitor=false`, `core.hooksPath=/dev/null`, `protocol.allow=never`,
  `safe.bareRepository=explicit`; `GIT_NO_LAZY_FETCH=1`, `GIT_TERMINAL_PROMPT=0`. Only objects already in the
  repository are read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

#: What every git call gets, before its own arguments (each `-c` beats any configuration file).
SAFE_OPTIONS = (
    "-c", "core.fsmonitor=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", "protocol.allow=never",
    "-c", "safe.bareRepository=explicit",
)  # fmt: skip
#: Environment variables of git's that select the user's own configuration files: passed on; no other GIT_*.
_KEPT_GIT_VARIABLES = frozenset({"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM"})
DEFAULT_TIMEOUT_SECONDS = 60.0
_GITFILE_PREFIX = b"gitdir:"


class GitError(Exception):
    """git is missing, timed out, or failed (the message is its last line of stderr)."""


def _is_git_entry(dotgit: str) -> bool:
    """A `.git` directory with a HEAD, or a `.git` file pointing to one (`gitdir: ...`)."""
    try:
        if os.path.isdir(dotgit):
            return os.path.isfile(os.path.join(dotgit, "HEAD"))
        if os.path.isfile(dotgit):
            with open(dotgit, "rb") as handle:
                return handle.read(len(_GITFILE_PREFIX)) == _GITFILE_PREFIX
    except OSError:
        return False
    return False


def find_repository(path: str) -> Repository | None:
    """The repository holding `path` (symbolic links resolved): the nearest directory at or above it with a `.git`
    entry, on the same file system; None when there is none."""
    current = os.path.realpath(path)
    if not os.path.isdir(current):
        current = os.path.dirname(current)
    try:
        device = os.stat(current).st_dev
    except OSError:
        return None
    while True:
        if _is_git_entry(os.path.join(current, ".git")):
            return Repository(current)
        parent = os.path.dirname(current)
        try:
            if parent == current or os.stat(parent).st_dev != device:
                return None
        except OSError:
            return None
        current = parent


def _environment(root: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARIABLES}
    env.update(
        GIT_CEILING_DIRECTORIES=os.path.dirname(root),
        GIT_NO_LAZY_FETCH="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",  # describe --dirty would otherwise refresh (write) the index
        LC_ALL="C",
    )
    return env


@dataclass(frozen=True, slots=True)
class Repository:
    """A git work tree, by the real path of its top directory."""

    root: str

    def git(self, args: Sequence[str], stdin: bytes | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> bytes:
        """Run `git <args>` on this repository only (see the module docstring); its stdout. Raises GitError."""
        command = ["git", "-C", self.root, *SAFE_OPTIONS, *args]
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                timeout=timeout,
                env=_environment(self.root),
                stdin=None if stdin is not None else subprocess.DEVNULL,
                check=False,
            )
        except FileNotFoundError:
            raise GitError("git is not installed") from None
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} did not finish within {timeout:g} s") from None
        except OSError as error:
            raise GitError(f"cannot run git: {error.strerror or error}") from None
        if done.returncode != 0:
            lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GitError(f"git {args[0]}: {lines[-1] if lines else f'exit code {done.returncode}'}")
        return done.stdout

    def prefix_of(self, path: str) -> str | None:
        """`path` (symbolic links resolved) relative to the root, with forward slashes ("" for the root itself);
        None when it is outside the work tree."""
        relative = os.path.relpath(os.path.realpath(path), self.root)
        if relative == os.curdir:
            return ""
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            return None
        return relative.replace(os.sep, "/")

    def describe(self) -> str:
        """`git describe --always --dirty`: the nearest tag and distance, else the abbreviated commit; raises
        GitError (no commit yet, git refused the repository)."""
        return self.git(["describe", "--always", "--dirty"]).decode("utf-8", "replace").strip()
