"""examples/ci/github-workflow-pr-comment.yaml run step by step with GitHub's shell (bash -e) on real git clones: in
a shallow clone its first step stops and says `fetch-depth: 0`; the comment it writes opens with the hidden marker
and holds the diff and the workloads' check; it posts one comment, or updates the one carrying the marker (`gh`
replaced by a stand-in that records the REST calls and answers the listing through the real jq)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.workflowsteps import Workflow, git

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_FILE = ROOT / "examples" / "ci" / "github-workflow-pr-comment.yaml"
FAKE_GH = """#!/usr/bin/env bash
# gh's stand-in: records each call; a GET answers the listing of $GH_COMMENTS through --jq, as gh does
echo "$*" >> "$GH_LOG"
case " $* " in
  *" --method "*) while [ $# -gt 0 ]; do [ "$1" = --input ] && cp "$2" "$GH_LOG.request"; shift; done; echo '{}' ;;
  *) while [ $# -gt 0 ]; do [ "$1" = --jq ] && exec jq -r "$2" "$GH_COMMENTS"; shift; done ;;
esac
"""


_FLOW = Workflow(WORKFLOW_FILE)
workflow, steps, run_step = _FLOW.workflow, _FLOW.steps, _FLOW.run_step


def pull_request(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose pull request removes the arm64 provisioner; its base commit."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", "-b", "main", cwd=upstream)
    shutil.copytree(ROOT / "policies", upstream / "policies")
    (upstream / "apps").mkdir()
    shutil.copy(ROOT / "examples" / "workloads" / "apps" / "inflate.yaml", upstream / "apps")
    git("add", "-A", cwd=upstream)
    git("commit", "-q", "-m", "policies", cwd=upstream)
    base = git("rev-parse", "HEAD", cwd=upstream)
    (upstream / "policies" / "arm64.yaml").unlink()
    git("commit", "-q", "-am", "no arm64", cwd=upstream)
    return upstream, base


def test_the_checkout_fetches_the_history_for_the_diff() -> None:
    checkout = steps()["actions/checkout@v4.2.2"]
    assert checkout["with"]["fetch-depth"] == 0
    assert list(steps()).index("Check the history is there") == 1
    (job,) = workflow()["jobs"].values()
    assert job["permissions"]["pull-requests"] == "write"


def test_a_shallow_clone_stops_with_fetch_depth_0(tmp_path: Path) -> None:
    upstream, _ = pull_request(tmp_path)
    git("clone", "-q", "--depth", "1", f"file://{upstream}", "shallow", cwd=tmp_path)
    git("clone", "-q", f"file://{upstream}", "full", cwd=tmp_path)

    shallow = run_step("Check the history is there", tmp_path / "shallow")
    assert shallow.returncode == 1
    assert "set fetch-depth: 0 on actions/checkout" in shallow.stdout
    assert run_step("Check the history is there", tmp_path / "full").returncode == 0


@pytest.mark.parametrize(
    "existing", [[], [{"id": 7, "body": "LGTM"}, {"id": 42, "body": "<!-- karpenter-policy -->\nold"}]],
    ids=["posts", "updates"],
)
def test_one_comment_is_posted_then_updated(tmp_path: Path, existing: list[dict[str, Any]]) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "gh").write_text(FAKE_GH)
    (tmp_path / "bin" / "gh").chmod(0o755)
    (tmp_path / "comments.json").write_text(json.dumps(existing))
    (tmp_path / "comment.md").write_text("<!-- karpenter-policy -->\n### the diff\n")
    log = tmp_path / "gh.log"

    done = run_step("Post or update the comment", tmp_path, GH_LOG=str(log),
                    GH_COMMENTS=str(tmp_path / "comments.json"), GITHUB_REPOSITORY="acme/policies", PR="5",
                    GH_TOKEN="t",
                    PATH=os.pathsep.join([str(tmp_path / "bin"), os.environ["PATH"]]))

    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("api --paginate repos/acme/policies/issues/5/comments")
    if existing:
        assert calls[1].startswith("api --method PATCH repos/acme/policies/issues/comments/42 ")
    else:
        assert calls[1].startswith("api --method POST repos/acme/policies/issues/5/comments ")
    assert len(calls) == 2
    assert json.loads(Path(f"{log}.request").read_text()) == {"body": "<!-- karpenter-policy -->\n### the diff\n"}


@pytest.mark.slow
def test_the_comment_holds_the_diff_and_the_workloads_check(tmp_path: Path) -> None:
    upstream, base = pull_request(tmp_path)
    git("clone", "-q", f"file://{upstream}", "clone", cwd=tmp_path)
    clone = tmp_path / "clone"
    summary, github_env = tmp_path / "summary.md", tmp_path / "github_env"

    done = run_step("Write the comment", clone, BASE=base, GITHUB_STEP_SUMMARY=str(summary),
                    GITHUB_ENV=str(github_env))

    assert done.returncode == 0, done.stderr
    comment = (clone / "comment.md").read_text()
    assert comment.startswith("<!-- karpenter-policy -->\n")
    assert "arm64" in comment  # the diff: the provisioner the pull request removes
    assert "inflate" in comment  # the workloads' check
    assert summary.read_text() == comment
    assert github_env.read_text() == "KARPENTER_POLICY_STATUS=0\n"
    verdict = run_step("Verdict", clone, KARPENTER_POLICY_STATUS="0")
    assert verdict.returncode == 0
    assert run_step("Verdict", clone, KARPENTER_POLICY_STATUS="1").returncode == 1
