"""Karpenter v0.31.1's Events on pods and nodes, where the controller takes the decision, with Karpenter's reasons
and messages (pkg/controllers/provisioning/scheduling/events.go, deprovisioning/events/events.go,
termination/terminator/events/events.go), deduplicated and rate-limited as Karpenter's recorder does
(pkg/events/recorder.go) — on scenes in virtual time (karpenter_policy.testing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.reconcile import events
from karpenter_policy.testing import Scene

from .karpenter_policies import BATCH_POD, TYPES, story_policies


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return story_policies(tmp_path_factory.mktemp("events"))


def on(scene: Scene, reason: str, name: str) -> list[objects.Obj]:
    return [e for e in scene.events(reason) if e["involvedObject"]["name"] == name]


def test_pods_launched_for_are_nominated_to_their_node(compiled: Path) -> None:
    scene = Scene(compiled, types=TYPES)
    controller = scene.controller()
    scene.add_deployment("web", 3, cpu="1")
    scene.run(controller, 60, until=lambda: not scene.unbound())
    (node,) = scene.nodes()
    nominated = scene.events(events.NOMINATED)
    assert sorted(e["involvedObject"]["name"] for e in nominated) == ["web-0", "web-1", "web-2"]
    assert {(e["type"], e["message"]) for e in nominated} == {("Normal", f"Pod should schedule on: node/{node}")}


def test_nominations_are_rate_limited_as_karpenters(compiled: Path) -> None:
    """PodNominationRateLimiter: 10 at once, then 5 a second — a burst of 40 pods gets 10 Events, not 40."""
    scene = Scene(compiled, types=TYPES)
    controller = scene.controller()
    scene.add_deployment("web", 40, cpu="100m")
    scene.run(controller, 60, until=lambda: not scene.unbound())
    assert len(scene.events(events.NOMINATED)) == 10


def test_a_consolidated_node_and_an_emptied_node_are_told_why_they_go(compiled: Path) -> None:
    scene = Scene(compiled, types=TYPES)
    controller = scene.controller()
    empty = scene.add_node("default", "m5.xlarge")
    batch = scene.add_node("batch", "m6i.large", capacity_type="spot")
    scene.run(controller, 120, until=lambda: not scene.nodes())
    assert not scene.nodes()
    (consolidated,) = on(scene, events.DEPROVISIONING_TERMINATING, empty)
    assert (consolidated["type"], consolidated["message"]) == ("Normal", "Deprovisioning Node: Consolidation/Delete")
    (emptied,) = on(scene, events.DEPROVISIONING_TERMINATING, batch)
    assert emptied["message"] == "Deprovisioning Node: Emptiness/Delete"


def test_a_node_consolidation_cannot_replace_is_unconsolidatable_once_per_15_minutes(compiled: Path) -> None:
    scene = Scene(compiled, types=["m5.large", "m5.xlarge"])
    node = scene.add_node("default", "m5.large")
    controller = scene.controller()
    scene.add_pods("web", 2, cpu="700m", node=node)  # m5.large is the cheapest type: nothing cheaper takes them
    scene.run(controller, 14 * 60)
    (event,) = on(scene, events.UNCONSOLIDATABLE, node)
    assert (event["type"], event["message"], event["count"]) == ("Normal", "Can't replace with a cheaper node", 1)
    scene.run(controller, 2 * 60)  # a decision every 10 s, the Event again only after Karpenter's 15 minutes
    assert on(scene, events.UNCONSOLIDATABLE, node)[0]["count"] == 2


def test_a_node_a_do_not_evict_pod_runs_on_is_blocked(compiled: Path) -> None:
    scene = Scene(compiled, types=TYPES)
    node = scene.add_node("default", "m5.xlarge")
    controller = scene.controller()
    scene.add_pod("keep", node=node, annotations={"karpenter.sh/do-not-evict": "true"})
    scene.run(controller, 60)
    (event,) = on(scene, events.DEPROVISIONING_BLOCKED, node)
    assert event["type"] == "Normal"
    assert event["message"] == "Cannot deprovision Node: pod default/keep has the karpenter.sh/do-not-evict annotation"
    assert scene.node(node) is not None and not objects.is_deleting(scene.node(node) or {})


def test_termination_tells_each_eviction_and_a_drain_a_budget_holds(compiled: Path) -> None:
    scene = Scene(compiled, types=TYPES)
    node = scene.add_node("batch", "m6i.xlarge", capacity_type="spot")
    controller = scene.controller()
    pods = scene.add_pods("job", 2, cpu="1", node=node, **BATCH_POD)
    pdb = scene.add_pdb("job", {"app": "job"}, max_unavailable=0)
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 20)
    (failed,) = on(scene, events.FAILED_DRAINING, node)
    assert failed["type"] == "Warning"
    assert failed["message"] in {f"Failed to drain node, evicting pod default/{objects.name(p)} violates a PDB"
                                 for p in pods}
    assert not scene.events(events.EVICTED)
    scene.cluster.delete(objects.POD_DISRUPTION_BUDGET, objects.name(pdb), "default")
    scene.run(controller, 30, until=lambda: node not in scene.nodes())
    evicted = scene.events(events.EVICTED)
    assert sorted(e["involvedObject"]["name"] for e in evicted) == ["job-0", "job-1"]
    assert {(e["type"], e["message"]) for e in evicted} == {("Normal", "Evicted pod")}


def test_the_recorder_drops_repeats_within_their_dedupe_timeout() -> None:
    now = [0.0]
    cluster = MemoryCluster()
    node = cluster.create(objects.NODE, {"metadata": {"name": "n1"}})
    recorder = events.Recorder(cluster, lambda: now[0])
    for _ in range(3):
        recorder.publish(events.deprovisioning_blocked(node, "a reason"))
    assert [e["count"] for e in cluster.list(objects.EVENT).items] == [1]
    now[0] = 121.0  # Karpenter's default: 2 minutes
    recorder.publish(events.deprovisioning_blocked(node, "a reason"))
    assert [e["count"] for e in cluster.list(objects.EVENT).items] == [2]
