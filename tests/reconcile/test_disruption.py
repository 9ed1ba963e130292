"""Expiry, drift and consolidation on the in-memory cluster and cloud with a fake clock: what replaces a node is
launched and initialized before the node is deleted; the node then goes through the termination finalizer (its
pods evicted, recreated by their ReplicaSet — the stand-in below — and bound to the replacement)."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from karpenter_policy.api.constraintset import ConstraintSet, ConstraintSetError
from karpenter_policy.cloud.provider import STATE_TERMINATED
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.pods import disruption_cost as pod_disruption_cost

from .lifecycle import Deployment, World, nodes, run, settled, start
from .support import POLICIES, compile_policies, container, replicas, run_cli

Edit = Callable[[str], str]


def policies(tmp: Path, default: Edit, name: str = "policies") -> Path:
    """The example policies with `default.yaml` rewritten by `default`, compiled by the real CLI."""
    source = tmp / name
    shutil.copytree(POLICIES, source)
    path = source / "default.yaml"
    path.write_text(default(path.read_text()))
    return compile_policies(source, tmp / f"{name}-build")


def consolidating(text: str) -> str:
    return text.replace("ttlSecondsAfterEmpty: 30", "consolidation:\n    enabled: true")


def on_demand(text: str) -> str:
    return text.replace('values: ["spot"]', 'values: ["on-demand"]')


def node_of_pods(world: World, app: str) -> set[str]:
    return {p["spec"].get("nodeName") for p in world.cluster.list(objects.POD).items if objects.labels(p)["app"] == app}


def instance_state(world: World, node: dict[str, object]) -> str | None:
    instance = world.inner.get(node_info.instance_id(node))
    return None if instance is None else instance.state


class Watch:
    """Records, for each node of ours deleted, whether every other node the pods now use was initialized then."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.deleted_while: dict[str, list[str]] = {}

    def __call__(self) -> bool:
        for name, node in nodes(self.world).items():
            if objects.is_deleting(node) and name not in self.deleted_while:
                self.deleted_while[name] = sorted(
                    n for n, other in nodes(self.world).items()
                    if n != name and not objects.is_deleting(other) and node_info.is_initialized(other)
                )
        return False


def run_watched(world: World, controller: Controller, deployment: Deployment, seconds: int, watch: Watch,
                done: Callable[[], bool]) -> list[ReconcileResult]:
    return run(world, controller, deployment, seconds, lambda: watch() or done())


# --- expiry ------------------------------------------------------------------------------------------------


def test_an_expired_node_is_replaced_before_it_drains(tmp_path: Path, log: io.StringIO) -> None:
    compiled = policies(tmp_path, lambda t: t + "  ttlSecondsUntilExpired: 3600\n")
    world = World(compiled, types=["m5.xlarge", "m5.2xlarge"])
    controller, deployment = start(world, 3)
    (old,) = nodes(world)
    old_node = nodes(world)[old]
    run(world, controller, deployment, 60)
    assert old in nodes(world), "not before its TTL"

    world.clock.advance(3600)
    watch = Watch(world)
    run_watched(world, controller, deployment, 300, watch, lambda: old not in nodes(world) and settled(world))

    assert old not in nodes(world), "the expired node went"
    (new,) = nodes(world)
    assert watch.deleted_while[old] == [new], "the replacement was initialized before the old node drained"
    assert node_of_pods(world, "inflate") == {new} and len(deployment.live()) == 3
    assert instance_state(world, old_node) in (None, STATE_TERMINATED)
    text = log.getvalue()
    assert f"deprovisioning via expiration replace, terminating 1 machines {old}/" in text
    assert "(expired 3600s after creation)" in text and "replacement node(s) initialized" in text


def test_an_expired_node_whose_pods_fit_elsewhere_is_deleted_without_a_replacement(
    tmp_path: Path, log: io.StringIO
) -> None:
    compiled = policies(tmp_path, lambda t: t + "  ttlSecondsUntilExpired: 3600\n")
    world = World(compiled, types=["m5.2xlarge"])
    controller, deployment = start(world, 2)
    (first,) = nodes(world)
    world.clock.advance(1800)
    deployment.scale(9)  # one more node, with room for the first node's pods once some go
    run(world, controller, deployment, 120, lambda: settled(world) and len(nodes(world)) == 2)
    deployment.scale(6)
    world.clock.advance(1800)
    run(world, controller, deployment, 300, lambda: first not in nodes(world) and settled(world))
    assert first not in nodes(world) and len(nodes(world)) == 1
    assert f"deprovisioning via expiration delete, terminating 1 machines {first}/" in log.getvalue()


def test_a_short_ttl_expires_at_creation_plus_ttl_not_ten_minutes_later(tmp_path: Path, log: io.StringIO) -> None:
    """Karpenter v0.31 expires a node at its creation + ttlSecondsUntilExpired, whatever the TTL (compile warns
    below an hour: ttl-churn); there used to be a ten-minute floor here."""
    compiled = policies(tmp_path, lambda t: t + "  ttlSecondsUntilExpired: 120\n")
    world = World(compiled, types=["m5.xlarge", "m5.2xlarge"])
    controller, deployment = start(world, 3)
    (first,) = nodes(world)
    created = objects.parse_time(objects.creation_timestamp(nodes(world)[first]))
    run(world, controller, deployment, 300, lambda: objects.is_deleting(nodes(world)[first]))
    expired_at = world.wall()
    assert objects.is_deleting(nodes(world)[first]), "expired well before ten minutes"
    assert 120 <= (expired_at - created).total_seconds() < 130, "at its creation + TTL (and the pass after)"
    assert "(expired 120s after creation)" in log.getvalue()


def test_a_ttl_of_zero_replaces_one_node_at_a_time_each_after_its_replacement_is_up(
    tmp_path: Path, log: io.StringIO
) -> None:
    """`ttlSecondsUntilExpired: 0`, as Karpenter: every node is expired from its creation, and yet the replacements
    cannot loop at once — a replacement is a new node (its own TTL starts at its creation) and a candidate only
    once initialized, and expiry replaces one node at a time: never two of ours draining together, never more than
    the node and its replacement, every node deleted only once another was up, the pods kept."""
    compiled = policies(tmp_path, lambda t: t + "  ttlSecondsUntilExpired: 0\n")
    world = World(compiled, types=["m5.xlarge", "m5.2xlarge"])
    controller, deployment = start(world, 3)
    (first,) = nodes(world)
    watch = Watch(world)
    most_deleting, most_nodes = 0, 0

    def observe() -> bool:
        nonlocal most_deleting, most_nodes
        watch()
        current = nodes(world)
        most_deleting = max(most_deleting, sum(objects.is_deleting(n) for n in current.values()))
        most_nodes = max(most_nodes, len(current))
        return False

    run(world, controller, deployment, 300, observe)

    assert first not in nodes(world), "replaced without waiting ten minutes"
    replaced = log.getvalue().count("deprovisioning via expiration")
    assert replaced >= 2, "its replacement expired in turn (Karpenter's behaviour; compile warns: ttl-churn)"
    assert most_deleting == 1 and most_nodes == 2, "one at a time: a node and its replacement"
    assert all(watch.deleted_while.values()), "each node went only once its replacement was initialized"
    # the pods kept: the churn never ends (each command follows the last at once, as v0.31.1), and between two
    # commands every evicted pod is bound again — the next decision waits for them (the cluster quiet)
    run(world, controller, deployment, 60, lambda: not world.unbound())
    assert len(deployment.live()) == 3 and not world.unbound()


# --- drift -------------------------------------------------------------------------------------------------


def test_a_policy_change_rolls_the_fleet(tmp_path: Path, log: io.StringIO) -> None:
    before = policies(tmp_path, lambda t: t, "before")
    after = policies(tmp_path, lambda t: t.replace("  weight: 10\n", "  weight: 10\n  labels:\n    tier: web\n"),
                     "after")
    world = World(before, types=["m5.xlarge", "m5.2xlarge"])
    controller, deployment = start(world, 6)
    old = set(nodes(world))
    run(world, controller, deployment, 30)
    assert set(nodes(world)) == old, "no drift while the policy stands"

    controller.constraints = DirectorySource(str(after))  # the merged PR, as the ConfigMap brings it
    watch = Watch(world)
    run_watched(world, controller, deployment, 900, watch, lambda: not old & set(nodes(world)) and settled(world))

    assert not old & set(nodes(world)), "every node from before the change was replaced"
    assert all(objects.labels(n).get("tier") == "web" for n in nodes(world).values())
    assert len(deployment.live()) == 6 and not world.unbound()
    for name in old:
        assert watch.deleted_while[name], f"{name} drained only once a replacement was up"
    text = log.getvalue()
    assert "deprovisioning via drift replace" in text
    assert "provisioner default's labels, taints, kubelet or node template changed" in text


def test_drift_to_an_instance_type_no_longer_admitted(tmp_path: Path, log: io.StringIO) -> None:
    before = policies(tmp_path, lambda t: t, "before")
    after = policies(tmp_path, lambda t: t.replace(
        '      values: ["spot"]\n',
        '      values: ["spot"]\n    - key: node.kubernetes.io/instance-type\n      operator: In\n'
        '      values: ["m5.2xlarge"]\n'), "after")
    world = World(before, types=["m5.xlarge", "m5.2xlarge"])
    controller, deployment = start(world, 2)
    (old,) = nodes(world)
    assert objects.labels(nodes(world)[old])["node.kubernetes.io/instance-type"] == "m5.xlarge"
    controller.constraints = DirectorySource(str(after))
    run(world, controller, deployment, 600, lambda: old not in nodes(world) and settled(world))
    (new,) = nodes(world)
    assert objects.labels(nodes(world)[new])["node.kubernetes.io/instance-type"] == "m5.2xlarge"
    assert "instance type m5.xlarge is no longer admitted by provisioner default" in log.getvalue()


# --- consolidation -----------------------------------------------------------------------------------------


def test_consolidation_deletes_a_node_whose_pods_fit_on_another(tmp_path: Path, log: io.StringIO) -> None:
    world = World(policies(tmp_path, consolidating), types=["m5.xlarge"])
    controller, deployment = start(world, 6)  # two m5.xlarge (3 one-vCPU pods each)
    assert len(nodes(world)) == 2
    deployment.scale(3)
    results = run(world, controller, deployment, 300, lambda: len(nodes(world)) == 1 and settled(world))
    assert len(nodes(world)) == 1 and len(deployment.live()) == 3 and not world.unbound()
    text = log.getvalue()
    assert "validating consolidation in 15s" in text
    assert "deprovisioning via consolidation delete, terminating 1 machines" in text and "saving $" in text
    decided = [r for r in results if r.disrupted is not None and r.disrupted.decided]
    validating = [r for r in results if r.disrupted is not None and r.disrupted.held]
    assert validating and decided
    assert decided[0].started - validating[0].started >= 15, "acted only after the validation period"


def test_consolidation_replaces_a_node_by_a_strictly_cheaper_one(tmp_path: Path, log: io.StringIO) -> None:
    world = World(policies(tmp_path, lambda t: on_demand(consolidating(t))), types=["m5.large", "m5.2xlarge"])
    controller, deployment = start(world, 7)
    (big,) = nodes(world)
    assert objects.labels(nodes(world)[big])["node.kubernetes.io/instance-type"] == "m5.2xlarge"
    deployment.scale(1)
    watch = Watch(world)
    run_watched(world, controller, deployment, 300, watch, lambda: big not in nodes(world) and settled(world))
    (small,) = nodes(world)
    assert objects.labels(nodes(world)[small])["node.kubernetes.io/instance-type"] == "m5.large"
    assert watch.deleted_while[big] == [small]
    text = log.getvalue()
    assert "deprovisioning via consolidation replace, terminating 1 machines" in text
    assert "replacing with 1 on-demand machine(s) from types m5.large" in text
    assert "saving $0.2880/h" in text  # m5.2xlarge $0.384/h → m5.large $0.096/h


def test_a_spot_node_is_never_replaced_by_a_spot_node(tmp_path: Path, log: io.StringIO) -> None:
    world = World(policies(tmp_path, consolidating), types=["m5.large", "m5.2xlarge"])
    controller, deployment = start(world, 7)
    (big,) = nodes(world)
    deployment.scale(1)
    results = run(world, controller, deployment, 120)
    assert set(nodes(world)) == {big}
    blocked = [r.disrupted.blocked for r in results if r.disrupted is not None and r.disrupted.blocked]
    assert blocked and blocked[-1][big] == "consolidation: can't replace a spot node with a spot node"
    assert f"node {big} is not disrupted: consolidation: can't replace a spot node with a spot node" in log.getvalue()


def test_do_not_consolidate_and_do_not_evict_keep_a_node(tmp_path: Path) -> None:
    world = World(policies(tmp_path, consolidating), types=["m5.xlarge"])
    controller, deployment = start(world, 6)
    first, second = sorted(nodes(world))
    on = {n: sorted(objects.name(p) for p in deployment.live() if p["spec"]["nodeName"] == n) for n in (first, second)}
    for name in on[first][1:] + on[second][1:]:  # one pod left on each: both fit on either node
        world.cluster.delete(objects.POD, name, "default")
    deployment.count = 2
    world.cluster.patch(objects.NODE, first, {"metadata": {"annotations": {wk.DO_NOT_CONSOLIDATE: "true"}}})
    world.cluster.patch(objects.POD, on[second][0], {"metadata": {"annotations": {
        "karpenter.sh/do-not-evict": "true"}}}, "default")
    results = run(world, controller, deployment, 120)
    assert set(nodes(world)) == {first, second}, "neither node may go"
    blocked = next(r.disrupted.blocked for r in reversed(results) if r.disrupted and r.disrupted.blocked)
    assert "karpenter.sh/do-not-evict" in blocked[second]


def test_a_replacement_that_never_initializes_abandons_the_command(tmp_path: Path, log: io.StringIO) -> None:
    world = World(policies(tmp_path, lambda t: on_demand(consolidating(t))), types=["m5.large", "m5.2xlarge"])
    controller, deployment = start(world, 7)
    (big,) = nodes(world)
    deployment.scale(1)
    world.kubelet.ready_after = 10_000.0  # the replacement's kubelet never joins
    run(world, controller, deployment, 700, lambda: "abandoned consolidation replace" in log.getvalue())
    assert big in nodes(world) and not objects.is_deleting(nodes(world)[big]), "nothing deleted"
    assert "not initialized after 600s; nothing deleted" in log.getvalue()


def test_a_pod_that_can_never_schedule_does_not_freeze_disruption(tmp_path: Path, log: io.StringIO) -> None:
    """Issue #18 item 7: Karpenter disrupts while pods that failed to schedule stay pending; a 64-vCPU pod no type
    takes once kept every expiry, drift and consolidation waiting for as long as it existed."""
    before = policies(tmp_path, lambda t: t, "before")
    after = policies(tmp_path, on_demand, "after")
    world = World(before, types=["m5.xlarge"])
    controller, deployment = start(world, 3)
    (old,) = nodes(world)
    big = replicas("huge", 0, 1, containers=[container("64")])[0]  # fits no type: stays pending
    world.cluster.create(objects.POD, big)
    run(world, controller, deployment, 30)
    assert "could not schedule pod, no provisioner can launch a node for it" in log.getvalue()
    controller.constraints = DirectorySource(str(after))  # the fleet drifts: on-demand now
    run(world, controller, deployment, 600, lambda: old not in nodes(world) and settled_but(world, "default/huge-0"))
    assert old not in nodes(world), "the drifted node was replaced although the 64-vCPU pod is still pending"
    assert world.unbound() == ["default/huge-0"]
    assert "deprovisioning via drift replace" in log.getvalue()


@pytest.mark.slow
def test_pods_being_provisioned_hold_disruption_until_their_batch_is_done(tmp_path: Path) -> None:
    """The other side of item 7: a pod that provisioning has not tried yet (its batch window is open) holds every
    decision, so that a decision never races the launch it would cause."""
    before = policies(tmp_path, lambda t: t, "before")
    after = policies(tmp_path, on_demand, "after")
    world = World(before, types=["m5.xlarge"])
    controller, deployment = start(world, 3)
    (old,) = nodes(world)
    controller.constraints = DirectorySource(str(after))
    deployment.scale(4)  # one more replica: pending until its batch closes
    results = run(world, controller, deployment, 1)
    assert world.unbound(), "the new pod is still in its batch window"
    assert results[-1].disrupted is not None and results[-1].disrupted.decided is None
    assert not any(objects.is_deleting(n) for n in nodes(world).values())
    run(world, controller, deployment, 600, lambda: old not in nodes(world) and settled(world))
    assert old not in nodes(world) and not world.unbound()


def settled_but(world: World, pending: str) -> bool:
    """Every pod bound except `pending`, no node being deleted."""
    return world.unbound() == [pending] and not any(objects.is_deleting(n) for n in nodes(world).values())


def test_a_new_image_for_the_node_template_drifts_its_nodes(tmp_path: Path, log: io.StringIO) -> None:
    world = World(policies(tmp_path, lambda t: t), types=["m5.xlarge", "m5.2xlarge"])
    controller, deployment = start(world, 3)
    (old,) = nodes(world)
    first_image = world.inner.image_id
    assert objects.annotations(nodes(world)[old])[node_info.ANNOTATION_IMAGE] == first_image
    run(world, controller, deployment, 30)
    assert old in nodes(world), "no drift while the image stands"

    world.inner.image_id = "ami-0fedcba9876543210"  # a new AMI release: the node template resolves it now
    watch = Watch(world)
    run_watched(world, controller, deployment, 600, watch, lambda: old not in nodes(world) and settled(world))

    (new,) = nodes(world)
    assert objects.annotations(nodes(world)[new])[node_info.ANNOTATION_IMAGE] == "ami-0fedcba9876543210"
    assert watch.deleted_while[old] == [new], "replaced before it drained"
    assert f"its image {first_image} is no longer the node template's (ami-0fedcba9876543210)" in log.getvalue()


# --- hostile numbers -----------------------------------------------------------------------------------------


def test_the_largest_ttl_a_constraint_set_admits_never_expires_and_never_crashes(tmp_path: Path) -> None:
    """9,223,372,036 s (about 292 years) is the largest TTL Karpenter v0.31 can convert, and so the largest
    `compile` writes and a constraint set admits (more: the next test): the pass must neither crash nor expire."""
    compiled = policies(tmp_path, lambda t: t + "  ttlSecondsUntilExpired: 9223372036\n")
    world = World(compiled, types=["m5.xlarge"])
    controller, deployment = start(world, 2)
    (old,) = nodes(world)
    world.clock.advance(10 * 365 * 86400)
    results = run(world, controller, deployment, 30)
    assert old in nodes(world) and not any(r.errors for r in results)
    assert "expiration" not in "".join(str(r.disrupted) for r in results)


def test_a_compiled_ttl_beyond_int64_is_refused_at_compile_time(tmp_path: Path) -> None:
    source = tmp_path / "policies"
    shutil.copytree(POLICIES, source)
    path = source / "default.yaml"
    path.write_text(path.read_text() + "  ttlSecondsUntilExpired: " + "9" * 4000 + "\n")
    result = run_cli("compile", str(source), "-o", str(tmp_path / "out"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "ttlSecondsUntilExpired" in result.stdout and "must be at most 9223372036854775807" in result.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("ttl", [2**63, 2**63 - 1, 9223372037, -1, 1.5, "3600", True])
def test_a_constraint_set_with_a_ttl_no_api_admits_is_refused(compiled: Path, ttl: object) -> None:
    """A ConfigMap edited by hand (or by an attacker who recomputes the hash): the version is refused, not a
    pass that crashes on it."""
    (path,) = [p for p in sorted((compiled / "constraintsets").glob("*.json")) if "default" in p.name]
    data = json.loads(path.read_text())
    data["ttlSecondsUntilExpired"] = ttl
    with pytest.raises(ConstraintSetError, match="ttlSecondsUntilExpired"):
        ConstraintSet.from_json(data, verify=False)


def test_pod_disruption_cost_stays_within_bounds_whatever_the_pod_says() -> None:
    def pod(cost: str | None = None, priority: object = None) -> dict[str, object]:
        annotations = {} if cost is None else {"controller.kubernetes.io/pod-deletion-cost": cost}
        return {"metadata": {"annotations": annotations}, "spec": {"priority": priority}}

    assert pod_disruption_cost(pod()) == 1.0
    for hostile in (pod("1e99999999"), pod("nan"), pod("-inf"), pod("9" * 4000), pod(priority=10**4000),
                    pod(priority=-(10**4000)), pod("not a number", priority="high")):
        cost = pod_disruption_cost(hostile)
        assert -10.0 <= cost <= 10.0, hostile
    assert pod_disruption_cost(pod(priority=2**31 - 1)) > pod_disruption_cost(pod(priority=0))
