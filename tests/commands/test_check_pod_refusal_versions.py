"""`check --workloads` through the real command line: which pods Karpenter ignores depends on the kind of pool
(kubernetes-sigs/karpenter `pkg/controllers/provisioning/provisioner.go` `Validate`). Karpenter v1.14.1 validates
a pod's nodeSelector and its *required* node-affinity terms only, with v1's restricted labels; v0.31.1 validated
preferred terms too and never the nodeSelector. So a preferred term on `kubernetes.io/hostname` lands on a v1
NodePool and is refused on a Provisioner; a nodeSelector on it is refused on a NodePool in v1.14.1's words."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

from tests.clirun import run_cli
from tests.v1documents import EC2_NODE_CLASS

_NODEPOOL = dedent("""\
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: general
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
      name: general
    spec:
      requirements:
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: ["c5"]
      providerRef: {name: default}
    ---
    apiVersion: karpenter.k8s.aws/v1alpha1
    kind: AWSNodeTemplate
    metadata:
      name: default
    spec:
      subnetSelector: {karpenter.sh/discovery: demo}
      securityGroupSelector: {karpenter.sh/discovery: demo}
    """)


def _deployment(name: str, spec: str) -> str:
    head = dedent(f"""\
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
        spec:
          replicas: 1
          selector:
            matchLabels: {{app: {name}}}
          template:
            metadata:
              labels: {{app: {name}}}
            spec:
              containers:
                - name: app
                  image: nginx
                  resources:
                    requests: {{cpu: 500m, memory: 256Mi}}
        """)
    return head + "".join(f"      {line}\n" for line in dedent(spec).strip("\n").splitlines())


_APPS = _deployment(
    "hostname-preference",
    """
    affinity:
      nodeAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 10
            preference:
              matchExpressions:
                - {key: kubernetes.io/hostname, operator: In, values: [ip-10-0-0-1]}
    """,
) + _deployment(
    "hostname-selector",
    """
    nodeSelector:
      kubernetes.io/hostname: ip-10-0-0-1
    """,
)
_IGNORED = "Karpenter ignores the pod and never provisions a node for it: "


def _check(tmp_path: Path, pools: str) -> tuple[dict[str, Any], dict[str, str]]:
    (tmp_path / "pools.yaml").write_text(pools)
    (tmp_path / "apps.yaml").write_text(_APPS)
    result = run_cli("check", tmp_path / "pools.yaml", "--workloads", tmp_path / "apps.yaml", "--output", "json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    verdicts = {w["object"]: w for w in data["workloads"]}
    messages = {f["object"]: f["message"] for f in data["findings"] if f["rule"] == "workload-unschedulable"}
    return verdicts, messages


def test_a_preferred_hostname_term_lands_on_a_nodepool_and_a_hostname_selector_is_refused_in_v1_words(
    tmp_path: Path,
) -> None:
    verdicts, messages = _check(tmp_path, _NODEPOOL)
    assert verdicts["Deployment/hostname-preference"]["schedulable"] is True
    assert verdicts["Deployment/hostname-preference"]["provisioner"] == "NodePool/general"
    assert "Deployment/hostname-preference" not in messages
    assert verdicts["Deployment/hostname-selector"]["schedulable"] is False
    assert verdicts["Deployment/hostname-selector"]["refused"].startswith(
        "nodeSelector kubernetes.io/hostname: using label kubernetes.io/hostname is not allowed as it might "
        "interfere with the internal provisioning logic; specify a well known label: ["
    )
    assert messages["Deployment/hostname-selector"] == _IGNORED + verdicts["Deployment/hostname-selector"]["refused"]


def test_on_a_provisioner_the_preference_is_refused_and_the_selector_is_not(tmp_path: Path) -> None:
    verdicts, messages = _check(tmp_path, _PROVISIONER)
    assert verdicts["Deployment/hostname-preference"]["schedulable"] is False
    assert messages["Deployment/hostname-preference"].startswith(
        _IGNORED + "a preferred node affinity term: label kubernetes.io/hostname is restricted"
    )
    # v0.31 lets the selector through its validation: the pool's nodes are never named so, a template's reason
    assert "refused" not in verdicts["Deployment/hostname-selector"]
    assert messages["Deployment/hostname-selector"].startswith("no provisioner can launch a node for it")
