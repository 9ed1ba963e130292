"""Acceptance: Karpenter v1.14.1's topology spread fields through `check --workloads`, run as a subprocess.

examples/v1/topology/ — a NodePool in two zones and a tainted one in a third; two zone-spread Deployments that do not
tolerate the taint. With nodeTaintsPolicy left at v1's default (Ignore) the tainted pool's zone is a domain that stays
empty, so half of `web` cannot be placed; `web-honor` (nodeTaintsPolicy: Honor) lands whole. Which rules a run
follows is decided per repository (`checks/proof/placement.py` `scheduler_options`): v1.14.1's when it holds a
NodePool — also beside Provisioners — and v0.31's, which read none of these fields, when it holds Provisioners only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acceptance.test_v1_examples import V1_DIR, describe, relative, run_cli

TOPOLOGY = V1_DIR / "topology"

PROVISIONERS = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: general}
spec:
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
    - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
  providerRef: {name: default}
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: gpu}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1c]}
    - {key: karpenter.k8s.aws/instance-category, operator: In, values: [g]}
  providerRef: {name: default}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
"""

#: a Provisioner beside the NodePools, in us-east-1a, for pods that tolerate `team=legacy` only (neither Deployment)
LEGACY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: legacy}
spec:
  taints: [{key: team, value: legacy, effect: NoSchedule}]
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
  providerRef: {name: legacy}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: legacy}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def _check(policies: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("check", policies, "--workloads", relative(TOPOLOGY / "apps"), "--output", "json")
    assert result.stderr == ""
    return result.returncode, json.loads(result.stdout)


def _unplaced(report: dict[str, Any]) -> dict[str, str]:
    """Workload → the message of its workload-unschedulable finding."""
    return {f["object"]: f["message"] for f in report["findings"] if f["rule"] == "workload-unschedulable"}


def test_on_nodepools_a_tainted_pools_zone_counts_unless_node_taints_policy_honor() -> None:
    code, report = _check(relative(TOPOLOGY / "policies"))
    unplaced = _unplaced(report)
    assert code == 1 and set(unplaced) == {"Deployment/web"}, describe(report["findings"])
    assert "2 of its 4 replicas cannot be placed" in unplaced["Deployment/web"]
    assert "us-east-1c: 0" in unplaced["Deployment/web"]  # the empty domain that holds the spread back
    landed = {w["object"]: w["provisioner"] for w in report["workloads"]}
    assert landed["Deployment/web-honor"] == "NodePool/general"


def test_on_provisioners_only_the_policy_is_not_read(tmp_path: Path) -> None:
    """v0.31 has no nodeTaintsPolicy: the same pools as Provisioners hold both Deployments back alike."""
    (tmp_path / "provisioners.yaml").write_text(PROVISIONERS, encoding="utf-8")
    code, report = _check(str(tmp_path))
    unplaced = _unplaced(report)
    assert code == 1 and set(unplaced) == {"Deployment/web", "Deployment/web-honor"}, describe(report["findings"])
    assert all("2 of its 4 replicas cannot be placed" in message for message in unplaced.values())


def test_a_mixed_repository_is_planned_on_v1_rules(tmp_path: Path) -> None:
    """A Provisioner beside the NodePools (a repository mid-migration): the run follows v1.14.1, whose Karpenter is
    the one that reads the NodePools — `web-honor` lands whole as on NodePools alone."""
    (tmp_path / "nodepools.yaml").write_text(
        (TOPOLOGY / "policies" / "nodepools.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "legacy.yaml").write_text(LEGACY, encoding="utf-8")
    code, report = _check(str(tmp_path))
    assert report["summary"]["kinds"]["Provisioner"] == 1 and report["summary"]["kinds"]["NodePool"] == 2
    assert set(_unplaced(report)) == {"Deployment/web"}, describe(report["findings"])
