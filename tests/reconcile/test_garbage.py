"""Garbage collection both ways on the in-memory cluster and cloud (then on moto): an instance with no Node is
terminated after its grace period, a Node whose instance is gone is deleted; what is not ours is never touched;
an instance a crashed controller launched for a live provisioner is adopted, not collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.cloud.aws.launchtemplates import NAME_PREFIX, TEMPLATE_TTL
from karpenter_policy.cloud.provider import STATE_TERMINATED
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.garbage.collector import MISSING_READS
from karpenter_policy.reconcile.options import DEFAULT_NODE_GRACE
from karpenter_policy.reconcile.state import nodes as node_info

from .conftest import AwsWorkloads, MakeHarness
from .lifecycle import Killed, World
from .support import create_all, inflate


@pytest.fixture()
def world(compiled: Path, log: object) -> World:
    return World(compiled, types=["m5.xlarge", "m5.2xlarge"])


def metric(controller: object, kind: str) -> float:
    registry = controller.metrics.registry  # type: ignore[attr-defined]
    return registry.get_sample_value("karpenter_policy_garbage_collected_total", {"object": kind}) or 0.0


def test_an_instance_with_no_node_is_terminated_once_its_grace_period_is_over(world: World) -> None:
    stray = world.launch_outside("retired", "token-retired")  # its provisioner's constraint set is gone
    controller = world.controller()
    first = controller.reconcile_once()
    assert first.garbage is not None and first.garbage.terminated == [], "launched a moment ago: within grace"
    world.clock.advance(119)
    assert controller.reconcile_once().garbage is None, "collection runs every two minutes"
    world.clock.advance(2)
    collected = controller.reconcile_once().garbage
    assert collected is not None and collected.terminated == [stray.id]
    assert world.inner.get(stray.id) is None
    assert metric(controller, "instance") == 1


def test_a_node_whose_instance_is_gone_is_deleted_and_its_finalizer_released(world: World) -> None:
    controller = world.controller(batch_max=5.0)
    create_all(world.cluster, objects.POD, inflate(0, 3))
    for _ in range(20):
        result = controller.reconcile_once()
        if result.scheduled:
            break
        world.clock.advance(1)
    (node,) = world.cluster.list(objects.NODE).items
    assert wk.TERMINATION_FINALIZER in objects.finalizers(node)
    world.inner.set_state(node_info.instance_id(node), STATE_TERMINATED)  # reclaimed behind our back
    gone_at = world.clock()

    passes = []
    while (collected := controller.reconcile_once().garbage) is None or not collected.deleted:
        if collected is not None:
            passes.append(world.clock() - gone_at)
        assert world.clock() - gone_at < 600, "never collected"
        world.clock.advance(10)

    assert collected.deleted == [objects.name(node)]
    waited = world.clock() - gone_at
    first_read = passes[0]
    assert len(passes) >= MISSING_READS - 1, "three reads"
    assert waited - first_read >= DEFAULT_NODE_GRACE, "over five minutes"
    assert waited - first_read <= DEFAULT_NODE_GRACE + 10, "collected as soon as the window is over"
    assert world.cluster.list(objects.NODE).items == [], "deleted, not left hanging on its finalizer"
    assert metric(controller, "node") == 1
    assert world.orphans() == (set(), set())


def test_what_is_not_ours_is_never_collected(world: World) -> None:
    world.cluster.create(objects.NODE, {
        "metadata": {"name": "managed-node-group-1"},
        "spec": {"providerID": "aws:///us-east-1a/i-0aaaaaaaaaaaaaaaa"},  # no such instance, but not our node
    })
    controller = world.controller()
    world.clock.advance(600)
    controller.reconcile_once()
    world.clock.advance(121)
    controller.reconcile_once()
    assert [objects.name(n) for n in world.cluster.list(objects.NODE).items] == ["managed-node-group-1"]


def test_an_instance_launched_just_before_a_crash_is_adopted_not_collected(world: World) -> None:
    create_all(world.cluster, objects.POD, inflate(0, 3))
    world.switch.arm(at=1, after=True, only="create")  # dies once CreateFleet answered, before any Node write
    crashed = world.controller(batch_max=5.0)
    with pytest.raises(Killed):
        for _ in range(20):
            crashed.reconcile_once()
            world.clock.advance(1)
    (instance,) = world.inner.list("workloads")
    assert world.cluster.list(objects.NODE).items == []

    restarted = world.controller(batch_max=5.0)
    for _ in range(20):
        restarted.reconcile_once()
        world.kubelet.sync()
        if not world.unbound():
            break
        world.clock.advance(1)
    world.clock.advance(121)
    restarted.reconcile_once()

    assert world.unbound() == []
    assert [i.id for i in world.inner.list("workloads")] == [instance.id], "no second instance"
    assert world.orphans() == (set(), set())


@pytest.mark.slow
def test_both_ways_on_moto(make_harness: MakeHarness, aws_workloads: AwsWorkloads) -> None:
    """The wire path (DescribeInstances, TerminateInstances, DeleteLaunchTemplate); the grace periods are those of
    the tests above."""
    h = make_harness(cloud=aws_workloads.provider(), batch_max=5.0, gc_instance_grace=0, gc_node_grace=0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    h.batch()
    create_all(h.cluster, objects.POD, inflate(3, 6))
    h.batch()
    h.step()  # the launches settle: no longer in flight
    first, second = sorted(h.nodes(), key=objects.name)
    lost = node_info.instance_id(first)
    aws_workloads.env.ec2.terminate_instances(InstanceIds=[lost])  # a Node whose instance went away
    stray = node_info.instance_id(second)
    h.cluster.delete(objects.NODE, objects.name(second))  # an instance whose Node went away
    h.cluster.patch(objects.NODE, objects.name(second), {"metadata": {"finalizers": None}})

    deleted: list[str] = []
    terminated: list[str] = []
    for _ in range(MISSING_READS):  # the Node goes once its instance was missing from three reads
        h.clock.advance(121)
        collected = h.step().garbage
        assert collected is not None, h.messages()
        deleted += collected.deleted
        terminated += collected.terminated

    assert deleted == [objects.name(first)] and h.cluster.get(objects.NODE, objects.name(first)) is None
    assert terminated == [stray]
    (described,) = aws_workloads.env.ec2.describe_instances(InstanceIds=[stray])["Reservations"]
    assert described["Instances"][0]["State"]["Name"] in ("shutting-down", "terminated")

    # The launch templates those launches made go once no launch has needed them for their TTL.
    ec2 = aws_workloads.env.ec2
    before = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    made = {name for name in before if name.startswith(NAME_PREFIX)}
    assert made
    h.clock.advance(TEMPLATE_TTL + 1)
    collected = h.step().garbage
    assert collected is not None and set(collected.launch_templates) == made
    after = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert after == before - made, "the others (a node template's own) stay"
    assert metric(h.controller, "launch_template") == len(made)
