"""An EC2NodeClass's `amiSelectorTerms` launch as Karpenter v1.14.1 resolves them (issue #26): the launch settings carry
the terms, and the AWS adapter makes v1.14.1's calls (aws pkg/providers/amifamily/ami.go `DescribeImageQueries`,
`amis`) and reads their answers with `amiselection.resolve_terms`, the reading `plan` shares — `ssmParameter` terms
launch the image their parameter names, a tag value is literal (a comma is part of it), several terms are OR'd and
each architecture gets its newest image; AMI drift (`current_image`) reads the same. `ipPrefixCount` and
`connectionTracking` reach the launch template's primary network interface. Against moto's server over HTTP: moto
holds the images and the parameters (put_parameter); only AWS's public `/aws/service/` parameters are the proxy's."""

from __future__ import annotations

import dataclasses
from typing import Any

import boto3
import pytest

from karpenter_policy.api.v1.launchsettings import launch_settings
from karpenter_policy.cloud import ConfigurationError
from karpenter_policy.cloud.amiselection import Image, resolve_terms
from karpenter_policy.cloud.aws.api import AwsConnection
from karpenter_policy.cloud.aws.provider import AwsCloudProvider

from .conftest import DISCOVERY, K8S_VERSION, REGION, SMALL_CATALOG, AwsEnv, catalog_types
from .support import launch_template, offer, request

PARAMETER = "/my/custom/ami/parameter"


def node_class(**changes: Any) -> dict[str, Any]:
    """The launch settings of an EC2NodeClass selecting the test's subnets and group, with `changes`."""
    return launch_settings({
        "amiFamily": "AL2",
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
        **changes,
    })


def image(aws: AwsEnv, name: str, source: str | None = None, **tags: str) -> str:
    """A distinct image in moto (a copy of the x86 one, or of `source`), named and tagged so."""
    made = str(aws.ec2.copy_image(SourceImageId=source or aws.ami_amd64, SourceRegion=REGION, Name=name)["ImageId"])
    if tags:
        aws.ec2.create_tags(Resources=[made], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return made


def ssm(aws: AwsEnv) -> Any:
    return boto3.client("ssm", region_name=REGION, endpoint_url=aws.moto_url)


def parameters_asked(aws: AwsEnv) -> list[str]:
    return [str(call.params["Name"]) for call in aws.proxy.calls_to("GetParameter")]


# --- ssmParameter ------------------------------------------------------------------------------------------------


def test_an_ssm_parameter_term_launches_the_image_the_parameter_names(aws: AwsEnv) -> None:
    """amifamily suite_test.go:1153 "should succeed to resolve AMIs that use a custom SSM parameter": the parameter
    (moto's, put_parameter) names an image; the launch boots it, and AMI drift reads the same parameter again once
    the cache has expired: a new value is a new current image."""
    first, second = image(aws, "team-ami-1"), image(aws, "team-ami-2")
    ssm(aws).put_parameter(Name=PARAMETER, Value=first, Type="String")
    settings = node_class(amiSelectorTerms=[{"ssmParameter": PARAMETER}])
    assert settings["amiSelectorTerms"] == [{"ssmParameter": PARAMETER}]
    provider = aws.provider()

    made = provider.create(request(settings, [offer("m5.large", "us-east-1a")]))

    assert made.image_id == first
    assert parameters_asked(aws) == [PARAMETER]  # no default AMI looked up
    assert provider.current_image("m5.large", settings) == first
    assert provider.current_image("c6g.large", settings) is None  # an x86 image: no Arm type gets it
    ssm(aws).put_parameter(Name=PARAMETER, Value=second, Type="String", Overwrite=True)
    aws.clock.advance(301)
    assert provider.current_image("m5.large", settings) == second


def test_a_parameter_ssm_does_not_have_is_skipped_and_alone_fails_the_launch_naming_it(aws: AwsEnv) -> None:
    """amifamily suite_test.go:1167 "should not throw an error if SSM parameter is not found": the term is skipped
    (the others still select); with no other term nothing launches, and the error names the parameter."""
    provider = aws.provider()
    with_id = node_class(amiSelectorTerms=[{"ssmParameter": "/team/absent"}, {"id": aws.ami_amd64}])
    assert provider.current_image("m5.large", with_id) == aws.ami_amd64
    alone = node_class(amiSelectorTerms=[{"ssmParameter": "/team/absent"}])
    with pytest.raises(ConfigurationError, match="SSM parameters not found: /team/absent"):
        provider.create(request(alone, [offer("m5.large", "us-east-1a")]))
    assert aws.instances() == []


def test_a_parameter_that_names_no_image_id_is_skipped(aws: AwsEnv) -> None:
    """ami.go `DescribeImageQueries`: a value not starting `ami-` is logged and skipped."""
    ssm(aws).put_parameter(Name=PARAMETER, Value="not-an-image", Type="String")
    settings = node_class(amiSelectorTerms=[{"ssmParameter": PARAMETER}, {"id": aws.ami_arm64}])
    provider = aws.provider()
    assert provider.current_image("c6g.large", settings) == aws.ami_arm64
    assert provider.current_image("m5.large", settings) is None


# --- tag values are literal, terms OR'd ---------------------------------------------------------------------------


def test_two_tag_terms_with_a_comma_in_a_value_select_only_the_literal_value(aws: AwsEnv) -> None:
    """ami.go `DescribeImageQueries` at v1.14.1 puts a tag value in one filter value (`Values: []string{v}`): the
    term `team: red,blue` selects the image tagged `red,blue`, not the one tagged `red` (newer by name: it would win
    were the value split, as v0.31.1 splits an AWSNodeTemplate's `amiSelector`). The second term ORs an Arm image in."""
    literal = image(aws, "team-a", team="red,blue")
    split = image(aws, "team-z", team="red")
    arm = image(aws, "team-arm", aws.ami_arm64, env="prod")
    settings = node_class(amiSelectorTerms=[{"tags": {"team": "red,blue"}}, {"tags": {"env": "prod"}}])
    provider = aws.provider()

    assert provider.current_image("m5.large", settings) == literal
    assert provider.current_image("c6g.large", settings) == arm
    assert provider.node_class(settings).images == {literal, arm}
    made = provider.create(request(settings, [offer("m5.large", "us-east-1a")]))
    assert made.image_id == literal
    template = {**aws.spec(), "amiSelector": {"team": "red,blue"}}  # an AWSNodeTemplate: `red` or `blue`
    assert provider.current_image("m5.large", template) == split


def test_ids_and_names_are_ored_and_each_architecture_gets_its_newest(aws: AwsEnv) -> None:
    """ami.go `amis`: every query's images kept per requirement set (here the architecture) by `compareAMI` — the
    newest, then the greater name — as `resolve_terms` reads the same DescribeImages answers. An id term's older
    x86 image loses to the name term's newer one; the Arm type gets the only Arm image, of the name term."""
    older = image(aws, "team-ami-1")
    newer = image(aws, "team-ami-2")
    arm = image(aws, "team-ami-arm", aws.ami_arm64)
    terms = [{"id": older}, {"name": "team-ami-2"}, {"name": "team-ami-arm", "owner": "self"}]
    settings = node_class(amiSelectorTerms=terms)
    provider = aws.provider()

    assert provider.current_image("m5.large", settings) == newer
    assert provider.current_image("c6g.large", settings) == arm
    architectures = {"x86_64": "amd64", "arm64": "arm64"}
    described = [Image(i["ImageId"], architectures[i["Architecture"]], i["CreationDate"], i["Name"], i["OwnerId"])
                 for i in aws.ec2.describe_images(ImageIds=[older, newer, arm])["Images"]]
    expected = resolve_terms(terms, described, {}, (), K8S_VERSION, 0)
    assert {a.id for a in expected.amis} == {newer, arm}  # what `plan` reads of the same images
    only_id = node_class(amiSelectorTerms=[{"id": older}])
    assert provider.current_image("m5.large", only_id) == older


def test_the_calls_are_the_queries_of_describe_image_queries(aws: AwsEnv) -> None:
    """One DescribeImages per name/owner/tags term (a name's owners `self` and `amazon`), then one of every id and
    parameter value together; each filtered to available images, deprecated ones included (types.go
    `DescribeImagesInput`)."""
    named = image(aws, "team-ami-1")
    ssm(aws).put_parameter(Name=PARAMETER, Value=named, Type="String")
    terms = [{"name": "team-*"}, {"tags": {"team": "a,b", "tier": "*"}}, {"id": aws.ami_arm64},
             {"ssmParameter": PARAMETER}]
    aws.provider().current_image("m5.large", node_class(amiSelectorTerms=terms))
    calls = [call.params for call in aws.proxy.calls_to("DescribeImages")]

    def query(filters: list[tuple[str, list[str]]], owners: list[str]) -> dict[str, str]:
        out = {"Action": "DescribeImages", "IncludeDeprecated": "true"}
        for n, (name, values) in enumerate([*filters, ("state", ["available"])], start=1):
            out[f"Filter.{n}.Name"] = name
            out.update({f"Filter.{n}.Value.{m}": v for m, v in enumerate(values, start=1)})
        out.update({f"Owner.{m}": owner for m, owner in enumerate(owners, start=1)})
        return out

    assert [{k: v for k, v in c.items() if k != "Version"} for c in calls] == [
        query([("name", ["team-*"])], ["self", "amazon"]),
        query([("tag:team", ["a,b"]), ("tag-key", ["tier"])], []),
        query([("image-id", [aws.ami_arm64, named])], []),
    ]


# --- ipPrefixCount -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 10])
def test_ip_prefix_count_is_the_primary_interfaces_ipv4_prefix_count(aws: AwsEnv, count: int) -> None:
    """launchtemplate suite_test.go:2355 "should set 'IPv4PrefixCount' based on EC2NodeClass" (an IPv4 cluster):
    `NetworkInterfaces[0].Ipv4PrefixCount` is the class's value (launchtemplate.go:371), the groups on it."""
    provider = aws.provider()
    provider.create(request(node_class(ipPrefixCount=count), [offer("m5.large", "us-east-1a")]))
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    data = launch_template(aws.ec2, template["LaunchTemplateName"])
    (interface,) = data["NetworkInterfaces"]
    assert interface["Ipv4PrefixCount"] == count
    assert interface["DeviceIndex"] == 0 and interface["Groups"] == [aws.security_group]
    assert "SecurityGroupIds" not in data and "AssociatePublicIpAddress" not in interface


def test_ip_prefix_count_is_the_ipv6_prefix_count_of_an_ipv6_cluster(aws: AwsEnv) -> None:
    """launchtemplate suite_test.go:2370 "should set 'IPv6PrefixCount' based on EC2NodeClass": a cluster whose DNS IP
    is an IPv6 address is an IPv6 cluster (v1.14.1's `ClusterIPFamily`); its interface gets `Ipv6PrefixCount`."""
    ipv4 = aws.provider()
    connection = AwsConnection(REGION, endpoint_url=aws.proxy.url, max_attempts=3)
    provider = AwsCloudProvider(connection, dataclasses.replace(ipv4.cluster, dns_cluster_ip="fd00:10:100::a"),
                                catalog_types(SMALL_CATALOG), clock=aws.clock, sleep=lambda _: None)
    provider.create(request(node_class(ipPrefixCount=10), [offer("m5.large", "us-east-1a")]))
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    (interface,) = launch_template(aws.ec2, template["LaunchTemplateName"])["NetworkInterfaces"]
    assert interface["Ipv6PrefixCount"] == 10 and "Ipv4PrefixCount" not in interface


# --- connectionTracking --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tracking", "expected"), [
    ({"tcpEstablishedTimeout": 432000, "udpStreamTimeout": 180, "udpTimeout": 30},
     {"TcpEstablishedTimeout": 432000, "UdpStreamTimeout": 180, "UdpTimeout": 30}),
    ({"tcpEstablishedTimeout": 86400}, {"TcpEstablishedTimeout": 86400}),
])
def test_connection_tracking_is_the_primary_interfaces(aws: AwsEnv, tracking: dict[str, int],
                                                       expected: dict[str, int]) -> None:
    """launchtemplate suite_test.go:2586 "should set 'ConnectionTracking' based on EC2NodeClass" (its entries with
    AWS's defaults and with a TCP timeout alone; unset: no interface, test_aws_public_ip.py)."""
    aws.provider().create(request(node_class(connectionTracking=tracking), [offer("m5.large", "us-east-1a")]))
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    (interface,) = launch_template(aws.ec2, template["LaunchTemplateName"])["NetworkInterfaces"]
    assert interface["ConnectionTrackingSpecification"] == expected
    assert interface["Groups"] == [aws.security_group]
