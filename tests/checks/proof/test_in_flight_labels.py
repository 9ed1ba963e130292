"""A node planned in an earlier pass of `check --workloads` (in flight, `outcome._in_flight`) carries its pool's
owner label as Karpenter labels it: a NodePool's node `karpenter.sh/nodepool`, never v0.31's
`karpenter.sh/provisioner-name` (core-v1 pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go
`NewNodeClaimTemplate`). A pod selecting its NodePool by that label packs onto such a node. Through the real CLI."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

from tests.workloadcheck import check_workloads

POLICIES = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: t}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: t}}]
"""

#: `zk` lands somewhere in the first pass, its zone undecided until its node is in flight; `web` is pinned to
#: us-east-1c. `late` keeps off zk's zone and follows web onto its node: only the second pass, with zk's zone
#: known, can place it — on web's planned node, which it selects by `karpenter.sh/nodepool`.
APPS = """\
apiVersion: v1
kind: Pod
metadata: {name: zk, labels: {app: zk}}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}
  containers: [{name: app, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  nodeSelector: {topology.kubernetes.io/zone: us-east-1c}
  containers: [{name: app, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: late}
spec:
  nodeSelector: {%s: default}
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - {labelSelector: {matchLabels: {app: zk}}, topologyKey: topology.kubernetes.io/zone}
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}
  containers: [{name: app, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"""


def test_a_pod_selecting_its_nodepool_packs_onto_a_planned_node_of_it(tmp_path: Path) -> None:
    code, report = check_workloads(tmp_path, POLICIES, dedent(APPS % "karpenter.sh/nodepool"))
    assert code == 0, [f["message"] for f in report["findings"] if f["severity"] == "error"]
    assert {w["object"]: w["schedulable"] for w in report["workloads"]} == {
        "Pod/zk": True, "Pod/web": True, "Pod/late": True}
    nodes = {tuple(sorted(n["workloads"])): n["zone"] for n in report["capacity"]["nodes"]}
    assert nodes[("Pod/late", "Pod/web")] == "us-east-1c"


def test_a_pod_selecting_the_v031_label_never_lands_on_a_nodepools_planned_node(tmp_path: Path) -> None:
    code, report = check_workloads(tmp_path, POLICIES, dedent(APPS % "karpenter.sh/provisioner-name"))
    assert code == 1
    assert {w["object"]: w["schedulable"] for w in report["workloads"]}["Pod/late"] is False
