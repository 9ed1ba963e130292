"""Run git on one repository, found without git, with nothing in the repository or its tree able to make it run a
command.

A policy tree is untrusted data: a pull request's checkout, or Argo CD's copy of a repository. Left to itself, git
finds "its" repository by walking up from the working directory and takes any directory holding `HEAD`,
`objects/` and `refs/` for one; that directory's `config` can name commands git then runs (`core.fsmonitor` on
every index refresh, a promisor remote's `uploadpack` on a missing object, hooks). Such a folder is ordinary
files, so it can be committed into the tree. And the repository's own configuration is no better: whoever
prepared the clone (a CI cache, an unpacked archive, Argo CD's repo-server volume) may have set a filter driver
that `.gitattributes` of the tree selects (`filter.<name>.clean` ran through `git describe --dirty`, issue #19),
a textconv or external diff, a pager, an ssh command, a credential helper, or `include.path` pulling more of them
in. Hence:

* The repository is found here, in Python: the nearest directory at or above the path given that holds a `.git`
  entry — a directory with a `HEAD` file or a `gitdir:` file (worktrees, submodules). git never commits a path
  named `.git`, so such an entry is made by a clone, not by the tree's content; bare-repository-shaped folders are
  never taken. The walk stops at a file-system boundary, as git's does.
* git runs as `git -C <root>` with `GIT_CEILING_DIRECTORIES=<root's parent>`: it looks at that root and nowhere
  else, and applies its own ownership check there (`safe.directory`: a repository owned by another user is
  refused). The user's own git configuration (global, system) is read — that is where `safe.directory` lives;
  the environment's other `GIT_*` variables (GIT_DIR, GIT_WORK_TREE, GIT_CONFIG_PARAMETERS, ...) are not passed on.
* Only commands that read refs and the object database run — `rev-parse`, `describe` without `--dirty`,
  `ls-tree`, `cat-file --batch` (no `--filters`, no `--textconv`): none of them refreshes the index or reads a
  file of the work tree, so no attribute can select a filter, a textconv or a diff driver, and no hook fires.
  Whether the work tree differs from HEAD is decided in Python (`revision`), never by git.
* What could still run a command is closed off for those commands too, by options and environment that beat
  every configuration file (the repository's and what it includes): `--no-pager` (`core.pager`, `pager.<cmd>`),
  `-c core.fsmonitor=false`, `-c core.hooksPath=/dev/null`, `-c core.attributesFile=/dev/null` and
  `GIT_ATTR_NOSYSTEM=1` (no attributes but the tree's, which select nothing here); no transport at all:
  `GIT_ALLOW_PROTOCOL` empty (beats `protocol.<name>.allow=always` in the repository, which `-c protocol.allow=never`
  alone does not), `GIT_NO_LAZY_FETCH=1` (no fetch from a promisor remote, so no `uploadpack`, `core.sshCommand`,
  `core.gitProxy`, remote helper, credential helper or `core.askPass`), `GIT_TERMINAL_PROMPT=0`;
  `-c safe.bareRepository=explicit`; `--no-optional-locks` (nothing written). Only objects already in the
  repository are read. tests/checks/source/test_git_isolation.py plants each of these and checks that nothing runs.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

#: What every git call gets, before its own arguments (each `-c` beats any configuration file).
SAFE_OPTIONS = (
    "--no-pager",
    "--no-optional-locks",
    "-c", "core.fsmonitor=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", f"core.attributesFile={os.devnull}",
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
        GIT_ALLOW_PROTOCOL="",  # no transport, whatever protocol.<name>.allow the repository sets
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_ATTR_NOSYSTEM="1",
        GIT_LITERAL_PATHSPECS="1",  # a path is a path, not a pattern
        LC_ALL="C",
    )
    return env


@dataclass(frozen=True, slots=True)
class Repository:
    """A git work tree, by the real path of its top directory."""

    root: str

    def _command(self, args: Sequence[str]) -> list[str]:
        return ["git", "-C", self.root, *SAFE_OPTIONS, *args]

    def git(self, args: Sequence[str], stdin: bytes | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> bytes:
        """Run `git <args>` on this repository only (see the module docstring); its stdout. Raises GitError."""
        command = self._command(args)
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

    def is_shallow(self) -> bool:
        """Whether this clone's history is cut short (`git clone --depth`, actions/checkout's default depth of 1),
        so that a revision it names may simply not have been fetched; False when git cannot tell."""
        try:
            return self.git(["rev-parse", "--is-shallow-repository"]).strip() == b"true"
        except GitError:
            return False

    def describe(self) -> str:
        """`git describe --always` of HEAD: the nearest tag and distance, else the abbreviated commit (refs and
        commits only: `--dirty` would refresh the index, and run the filters the tree's attributes select); raises
        GitError (no commit yet, git refused the repository)."""
        return self.git(["describe", "--always"]).decode("utf-8", "replace").strip()

    def blobs(self, object_ids: Sequence[str], timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Iterator[bytes]:
        """The content of each blob of `object_ids`, in order, from one `git cat-file --batch` asked one object at
        a time: only one blob is held at once (the caller checks sizes first: `git ls-tree -l`). Raises GitError
        (a missing object, git failed or took longer than `timeout` in all)."""
        if not object_ids:
            return
        with tempfile.TemporaryFile() as errors:
            try:
                process = subprocess.Popen(
                    self._command(["cat-file", "--batch"]),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    env=_environment(self.root),
                )
            except FileNotFoundError:
                raise GitError("git is not installed") from None
            except OSError as error:
                raise GitError(f"cannot run git: {error.strerror or error}") from None
            timer = threading.Timer(timeout, process.kill)
            timer.start()
            try:
                assert process.stdin is not None and process.stdout is not None
                for object_id in object_ids:
                    yield _next_blob(process.stdin, process.stdout, object_id, errors, timer, timeout)
            finally:
                timer.cancel()
                process.kill()
                process.wait()
                for stream in (process.stdin, process.stdout):
                    if stream is not None:
                        stream.close()


def missing_object(object_id: str, path: str = "") -> str:
    """The message for an object the repository does not have (nothing is fetched: see the module docstring)."""
    of = f" ({path})" if path else ""
    return f"object {object_id}{of} is not in the repository (a partial clone? fetch it first)"


def _next_blob(
    stdin: IO[bytes], stdout: IO[bytes], object_id: str, errors: IO[bytes], timer: threading.Timer, timeout: float
) -> bytes:
    """Ask the running `cat-file --batch` for one object and read its answer."""
    try:
        stdin.write(f"{object_id}\n".encode("ascii"))
        stdin.flush()
    except OSError:
        pass  # git is gone: its answer (none) says why
    header = stdout.readline()
    parts = header.split()
    if len(parts) == 2 and parts[1] == b"missing":
        raise GitError(missing_object(object_id))
    if len(parts) != 3 or parts[1] != b"blob" or not parts[2].isdigit():
        if not timer.is_alive():
            raise GitError(f"git cat-file did not finish within {timeout:g} s")
        errors.seek(0)
        lines = errors.read().decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git cat-file: {lines[-1] if lines else f'unexpected answer {header[:80]!r}'}")
    size = int(parts[2])
    content = stdout.read(size)
    if len(content) != size or stdout.read(1) != b"\n":
        raise GitError(f"git cat-file: the answer for {object_id} ended early")
    return content
