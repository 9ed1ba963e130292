"""What an EC2NodeClass's `AMIsReady` and `InstanceProfileReady` read from AWS, against moto's server over HTTP
(`AwsCloudProvider.node_class`, Karpenter v1.14.1's `status.amis` and `status.instanceProfile`; aws
pkg/controllers/nodeclass/ami.go, instanceprofile.go): the images its AMI selection gives the catalog's instance
types now (DescribeImages for a selector, the family's SSM parameters for an alias), and whether IAM has the
instance profile its launches use (`iam:GetInstanceProfile`). A call that fails tells nothing (None); an empty
answer is an answer."""

from __future__ import annotations

import boto3

from .conftest import DISCOVERY, REGION, AwsEnv

DEFAULT_PROFILE = "KarpenterNodeInstanceProfile-blue"  # the `aws` fixture's ClusterSettings


def _iam(aws: AwsEnv) -> object:
    return boto3.client("iam", region_name=REGION, endpoint_url=aws.moto_url)


def test_the_alias_resolves_to_its_ssm_parameters_images(aws: AwsEnv) -> None:
    resolved = aws.provider().node_class(aws.spec())
    assert resolved.images == frozenset({aws.ami_amd64, aws.ami_arm64})  # the catalog has x86 and Graviton types


def test_a_selector_resolves_to_the_images_it_matches_and_to_none_when_it_matches_none(aws: AwsEnv) -> None:
    provider = aws.provider()
    assert provider.node_class(aws.spec(amiSelector=dict(DISCOVERY))).images == frozenset(
        {aws.ami_amd64, aws.ami_arm64})
    assert provider.node_class(aws.spec(amiSelector={"karpenter.sh/discovery": "nobody"})).images == frozenset()


def test_images_the_cloud_cannot_tell_are_none(aws: AwsEnv) -> None:
    provider = aws.provider(max_attempts=1)
    aws.proxy.fail("GetParameter", times=None)
    assert provider.node_class(aws.spec()).images is None


def test_the_instance_profile_is_found_once_iam_has_it(aws: AwsEnv) -> None:
    """The default profile (the class names none) is looked up, missing, then created; the answer is kept a
    minute, as the network's."""
    provider = aws.provider()
    resolved = provider.node_class(aws.spec())
    assert (resolved.instance_profile, resolved.instance_profile_found) == (DEFAULT_PROFILE, False)
    _iam(aws).create_instance_profile(InstanceProfileName=DEFAULT_PROFILE)  # type: ignore[attr-defined]
    assert provider.node_class(aws.spec()).instance_profile_found is False  # still the answer kept
    aws.clock.advance(61)
    assert provider.node_class(aws.spec()).instance_profile_found is True


def test_the_class_named_instance_profile_is_the_one_looked_up(aws: AwsEnv) -> None:
    _iam(aws).create_instance_profile(InstanceProfileName="team-nodes")  # type: ignore[attr-defined]
    resolved = aws.provider().node_class(aws.spec(instanceProfile="team-nodes"))
    assert (resolved.instance_profile, resolved.instance_profile_found) == ("team-nodes", True)


def test_an_instance_profile_iam_cannot_tell_is_none(aws: AwsEnv) -> None:
    provider = aws.provider(max_attempts=1)
    aws.proxy.fail("GetInstanceProfile", times=None)
    assert provider.node_class(aws.spec()).instance_profile_found is None
