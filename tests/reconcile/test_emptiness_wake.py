"""Emptiness is woken only by the changes that may alter a node's verdict (`disruption.emptiness.touched`): never
missing one that empties or fills a node of ours, and not woken by a bound pod replaced on a node that stays full
(what churn sends most)."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given
from profiles import deterministic

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.reconcile.disruption.emptiness import Emptiness, touched
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.feed import WatchFeed
from karpenter_policy.reconcile.state.records import NodeRecord

from .support import container, pod
from .test_state import NODES, OPERATIONS, run
from .test_state import node as plain_node


def node(name: str, zone: str = "us-east-1a", finalizer: bool = False) -> dict[str, Any]:
    """A node of ours (it carries the constraint-set hash annotation)."""
    found = plain_node(name, zone, finalizer)
    found["metadata"]["annotations"] = {node_info.ANNOTATION_HASH: "1"}
    return found


def ours(cluster: MemoryCluster, operation: tuple[Any, ...]) -> None:
    if operation[0] == "create-node":
        with contextlib.suppress(ClusterError):  # already there: refused, as an API server would
            cluster.create(objects.NODE, node(*operation[1:]))
        return
    run(cluster, operation)


@deterministic(150)
@given(OPERATIONS)
def test_every_change_that_empties_or_fills_a_node_of_ours_wakes_emptiness_for_that_node(
    operations: list[tuple[Any, ...]],
) -> None:
    cluster = MemoryCluster()
    state = ClusterState()
    counts = {name: 0 for name in NODES}
    missed: list[tuple[str, Change]] = []

    def check(change: Change) -> None:
        woken = set(touched(change, state.workload_pods_on))
        for name in NODES:
            now = state.workload_pods_on(name)
            if (counts[name] == 0) != (now == 0) and name not in woken:
                missed.append((name, change))
            counts[name] = now
        if change.kind == "node":
            before, after = change.before, change.after
            read_changed = not (isinstance(before, NodeRecord) and isinstance(after, NodeRecord)
                                and before.same_as_read(after))
            record = after or before
            if read_changed and isinstance(record, NodeRecord) and record.ours and record.name not in woken:
                missed.append((record.name, change))

    state.subscribe(check)
    feed = WatchFeed(cluster, state)
    for operation in operations:
        if operation[0] == "sync":
            feed.sync()
        else:
            ours(cluster, operation)
    feed.sync()
    assert missed == []


def _emptiness_on_full_node() -> tuple[MemoryCluster, WatchFeed, Emptiness]:
    cluster = MemoryCluster()
    state = ClusterState()
    feed = WatchFeed(cluster, state)
    emptiness = Emptiness(cluster, state, lambda **_: {}, ttls=lambda: {"default": 30})
    cluster.create(objects.NODE, node("n1"))
    for index in range(3):
        cluster.create(objects.POD, pod(f"p{index}", containers=[container("100m", "64Mi")], nodeName="n1"))
    feed.sync()
    emptiness.wake.clear()
    return cluster, feed, emptiness


def test_a_bound_pod_replaced_on_a_full_node_does_not_wake_emptiness() -> None:
    cluster, feed, emptiness = _emptiness_on_full_node()
    cluster.create(objects.POD, pod("p0-r1", containers=[container("100m", "64Mi")], nodeName="n1"))
    cluster.delete(objects.POD, "p0", "default")
    feed.sync()
    assert not emptiness.wake.is_set()


def test_the_last_workload_pod_leaving_a_node_of_ours_wakes_emptiness_for_it() -> None:
    cluster, feed, emptiness = _emptiness_on_full_node()
    for index in range(3):
        cluster.delete(objects.POD, f"p{index}", "default")
    feed.sync()
    assert emptiness.wake.is_set()
    assert emptiness._dirty == {"n1"}
