"""A Karpenter v1 EC2NodeClass's security group selected by name (`securityGroupSelectorTerms: [{name: …}]`, alone or
with tags in the same term, which v1 ANDs) launches with that group — against moto's server over HTTP."""

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


def test_name_and_tags_in_one_term_must_both_match(aws: AwsEnv) -> None:
    assert groups_of_launch(aws, node_class({"name": "nodes", "tags": DISCOVERY})) == [aws.security_group]
    with pytest.raises(ConfigurationError, match="no security group matches"):
        groups_of_launch(aws, node_class({"name": "other", "tags": DISCOVERY}), token="claim-other")
    assert len(aws.instances()) == 1  # the first launch's only


def test_a_subnet_term_by_name_is_refused_saying_what_is_read() -> None:
    with pytest.raises(LaunchSettingsError, match="subnetSelectorTerms\\[0\\]: selects by name"):
        launch_settings({"amiSelectorTerms": [{"alias": "al2@latest"}], "subnetSelectorTerms": [{"name": "x"}],
                         "securityGroupSelectorTerms": [{"name": "x"}]})
