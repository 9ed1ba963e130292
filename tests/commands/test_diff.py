"""`diff BASE HEAD`: on a temporary git repository with three commits, and on two directories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.options import PolicyOptions
from karpenter_policy.checks.proof.placement import Landing, WorkloadBill
from karpenter_policy.commands.check import check_command
from karpenter_policy.commands.diff import DiffResult, diff_command, diff_sides, load_side
from karpenter_policy.commands.flags import DiffFlags

ROOT = Path(__file__).resolve().parents[2]
PROVIDER = (
    "  provider:\n    subnetSelector: {karpenter.sh/discovery: prod}\n"
    "    securityGroupSelector: {karpenter.sh/discovery: prod}\n"
)


def provisioner(name: str, body: str) -> str:
    return f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n{body}{PROVIDER}"


DEFAULT_1 = provisioner(
    "default",
    """\
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5, m5]}
    - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
  limits:
    resources: {cpu: 1000}
""",
)
DEFAULT_2 = (
    DEFAULT_1.replace("[us-east-1a, us-east-1b]", "[us-east-1a, us-east-1b, us-east-1c]")
    .replace("values: [amd64]}", "values: [amd64, arm64]}")
    .replace("[c5, m5]", "[c5, m5, c6g]")
)
DEFAULT_3 = DEFAULT_2.replace(
    "  limits:\n    resources: {cpu: 1000}\n",
    "  limits:\n    resources: {cpu: 500}\n  taints:\n    - {key: dedicated, value: general, effect: NoSchedule}\n",
)
GPU = provisioner(
    "gpu",
    """\
  weight: 80
  taints:
    - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g5]}
""",
)
SPOT = provisioner(
    "spot",
    """\
  weight: 50
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
""",
)
INFLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate, namespace: default}
spec:
  template:
    spec:
      containers:
        - name: inflate
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: 1}}
"""
ARM = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: arm-app}
spec:
  template:
    spec:
      nodeSelector: {kubernetes.io/arch: arm64}
      containers: [{name: app, image: app:1, resources: {requests: {cpu: 500m}}}]
"""


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Three commits: c1 default + two workloads; c2 widens default (zone c, arm64) and adds gpu; c3 taints
    default, lowers its cpu limit, removes gpu and adds a heavier spot provisioner."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(
        repo,
        {"policies/default.yaml": DEFAULT_1, "apps/inflate.yaml": INFLATE, "apps/arm.yaml": ARM, "README": "x\n"},
        "c1",
    )
    c2 = commit(repo, {"policies/default.yaml": DEFAULT_2, "policies/gpu.yaml": GPU}, "c2")
    c3 = commit(repo, {"policies/default.yaml": DEFAULT_3, "policies/gpu.yaml": None, "policies/spot.yaml": SPOT}, "c3")
    # The working tree differs from every commit: the diff must read git's objects, not the files.
    (repo / "policies" / "default.yaml").write_text("not: [valid\n")
    return repo, [c1, c2, c3]


def run(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str, **kwargs: object) -> tuple[int, str, str]:
    monkeypatch.chdir(repo)
    base, head, *paths = args
    flags = DiffFlags(base=base, head=head, paths=tuple(paths), **kwargs)  # type: ignore[arg-type]
    out = diff_command(flags, load_catalog())
    return out.exit_code, out.stdout, out.stderr


def as_json(repo: Path, monkeypatch: pytest.MonkeyPatch, base: str, head: str, **kwargs: object) -> dict[str, object]:
    code, stdout, stderr = run(repo, monkeypatch, base, head, output="json", **kwargs)
    assert stderr == "" and code in (0, 1)
    document: dict[str, object] = json.loads(stdout)
    return document


def provisioners(document: dict[str, object]) -> dict[str, dict[str, object]]:
    return {p["name"]: p for p in document["provisioners"]}  # type: ignore[attr-defined,index]


def changes(document: dict[str, object], name: str) -> dict[str, dict[str, object]]:
    return {c["dimension"]: c for c in provisioners(document)[name]["changes"]}  # type: ignore[attr-defined,index]


def test_c1_to_c2_widens_default_and_adds_gpu(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (c1, c2, _) = repo
    document = as_json(path, monkeypatch, c1, c2, workload_paths=["apps/"])
    statuses = {name: p["status"] for name, p in provisioners(document).items()}
    assert statuses == {"default": "changed", "gpu": "added"}
    default = changes(document, "default")
    assert list(default) == ["offerings", "instance types", "zones", "architectures"]
    assert default["zones"]["added"] == ["us-east-1c"] and default["zones"]["removed"] == []
    assert default["architectures"]["added"] == ["arm64"]
    assert all(t.startswith("c6g.") for t in default["instance types"]["added"])  # type: ignore[union-attr]
    for dimension in ("offerings", "instance types", "zones", "architectures"):
        witness = default[dimension]["added_witness"]
        assert witness["proven"] is True, dimension  # type: ignore[index]
    assert default["zones"]["added_witness"]["zone"] == "us-east-1c"  # type: ignore[index]
    assert default["architectures"]["added_witness"]["instance_type"].startswith("c6g.")  # type: ignore[index]
    [workload] = document["workloads"]  # type: ignore[misc]
    assert workload == {
        "workload": "Deployment/arm-app",
        "file": "apps/arm.yaml",
        "status": "becomes schedulable",
        "present": "both",
        "base": None,
        "head": "default",
        "reason": workload["reason"],
        "replicas": 1,
        "base_unscheduled": 1,
        "head_unscheduled": 0,
        "newly_unscheduled": 0,
        "error": False,
    }


def test_c2_to_c3_taints_limits_and_workloads(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (_, c2, c3) = repo
    code, text, _ = run(path, monkeypatch, c2, c3, workload_paths=["apps/"])
    assert code == 1  # a workload becomes unschedulable
    document = as_json(path, monkeypatch, c2, c3, workload_paths=["apps/"])
    statuses = {name: p["status"] for name, p in provisioners(document).items()}
    assert statuses == {"default": "changed", "gpu": "removed", "spot": "added"}
    default = changes(document, "default")
    assert default["taints"]["removed"] == ["pods that do not tolerate dedicated=general:NoSchedule"]
    assert default["limits"]["removed"] == ["cpu: limit lowered from 1000 to 500"]
    assert "offerings" not in default  # same offerings: only who may use them changed
    workloads = {w["workload"]: (w["status"], w["base"], w["head"]) for w in document["workloads"]}  # type: ignore[attr-defined,index]
    assert workloads == {
        "default/Deployment/inflate": ("changes provisioner", "default", "spot"),
        "Deployment/arm-app": ("becomes unschedulable", "default", None),
    }
    assert "Provisioner default (policies/default.yaml:4): changed" in text
    assert "taints" in text and "dedicated=general:NoSchedule" in text
    assert "Deployment/arm-app" in text and "becomes unschedulable" in text


def test_c1_to_c3_markdown_for_a_pull_request(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (c1, _, c3) = repo
    code, markdown, _ = run(path, monkeypatch, c1, c3, output="markdown")
    assert code == 0
    assert markdown.startswith(f"### karpenter-policy diff `{c1}` → `{c3}`\n")
    assert "| Provisioner | Change | HEAD admits, BASE did not | BASE admitted, HEAD does not |" in markdown
    assert "| `spot` | **added** |" in markdown
    assert "| `default` | taints |" in markdown
    assert "e.g. " in markdown and "unconfirmed" not in markdown  # every example confirmed on both sides
    assert "solver" not in markdown and "proven" not in markdown


def test_same_revision_has_no_difference(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (_, c2, _) = repo
    code, text, _ = run(path, monkeypatch, c2, c2, exit_code_on_diff=True)
    assert code == 0
    assert "provisioners: 2 unchanged" in text


def test_exit_code_flag(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (c1, c2, _) = repo
    assert run(path, monkeypatch, c1, c2)[0] == 0
    assert run(path, monkeypatch, c1, c2, exit_code_on_diff=True)[0] == 1


def test_revisions_by_name_and_the_working_tree_is_untouched(
    repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = repo
    before = git(path, "status", "--porcelain")
    code, text, _ = run(path, monkeypatch, "main~2", "main", "policies/")
    assert code == 0 and "Provisioner spot" in text
    assert git(path, "status", "--porcelain") == before
    assert (path / "policies" / "default.yaml").read_text() == "not: [valid\n"


def test_a_revision_without_the_path(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (c1, _, c3) = repo
    document = as_json(path, monkeypatch, c1, c3)
    assert document["paths"] == ["policies/"]
    code, _, stderr = run(path, monkeypatch, c1, c3, "policies/spot.yaml")
    assert code == 0
    code, _, stderr = run(path, monkeypatch, c1, c3, "nowhere/")
    assert code == 2 and "nowhere/: not on either side" in stderr


def test_unknown_revision(repo: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, (c1, _, _) = repo
    code, stdout, stderr = run(path, monkeypatch, c1, "no-such-branch")
    assert (code, stdout) == (2, "")
    assert "'no-such-branch' is neither a directory nor a git revision" in stderr


def test_two_directories(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for directory, files in ((old, {"default.yaml": DEFAULT_1}), (new, {"default.yaml": DEFAULT_2, "spot.yaml": SPOT})):
        directory.mkdir()
        for name, text in files.items():
            (directory / name).write_text(text)
    catalog = load_catalog()
    base = load_side(str(old), None, catalog, scratch=str(tmp_path / "s1"))
    head = load_side(str(new), None, catalog, scratch=str(tmp_path / "s2"))
    result: DiffResult = diff_sides(base, head, catalog)
    assert [(p.name, p.status) for p in result.provisioners] == [("default", "changed"), ("spot", "added")]
    assert result.provisioners[1].head is not None and result.provisioners[1].head.file == "spot.yaml"


def test_head_with_errors_exits_1(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "p.yaml").write_text(DEFAULT_1)
    (new / "p.yaml").write_text(
        DEFAULT_1.replace("[c5, m5]", "[c5, m5]}\n    - {key: kubernetes.io/arch, operator: Gt")
    )
    out = diff_command(DiffFlags(base=str(old), head=str(new)), load_catalog())
    assert out.exit_code == 1
    assert "HEAD p.yaml" in out.stdout and "error" in out.stdout
    assert "Provisioner default (p.yaml:4): removed (invalid in HEAD: see its errors)" in out.stdout


def test_through_the_real_cli(repo: tuple[Path, list[str]]) -> None:
    path, (c1, _, c3) = repo
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "diff", c1, c3, "--workloads", "apps/", "--output", "json"],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr  # arm-app is unschedulable in c3, but it was in c1 too: no change
    document = json.loads(done.stdout)
    assert {p["name"]: p["status"] for p in document["provisioners"]} == {"default": "changed", "spot": "added"}
    assert [w["workload"] for w in document["workloads"]] == ["default/Deployment/inflate"]
    assert shutil.which("git")


def test_a_repository_shaped_folder_in_the_tree_runs_nothing(tmp_path: Path) -> None:
    """A pull request can commit HEAD, objects/, refs/ and a config into policies/: run from there, git would take
    that folder for the repository and run its commands (a promisor remote's uploadpack on the missing commit).
    diff reads the revisions from the repository that holds the folder, and runs nothing."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, {"policies/default.yaml": DEFAULT_1}, "c1")
    marker = tmp_path / "pwned"
    planted = repo / "policies"
    files = {
        "policies/HEAD": "ref: refs/heads/main\n",
        "policies/refs/heads/main": "1111111111111111111111111111111111111111\n",
        "policies/objects/keep": "",
        "policies/config": (
            "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\tworktree = ..\n"
            f'\tfsmonitor = "touch {marker}; false"\n'
            "[extensions]\n\tpartialClone = origin\n"
            f'[remote "origin"]\n\turl = {planted}\n\tpromisor = true\n\tuploadpack = "touch {marker}; false"\n'
        ),
    }
    c2 = commit(repo, {**files, "policies/default.yaml": DEFAULT_2}, "c2 plants a repository-shaped folder")
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "diff", c1, c2, ".", "--output", "json"],
        cwd=planted,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert not marker.exists(), "diff ran a command from a folder of the policy tree"
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {p["name"]: p["status"] for p in document["provisioners"]} == {"default": "changed"}


PEAK_RSS = """\
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
sys.stderr.write(done.stdout + done.stderr)
"""


@pytest.mark.slow
def test_a_blob_over_the_size_bound_is_never_read(tmp_path: Path) -> None:
    """diff read every blob of a revision whole (git's answer, then a copy) before the 4 MiB bound applied: a
    300 MB file took 661 MB. Its size is now checked first (`git ls-tree -l`): the file is refused as a directory
    side refuses it, and neither diff nor git holds it — the peak memory (diff and its git children) of a diff with
    a 96 MiB policy file is that of the same diff without it, within far less than the file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, {"policies/default.yaml": DEFAULT_1}, "c1")
    c2 = commit(repo, {"policies/default.yaml": DEFAULT_2}, "c2")
    line = "# " + "padding " * 15 + "\n"
    commit(repo, {"policies/huge.yaml": line * (96 * 1024 * 1024 // len(line))}, "c3 adds a 96 MiB file")
    (repo / "policies" / "huge.yaml").unlink()  # not in the work tree: read from git's objects only

    def peak_kib(base: str, head: str) -> tuple[int, int, str]:
        done = subprocess.run(
            [sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "karpenter_policy.cli", "diff", base, head],
            cwd=repo, capture_output=True, text=True, timeout=300, check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        kib, code = map(int, done.stdout.split())
        return kib, code, done.stderr

    without_kib, without_code, _ = peak_kib(c1, c2)
    with_kib, code, output = peak_kib(c1, "HEAD")

    assert without_code == 0
    assert code == 1, output
    assert "HEAD policies/huge.yaml:1:1: error: file is larger than 4194304 bytes" in output
    assert with_kib - without_kib < 24 * 1024, f"{with_kib} KiB with the file, {without_kib} KiB without"


# --- what broke leads: workloads (or replicas) HEAD strands -------------------------------------------------

TRAINER = provisioner(
    "trainer",
    """\
  taints:
    - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g5]}
    - {key: karpenter.k8s.aws/instance-size, operator: In, values: [2xlarge]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits:
    resources: {cpu: CPU_LIMIT}
""",
)
TRAINING_JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: model-training, namespace: ml}
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
        - name: train
          image: train:1
          resources: {requests: {cpu: "6", memory: 16Gi}, limits: {nvidia.com/gpu: 1}}
"""


def limited_diff(tmp_path: Path, base_limit: int, head_limit: int, output: str) -> tuple[int, str]:
    """diff of two directories whose trainer provisioner differs only by its cpu limit, with the training Job."""
    for name, limit in (("base", base_limit), ("head", head_limit)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "trainer.yaml").write_text(TRAINER.replace("CPU_LIMIT", str(limit)))
    (tmp_path / "job.yaml").write_text(TRAINING_JOB)
    out = diff_command(
        DiffFlags(base=str(tmp_path / "base"), head=str(tmp_path / "head"), output=output,
                  workload_paths=(str(tmp_path / "job.yaml"),)),
        load_catalog(),
    )
    assert out.stderr == ""
    return out.exit_code, out.stdout


def test_newly_stranded_workload_leads_the_comment_and_fails(tmp_path: Path) -> None:
    code, markdown = limited_diff(tmp_path, 256, 4, "markdown")
    assert code == 1
    first = markdown.splitlines()[0]
    assert first.startswith("### ❌ 1 workload can no longer be placed: ml/Job/model-training — provisioner trainer: ")
    assert "limits.resources" in first
    assert "HEAD: 1 error" in markdown and "1 becomes unschedulable" in markdown
    # the stranded pods' cost is not a saving: the headline compares the pods both sides place
    assert "**Monthly cost unchanged for the pods both sides place: $0.00**" in markdown
    assert "decreases" not in markdown
    assert "Not counted in the change: $" in markdown
    assert "2 pods of Job/model-training that HEAD cannot place" in markdown
    assert "2 pods left pending: no saving" in markdown
    assert markdown.index("❌") < markdown.index("Monthly cost")


def test_newly_stranded_workload_in_json_and_text(tmp_path: Path) -> None:
    code, text = limited_diff(tmp_path, 256, 4, "json")
    document = json.loads(text)
    assert code == 1
    [workload] = document["workloads"]
    assert (workload["status"], workload["base"], workload["head"]) == ("becomes unschedulable", "trainer", None)
    assert (workload["replicas"], workload["newly_unscheduled"], workload["error"]) == (2, 2, True)
    assert document["summary"]["newly_unschedulable"] == 1 and document["head"]["errors"] == 1
    [finding] = [f for f in document["head"]["findings"] if f["severity"] == "error"]
    assert finding["rule"] == "workload-unschedulable" and finding["file"].endswith("job.yaml")
    assert finding["message"].startswith(f"{tmp_path / 'base'} placed it, {tmp_path / 'head'} cannot: none of its 2")
    assert document["cost"]["compared"]["base_monthly"] == document["cost"]["compared"]["head_monthly"] == 0.0
    assert [s["pods"] for s in document["cost"]["stranded"]] == [2]


def test_partly_stranded_replicas_are_counted(tmp_path: Path) -> None:
    code, markdown = limited_diff(tmp_path, 256, 8, "markdown")
    assert code == 1
    assert markdown.startswith(
        "### ❌ 1 workload can no longer be placed: ml/Job/model-training (1 of its 2 replicas) — provisioner trainer: "
    )
    assert "1 becomes partly unschedulable" in markdown
    assert "1 pod left pending: no saving" in markdown
    assert "decreases" not in markdown  # half the nodes, but no saving: one replica does not run


def test_newly_placed_workload_is_no_error(tmp_path: Path) -> None:
    code, markdown = limited_diff(tmp_path, 4, 256, "markdown")
    assert code == 0
    assert "❌" not in markdown
    assert markdown.startswith("### Monthly cost unchanged for the pods both sides place: $0.00")
    assert "1 becomes schedulable" in markdown and "HEAD: 0 errors" in markdown
    assert "that BASE could not place" in markdown


@pytest.mark.parametrize(
    ("base", "head", "said"),
    [(256, 32, "cpu: limit lowered from 256 to 32"), (32, 256, "cpu: limit raised from 32 to 256")],
)
def test_a_limit_change_says_which_way_it_went(tmp_path: Path, base: int, head: int, said: str) -> None:
    _, text = limited_diff(tmp_path, base, head, "text")
    assert said in text
    assert "-cpu" not in text and "+cpu" not in text and "up to" not in text


def test_check_markdown_leads_with_the_workload_it_cannot_place(tmp_path: Path) -> None:
    """`check --workloads --output markdown` puts the stranded workload above the cost, with the most relevant
    provisioner's reason (the one that took its taints and requirements and lacked room)."""
    (tmp_path / "trainer.yaml").write_text(TRAINER.replace("CPU_LIMIT", "8"))
    (tmp_path / "default.yaml").write_text(DEFAULT_1)
    (tmp_path / "job.yaml").write_text(TRAINING_JOB)
    out = check_command(
        [str(tmp_path / "trainer.yaml"), str(tmp_path / "default.yaml")], "markdown",
        PolicyOptions(workload_paths=(str(tmp_path / "job.yaml"),)),
    )
    assert out.exit_code == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith(
        "### ❌ 1 workload cannot be placed: Job/model-training (1 of its 2 replicas) — provisioner trainer: "
    )
    assert "limits.resources" in lines[0]
    assert lines[2].startswith("karpenter-policy check: the workloads' nodes cost $")


def test_where_a_workload_lands_counts_its_pods_in_words() -> None:
    """#27: `(1 pods)`: the first landing's count is spelt with its noun, singular for one."""
    bill = WorkloadBill(
        "Job/x", 3, (Landing("gpu", "g5.xlarge", "spot", 1), Landing("gpu", "g5.2xlarge", "spot", 2)), 1.0
    )
    assert bill.where() == "gpu · g5.xlarge spot (1 pod), g5.2xlarge spot (2)"
    many = WorkloadBill("Job/x", 5, (Landing("a", "m5.large", "spot", 3), Landing("b", "m5.large", "spot", 2)), 1.0)
    assert many.where() == "a · m5.large spot (3 pods), b · m5.large spot (2)"
