"""Subnet and security-group drift of a NodePool's nodes, as aws v1.14.1's pkg/cloudprovider/drift.go
`isNodeClassDrifted` decides after the static hash and the AMI: the instance's security groups not the set its
EC2NodeClass resolves to now (`SecurityGroupDrift`), then its subnet not among the class's (`SubnetDrift`). Ported
cases name aws pkg/cloudprovider/suite_test.go at v1.14.1 with their lines; then the controller on `Scene` (the
in-memory cloud, whose resolved network a test changes) and on moto's EC2 over HTTP (`MotoCloud`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.cloud.provider import STATE_RUNNING, Instance, Network
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.conditions import drift_reason as drift_condition_reason
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.disruption.decider import network_drift
from karpenter_policy.testing import Scene, compile_policies

from .v1moto import moto_scene

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
VALID_SUBNET = "subnet-0valid000000000001"
VALID_GROUP = "sg-0valid000000000001"
OTHER_GROUP = "sg-0other000000000002"
RESOLVED = Network(frozenset({VALID_SUBNET, "subnet-0valid000000000002"}), frozenset({VALID_GROUP}))


def instance(subnet: str = VALID_SUBNET, groups: tuple[str, ...] | None = (VALID_GROUP,)) -> Instance:
    return Instance("i-0123456789abcdef0", "m5.large", "us-east-1a", "on-demand", STATE_RUNNING,
                    subnet_id=subnet, security_groups=groups)


@pytest.mark.parametrize(
    ("case", "launched", "resolved", "reason"),
    [
        ("suite_test.go:852 subnet not valid", instance(subnet="subnet-0gone"), RESOLVED, "SubnetDrift"),
        ("suite_test.go:861 subnets empty: an error, no drift", instance(subnet="subnet-0gone"),
         Network(frozenset(), RESOLVED.security_groups), ""),
        ("suite_test.go:868 NodeClaim valid", instance(), RESOLVED, ""),
        ("suite_test.go:873 security groups empty: an error, no drift", instance(groups=(OTHER_GROUP,)),
         Network(RESOLVED.subnets, frozenset()), ""),
        ("suite_test.go:881 groups differ", instance(groups=(OTHER_GROUP,)), RESOLVED, "SecurityGroupDrift"),
        ("suite_test.go:891 more instance groups", instance(groups=(OTHER_GROUP, VALID_GROUP)), RESOLVED,
         "SecurityGroupDrift"),
        ("suite_test.go:901 more discovered groups", instance(),
         Network(RESOLVED.subnets, frozenset({VALID_GROUP, OTHER_GROUP})), "SecurityGroupDrift"),
        ("suite_test.go:989 groups match", instance(), RESOLVED, ""),
        ("drift.go: groups before the subnet", instance(subnet="subnet-0gone", groups=(OTHER_GROUP,)), RESOLVED,
         "SecurityGroupDrift"),
        ("the cloud could not tell the network", instance(subnet="subnet-0gone"), None, ""),
        ("the cloud did not report the groups", instance(groups=None), RESOLVED, ""),
        ("the cloud did not report the subnet", instance(subnet=""), RESOLVED, ""),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_network_drift_is_aws_v1s(case: str, launched: Instance, resolved: Network | None, reason: str) -> None:
    why = network_drift(launched, resolved)
    assert why.startswith(reason) if reason else why == "", (case, why)
    if reason:
        assert drift_condition_reason(why) == reason  # the claim's Drifted reason, as drift.go names it


def test_an_unknown_instance_is_no_drift() -> None:
    assert network_drift(None, RESOLVED) == ""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1network") / "build")


def _drifted(scene: Scene, claim: str) -> dict[str, str] | None:
    status = scene.nodeclaims()[claim].get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Drifted"), None)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"security_groups": ("sg-0fake0000000000001", "sg-0fake0000000000002")}, "SecurityGroupDrift"),
        ({"subnet_id": "subnet-0fake0000000000002"}, "SubnetDrift"),
    ],
)
def test_the_controller_marks_the_claim_drifted_and_clears_it(
    compiled: Path, change: dict[str, object], reason: str
) -> None:
    """The class's selectors now resolve to other groups or another subnet (the in-memory cloud's): the node's
    claim is Drifted with drift.go's reason (its node do-not-disrupt, so it stays to be looked at); resolved back,
    Drifted goes. Nothing in the cluster changes: the decision is taken again at its recheck interval."""
    scene = Scene(compiled)
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (claim, _), = scene.nodeclaims().items()
    node = next(n for n, obj in scene.nodes().items() if claim_of_node(obj) == claim)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    scene.run(controller, 60)
    assert _drifted(scene, claim) is None

    launched = Network(frozenset({cloud.subnet_id}), frozenset(cloud.security_groups))
    cloud.resolved = Network(
        frozenset({str(change.get("subnet_id", cloud.subnet_id))}),
        frozenset(change.get("security_groups", cloud.security_groups)),  # type: ignore[arg-type]
    )
    scene.run(controller, 900, until=lambda: _drifted(scene, claim) is not None)
    drifted = _drifted(scene, claim)
    assert drifted is not None and drifted["status"] == "True" and drifted["reason"] == reason, drifted
    assert node in scene.nodes()

    cloud.resolved = launched
    scene.run(controller, 900, until=lambda: _drifted(scene, claim) is None)
    assert _drifted(scene, claim) is None


def test_a_drifted_security_group_replaces_the_node(compiled: Path) -> None:
    """Without do-not-disrupt the drifted node is replaced: the new one has the groups the class resolves to."""
    scene = Scene(compiled)
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (first,) = [n for n, obj in scene.nodes().items() if objects.labels(obj).get(wk.NODEPOOL) == "default"]
    cloud.security_groups = ("sg-0fake0000000000009",)
    scene.run(controller, 1200, until=lambda: first not in scene.nodes())
    assert first not in scene.nodes()
    assert scene.unbound() == []
    (instance_now,) = cloud.list(scene.options().cluster_name)
    assert instance_now.security_groups == ("sg-0fake0000000000009",)


@pytest.mark.slow
def test_on_motos_ec2_a_launched_node_has_its_class_network_and_does_not_drift(compiled: Path) -> None:
    """The production AWS adapter against moto's EC2 over HTTP: the node launched from the NodePool is in a subnet
    and has the groups its class selects, so a few decisions later it is still there, its claim not Drifted."""
    with moto_scene(compiled) as (scene, moto):
        scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: not scene.unbound())
        (claim, _), = scene.nodeclaims().items()
        scene.run(controller, 700)
        assert _drifted(scene, claim) is None
        (launched,) = moto.provider.list(scene.options().cluster_name)
        assert network_drift(launched, moto.provider.network(scene.loaded.sets[0].launch_spec)) == ""
        assert launched.security_groups
