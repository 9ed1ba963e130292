"""An EC2NodeClass's several selector terms launch (issue #26): each term of `subnetSelectorTerms`,
`securityGroupSelectorTerms` and `amiSelectorTerms` is asked of EC2 on its own (its fields ANDed) and what the terms
match is unioned by id, as Karpenter v1.14.1's `List` (aws pkg/providers/subnet/subnet.go, securitygroup/
securitygroup.go: `getFilterSets`) and `DescribeImageQueries` (amifamily/ami.go) do — against moto's server over HTTP.
The launch settings carry the subnet and security-group terms as they are, and the controller asks EC2 with
`networkselection.filter_sets` of them (a tag value literal); an AWSNodeTemplate keeps its one selector (a tag value
split at commas); AMI terms are carried as terms too, resolved by `amiselection.resolve_terms`
(test_aws_ami_terms.py)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.api.v1.launchsettings import LaunchSettingsError, launch_settings, selectors
from karpenter_policy.cloud import ConfigurationError
from karpenter_policy.cloud.networkselection import GROUP_ID, SUBNET_ID, filter_sets
from karpenter_policy.cloud.provider import Network

from .conftest import DISCOVERY, AwsEnv
from .support import launch_template, offer, request


def node_class(**changes: Any) -> dict[str, Any]:
    """The launch settings of an EC2NodeClass selecting the test's subnets, group and AMIs, with `changes`."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": [{"tags": DISCOVERY}],
        **changes,
    }
    return launch_settings(spec)


def vpc_of(aws: AwsEnv) -> str:
    return str(aws.ec2.describe_security_groups(GroupIds=[aws.security_group])["SecurityGroups"][0]["VpcId"])


def tag(aws: AwsEnv, resource: str, **tags: str) -> None:
    aws.ec2.create_tags(Resources=[resource], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])


def group(aws: AwsEnv, name: str, **tags: str) -> str:
    pairs = [{"Key": k, "Value": v} for k, v in tags.items()]
    specification = [{"ResourceType": "security-group", "Tags": pairs}] if pairs else []
    return str(aws.ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc_of(aws),
                                             TagSpecifications=specification)["GroupId"])


# --- the launch settings -----------------------------------------------------------------------------------------


def test_network_terms_are_carried_as_terms_and_asked_as_get_filter_sets_builds_them() -> None:
    """subnet.go / securitygroup.go `getFilterSets`: each tags term its own set, in order, then every {id} term in
    one `subnet-id` / `group-id` filter (a mix of id and tag terms is not refused), every {name} one `group-name`."""
    settings = node_class(subnetSelectorTerms=[{"id": "subnet-1"}, {"tags": {"Name": "a"}}, {"id": "subnet-2"}],
                          securityGroupSelectorTerms=[{"name": "n", "tags": {"x": "y"}}, {"tags": {"k": "*"}}])
    assert settings["subnetSelectorTerms"] == [{"id": "subnet-1"}, {"tags": {"Name": "a"}}, {"id": "subnet-2"}]
    assert "subnetSelector" not in settings and "subnetSelectors" not in settings
    assert filter_sets(settings, SUBNET_ID) == [
        [{"Name": "tag:Name", "Values": ["a"]}], [{"Name": "subnet-id", "Values": ["subnet-1", "subnet-2"]}]]
    assert filter_sets(settings, GROUP_ID) == [
        [{"Name": "tag-key", "Values": ["k"]}], [{"Name": "group-name", "Values": ["n"]}]]


def test_several_ami_terms_are_carried_as_terms() -> None:
    settings = node_class(amiFamily="AL2", amiSelectorTerms=[
        {"tags": {"tag-key-1": "tag-value-1"}}, {"name": "eks-*", "owner": "self"}, {"id": "ami-1"}])
    assert settings["amiSelectorTerms"] == [
        {"tags": {"tag-key-1": "tag-value-1"}}, {"name": "eks-*", "owner": "self"}, {"id": "ami-1"}]
    assert settings["amiFamily"] == "AL2" and "amiSelector" not in settings and "amiSelectors" not in settings


def test_a_term_the_controller_cannot_read_is_refused_naming_its_index() -> None:
    with pytest.raises(LaunchSettingsError, match=r"subnetSelectorTerms\[1\]: selects by name"):
        node_class(subnetSelectorTerms=[{"tags": {"Name": "a"}}, {"name": "b"}])
    with pytest.raises(LaunchSettingsError, match=r"amiSelectorTerms\[1\]: selects by nothing"):
        node_class(amiSelectorTerms=[{"tags": {"a": "b"}}, {}])


def test_an_aws_node_templates_one_selector_is_read_unchanged() -> None:
    template = {"subnetSelector": {"karpenter.sh/discovery": "blue", "tier": "a,b"},
                "amiSelector": {"aws-ids": "ami-1"}}
    assert selectors(template, "subnetSelector") == ({"karpenter.sh/discovery": "blue", "tier": "a,b"},)
    assert selectors(template, "amiSelector") == ({"aws-ids": "ami-1"},)
    assert selectors(template, "securityGroupSelector") == ()


# --- subnets over moto -------------------------------------------------------------------------------------------


def test_two_tag_terms_select_the_subnets_of_both_and_launch_into_either(aws: AwsEnv) -> None:
    """subnet suite_test.go:196 "should discover subnets by multiple tag values" (`Name` test-subnet-1 / -2)."""
    tag(aws, aws.subnets["us-east-1a"], Name="test-subnet-1")
    tag(aws, aws.subnets["us-east-1b"], Name="test-subnet-2")
    settings = node_class(subnetSelectorTerms=[{"tags": {"Name": "test-subnet-1"}},
                                               {"tags": {"Name": "test-subnet-2"}}])
    provider = aws.provider()
    network = provider.network(settings)
    assert network is not None
    assert network.subnets == {aws.subnets["us-east-1a"], aws.subnets["us-east-1b"]}
    zones = {o.zone for it in provider.instance_types(provider=settings) for o in it.offerings}
    assert zones == {"us-east-1a", "us-east-1b"}  # us-east-1c's subnet is not selected
    made = provider.create(request(settings, [offer("m5.large", "us-east-1b")]))
    assert made.subnet_id == aws.subnets["us-east-1b"]


def test_a_term_matching_nothing_does_not_empty_the_others(aws: AwsEnv) -> None:
    settings = node_class(subnetSelectorTerms=[{"tags": {"Name": "nowhere"}}, {"tags": DISCOVERY}])
    network = aws.provider().network(settings)
    assert network is not None and network.subnets == frozenset(aws.subnets.values())


def test_id_terms_select_each_subnet_they_name(aws: AwsEnv) -> None:
    """subnet suite_test.go:120 "should discover subnets by IDs"."""
    chosen = [aws.subnets["us-east-1a"], aws.subnets["us-east-1c"]]
    settings = node_class(subnetSelectorTerms=[{"id": chosen[0]}, {"id": chosen[1]}])
    network = aws.provider().network(settings)
    assert network is not None and network.subnets == frozenset(chosen)


def test_ids_and_tags_in_separate_terms_select_the_union(aws: AwsEnv) -> None:
    tag(aws, aws.subnets["us-east-1b"], Name="b")
    settings = node_class(subnetSelectorTerms=[{"id": aws.subnets["us-east-1a"]}, {"tags": {"Name": "b"}}])
    network = aws.provider().network(settings)
    assert network is not None
    assert network.subnets == {aws.subnets["us-east-1a"], aws.subnets["us-east-1b"]}


def test_tags_of_one_term_are_anded_and_tags_of_two_terms_ored(aws: AwsEnv) -> None:
    """subnet suite_test.go:371 "should correctly disambiguate AND vs OR semantics for tags"."""
    tag(aws, aws.subnets["us-east-1a"], **{"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"})
    tag(aws, aws.subnets["us-east-1b"], **{"tag-key-2": "tag-value-2"})
    tag(aws, aws.subnets["us-east-1c"], **{"tag-key-1": "tag-value-1"})
    provider = aws.provider()
    both = node_class(subnetSelectorTerms=[{"tags": {"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"}}])
    either = node_class(subnetSelectorTerms=[{"tags": {"tag-key-1": "tag-value-1"}},
                                             {"tags": {"tag-key-2": "tag-value-2"}}])
    anded, ored = provider.network(both), provider.network(either)
    assert anded is not None and anded.subnets == {aws.subnets["us-east-1a"]}
    assert ored is not None and ored.subnets == frozenset(aws.subnets.values())


# --- security groups over moto -----------------------------------------------------------------------------------


def test_two_tag_terms_give_the_launch_template_the_groups_of_both(aws: AwsEnv) -> None:
    """securitygroup suite_test.go:137 "should discover security groups by multiple tag values"."""
    first = group(aws, "securityGroup-test1", Name="test-security-group-1")
    second = group(aws, "securityGroup-test2", Name="test-security-group-2")
    group(aws, "securityGroup-test3", Name="test-security-group-3")
    settings = node_class(securityGroupSelectorTerms=[{"tags": {"Name": "test-security-group-1"}},
                                                      {"tags": {"Name": "test-security-group-2"}}])
    aws.provider().create(request(settings, [offer("m5.large", "us-east-1a")]))
    template = aws.ec2.describe_launch_templates()["LaunchTemplates"][0]["LaunchTemplateName"]
    assert sorted(launch_template(aws.ec2, template)["SecurityGroupIds"]) == sorted([first, second])


def test_groups_by_ids_and_by_names(aws: AwsEnv) -> None:
    """securitygroup suite_test.go:174 "should discover security groups by IDs" and :236 "should discover
    security groups by names"."""
    first, second, third = (group(aws, f"securityGroup-test{n}") for n in (1, 2, 3))
    provider = aws.provider()
    by_ids = provider.network(node_class(securityGroupSelectorTerms=[{"id": first}, {"id": second}]))
    by_names = provider.network(node_class(securityGroupSelectorTerms=[{"name": "securityGroup-test2"},
                                                                       {"name": "securityGroup-test3"}]))
    assert by_ids is not None and by_ids.security_groups == {first, second}
    assert by_names is not None and by_names.security_groups == {second, third}


def test_group_tags_of_one_term_are_anded_and_of_two_terms_ored(aws: AwsEnv) -> None:
    """securitygroup suite_test.go:359 "should correctly disambiguate AND vs OR semantics for tags"."""
    both = group(aws, "test-sg-3", **{"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"})
    one = group(aws, "test-sg-1", **{"tag-key-1": "tag-value-1"})
    two = group(aws, "test-sg-2", **{"tag-key-2": "tag-value-2"})
    provider = aws.provider()
    anded = provider.network(node_class(securityGroupSelectorTerms=[
        {"tags": {"tag-key-1": "tag-value-1", "tag-key-2": "tag-value-2"}}]))
    ored = provider.network(node_class(securityGroupSelectorTerms=[
        {"tags": {"tag-key-1": "tag-value-1"}}, {"tags": {"tag-key-2": "tag-value-2"}}]))
    assert anded is not None and anded.security_groups == {both}
    assert ored is not None and ored.security_groups == {both, one, two}


def test_no_group_matching_any_term_is_a_configuration_error_naming_the_terms(aws: AwsEnv) -> None:
    settings = node_class(securityGroupSelectorTerms=[{"tags": {"Name": "x"}}, {"tags": {"Name": "y"}}])
    named = (r"no security group matches securityGroupSelectorTerms "
             r"\[\{'tags': \{'Name': 'x'\}\}, \{'tags': \{'Name': 'y'\}\}\]")
    with pytest.raises(ConfigurationError, match=named):
        aws.provider().create(request(settings, [offer("m5.large", "us-east-1a")]))
    assert aws.instances() == []


# --- AMIs over moto ----------------------------------------------------------------------------------------------


def test_two_ami_terms_give_each_architecture_its_image(aws: AwsEnv) -> None:
    """amifamily suite_test.go:732 "should correctly disambiguate AND vs OR semantics for tags": an x86-64 image
    tagged tag-key-1, an Arm64 one tagged tag-key-2, two terms select both (one term of both tags neither)."""
    tag(aws, aws.ami_amd64, **{"tag-key-1": "tag-value-1"})
    tag(aws, aws.ami_arm64, **{"tag-key-2": "tag-value-2"})
    either = node_class(amiFamily="AL2", amiSelectorTerms=[{"tags": {"tag-key-1": "tag-value-1"}},
                                                           {"tags": {"tag-key-2": "tag-value-2"}}])
    provider = aws.provider()
    assert provider.current_image("m5.large", either) == aws.ami_amd64
    assert provider.current_image("c6g.large", either) == aws.ami_arm64
    resolved = provider.node_class(either)
    assert resolved.images == {aws.ami_amd64, aws.ami_arm64}
    both = node_class(amiFamily="AL2", amiSelectorTerms=[{"tags": {"tag-key-1": "tag-value-1",
                                                                    "tag-key-2": "tag-value-2"}}])
    assert provider.node_class(both).images == frozenset()
    provider.create(request(either, [offer("c6g.large", "us-east-1a")]))
    (made,) = aws.instances()
    assert made["ImageId"] == aws.ami_arm64


def test_an_ami_term_matching_nothing_does_not_empty_the_others(aws: AwsEnv) -> None:
    settings = node_class(amiFamily="AL2", amiSelectorTerms=[{"tags": {"nobody": "x"}}, {"id": aws.ami_amd64}])
    assert aws.provider().current_image("m5.large", settings) == aws.ami_amd64


def test_the_network_of_one_term_is_what_it_was(aws: AwsEnv) -> None:
    """One term reads as the one selector it always was (the same answer as the AWSNodeTemplate's)."""
    provider = aws.provider()
    assert provider.network(node_class()) == provider.network(aws.spec()) == Network(
        frozenset(aws.subnets.values()), frozenset({aws.security_group}), reservations=frozenset())


# --- one reading of a tag value (issue #26) ----------------------------------------------------------------------


def test_a_tag_value_with_a_comma_is_literal_for_a_node_class_and_split_for_a_node_template(aws: AwsEnv) -> None:
    """v1.14.1's `getFilterSets` (aws pkg/providers/subnet/subnet.go) puts a term's tag value in one filter value
    (`Values: []string{v}`), so `Name: "a,b"` selects the subnet tagged `a,b` and not the one tagged `a`, as `plan`
    reads it; v0.31.1 splits an AWSNodeTemplate's `subnetSelector` value at commas (`a` or `b`)."""
    tag(aws, aws.subnets["us-east-1a"], Name="a,b")
    tag(aws, aws.subnets["us-east-1b"], Name="a")
    provider = aws.provider()
    by_class = provider.network(node_class(subnetSelectorTerms=[{"tags": {"Name": "a,b"}}]))
    by_template = provider.network({**aws.spec(), "subnetSelector": {"Name": "a,b"}})
    assert by_class is not None and by_class.subnets == {aws.subnets["us-east-1a"]}
    assert by_template is not None and by_template.subnets == {aws.subnets["us-east-1b"]}


def test_a_group_tag_value_with_a_comma_is_literal_for_a_node_class(aws: AwsEnv) -> None:
    """securitygroup.go `getFilterSets` at v1.14.1: the same literal tag value for security groups."""
    literal = group(aws, "sg-literal", team="red,blue")
    group(aws, "sg-red", team="red")
    network = aws.provider().network(node_class(securityGroupSelectorTerms=[{"tags": {"team": "red,blue"}}]))
    assert network is not None and network.security_groups == {literal}
