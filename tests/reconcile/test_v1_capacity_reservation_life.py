"""A reserved node's life after its launch (issue #26), over moto's server and the capacity-reservation stand-in
(tests/cloud/reservations.py) with the production AWS adapter: the capacity-type controller (aws v1.14.1
pkg/controllers/capacityreservation/capacitytype/controller.go) relabels a NodeClaim and its Node `on-demand` once
EC2 reports its instance out of its reservation, and the expiration controller (capacityreservation/expiration/
controller.go) deletes the claims of a capacity block 40 minutes before its end. Both once a minute, as v1.14.1's
singletons (`RequeueAfter: time.Minute`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.capacityreservation.capacitytype import demotion
from karpenter_policy.reconcile.result import ReconcileResult

from .conftest import AwsEnv, MakeHarness
from .support import Harness, create_all, label
from .test_v1_capacity_reservations import RESERVATION, _harness, compiled  # noqa: F401  (the scene's fixture)

EXPIRATION_SUITE = "aws v1.14.1 pkg/controllers/capacityreservation/expiration/suite_test.go"
START = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


class Wall:
    """The AWS adapter's wall clock, set by the test."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> dt.datetime:
        return self.now


def _claims(h: Harness) -> list[dict[str, Any]]:
    return sorted(h.cluster.list(objects.NODE_CLAIM).items, key=objects.name)


# --- the capacity-type controller ----------------------------------------------------------------------------


def test_demotion_is_v1s_patch() -> None:
    """controller.go:118-126: `reserved` becomes `on-demand`, the id and type labels go (`ReservedCapacityLabels`,
    apis/v1/doc.go:39), the interruptible label stays; anything not `reserved` is left alone."""
    labels = {wk.CAPACITY_TYPE: "reserved", wk.CAPACITY_RESERVATION_ID: "cr-1", wk.CAPACITY_RESERVATION_TYPE: "default",
              "karpenter.k8s.aws/capacity-reservation-interruptible": "false"}
    assert demotion(labels) == {wk.CAPACITY_TYPE: "on-demand", wk.CAPACITY_RESERVATION_ID: None,
                                wk.CAPACITY_RESERVATION_TYPE: None}
    assert demotion({wk.CAPACITY_TYPE: "reserved"}) == {wk.CAPACITY_TYPE: "on-demand"}
    assert demotion({wk.CAPACITY_TYPE: "on-demand"}) is None
    assert demotion({wk.CAPACITY_TYPE: "spot", wk.CAPACITY_RESERVATION_ID: "cr-1"}) is None
    assert demotion({}) is None


@pytest.mark.slow
def test_a_reserved_node_whose_instance_left_its_reservation_is_relabelled_on_demand(
    make_harness: MakeHarness, aws: AwsEnv, compiled: Path  # noqa: F811
) -> None:
    """capacitytype/suite_test.go:122 "should demote nodeclaims and nodes from reserved to on-demand": two nodes
    launched into the reservation; while EC2 reports them in it
    nothing changes; once it ends (the stand-in no longer describes it, and DescribeInstances reports the instances
    without a `CapacityReservationId`: EC2 moved them to on-demand) the next minute's reconcile relabels each claim
    and its Node `on-demand` without the reservation id and type labels."""
    h = _harness(make_harness, aws, compiled, 2)
    h.batch()
    assert sorted(label(n, wk.CAPACITY_TYPE) or "" for n in h.nodes()) == ["reserved", "reserved"], h.messages()
    claims = _claims(h)
    assert [objects.labels(c)[wk.CAPACITY_TYPE] for c in claims] == ["reserved", "reserved"]
    h.clock.advance(61)
    h.controller.reconcile_once()
    assert [objects.labels(c)[wk.CAPACITY_TYPE] for c in _claims(h)] == ["reserved", "reserved"], "still in it"

    aws.reservations.forget(RESERVATION)
    h.clock.advance(61)
    h.controller.reconcile_once()

    for obj in (*_claims(h), *h.nodes()):
        labels = objects.labels(obj)
        assert labels[wk.CAPACITY_TYPE] == "on-demand", objects.name(obj)
        assert wk.CAPACITY_RESERVATION_ID not in labels and wk.CAPACITY_RESERVATION_TYPE not in labels
        assert labels.get("karpenter.k8s.aws/capacity-reservation-interruptible") == "false"  # not among them


@pytest.mark.slow
def test_a_node_is_demoted_even_when_its_claim_was_demoted_before(
    make_harness: MakeHarness, aws: AwsEnv, compiled: Path  # noqa: F811
) -> None:
    """capacitytype/suite_test.go:152 "should demote nodes from reserved to on-demand even if their nodeclaim was
    demoted previously": the claim already `on-demand`, its Node still `reserved` — the Node is relabelled."""
    h = _harness(make_harness, aws, compiled, 1)
    h.batch()
    (claim,) = _claims(h)
    h.cluster.patch(objects.NODE_CLAIM, objects.name(claim), {"metadata": {"labels": {
        wk.CAPACITY_TYPE: "on-demand", wk.CAPACITY_RESERVATION_ID: None, wk.CAPACITY_RESERVATION_TYPE: None}}})
    (node,) = h.nodes()
    assert label(node, wk.CAPACITY_TYPE) == "reserved"
    aws.reservations.forget(RESERVATION)
    h.clock.advance(61)
    h.controller.reconcile_once()
    (node,) = h.nodes()
    assert label(node, wk.CAPACITY_TYPE) == "on-demand" and label(node, wk.CAPACITY_RESERVATION_ID) is None


@pytest.mark.slow
def test_an_instance_the_cloud_does_not_list_is_unknown_not_out_of_its_reservation(
    make_harness: MakeHarness, aws: AwsEnv, compiled: Path  # noqa: F811
) -> None:
    """EC2 is eventually consistent: a claim whose instance DescribeInstances does not answer for stays `reserved`
    (v1.14.1 `Reconcile`: `continue` when the provider id is not among `cp.List`'s)."""
    h = _harness(make_harness, aws, compiled, 1)
    h.batch()
    (claim,) = _claims(h)
    # a claim naming an instance EC2 does not (yet) answer for
    h.cluster.patch(objects.NODE_CLAIM, objects.name(claim),
                    {"status": {"providerID": "aws:///us-east-1a/i-0feedfacefeedface"}}, subresource="status")
    aws.reservations.forget(RESERVATION)
    h.clock.advance(61)
    h.controller.feed.sync()
    result = ReconcileResult(started=h.clock.now)
    assert h.controller.capacity_type.step(h.clock.now, result) == h.clock.now + 60, "it ran"
    assert objects.labels(_claims(h)[0])[wk.CAPACITY_TYPE] == "reserved"
    assert not result.errors


# --- the expiration controller ---------------------------------------------------------------------------------


def _block(aws: AwsEnv, rid: str, ends_in: dt.timedelta, kind: str = "capacity-block",
           interruptible: bool = False) -> None:
    from cloud.reservations import DeclaredReservation  # the stand-in of tests/cloud

    aws.reservations.declare(DeclaredReservation(rid, "m5.large", "us-east-1a", 1, reservation_type=kind,
                                                 end_date=START + ends_in, interruptible=interruptible))


def _claim(name: str, reservation: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {wk.CAPACITY_RESERVATION_ID: reservation}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []}}


def _expiring_harness(make_harness: MakeHarness, aws: AwsEnv, wall: Wall) -> Harness:
    return make_harness(cloud=aws.provider(wall_clock=wall), disruption_interval=1e6)


@pytest.mark.slow
def test_claims_of_an_expiring_capacity_block_are_deleted(make_harness: MakeHarness, aws: AwsEnv) -> None:
    """expiration/suite_test.go:93 "should delete nodeclaims associated with expiring capacity-block reservations":
    a block ending in 39 minutes (within the 40) loses its claim, one ending in 60 keeps it."""
    wall = Wall()
    _block(aws, "cr-expiring", dt.timedelta(minutes=39))
    _block(aws, "cr-active", dt.timedelta(minutes=60))
    h = _expiring_harness(make_harness, aws, wall)
    create_all(h.cluster, objects.NODE_CLAIM, [_claim("cr-expiring", "cr-expiring"), _claim("cr-active", "cr-active")])
    h.controller.reconcile_once()
    assert [objects.name(c) for c in _claims(h)] == ["cr-active"]
    assert any("initiating delete for capacity block expiration" in m for m in h.messages())


@pytest.mark.slow
def test_standard_reservations_are_not_expired_within_the_window(make_harness: MakeHarness, aws: AwsEnv) -> None:
    """expiration/suite_test.go:127 "should not delete nodeclaims associated with standard capacity reservations
    within the capacity block expiration window": default reservations, interruptible or not, never expire early."""
    wall = Wall()
    _block(aws, "cr-default", dt.timedelta(minutes=39), kind="default")
    _block(aws, "cr-default-interruptible", dt.timedelta(minutes=39), kind="default", interruptible=True)
    h = _expiring_harness(make_harness, aws, wall)
    create_all(h.cluster, objects.NODE_CLAIM, [_claim("cr-default", "cr-default"),
                                               _claim("cr-default-interruptible", "cr-default-interruptible")])
    h.controller.reconcile_once()
    assert len(_claims(h)) == 2


@pytest.mark.slow
def test_a_block_is_expired_on_the_minute_its_window_opens_by_the_adapters_clock(
    make_harness: MakeHarness, aws: AwsEnv
) -> None:
    """The lead time is read at the AWS adapter's wall clock (controller.go's `clk`, never the API server's): a block
    ending in 41 minutes keeps its claim; two minutes later (the next minute's reconcile) it is deleted."""
    wall = Wall()
    _block(aws, "cr-block", dt.timedelta(minutes=41))
    h = _expiring_harness(make_harness, aws, wall)
    create_all(h.cluster, objects.NODE_CLAIM, [_claim("block", "cr-block")])
    h.controller.reconcile_once()
    assert [objects.name(c) for c in _claims(h)] == ["block"]
    wall.now = START + dt.timedelta(minutes=2)
    h.clock.advance(30)
    h.controller.reconcile_once()
    assert [objects.name(c) for c in _claims(h)] == ["block"], "not before its minute"
    h.clock.advance(31)
    h.controller.reconcile_once()
    assert _claims(h) == []
