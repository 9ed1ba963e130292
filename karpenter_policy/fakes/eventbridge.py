"""EventBridge events as AWS puts them on the interruption queue, for tests and scenes to send
(:class:`~karpenter_policy.fakes.queue.FakeQueue`, ``Scene.queue``): the shapes of Karpenter v0.31.1's test fixtures
(pkg/controllers/interruption/messages/ of aws/karpenter-provider-aws), dated :data:`TIME`, in us-east-1 of account
:data:`ACCOUNT` — :func:`elsewhere` moves one to another account or region."""

from __future__ import annotations

import json

ACCOUNT = "123456789012"
TIME = "2026-11-01T00:30:00Z"
RETIREMENT = "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED"


def _event(source: str, detail_type: str, detail: dict[str, object], resources: list[str]) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "5d5fb2d6-3bc4-4b5e-9ef2-0c4d7cd1c4a0",
            "detail-type": detail_type,
            "source": source,
            "account": ACCOUNT,
            "time": TIME,
            "region": "us-east-1",
            "resources": resources,
            "detail": detail,
        }
    )


def _arn(instance_id: str) -> str:
    return f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{instance_id}"


def spot_interruption(instance_id: str) -> str:
    """EC2's two-minute warning that a spot instance is to be reclaimed."""
    return _event(
        "aws.ec2", "EC2 Spot Instance Interruption Warning",
        {"instance-id": instance_id, "instance-action": "terminate"}, [_arn(instance_id)],
    )


def capacity_reservation_interruption(instance_id: str) -> str:
    """EC2's warning that an instance in an interruptible capacity reservation is to be reclaimed (v1.14.1
    pkg/controllers/interruption/suite_test.go:799 `capacityReservationInterruptionMessage`)."""
    return _event(
        "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning",
        {"instance-id": instance_id, "instance-action": "terminate"}, [_arn(instance_id)],
    )


def rebalance_recommendation(instance_id: str) -> str:
    """EC2's notice that a spot instance is at elevated risk of interruption."""
    return _event("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": instance_id}, [_arn(instance_id)])


def state_change(instance_id: str, state: str) -> str:
    """EC2's notification that an instance changed state (`stopping`, `stopped`, `terminated` ...)."""
    return _event(
        "aws.ec2", "EC2 Instance State-change Notification", {"instance-id": instance_id, "state": state},
        [_arn(instance_id)],
    )


def scheduled_change(*instance_ids: str, service: str = "EC2", category: str = "scheduledChange") -> str:
    """An AWS Health event: by default EC2 scheduling the instances' retirement."""
    return _event(
        "aws.health", "AWS Health Event",
        {
            "eventArn": f"arn:aws:health:us-east-1::event/EC2/{RETIREMENT}/{ACCOUNT}",
            "service": service,
            "eventTypeCode": RETIREMENT,
            "eventTypeCategory": category,
            "startTime": "Sat, 07 Nov 2026 00:00:00 GMT",
            "endTime": "Sat, 07 Nov 2026 04:00:00 GMT",
            "eventDescription": [{"language": "en_US", "latestDescription": "The instance is to be retired."}],
            "affectedEntities": [{"entityValue": i} for i in instance_ids],
        },
        [],
    )


def foreign() -> str:
    """An event of another service that a shared queue might carry."""
    return _event("aws.autoscaling", "EC2 Instance Launch Successful", {"EC2InstanceId": "i-0123"}, [])


def elsewhere(body: str, *, account: str | None = None, region: str | None = None) -> str:
    """The same event as if it had happened in another account or region."""
    event = json.loads(body)
    if account is not None:
        event["account"] = account
    if region is not None:
        event["region"] = region
    return json.dumps(event)


__all__ = [
    "ACCOUNT",
    "TIME",
    "capacity_reservation_interruption",
    "elsewhere",
    "foreign",
    "rebalance_recommendation",
    "scheduled_change",
    "spot_interruption",
    "state_change",
]
