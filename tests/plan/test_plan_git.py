"""`plan BASE HEAD` on git revisions of a real repository (read from git's objects, the working tree untouched),
through the real CLI with the snapshot on standard input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands.test_diff import commit, git
from tests.plan.snapshots import NODE_TEMPLATE, listing, node, pod, provisioner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """c1: default (team: web); c2: team: platform; the working tree holds something else again."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, {"policies/default.yaml": provisioner() + "---\n" + NODE_TEMPLATE}, "c1")
    c2 = commit(repo, {"policies/default.yaml": provisioner(labels="team: platform") + "---\n" + NODE_TEMPLATE}, "c2")
    (repo / "policies" / "default.yaml").write_text("not: [valid\n")
    return repo, [c1, c2]


def cli(repo: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", *args], cwd=repo, input=stdin,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_revisions_with_the_snapshot_on_stdin(repo: tuple[Path, list[str]]) -> None:
    path, (c1, c2) = repo
    snapshot = json.dumps(listing(node("a"), pod("web", "a", "web")))

    drifted = cli(path, c1, c2, "--snapshot", "-", "--start", "2026-11-30T09:00:00Z", "--output", "json",
                  stdin=snapshot)
    same = cli(path, c2, "main", "--snapshot", "-", "--output", "json", stdin=snapshot)

    assert drifted.returncode == 0, drifted.stderr
    document = json.loads(drifted.stdout)
    assert document["nodes"][0]["reasons"] == ["spec.labels.team changed (provisioner default)"]
    assert document["waves"][0]["start"] == "2026-11-30T09:00:10Z"
    assert json.loads(same.stdout)["waves"] == []
    assert (path / "policies" / "default.yaml").read_text() == "not: [valid\n"


def test_an_unknown_revision_or_a_malformed_snapshot_exits_2(repo: tuple[Path, list[str]]) -> None:
    path, (c1, _) = repo

    unknown = cli(path, c1, "no-such-branch", "--snapshot", "-", stdin=json.dumps(listing(node("a"))))
    malformed = cli(path, c1, "main", "--snapshot", "-", stdin='{"kind": "List", "items": [{"kind": "Node"}]}')

    assert unknown.returncode == 2 and "'no-such-branch' is neither a directory nor a git revision" in unknown.stderr
    assert malformed.returncode == 2
    assert "karpenter-policy plan: -: item 0: error: metadata is not an object: None\n" in malformed.stderr
