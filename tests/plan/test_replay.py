"""The plan against the controller: a Karpenter v0.31 drift rollout planned from a snapshot of a `Scene`
(karpenter_policy.testing), then carried out by this project's real controller on that same Scene in virtual time,
ends in the fleet the plan announced — the nodes per provisioner and the pods placed. Small fleets from
Hypothesis: drifted nodes (stamped with another node hash than HEAD's provisioner), each empty or running a replica
of a deployment that replaces its evicted pods.

Evicted pods go where the controller puts them: onto existing nodes with room first (Karpenter's
`simulateScheduling`; the plan's `commands/plan/room.py`), a new node only for the rest — the fleets mix pods that
fit beside others with pods of 3 CPU that fill a node."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import Scene, compile_policies
from tests.plan.snapshots import policies, provisioner, write
from tests.profiles import deterministic

PROVISIONER = "karpenter.sh/provisioner-name"
ZONE = "[us-east-1a]"
#: node type, and for each node the CPU requests of the pods it runs (each pod its own deployment's replica)
Fleet = list[list[str]]


def _sides(root: Path) -> tuple[str, str, Path]:
    base = policies(root / "base", provisioner(zones=ZONE))
    head = policies(root / "head", provisioner(labels="team: platform", zones=ZONE))
    return base, head, compile_policies(head, root / "compiled")


def _scene(compiled: Path, fleet: Fleet) -> Scene:
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"])
    apps: Counter[str] = Counter()
    for requests in fleet:
        name = scene.add_node("default", "m5.xlarge", drifted=True, age=3600)
        for cpu in requests:
            app = f"app{cpu.replace('m', '')}"
            labels = {"app": app, "scene/deployment": app}
            scene.add_pod(f"{app}-{1000 + apps[app]}", cpu=cpu, node=name, labels=labels,
                          owner=("ReplicaSet", f"{app}-5d8f7c9b4"))
            apps[app] += 1
    for app, replicas in sorted(apps.items()):
        scene.add_deployment(app, replicas, cpu=f"{app.removeprefix('app')}m")  # adopts the bound pods
    return scene


def _planned(base: str, head: str, scene: Scene, tmp_path: Path) -> tuple[Counter[str], int, dict[str, Any]]:
    items = [*scene.cluster.list(objects.NODE).items, *scene.cluster.list(objects.POD).items]
    file = write(tmp_path / "snapshot.json", *({"apiVersion": "v1", **i, "kind": k}
                                               for k, group in (("Node", items[:len(scene.nodes())]),
                                                                ("Pod", items[len(scene.nodes()):]))
                                               for i in group))
    start = scene.clock.wall().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = plan_command(PlanOptions(snapshot=(file,), start=start, output="json", base=base, head=head,
                                      horizon="0s"), load_catalog())
    assert result.stderr == "", result.stderr
    doc = json.loads(result.stdout)
    nodes: Counter[str] = Counter(n["provisioner"] for n in doc["nodes"])
    for wave in doc["waves"]:
        for name in wave["nodes"]:
            nodes[next(n["provisioner"] for n in doc["nodes"] if n["name"] == name)] -= 1
        nodes.update(r["provisioner"] for r in wave["replacements"])
    placed = len(scene.cluster.list(objects.POD).items) - len(doc["pending"])
    return +nodes, placed, doc


def _replayed(scene: Scene) -> tuple[Counter[str], int]:
    def done() -> bool:
        nodes = scene.nodes().values()
        return not scene.unbound() and all(
            n["metadata"]["annotations"].get(node_info.ANNOTATION_NODE_HASH) != "drifted"
            and n["metadata"]["labels"].get("karpenter.sh/initialized") == "true" for n in nodes)

    scene.run(scene.controller(), 3600, until=done)
    assert done(), "the controller finished the rollout within an hour"
    nodes = Counter(objects.labels(n).get(PROVISIONER, "") for n in scene.nodes().values()
                    if not objects.is_deleting(n))
    bound = sum(1 for p in scene.pods() if p["spec"].get("nodeName") in scene.nodes())
    return nodes, bound


def check(fleet: Fleet, root: Path) -> None:
    base, head, compiled = _sides(root)
    scene = _scene(compiled, fleet)
    nodes, placed, doc = _planned(base, head, scene, root)
    assert doc["finishes"] and doc["pending"] == []
    assert len(doc["waves"]) >= 1 and all(w["method"] == "drift" for w in doc["waves"])
    assert _replayed(scene) == (nodes, placed)


def test_a_planned_drift_rollout_replayed_by_the_controller_ends_in_the_planned_fleet(tmp_path: Path) -> None:
    check([["3000m"], [], ["3000m"]], tmp_path)


def test_pods_the_controller_packs_beside_an_earlier_replacement(tmp_path: Path) -> None:
    """The first busy node's pods fit beside the last one's pod, on that drifted node with room: the first goes
    without a replacement, the last is replaced by one node for all three pods. One node at the end, not two."""
    check([["500m", "1000m"], [], ["250m"]], tmp_path)


def test_evicted_pods_fill_an_earlier_replacement_before_a_new_node(tmp_path: Path) -> None:
    check([["3000m"], ["250m"], ["500m"]], tmp_path)


@pytest.mark.slow
@deterministic(15)
@given(st.lists(st.sampled_from([[], ["3000m"], ["250m"], ["500m", "1000m"], ["1500m"]]), min_size=1, max_size=4))
def test_any_small_drift_rollout_replayed_ends_in_the_planned_fleet(fleet: Fleet) -> None:
    with tempfile.TemporaryDirectory() as root:
        check(fleet, Path(root))
