"""`load_repository`: one read of a policy repository gives what the webhook and the commands build from — the report,
the valid Provisioners and AWSNodeTemplates, their taints, the PinningPolicy and PlacementTest documents and, when
proving, the proven provisioners (those with a non-scheduling error included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from karpenter_policy.api.violations import DUPLICATE_NAME
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.model.taints import Taint

ROOT = Path(__file__).resolve().parents[2]

TAINTED = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: batch
spec:
  taints:
    - {key: dedicated, value: batch, effect: NoSchedule}
  providerRef:
    name: nodes
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: nodes
spec:
  amiFamily: Bottlerocket
  subnetSelector: {karpenter.sh/discovery: prod}
  securityGroupSelector: {karpenter.sh/discovery: prod}
"""

PINNING = """\
apiVersion: karpenter-policy.dev/v1alpha1
kind: PinningPolicy
metadata:
  name: batch-jobs
spec:
  rules:
    - name: jobs-on-batch
      match: {labels: {team: batch}}
      provisioner: batch
---
apiVersion: karpenter-policy.dev/v1alpha1
kind: PlacementTest
metadata:
  name: placements
spec:
  tests:
    - name: jobs
      workload: {kind: Job, name: report}
      expect: {provisioner: batch}
"""

# consolidation with ttlSecondsAfterEmpty: refused by Karpenter, but nothing the solver reads is wrong
REFUSED_BUT_PROVABLE = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: refused
spec:
  consolidation: {enabled: true}
  ttlSecondsAfterEmpty: 30
  provider:
    subnetSelector: {karpenter.sh/discovery: prod}
    securityGroupSelector: {karpenter.sh/discovery: prod}
"""


def test_the_valid_objects_their_taints_and_the_pinning_and_test_documents(tmp_path: Path) -> None:
    (tmp_path / "batch.yaml").write_text(TAINTED)
    (tmp_path / "pinning.yaml").write_text(PINNING)

    repository = load_repository([str(tmp_path)])

    assert repository.report.errors == 0
    assert list(repository.provisioners) == ["batch"]
    assert list(repository.node_templates) == ["nodes"]
    assert repository.node_template_specs()["nodes"]["amiFamily"] == "Bottlerocket"
    assert repository.taints == {"batch": (Taint("dedicated", "NoSchedule", "batch"),)}
    assert [d.data["metadata"]["name"] for d in repository.pinning_documents] == ["batch-jobs"]
    assert [d.data["metadata"]["name"] for d in repository.placement_tests] == ["placements"]
    assert repository.checked == () and not repository.proven


def test_proving_takes_a_provisioner_whose_error_leaves_scheduling_alone(tmp_path: Path) -> None:
    (tmp_path / "refused.yaml").write_text(REFUSED_BUT_PROVABLE)

    repository = load_repository([str(tmp_path)], prove=True)

    assert repository.report.errors >= 1
    assert "refused" not in repository.provisioners  # not valid: nothing is built from it
    assert [(c.name, c.verdict) for c in repository.checked] == [("refused", Verdict.SAT)]  # but it is proven


def test_a_name_defined_twice_keeps_the_later_definition_and_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(TAINTED)
    (tmp_path / "b.yaml").write_text(TAINTED.replace("value: batch", "value: later"))

    repository = load_repository([str(tmp_path)])

    assert DUPLICATE_NAME in {f.rule for f in repository.report.findings}
    assert repository.provisioners["batch"].file.endswith("b.yaml")
    assert repository.taints["batch"] == (Taint("dedicated", "NoSchedule", "later"),)


def test_without_proving_the_solver_is_not_imported(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from karpenter_policy.checks.repository import load_repository\n"
        f"repository = load_repository([{str(ROOT / 'policies')!r}])\n"
        "print(len(repository.provisioners), 'z3' in sys.modules)\n"
    )
    env = {**os.environ, "KARPENTER_POLICY_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "False"]
