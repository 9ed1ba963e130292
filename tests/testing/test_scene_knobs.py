"""The knobs of the testing API for what goes wrong and what is seen (karpenter_policy.testing, docs/testing.md):
each one used as a scene writer would, with the controllers running on it in virtual time."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.testing import (
    NEVER_INITIALIZED_TAINT,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    STATE_STOPPED,
    ClusterCall,
    Scene,
    compile_policies,
    eventbridge,
    instance_type,
)

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "workloads" / "policies"
INITIALIZED = "karpenter.sh/initialized"


@pytest.fixture(scope="module")
def compiled() -> Path:
    return compile_policies(POLICIES)


def two_zones() -> list[object]:
    """m5.large sold as spot in two zones, the first the cheaper."""
    return [instance_type("m5.large", [("us-east-1a", "spot", 0.03), ("us-east-1b", "spot", 0.05)])]


def test_a_node_that_never_initializes_stays_uninitialized_while_another_is_initialized(compiled: Path) -> None:
    scene = Scene(compiled)
    stuck = scene.add_node("default", "m5.xlarge", never_initialized=True)
    late = scene.add_node("default", "m5.xlarge", initialized=False)
    for node in (stuck, late):
        scene.add_pod(f"on-{node}", node=node)
    scene.run(scene.controller(), 30)
    nodes = scene.nodes()
    assert nodes[late]["metadata"]["labels"].get(INITIALIZED) == "true", "the controller initialized it"
    assert INITIALIZED not in nodes[stuck]["metadata"]["labels"], "its startup taint never went"
    assert NEVER_INITIALIZED_TAINT in nodes[stuck]["spec"]["taints"]
    assert nodes[stuck]["status"]["conditions"][0]["status"] == "True", "Ready all the same"


def test_an_offering_unavailable_from_the_start_is_not_launched(compiled: Path) -> None:
    scene = Scene(compiled, types=two_zones(), unavailable=[("m5.large", "us-east-1a", "spot")])
    assert scene.unavailable_offerings() == {("m5.large", "us-east-1a", "spot"): "InsufficientInstanceCapacity"}
    scene.add_pod("web", cpu="1")
    scene.run(scene.controller(), 60, until=lambda: not scene.unbound())
    (launched,) = scene.instances()
    assert launched.zone == "us-east-1b", "the cheaper zone's offering was unavailable"


def test_failing_launches_of_an_offering_make_the_controller_launch_elsewhere(compiled: Path) -> None:
    scene = Scene(compiled, types=two_zones())
    scene.fail_launches("m5.large", "us-east-1a", "spot")
    scene.add_pod("web", cpu="1")
    scene.run(scene.controller(), 60, until=lambda: not scene.unbound())
    (launched,) = scene.instances()
    assert launched.zone == "us-east-1b"
    assert ("m5.large", "us-east-1a", "spot") in scene.unavailable_offerings(), "marked as EC2's answer marks it"
    scene.restore_launches("m5.large", "us-east-1a", "spot")


def test_a_failed_launch_is_retried_and_counted_in_the_metrics(compiled: Path) -> None:
    scene = Scene(compiled, types=two_zones())
    scene.fail_next_launch()
    scene.add_pod("web", cpu="1")
    controller = scene.controller()
    results = scene.run(controller, 60, until=lambda: not scene.unbound())
    assert any("could not launch node" in error for r in results for error in r.errors), "the first launch failed"
    assert scene.unbound() == [] and len(scene.instances()) == 1, "the retry launched"
    assert scene.metric(controller, "karpenter_policy_launch_errors_total",
                        provisioner="default", reason="insufficient_capacity") == 1.0
    assert scene.metric(controller, "karpenter_policy_nodes_launched_total",
                        provisioner="default", capacity_type="spot") == 1.0
    assert scene.metric(controller, "karpenter_policy_nodes_launched_total", provisioner="gpu",
                        capacity_type="spot") is None, "no such sample"


def test_evictions_are_recorded_with_their_answers(compiled: Path) -> None:
    scene = Scene(compiled)
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("web", node=node, labels={"app": "web"})
    pdb = scene.add_pdb("web", {"app": "web"}, min_available=1)
    controller = scene.controller()
    evictions = scene.record_evictions()
    scene.cluster.delete(NODE, node)
    scene.run(controller, 5)
    assert evictions and all(not e.allowed and e.error is not None and e.error.status == 429 for e in evictions)
    assert {(e.verb, e.kind, e.namespace, e.name) for e in evictions} == {("evict", POD, "default", "web")}
    scene.cluster.delete(POD_DISRUPTION_BUDGET, pdb["metadata"]["name"], "default")
    scene.run(controller, 30, until=lambda: scene.node(node) is None)
    assert evictions[-1] == ClusterCall("evict", POD, "default", "web"), "allowed once the budget went"


def test_a_node_without_the_finalizer_goes_at_once_when_deleted(compiled: Path) -> None:
    scene = Scene(compiled)
    bare = scene.add_node("default", "m5.xlarge", finalizer=False)
    held = scene.add_node("default", "m5.xlarge")
    assert "karpenter.sh/termination" not in (scene.nodes()[bare]["metadata"].get("finalizers") or [])
    scene.cluster.delete(NODE, bare)
    scene.cluster.delete(NODE, held)
    assert scene.node(bare) is None, "nothing held its deletion"
    assert scene.node(held) is not None, "the termination finalizer holds it until the controller drains it"


def test_exact_owner_references_are_kept_as_given(compiled: Path) -> None:
    scene = Scene(compiled)
    references = [{"apiVersion": "example.com/v1", "kind": "Workflow", "name": "nightly", "uid": "u-1"},
                  {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u-2", "controller": False}]
    pod = scene.add_pod("step", owner_references=references)
    assert pod["metadata"]["ownerReferences"] == references


def test_an_action_runs_in_the_middle_of_the_step_that_made_a_write(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("first", cpu="1")
    controller = scene.controller()
    seen: list[ClusterCall] = []

    def arrives(call: ClusterCall) -> None:  # a pod arrives as the controller creates the Node it launched
        seen.append(call)
        assert scene.unbound() == ["default/first"], "the step has not bound the first pod yet"
        scene.add_pod("second", cpu="1")

    stop = scene.on_call("create", arrives, kind=NODE, once=True)
    scene.run(controller, 120, until=lambda: not scene.unbound())
    stop()
    assert [call.kind for call in seen] == [NODE], "once; the action's own write is not seen"
    assert scene.unbound() == [] and {p["metadata"]["name"] for p in scene.pods()} == {"first", "second"}


def test_interruption_messages_go_through_the_scenes_queue(compiled: Path) -> None:
    scene = Scene(compiled)
    node = scene.add_node("default", "m5.xlarge", capacity_type="spot")
    queue = scene.queue  # the scene has a queue before its controller: the controller's interruption takes it
    controller = scene.controller()
    (instance,) = scene.instances()
    message = eventbridge.spot_interruption(instance.id)
    queue.send(message)
    assert queue.visible() == 1
    result = scene.step(controller)  # one step: the interruption controller first, then termination
    assert result.interrupted == {node: "CordonAndDrain"}
    assert queue.deleted == [message] and queue.visible() == 0
    scene.run(controller, 60, until=lambda: scene.node(node) is None)
    assert scene.node(node) is None


def test_an_instance_stopped_from_outside(compiled: Path) -> None:
    scene = Scene(compiled)
    stopped = scene.add_node("default", "m5.xlarge")
    gone = scene.add_node("default", "m5.xlarge", annotations={"karpenter.sh/do-not-consolidate": "true"})
    scene.stop_instance(stopped, STATE_STOPPED)
    assert {i.state for i in scene.instances()} == {"running", STATE_STOPPED}
    (instance,) = [i for i in scene.instances() if i.state == "running"]
    scene.stop_instance(instance.id)  # by id; terminated by default
    assert [i.state for i in scene.instances()] == [STATE_STOPPED]
    scene.run(scene.controller(), 600, until=lambda: scene.node(gone) is None)
    assert scene.node(gone) is None, "garbage collection released the Node of the terminated instance"


def test_the_cloud_knobs_refuse_another_cloud(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.cloud = object()  # type: ignore[assignment]  # as a scene on moto's EC2 (MotoCloud) would have
    with pytest.raises(TypeError, match="in-memory cloud"):
        scene.fail_next_launch()
