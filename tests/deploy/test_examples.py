"""The examples run as shipped: what they install exists, and what they declare is what the tools accept.

- pre-commit: `pre-commit try-repo` installs the hooks of .pre-commit-hooks.yaml from a clone of this repository
  tagged as the release the example configuration pins, and runs them on a policy repository; the example
  configuration passes `pre-commit validate-config`;
- pip: the workflows' and the Argo CD init container's `karpenter-policy @ git+URL@TAG` builds, from such a
  clone, as the tag's version;
- GitHub workflows (examples/ci and the release workflow): actionlint finds nothing (and does find a mistake);
- the release workflow builds every Dockerfile with the version its build context cannot derive, and packages the
  chart at that version.

The repository's URL is the one thing swapped (for the local clone): nothing here reaches the network but pip
and pre-commit's installs of dependencies from the package index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .support import GIT_IDENTITY, ROOT, git, repository_copy

VENV_BIN = Path(sys.executable).parent
CI = ROOT / "examples" / "ci"
WORKFLOWS = ROOT / ".github" / "workflows"
ARGOCD = ROOT / "deploy" / "argocd"
EXAMPLE_CONFIG = CI / "pre-commit-config.yaml"
RELEASE = yaml.safe_load(EXAMPLE_CONFIG.read_text())["repos"][0]["rev"]
REPOSITORY = yaml.safe_load(EXAMPLE_CONFIG.read_text())["repos"][0]["repo"]
WORKFLOW_FILES = [*sorted(CI.glob("github-workflow*.yaml")), *sorted(WORKFLOWS.glob("*.yaml"))]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **GIT_IDENTITY, "PATH": os.pathsep.join([str(VENV_BIN), os.environ["PATH"]]), **env}
    return subprocess.run(argv, cwd=cwd, env=environment, capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This working tree as the repository users get: a clone tagged with the release the examples pin."""
    return repository_copy(tmp_path_factory.mktemp("upstream") / "karpenter-policy", tag=RELEASE)


# --- pre-commit ---------------------------------------------------------------------------------------------


def policy_repository(path: Path) -> Path:
    shutil.copytree(ROOT / "policies", path / "policies")
    git("init", "-q", "-b", "main", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "policies", cwd=path)
    return path


@pytest.mark.slow
def test_pre_commit_try_repo_installs_and_runs_the_hooks_of_the_release(release: Path, tmp_path: Path) -> None:
    policies = policy_repository(tmp_path / "policies-repo")

    done = run([str(VENV_BIN / "pre-commit"), "try-repo", str(release), "--ref", RELEASE, "--all-files"], policies,
               PRE_COMMIT_HOME=str(tmp_path / "cache"))

    output = done.stdout + done.stderr
    # validate and check pass; fmt rewrites the files it formats, which fails that run once (so that the change
    # can be reviewed and staged) — the hooks as published, run by pre-commit from an install of the tag
    assert re.search(r"^karpenter-policy validate\.+Passed$", output, re.MULTILINE), output
    assert re.search(r"^karpenter-policy check\.+Passed$", output, re.MULTILINE), output
    assert re.search(r"^karpenter-policy fmt\.+Failed$", output, re.MULTILINE), output
    assert "files were modified by this hook" in output and "formatted" in output
    assert done.returncode == 1
    assert git("status", "--porcelain", cwd=policies).strip(), "fmt rewrote the policies"


@pytest.mark.slow
def test_the_example_configuration_is_one_pre_commit_accepts(release: Path) -> None:
    done = run([str(VENV_BIN / "pre-commit"), "validate-config", str(EXAMPLE_CONFIG)], ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = run([str(VENV_BIN / "pre-commit"), "validate-manifest", str(release / ".pre-commit-hooks.yaml")],
                   ROOT)
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
    published = {hook["id"] for hook in load(release / ".pre-commit-hooks.yaml")}
    assert {hook["id"] for hook in load(EXAMPLE_CONFIG)["repos"][0]["hooks"]} == published


# --- pip's git URL ------------------------------------------------------------------------------------------


def install_specs() -> dict[str, str]:
    """Every `karpenter-policy @ git+…` the examples pip-install, by file."""
    found = {}
    for path in [*CI.glob("*.yaml"), *ARGOCD.glob("*.yaml")]:
        for spec in re.findall(r"karpenter-policy @ git\+\S+@[^\s\"']+", path.read_text(encoding="utf-8")):
            found[path.name] = spec
    return found


@pytest.mark.slow
def test_the_install_url_builds_the_release(release: Path, tmp_path: Path) -> None:
    specs = install_specs()
    assert set(specs) == {"github-workflow.yaml", "github-workflow-compile.yaml", "github-workflow-pr-comment.yaml",
                          "github-workflow-plan.yaml",
                          "argocd-repo-server-patch.yaml", "helm-values.yaml"}
    (spec,) = set(specs.values())
    assert spec == f"karpenter-policy @ git+{REPOSITORY}@{RELEASE}"
    local = spec.replace(REPOSITORY, f"file://localhost{release}")  # pip's parser wants a host in a git+ URL

    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path), local],
               tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in tmp_path.glob("*.whl")] == [f"karpenter_policy-{RELEASE[1:]}-py3-none-any.whl"]


# --- GitHub workflows ---------------------------------------------------------------------------------------


def lint(actionlint: str, path: Path) -> subprocess.CompletedProcess[str]:
    done = run([actionlint, str(path)], path.parent)
    assert "Checking 1 workflow file(s)" in done.stdout, done.stdout + done.stderr  # it read the file
    return done


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_actionlint_finds_nothing_in_the_workflows(actionlint: str, path: Path) -> None:
    done = lint(actionlint, path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_finds_a_mistake(actionlint: str, tmp_path: Path) -> None:
    """The linter really checks: a job output misspelt, an expression of an unknown context."""
    broken = (WORKFLOWS / "release.yaml").read_text(encoding="utf-8")
    broken = broken.replace("needs.dist.outputs.version }}", "needs.dist.outputs.versoin }}", 1)
    broken = broken.replace("${{ secrets.GITHUB_TOKEN }}", "${{ secret.GITHUB_TOKEN }}", 1)
    (tmp_path / "release.yaml").write_text(broken, encoding="utf-8")

    done = lint(actionlint, tmp_path / "release.yaml")

    assert done.returncode == 1
    assert 'property "versoin" is not defined' in done.stdout
    assert 'undefined variable "secret"' in done.stdout


def test_the_release_builds_every_image_with_its_version_and_the_chart_at_it() -> None:
    workflow = load(WORKFLOWS / "release.yaml")
    assert workflow[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+"]  # YAML 1.1 reads the key `on` as true
    jobs = workflow["jobs"]
    (checkout,) = (s for s in jobs["dist"]["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0, "setuptools-scm needs the tags"

    built = {entry["dockerfile"] for entry in jobs["images"]["strategy"]["matrix"]["include"]}
    assert built == {str(p.relative_to(ROOT)) for p in (ROOT / "deploy").rglob("Dockerfile")}
    (build,) = (s for s in jobs["images"]["steps"] if s.get("uses", "").startswith("docker/build-push-action@"))
    assert build["with"]["build-args"] == "VERSION=${{ needs.dist.outputs.version }}"
    assert build["with"]["tags"] == "${{ env.IMAGE_NAME }}:${{ needs.dist.outputs.version }}"
    for dockerfile in built:
        text = (ROOT / dockerfile).read_text(encoding="utf-8")
        assert re.search(r"^ARG VERSION=", text, re.MULTILINE), dockerfile
        assert 'SETUPTOOLS_SCM_PRETEND_VERSION_FOR_KARPENTER_POLICY="$VERSION" pip install' in text, dockerfile

    package = next(s["run"] for s in jobs["chart"]["steps"] if "helm package" in s.get("run", ""))
    assert '--version "$VERSION" --app-version "$VERSION"' in package
    assert jobs["chart"]["env"]["VERSION"] == "${{ needs.dist.outputs.version }}"
