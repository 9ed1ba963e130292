"""examples/ci/github-workflow-plan.yaml run step by step with GitHub's shell (bash -e) on real git clones: a
shallow clone stops with `fetch-depth: 0`; the snapshot is read from the cluster with the kubeconfig secret (kubectl
replaced by a stand-in that records its arguments and prints examples/plan's snapshot) or downloaded as the newest
snapshot workflow's artifact (gh replaced by a stand-in), and a missing one stops with what to set; the comment
holds the plan of the pull request against it, and the snapshot is gone afterwards; one comment is posted, or the one
with the marker updated."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from tests.integration.workflowsteps import Workflow, git
from tests.kube.conftest import Kubectl, kubectl_binary
from tests.kube.emulator import EmulatorThread
from tests.plan.v1snapshots import claim, pool_node

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_FILE = ROOT / "examples" / "ci" / "github-workflow-plan.yaml"
SNAPSHOT = ROOT / "examples" / "plan" / "snapshot.json"
READER_RBAC = ROOT / "examples" / "ci" / "plan-reader-rbac.yaml"
FAKE_KUBECTL = f"""#!/usr/bin/env bash
echo "KUBECONFIG=$KUBECONFIG $*" >> "$KUBECTL_LOG"
cp "$KUBECONFIG" "$KUBECTL_LOG.kubeconfig"
cat {SNAPSHOT}
"""
FAKE_GH = """#!/usr/bin/env bash
# gh's stand-in: records each call; `run list` answers $GH_RUNS through --jq, `run download` writes the artifact
echo "$*" >> "$GH_LOG"
case "$1 $2" in
  "run list") while [ $# -gt 0 ]; do [ "$1" = --jq ] && exec jq -r "$2" "$GH_RUNS"; shift; done ;;
  "run download")
    while [ $# -gt 0 ]; do [ "$1" = --dir ] && mkdir -p "$2" && cp "$GH_ARTIFACT" "$2/snapshot.json"; shift; done ;;
  "api --method")
    while [ $# -gt 0 ]; do [ "$1" = --input ] && cp "$2" "$GH_LOG.request"; shift; done; echo '{}' ;;
  *) while [ $# -gt 0 ]; do [ "$1" = --jq ] && exec jq -r "$2" "$GH_COMMENTS"; shift; done ;;
esac
"""


_FLOW = Workflow(WORKFLOW_FILE)
workflow, steps, run_step = _FLOW.workflow, _FLOW.steps, _FLOW.run_step


def stand_ins(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("kubectl", FAKE_KUBECTL), ("gh", FAKE_GH)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def pull_request(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose pull request is examples/plan's change (base → head); its base commit."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", "-b", "main", cwd=upstream)
    shutil.copytree(ROOT / "examples" / "plan" / "base", upstream / "policies")
    git("add", "-A", cwd=upstream)
    git("commit", "-q", "-m", "policies", cwd=upstream)
    base = git("rev-parse", "HEAD", cwd=upstream)
    shutil.rmtree(upstream / "policies")
    shutil.copytree(ROOT / "examples" / "plan" / "head", upstream / "policies")
    git("add", "-A", cwd=upstream)
    git("commit", "-q", "-m", "relabel", cwd=upstream)
    return upstream, base


def test_the_job_fetches_the_history_and_may_read_another_runs_artifact() -> None:
    assert steps()["actions/checkout@v4.2.2"]["with"]["fetch-depth"] == 0
    assert list(steps()).index("Check the history is there") == 1
    (job,) = workflow()["jobs"].values()
    assert job["permissions"] == {"contents": "read", "actions": "read", "pull-requests": "write"}


def test_a_shallow_clone_stops_with_fetch_depth_0(tmp_path: Path) -> None:
    upstream, _ = pull_request(tmp_path)
    git("clone", "-q", "--depth", "1", f"file://{upstream}", "shallow", cwd=tmp_path)
    shallow = run_step("Check the history is there", tmp_path / "shallow")
    assert shallow.returncode == 1 and "set fetch-depth: 0 on actions/checkout" in shallow.stdout


def test_the_snapshot_is_read_with_the_kubeconfig_secret_which_is_not_kept(tmp_path: Path) -> None:
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    log = tmp_path / "kubectl.log"
    done = run_step("Take the snapshot", tmp_path, KUBECONFIG_DATA="apiVersion: v1\nkind: Config\n",
                    RUNNER_TEMP=str(temp), KUBECTL_LOG=str(log),
                    PATH=os.pathsep.join([str(stand_ins(tmp_path)), os.environ["PATH"]]))
    assert done.returncode == 0, done.stderr
    assert log.read_text() == (f"KUBECONFIG={temp}/kubeconfig get nodes,pods,pdb,daemonsets,pvc,pv,storageclass -A "
                               "-o json\n"
                               f"KUBECONFIG={temp}/kubeconfig get nodeclaims -A -o json\n"
                               f"KUBECONFIG={temp}/kubeconfig get ec2nodeclasses -A -o json\n")
    assert Path(f"{log}.kubeconfig").read_text() == "apiVersion: v1\nkind: Config\n"
    assert json.loads((temp / "snapshot.json").read_text()) == json.loads(SNAPSHOT.read_text())
    assert not (temp / "kubeconfig").exists()
    assert oct((temp / "snapshot.json").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("runs", [[{"databaseId": 991}], []], ids=["artifact", "none"])
def test_without_the_secret_the_newest_snapshot_artifact_is_read(
    tmp_path: Path, runs: list[dict[str, int]]
) -> None:
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    log = tmp_path / "gh.log"
    done = run_step("Take the snapshot", tmp_path, KUBECONFIG_DATA="", RUNNER_TEMP=str(temp), GH_LOG=str(log),
                    GH_RUNS=str(tmp_path / "runs.json"), GH_ARTIFACT=str(SNAPSHOT), GITHUB_REPOSITORY="acme/policies",
                    GH_TOKEN="t", PATH=os.pathsep.join([str(stand_ins(tmp_path)), os.environ["PATH"]]))
    calls = log.read_text().splitlines()
    assert calls[0].startswith("run list --repo acme/policies --workflow cluster-snapshot.yaml --branch main")
    if runs:
        assert done.returncode == 0, done.stderr
        assert calls[1].startswith("run download 991 --repo acme/policies --name cluster-snapshot")
        assert json.loads((temp / "snapshot.json").read_text()) == json.loads(SNAPSHOT.read_text())
    else:
        assert done.returncode == 1 and len(calls) == 1
        assert "set the secret KARPENTER_POLICY_KUBECONFIG, or run cluster-snapshot.yaml on main" in done.stdout


@pytest.mark.slow
def test_the_comment_holds_the_plan_and_the_snapshot_is_gone(tmp_path: Path) -> None:
    upstream, base = pull_request(tmp_path)
    git("clone", "-q", f"file://{upstream}", "clone", cwd=tmp_path)
    clone, temp = tmp_path / "clone", tmp_path / "runner-temp"
    temp.mkdir()
    shutil.copy(SNAPSHOT, temp / "snapshot.json")
    summary, github_env = tmp_path / "summary.md", tmp_path / "github_env"

    done = run_step("Write the comment", clone, BASE=base, RUNNER_TEMP=str(temp), GITHUB_STEP_SUMMARY=str(summary),
                    GITHUB_ENV=str(github_env))

    assert done.returncode == 0, done.stderr
    comment = (clone / "comment.md").read_text()
    assert comment.startswith("<!-- karpenter-policy plan -->\n### karpenter-policy plan: ")
    assert "`spec.labels.team changed (provisioner default)`" in comment
    assert summary.read_text() == comment
    assert github_env.read_text() == "KARPENTER_POLICY_STATUS=1\n"  # examples/plan: a PDB never lets a node go
    assert not (temp / "snapshot.json").exists()
    assert run_step("Verdict", clone, KARPENTER_POLICY_STATUS="1").returncode == 1


def test_one_comment_is_posted_then_updated(tmp_path: Path) -> None:
    existing = [{"id": 7, "body": "<!-- karpenter-policy -->\nthe diff"},
                {"id": 42, "body": "<!-- karpenter-policy plan -->\nold"}]
    (tmp_path / "comments.json").write_text(json.dumps(existing))
    (tmp_path / "comment.md").write_text("<!-- karpenter-policy plan -->\n### the plan\n")
    log = tmp_path / "gh.log"
    done = run_step("Post or update the comment", tmp_path, GH_LOG=str(log),
                    GH_COMMENTS=str(tmp_path / "comments.json"), GITHUB_REPOSITORY="acme/policies", PR="5",
                    GH_TOKEN="t",
                    PATH=os.pathsep.join([str(stand_ins(tmp_path)), os.environ["PATH"]]))
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[1].startswith("api --method PATCH repos/acme/policies/issues/comments/42 ")  # not diff's comment 7
    assert json.loads(Path(f"{log}.request").read_text()) == {"body": "<!-- karpenter-policy plan -->\n### the plan\n"}


@pytest.mark.parametrize("served", ["nodeclaims", "no CRD", "forbidden"])
def test_nodeclaims_are_read_apart_none_without_the_crd_and_a_refusal_fails_the_job(
    tmp_path: Path, served: str
) -> None:
    """The real kubectl against the test API server with RBAC: the NodeClaims and EC2NodeClasses in files apart, an
    empty list where the cluster lacks their CRD, and a user that may not list them stops the job (no snapshot
    left)."""
    crds = frozenset() if served == "no CRD" else frozenset({objects.NODE_CLAIM, objects.EC2_NODE_CLASS})
    with EmulatorThread(seed_namespaces=True, authorize=True, crds=crds) as server:
        admin = server.write_kubeconfig(tmp_path / "admin")
        client = KubeCluster.from_kubeconfig(str(admin))
        try:
            client.create(objects.NODE, pool_node("ip-10-0-1-1"))
            if crds:
                client.create(objects.NODE_CLAIM, claim("ip-10-0-1-1"))
            config = admin
            if served == "forbidden":
                config = _reader_without_nodeclaims(server, client, tmp_path)
        finally:
            client.close()
        temp = tmp_path / "runner-temp"
        temp.mkdir()
        kubectl_dir = tmp_path / "kubectl-bin"
        kubectl_dir.mkdir()
        (kubectl_dir / "kubectl").symlink_to(kubectl_binary())

        done = run_step("Take the snapshot", tmp_path, KUBECONFIG_DATA=config.read_text(), RUNNER_TEMP=str(temp),
                        HOME=str(tmp_path), PATH=os.pathsep.join([str(kubectl_dir), os.environ["PATH"]]))

    assert not (temp / "kubeconfig").exists() and not (temp / "karpenter.err").exists()
    if served == "forbidden":
        assert done.returncode == 1
        assert 'cannot list resource "nodeclaims" in API group "karpenter.sh"' in done.stderr
        assert "::error::cannot list nodeclaims" in done.stdout
        assert list(temp.iterdir()) == []
        return
    assert done.returncode == 0, done.stderr
    nodes = json.loads((temp / "snapshot.json").read_text())["items"]
    claims = json.loads((temp / "nodeclaims.json").read_text())["items"]
    assert [n["metadata"]["name"] for n in nodes] == ["ip-10-0-1-1"]
    assert [c["status"]["nodeName"] for c in claims] == (["ip-10-0-1-1"] if crds else [])
    assert json.loads((temp / "ec2nodeclasses.json").read_text())["items"] == []
    assert ("the cluster has no nodeclaims (no Karpenter v1 CRD)" in done.stdout) == (not crds)
    assert ("the cluster has no ec2nodeclasses (no Karpenter v1 CRD)" in done.stdout) == (not crds)


def _reader_without_nodeclaims(server: EmulatorThread, client: KubeCluster, tmp_path: Path) -> Path:
    """A kubeconfig of the ServiceAccount of examples/ci/plan-reader-rbac.yaml, its role without nodeclaims."""
    admin = Kubectl(kubectl_binary(), tmp_path / "admin", tmp_path / "cache", server, client)
    documents = list(yaml.safe_load_all(READER_RBAC.read_text()))
    for document in documents:
        if document["kind"] == "ClusterRole":
            document["rules"] = [r for r in document["rules"] if r["apiGroups"] != ["karpenter.sh"]]
    admin("apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
    request = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    answer = admin("create", "--raw", "/api/v1/namespaces/kube-system/serviceaccounts/karpenter-policy-plan/token",
                   "-f", "-", stdin=request).stdout
    return server.write_kubeconfig(tmp_path / "reader", token=json.loads(answer)["status"]["token"])
