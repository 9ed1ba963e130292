"""A NodePool whose EC2NodeClass selects a capacity reservation, end to end (issue #26): the controller with the
production AWS adapter over moto's server, the capacity-reservation stand-in before it (tests/cloud/reservations.py:
DescribeCapacityReservations, the reservation's count of the instances launched into it). Karpenter v1.14.1's
provisioner schedules in its strict mode (`DisableReservedCapacityFallback`, core
pkg/controllers/provisioning/provisioner.go:393): the pods that the reservation has room for launch into it, as
`reserved` nodes carrying its id and type (aws pkg/cloudprovider/cloudprovider.go:465-470); a pod that would need a
reservation already promised waits for the next pass — no FailedScheduling Event for it (scheduler.go:294) — and
then launches on-demand once the reservation is full. `--feature-gates ReservedCapacity=false` offers no
reservation at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.constraints import DirectorySource

from .conftest import AwsEnv, MakeHarness
from .support import Harness, compile_policies, container, create_all, label, replicas
from .v1moto import NODE_CLASS

RESERVATION = "cr-0123456789abcdef0"
ZONE = "us-east-1a"

POLICIES = f"""\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: reserved
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["reserved", "on-demand"]
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["m5.large"]
        - key: topology.kubernetes.io/zone
          operator: In
          values: ["{ZONE}"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
---
""" + NODE_CLASS.replace("discovery: test", "discovery: blue") + f"""\
  capacityReservationSelectorTerms:
    - id: {RESERVATION}
"""


@pytest.fixture()
def compiled(tmp_path: Path) -> Path:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepool.yaml").write_text(POLICIES)
    return compile_policies(tmp_path / "policies", tmp_path / "build")


def _harness(make_harness: MakeHarness, aws: AwsEnv, compiled: Path, pods: int, **options: Any) -> Harness:
    from cloud.reservations import DeclaredReservation  # the stand-in of tests/cloud

    aws.reservations.declare(DeclaredReservation(RESERVATION, "m5.large", ZONE, 2))
    # no disruption decision in these few minutes: moto's CreateFleet gives instances no security group (the
    # simulate front gives them the template's), which network drift would read as drifted
    h = make_harness(
        cloud=aws.provider(), source=DirectorySource(compiled), batch_max=5.0, disruption_interval=1e6, **options
    )
    create_all(h.cluster, objects.POD, replicas("big", 0, pods, containers=[container("1500m")]))
    return h


def _kinds(h: Harness) -> list[str]:
    return sorted(label(n, wk.CAPACITY_TYPE) or "" for n in h.nodes())


@pytest.mark.slow
def test_pods_launch_into_the_reservation_while_it_has_room_then_on_demand(
    make_harness: MakeHarness, aws: AwsEnv, compiled: Path
) -> None:
    """Three pods of a node each, a reservation with room for two: the first pass launches two `reserved` nodes into
    it and defers the third pod (strict mode: its claim could have had a reservation and got none) — no Event, not
    reported; the next pass, the reservation full, launches it on-demand."""
    h = _harness(make_harness, aws, compiled, 3)
    h.batch()
    assert _kinds(h) == ["reserved", "reserved"], h.messages()
    (waiting,) = h.unbound()
    assert not h.events("FailedScheduling"), "a pod waiting for reserved capacity is not reported"
    assert waiting not in h.results[-1].unschedulable
    for _ in range(5):  # tried again at the next pass
        h.clock.advance(15)
        h.batch()
        if not h.unbound():
            break
    assert not h.unbound(), h.messages()
    assert _kinds(h) == ["on-demand", "reserved", "reserved"], h.messages()
    reserved = [n for n in h.nodes() if label(n, wk.CAPACITY_TYPE) == "reserved"]
    assert {label(n, wk.CAPACITY_RESERVATION_ID) for n in reserved} == {RESERVATION}
    assert {label(n, wk.CAPACITY_RESERVATION_TYPE) for n in reserved} == {"default"}
    assert sorted(aws.reservations.launched_into(RESERVATION)) == sorted(
        n["spec"]["providerID"].rsplit("/", 1)[-1] for n in reserved
    )
    assert aws.reservations.available(RESERVATION) == 0
    on_demand = next(n for n in h.nodes() if label(n, wk.CAPACITY_TYPE) == "on-demand")
    assert label(on_demand, wk.CAPACITY_RESERVATION_ID) is None
    assert not h.events("FailedScheduling")


@pytest.mark.slow
def test_with_the_reserved_capacity_gate_off_nothing_launches_into_the_reservation(
    make_harness: MakeHarness, aws: AwsEnv, compiled: Path
) -> None:
    """`--feature-gates ReservedCapacity=false` (`ControllerOptions.reserved_capacity`): v1.14.1 offers no reserved
    offering (aws pkg/providers/instancetype/offering: the gate off), so the pods launch on-demand at once."""
    h = _harness(make_harness, aws, compiled, 2, reserved_capacity=False)
    h.batch()
    assert not h.unbound(), h.messages()
    assert _kinds(h) == ["on-demand", "on-demand"]
    assert aws.reservations.launched_into(RESERVATION) == []
