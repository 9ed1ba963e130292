"""A pod one kind of pool ignores never lands on a node of that kind, in a repository holding both kinds, through
the real command line (issue #25). Karpenter ignores a pod its version's `Provisioner.Validate` rejects
(kubernetes-sigs/karpenter pkg/controllers/provisioning/provisioner.go, v0.31.1 and v1.14.1): that version never
schedules it anywhere — on a node it would launch, and on a node already running. Here v0.31.1 ignores the pods of
`follower` (a preferred node-affinity term on `kubernetes.io/hostname`, restricted in v0.31.1; v1.14.1 does not
validate preferred terms), while a Provisioner's node with room for them is running or planned:

- `check --workloads`: the second pass places pods next to the nodes the first pass planned (`checks/proof/
  outcome.py`); a follower required next to `anchor` (pod affinity on the hostname) is not put on anchor's planned
  Provisioner node;
- `simulate`: anchor's Provisioner node runs with room; the follower scaled up afterwards gets a NodePool's node."""

from __future__ import annotations

import json
import re
from pathlib import Path
from textwrap import dedent

import pytest

from tests.clirun import run_cli
from tests.v1documents import EC2_NODE_CLASS

_POOLS = dedent("""\
    apiVersion: karpenter.sh/v1alpha5
    kind: Provisioner
    metadata:
      name: old
    spec:
      weight: 100
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["c5.2xlarge"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
      providerRef: {name: default}
    ---
    apiVersion: karpenter.k8s.aws/v1alpha1
    kind: AWSNodeTemplate
    metadata:
      name: default
    spec:
      subnetSelector: {karpenter.sh/discovery: demo}
      securityGroupSelector: {karpenter.sh/discovery: demo}
    ---
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: new
    spec:
      template:
        spec:
          requirements:
            - key: node.kubernetes.io/instance-type
              operator: In
              values: ["c5.large"]
            - key: karpenter.sh/capacity-type
              operator: In
              values: ["on-demand"]
          nodeClassRef:
            group: karpenter.k8s.aws
            kind: EC2NodeClass
            name: default
    """) + EC2_NODE_CLASS

#: v0.31.1 ignores a pod with this term ("a preferred node affinity term: label kubernetes.io/hostname is
#: restricted"); v1.14.1 validates required terms only, and relaxes the preference away
_HOSTNAME_PREFERENCE = dedent("""\
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 10
          preference:
            matchExpressions:
              - {key: kubernetes.io/hostname, operator: In, values: [ip-10-0-0-1]}
    """)


def _deployment(name: str, replicas: int, cpu: str, affinity: str = "") -> str:
    """A Deployment of `replicas` pods requesting `cpu`, with `affinity` (YAML, unindented) as their affinity."""
    body = dedent(f"""\
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
        spec:
          replicas: {replicas}
          selector:
            matchLabels: {{app: {name}}}
          template:
            metadata:
              labels: {{app: {name}}}
            spec:
              containers:
                - name: app
                  image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
                  resources:
                    requests: {{cpu: {cpu}, memory: 128Mi}}
        """)
    if not affinity:
        return body
    return body + "      affinity:\n" + "".join(f"        {line}\n" for line in affinity.splitlines())


def test_check_never_puts_a_pod_v031_ignores_on_a_provisioners_planned_node(tmp_path: Path) -> None:
    """The follower must share anchor's node (required pod affinity on the hostname); anchor's node is the
    Provisioner's, whose Karpenter ignores the follower, and no NodePool node can hold anchor's pod: it stays
    unschedulable, with each pool's reason — never "on old" next to anchor."""
    affinity = _HOSTNAME_PREFERENCE + dedent("""\
        podAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: {matchLabels: {app: anchor}}
              topologyKey: kubernetes.io/hostname
        """)
    (tmp_path / "pools.yaml").write_text(_POOLS)
    (tmp_path / "apps.yaml").write_text(_deployment("anchor", 1, "1") + _deployment("follower", 1, "100m", affinity))
    result = run_cli("check", tmp_path / "pools.yaml", "--workloads", tmp_path / "apps.yaml", "--output", "json")
    data = json.loads(result.stdout)
    verdicts = {w["object"]: w for w in data["workloads"]}
    assert verdicts["Deployment/anchor"]["schedulable"] is True
    assert verdicts["Deployment/anchor"]["provisioner"] == "old"
    assert verdicts["Deployment/follower"]["schedulable"] is False, verdicts["Deployment/follower"]
    messages = [f["message"] for f in data["findings"]
                if f["rule"] == "workload-unschedulable" and f["object"] == "Deployment/follower"]  # fmt: skip
    assert len(messages) == 1
    assert "provisioner old: Karpenter ignores the pod" in messages[0]
    assert "a preferred node affinity term: label kubernetes.io/hostname is restricted" in messages[0]
    assert result.returncode == 1, result.stderr


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mixed-existing")
    (root / "pools.yaml").write_text(_POOLS)
    result = run_cli("compile", root / "pools.yaml", "-o", root / "build")
    assert result.returncode == 0, result.stdout + result.stderr
    return root / "build"


def _nodes(stdout: str) -> dict[str, int]:
    """The simulation's node table: pods per pool (`old`, `NodePool/new`)."""
    pods: dict[str, int] = {}
    for match in re.finditer(r"^\S+ +(NodePool/new|old) +c5\.\S+ +\S+ +on-demand +(\d+) ", stdout, re.MULTILINE):
        pods[match[1]] = pods.get(match[1], 0) + int(match[2])
    return pods


def test_simulate_never_binds_a_pod_v031_ignores_to_a_running_provisioners_node(
    tmp_path: Path, compiled: Path
) -> None:
    """anchor's pod gets the Provisioner's node (weight 100), which keeps room for many more; the follower, scaled
    up once that node runs, is ignored by v0.31: a NodePool's node is launched for it."""
    apps = tmp_path / "apps.yaml"
    apps.write_text(_deployment("anchor", 1, "100m") + _deployment("follower", 0, "100m", _HOSTNAME_PREFERENCE))
    result = run_cli("simulate", "--constraints", compiled, "--workloads", apps, "--scale", "deployment/follower=1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _nodes(result.stdout) == {"old": 1, "NodePool/new": 1}, result.stdout
