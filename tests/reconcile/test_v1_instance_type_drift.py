"""Instance-type-not-found drift of a NodePool's nodes, as core v1.14.1's pkg/controllers/nodeclaim/disruption/
drift.go `isDrifted` decides it after static and requirement drift: once a node is an hour old, its instance type no
longer among those its node class offers, or none of that type's offerings compatible with its zone and capacity
type (`InstanceTypeNotFound`). Ported cases name core's drift_test.go at v1.14.1 with their lines; then the
controller on `Scene`, whose in-memory cloud stops selling the node's type."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.reconcile.claims.conditions import drift_reason as drift_condition_reason
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.disruption.decider import instance_type_not_found
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
LABELS = {wk.INSTANCE_TYPE: "m5.large", wk.ZONE: "test-zone-1a", wk.CAPACITY_TYPE: "spot"}


def offered(*offerings: Offering, name: str = "m5.large") -> list[InstanceType]:
    return [InstanceType(name, 2, 8192, ("amd64",), offerings=offerings)]


SPOT_1A = Offering("test-zone-1a", "spot", 0.05)


@pytest.mark.parametrize(
    ("case", "labels", "types", "drifted"),
    [
        ("drift_test.go:86 no instance-type label", {k: v for k, v in LABELS.items() if k != wk.INSTANCE_TYPE},
         offered(SPOT_1A), True),
        ("drift_test.go:95 the type does not exist", LABELS, [], True),
        ("drift_test.go:104 the type has no offerings", LABELS, offered(), True),
        ("drift_test.go:116 no offering compatible with the node", LABELS,
         offered(Offering("test-zone-1b", "spot", 0.05), Offering("test-zone-1a", "on-demand", 0.1)), True),
        ("offered: no drift", LABELS, offered(Offering("test-zone-1b", "spot", 0.05), SPOT_1A), False),
        ("an unavailable offering still counts (HasCompatible reads them all)", LABELS,
         offered(Offering("test-zone-1a", "spot", 0.05, available=False)), False),
        ("a label the node lacks is no constraint", {wk.INSTANCE_TYPE: "m5.large"}, offered(SPOT_1A), False),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_instance_type_not_found_is_core_v1s(
    case: str, labels: dict[str, str], types: list[InstanceType], drifted: bool
) -> None:
    why = instance_type_not_found(labels, types)
    assert bool(why) == drifted, (case, why)
    if drifted:
        assert drift_condition_reason(why) == "InstanceTypeNotFound"


RESERVED_LABELS = {wk.INSTANCE_TYPE: "m5.large", wk.ZONE: "test-zone-1a", wk.CAPACITY_TYPE: "reserved",
                   wk.CAPACITY_RESERVATION_ID: "cr-0123456789abcdef0", wk.CAPACITY_RESERVATION_TYPE: "default"}
BY_CAPACITY = {
    "reserved": Offering("test-zone-1a", "reserved", 1e-8, reservation_id="cr-0fedcba9876543210"),
    "on-demand": Offering("test-zone-1a", "on-demand", 0.1),
    "spot": Offering("test-zone-1a", "spot", 0.05),
}


@pytest.mark.parametrize(
    ("case", "capacity_types", "drifted"),
    [
        ("shouldn't drift when a matching instance type exists with reserved and on-demand offerings",
         ("reserved", "on-demand"), False),
        ("shouldn't drift when a matching instance type exists with reserved offerings", ("reserved",), False),
        ("shouldn't drift when a matching instance type exists with on-demand offerings", ("on-demand",), False),
        ("should drift when a matching instance type exists but the only offering is spot", ("spot",), True),
        ("should drift when a matching instance type exists but there are no compatible offerings", (), True),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_reserved_node_is_kept_by_reserved_or_on_demand_offerings(
    case: str, capacity_types: tuple[str, ...], drifted: bool
) -> None:
    """core v1.14.1 pkg/controllers/nodeclaim/disruption/drift_test.go:521-570 "Reserved Capacity" InstanceTypeNotFound
    (drift.go:135-145): a `reserved` node may be demoted to on-demand after its launch, so reserved or on-demand
    offerings both keep it, and its reservation labels (another reservation's offering here) are not compared."""
    why = instance_type_not_found(RESERVED_LABELS, offered(*(BY_CAPACITY[c] for c in capacity_types)))
    assert bool(why) == drifted, (case, why)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1types") / "build")


def _drifted(scene: Scene, claim: str) -> dict[str, str] | None:
    status = scene.nodeclaims()[claim].get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Drifted"), None)


def test_a_type_no_longer_sold_drifts_the_node_once_it_is_an_hour_old(compiled: Path) -> None:
    """The cloud stops selling the node's type: before the node is an hour old nothing drifts (drift.go looks
    only after `time.Hour`); after, its claim is Drifted `InstanceTypeNotFound`."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (claim, _), = scene.nodeclaims().items()
    node = next(n for n, obj in scene.nodes().items() if claim_of_node(obj) == claim)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    launched = objects.labels(scene.nodes()[node])[wk.INSTANCE_TYPE]
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    cloud.stop_selling(launched)
    assert launched not in {t.name for t in cloud.instance_types()}
    scene.run(controller, 1800)
    assert _drifted(scene, claim) is None  # not an hour old yet
    scene.run(controller, 3600, until=lambda: _drifted(scene, claim) is not None)
    drifted = _drifted(scene, claim)
    assert drifted is not None and drifted["reason"] == "InstanceTypeNotFound", drifted
