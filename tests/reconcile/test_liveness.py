"""Registration liveness (issue #23): a node of ours whose kubelet never joins is deleted 15 minutes after its
launch, as Karpenter v0.31.1's `nodeclaim/lifecycle/liveness.go` deletes a machine whose node has not registered
(`machine_liveness_test.go`: kept when it registered, deleted past the TTL when it did not). Its instance is
terminated through the termination path, a Warning Event and `karpenter_machines_terminated{reason="liveness"}`
say so, no pod beyond its launch's batch is bound to it meanwhile, its pods are provisioned again, and
consolidation of the other nodes, blocked while it is there, goes ahead once it is gone.

The scenes run in virtual time; `Scene(never_join=[type])` launches instances of that type whose kubelet never
joins (the Node stays as registered, marked Ready `Unknown`/`NodeStatusNeverUpdated` after 40 s)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.provisioning.liveness import REASON_REGISTRATION_TIMEOUT
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import EPOCH, MotoCloud, Scene, VirtualClock, compile_policies, instance_type

from .karpenter_policies import story_policies

ROOT = Path(__file__).resolve().parents[2]
ZONE = "us-east-1a"
#: The cheapest type of the scenes: the scheduler picks it; its kubelet never joins.
BAD = "c5.xlarge"
GOOD = "m5.xlarge"
TTL = 900.0


@pytest.fixture(scope="module")
def spot_build() -> Path:
    return compile_policies(ROOT / "examples" / "workloads" / "policies")


@pytest.fixture(scope="module")
def consolidating(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return story_policies(tmp_path_factory.mktemp("liveness"))


@pytest.fixture
def log() -> Iterator[io.StringIO]:
    """The controller's log lines, as `LEVEL message`."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root = logging.getLogger("karpenter_policy")
    root.addHandler(handler)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)


def spot_scene(build: Path) -> Scene:
    """The bad type is the cheaper of two sold in one zone (spot)."""
    types = [instance_type(BAD, [(ZONE, "spot", 0.05)]), instance_type(GOOD, [(ZONE, "spot", 0.08)])]
    return Scene(build, types=types, never_join=[BAD])


def kind(scene: Scene, node: str) -> str:
    found = scene.node(node)
    assert found is not None, node
    return str(objects.labels(found)["node.kubernetes.io/instance-type"])


def terminated(controller: Controller, reason: str = "liveness", provisioner: str = "default") -> float:
    value = controller.metrics.registry.get_sample_value(
        "karpenter_machines_terminated_total", {"reason": reason, "provisioner": provisioner})
    if value is None:
        value = controller.metrics.registry.get_sample_value(
            "karpenter_machines_terminated", {"reason": reason, "provisioner": provisioner})
    return value or 0.0


def launch(scene: Scene, controller: Controller) -> tuple[str, str, float]:
    """Run until the first launch: its node, its instance, and when it launched (the scene's clock)."""
    scene.run(controller, 60, until=lambda: bool(scene.nodes()))
    (name,) = scene.nodes()
    (instance,) = scene.instances()
    return name, instance.id, scene.clock.now


def test_a_node_whose_kubelet_never_joins_is_deleted_at_the_ttl_and_its_pods_provisioned_again(
    spot_build: Path, log: io.StringIO
) -> None:
    scene = spot_scene(spot_build)
    web = scene.add_deployment("web", 3, cpu="500m")
    controller = scene.controller()
    bad, instance, launched = launch(scene, controller)
    assert kind(scene, bad) == BAD and scene.pods_on(bad) == ["web-0", "web-1", "web-2"], "its own batch is bound"
    # Three more pods fit the node: planned onto it, they are held (nominated), never bound to it.
    web.scale(6)
    results = scene.run(controller, 120)
    assert scene.pods_on(bad) == ["web-0", "web-1", "web-2"]
    assert sorted(scene.unbound()) == ["default/web-3", "default/web-4", "default/web-5"]
    assert any(r.held.get(bad) for r in results)
    node = scene.node(bad)
    assert node is not None and node["status"]["conditions"][0]["reason"] == "NodeStatusNeverUpdated"
    # Up to the TTL it stays (and gets no pod); the type then has no capacity left, so the relaunch is another.
    scene.run(controller, launched + TTL - 2 - scene.clock.now)
    assert bad in scene.nodes() and not objects.is_deleting(scene.nodes()[bad])
    assert scene.pods_on(bad) == ["web-0", "web-1", "web-2"] and terminated(controller) == 0
    scene.cloud.fail_capacity(BAD, ZONE, "spot")  # type: ignore[attr-defined]
    results = scene.run(controller, 10, until=lambda: bad not in scene.nodes())
    deleted_at = next(r.started for r in results if r.unregistered == [bad])
    assert launched + TTL <= deleted_at <= launched + TTL + 2
    assert bad not in scene.nodes() and instance not in {i.id for i in scene.instances()}, "instance terminated"
    assert terminated(controller) == 1
    (event,) = scene.events(REASON_REGISTRATION_TIMEOUT)
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == bad
    assert f"the kubelet of node {bad} (instance {instance}, type {BAD}) did not join within 15m00s" in event["message"]
    assert f"ERROR the kubelet of node {bad}" in log.getvalue()
    # Its pods, evicted, are recreated by their owner and provisioned again, on a node that joins.
    scene.run(controller, 120, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    (good,) = scene.nodes()
    assert kind(scene, good) == GOOD and len(scene.pods_on(good)) == 6
    assert node_info.is_ready(scene.nodes()[good])


def test_the_registration_ttl_is_an_option(spot_build: Path) -> None:
    scene = spot_scene(spot_build)
    scene.add_deployment("web", 2, cpu="500m")
    controller = scene.controller(registration_ttl=120)
    bad, _, launched = launch(scene, controller)
    results = scene.run(controller, 300, until=lambda: bad not in scene.nodes())
    deleted_at = next(r.started for r in results if r.unregistered)
    assert launched + 120 <= deleted_at <= launched + 122
    assert terminated(controller) == 1
    with pytest.raises(ValueError, match="registration TTL"):
        ControllerOptions(cluster_name="c", registration_ttl=0)


def test_the_next_step_is_due_when_the_ttl_runs_out(spot_build: Path) -> None:
    """A driver that sleeps until `next_due` (the simulation, the threaded runner) wakes for the TTL."""
    scene = spot_scene(spot_build)
    scene.add_pods("job", 1, cpu="500m")
    controller = scene.controller(registration_ttl=300)
    _, _, launched = launch(scene, controller)
    scene.step(controller)
    # What else is due first (the disruption decision once the launch settled) comes and goes; then nothing but
    # the TTL is left to wake for.
    for _ in range(20):
        due = controller.next_due()
        if due is None or due >= launched + 60:
            break
        scene.advance(max(due - scene.clock(), 0.0))
        scene.step(controller)
    assert controller.next_due() == pytest.approx(launched + 300, abs=1)


def test_the_threaded_runner_deletes_a_node_that_never_joins(spot_build: Path) -> None:
    """In real time: the provisioning thread wakes for the TTL (no event comes) and termination terminates."""
    types = [instance_type(BAD, [(ZONE, "spot", 0.05)]), instance_type(GOOD, [(ZONE, "spot", 0.08)])]
    scene = Scene(spot_build, types=types, never_join=[BAD], real_time=True)
    with scene.runner(batch_idle=0.2, registration_ttl=1.5):
        scene.add_pods("job", 2, cpu="500m")
        assert scene.wait(lambda: bool(scene.instances()), 30), "no launch"
        (instance,) = scene.instances()
        assert instance.instance_type == BAD
        assert scene.wait(lambda: not scene.nodes() and not scene.instances(), 30), "not deleted"
    (event,) = scene.events(REASON_REGISTRATION_TIMEOUT)
    assert f"instance {instance.id}" in event["message"]


def test_a_node_that_joined_is_kept_whatever_its_kubelet_does_later(spot_build: Path) -> None:
    """`machine_liveness_test.go`: the node registered, it is kept past the TTL — here also once its kubelet stops
    posting (the node lifecycle controller marks it Unknown, `NodeStatusUnknown`), whatever its status says
    later."""
    scene = Scene(spot_build, types=[instance_type(GOOD, [(ZONE, "spot", 0.08)])])
    scene.add_deployment("web", 2, cpu="500m")
    controller = scene.controller()
    good, _, _ = launch(scene, controller)
    scene.run(controller, 60)
    lost = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "message": "Kubelet stopped posting node status."}]
    scene.cluster.patch(objects.NODE, good, {"status": {"conditions": lost}}, subresource="status")
    scene.kubelet.never_join = frozenset({GOOD})  # and it never comes back
    scene.run(controller, TTL, every=10)
    scene.cluster.patch(objects.NODE, good, {"status": {"conditions": None}}, subresource="status")
    assert not node_info.kubelet_joined(scene.nodes()[good])
    scene.run(controller, TTL + 60, every=10)
    assert good in scene.nodes() and not objects.is_deleting(scene.nodes()[good])
    assert terminated(controller) == 0 and scene.events(REASON_REGISTRATION_TIMEOUT) == []


def test_a_node_found_unjoined_is_timed_from_when_this_controller_first_saw_it(spot_build: Path) -> None:
    """A node launched before a restart: its age is the controller's own observation, not the API server's
    creationTimestamp against the local clock (here a day old by its timestamp)."""
    scene = spot_scene(spot_build)
    bad = scene.add_node("default", BAD, zone=ZONE, capacity_type="spot", ready=False, age=86_400)
    assert not node_info.kubelet_joined(scene.nodes()[bad])
    controller = scene.controller(registration_ttl=300)
    results = scene.run(controller, 400, until=lambda: bad not in scene.nodes())
    deleted_at = next(r.started for r in results if r.unregistered)
    assert results[0].started + 300 <= deleted_at <= results[0].started + 302


def test_consolidation_blocked_by_a_node_that_never_joins_goes_ahead_once_it_is_gone(consolidating: Path) -> None:
    """Karpenter's rule holds (pods would schedule against a non-initialized node: no consolidation), but the node
    that never initializes goes at its TTL, and consolidation of the others then proceeds."""
    scene = Scene(consolidating, types=["m5.large", "m5.2xlarge", BAD], never_join=[BAD])
    big = scene.add_node("default", "m5.2xlarge", zone=ZONE, age=3600)
    scene.add_pod("small", node=big, cpu="500m", owner=("ReplicaSet", "small-5d8f"))
    stuck = scene.add_node("default", BAD, zone=ZONE, ready=False)
    controller = scene.controller()
    results = scene.run(controller, TTL - 10, every=5)
    assert big in scene.nodes() and not objects.is_deleting(scene.nodes()[big])
    blocked = [why for r in results if r.disrupted is not None for why in r.disrupted.blocked.values()]
    assert any(f"non-initialized node {stuck}" in why for why in blocked)
    scene.run(controller, 600, until=lambda: big not in scene.nodes() and stuck not in scene.nodes())
    assert stuck not in scene.nodes() and big not in scene.nodes(), "the big node was consolidated"
    assert scene.unbound() == [] and [kind(scene, n) for n in scene.nodes()] == ["m5.large"]


@pytest.mark.parametrize(
    ("status", "joined"),
    [
        ({}, False),
        ({"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated"}]}, False),
        ({"conditions": [{"type": "MemoryPressure", "status": "False"}]}, False),
        ({"conditions": "garbage"}, False),
        ({"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}, True),
        ({"conditions": [{"type": "Ready", "status": "True"}]}, True),
        ({"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}, True),
        ({"nodeInfo": {"kubeletVersion": "v1.27.9-eks"}}, True),
        ({"nodeInfo": "garbage"}, False),
    ],
)
def test_what_counts_as_a_kubelet_that_joined(status: dict[str, Any], joined: bool) -> None:
    assert node_info.kubelet_joined({"metadata": {"name": "n"}, "status": status}) is joined


@pytest.mark.slow
def test_with_moto_s_ec2_the_instance_of_a_node_that_never_joins_is_terminated(spot_build: Path) -> None:
    """The same path with the production boto3 adapter against moto's EC2 over HTTP."""
    loaded = Scene(spot_build).loaded
    clock = VirtualClock(EPOCH)
    with MotoCloud(loaded.sets, load_catalog(), clock, region="us-east-1") as moto:
        scene = Scene(loaded, cloud=moto.provider, clock=clock, never_join=["m5.large"])
        scene.add_pods("web", 2, cpu="500m", nodeSelector={"node.kubernetes.io/instance-type": "m5.large"})
        controller = scene.controller(registration_ttl=120)
        bad, instance, launched = launch(scene, controller)
        results = scene.run(controller, 300, until=lambda: bad not in scene.nodes())
        deleted_at = next(r.started for r in results if r.unregistered == [bad])
        assert launched + 120 <= deleted_at <= launched + 122
        described = moto.provider.get(instance)
        assert described is None or described.state in ("shutting-down", "terminated")
        assert terminated(controller) == 1
        (event,) = scene.events(REASON_REGISTRATION_TIMEOUT)
        assert f"instance {instance}, type m5.large" in event["message"]
