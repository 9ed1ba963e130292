"""Running an example GitHub workflow's steps as GitHub does, for the tests of examples/ci: the workflow file read,
its steps by name, a `run:` step run with GitHub's default shell on Linux (bash -e) and the workflow's and the
step's env (the `${{ }}` expressions given by the test), and git with an identity."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

VENV_BIN = Path(sys.executable).parent
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **IDENTITY}, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()


class Workflow:
    """One workflow file of examples/ci, with a single job."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def workflow(self) -> dict[str, Any]:
        loaded = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        assert isinstance(loaded, dict)
        return loaded

    def steps(self) -> dict[str, dict[str, Any]]:
        (job,) = self.workflow()["jobs"].values()
        return {step.get("name", step.get("uses", "")): step for step in job["steps"]}

    def run_step(self, name: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
        step = self.steps()[name]
        environment = {
            **os.environ,
            **self.workflow()["env"],
            "PATH": os.pathsep.join([str(VENV_BIN), os.environ["PATH"]]),
            **{k: v for k, v in step.get("env", {}).items() if "${{" not in v},
            **env,
        }
        return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", step["run"]], cwd=cwd, env=environment,
                              capture_output=True, text=True, timeout=300, check=False)
