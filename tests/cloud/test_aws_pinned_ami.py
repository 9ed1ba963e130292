"""An EC2NodeClass alias pinned to a release (`al2023@v20240807`) launches that release's image, found by the SSM
parameter Karpenter v1.14.1 names for it (aws pkg/providers/amifamily/al2.go, al2023.go, bottlerocket.go
`DescribeImageQuery`) — against moto's server over HTTP, the public parameters served by the proxy."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from karpenter_policy.api.v1.launchsettings import LaunchSettingsError, launch_settings
from karpenter_policy.cloud import ConfigurationError
from karpenter_policy.cloud.aws.amis import default_parameter

from .conftest import CLUSTER, DISCOVERY, K8S_VERSION, REGION, SSM_AL2, AwsEnv, _ssm_stub, catalog_types
from .support import offer, request

AL2_PINNED = (f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2/"
              f"amazon-eks-node-{K8S_VERSION}-v20240807/image_id")
AL2023_PINNED = (f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/x86_64/standard/"
                 f"amazon-eks-node-al2023-x86_64-standard-{K8S_VERSION}-v20240807/image_id")
AL2023_LATEST = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/x86_64/standard/recommended/image_id"


def node_class(alias: str) -> dict[str, Any]:
    """What the controller launches with for an EC2NodeClass of this alias (`api.v1.launchsettings`)."""
    return launch_settings({
        "amiSelectorTerms": [{"alias": alias}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
    })


def release(aws: AwsEnv, name: str) -> str:
    """A distinct image in moto (a copy of the x86 one)."""
    return str(aws.ec2.copy_image(SourceImageId=aws.ami_amd64, SourceRegion=REGION, Name=name)["ImageId"])


def test_the_parameters_are_named_as_karpenter_v1_14_1_names_them() -> None:
    (m5,) = catalog_types(["m5.large"])
    (c6g,) = catalog_types(["c6g.large"])
    (g4dn,) = catalog_types(["g4dn.xlarge"])
    assert default_parameter("AL2", "1.27", m5, "v20240807") == AL2_PINNED.replace(K8S_VERSION, "1.27")
    assert default_parameter("AL2", "1.27", c6g, "v20240807") == (
        "/aws/service/eks/optimized-ami/1.27/amazon-linux-2-arm64/amazon-eks-arm64-node-1.27-v20240807/image_id")
    assert default_parameter("AL2", "1.27", g4dn, "v20240807") == (
        "/aws/service/eks/optimized-ami/1.27/amazon-linux-2-gpu/amazon-eks-gpu-node-1.27-v20240807/image_id")
    assert default_parameter("AL2023", "1.27", g4dn, "v20240807") == (
        "/aws/service/eks/optimized-ami/1.27/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.27-v20240807/image_id")
    # Bottlerocket's SSM path names the release without its v (bottlerocket.go: strings.TrimLeft)
    assert default_parameter("Bottlerocket", "1.27", c6g, "v1.20.3") == (
        "/aws/service/bottlerocket/aws-k8s-1.27/arm64/1.20.3/image_id")
    assert default_parameter("AL2", "1.27", m5, "latest") == (
        "/aws/service/eks/optimized-ami/1.27/amazon-linux-2/recommended/image_id")


def test_a_pinned_al2_alias_launches_its_release_not_the_latest(aws: AwsEnv) -> None:
    pinned = release(aws, "amazon-eks-node-v20240807")
    aws.proxy.serve("GetParameter", _ssm_stub({AL2_PINNED: pinned, SSM_AL2: aws.ami_amd64}))
    provider = aws.provider()
    spec = node_class("al2@v20240807")
    assert spec["amiSelectorTerms"] == [{"alias": "al2@v20240807"}] and spec["amiFamily"] == "AL2"

    instance = provider.create(request(spec, [offer("m5.large", "us-east-1a")]))

    assert instance.image_id == pinned
    assert provider.current_image("m5.large", spec) == pinned  # AMI drift compares with the pinned release
    assert provider.current_image("m5.large", node_class("al2@latest")) == aws.ami_amd64


def test_a_pinned_al2023_alias_launches_its_release(aws: AwsEnv) -> None:
    boto3.client("eks", region_name=REGION, endpoint_url=aws.moto_url).create_cluster(
        name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={},
        kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"})
    pinned, latest = release(aws, "al2023-v20240807"), release(aws, "al2023-latest")
    aws.proxy.serve("GetParameter", _ssm_stub({AL2023_PINNED: pinned, AL2023_LATEST: latest}))
    provider = aws.provider()

    instance = provider.create(request(node_class("al2023@v20240807"), [offer("m5.large", "us-east-1a")]))

    assert instance.image_id == pinned


def test_a_release_ssm_does_not_name_fails_the_launch_naming_the_parameter(aws: AwsEnv) -> None:
    provider = aws.provider()
    with pytest.raises(ConfigurationError, match="amazon-eks-node-1.27-v19990101"):
        provider.create(request(node_class("al2@v19990101"), [offer("m5.large", "us-east-1a")]))
    assert aws.instances() == []


def test_windows_aliases_stay_latest_only() -> None:
    with pytest.raises(LaunchSettingsError, match="has its latest AMI only"):
        node_class("windows2022@v1")
