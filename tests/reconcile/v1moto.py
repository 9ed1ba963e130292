"""The v1 controller tests' shared parts: the EC2NodeClass most of their policies use, the v0.31 Provisioner they
put beside their NodePools, a step-driven `Scene` whose cloud is the production AWS adapter against moto's EC2 over
HTTP (empty, or with a pod bound to the node launched for it), and what a launch template it wrote says."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import EPOCH, Controller, MotoCloud, Scene, VirtualClock, compile_policies

#: An EC2NodeClass named `default`: AL2's latest image, the test account's subnets and security groups by tag.
NODE_CLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
    - alias: al2@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: test}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: test}
"""


#: A NodePool named `default` of on-demand amd64 nodes of the `default` class; ends with a document separator.
DEFAULT_NODEPOOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
---
"""


def drifting_nodepool(name: str, consolidate_after: str = "Never", budget_nodes: str = "") -> str:
    """A NodePool of on-demand m5.large to m5.2xlarge nodes of the `default` class that never expire (drift is what
    rolls them), `budget_nodes` its one budget's nodes ("": none, Karpenter's default of 10 %). Ends with a document
    separator."""
    budgets = f'    budgets:\n      - nodes: "{budget_nodes}"\n' if budget_nodes else ""
    return f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: {consolidate_after}
{budgets}  template:
    spec:
      expireAfter: Never
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}}
        - {{key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large", "m5.xlarge", "m5.2xlarge"]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---
"""


def legacy_provisioner(instance_types: Sequence[str] = ()) -> str:
    """A v0.31 Provisioner named `legacy` (on-demand, of `instance_types` when given) to put beside the NodePools: its
    nodes keep v0.31.1's semantics. Ends with a document separator."""
    listed = json.dumps(list(instance_types))
    types = f"\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: {listed}}}"
    return f"""apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: legacy
spec:
  requirements:
    - {{key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}}{types if instance_types else ""}
  provider:
    subnetSelector: {{karpenter.sh/discovery: test}}
    securityGroupSelector: {{karpenter.sh/discovery: test}}
---
"""


@contextmanager
def moto_scene(compiled: Path, region: str = "us-east-1") -> Iterator[tuple[Scene, MotoCloud]]:
    """A scene of the compiled policies on a virtual clock whose cloud is moto's, the account made from the sets."""
    clock = VirtualClock(EPOCH)
    loaded = Scene(compiled).loaded
    with MotoCloud(loaded.sets, load_catalog(), clock, region=region) as moto:
        yield Scene(loaded, cloud=moto.provider, clock=clock), moto


@contextmanager
def moto_launched(
    policies: str, directory: Path, pool: str = "default"
) -> Iterator[tuple[Scene, MotoCloud, Controller]]:
    """`policies` (one file's text) compiled in `directory`, on moto (`moto_scene`): a pod of 1 vCPU for the NodePool
    `pool`, bound to the node the controller launched for it."""
    (directory / "policies").mkdir()
    (directory / "policies" / "nodepools.yaml").write_text(policies)
    compiled = compile_policies(directory / "policies", directory / "build")
    with moto_scene(compiled) as (scene, moto):
        scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: pool})
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: not scene.unbound())
        assert not scene.unbound()
        yield scene, moto, controller


def launch_template_data(moto: MotoCloud) -> dict[str, Any]:
    """The latest version's data of the first launch template in moto's EC2 (what the controller wrote)."""
    name = moto.api.call("ec2", "describe_launch_templates")["LaunchTemplates"][0]["LaunchTemplateName"]
    versions = moto.api.call("ec2", "describe_launch_template_versions", LaunchTemplateName=name, Versions=["$Latest"])
    data: dict[str, Any] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


__all__ = [
    "NODE_CLASS", "drifting_nodepool", "launch_template_data", "legacy_provisioner", "moto_launched", "moto_scene",
]
