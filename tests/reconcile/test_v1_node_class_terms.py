"""The controller launches a NodePool whose EC2NodeClass has several subnet terms, `associatePublicIPAddress: false`
and `instanceStorePolicy: RAID0` (issue #26) — the production AWS adapter against moto's EC2 over HTTP, the
simulated account made from the class's terms (`simulate.account`): the NodePool is no longer left out, its pod is
bound to a node in a subnet of either term, launched from a template saying both settings."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from .v1moto import DEFAULT_NODEPOOL, launch_template_data, moto_launched

POLICY = DEFAULT_NODEPOOL + """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2@latest
  subnetSelectorTerms:
    - tags:
        Name: private-a
    - tags:
        Name: private-b
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  associatePublicIPAddress: false
  instanceStorePolicy: RAID0
"""


@pytest.mark.slow
def test_a_class_of_several_subnet_terms_public_ip_and_raid0_launches(tmp_path: Path) -> None:
    with moto_launched(POLICY, tmp_path) as (scene, moto, _):
        (launched,) = moto.provider.list(scene.options().cluster_name)
        named = {
            str(s["SubnetId"]): {t["Key"]: t["Value"] for t in s.get("Tags") or []}.get("Name")
            for s in moto.api.call("ec2", "describe_subnets")["Subnets"]
        }
        assert {"private-a", "private-b"} <= set(named.values())  # the account has subnets of both terms
        assert named[launched.subnet_id] in {"private-a", "private-b"}
        data = launch_template_data(moto)
        (interface,) = data["NetworkInterfaces"]
        assert interface["AssociatePublicIpAddress"] is False and interface["Groups"]
        assert "--local-disks raid0" in base64.b64decode(data["UserData"]).decode()


SSM_POLICY = POLICY.replace("""  amiSelectorTerms:
    - alias: al2@latest
""", """  amiFamily: AL2
  amiSelectorTerms:
    - ssmParameter: /platform/eks/node-ami
  ipPrefixCount: 2
""")


@pytest.mark.slow
def test_an_ssm_parameter_class_launches_its_image_with_ip_prefixes_and_drifts_when_the_parameter_moves(
    tmp_path: Path,
) -> None:
    """A NodePool whose EC2NodeClass names its AMI by `ssmParameter` and asks for `ipPrefixCount: 2` (both refused
    until s13-amiterms) launches on moto's EC2 and SSM over HTTP: the node boots the image the parameter names (the
    simulated account puts it), its launch template's primary interface has 2 IPv4 prefixes. The parameter then
    names another image: once the 5-minute cache lapses, AMI drift (`current_image`, the same resolution as the
    launch: aws pkg/cloudprovider/drift.go `isAMIDrifted`) replaces the node with one of the new image."""
    with moto_launched(SSM_POLICY, tmp_path) as (scene, moto, controller):
        named = moto.api.call("ssm", "get_parameter", Name="/platform/eks/node-ami")["Parameter"]["Value"]
        (first,) = moto.provider.list(scene.options().cluster_name)
        assert first.image_id == named == moto.account.images["amd64"]
        data = launch_template_data(moto)
        (interface,) = data["NetworkInterfaces"]
        assert interface["Ipv4PrefixCount"] == 2 and interface["Groups"]

        moved = moto.api.call("ec2", "copy_image", SourceImageId=named, SourceRegion="us-east-1",
                              Name="platform-node-2")["ImageId"]
        moto.api.call("ssm", "put_parameter", Name="/platform/eks/node-ami", Value=moved, Type="String",
                      Overwrite=True)
        scene.run(controller, 1800, until=lambda: first.id not in {i.id for i in moto.provider.list(
            scene.options().cluster_name)} and not scene.unbound())
        (now,) = moto.provider.list(scene.options().cluster_name)
        assert now.id != first.id and now.image_id == moved
        assert scene.unbound() == []
