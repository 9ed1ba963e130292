"""Placement-group drift of a NodePool's nodes (issue #26), as aws v1.14.1's pkg/cloudprovider/drift.go
`isPlacementGroupDrifted` (drift.go:167-180) decides it, last after the security groups, the subnet (and capacity
reservations): the node's `karpenter.k8s.aws/placement-group-id` label ("" without it) is not the id of the group its
EC2NodeClass's `placementGroupSelector` resolves to now ("" when it names none, or none is found) — a selector added,
removed or changed. v1.14.1 has no test of it (its cloudprovider suite_test.go checks no PlacementGroupDrift); the
cases are drift.go's branches."""

from __future__ import annotations

import pytest

from karpenter_policy.cloud.provider import STATE_RUNNING, Instance, Network
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.conditions import drift_reason as drift_condition_reason
from karpenter_policy.reconcile.disruption.decider import network_drift

SUBNET = "subnet-0valid000000000001"
GROUP = "sg-0valid000000000001"
PG = "pg-0123456789abcdef0"
OTHER_PG = "pg-0fedcba9876543210"
LAUNCHED = Instance("i-0123456789abcdef0", "m5.large", "us-east-1a", "on-demand", STATE_RUNNING,
                    subnet_id=SUBNET, security_groups=(GROUP,))


def resolved(placement_group: str | None) -> Network:
    return Network(frozenset({SUBNET}), frozenset({GROUP}), placement_group)


@pytest.mark.parametrize(
    ("case", "labels", "class_group", "reason"),
    [
        ("in the class's group", {wk.PLACEMENT_GROUP_ID: PG}, PG, ""),
        ("no group on either side", {}, "", ""),
        ("selector added: the node has no group", {}, PG, "PlacementGroupDrift"),
        ("selector removed: the class names none", {wk.PLACEMENT_GROUP_ID: PG}, "", "PlacementGroupDrift"),
        ("selector changed", {wk.PLACEMENT_GROUP_ID: PG}, OTHER_PG, "PlacementGroupDrift"),
        ("the group is gone: not found is none", {wk.PLACEMENT_GROUP_ID: PG}, "", "PlacementGroupDrift"),
        ("the cloud could not tell the group", {wk.PLACEMENT_GROUP_ID: PG}, None, ""),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_placement_group_drift_is_aws_v1s(
    case: str, labels: dict[str, str], class_group: str | None, reason: str
) -> None:
    why = network_drift(LAUNCHED, resolved(class_group), labels)
    assert why.startswith(reason) if reason else why == "", (case, why)
    if reason:
        assert drift_condition_reason(why) == "PlacementGroupDrift"  # the claim's Drifted reason, as drift.go's


def test_the_subnet_and_groups_are_looked_at_first() -> None:
    """drift.go:73-78: `lo.FindOrElse` over security groups, subnet, capacity reservations, placement group."""
    moved = Instance("i-1", "m5.large", "us-east-1a", "on-demand", STATE_RUNNING, subnet_id="subnet-0gone",
                     security_groups=(GROUP,))
    assert network_drift(moved, resolved(PG), {}).startswith("SubnetDrift")
