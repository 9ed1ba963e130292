"""The capacity-reservation stand-in (`tests/cloud/reservations.py`) answers as EC2 does: boto3 over HTTP through the
proxy parses its answers, ids and filters select as EC2's, and instances CreateFleet launches with a launch template
targeting a reservation take its room (moto's instances, terminated: given back); a full reservation refuses the
fleet with `ReservationCapacityExceeded`."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from .conftest import REGION, AwsEnv
from .reservations import DeclaredReservation


def client(aws: AwsEnv) -> Any:
    return boto3.client("ec2", region_name=REGION, endpoint_url=aws.proxy.url)


def targeting(aws: AwsEnv, name: str, reservation_id: str) -> None:
    aws.ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": aws.ami_amd64,
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
        },
    })


def fleet(aws: AwsEnv, template: str) -> dict[str, Any]:
    answer: dict[str, Any] = client(aws).create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
            "Overrides": [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]}],
        }],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
    )
    return answer


def available(aws: AwsEnv, reservation_id: str) -> int:
    (found,) = client(aws).describe_capacity_reservations(CapacityReservationIds=[reservation_id])[
        "CapacityReservations"
    ]
    return int(found["AvailableInstanceCount"])


def test_launches_take_room_and_terminations_give_it_back(aws: AwsEnv) -> None:
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", "us-east-1a", 2))
    targeting(aws, "into-a", "cr-a")
    aws.ec2.create_launch_template(LaunchTemplateName="plain", LaunchTemplateData={"ImageId": aws.ami_amd64})
    first = fleet(aws, "into-a")["Instances"][0]["InstanceIds"][0]
    fleet(aws, "plain")  # not into the reservation
    assert available(aws, "cr-a") == 1
    fleet(aws, "into-a")
    assert available(aws, "cr-a") == 0
    refused = fleet(aws, "into-a")
    assert not refused.get("Instances")
    assert [e["ErrorCode"] for e in refused["Errors"]] == ["ReservationCapacityExceeded"]
    aws.ec2.terminate_instances(InstanceIds=[first])
    assert available(aws, "cr-a") == 1
    assert len(aws.reservations.launched_into("cr-a")) == 2


def test_ids_filters_and_pages_as_ec2(aws: AwsEnv) -> None:
    aws.reservations.page_size = 1
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", "us-east-1a", 2, tags={"team": "red"}))
    aws.reservations.declare(DeclaredReservation("cr-b", "c5.large", "us-east-1b", 1, tags={"team": "blue"}))
    aws.reservations.declare(DeclaredReservation("cr-c", "c5.large", "us-east-1b", 1, state="cancelled"))
    ec2 = client(aws)
    pages = ec2.get_paginator("describe_capacity_reservations").paginate(
        Filters=[{"Name": "state", "Values": ["active"]}], MaxResults=5
    )
    assert [r["CapacityReservationId"] for p in pages for r in p["CapacityReservations"]] == ["cr-a", "cr-b"]
    tagged = ec2.describe_capacity_reservations(Filters=[{"Name": "tag:team", "Values": ["blue", "green"]}])
    assert [r["CapacityReservationId"] for r in tagged["CapacityReservations"]] == ["cr-b"]
    assert tagged["CapacityReservations"][0]["Tags"] == [{"Key": "team", "Value": "blue"}]
    with pytest.raises(ClientError, match="InvalidCapacityReservationId.NotFound"):
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-nope"])
