"""Fault injection: EC2 failing at random (InsufficientInstanceCapacity, RequestLimitExceeded, 500s, timeouts
before the call and after it acted), and the controller killed at a random operation of a launch — a cloud call
or a cluster write, before or after it acted — then restarted on the same cluster and cloud.

After each run, whatever the seed: every pending pod is bound, no pod was lost, no instance is left without a
Node and no Node of ours without an instance, and no pod got a second instance. 24 seeds, each with its own kill
point, fault sequence and pods.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from karpenter_policy.kube import objects

from .lifecycle import Killed, World, live_instances
from .support import create_all, inflate

SEEDS = range(24)
#: Operations a launch goes through that a kill can interrupt (cloud calls and cluster writes).
KILL_POINTS = ("create", "get", "list", "create Node", "patch Node", "bind", None)
GARBAGE_GRACE = 121  # seconds: past the garbage collector's period, so that both directions are checked


def run_until_settled(world: World, *, passes: int = 400) -> list[str]:
    """Controllers on the world, a new one after each kill, until every pod is bound and nothing is orphaned.
    Returns where the kills fired."""
    kills: list[str] = []
    controller = world.controller(batch_max=5.0)
    for _ in range(passes):
        try:
            controller.reconcile_once()
        except Killed as killed:
            kills.append(str(killed))
            controller = world.controller(batch_max=5.0)  # the process restarts
            continue
        try:
            world.kubelet.sync()
        except Killed as killed:  # the switch counts the kubelets' Node writes too: the controller dies then
            kills.append(f"{killed} (kubelet)")
            controller = world.controller(batch_max=5.0)
        if not world.unbound() and world.orphans() == (set(), set()):
            break
        world.clock.advance(1)
    # Past the collector's period, with no kill armed: nothing is left to collect either way.
    world.switch.at = None
    world.clock.advance(GARBAGE_GRACE)
    controller.reconcile_once()
    world.kubelet.sync()
    return kills


@pytest.mark.parametrize("seed", SEEDS)
def test_no_pod_lost_no_orphan_no_duplicate_whatever_fails_and_wherever_it_dies(compiled: Path, seed: int) -> None:
    rng = random.Random(seed)
    world = World(compiled, seed=seed, fault_rate=0.25, types=["m5.xlarge", "m5.2xlarge", "c5.2xlarge"])
    pods = inflate(0, rng.randint(3, 12))
    create_all(world.cluster, objects.POD, pods)
    only = rng.choice(KILL_POINTS)
    world.switch.arm(at=rng.randint(1, 3), after=rng.random() < 0.5, only=only)

    kills = run_until_settled(world)

    assert world.unbound() == [], (kills, world.cloud.injected)
    assert len(world.cluster.list(objects.POD).items) == len(pods), "a pod was lost"
    assert world.orphans() == (set(), set()), (kills, world.cloud.injected)
    nodes = world.cluster.list(objects.NODE).items
    assert len(live_instances(world.inner, "workloads")) == len(nodes), "an instance too many"
    # No node is empty of our pods: a pod never got two nodes launched for it.
    used = {p["spec"]["nodeName"] for p in world.cluster.list(objects.POD).items}
    assert {objects.name(n) for n in nodes} <= used, (kills, world.cloud.injected)


def test_the_kills_and_faults_do_fire(compiled: Path) -> None:
    """The suite above is not vacuous: across its seeds, kills fire and every kind of fault is injected."""
    fired, faults = 0, set()
    for seed in SEEDS:
        rng = random.Random(seed)
        world = World(compiled, seed=seed, fault_rate=0.25, types=["m5.xlarge", "m5.2xlarge", "c5.2xlarge"])
        create_all(world.cluster, objects.POD, inflate(0, rng.randint(3, 12)))
        world.switch.arm(at=rng.randint(1, 3), after=rng.random() < 0.5, only=rng.choice(KILL_POINTS))
        fired += len(run_until_settled(world))
        faults |= {entry.split(":")[1] for entry in world.cloud.injected}
    assert fired >= 20
    assert faults == {"capacity", "throttled", "server", "timeout", "lost"}
