"""A pod's `karpenter.sh/do-not-disrupt` on a Karpenter v1 NodePool's node, read by disruption as v1.14.1 reads it
(core pkg/controllers/state/statenode.go `ValidatePodsDisruptable`, pkg/utils/pod/scheduling.go `IsDisruptable`):
every active pod counts — a DaemonSet's and a static pod's mirror too —, and `karpenter.sh/do-not-evict`, v0.31's
annotation, is read nowhere in v1 (a Provisioner's node keeps v0.31's reading). Its value is "true" or a positive Go
duration, counted from the pod's startTime (`IsDoNotDisruptActive`); anything else is ignored with a Warning.
Termination does the same: such a pod is waited for, not evicted (tests/reconcile/test_v1_termination_grace.py). The
nodes are a WhenEmptyOrUnderutilized NodePool's (`under`, consolidateAfter 0s,
tests/reconcile/data/v1consolidation); each test names the Go test it follows (kubernetes-sigs/karpenter v1.14.1)
and its line."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1consolidation"
HOUR = 3600.0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1donotdisrupt") / "build")


def _node(scene: Scene) -> str:
    return scene.add_node("NodePool/under", "m5.large", age=HOUR)


def test_should_not_consider_candidates_that_have_do_not_disrupt_mirror_pods_scheduled(compiled: Path) -> None:
    """should not consider candidates that have do-not-disrupt mirror pods scheduled — disruption/suite_test.go:957:
    a node whose only pod is a static pod's mirror is empty, yet the mirror's annotation keeps it."""
    scene = Scene(compiled, types=["m5.large"])
    kept, empty = _node(scene), _node(scene)
    scene.add_static_pod("etcd", kept, annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_static_pod("proxy", empty)
    scene.run(scene.controller(), 60, until=lambda: empty not in scene.nodes())
    scene.run(scene.controller(), 30)
    assert empty not in scene.nodes() and kept in scene.nodes()


def test_should_not_consider_candidates_that_have_do_not_disrupt_daemonset_pods_scheduled(compiled: Path) -> None:
    """should not consider candidates that have do-not-disrupt daemonset pods scheduled — disruption/suite_test.go:995:
    a node whose only pod is a DaemonSet's is empty, yet that pod's annotation keeps it."""
    scene = Scene(compiled, types=["m5.large"])
    kept, empty = _node(scene), _node(scene)
    scene.add_daemon_set("logs", cpu="10m")
    scene.add_pod("logs-kept", node=kept, owner=("DaemonSet", "logs"), annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("logs-empty", node=empty, owner=("DaemonSet", "logs"))
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: empty not in scene.nodes())
    scene.run(controller, 30)
    assert empty not in scene.nodes() and kept in scene.nodes()


def test_do_not_evict_is_v0_31s_and_does_not_keep_a_nodepools_node(compiled: Path) -> None:
    """v1.14.1 reads no `karpenter.sh/do-not-evict` (v1 replaced it by `do-not-disrupt`): two half-empty nodes, one
    pod kept by do-not-disrupt, the other annotated do-not-evict — the second node is consolidated onto the first,
    where v0.31's reading would have kept both."""
    scene = Scene(compiled, types=["m5.large"])
    first, second = _node(scene), _node(scene)
    scene.add_pod("kept", cpu="100m", node=first, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("old-style", cpu="100m", node=second, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_EVICT: "true"})
    evictions = scene.record_evictions()
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: second not in scene.nodes())
    assert second not in scene.nodes() and first in scene.nodes()
    assert [(call.name, call.allowed) for call in evictions] == [("old-style", True)]


def test_a_duration_keeps_the_node_until_it_runs_out_and_the_controller_wakes_up_then(compiled: Path) -> None:
    """v1.14.1's `IsDoNotDisruptActive` (pkg/utils/pod/scheduling.go:210; its Go tests are
    tests/api/v1/test_donotdisrupt.py): `do-not-disrupt: "10m"` on a pod started 500 s ago keeps its node for 100
    s more, and the node is consolidated right after — the decision that found it held wakes up when the
    duration runs out, well before its 300 s recheck, with nothing changing in the cluster meanwhile. (The other
    node's pod is held for good, so the held node is the only one that may go, onto it.)"""
    scene = Scene(compiled, types=["m5.large"])
    kept, held = _node(scene), _node(scene)
    scene.add_pod("kept", cpu="100m", node=kept, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("guarded", cpu="100m", node=held, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "10m"}, started=500)
    controller = scene.controller()
    start = scene.clock.now
    scene.run(controller, 95)
    assert held in scene.nodes()  # held for the 100 s left
    scene.run(controller, 600, until=lambda: held not in scene.nodes())
    assert held not in scene.nodes() and kept in scene.nodes()
    assert 100 <= scene.clock.now - start < 130  # out at 100 s, not at the next 300 s recheck


def test_an_invalid_value_is_ignored_with_karpenters_warning(compiled: Path) -> None:
    """v1.14.1 ignores a `do-not-disrupt` that is neither "true" nor a positive duration and says so on the pod
    (pkg/utils/pod/events.go `InvalidDoNotDisruptAnnotationEvent`): the node is consolidated, and the pod has the
    Warning with Go's error."""
    scene = Scene(compiled, types=["m5.large"])
    first, second = _node(scene), _node(scene)
    scene.add_pod("kept", cpu="100m", node=first, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("typo", cpu="100m", node=second, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "5 minutes"}, started=60)
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: second not in scene.nodes())
    assert second not in scene.nodes() and first in scene.nodes()
    warnings = [(e["type"], e["involvedObject"]["name"], e["message"])
                for e in scene.events("InvalidDoNotDisruptAnnotation")]
    assert warnings == [("Warning", "typo", 'Invalid karpenter.sh/do-not-disrupt annotation: failed to parse '
                         '"5 minutes" as a duration: time: unknown unit " minutes" in duration "5 minutes", '
                         "ignoring annotation")]


def _events(scene: Scene, reason: str) -> list[tuple[str, str, str, int]]:
    return [(e["type"], e["involvedObject"]["name"], e["message"], e.get("count", 1)) for e in scene.events(reason)]


def _start(scene: Scene, pod: str) -> dt.datetime:
    (found,) = [p for p in scene.pods() if objects.name(p) == pod]
    return objects.parse_time(found["status"]["startTime"])


def test_a_duration_is_announced_while_it_holds_and_once_it_has_elapsed(compiled: Path) -> None:
    """v1.14.1's `IsDoNotDisruptActive`, given the disruption controller's recorder (statenode.go:252
    `ValidatePodsDisruptable` → `IsDisruptable`), publishes on a pod held by a duration the Normal `DoNotDisruptUntil`
    (pkg/utils/pod/events.go `DoNotDisruptUntilEvent`: the end in RFC 3339, deduped per pod and end — one Event
    over the many decisions that find it held) and, once the duration has run out, `DoNotDisruptGracePeriodElapsed`
    (`DoNotDisruptGracePeriodElapsedEvent`); "true" publishes neither. The pod is the one of
    `test_a_duration_keeps_the_node_until_it_runs_out…`: "10m", started 500 s ago."""
    scene = Scene(compiled, types=["m5.large"])
    kept, held = _node(scene), _node(scene)
    scene.add_pod("kept", cpu="100m", node=kept, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("guarded", cpu="100m", node=held, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "10m"}, started=500)
    ends = _start(scene, "guarded") + dt.timedelta(minutes=10)
    controller = scene.controller()
    scene.run(controller, 95)
    assert _events(scene, "DoNotDisruptUntil") == [("Normal", "guarded", "The karpenter.sh/do-not-disrupt grace "
                                                    f"period will elapse at {ends.strftime('%Y-%m-%dT%H:%M:%SZ')}", 1)]
    assert _events(scene, "DoNotDisruptGracePeriodElapsed") == []
    scene.run(controller, 600, until=lambda: held not in scene.nodes())
    assert held not in scene.nodes()
    assert _events(scene, "DoNotDisruptGracePeriodElapsed") == [
        ("Normal", "guarded", "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable", 1)]
    assert len(_events(scene, "DoNotDisruptUntil")) == 1
    assert not any(name == "kept" for _, name, _, _ in _events(scene, "DoNotDisruptUntil"))


def test_termination_announces_a_duration_and_evicts_the_pod_once_it_has_elapsed(tmp_path: Path) -> None:
    """The drain reads do-not-disrupt with its recorder too (terminator.go:112 `IsEvictable`): on a NodePool node
    being deleted, a pod held by "2m" (started 60 s ago) gets `DoNotDisruptUntil` and is not evicted; once the
    duration has run out it gets `DoNotDisruptGracePeriodElapsed` and is evicted; a pod whose value is invalid gets
    the `InvalidDoNotDisruptAnnotation` Warning from termination too, and is evicted at once."""
    from .test_v1_termination_steps import POLICIES as TERMINATION

    scene = Scene(compile_policies(TERMINATION, tmp_path / "build"), types=["m5.large"])
    scene.add_pod("seed", cpu="100m", nodeSelector={wk.NODEPOOL: "patient"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (node,) = scene.nodes()
    scene.cluster.delete(objects.POD, "seed", "default")
    scene.add_pod("guarded", node=node, nodeSelector={wk.NODEPOOL: "patient"},
                  annotations={wk.DO_NOT_DISRUPT: "2m"}, started=60)
    scene.add_pod("typo", node=node, nodeSelector={wk.NODEPOOL: "patient"}, annotations={wk.DO_NOT_DISRUPT: "0s"})
    ends = _start(scene, "guarded") + dt.timedelta(minutes=2)
    evictions = scene.record_evictions()
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 30)
    assert [call.name for call in evictions] == ["typo"]
    assert _events(scene, "InvalidDoNotDisruptAnnotation") == [
        ("Warning", "typo", 'Invalid karpenter.sh/do-not-disrupt annotation: duration "0s" must be positive, '
         "ignoring annotation", 1)]
    assert _events(scene, "DoNotDisruptUntil") == [("Normal", "guarded", "The karpenter.sh/do-not-disrupt grace "
                                                    f"period will elapse at {ends.strftime('%Y-%m-%dT%H:%M:%SZ')}", 1)]
    scene.run(controller, 120, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert [call.name for call in evictions] == ["typo", "guarded"]
    assert [(t, name) for t, name, _, _ in _events(scene, "DoNotDisruptGracePeriodElapsed")] == [("Normal", "guarded")]
