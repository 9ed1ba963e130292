"""CreateFleet requests and answers (karpenter_policy.cloud.aws.fleet), without a server."""

from __future__ import annotations

import pytest

from karpenter_policy.cloud.aws.fleet import Override, fleet_request, parse_fleet_response, request_token

from .support import offer

OVERRIDES = [
    Override(offer("m5.large", "us-east-1a"), "subnet-a", "karpenter-policy/one"),
    Override(offer("c6g.large", "us-east-1a"), "subnet-a", "karpenter-policy/two"),
    Override(offer("m5.large", "us-east-1b"), "subnet-b", "karpenter-policy/one"),
]


def test_the_client_token_is_stable_for_the_same_request_and_differs_for_another() -> None:
    token = request_token("claim-1", "spot", OVERRIDES)
    assert token == request_token("claim-1", "spot", list(OVERRIDES))
    assert len(token) <= 64
    assert token != request_token("claim-1", "spot", OVERRIDES[:2])
    assert token != request_token("claim-1", "on-demand", OVERRIDES)
    assert token != request_token("claim-2", "spot", OVERRIDES)


def test_overrides_are_grouped_by_launch_template_in_order() -> None:
    request = fleet_request("spot", OVERRIDES, {"b": "2", "a": "1"}, "claim-1")
    assert request["LaunchTemplateConfigs"] == [
        {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "karpenter-policy/one", "Version": "$Latest"},
            "Overrides": [
                {"InstanceType": "m5.large", "SubnetId": "subnet-a"},
                {"InstanceType": "m5.large", "SubnetId": "subnet-b"},
            ],
        },
        {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "karpenter-policy/two", "Version": "$Latest"},
            "Overrides": [{"InstanceType": "c6g.large", "SubnetId": "subnet-a"}],
        },
    ]
    assert request["TagSpecifications"][0] == {
        "ResourceType": "instance",
        "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
    }


def test_more_than_60_overrides_is_refused() -> None:
    with pytest.raises(ValueError, match="1 to 60 overrides, not 61"):
        fleet_request("spot", OVERRIDES[:1] * 61, {}, "claim-1")


def test_errors_name_the_pool_and_whether_another_offering_may_work() -> None:
    answer = {
        "Errors": [
            {
                "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-a"}},
                "Lifecycle": "spot",
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "no capacity",
            },
            {
                "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "c6g.large", "SubnetId": "subnet-b"}},
                "ErrorCode": "InvalidParameterValue",
            },
        ]
    }
    launched, errors = parse_fleet_response(answer, "on-demand", {"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"})
    assert launched == []
    assert [(e.instance_type, e.zone, e.capacity_type, e.code, e.unfulfillable) for e in errors] == [
        ("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity", True),
        ("c6g.large", "us-east-1b", "on-demand", "InvalidParameterValue", False),
    ]
