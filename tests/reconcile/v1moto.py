"""The v1 controller tests' shared parts: the EC2NodeClass most of their policies use, a step-driven `Scene` whose
cloud is the production AWS adapter against moto's EC2 over HTTP, and what a launch template it wrote says."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from karpenter_policy.catalog import load_catalog
from karpenter_policy.testing import EPOCH, MotoCloud, Scene, VirtualClock

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


@contextmanager
def moto_scene(compiled: Path, region: str = "us-east-1") -> Iterator[tuple[Scene, MotoCloud]]:
    """A scene of the compiled policies on a virtual clock whose cloud is moto's, the account made from the sets."""
    clock = VirtualClock(EPOCH)
    loaded = Scene(compiled).loaded
    with MotoCloud(loaded.sets, load_catalog(), clock, region=region) as moto:
        yield Scene(loaded, cloud=moto.provider, clock=clock), moto


def launch_template_data(moto: MotoCloud) -> dict[str, Any]:
    """The latest version's data of the first launch template in moto's EC2 (what the controller wrote)."""
    name = moto.api.call("ec2", "describe_launch_templates")["LaunchTemplates"][0]["LaunchTemplateName"]
    versions = moto.api.call("ec2", "describe_launch_template_versions", LaunchTemplateName=name, Versions=["$Latest"])
    data: dict[str, Any] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


__all__ = ["NODE_CLASS", "launch_template_data", "moto_scene"]
