"""NodePools' disruption commands side by side within their budgets, as Karpenter v1.14.1's orchestration queue
(core pkg/controllers/disruption/controller.go `Reconcile` → `StartCommand` → `RequeueImmediately`, queue.go):
after a command starts the next decision comes at once, its candidates and replacements left out, its nodes using
up their NodePool's allowance. Each ported test names its Go test (kubernetes-sigs/karpenter v1.14.1,
pkg/controllers/disruption) and line; a "Drifted" NodeClaim there is a node stamped with a stale static hash here,
"executing a command" is its replacements initializing, then its candidates deleted and drained.

The NodePools (`v1moto.drifting_nodepool`) differ only in their budget and never consolidate unless told:
drift is what rolls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from karpenter_policy.api.v1.statichash import NODEPOOL_HASH
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import Scene, compile_policies

from .v1moto import NODE_CLASS, drifting_nodepool, legacy_provisioner

M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
#: One pod of this size fills an m5.large (about 1.9 vCPU allocatable): a drifted node's pods need a replacement.
FULL = "1500m"
#: A replacement node initializes this long after its launch (the commands under way can be seen meanwhile).
STARTUP = 30.0

#: A Provisioner beside them: its commands keep v0.31.1's one at a time.
_PROVISIONER = legacy_provisioner()
#: NodePool name → its budget's nodes ("" none: Karpenter's default of 10 %), and its consolidateAfter.
POOLS = {
    "twenty": ("20%", "Never"), "thirty": ("30%", "Never"), "one": ("1", "Never"), "default": ("", "Never"),
    "consolidating": ("30%", "0s"),
    **{f"np{i}": ("1", "Never") for i in range(10)},
}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("v1queue")
    policies = root / "policies"
    policies.mkdir()
    text = "".join(drifting_nodepool(name, after, nodes) for name, (nodes, after) in POOLS.items())
    (policies / "nodepools.yaml").write_text(text + _PROVISIONER + NODE_CLASS)
    return compile_policies(policies, root / "build")


def _tainted(scene: Scene, names: list[str]) -> list[str]:
    """Those of `names` a command holds: tainted `karpenter.sh/disrupted` (a Provisioner's: cordoned), or being
    deleted."""
    found = []
    for name in names:
        node = scene.node(name)
        if node is None:
            continue
        spec = node.get("spec") or {}
        taints = spec.get("taints") or []
        held = spec.get("unschedulable") or any(t.get("key") == wk.TAINT_DISRUPTED for t in taints)
        if objects.is_deleting(node) or held:
            found.append(name)
    return found


def _steps(scene: Scene, controller: Controller, count: int, every: float = 1.0) -> Iterator[None]:
    for _ in range(count):
        scene.step(controller)
        yield
        scene.advance(every)


def _decisions(controller: Controller, reason: str = "drifted") -> float:
    return Scene.metric(
        controller, "karpenter_voluntary_disruption_decisions_total",
        decision="replace", reason=reason, consolidation_type="",
    ) or 0.0


def _rollout(compiled: Path, pool: str, count: int, **options: object) -> tuple[Scene, Controller, list[str]]:
    """A deployment of `count` pods that each fill an m5.large, provisioned on the NodePool (or the Provisioner
    `legacy`); then the NodePool changes (its static hash; a Provisioner's node hash): every node drifted, as a pull
    request rolls it. The scene, its controller (of these `options`) and the nodes."""
    scene = Scene(compiled, types=["m5.large"], node_startup=STARTUP)
    selector = {wk.PROVISIONER_NAME: pool} if pool == "legacy" else {wk.NODEPOOL: pool}
    scene.add_deployment("web", count, cpu=FULL, nodeSelector=selector)
    controller = scene.controller(**options)
    scene.run(controller, 300, until=lambda: not scene.unbound() and all(
        objects.labels(n).get(wk.INITIALIZED) == "true" for n in scene.nodes().values()))
    names = sorted(scene.nodes())
    assert len(names) == count and not scene.unbound()
    for name in names:
        stamp = node_info.ANNOTATION_NODE_HASH if pool == "legacy" else NODEPOOL_HASH
        scene.cluster.patch(objects.NODE, name, {"metadata": {"annotations": {stamp: "drifted"}}})
    return scene, controller, names


def _roll(scene: Scene, controller: Controller, drifted: list[str], percent: int) -> int:
    """Step until no drifted node is left, checking at every step that no more of them are disrupted than the
    budget allows (`percent` of the NodePool's initialized nodes, rounded up, as `BuildDisruptionBudgetMapping`
    counts them); the most disrupted at once."""
    most = 0
    for _ in _steps(scene, controller, 900):
        nodes = scene.nodes()
        initialized = [n for n in nodes.values() if objects.labels(n).get(wk.INITIALIZED) == "true"]
        allowed = -(-len(initialized) * percent // 100)
        held = len(_tainted(scene, drifted))
        assert held <= allowed, (held, allowed)
        most = max(most, held)
        if not set(drifted) & set(nodes):
            break
    assert not set(drifted) & set(scene.nodes())
    return most


def test_twenty_percent_of_ten_drifted_nodes_rolls_two_at_a_time(compiled: Path) -> None:
    """A NodePool with `nodes: "20%"` and 10 drifted nodes whose pods need replacements: two commands start at once
    (two replacements launching, two nodes tainted); the others wait until a replacement is initialized and its
    node is deleted, and the whole NodePool rolls — never more of its nodes disrupted than the budget allows, every
    pod running on a new node at the end."""
    scene, controller, drifted = _rollout(compiled, "twenty", 10)
    for _ in _steps(scene, controller, 5):
        pass
    assert len(_tainted(scene, drifted)) == 2
    launched = sorted(set(scene.nodes()) - set(drifted))
    assert len(launched) == 2, launched
    assert all(objects.labels(scene.nodes()[n]).get(wk.INITIALIZED) != "true" for n in launched)  # launching
    # v1.14.1's gauges, as the last decision read them: 2 allowed (20 % of 10), both used by the commands under way
    labels = {"nodepool": "twenty", "reason": "Drifted"}
    assert Scene.metric(controller, "karpenter_nodepools_allowed_disruptions", **labels) == 2
    assert Scene.metric(controller, "karpenter_nodepools_nodes_consuming_budgets", **labels) == 2
    assert _roll(scene, controller, drifted, 20) >= 2
    scene.run(controller, 60, until=lambda: not scene.unbound())
    assert not scene.unbound()
    assert len(scene.nodes()) == 10


def test_a_budget_of_one_still_rolls_one_node_at_a_time(compiled: Path) -> None:
    """`nodes: "1"`: one drifted node a command, the next once the last one is gone — every drifted node rolled."""
    scene, controller, drifted = _rollout(compiled, "one", 4)
    for _ in _steps(scene, controller, 900):
        assert len(_tainted(scene, drifted)) <= 1
        if not set(drifted) & set(scene.nodes()):
            break
    assert not set(drifted) & set(scene.nodes())


def test_consolidation_runs_beside_drift_commands_under_way(compiled: Path) -> None:
    """Two drift commands under way, their replacements still starting: an empty node of another NodePool is
    consolidated meanwhile (its 15 s validation held and passed while they run) — before, it waited for them."""
    scene, controller, drifted = _rollout(compiled, "twenty", 10)
    empty = scene.add_node("NodePool/consolidating", "m5.large", age=3600)
    launched: set[str] = set()
    for _ in _steps(scene, controller, 60):
        launched |= set(scene.nodes()) - set(drifted) - {empty}
        node = scene.node(empty)
        if node is None or objects.is_deleting(node):
            break
    node = scene.node(empty)
    assert node is None or objects.is_deleting(node)
    starting = [n for n in launched if (replacement := scene.node(n)) is not None
                and objects.labels(replacement).get(wk.INITIALIZED) != "true"]
    assert len(launched) == 2 and len(starting) == 2, (launched, starting)  # both drift commands still under way


def test_a_provisioners_drifted_nodes_still_roll_one_at_a_time(compiled: Path) -> None:
    """A Provisioner's commands keep v0.31.1's one at a time: never two of its drifted nodes held at once, whatever
    NodePools do beside it."""
    scene, controller, drifted = _rollout(compiled, "legacy", 4)
    for _ in _steps(scene, controller, 900):
        assert len(_tainted(scene, drifted)) <= 1
        if not set(drifted) & set(scene.nodes()):
            break
    assert not set(drifted) & set(scene.nodes())


def test_a_failing_replacement_abandons_only_its_own_command(compiled: Path) -> None:
    """Two commands under way: the second's launch fails — its node is untainted and nothing of it deleted, while
    the first's replacement initializes and its node goes."""
    scene, controller, drifted = _rollout(compiled, "twenty", 10)
    first: list[str] = []
    for _ in _steps(scene, controller, 30):
        first = _tainted(scene, drifted)
        if first:
            break
    assert len(first) == 1
    scene.fail_next_launch()
    result = scene.step(controller)
    assert result.disrupted is not None and result.disrupted.abandoned is not None
    assert "could not launch" in result.disrupted.abandoned
    assert _tainted(scene, drifted) == first  # the second command's node is untainted, the first's still held
    for _ in _steps(scene, controller, 120):
        if scene.node(first[0]) is None:
            break
    assert scene.node(first[0]) is None  # the first command carried on


def test_replacements_that_never_initialize_abandon_each_command_and_are_counted(compiled: Path) -> None:
    """Two commands under way whose replacements never join: each is abandoned at its own timeout (its node
    untainted), each replacement not initialized counted in `karpenter_voluntary_disruption_queue_failures_total`
    as v1.14.1's queue.go counts its failed launches (decision, reason, and the decision again as its
    consolidation_type)."""
    scene, controller, drifted = _rollout(compiled, "twenty", 10, replacement_timeout=60)
    scene.kubelet.never_join = frozenset({"m5.large"})
    for _ in _steps(scene, controller, 5):
        pass
    first = _tainted(scene, drifted)
    assert len(first) == 2
    for _ in _steps(scene, controller, 70):
        if not set(first) & set(_tainted(scene, drifted)):
            break
    assert not set(first) & set(_tainted(scene, drifted))  # both abandoned, nothing of them deleted
    assert set(first) <= set(scene.nodes())
    failures = Scene.metric(controller, "karpenter_voluntary_disruption_queue_failures_total",
                            decision="replace", reason="drifted", consolidation_type="replace")
    assert failures == 2


def test_should_disrupt_3_nodes_taking_into_account_commands_in_progress(compiled: Path) -> None:
    """Drift > Budgets > should disrupt 3 nodes, taking into account commands in progress — drift_test.go:159: 10
    nodes, the first 5 drifted with a pod each (room for it elsewhere: a command each, no replacement), a 30 %
    budget; 5 passes start 3 commands, and once they are carried out 7 nodes are left. (Its pods linger while
    they stop, as the Go test's queue holds its commands until told: the 3 nodes stay disrupting meanwhile.)"""
    scene = Scene(compiled, types=M5)
    names = [scene.add_node("NodePool/thirty", "m5.large", age=3600, drifted=i < 5) for i in range(10)]
    for name in names[:5]:
        scene.add_pod(f"on-{name}", cpu="100m", node=name, lingers=True)
    controller = scene.controller()
    for _ in _steps(scene, controller, 6):
        pass
    held = _tainted(scene, names)
    assert len(held) == 3 and set(held) <= set(names[:5])
    assert _decisions(controller, "drifted") == 0  # deletions, not replacements
    for name in held:
        scene.finish_pod(f"on-{name}")
    for _ in _steps(scene, controller, 30):
        if not set(held) & set(scene.nodes()):
            break
    assert not set(held) & set(scene.nodes())
    assert len(scene.nodes()) == 7


def test_should_respect_budgets_for_multiple_nodepools(compiled: Path) -> None:
    """Drift > Budgets > should respect budgets for multiple nodepools — drift_test.go:232: 10 NodePools of budget 1,
    3 drifted nodes each, 2 of them with a pod; 30 passes start 10 commands, one a NodePool, and 20 nodes are
    left. (The nodes deleted are held by a finalizer, as the Go test's queue holds its commands.)"""
    scene = Scene(compiled, types=M5)
    pools = [f"np{i}" for i in range(10)]
    for pool in pools:
        for i in range(3):
            name = scene.add_node(f"NodePool/{pool}", "m5.large", age=3600, drifted=True,
                                  finalizers=["example.com/hold"])
            if i < 2:
                scene.add_pod(f"on-{name}", cpu="100m", node=name)
    controller = scene.controller()
    for _ in _steps(scene, controller, 30, every=0.1):
        pass
    deleting = [node for node in scene.nodes().values() if objects.is_deleting(node)]
    assert sorted(objects.labels(n)[wk.NODEPOOL] for n in deleting) == pools  # one a NodePool
    assert len(scene.nodes()) - len(deleting) == 20
    total = Scene.metric(controller, "karpenter_voluntary_disruption_decisions_total",
                         decision="delete", reason="drifted", consolidation_type="")
    assert total == 10  # ten commands of one node each, not one of ten
    for pool in pools:
        counted = Scene.metric(
            controller, "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            nodepool=pool, decision="delete", reason="drifted", consolidation_type="",
        )
        assert counted == 1, (pool, counted)


def test_should_drift_one_non_empty_node_at_a_time_starting_with_the_earliest_drift(compiled: Path) -> None:
    """Drift > should drift one non-empty node at a time, starting with the earliest drift — drift_test.go:1052: two
    drifted nodes of the default budget (10 % of 2, rounded up: 1), each with a pod that fits only there. One
    command, of one node: the one drifted first (the older here: both are first seen drifted together, and the
    earliest created goes first); once its replacement is up it is gone and the other still there. "One at a
    time" is the budget's: a command has one candidate, and a larger budget runs several side by side."""
    scene = Scene(compiled, types=M5, node_startup=STARTUP)
    older = scene.add_node("NodePool/default", "m5.large", age=7200, drifted=True)
    newer = scene.add_node("NodePool/default", "m5.large", age=3600, drifted=True)
    for name in (older, newer):
        scene.add_pod(f"on-{name}", cpu=FULL, node=name)
    controller = scene.controller()
    for _ in _steps(scene, controller, 5):
        pass
    assert _tainted(scene, [older, newer]) == [older]
    for _ in _steps(scene, controller, 120):
        if scene.node(older) is None:
            break
    assert scene.node(older) is None
    assert scene.node(newer) is not None


def test_should_only_allow_3_nodes_to_be_deleted_in_single_node_consolidation_delete(compiled: Path) -> None:
    """Consolidation > Budgets > should only allow 3 nodes to be deleted in single node consolidation delete —
    consolidation_test.go:476: 10 nodes of a 30 % budget, a pod on each, two such pods to a node; the commands
    started delete 3 nodes (their pods linger while they stop, holding the nodes disrupting) and no more."""
    scene = Scene(compiled, types=M5)
    names = [scene.add_node("NodePool/consolidating", "m5.large", age=3600) for _ in range(10)]
    for name in names:
        scene.add_pod(f"on-{name}", cpu="900m", node=name, lingers=True)
    controller = scene.controller()
    for _ in _steps(scene, controller, 120):
        pass
    assert len(_tainted(scene, names)) == 3


def test_a_provisioners_next_command_comes_at_once_after_one_succeeded(compiled: Path) -> None:
    """v0.31.1 deprovisioning/controller.go:134: after a command succeeded (its replacements initialized, its node
    deleted and gone: `executeCommand` waits for both) the loop requeues at once; only a pass that found nothing waits
    its `pollingPeriod`. With a poll of 300 s, the second drifted node is taken right after the first is gone, not
    300 s after the first decision."""
    scene, controller, drifted = _rollout(compiled, "legacy", 2, disruption_interval=300.0)
    first_gone: float | None = None
    second_taken: float | None = None
    for _ in _steps(scene, controller, 600):
        gone = [name for name in drifted if scene.node(name) is None]
        if first_gone is None and gone:
            first_gone = scene.clock.now
        held = set(_tainted(scene, drifted)) - set(gone)
        if first_gone is not None and held:
            second_taken = scene.clock.now
            break
    assert first_gone is not None and second_taken is not None
    assert second_taken - first_gone <= 5.0, (first_gone, second_taken)
