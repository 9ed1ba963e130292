"""`diff --equivalent` and `migrate --workloads` say of a workload the Kubernetes API server refuses what `check
--workloads` says (`model/podadmission.py`): an `invalid-workload` error at file:line:column of the refused field, in
the API server's words, and an exit code for an error (1). Before, both left such a workload out of their comparison
without a word, and `diff --equivalent` called the refactor equivalent."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.commands.equivalent import equivalent_command
from karpenter_policy.commands.flags import DiffFlags
from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command
from tests.commands.test_diff_equivalent import TEMPLATE, run_equivalent

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "karpenter-v0.31.5-examples"
PROVISIONER = """apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {name}
spec:
  providerRef:
    name: default
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [m5]
    - key: karpenter.sh/capacity-type
      operator: In
      values: [on-demand]
"""
APP = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: c
          image: nginx
          resources:
            requests: {cpu: 500m}
"""
# The API server refuses it: an extended resource requested without a limit (line 16: the request).
REFUSED = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
spec:
  selector:
    matchLabels: {app: trainer}
  template:
    metadata:
      labels: {app: trainer}
    spec:
      containers:
        - name: c
          image: trainer
          resources:
            requests: {cpu: "1", vpc.amazonaws.com/efa: "1"}
"""
WORDS = "the API server refuses this pod: Required value: Limit must be set for non overcommitable resources"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _sides(tmp_path: Path, head_name: str = "general") -> Path:
    for side, name in (("base", "general"), ("head", head_name)):
        (tmp_path / side / "policies").mkdir(parents=True)
        (tmp_path / side / "policies" / "template.yaml").write_text(TEMPLATE)
        (tmp_path / side / "policies" / "pool.yaml").write_text(PROVISIONER.format(name=name))
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "web.yaml").write_text(APP)
    return tmp_path


def test_equivalent_with_every_workload_admitted_is_still_exit_0(tmp_path: Path, catalog: Catalog) -> None:
    """The control: a rename of the pool, every workload admitted."""
    repo = _sides(tmp_path, head_name="renamed")

    result = run_equivalent(repo, catalog)

    assert result.exit_code == 0, result.stdout


def test_equivalent_reports_a_workload_head_refuses_at_its_field_and_exits_1(tmp_path: Path, catalog: Catalog) -> None:
    repo = _sides(tmp_path, head_name="renamed")
    (repo / "apps" / "trainer.yaml").write_text(REFUSED)

    result = run_equivalent(repo, catalog)

    assert result.exit_code == 1, result.stdout
    first, summary = result.stdout.splitlines()
    assert first == (
        f"{repo / 'apps' / 'trainer.yaml'}:16:57: error: Deployment/trainer: {WORDS} (vpc.amazonaws.com/efa has no "
        "limit) [invalid-workload]"
    )
    assert summary == f"NOT equivalent: {repo / 'head'} has 1 error finding"


def test_equivalent_json_gives_the_refusal_as_fields(tmp_path: Path, catalog: Catalog) -> None:
    repo = _sides(tmp_path)
    (repo / "apps" / "trainer.yaml").write_text(REFUSED)

    data = json.loads(run_equivalent(repo, catalog, output="json").stdout)

    assert data["equivalent"] is False and data["head_errors"] == 1 and data["changed"] == []
    (refused,) = data["refused"]
    assert refused["rule"] == "invalid-workload" and refused["workload"] == "Deployment/trainer"
    assert (refused["line"], refused["column"]) == (16, 57) and refused["message"].startswith(WORDS)


def _migrate_repo(tmp_path: Path, *, refused: bool) -> tuple[Path, Path]:
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(EXAMPLES / "spot.yaml", policies / "spot.yaml")
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "web.yaml").write_text(APP)
    if refused:
        (apps / "trainer.yaml").write_text(REFUSED)
    return policies, apps


def _migrate(policies: Path, apps: Path, catalog: Catalog) -> CommandOutput:
    options = MigrateOptions(default_instance_profile="KarpenterNodeInstanceProfile", workloads=(str(apps),))
    return migrate_command([str(policies)], options, catalog)


def test_migrate_workloads_with_every_workload_admitted_is_exit_0(tmp_path: Path, catalog: Catalog) -> None:
    """The control: the same repository without the refused workload."""
    policies, apps = _migrate_repo(tmp_path, refused=False)

    result = _migrate(policies, apps, catalog)

    assert result.exit_code == 0, result.stdout
    assert "workloads: 1 workload lands where it did (placed again on the migrated files)\n" in result.stdout


def test_migrate_workloads_reports_a_refused_workload_at_its_field_exit_1(tmp_path: Path, catalog: Catalog) -> None:
    policies, apps = _migrate_repo(tmp_path, refused=True)

    result = _migrate(policies, apps, catalog)

    assert result.exit_code == 1, result.stdout
    assert (
        f"{apps / 'trainer.yaml'}:16:57: error: Deployment/trainer: {WORDS} (vpc.amazonaws.com/efa has no limit) "
        "[invalid-workload]"
    ) in result.stdout
    assert (
        "workloads: 1 workload lands where it did (placed again on the migrated files); 1 not placed "
        "(invalid-workload)\n"
    ) in result.stdout


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo, check=True, capture_output=True,
    )


def test_equivalent_says_base_refused_a_workload_head_has(
    tmp_path: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git sides: BASE's trainer asked for EFA without a limit, HEAD's sets the limit. It is "only in HEAD", and
    the line says why (before, the same words as for a workload added in HEAD)."""
    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    (repo / "policies" / "template.yaml").write_text(TEMPLATE)
    (repo / "policies" / "pool.yaml").write_text(PROVISIONER.format(name="general"))
    (repo / "apps").mkdir()
    (repo / "apps" / "trainer.yaml").write_text(REFUSED)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    fixed = REFUSED.replace('"1"}\n', '"1"}\n            limits: {vpc.amazonaws.com/efa: "1"}\n')
    (repo / "apps" / "trainer.yaml").write_text(fixed)
    _git(repo, "commit", "-qam", "head")
    monkeypatch.chdir(repo)
    flags = DiffFlags(base="HEAD~1", head="HEAD", paths=("policies",), workload_paths=("apps",), equivalent=True)

    result = equivalent_command(flags, catalog)

    assert result.exit_code == 1, result.stdout
    assert result.stdout.splitlines()[0] == (
        "apps/trainer.yaml:8:3: Deployment/trainer: only in HEAD (HEAD~1 cannot read it or the API server refuses "
        "it: invalid-workload): a workload on one side cannot be compared"
    )
