"""Capacity-reservation drift of a NodePool's nodes (issue #26), as aws v1.14.1's pkg/cloudprovider/drift.go
`isCapacityReservationDrifted` (drift.go:142-165) decides it, after the security groups and the subnet and before the
placement group (drift.go:73-81): an instance DescribeInstances reports in a capacity reservation (a
`capacity-reservations-only` launch's `CapacityReservationId`) that the EC2NodeClass no longer selects drifts with
reason `CapacityReservationDrift`; an instance EC2 moved to on-demand (no reservation any more) does not; reservations
the cloud could not tell decide nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from karpenter_policy.cloud.provider import STATE_RUNNING, Instance, Network
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.conditions import drift_reason as drift_condition_reason
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.disruption.decider import network_drift
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import Scene, compile_policies

SUITE = "aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/suite_test.go"
SUBNET = "subnet-0valid000000000001"
GROUP = "sg-0valid000000000001"
FOO, BAR = "cr-foo", "cr-bar"


def reserved(reservation: str) -> Instance:
    return Instance("i-0123456789abcdef0", "m5.large", "us-east-1a", wk.CAPACITY_RESERVED, STATE_RUNNING,
                    subnet_id=SUBNET, security_groups=(GROUP,), reservation_id=reservation,
                    reservation_type="default")


ON_DEMAND = Instance("i-0123456789abcdef0", "m5.large", "us-east-1a", wk.CAPACITY_ON_DEMAND, STATE_RUNNING,
                     subnet_id=SUBNET, security_groups=(GROUP,))


def selecting(*ids: str, known: bool = True) -> Network:
    return Network(frozenset({SUBNET}), frozenset({GROUP}), "", frozenset(ids) if known else None)


def test_a_reserved_instance_drifts_when_its_reservation_is_no_longer_selected() -> None:
    """suite_test.go:917 "should dynamically drift nodeclaims for capacity reservations": the class selects cr-foo;
    an instance in cr-foo has not drifted, one DescribeInstances now reports in cr-bar has:
    CapacityReservationDrift."""
    assert network_drift(reserved(FOO), selecting(FOO), {}) == ""
    why = network_drift(reserved(BAR), selecting(FOO), {})
    assert why.startswith("CapacityReservationDrift"), why
    assert BAR in why and FOO in why
    assert drift_condition_reason(why) == "CapacityReservationDrift"  # the claim's Drifted reason, as drift.go's


def test_an_instance_moved_to_on_demand_does_not_drift() -> None:
    """suite_test.go:949 "should not drift when capacity reservation falls back to on-demand": the reservation gone
    from the class's status and from the instance (EC2 moved it to on-demand) — no drift."""
    assert network_drift(reserved(FOO), selecting(FOO), {}) == ""
    assert network_drift(ON_DEMAND, selecting(), {}) == ""


@pytest.mark.parametrize(
    ("case", "instance", "network", "drifted"),
    [
        ("the class selects none now", reserved(FOO), selecting(), True),
        ("the class selects it among others", reserved(FOO), selecting(BAR, FOO), False),
        ("the reservations are unknown (EC2 failed, or the gate is off)", reserved(BAR), selecting(known=False),
         False),
        ("an on-demand instance in a class selecting reservations", ON_DEMAND, selecting(FOO), False),
        # a `reserved` reading needs the reservation id; an id on a spot/on-demand reading is not a reservation
        ("an id on a non-reserved reading", Instance("i-1", "m5.large", "us-east-1a", wk.CAPACITY_ON_DEMAND,
                                                     STATE_RUNNING, subnet_id=SUBNET, security_groups=(GROUP,),
                                                     reservation_id=BAR), selecting(FOO), False),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_drift_go_branches(case: str, instance: Instance, network: Network, drifted: bool) -> None:
    """drift.go:148-165's branches: no reservation details → none; the id among the class's → none; else drifted."""
    why = network_drift(instance, network, {})
    assert why.startswith("CapacityReservationDrift") if drifted else why == "", (case, why)


def test_order_security_groups_subnet_reservation_placement_group() -> None:
    """drift.go:73-81: `lo.FindOrElse` over security groups, subnet, capacity reservation, placement group."""
    moved = Instance("i-1", "m5.large", "us-east-1a", wk.CAPACITY_RESERVED, STATE_RUNNING, subnet_id="subnet-0gone",
                     security_groups=(GROUP,), reservation_id=BAR)
    assert network_drift(moved, selecting(FOO), {}).startswith("SubnetDrift")
    grouped = Network(frozenset({SUBNET}), frozenset({GROUP}), "pg-0123456789abcdef0", frozenset({FOO}))
    assert network_drift(reserved(BAR), grouped, {}).startswith("CapacityReservationDrift")
    assert network_drift(reserved(FOO), grouped, {}).startswith("PlacementGroupDrift")


# --- the controller, on the in-memory cloud ----------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "v1" / "controller"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1reservationdrift") / "build")


def _drifted(scene: Scene, claim: str) -> dict[str, str] | None:
    status = scene.nodeclaims()[claim].get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Drifted"), None)


@pytest.mark.parametrize(("gate", "reason"), [(True, "CapacityReservationDrift"), (False, None)])
def test_the_controller_marks_the_claim_of_an_unselected_reservation_drifted(
    compiled: Path, gate: bool, reason: str | None
) -> None:
    """The node's instance is in cr-foo (as DescribeInstances reads it) while the class selects cr-bar only: its claim
    is Drifted `CapacityReservationDrift` (drift.go:148); with `--feature-gates ReservedCapacity=false` v1.14.1 reads
    no instance `reserved`, so nothing drifts. Once the class selects cr-foo again, Drifted goes."""
    scene = Scene(compiled)
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller(reserved_capacity=gate)
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (claim, _), = scene.nodeclaims().items()
    node = next(n for n, obj in scene.nodes().items() if claim_of_node(obj) == claim)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    cloud.set_reservation(node_info.instance_id(scene.nodes()[node]), FOO)
    selects = Network(frozenset({cloud.subnet_id}), frozenset(cloud.security_groups), "", frozenset({FOO}))
    cloud.resolved = selects
    scene.run(controller, 60)
    assert _drifted(scene, claim) is None

    cloud.resolved = dataclasses.replace(selects, reservations=frozenset({BAR}))
    scene.run(controller, 900, until=lambda: _drifted(scene, claim) is not None)
    drifted = _drifted(scene, claim)
    if reason is None:
        assert drifted is None
        return
    assert drifted is not None and drifted["status"] == "True" and drifted["reason"] == reason, drifted
    cloud.resolved = selects
    scene.run(controller, 900, until=lambda: _drifted(scene, claim) is None)
    assert _drifted(scene, claim) is None
