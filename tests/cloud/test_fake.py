"""FakeCloudProvider: the in-memory provider controller tests launch through."""

from __future__ import annotations

import pytest

from karpenter_policy.cloud import CloudProvider, InsufficientCapacity, Throttled
from karpenter_policy.cloud.provider import LaunchRequest
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.model.instancetypes import ChosenOffering

from .conftest import SMALL_CATALOG, FakeClock, catalog_types
from .support import offer, request


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture()
def fake(clock: FakeClock) -> FakeCloudProvider:
    return FakeCloudProvider(catalog_types(SMALL_CATALOG), clock=clock)


def launch(options: list[ChosenOffering] | None = None, token: str = "claim-1", cluster: str = "blue") -> LaunchRequest:
    chosen = options or [offer("m5.large", "us-east-1a"), offer("c5.large", "us-east-1b")]
    return request({"subnetSelector": {"a": "b"}}, chosen, token=token, cluster=cluster)


def test_it_is_a_cloud_provider(fake: FakeCloudProvider) -> None:
    provider: CloudProvider = fake
    assert provider.instance_types()


def test_create_launches_the_first_option_and_is_idempotent_per_token(fake: FakeCloudProvider) -> None:
    first = fake.create(launch())
    assert (first.instance_type, first.zone, first.capacity_type, first.state) == (
        "m5.large",
        "us-east-1a",
        "spot",
        "running",
    )
    assert first.provisioner == "default"
    assert fake.create(launch()) == first
    assert len(fake.list("blue")) == 1


def test_insufficient_capacity_moves_on_and_marks_the_offering_for_three_minutes(
    fake: FakeCloudProvider, clock: FakeClock
) -> None:
    fake.fail_capacity("m5.large", "us-east-1a", "spot")

    instance = fake.create(launch())

    assert instance.instance_type == "c5.large"
    m5 = next(it for it in fake.instance_types() if it.name == "m5.large")
    assert not next(o.available for o in m5.offerings if (o.zone, o.capacity_type) == ("us-east-1a", "spot"))
    clock.advance(180)
    m5 = next(it for it in fake.instance_types() if it.name == "m5.large")
    assert next(o.available for o in m5.offerings if (o.zone, o.capacity_type) == ("us-east-1a", "spot"))


def test_when_every_option_fails_it_raises_insufficient_capacity(fake: FakeCloudProvider) -> None:
    fake.fail_capacity("m5.large", "us-east-1a", "spot")
    with pytest.raises(InsufficientCapacity) as raised:
        fake.create(launch([offer("m5.large", "us-east-1a"), offer("m5.large", "us-east-1z")]))
    assert [(f.zone, f.code) for f in raised.value.failed] == [
        ("us-east-1a", "InsufficientInstanceCapacity"),
        ("us-east-1z", "Unsupported"),  # not an offering of the type
    ]
    assert fake.list("blue") == []


def test_injected_errors_are_raised_once(fake: FakeCloudProvider) -> None:
    fake.fail_next("get", Throttled("fake://cloud", "slow down", "get"))
    with pytest.raises(Throttled):
        fake.get("i-1")
    assert fake.get("i-1") is None


def test_delete_is_idempotent_and_list_skips_terminated_and_other_clusters(fake: FakeCloudProvider) -> None:
    ours = fake.create(launch())
    other = fake.create(launch(token="claim-2", cluster="green"))

    fake.delete(ours.id)
    fake.delete(ours.id)
    fake.delete("i-unknown")

    assert fake.get(ours.id) is None
    assert fake.list("blue") == []
    assert fake.list("green") == [other]
