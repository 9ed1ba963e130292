"""A burst that spans several batch windows (`provisioning/ahead.py`): the plan made ahead for the second window is
used at its close although the first window's pods were bound onto their launch meanwhile, its Node registered,
its kubelet joined and the launch settled — and it is made again whenever something that could make it wrong
happened: the node it places pods on deleted, a node that could take the pods appeared, a DaemonSet created, a
pod with required anti-affinity bound, a pending pod deleted. A node informer that lags the pod informer
(the Node of a launch seen after its pods' bindings) never makes the next batch overfill that node."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.kube import objects
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.feed import WatchFeed

from .conftest import MakeHarness
from .support import Harness, container, cpu_of, create_all, daemon_set, inflate, millicores, pod, replicas


def plans_ahead(h: Harness) -> tuple[float, float]:
    """The plans made ahead so far: (used at their window's close, made again)."""
    registry = h.controller.metrics.registry
    return tuple(  # type: ignore[return-value]
        registry.get_sample_value("karpenter_policy_plans_ahead_total", {"used": used}) or 0.0
        for used in ("true", "false")
    )


def hold_nodes(h: Harness) -> Callable[[], None]:
    """From now on the state sees no Node event (a node informer lagging the pod informer); the function returned
    lets them through again."""
    feed = h.controller.feed
    assert isinstance(feed, WatchFeed)
    kinds = feed.kinds
    feed.kinds = tuple(kind for kind in kinds if kind != objects.NODE)

    def release() -> None:
        feed.kinds = kinds

    return release


def close_window(h: Harness) -> ReconcileResult:
    """Passes at each one's `due` until a batch is scheduled (no kubelet runs: the launch stays in flight)."""
    for _ in range(20):
        result = h.step()
        if result.scheduled:
            return result
        assert result.due is not None
        h.clock.now = max(h.clock.now, result.due)
    raise AssertionError("no batch closed")


def second_window(h: Harness) -> tuple[str, tuple[float, float]]:
    """The first window launches a node for three 1-vCPU pods (its Node not seen yet); the second window's pods —
    three more and one of 250m, which the launch in flight has room for — arrive and are planned ahead. The node of
    the first launch, and the plans-ahead counts before the second window's close."""
    create_all(h.cluster, objects.POD, inflate(0, 3))
    release = hold_nodes(h)
    (first,) = close_window(h).launched
    create_all(h.cluster, objects.POD, [*inflate(3, 3), *replicas("small", 0, 1, containers=[container("250m")])])
    before = plans_ahead(h)
    h.step()  # the first window's pods are bound (their Node not seen yet); the second window opens
    h.clock.advance(0.25)
    ahead = h.step()  # planned ahead: the small pod onto the launch in flight
    assert not ahead.scheduled and plans_ahead(h) == before
    release()
    return first.node, before


def settle_first_launch(h: Harness) -> None:
    """What the cluster sends about the first launch while the second window is open: its Node registered, its
    kubelet joined (Ready, startup taints gone), its pods running, the launch settled, the node initialized."""
    h.kubelet.sync()
    h.step()
    h.kubelet.sync()
    h.step()


def close_second(h: Harness) -> ReconcileResult:
    h.clock.advance(0.75)  # a second after the window opened
    closed = h.step()
    assert closed.scheduled
    h.kubelet.sync()
    h.step()
    return closed


def used_since(h: Harness, before: tuple[float, float]) -> tuple[float, float]:
    now = plans_ahead(h)
    return now[0] - before[0], now[1] - before[1]


def test_the_plan_made_ahead_is_used_though_the_first_windows_launch_registered_joined_and_settled(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    settle_first_launch(h)
    assert h.controller.inflight.get(first) is None, "the first launch settled while the second window was open"
    closed = close_second(h)
    assert used_since(h, before) == (1.0, 0.0)
    assert len(closed.launched) == 1 and h.unbound() == []
    assert objects.name(h.node_of("small-0")) == first, "the pod the plan put on the first launch is bound there"


def test_pods_bound_to_a_launch_whose_node_is_not_seen_yet_count_on_it(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    release = hold_nodes(h)
    (first,) = close_window(h).launched
    create_all(h.cluster, objects.POD, inflate(3, 3))
    closed = close_window(h)  # the state shows the first three pods bound to a node it does not show yet
    release()
    h.kubelet.sync()
    h.step()
    assert len(closed.launched) == 1 and h.unbound() == []
    node = h.node(first.node)
    on_node = [p for p in h.pods() if p["spec"].get("nodeName") == first.node]
    requested = sum(millicores(c["resources"]["requests"]["cpu"]) for p in on_node for c in p["spec"]["containers"])
    assert requested <= cpu_of(node) * 1000, f"{first.node} overfilled: {requested}m on {cpu_of(node)} vCPU"


def test_the_plan_made_ahead_is_made_again_when_the_node_it_uses_is_deleted(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    settle_first_launch(h)
    h.cluster.delete(objects.NODE, first)
    h.step()
    h.clock.advance(1.0)  # a node with pods being deleted extends the window (its pods are placed again)
    close_second(h)
    assert used_since(h, before) == (0.0, 1.0)
    small = h.cluster.get(objects.POD, "small-0", namespace="default")
    assert small["spec"].get("nodeName") != first, "not bound to the node being deleted"


def test_the_plan_made_ahead_is_made_again_when_a_node_appeared(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    settle_first_launch(h)
    other = copy.deepcopy(h.node(first))  # a node of someone else's (no provisioner's), empty
    labels = {k: v for k, v in other["metadata"]["labels"].items() if not k.startswith("karpenter.")}
    other["metadata"] = {"name": "ip-10-0-99-99.ec2.internal",
                         "labels": {**labels, "kubernetes.io/hostname": "ip-10-0-99-99.ec2.internal"}}
    other["spec"].pop("providerID", None)
    h.cluster.create(objects.NODE, other)
    h.step()
    close_second(h)
    assert used_since(h, before) == (0.0, 1.0)


def test_the_plan_made_ahead_is_made_again_when_a_daemon_set_was_created(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    settle_first_launch(h)
    h.cluster.create(objects.DAEMON_SET, daemon_set("agent", "default", "100m", "64Mi"))
    h.step()
    close_second(h)
    assert used_since(h, before) == (0.0, 1.0)


def test_the_plan_made_ahead_is_made_again_when_a_pod_with_anti_affinity_was_bound(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    settle_first_launch(h)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "small"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    create_all(h.cluster, objects.POD, [pod("loner", containers=[container("10m")], nodeName=first, affinity=anti)])
    h.step()
    close_second(h)
    assert used_since(h, before) == (0.0, 1.0)
    assert objects.name(h.node_of("small-0")) != first, "kept away from the node of the pod that repels it"


def test_the_plan_made_ahead_is_made_again_when_a_pending_pod_was_deleted(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    settle_first_launch(h)
    h.cluster.delete(objects.POD, "inflate-3", namespace="default")
    h.step()
    close_second(h)
    assert used_since(h, before) == (0.0, 1.0)


# --- a property: whatever happens between the plan and the close, no node is overfilled and no pod is left -----

EVENTS = st.lists(st.sampled_from(["kubelet", "step", "heartbeat", "churn", "unchurn"]), max_size=6)


def _requested_cpu(h: Harness, node: str) -> int:
    return sum(millicores(c["resources"]["requests"]["cpu"]) for p in h.pods() if p["spec"].get("nodeName") == node
               for c in p["spec"]["containers"] if (c.get("resources") or {}).get("requests", {}).get("cpu"))


def _happen(h: Harness, event: str, first: str, churned: list[str]) -> None:
    if event == "kubelet":
        h.kubelet.sync()
    elif event == "step":
        h.step()
    elif event == "heartbeat" and h.cluster.list(objects.NODE).items:
        node = h.cluster.list(objects.NODE).items[0]
        conditions = [{**c, "lastHeartbeatTime": f"2030-01-01T00:00:{len(churned):02d}Z"}
                      for c in node["status"].get("conditions", [])]
        h.cluster.patch(objects.NODE, objects.name(node), {"status": {"conditions": conditions}})
    elif event == "churn":  # a pod kube-scheduler bound to the first launch, if the cluster shows it room
        known = [n for n in h.nodes() if objects.name(n) == first]
        if known and _requested_cpu(h, first) + 200 <= cpu_of(known[0]) * 1000 - 100:
            name = f"churn-{len(churned)}"
            create_all(h.cluster, objects.POD, [pod(name, containers=[container("200m")], nodeName=first)])
            churned.append(name)
    elif event == "unchurn" and churned:
        h.cluster.delete(objects.POD, churned.pop(0), namespace="default")


@pytest.mark.slow
@given(EVENTS)
@deterministic(12, HealthCheck.function_scoped_fixture)  # a new harness (cluster, controller) every example
def test_whatever_comes_between_the_plan_and_the_close_no_node_is_overfilled(
    make_harness: MakeHarness, events: list[str]
) -> None:
    h = make_harness(batch_idle=1.0)
    first, before = second_window(h)
    churned: list[str] = []
    for event in events:
        _happen(h, event, first, churned)
    close_second(h)
    for _ in range(10):  # pods held for a node whose kubelet had not joined are bound once it has
        result = h.step()
        h.kubelet.sync()
        if not h.unbound():
            break
        h.clock.now = max(h.clock.now + 0.1, result.due or 0.0)
    assert h.unbound() == []
    for node in h.nodes():
        assert _requested_cpu(h, objects.name(node)) <= cpu_of(node) * 1000, f"{objects.name(node)} overfilled"
    if set(events) <= {"kubelet", "step", "heartbeat"}:
        used, again = used_since(h, before)
        assert used >= 1 and again == 0, "nothing but the first launch settling: every plan made ahead is used"
