"""Ports of `Describe("Machine/Expiration")`, pkg/controllers/deprovisioning/machine_expiration_test.go of
kubernetes-sigs/karpenter at v0.31.1 (see support.py). Karpenter's provisioner expires machines after 30 s and marks
them Expired; here the provisioner's `ttlSecondsUntilExpired` is an hour and an expired node is one created more
than an hour ago (creation + TTL, as Karpenter's `GetExpirationTime`)."""

from __future__ import annotations

import io
from typing import Any

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.testing import Scene

from . import scenarios
from .support import M5, MOST_EXPENSIVE, ONLY_LARGE, Policies, decided, deleting, gone, provisioner, run

HOUR = 3600
EXPIRED = HOUR + 60  # an age past the TTL
APP = {"app": "test"}


def expiring(policies: Policies, requirements: str = "") -> Scene:
    """Karpenter's BeforeEach: a provisioner whose nodes expire (an hour here), cpu limited to 100."""
    return Scene(policies(provisioner(ttl_until_expired=HOUR, cpu_limit=100, requirements=requirements)), types=M5)


def expired(scene: Scene, instance_type: str, first: bool = False, **options: Any) -> str:
    """A node past its TTL (`first`: ten minutes more than the others, so it is tried first)."""
    return scene.add_node("default", instance_type, age=EXPIRED + (600 if first else 0), **options)


def test_should_ignore_nodes_without_the_expired_status_condition(policies: Policies) -> None:
    """should ignore nodes without the expired status condition — machine_expiration_test.go:71. A node younger
    than its TTL has not expired."""
    scene = expiring(policies)
    node = scene.add_node("default", MOST_EXPENSIVE, age=HOUR - 600)
    controller = scene.controller()
    results = run(scene, controller, 60)
    assert list(scene.nodes()) == [node] and not deleting(scene) and not decided(results)


def test_should_continue_to_the_next_expired_node_if_the_first_cannot_reschedule_all_pods(policies: Policies) -> None:
    """should continue to the next expired node if the first cannot reschedule all pods —
    machine_expiration_test.go:85."""
    scenarios.continues_past_a_node_whose_pods_cannot_move(expiring(policies), expired, "expiration")


def test_should_ignore_nodes_with_the_expired_status_condition_set_to_false(policies: Policies) -> None:
    """should ignore nodes with the expired status condition set to false — machine_expiration_test.go:144. A
    provisioner without `ttlSecondsUntilExpired` never expires its nodes, however old."""
    scene = Scene(policies(provisioner()), types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE, age=10 * 86400)
    controller = scene.controller()
    results = run(scene, controller, 600)
    assert list(scene.nodes()) == [node] and not decided(results)


def test_can_delete_expired_nodes(policies: Policies) -> None:
    """can delete expired nodes — machine_expiration_test.go:159."""
    scenarios.deletes_an_empty_node(expiring(policies), expired, "expiration")


def test_should_deprovision_all_empty_expired_nodes_in_parallel(policies: Policies) -> None:
    """should deprovision all empty expired nodes in parallel — machine_expiration_test.go:178 (issue #18 item 6:
    one command for all of them, as drift does; they went one per decision, 10 s apart)."""
    scenarios.deletes_every_empty_node_in_one_command(expiring(policies), expired, "expiration")


def test_should_expire_one_non_empty_node_at_a_time_starting_with_most_expired(policies: Policies) -> None:
    """should expire one non-empty node at a time, starting with most expired — machine_expiration_test.go:219."""
    scene = expiring(policies)
    node = scene.add_node("default", MOST_EXPENSIVE, age=EXPIRED)
    node2 = scene.add_node("default", MOST_EXPENSIVE, age=EXPIRED + HOUR)  # expired an hour earlier
    scene.add_pod("a", node=node, cpu="30", labels=APP)
    scene.add_pod("b", node=node2, cpu="30", labels=APP)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, node2))
    (command,) = decided(results)
    assert f"terminating 1 machines {node2}/" in command
    assert node in scene.nodes() and not deleting(scene) and len(scene.nodes()) == 2


def test_can_replace_node_for_expiration(policies: Policies) -> None:
    """can replace node for expiration — machine_expiration_test.go:291."""
    scenarios.replaces_a_node(expiring(policies), expired, "expiration")


def test_should_uncordon_nodes_when_expiration_replacement_fails(policies: Policies, log: io.StringIO) -> None:
    """should uncordon nodes when expiration replacement fails — machine_expiration_test.go:341. The node is
    cordoned before its replacement launches; the launch fails: it is uncordoned and nothing is deleted."""
    scene = expiring(policies)
    node = expired(scene, MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node, labels=APP)
    controller = scene.controller()
    cordons: list[object] = []
    patch = scene.cluster.patch

    def recording(kind: str, name: str, body: dict[str, object], *args: object, **kwargs: object) -> object:
        if name == node and "spec" in body:
            cordons.append(body["spec"])
        return patch(kind, name, body, *args, **kwargs)  # type: ignore[arg-type]

    scene.cluster.patch = recording  # type: ignore[method-assign,assignment]
    scene.cloud.fail_next("create", CloudError("fake://cloud", "CreateFleet failed"))  # type: ignore[attr-defined]
    results = run(scene, controller, 1)
    assert cordons == [{"unschedulable": True}, {"unschedulable": False}]
    found = scene.node(node)
    assert found is not None and not found["spec"].get("unschedulable") and not deleting(scene)
    assert any(r.disrupted and r.disrupted.abandoned for r in results)
    assert "could not launch the replacement(s)" in log.getvalue()


def test_can_replace_node_for_expiration_with_multiple_nodes(policies: Policies) -> None:
    """can replace node for expiration with multiple nodes — machine_expiration_test.go:385. The provisioner now
    launches only m5.large."""
    scene = expiring(policies, requirements=ONLY_LARGE)
    scenarios.replaces_a_node_by_three(scene, expired(scene, "m5.2xlarge"), "expiration")
