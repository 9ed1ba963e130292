"""`check --workloads` with Karpenter v1.14.1's instance labels that v0.31 did not have, through the real command
line: a Deployment selecting `karpenter.k8s.aws/instance-cpu-manufacturer` lands on a v1 NodePool whose types have
that maker and is refused, with the reason, where none has it; a v1alpha5 Provisioner still knows no such label
(aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go `computeRequirements`; v0.31.1 had none)."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

from tests.clirun import run_cli
from tests.v1documents import EC2_NODE_CLASS

_NODEPOOL = dedent("""\
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: intel-c5
    spec:
      template:
        spec:
          requirements:
            - key: karpenter.k8s.aws/instance-family
              operator: In
              values: ["c5"]
          nodeClassRef:
            group: karpenter.k8s.aws
            kind: EC2NodeClass
            name: default
    """) + EC2_NODE_CLASS
_PROVISIONER = dedent("""\
    apiVersion: karpenter.sh/v1alpha5
    kind: Provisioner
    metadata:
      name: intel-c5
    spec:
      requirements:
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: ["c5"]
    """)


def _deployment(maker: str) -> str:
    return dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: wants-{maker}
        spec:
          replicas: 1
          selector:
            matchLabels: {{app: wants-{maker}}}
          template:
            metadata:
              labels: {{app: wants-{maker}}}
            spec:
              nodeSelector:
                karpenter.k8s.aws/instance-cpu-manufacturer: {maker}
              containers:
                - name: app
                  image: nginx
                  resources:
                    requests: {{cpu: 500m, memory: 256Mi}}
        """)


def _check(tmp_path: Path, pools: str) -> dict[str, dict[str, object]]:
    (tmp_path / "pools").mkdir()
    (tmp_path / "pools" / "pool.yaml").write_text(pools)
    (tmp_path / "apps").mkdir()
    for maker in ("intel", "amd"):
        (tmp_path / "apps" / f"{maker}.yaml").write_text(_deployment(maker))
    result = run_cli("check", tmp_path / "pools", "--workloads", tmp_path / "apps", "--output", "json")
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    by_workload: dict[str, dict[str, object]] = {}
    for finding in findings:
        if finding.get("rule") in ("workload-unschedulable", "unknown-label-key"):
            by_workload.setdefault(f"{finding['rule']}:{finding['object']}", finding)
    return by_workload


def test_a_deployment_selecting_intel_lands_on_a_v1_nodepool_and_amd_is_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    found = _check(tmp_path, _NODEPOOL)
    assert "workload-unschedulable:Deployment/wants-intel" not in found
    refused = found["workload-unschedulable:Deployment/wants-amd"]
    assert "karpenter.k8s.aws/instance-family In [c5] and karpenter.k8s.aws/instance-cpu-manufacturer In [amd]" in str(
        refused["message"]
    )
    assert not any(key.startswith("unknown-label-key") for key in found)  # a v1 label, not a typo


def test_a_provisioner_still_knows_no_cpu_manufacturer(tmp_path: Path) -> None:
    found = _check(tmp_path, _PROVISIONER)
    for maker in ("intel", "amd"):
        refused = found[f"workload-unschedulable:Deployment/wants-{maker}"]
        assert "karpenter.k8s.aws/instance-cpu-manufacturer, which its nodes never have" in str(refused["message"])
