"""Run the real CLI as a user that file permissions apply to.

The tests run as root here, and root reads and writes whatever the mode bits say (a mode-000 directory is listed,
a read-only directory written). To test what a user sees, the CLI is started as `nobody` (uid 65534) in a scratch
directory that user can reach; when the tests already run as an ordinary user, as that user. The interpreter is
the tests' own if that user may run it, else another Python of the same version (a virtualenv's interpreter can
live in root's home), with this checkout and the virtualenv's packages on its path. Only when no interpreter
works that way is the test skipped.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[1]


_PATHS = sysconfig.get_paths()
_PYTHONPATH = os.pathsep.join(dict.fromkeys([str(ROOT), _PATHS["purelib"], _PATHS["platlib"]]))


@dataclass(frozen=True)
class Unprivileged:
    """A scratch directory and a way to run `karpenter-policy` as a user without privileges."""

    directory: Path
    uid: int | None  # None: the tests' own (ordinary) user
    python: str = sys.executable

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        user = {} if self.uid is None else {"user": self.uid, "group": self.uid, "extra_groups": []}
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            [self.python, "-m", "karpenter_policy.cli", *args],
            cwd=cwd or self.directory,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**os.environ, "PYTHONPATH": _PYTHONPATH, "HOME": str(self.directory)},
            **user,
        )

    def give(self, path: Path) -> None:
        """Make `path` (and what is below it) the user's own."""
        if self.uid is None:
            return
        for item in [path, *path.rglob("*")]:
            os.lchown(item, self.uid, self.uid)


def _runnable(directory: Path) -> Unprivileged:
    """The tests' interpreter, else the system's of the same version, if `nobody` can run the CLI with it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    problems = []
    for python in dict.fromkeys([sys.executable, shutil.which(version) or "", f"/usr/bin/{version}"]):
        if not python:
            continue
        area = Unprivileged(directory, NOBODY, python)
        try:
            probe = area.run("--version")
        except OSError as error:
            problems.append(f"{python}: {error}")
            continue
        if probe.returncode == 0:
            return area
        problems.append(f"{python}: {probe.stderr.strip()[-200:]}")
    pytest.skip(f"cannot run the CLI as uid {NOBODY}: {'; '.join(problems)}")


def _restore_access(directory: Path) -> None:
    for root, dirs, _ in os.walk(directory):
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, stat.S_IRWXU)


@pytest.fixture
def unprivileged() -> Iterator[Unprivileged]:
    directory = Path(tempfile.mkdtemp(prefix="karpenter-policy-unprivileged-"))
    try:
        if os.geteuid() == 0:
            directory.chmod(0o755)  # the user must reach it; its content decides the rest
            area = _runnable(directory)
        else:
            area = Unprivileged(directory, None)
        yield area
    finally:
        os.chmod(directory, stat.S_IRWXU)
        _restore_access(directory)
        shutil.rmtree(directory, ignore_errors=True)
