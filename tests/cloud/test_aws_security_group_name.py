"""A Karpenter v1 EC2NodeClass's security group selected by name (`securityGroupSelectorTerms: [{name: …}]`) launches
with that group — against moto's server over HTTP. A name term's tags are not read: v1.14.1's `getFilterSets` (aws
pkg/providers/securitygroup/securitygroup.go) asks by the name alone (its admission refuses a class whose every term
has both; one of several terms may)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.api.v1.launchsettings import LaunchSettingsError, launch_settings
from karpenter_policy.cloud import ConfigurationError

from .conftest import DISCOVERY, AwsEnv
from .support import launch_template, offer, request


def node_class(*terms: dict[str, Any]) -> dict[str, Any]:
    return launch_settings({
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "subnetSelectorTerms": [{"tags": DISCOVERY}],
        "securityGroupSelectorTerms": list(terms),
    })


def groups_of_launch(aws: AwsEnv, spec: dict[str, Any], token: str = "claim-default-abcde") -> list[str]:
    """The security groups of the launch template the launch made (the test's first)."""
    aws.provider().create(request(spec, [offer("m5.large", "us-east-1a")], token=token))
    template = aws.ec2.describe_launch_templates()["LaunchTemplates"][0]
    return sorted(launch_template(aws.ec2, template["LaunchTemplateName"])["SecurityGroupIds"])


def test_a_group_selected_by_name_alone(aws: AwsEnv) -> None:
    vpc = aws.ec2.describe_security_groups(GroupIds=[aws.security_group])["SecurityGroups"][0]["VpcId"]
    named = aws.ec2.create_security_group(GroupName="karpenter-nodes", Description="by name", VpcId=vpc)["GroupId"]

    assert groups_of_launch(aws, node_class({"name": "karpenter-nodes"})) == [named]


def test_a_name_terms_tags_are_not_read(aws: AwsEnv) -> None:
    """securitygroup suite_test.go:258 "should discover security groups by names intersected with tags": the group
    of the name, whatever tags the term names (`getFilterSets` puts a name term's name in the `group-name` filter and
    nothing else)."""
    assert groups_of_launch(aws, node_class({"name": "nodes", "tags": {"absent": "x"}}, {"tags": {"Name": "no"}})) == [
        aws.security_group]
    with pytest.raises(ConfigurationError, match="no security group matches"):
        groups_of_launch(aws, node_class({"name": "other", "tags": DISCOVERY}), token="claim-other")
    assert len(aws.instances()) == 1  # the first launch's only


def test_a_subnet_term_by_name_is_refused_saying_what_is_read() -> None:
    with pytest.raises(LaunchSettingsError, match="subnetSelectorTerms\\[0\\]: selects by name"):
        launch_settings({"amiSelectorTerms": [{"alias": "al2@latest"}], "subnetSelectorTerms": [{"name": "x"}],
                         "securityGroupSelectorTerms": [{"name": "x"}]})
