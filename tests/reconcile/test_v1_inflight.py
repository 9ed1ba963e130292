"""The pods of nodes being deleted in every scheduling simulation, as Karpenter v1.14.1: a disruption decision places
them again beside the candidates' pods (core pkg/controllers/disruption/helpers.go `SimulateScheduling`,
`deletingNodes.CurrentlyReschedulablePods`), so that while NodePools' commands run side by side a second command
is never planned onto the room the first one's pods are about to take; and provisioning places them beside the
pending pods (pkg/controllers/provisioning/provisioner.go `Schedule`: v1.14.1 for a NodePool's node, v0.31.1 — the
same, with `GetNodePods` — for a Provisioner's), launching a node for them when nothing else has room. Each ported
test names its Go test (kubernetes-sigs/karpenter v1.14.1 or v0.31.1) and line."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.testing import Scene, compile_policies

from .v1moto import NODE_CLASS, drifting_nodepool, legacy_provisioner

#: A replacement node initializes this long after its launch (the commands under way are seen meanwhile).
STARTUP = 30.0

#: A Provisioner beside them (v0.31.1's semantics for its nodes).
_PROVISIONER = legacy_provisioner(["m5.large", "m5.xlarge", "m5.2xlarge"])
#: NodePool → (consolidateAfter, budget nodes): `roll` drifts two nodes at a time, `steady` never moves.
POOLS = {"roll": ("Never", "2"), "steady": ("Never", "0")}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("v1inflight")
    policies = root / "policies"
    policies.mkdir()
    text = "".join(drifting_nodepool(name, after, nodes) for name, (after, nodes) in POOLS.items())
    (policies / "nodepools.yaml").write_text(text + _PROVISIONER + NODE_CLASS)
    return compile_policies(policies, root / "build")


def _decisions(controller: Controller, decision: str) -> float:
    return Scene.metric(
        controller, "karpenter_voluntary_disruption_decisions_total",
        decision=decision, reason="drifted", consolidation_type="",
    ) or 0.0


def _held(scene: Scene, names: list[str]) -> list[str]:
    """Those of `names` a command holds (tainted `karpenter.sh/disrupted`, or being deleted)."""
    found = []
    for name in names:
        node = scene.node(name)
        if node is None:
            continue
        taints = (node.get("spec") or {}).get("taints") or []
        if objects.is_deleting(node) or any(t.get("key") == wk.TAINT_DISRUPTED for t in taints):
            found.append(name)
    return found


def test_the_second_command_does_not_count_on_the_room_the_first_ones_pod_takes(compiled: Path) -> None:
    """Two commands side by side never plan the same room. Node B (another NodePool's m5.xlarge, 1.5 of its 3.92
    vCPU used) has room for one pod of 1.3 vCPU, not two; two drifted nodes of NodePool `roll` (budget 2) hold one
    such pod each. The first command deletes its node, its pod planned onto B; the next decision comes at once
    (v1.14.1's `RequeueImmediately`) while that pod still runs on the node being deleted, and places it again
    (`SimulateScheduling`'s `deletingNodes.CurrentlyReschedulablePods`, core pkg/controllers/disruption/helpers.go:99):
    the second node's pod has no room left on B, so its command launches a replacement. Before, B's room was offered
    twice: the second node was deleted onto it too, and one of the two pods found no room once both moved. (The
    first pod lingers terminating once evicted, holding its command under way while the test looks.)"""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    room = scene.add_node("NodePool/steady", "m5.xlarge", age=7200)
    scene.add_pod("b", cpu="1500m", node=room)
    first = scene.add_node("NodePool/roll", "m5.large", age=7200, drifted=True)
    scene.add_pod("first", cpu="1300m", node=first, lingers=True)
    second = scene.add_node("NodePool/roll", "m5.large", age=3600, drifted=True)
    scene.add_pod("second", cpu="1300m", node=second)
    controller = scene.controller()
    for _ in range(30):
        scene.step(controller)
        if _held(scene, [first, second]) == [first, second]:
            break
        scene.advance(1.0)
    assert _held(scene, [first, second]) == [first, second]  # both commands under way, side by side
    assert _decisions(controller, "delete") == 1  # the first: its pod fits on B
    assert _decisions(controller, "replace") == 1  # the second: B's room is the first's pod's
    launched = sorted(set(scene.nodes()) - {room, first, second})
    assert len(launched) == 1, launched


@pytest.mark.parametrize("pool", ["NodePool/steady", "legacy"])
def test_a_node_being_deleted_gets_room_for_its_pods(compiled: Path, pool: str) -> None:
    """Provisioning places the pods of a node being deleted beside the pending ones and launches a node for them when
    nothing else has room — scheduling/suite_test.go:4061 (v1.14.1) "should re-schedule pods from a deleting node
    when pods are active": the node deleted (`kubectl delete node`), a second node comes up for its pod, the pod
    still running where it was (it moves once evicted). Its eviction is refused here (a PodDisruptionBudget allowing
    none, not a fully blocking one: `minAvailable: 1`), so the pod stays on the node being deleted while the test
    looks, and no more nodes are launched for it pass after pass. A Provisioner's node as v0.31.1's provisioner
    (`nodes.Deleting().Pods`, pkg/controllers/provisioning/provisioner.go:317). Before, nothing was launched until
    the pod was evicted and pending again."""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    going = scene.add_node(pool, "m5.large", age=3600)
    scene.add_pod("web", cpu="1500m", node=going, labels={"app": "web"})
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    controller = scene.controller()
    scene.run(controller, 5)
    assert set(scene.nodes()) == {going}  # nothing to provision while it runs where it is
    scene.cluster.delete(objects.NODE, going)
    scene.run(controller, 120)
    node = scene.node(going)
    assert node is not None and objects.is_deleting(node)  # its drain waits on the budget
    assert scene.pods_on(going) == ["web"]
    launched = sorted(set(scene.nodes()) - {going})
    assert len(launched) == 1, launched  # once, not once a pass
    assert scene.pods_on(launched[0]) == []  # nothing bound to it: the pod runs until evicted
    assert objects.labels(scene.nodes()[launched[0]]).get(wk.INITIALIZED) == "true"


def test_budgets_that_cannot_be_read_place_every_pod_of_a_node_being_deleted(
    compiled: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The PodDisruptionBudgets are read (outside the state's lock) only when a NodePool's node being deleted runs
    pods; a list that fails reads as no budget — the pod is placed again and a node launched for it, with a warning —
    never an exception that ends the provisioning pass, never no room. The warning is logged once per outage, not
    once per pass (issue #26: every pass logged it while the list failed), and the list working again is logged
    once; a second outage is warned of again."""
    caplog.set_level(logging.INFO, "karpenter_policy.reconcile.controller.provisioner")
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    going = scene.add_node("NodePool/steady", "m5.large", age=3600)
    scene.add_pod("web", cpu="1500m", node=going, labels={"app": "web"})
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    controller = scene.controller()
    scene.run(controller, 5)
    listing = scene.cluster.list
    refused: list[bool] = []  # each list of the budgets: refused or not
    refuse = True

    def refusing(kind: Any, *args: Any, **kwargs: Any) -> Any:
        if kind == objects.POD_DISRUPTION_BUDGET:
            refused.append(refuse)
            if refuse:
                raise ClusterError("poddisruptionbudgets is forbidden")
        return listing(kind, *args, **kwargs)

    def said(text: str) -> int:
        return sum(text in record.getMessage() for record in caplog.records)

    def provisioning_pass(name: str) -> None:  # a pending pod: a batch, whose pass lists the budgets again
        lists = len(refused)
        scene.add_pod(name, cpu="100m")
        scene.run(controller, 60, until=lambda: len(refused) > lists and not scene.unbound())

    monkeypatch.setattr(scene.cluster, "list", refusing)
    scene.cluster.delete(objects.NODE, going)
    scene.run(controller, 120)
    launched = sorted(set(scene.nodes()) - {going})
    assert len(launched) == 1, launched
    for name in ("late-0", "late-1", "late-2"):
        provisioning_pass(name)
    assert refused == [True] * 4, "the list failed at each pass"
    assert said("PodDisruptionBudgets unavailable") == 1
    refuse = False
    provisioning_pass("late-3")
    provisioning_pass("late-4")
    assert refused[4:] == [False, False] and said("PodDisruptionBudgets listed again after 4 failed") == 1
    refuse = True
    provisioning_pass("late-5")
    assert refused[-1] and said("PodDisruptionBudgets unavailable") == 2


@pytest.mark.parametrize("pool", ["steady", "legacy"])
def test_the_launch_for_a_deleted_nodes_pods_is_a_new_instance_not_their_first_launch(
    compiled: Path, pool: str
) -> None:
    """A pod provisioned a node (a launch whose client token comes from its uid), then that node is deleted while a
    PodDisruptionBudget holds the pod: the launch that makes room for it again must not carry the same token, or EC2
    answers it with the first launch's instance — the node being deleted (the metrics story counted it launched
    twice)."""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    selector = {wk.NODEPOOL: pool} if pool != "legacy" else {wk.PROVISIONER_NAME: pool}
    scene.add_pod("web", cpu="1500m", labels={"app": "web"}, nodeSelector=selector)
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: not scene.unbound())
    (first,) = scene.nodes()
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    scene.cluster.delete(objects.NODE, first)
    scene.run(controller, 120)
    launched = sorted(set(scene.nodes()) - {first})
    assert len(launched) == 1, launched
    ids = {objects.name(n): (n.get("spec") or {}).get("providerID") for n in scene.nodes().values()}
    assert ids[launched[0]] != ids[first] and ids[first], ids


@pytest.mark.parametrize("pool", ["NodePool/steady", "legacy"])
def test_a_node_marked_for_deletion_gets_room_for_its_pods(compiled: Path, pool: str) -> None:
    """scheduling/suite_test.go:4061 (v1.14.1) "should re-schedule pods from a deleting node when pods are active",
    as written: the node only *marked* for deletion (`cluster.MarkForDeletion`, what a disruption command does at
    its start — queue.go `StartCommand`; v0.31.1's deprovisioning/controller.go:232 for a Provisioner's), no
    deletion timestamp yet; the next provisioning loop launches a second node of the same size for its pod, which
    still runs where it was. Before, provisioning counted a node's pods only from its deletion timestamp: nothing
    was launched."""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    going = scene.add_node(pool, "m5.large", age=3600)
    scene.add_pod("web", cpu="1500m", node=going)
    controller = scene.controller()
    scene.run(controller, 5)
    assert set(scene.nodes()) == {going}
    controller.context.state.mark_for_deletion([going])
    scene.run(controller, 120)
    launched = sorted(set(scene.nodes()) - {going})
    assert len(launched) == 1, launched  # once, not once a pass
    types = {objects.labels(node).get(wk.INSTANCE_TYPE) for node in scene.nodes().values()}
    assert types == {"m5.large"}  # both nodes of the same size, as the Go test expects
    assert scene.pods_on(going) == ["web"] and scene.pods_on(launched[0]) == []
    controller.context.state.mark_for_deletion([going], marked=False)  # `UnmarkForDeletion`: a command abandoned
    assert [n.name for n in controller.context.state.deleting_nodes()] == []


def test_a_node_marked_for_deletion_whose_pod_terminates_gets_no_room(compiled: Path) -> None:
    """scheduling/suite_test.go:4088 (v1.14.1) "should not re-schedule pods from a deleting node when pods are not
    active": the node marked for deletion, its pod evicted (terminating, not gone): no node is launched for it."""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    going = scene.add_node("NodePool/steady", "m5.large", age=3600)
    scene.add_pod("web", cpu="1500m", node=going, lingers=True)
    controller = scene.controller()
    scene.run(controller, 5)
    controller.context.state.mark_for_deletion([going])
    scene.cluster.delete(objects.POD, "web", "default")
    scene.run(controller, 120)
    assert set(scene.nodes()) == {going}
    assert scene.pods_on(going) == ["web"]


def test_a_commands_pods_get_room_from_its_start(compiled: Path) -> None:
    """A drift command's node is marked for deletion once its replacement is launched (v1.14.1 queue.go
    `StartCommand`: `MarkForDeletion` after `CreateNodeClaims`), so provisioning places its pod again from then on
    (provisioner.go `Schedule`: `nodes.Deleting()`, marked or with a deletion timestamp, and not their room): a pod
    that becomes pending while the replacement starts competes with the command's pod for the replacement's room,
    and the one left out gets a node at once — while the command's node still runs, before any deletion timestamp.
    Before, the command's node counted only from its deletion timestamp: the pending pod took the replacement's
    room and nothing was launched for the command's pod until it was evicted."""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    old = scene.add_node("NodePool/roll", "m5.large", age=3600, drifted=True)
    scene.add_pod("moving", cpu="1300m", node=old)
    controller = scene.controller()
    for _ in range(30):
        scene.step(controller)
        if _held(scene, [old]) == [old] and len(scene.nodes()) == 2:
            break
        scene.advance(1.0)
    assert controller.context.state.marked_for_deletion(old)
    scene.add_pod("arriving", cpu="1300m")
    scene.run(controller, 10)  # the replacement still starting (STARTUP), the command's node not deleted
    node = scene.node(old)
    assert node is not None and not objects.is_deleting(node)
    assert len(scene.nodes()) == 3, sorted(scene.nodes())  # a node for the pod left out, launched at once
    scene.run(controller, 300, until=lambda: scene.node(old) is None and not scene.unbound())
    assert scene.node(old) is None and not scene.unbound()
    assert len(scene.nodes()) == 2, sorted(scene.nodes())


SPREAD = [{"maxSkew": 1, "topologyKey": wk.ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "spread"}}}]


def test_a_held_pod_of_a_node_marked_for_deletion_still_counts_in_its_zone(compiled: Path) -> None:
    """v1.14.1's topology leaves out of its counts exactly the pods it schedules, by uid (core
    pkg/controllers/provisioning/scheduling/topology.go `excludedPods`, filled from the pods `Schedule` places:
    the pending ones and a deleting node's `CurrentlyReschedulablePods`). A node marked for deletion runs two pods
    of one zonal spread (maxSkew 1): `web`, placed again, and `held` (`karpenter.sh/do-not-disrupt`, not placed
    again: it stays until the drain). `held` still counts in its zone, so the node launched for `web` is in
    another zone. Before, provisioning left every pod of the node out of the counts and launched in the node's own
    zone."""
    scene = Scene(compiled, types=["m5.large", "m5.xlarge", "m5.2xlarge"], node_startup=STARTUP)
    going = scene.add_node("NodePool/steady", "m5.large", age=3600)
    zone = objects.labels(scene.nodes()[going])[wk.ZONE]
    for name, marks in (("web", {}), ("held", {"karpenter.sh/do-not-disrupt": "true"})):
        scene.add_pod(name, cpu="700m", node=going, labels={"app": "spread"}, annotations=marks,
                      topologySpreadConstraints=SPREAD)
    controller = scene.controller()
    scene.run(controller, 5)
    controller.context.state.mark_for_deletion([going])
    scene.run(controller, 120)
    launched = sorted(set(scene.nodes()) - {going})
    assert len(launched) == 1, launched
    assert objects.labels(scene.nodes()[launched[0]])[wk.ZONE] != zone
