"""No git configuration of the policy repository runs anything through the CLI (issue #19).

One repository of the project's policies, with every way its configuration (and what `.gitattributes` selects)
can name a command planted: filter drivers (clean, smudge, process) selected by `.gitattributes`,
`.git/info/attributes` and a `core.attributesFile`; textconv and an external diff driver; `diff.external`;
`core.fsmonitor`; hooks under a `core.hooksPath`; a credential helper; `core.askPass`; `core.sshCommand`;
`core.gitProxy`; `core.pager`; a promisor remote whose `ext::` URL runs a command, allowed by the repository's
own `protocol.ext.allow`; and `include.path` / `includeIf` pulling in part of these. Each planted command creates
a marker file of its own.

The CLI commands that run git — compile's version (`git describe` and whether the tree is HEAD's), `diff` of two
revisions, of a revision and a directory, of a revision whose blob is missing — must leave no marker. Then plain
git commands that do use each setting (the controls) must create every marker: a plant that never runs would
prove nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

EXTRA_CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
data:
  note: not a policy, but read as one
"""

#: policy file → what selects its filter driver, and the driver (defined in the repository's configuration or in
#: a file it includes).
FILTERS = {
    "default.yaml": "filter-clean",
    "gpu.yaml": "filter-smudge",
    "arm64.yaml": "filter-process",
    "nodetemplates.yaml": "filter-included",
    "spot-batch.yaml": "filter-includeif",
    "extra-info.yaml": "filter-info-attributes",
    "extra-attributesfile.yaml": "filter-attributesfile",
}
HOOKS = ("pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-index-change")
MARKERS = sorted(
    {
        *FILTERS.values(),
        "textconv", "diff-command", "diff-external", "fsmonitor", "credential-helper", "askpass", "ssh-command",
        "git-proxy", "pager", "lazy-fetch", *(f"hook-{hook}" for hook in HOOKS),
    }
)  # fmt: skip


def git(repo: Path, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }  # fmt: skip
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, input=input, capture_output=True, text=True, timeout=60, check=check
    )


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message)
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k != "GITHUB_WORKSPACE"}
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args],
        cwd=repo, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


class Planted:
    """The repository, its commits (c0's default.yaml blob is missing: a partial clone), and the markers."""

    def __init__(self, repo: Path, markers: Path, c0: str, c1: str, c2: str, missing_blob: str) -> None:
        self.repo, self.markers, self.c0, self.c1, self.c2, self.missing_blob = repo, markers, c0, c1, c2, missing_blob

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())


@pytest.fixture()
def planted(tmp_path: Path) -> Planted:
    repo, markers = tmp_path / "repo", tmp_path / "markers"
    markers.mkdir()
    bin_ = tmp_path / "bin"
    bin_.mkdir()

    def program(name: str, then: str = "exit 1") -> str:
        """A program that creates marker `name`, then does `then`: fail (a hook, a helper, an ssh command have
        nothing to answer), or behave like the filter, textconv or pager it stands for (`exec cat "$@"`)."""
        path = bin_ / name
        path.write_text(f'#!/bin/sh\ntouch "{markers}/{name}"\n{then}\n')
        path.chmod(0o755)
        return str(path)

    def cat(name: str) -> str:
        return program(name, 'exec cat "$@"')

    shutil.copytree(ROOT / "policies", repo / "policies")
    for name in ("extra-info.yaml", "extra-attributesfile.yaml"):
        (repo / "policies" / name).write_text(EXTRA_CONFIGMAP.format(name=name.removesuffix(".yaml")))
    git(repo, "init", "-q", "-b", "main")
    c0 = commit(repo, "c0")
    missing_blob = git(repo, "rev-parse", f"{c0}:policies/default.yaml").stdout.strip()
    with (repo / "policies" / "default.yaml").open("a") as handle:
        handle.write("# c1\n")
    c1 = commit(repo, "c1")
    for name in ("default.yaml", "spot-batch.yaml"):
        with (repo / "policies" / name).open("a") as handle:
            handle.write("# c2\n")
    # committed by the pull request: attributes that select the drivers, and the files the configuration includes
    (repo / ".gitattributes").write_text(
        "".join(f"policies/{file} filter={driver}\n" for file, driver in FILTERS.items()
                if driver not in ("filter-info-attributes", "filter-attributesfile"))
        + "policies/default.yaml diff=diff-command\npolicies/gpu.yaml diff=textconv\n"
    )  # fmt: skip
    (repo / "attributes.extra").write_text("policies/extra-attributesfile.yaml filter=filter-attributesfile\n")
    (repo / "hooks").mkdir()
    for hook in HOOKS:  # each succeeds, so that the next one runs too
        (repo / "hooks" / hook).write_text(f'#!/bin/sh\n{program(f"hook-{hook}")}\nexit 0\n')
        (repo / "hooks" / hook).chmod(0o755)
    (repo / "included.gitconfig").write_text(
        f"[core]\n\thooksPath = {repo / 'hooks'}\n[filter \"filter-included\"]\n\tclean = {cat('filter-included')}\n"
    )
    (repo / "includeif.gitconfig").write_text(
        f"[core]\n\tpager = {cat('pager')}\n[filter \"filter-includeif\"]\n\tclean = {cat('filter-includeif')}\n"
    )
    c2 = commit(repo, "c2")
    # prepared with the clone (a CI cache, an archive, the repo-server's volume): .git/config and .git/info
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("policies/extra-info.yaml filter=filter-info-attributes\n")
    settings = {
        "core.repositoryformatversion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.promisor": "true",
        "remote.origin.url": f"ext::{program('lazy-fetch')}",
        "protocol.ext.allow": "always",
        "core.fsmonitor": program("fsmonitor"),
        "core.attributesFile": str(repo / "attributes.extra"),
        "diff.textconv.textconv": cat("textconv"),
        "diff.diff-command.command": program("diff-command"),
        "diff.external": program("diff-external"),
        "credential.helper": program("credential-helper"),
        "core.askPass": program("askpass"),
        "core.sshCommand": program("ssh-command"),
        "core.gitProxy": program("git-proxy"),
        "include.path": str(repo / "included.gitconfig"),
        f"includeIf.gitdir:{repo}/.git.path": str(repo / "includeif.gitconfig"),
        "filter.filter-clean.clean": cat("filter-clean"),
        "filter.filter-smudge.smudge": cat("filter-smudge"),
        "filter.filter-smudge.clean": "cat",
        "filter.filter-process.process": cat("filter-process"),
        "filter.filter-info-attributes.clean": cat("filter-info-attributes"),
        "filter.filter-attributesfile.clean": cat("filter-attributesfile"),
    }
    for key, value in settings.items():
        git(repo, "config", key, value)
    loose = repo / ".git" / "objects" / missing_blob[:2] / missing_blob[2:]
    loose.chmod(0o644)
    loose.unlink()  # c0's default.yaml: a blob a partial clone has not fetched
    for file in (repo / "policies").iterdir():  # newer than the index: a refresh must read (and filter) them
        os.utime(file, None)
    assert not list(markers.iterdir())
    return Planted(repo, markers, c0, c1, c2, missing_blob)


@pytest.mark.slow
def test_no_git_setting_of_the_policy_repository_runs_anything(planted: Planted, tmp_path: Path) -> None:
    repo = planted.repo
    (repo / "policies" / "gpu.yaml").write_text((repo / "policies" / "gpu.yaml").read_text() + "# edited\n")

    compiled = cli(repo, "compile", "policies", "-o", str(tmp_path / "out"))
    streamed = cli(repo / "policies", "compile", ".", "-o", "-")
    revisions = cli(repo, "diff", planted.c1, planted.c2, "policies")
    against_directory = cli(repo, "diff", planted.c1, "policies")
    partial = cli(repo, "diff", planted.c0, planted.c2, "policies")
    sarif = cli(repo, "validate", "policies", "--output", "sarif")

    assert planted.fired() == [], "git ran commands the policy repository configured"
    assert compiled.returncode == 0 and streamed.returncode == 0, compiled.stderr + streamed.stderr
    described = git(repo, "describe", "--always").stdout.strip()
    assert f'"version":"{described}-dirty"' in streamed.stdout  # gpu.yaml edited: the version says so
    assert "note: no version from git" not in compiled.stderr + streamed.stderr
    assert revisions.returncode == 0 and against_directory.returncode == 0, revisions.stderr + against_directory.stderr
    assert "provisioners: 4 unchanged" in revisions.stdout
    assert partial.returncode == 2
    assert f"object {planted.missing_blob} (policies/default.yaml) is not in the repository" in partial.stderr
    assert "Traceback" not in partial.stderr
    assert sarif.returncode == 0, sarif.stderr


def test_each_planted_setting_does_run_under_plain_git(planted: Planted) -> None:
    """The control: what the CLI must not do, plain git does with these settings — every marker appears."""
    repo = planted.repo
    git(repo, "status", check=False)  # fsmonitor, then the clean and process filters of a refresh
    (repo / "policies" / "gpu.yaml").unlink()
    git(repo, "checkout", "--", "policies/gpu.yaml", check=False)  # smudge
    git(repo, "cat-file", "--textconv", f"{planted.c2}:policies/gpu.yaml", check=False)
    git(repo, "diff", planted.c1, planted.c2, check=False)  # diff.external; then the driver (diff.external wins)
    git(repo, "-c", "diff.external=", "diff", planted.c1, planted.c2, "--", "policies/default.yaml", check=False)
    git(repo, "commit", "-q", "--allow-empty", "-m", "control", check=False)  # hooks
    git(repo, "credential", "fill", input="protocol=https\nhost=example.invalid\n\n", check=False)  # helper, askpass
    git(repo, "ls-remote", "ssh://example.invalid/repo", check=False)
    git(repo, "ls-remote", "git://example.invalid/repo", check=False)
    git(repo, "cat-file", "-p", planted.missing_blob, check=False)  # a lazy fetch from the promisor remote
    script = shutil.which("script")
    assert script, "util-linux script(1) gives git a terminal, so that it starts its pager"
    subprocess.run(
        [script, "-qec", "git --no-optional-locks log -1", os.devnull],
        cwd=repo, capture_output=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k not in ("GIT_PAGER", "PAGER")} | {"GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip

    assert ", ".join(sorted(set(MARKERS) - set(planted.fired()))) == ""
