"""The placement-group registration hook (issue #26), ported from aws/karpenter-provider-aws v1.14.1
pkg/cloudprovider/registrationhooks/placementgrouphook_test.go (`Describe("PlacementGroupRegistrationHook")`), over
the in-memory cloud whose instance says its placement as DescribeInstances would (`set_placement`).

Where we differ, on purpose (the brief of #26): an instance the cloud does not know is "unknown" — a failed answer
naming why, backed off like v1.14.1's error — never an exception out of the lifecycle.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import LaunchRequest
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.reconcile.provisioning import registrationhooks as hooks

GO_FILE = "aws pkg/cloudprovider/registrationhooks/placementgrouphook_test.go"
GROUP = "pg-partition123"


def _cloud() -> FakeCloudProvider:
    """The in-memory cloud selling the catalog's m5.large."""
    m5 = load_catalog().get("m5.large")
    assert m5 is not None
    return FakeCloudProvider([m5])


def _launched(cloud: FakeCloudProvider, token: str = "claim-a") -> str:
    request = LaunchRequest(
        cluster_name="test", provisioner="NodePool/default", constraint_set_hash="sha256:x",
        options=[ChosenOffering("m5.large", "us-east-1a", "on-demand", 0.096)], client_token=token,
    )
    return cloud.create(request).provider_id


def test_no_placement_group_passes_at_once() -> None:
    """:76 "should pass through immediately when EC2NodeClass has no placement group"."""
    assert hooks.placement_group_partition({}, "", _cloud()) == hooks.READY


@pytest.mark.parametrize("group", ["pg-cluster123", "pg-spread123"])
def test_a_cluster_or_spread_group_passes_at_once(group: str) -> None:
    """:85 "… cluster placement group" and :103 "… spread placement group": their claims have no partition label
    (cloudprovider.go:475), so the hook passes without asking EC2."""
    assert hooks.placement_group_partition({wk.PLACEMENT_GROUP_ID: group}, "", _cloud()) == hooks.READY


def test_a_partition_label_already_set_passes() -> None:
    """:122 "should pass through when partition label is already set"."""
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: "3"}
    assert hooks.placement_group_partition(labels, "", _cloud()) == hooks.READY


def test_no_provider_id_yet_holds_registration() -> None:
    """:132 "should block registration when providerID is empty for partition placement group": requeue."""
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
    assert hooks.placement_group_partition(labels, "", _cloud()) == hooks.NOT_YET


def test_the_partition_ec2_says_becomes_the_label() -> None:
    """:143 "should set partition label and proceed when DescribeInstances returns partition number"."""
    cloud = _cloud()
    provider_id = _launched(cloud)
    cloud.set_placement(provider_id.rsplit("/", 1)[1], GROUP, "3")
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
    answer = hooks.placement_group_partition(labels, provider_id, cloud)
    assert answer.ready and dict(answer.labels) == {wk.PLACEMENT_GROUP_PARTITION: "3"}


def test_no_partition_number_in_the_answer_is_not_yet() -> None:
    """The brief's "an answer without a partition number is not yet": the instance is there, EC2 has not said its
    partition — requeue, no error (v1.14.1: `PartitionNumber == nil` → `Requeue: true`)."""
    cloud = _cloud()
    provider_id = _launched(cloud)
    cloud.set_placement(provider_id.rsplit("/", 1)[1], GROUP, None)
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
    assert hooks.placement_group_partition(labels, provider_id, cloud) == hooks.NOT_YET


def test_an_instance_with_no_partition_label_in_a_cluster_group_passes() -> None:
    """:167 "should pass through when instance has no partition number (not a partition PG)"."""
    cloud = _cloud()
    provider_id = _launched(cloud)
    cloud.set_placement(provider_id.rsplit("/", 1)[1], "pg-cluster123")
    assert hooks.placement_group_partition({wk.PLACEMENT_GROUP_ID: "pg-cluster123"}, provider_id, cloud).ready


def test_an_instance_the_cloud_does_not_know_is_unknown_not_an_exception() -> None:
    """:190 "should return error when instance is not found": here a failed answer saying so, never raised."""
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
    answer = hooks.placement_group_partition(labels, "aws:///us-east-1a/i-0000000000000dead", _cloud())
    assert not answer.ready and "i-0000000000000dead not found" in answer.error


def test_a_failed_call_is_unknown_not_an_exception() -> None:
    cloud = _cloud()
    provider_id = _launched(cloud)
    cloud.fail_next("get", CloudError("ec2", "throttled", "DescribeInstances"))
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
    answer = hooks.placement_group_partition(labels, provider_id, cloud)
    assert not answer.ready and "throttled" in answer.error


def test_a_provider_id_of_another_shape_is_unknown() -> None:
    labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
    answer = hooks.placement_group_partition(labels, "kind://docker/node-1", _cloud())
    assert not answer.ready and "parsing instance ID" in answer.error


def test_several_partition_numbers_each_become_their_label() -> None:
    """:200 "should handle multiple partition numbers correctly" (1, 4 and 7)."""
    cloud = _cloud()
    for number in ("1", "4", "7"):
        provider_id = _launched(cloud, token=f"claim-{number}")
        cloud.set_placement(provider_id.rsplit("/", 1)[1], GROUP, number)
        labels = {wk.PLACEMENT_GROUP_ID: GROUP, wk.PLACEMENT_GROUP_PARTITION: ""}
        answer = hooks.placement_group_partition(labels, provider_id, cloud)
        assert answer.ready and answer.labels[wk.PLACEMENT_GROUP_PARTITION] == number, f"{GO_FILE}:200"


@deterministic(100)
@given(st.integers(min_value=-5, max_value=10_000))
def test_the_backoff_is_the_lifecycle_controllers(attempt: int) -> None:
    """core lifecycle/controller.go:119: `NewTypedItemExponentialFailureRateLimiter(time.Second, time.Minute)` —
    1 s, doubling per attempt, never more than a minute, never less than a second."""
    delay = hooks.backoff(attempt)
    assert hooks.BACKOFF_BASE <= delay <= hooks.BACKOFF_MAX
    assert delay == (60.0 if attempt > 7 else min(2.0 ** (max(attempt, 1) - 1), 60.0))
