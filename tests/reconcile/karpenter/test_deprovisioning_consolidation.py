"""Ports of `Describe("Machine/Consolidation")`, pkg/controllers/deprovisioning/machine_consolidation_test.go of
kubernetes-sigs/karpenter at v0.31.1 (see support.py for how its fakes map onto scenes).

Each test names the Go test (Context > It) and the line of its `It`. Where Karpenter's test blocks a goroutine in
the 15 s validation wait (`fakeClock.HasWaiters`), the port runs the scene to the moment the command is held
("validating consolidation in 15s") and changes the cluster before the wait is over.
"""

from __future__ import annotations

import dataclasses
import io
import random

from karpenter_policy.kube import objects
from karpenter_policy.model.instancetypes import Offering
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.testing import Scene, instance_type

from .support import (
    LEAST_EXPENSIVE,
    M5,
    MOST_EXPENSIVE,
    ONLY_LARGE,
    Policies,
    blocked,
    decided,
    deleting,
    gone,
    held,
    provisioner,
    replacements,
    run,
)
from .support import (
    instance_type as type_of,
)

APP = {"app": "test"}


def consolidating(policies: Policies) -> Scene:
    """A scene with one consolidating on-demand provisioner, `default`, on the m5 family."""
    return Scene(policies(provisioner(consolidation=True)), types=M5)


def hold(scene: Scene, controller: Controller, seconds: float = 30) -> list[ReconcileResult]:
    """Run until a consolidation command is held for its validation (the wait Karpenter's test blocks in)."""
    results: list[ReconcileResult] = run(scene, controller, seconds, until=lambda r: bool(held(r)))
    assert held(results), "a consolidation command was held for its validation"
    return results


# --- Replace -------------------------------------------------------------------------------------------------


def test_can_replace_node(policies: Policies) -> None:
    """Replace > can replace node — machine_consolidation_test.go:57."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, node))
    (new,) = scene.nodes()
    assert new != node and type_of(scene, new) != MOST_EXPENSIVE
    assert replacements(results) == [new]


def test_can_replace_nodes_if_another_provisioner_returns_no_instance_types(policies: Policies) -> None:
    """Replace > can replace nodes if another provisioner returns no instance types — machine_consolidation_test.go:126.
    The other provisioner admits only p5 types, which the scene's cloud does not sell."""
    gpu = provisioner("other", requirements=(
        "    - key: karpenter.k8s.aws/instance-family\n      operator: In\n      values: [\"p5\"]\n"))
    scene = Scene(policies(provisioner(consolidation=True), gpu), types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node))
    (new,) = scene.nodes()
    assert type_of(scene, new) != MOST_EXPENSIVE


def test_can_replace_nodes_considers_pdb(policies: Policies) -> None:
    """Replace > can replace nodes, considers PDB — machine_consolidation_test.go:199."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pods("test", 3, node=node, labels=APP)
    scene.add_pdb("test", APP, max_unavailable=0)
    controller = scene.controller()
    results = run(scene, controller, 120)
    assert list(scene.nodes()) == [node] and not deleting(scene) and len(scene.instances()) == 1
    assert "PodDisruptionBudget default/test prevents pod evictions" in blocked(results)[node]


def test_can_replace_nodes_considers_pdb_policy(policies: Policies) -> None:
    """Replace > can replace nodes, considers PDB policy — machine_consolidation_test.go:271 (issue #18 item 5:
    `unhealthyPodEvictionPolicy: AlwaysAllow` lets the unhealthy pods go whatever the budget allows)."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pods("test", 3, node=node, labels=APP, ready=False)
    scene.add_pdb("test", APP, max_unavailable=0, unhealthy_pod_eviction_policy="AlwaysAllow")
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node))
    (new,) = scene.nodes()
    assert new != node


def test_can_replace_nodes_pdb_namespace_must_match(policies: Policies) -> None:
    """Replace > can replace nodes, PDB namespace must match — machine_consolidation_test.go:375."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node, labels=APP)
    scene.add_pdb("test", APP, namespace="other", max_unavailable=0)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node))
    assert len(scene.nodes()) == 1 and node not in scene.nodes()


def test_can_replace_nodes_considers_do_not_consolidate_annotation(policies: Policies) -> None:
    """Replace > can replace nodes, considers do-not-consolidate annotation — machine_consolidation_test.go:451."""
    scene = consolidating(policies)
    regular = scene.add_node("default", MOST_EXPENSIVE)
    annotated = scene.add_node("default", MOST_EXPENSIVE, annotations={"karpenter.sh/do-not-consolidate": "true"})
    scene.add_pods("regular", 2, node=regular, labels=APP)
    scene.add_pod("annotated", node=annotated, labels=APP)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, regular))
    assert list(scene.nodes()) == [annotated]


def _unavailable_on_demand(scene: Scene, node: str) -> None:
    """EC2 has no on-demand capacity for the node's type in its zone now (the node runs on what it has)."""
    scene.cloud.mark_unavailable(type_of(scene, node), "us-east-1a", "on-demand", "InsufficientInstanceCapacity")


def test_wont_replace_node_if_any_spot_replacement_is_more_expensive(policies: Policies) -> None:
    """Replace > won't replace node if any spot replacement is more expensive — machine_consolidation_test.go:537
    (issue #18 items 3 and 4: the replacement's spot offerings cost $1.00/$0.20/$0.40 by zone, more than the
    node's $0.50 at worst; the node is priced by its offering although that offering is unavailable now)."""
    current = instance_type("m5.xlarge", [("us-east-1a", "on-demand", 0.5)])
    replacement = instance_type("m5.large", [("us-east-1a", "spot", 1.0), ("us-east-1b", "spot", 0.2),
                                             ("us-east-1c", "spot", 0.4)])
    scene = Scene(policies(provisioner(capacity_types=("spot", "on-demand"), consolidation=True)),
                  types=[current, replacement])
    node = scene.add_node("default", "m5.xlarge", zone="us-east-1a")
    _unavailable_on_demand(scene, node)
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 60)
    assert list(scene.nodes()) == [node] and not deleting(scene) and len(scene.instances()) == 1
    assert blocked(results)[node] == "consolidation: can't replace with a cheaper node"


def test_wont_replace_on_demand_node_if_on_demand_replacement_is_more_expensive(policies: Policies) -> None:
    """Replace > won't replace on-demand node if on-demand replacement is more expensive —
    machine_consolidation_test.go:631."""
    current = instance_type("m5.xlarge", [("us-east-1a", "on-demand", 0.5)])
    replacement = instance_type("m5.large", [("us-east-1a", "on-demand", 0.6), ("us-east-1b", "on-demand", 0.6),
                                             ("us-east-1b", "spot", 0.2), ("us-east-1c", "spot", 0.3)])
    scene = Scene(policies(provisioner(consolidation=True)), types=[current, replacement])
    node = scene.add_node("default", "m5.xlarge", zone="us-east-1a")
    _unavailable_on_demand(scene, node)
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 60)
    assert list(scene.nodes()) == [node] and len(scene.instances()) == 1
    assert blocked(results)[node] == "consolidation: can't replace with a cheaper node"


def test_waits_for_node_deletion_to_finish(policies: Policies) -> None:
    """Replace > waits for node deletion to finish — machine_consolidation_test.go:741. The next command waits
    until the nodes of the last one are gone from the cluster (another finalizer holds this one)."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE, finalizers=["unit-test.com/block-deletion"])
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: deleting(scene) == [node] and not scene.pods_on(node))
    empty = scene.add_node("default", LEAST_EXPENSIVE)  # would go at once (empty) if a decision were taken
    results = run(scene, controller, 120)
    assert node in scene.nodes() and empty in scene.nodes(), "still waiting on the deletion"
    assert not held(results) and not decided(results)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"finalizers": None}})
    results = run(scene, controller, 120, until=lambda _: gone(scene, empty))
    assert gone(scene, node, empty) and any(empty in command for command in decided(results))


# --- Delete --------------------------------------------------------------------------------------------------


def _two_nodes(scene: Scene) -> tuple[str, str]:
    """Karpenter's Delete context: two nodes of the least expensive type (in the same zone)."""
    return scene.add_node("default", LEAST_EXPENSIVE), scene.add_node("default", LEAST_EXPENSIVE)


def test_can_delete_nodes(policies: Policies) -> None:
    """Delete > can delete nodes — machine_consolidation_test.go:869."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("a", 2, node=node1, labels=APP)
    scene.add_pod("b", node=node2, labels=APP)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node2))
    assert list(scene.nodes()) == [node1] and len(scene.instances()) == 1


def test_can_delete_nodes_when_non_karpenter_capacity_can_fit_pods(policies: Policies) -> None:
    """Delete > can delete nodes, when non-Karpenter capacity can fit pods — machine_consolidation_test.go:961."""
    scene = consolidating(policies)
    unmanaged = scene.add_unmanaged_node("managed-group-0", cpu="32")
    node1 = scene.add_node("default", LEAST_EXPENSIVE)
    scene.add_pods("test", 3, node=node1, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, node1))
    assert list(scene.nodes()) == [unmanaged] and not replacements(results)


def test_can_delete_nodes_considers_pdb(policies: Policies) -> None:
    """Delete > can delete nodes, considers PDB — machine_consolidation_test.go:1015."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("free", 2, node=node1, labels={"app": "free"})
    scene.add_pod("kept", node=node2, labels=APP)
    scene.add_pdb("test", APP, max_unavailable=0)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node1))
    assert list(scene.nodes()) == [node2], "the node with more pods went: the other one's pod has a PDB"


def test_can_delete_nodes_considers_do_not_evict(policies: Policies) -> None:
    """Delete > can delete nodes, considers do-not-evict — machine_consolidation_test.go:1081."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("free", 2, node=node1)
    scene.add_pod("kept", node=node2, annotations={"karpenter.sh/do-not-evict": "true"})
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node1))
    assert list(scene.nodes()) == [node2]


def test_can_delete_nodes_evicts_pods_without_an_owner_ref(policies: Policies) -> None:
    """Delete > can delete nodes, evicts pods without an ownerRef — machine_consolidation_test.go:1131."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("owned", 2, node=node1)
    scene.add_pod("standalone", node=node2, owner=None)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node2))
    assert list(scene.nodes()) == [node1]
    assert "standalone" not in [objects.name(p) for p in scene.pods()], "evicted, and nothing recreates it"


def test_wont_delete_node_if_it_would_require_pods_to_schedule_on_an_uninitialized_node(policies: Policies) -> None:
    """Delete > won't delete node if it would require pods to schedule on an un-initialized node —
    machine_consolidation_test.go:1180."""
    scene = Scene(policies(provisioner(consolidation=True)), types=M5, node_startup=10**9)
    node1 = scene.add_node("default", LEAST_EXPENSIVE, ready=False)
    node2 = scene.add_node("default", LEAST_EXPENSIVE)
    scene.add_pods("a", 2, node=node1, labels=APP)
    scene.add_pod("b", node=node2, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 60)
    assert sorted(scene.nodes()) == sorted([node1, node2]) and not deleting(scene)
    assert f"would schedule against the non-initialized node {node1}" in blocked(results)[node2]


def test_should_consider_initialized_nodes_before_uninitialized_nodes(policies: Policies) -> None:
    """Delete > should consider initialized nodes before un-initialized nodes — machine_consolidation_test.go:1230.
    100 nodes, one of them (chosen at random) initialized; a small node's pod fits on it."""
    scene = Scene(policies(provisioner(consolidation=True)), types=M5, node_startup=10**9)
    initialized = random.Random(18).randrange(100)
    big = []
    for i in range(100):
        name = scene.add_node("default", "m5.xlarge", ready=i == initialized)
        scene.add_pod(f"big-{i}", node=name, cpu="2", labels=APP)
        big.append(name)
    small = scene.add_node("default", LEAST_EXPENSIVE)
    scene.add_pod("small", node=small, cpu="1900m", labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, small))
    assert gone(scene, small) and sorted(scene.nodes()) == sorted(big)
    assert not any("non-initialized" in why for r in results if r.disrupted for why in r.disrupted.blocked.values())


def test_can_delete_nodes_with_a_permanently_pending_pod(policies: Policies) -> None:
    """Delete > can delete nodes with a permanently pending pod — machine_consolidation_test.go:1379 (issue #18
    item 7: a pod no node can take does not freeze disruption)."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("a", 2, node=node1, labels=APP)
    scene.add_pod("b", node=node2, labels=APP)
    scene.add_pod("pending", nodeSelector={"non-existent": "node-label"})
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node2))
    assert list(scene.nodes()) == [node1]
    assert scene.unbound() == ["default/pending"], "the pending pod is still there, not scheduled anywhere"


def test_wont_delete_nodes_if_it_would_make_a_non_pending_pod_go_pending(policies: Policies) -> None:
    """Delete > won't delete nodes if it would make a non-pending pod go pending —
    machine_consolidation_test.go:1435."""
    scene = consolidating(policies)
    node1 = scene.add_node("default", LEAST_EXPENSIVE, labels={"foo": "1"})
    node2 = scene.add_node("default", LEAST_EXPENSIVE, labels={"foo": "2"})
    scene.add_pods("one", 2, node=node1, nodeSelector={"foo": "1"})
    scene.add_pod("two", node=node2, nodeSelector={"foo": "2"})
    controller = scene.controller()
    results = run(scene, controller, 60)
    assert sorted(scene.nodes()) == sorted([node1, node2]) and not deleting(scene) and not held(results)


def test_can_delete_nodes_while_an_invalid_provisioner_exists(policies: Policies) -> None:
    """Delete > can delete nodes while an invalid provisioner exists — machine_consolidation_test.go:1481. The
    invalid one: a constraint set compiled for another region, which the controller leaves out."""
    compiled = policies(provisioner(consolidation=True), provisioner("bad"))
    loaded = DirectorySource(compiled).poll()
    assert isinstance(loaded, Loaded)
    sets = tuple(dataclasses.replace(s, region="eu-west-1") if s.name == "bad" else s for s in loaded.sets)
    scene = Scene(dataclasses.replace(loaded, sets=sets), types=M5)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("a", 2, node=node1, labels=APP)
    scene.add_pod("b", node=node2, labels=APP)
    controller = scene.controller()
    run(scene, controller, 120, until=lambda _: gone(scene, node2))
    assert list(scene.nodes()) == [node1]


# --- TTL (the 15 s validation, issue #18 item 8) -------------------------------------------------------------


def test_should_wait_for_the_node_ttl_for_empty_nodes_before_consolidating(policies: Policies) -> None:
    """TTL > should wait for the node TTL for empty nodes before consolidating — machine_consolidation_test.go:1576."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    hold(scene, controller)
    started = scene.clock.now
    run(scene, controller, 14)
    assert node in scene.nodes() and not deleting(scene), "not before the validation wait is over"
    run(scene, controller, 30, until=lambda _: gone(scene, node))
    assert gone(scene, node) and scene.clock.now - started >= 15


def test_should_wait_for_the_node_ttl_for_non_empty_nodes_before_consolidating(policies: Policies) -> None:
    """TTL > should wait for the node TTL for non-empty nodes before consolidating —
    machine_consolidation_test.go:1613."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pods("a", 2, node=node1, labels=APP)
    scene.add_pod("b", node=node2, labels=APP)
    controller = scene.controller()
    hold(scene, controller)
    run(scene, controller, 14)
    assert sorted(scene.nodes()) == sorted([node1, node2]) and not deleting(scene)
    run(scene, controller, 60, until=lambda _: gone(scene, node2))
    assert list(scene.nodes()) == [node1]


def test_should_not_consolidate_if_the_action_picks_different_instance_types_after_the_node_ttl_wait(
    policies: Policies, log: io.StringIO
) -> None:
    """TTL > should not consolidate if the action picks different instance types after the node TTL wait —
    machine_consolidation_test.go:1699. The node would be replaced by an m5.large; a pod added during the wait
    needs a larger type: the command is not acted on (a later decision may find another one)."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node, cpu="1", labels=APP)
    controller = scene.controller()
    results = hold(scene, controller)
    assert "replacing with 1 on-demand machine(s) from types m5.large " in held(results)[0]
    scene.add_pod("test-1", node=node, cpu="1", labels=APP)
    results = run(scene, controller, 16)
    assert list(scene.nodes()) == [node] and not deleting(scene) and not decided(results)
    assert len(scene.instances()) == 1, "no replacement launched"
    assert "the command is no longer valid (the replacement could no longer be of type m5.large)" in log.getvalue()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node))
    assert gone(scene, node), "the next decision (10 s later, then its own wait) replaces it by a type for both pods"
    (new,) = scene.nodes()
    assert type_of(scene, new) == "m5.xlarge"


def test_should_not_consolidate_if_the_action_becomes_invalid_during_the_node_ttl_wait(policies: Policies) -> None:
    """TTL > should not consolidate if the action becomes invalid during the node TTL wait —
    machine_consolidation_test.go:1785."""
    scene = consolidating(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    hold(scene, controller)
    scene.add_pod("test-0", node=node, annotations={"karpenter.sh/do-not-evict": "true"})
    results = run(scene, controller, 60)
    assert list(scene.nodes()) == [node] and not deleting(scene) and not decided(results)


def _blocked_during_the_wait(policies: Policies, block: str, nodes: int) -> None:
    """The TTL > should not replace/delete node if … during the TTL wait tests: a pod that blocks disruption lands on
    each node of the held command."""
    scene = consolidating(policies)
    names = [scene.add_node("default", MOST_EXPENSIVE) for _ in range(nodes)]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name)
    controller = scene.controller()
    hold(scene, controller)
    for i, name in enumerate(names):
        if block == "pdb":
            scene.add_pod(f"blocking-{i}", node=name, labels=APP)
        else:
            scene.add_pod(f"blocking-{i}", node=name, annotations={block: "true"})
    if block == "pdb":
        scene.add_pdb("test", APP, max_unavailable=0)
    results = run(scene, controller, 60)
    assert sorted(scene.nodes()) == sorted(names) and not deleting(scene)
    assert not decided(results) and len(scene.instances()) == nodes, "nothing launched, nothing deleted"


def test_should_not_replace_node_if_a_pod_schedules_with_do_not_evict_during_the_ttl_wait(policies: Policies) -> None:
    """TTL > should not replace node if a pod schedules with karpenter.sh/do-not-evict during the TTL wait —
    machine_consolidation_test.go:1828."""
    _blocked_during_the_wait(policies, "karpenter.sh/do-not-evict", 1)


def test_should_not_replace_node_if_a_pod_schedules_with_do_not_disrupt_during_the_ttl_wait(
    policies: Policies,
) -> None:
    """TTL > should not replace node if a pod schedules with karpenter.sh/do-not-disrupt during the TTL wait —
    machine_consolidation_test.go:1893."""
    _blocked_during_the_wait(policies, "karpenter.sh/do-not-disrupt", 1)


def test_should_not_replace_node_if_a_pod_schedules_with_a_blocking_pdb_during_the_ttl_wait(policies: Policies) -> None:
    """TTL > should not replace node if a pod schedules with a blocking PDB during the TTL wait —
    machine_consolidation_test.go:1958."""
    _blocked_during_the_wait(policies, "pdb", 1)


def test_should_not_delete_node_if_pods_schedule_with_do_not_evict_during_the_ttl_wait(policies: Policies) -> None:
    """TTL > should not delete node if pods schedule with karpenter.sh/do-not-evict during the TTL wait —
    machine_consolidation_test.go:2028."""
    _blocked_during_the_wait(policies, "karpenter.sh/do-not-evict", 2)


def test_should_not_delete_node_if_pods_schedule_with_do_not_disrupt_during_the_ttl_wait(policies: Policies) -> None:
    """TTL > should not delete node if pods schedule with karpenter.sh/do-not-disrupt during the TTL wait —
    machine_consolidation_test.go:2079."""
    _blocked_during_the_wait(policies, "karpenter.sh/do-not-disrupt", 2)


def test_should_not_delete_node_if_pods_schedule_with_a_blocking_pdb_during_the_ttl_wait(policies: Policies) -> None:
    """TTL > should not delete node if pods schedule with a blocking PDB during the TTL wait —
    machine_consolidation_test.go:2130."""
    _blocked_during_the_wait(policies, "pdb", 2)


# --- Timeout -------------------------------------------------------------------------------------------------


def test_should_return_the_last_valid_command_when_multi_machine_consolidation_times_out(
    policies: Policies, log: io.StringIO
) -> None:
    """Timeout > should return the last valid command when multi-machine consolidation times out —
    machine_consolidation_test.go:2188. Each simulation takes 25 virtual seconds: the 60 s budget stops the binary
    search after three of them, and the best command found so far is acted on."""
    scene = consolidating(policies)
    names = [scene.add_node("default", LEAST_EXPENSIVE) for _ in range(20)]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name, cpu="10m", labels=APP)
    controller = scene.controller()
    scene.slow_decisions(controller, 25)
    results = run(scene, controller, 600, until=lambda r: bool(decided(r)) and not deleting(scene))
    assert "multi-node consolidation stopped: its 60s budget ran out" in log.getvalue()
    assert len(scene.nodes()) <= 20 - 2, "at least two nodes deleted by multi-node consolidation"
    assert "machines" in decided(results)[0] and "nodes' pods fit on other nodes" in decided(results)[0]


def test_should_exit_single_machine_consolidation_if_it_times_out(policies: Policies, log: io.StringIO) -> None:
    """Timeout > should exit single-machine consolidation if it times out — machine_consolidation_test.go:2280.
    Each pod takes more than half a node: no two nodes go together, and each simulation takes 100 virtual
    seconds: the 3-minute budget stops single-node consolidation after two candidates. (The provisioner launches
    only m5.large, like Karpenter's fake types: no larger type takes the pods of several nodes for less.)"""
    scene = Scene(policies(provisioner(consolidation=True, requirements=ONLY_LARGE)), types=M5)
    names = [scene.add_node("default", LEAST_EXPENSIVE) for _ in range(25)]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name, cpu="1200m", labels=APP)
    controller = scene.controller()
    scene.slow_decisions(controller, 100)
    results = run(scene, controller, 1)
    assert "single-node consolidation stopped after 2 of 25 candidates: its 180s budget ran out" in log.getvalue()
    assert results[-1].disrupted is not None and "single-node" in results[-1].disrupted.stopped
    assert sorted(scene.nodes()) == sorted(names) and not held(results)


# --- Multi-NodeClaim -----------------------------------------------------------------------------------------


def test_can_merge_3_nodes_into_1(policies: Policies) -> None:
    """Multi-NodeClaim > can merge 3 nodes into 1 — machine_consolidation_test.go:2421."""
    scene = consolidating(policies)
    names = [scene.add_node("default", MOST_EXPENSIVE) for _ in range(3)]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, *names))
    assert len(scene.nodes()) == 1 and len(replacements(results)) == 1
    assert "terminating 3 machines" in decided(results)[0]


def test_wont_merge_2_nodes_into_1_of_the_same_type(policies: Policies) -> None:
    """Multi-NodeClaim > won't merge 2 nodes into 1 of the same type — machine_consolidation_test.go:2468 (issue
    #18 item 1: two m5.large would be replaced by one m5.large — deleting the one with fewer pods does the same
    with no launch and fewer pods disrupted)."""
    scene = consolidating(policies)
    node1, node2 = _two_nodes(scene)
    scene.add_pod("a", node=node1, labels=APP)
    scene.add_pods("b", 2, node=node2, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, node1))
    assert list(scene.nodes()) == [node2] and not replacements(results)
    assert decided(results)[0].startswith(f"deprovisioning via consolidation delete, terminating 1 machines {node1}/")


def test_should_wait_for_the_node_ttl_for_non_empty_nodes_before_consolidating_multi_node(policies: Policies) -> None:
    """Multi-NodeClaim > should wait for the node TTL for non-empty nodes before consolidating (multi-node) —
    machine_consolidation_test.go:2543."""
    scene = consolidating(policies)
    node1 = scene.add_node("default", MOST_EXPENSIVE)
    node2 = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pods("a", 2, node=node1, labels=APP)
    scene.add_pod("b", node=node2, labels=APP)
    controller = scene.controller()
    hold(scene, controller)
    run(scene, controller, 14)
    assert sorted(scene.nodes()) == sorted([node1, node2]) and len(scene.instances()) == 2
    results = run(scene, controller, 120, until=lambda _: gone(scene, node1, node2))
    assert len(scene.nodes()) == 1 and "terminating 2 machines" in decided(results)[0]


def test_should_continue_to_multi_machine_consolidation_when_emptiness_fails_validation_after_the_node_ttl(
    policies: Policies, log: io.StringIO
) -> None:
    """Multi-NodeClaim > should continue to multi-machine consolidation when emptiness fails validation after the
    node ttl — machine_consolidation_test.go:2609."""
    scene = consolidating(policies)
    names = [scene.add_node("default", MOST_EXPENSIVE) for _ in range(3)]
    controller = scene.controller()
    results = hold(scene, controller)
    assert "(empty)" in held(results)[0]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name, labels=APP)
    results = run(scene, controller, 120, until=lambda _: gone(scene, *names))
    assert "abandoning empty consolidation, the command is no longer valid" in log.getvalue()
    assert len(scene.nodes()) == 1 and "terminating 3 machines" in decided(results)[0]


def test_should_continue_to_single_machine_consolidation_when_multi_machine_consolidation_fails_validation(
    policies: Policies, log: io.StringIO
) -> None:
    """Multi-NodeClaim > should continue to single machine consolidation when multi-machine consolidation fails
    validation after the node ttl — machine_consolidation_test.go:2678."""
    scene = consolidating(policies)
    names = [scene.add_node("default", MOST_EXPENSIVE) for _ in range(3)]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name, labels=APP)
    controller = scene.controller()
    results = hold(scene, controller)
    assert "terminating 3 machines" in held(results)[0]
    scene.add_pod("extra-0", node=names[0], cpu="1")
    scene.add_pod("extra-1", node=names[1], cpu="1")
    results = run(scene, controller, 120, until=lambda _: gone(scene, names[2]))
    assert "abandoning multi-node consolidation, the command is no longer valid" in log.getvalue()
    assert sorted(scene.nodes()) == sorted(names[:2]), "single-node consolidation deleted the third node"
    expected = f"deprovisioning via consolidation delete, terminating 1 machines {names[2]}/"
    assert decided(results)[0].startswith(expected)


# --- Node Lifetime Consideration -----------------------------------------------------------------------------


def test_should_consider_node_lifetime_remaining_when_calculating_disruption_cost(policies: Policies) -> None:
    """Node Lifetime Consideration > should consider node lifetime remaining when calculating disruption cost —
    machine_consolidation_test.go:2809 (issue #18 item 2). The older node has more pods but 100 s of its hour
    left: its disruption cost is the lowest, so it goes."""
    scene = Scene(policies(provisioner(consolidation=True, ttl_until_expired=3600)), types=M5)
    old = scene.add_node("default", LEAST_EXPENSIVE, age=3500)
    young = scene.add_node("default", LEAST_EXPENSIVE)
    scene.add_pods("a", 2, node=old, labels=APP)
    scene.add_pod("b", node=young, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, old))
    assert list(scene.nodes()) == [young]
    assert "consolidation delete" in decided(results)[0]


# --- Topology Consideration ----------------------------------------------------------------------------------


def test_can_replace_node_maintaining_zonal_topology_spread(policies: Policies) -> None:
    """Topology Consideration > can replace node maintaining zonal topology spread —
    machine_consolidation_test.go:2915."""
    scene = consolidating(policies)
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "spread"}}}]
    zone1 = scene.add_node("default", LEAST_EXPENSIVE, zone="us-east-1a")
    zone2 = scene.add_node("default", MOST_EXPENSIVE, zone="us-east-1b")
    zone3 = scene.add_node("default", LEAST_EXPENSIVE, zone="us-east-1c")
    for i, node in enumerate((zone1, zone2, zone3)):
        scene.add_pod(f"spread-{i}", node=node, cpu="1", labels={"app": "spread"}, topologySpreadConstraints=spread)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, zone2))
    (new,) = replacements(results)
    found = scene.node(new)
    assert found is not None and objects.labels(found)["topology.kubernetes.io/zone"] == "us-east-1b"
    assert type_of(scene, new) != MOST_EXPENSIVE and len(scene.nodes()) == 3


def test_wont_delete_node_if_it_would_violate_pod_anti_affinity(policies: Policies) -> None:
    """Topology Consideration > won't delete node if it would violate pod anti-affinity —
    machine_consolidation_test.go:2991."""
    scene = consolidating(policies)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": APP}, "topologyKey": "kubernetes.io/hostname"}]}}
    names = [scene.add_node("default", LEAST_EXPENSIVE, zone=f"us-east-1{z}") for z in "abc"]
    for i, name in enumerate(names):
        scene.add_pod(f"test-{i}", node=name, cpu="1", labels=APP, affinity=anti)
    controller = scene.controller()
    results = run(scene, controller, 60)
    assert sorted(scene.nodes()) == sorted(names) and not held(results) and not deleting(scene)


# --- Parallelization -----------------------------------------------------------------------------------------


def test_should_schedule_an_additional_node_when_receiving_pending_pods_while_consolidating(
    policies: Policies,
) -> None:
    """Parallelization > should schedule an additional node when receiving pending pods while consolidating —
    machine_consolidation_test.go:3083. The node being replaced is cordoned before its replacement launches, so
    a pod that arrives meanwhile goes to the replacement, not to the node about to go."""
    scene = Scene(policies(provisioner(consolidation=True)), types=M5, node_startup=20)
    node = scene.add_node("default", MOST_EXPENSIVE, finalizers=["karpenter.sh/test-finalizer"])
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda r: bool(replacements(r)))
    (replacement,) = replacements(results)
    cordoned = scene.node(node)
    assert cordoned is not None and cordoned["spec"].get("unschedulable") is True
    scene.add_pod("arrived", labels=APP)
    run(scene, controller, 120, until=lambda _: not scene.unbound() and deleting(scene) == [node])
    assert scene.pods_on(replacement) == ["arrived"] and len(scene.instances()) <= 2
    assert sorted(scene.nodes()) == sorted([node, replacement])


def test_should_not_consolidate_a_node_that_is_launched_for_pods_on_a_deleting_node(policies: Policies) -> None:
    """Parallelization > should not consolidate a node that is launched for pods on a deleting node —
    machine_consolidation_test.go:3139. Here no decision is taken at all while a node of ours drains (a
    documented difference: Karpenter keeps deciding, with the draining node's pods in its simulation)."""
    scene = consolidating(policies)
    draining = scene.add_node("default", "m5.2xlarge")
    scene.add_pods("held", 3, node=draining, cpu="1", labels=APP)
    scene.add_pdb("held", APP, max_unavailable=0)
    other = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pods("moved", 2, node=other, cpu="1")
    scene.cluster.delete(objects.NODE, draining)
    controller = scene.controller()
    results = run(scene, controller, 120)
    assert not held(results) and not decided(results)
    assert other in scene.nodes() and not objects.is_deleting(scene.nodes()[other])


# --- beyond the Go tests -------------------------------------------------------------------------------------


def test_a_node_whose_offering_is_unavailable_is_still_consolidated(policies: Policies) -> None:
    """Issue #18 item 4: a node is priced by its offering whatever that offering's availability now (Karpenter's
    `getCandidatePrices`); before, "no price data for the node" kept it."""
    current = instance_type("m5.xlarge", [("us-east-1a", "on-demand", 0.5)])
    cheap = instance_type("m5.large", [Offering("us-east-1a", "on-demand", 0.1)])
    scene = Scene(policies(provisioner(consolidation=True)), types=[current, cheap])
    node = scene.add_node("default", "m5.xlarge", zone="us-east-1a")
    _unavailable_on_demand(scene, node)
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node))
    (new,) = scene.nodes()
    assert type_of(scene, new) == "m5.large" and "saving $0.4000/h" in decided(results)[0]
