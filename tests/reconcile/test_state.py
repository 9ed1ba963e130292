"""The incremental cluster state: whatever the cluster does, event by event, the state's indexes are what a fresh
look at the cluster would give — and a malformed object never costs the last good record."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.feed import WatchFeed, replace
from karpenter_policy.scheduling.vectors import ZERO, subtract

from .support import container, daemon_set, pod

NODES = ("n1", "n2", "n3")
PODS = tuple(f"p{i}" for i in range(8))


def node(name: str, zone: str = "us-east-1a", finalizer: bool = False) -> dict[str, Any]:
    labels = {"topology.kubernetes.io/zone": zone, "kubernetes.io/hostname": name,
              "karpenter.sh/provisioner-name": "default"}
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if finalizer:
        meta["finalizers"] = ["karpenter.sh/termination"]
    return {
        "metadata": meta,
        "spec": {"providerID": f"aws:///{zone}/i-{name}"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("create-pod"), st.sampled_from(PODS), st.sampled_from(("", *NODES)),
                  st.sampled_from(("100m", "1", "250m"))),
        st.tuples(st.just("bind"), st.sampled_from(PODS), st.sampled_from(NODES)),
        st.tuples(st.just("delete-pod"), st.sampled_from(PODS)),
        st.tuples(st.just("finish-pod"), st.sampled_from(PODS)),
        st.tuples(st.just("create-node"), st.sampled_from(NODES), st.sampled_from(("us-east-1a", "us-east-1b")),
                  st.booleans()),
        st.tuples(st.just("relabel-node"), st.sampled_from(NODES), st.sampled_from(("us-east-1a", "us-east-1c"))),
        st.tuples(st.just("delete-node"), st.sampled_from(NODES)),
        st.tuples(st.just("daemonset"), st.sampled_from(("agent", "logs")), st.booleans()),
        st.tuples(st.just("sync")),
    ),
    max_size=40,
)


def run(cluster: MemoryCluster, operation: tuple[Any, ...]) -> None:
    kind, *args = operation
    try:
        if kind == "create-pod":
            name, bound, cpu = args
            spec = {"nodeName": bound} if bound else {}
            cluster.create(objects.POD, pod(name, containers=[container(cpu, "256Mi")], **spec))
        elif kind == "bind":
            cluster.bind("default", args[0], args[1])
        elif kind == "delete-pod":
            cluster.delete(objects.POD, args[0], "default")
        elif kind == "finish-pod":
            cluster.patch(objects.POD, args[0], {"status": {"phase": "Succeeded"}}, "default", subresource="status")
        elif kind == "create-node":
            cluster.create(objects.NODE, node(args[0], args[1], args[2]))
        elif kind == "relabel-node":
            cluster.patch(objects.NODE, args[0], {"metadata": {"labels": {"topology.kubernetes.io/zone": args[1]}}})
        elif kind == "delete-node":
            cluster.delete(objects.NODE, args[0])
        elif kind == "daemonset":
            if args[1]:
                cluster.create(objects.DAEMON_SET, daemon_set(args[0], "kube-system", "50m", "64Mi"))
            else:
                cluster.delete(objects.DAEMON_SET, args[0], "kube-system")
    except ClusterError:
        pass  # already exists, not found, already bound: the cluster refused it, as an API server would


def view(state: ClusterState) -> dict[str, Any]:
    """Everything a controller can ask of the state, in comparable form."""
    existing = {
        n.name: (n.requested, n.daemon_remaining, tuple(sorted(map(str, n.host_ports))), n.initialized)
        for n in state.existing_nodes()
    }
    return {
        "pods": sorted(p.key for p in state.pods()),
        "pending": [p.key for p in state.pending()],
        "nodes": [(n.name, dict(n.labels), n.deleting) for n in state.nodes()],
        "on_node": {n: [p.key for p in state.pods_on(n)] for n in NODES},
        "workload_pods": {n: state.workload_pods_on(n) for n in NODES},
        "existing": existing,
        "running": sorted((r.pod.key, r.node_name, tuple(sorted(r.node_labels.items()))) for r in state.running),
        "zones": sorted(state.label_values("topology.kubernetes.io/zone")),
        "instances": {f"i-{n}": (r.name if (r := state.node_of_instance(f"i-{n}")) else None) for n in NODES},
        "daemons": [d.name for d in state.daemons()],
        "used": state.used(),
    }


def fresh(cluster: MemoryCluster) -> ClusterState:
    state = ClusterState()
    for kind in (objects.NODE, objects.POD, objects.DAEMON_SET, objects.NAMESPACE):
        replace(state, kind, cluster.list(kind).items)
    return state


@deterministic(150)
@given(OPERATIONS)
def test_the_state_followed_event_by_event_is_what_a_fresh_list_shows(operations: list[tuple[Any, ...]]) -> None:
    cluster = MemoryCluster()
    state = ClusterState()
    feed = WatchFeed(cluster, state)
    for operation in operations:
        if operation[0] == "sync":
            feed.sync()
            assert view(state) == view(fresh(cluster))
        else:
            run(cluster, operation)
    feed.sync()
    assert view(state) == view(fresh(cluster))


def test_a_malformed_object_is_counted_once_and_the_last_good_record_stays() -> None:
    state = ClusterState()
    good = node("n1")
    good["metadata"]["resourceVersion"] = "1"
    state.apply(objects.NODE, "ADDED", good)
    state.apply(objects.NODE, "MODIFIED", {"metadata": {"name": "n1"}, "status": "garbage"})
    state.apply(objects.NODE, "MODIFIED", {"metadata": {"name": "n1"}, "status": "garbage"})
    state.apply(objects.POD, "ADDED", {"metadata": "x"})
    state.apply(objects.POD, "ADDED", ["not", "an", "object"])
    record = state.node("n1")
    assert record is not None and record.allocatable == state.existing("n1").allocatable  # type: ignore[union-attr]
    assert record.obj is good, "the last good record stays"
    assert state.malformed[("nodes", "status is not an object")] == 2
    assert state.malformed[("pods", "metadata is not an object")] == 1
    assert state.malformed[("pods", "not an object but list")] == 1


def _with_uid(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


def test_a_deleted_pod_that_cannot_be_read_is_counted_and_its_record_stays() -> None:
    """A deletion reads only the pod's uid, checked as a record would be: the same objects are refused."""
    state = ClusterState()
    state.apply(objects.POD, "ADDED", _with_uid(pod("p1", nodeName="n1"), "u1"))
    for bad in ({"metadata": {"name": "p1", "namespace": "default"}},  # no uid
                {"metadata": {"name": "p1", "uid": "u1"}, "spec": {"nodeName": 3}}):
        state.apply(objects.POD, "DELETED", bad)
    assert [r.uid for r in state.pods()] == ["u1"]
    assert state.malformed[("pods", "metadata.uid is missing")] == 1
    assert state.malformed[("pods", "spec.nodeName is not a string")] == 1
    state.apply(objects.POD, "DELETED", _with_uid(pod("p1", nodeName="n1"), "u1"))
    assert state.pods() == [] and state.pods_on("n1") == []


def test_a_record_shares_its_objects_labels_and_annotations() -> None:
    """Records are kept as long as their pods and nodes: a copy of each map was a second pair of dicts per pod."""
    state = ClusterState()
    obj = _with_uid(pod("p1", nodeName="n1", labels={"app": "web"}), "u1")
    obj["metadata"]["annotations"] = {"a": "b"}
    bare = _with_uid(pod("p2"), "u2")
    bare["metadata"].pop("labels", None)
    state.apply(objects.POD, "ADDED", obj)
    state.apply(objects.POD, "ADDED", bare)
    state.apply(objects.NODE, "ADDED", node("n1"))
    shared, empty, on_node = state.pod("u1"), state.pod("u2"), state.node("n1")
    assert shared is not None and empty is not None and on_node is not None
    assert shared.labels is obj["metadata"]["labels"] and shared.annotations is obj["metadata"]["annotations"]
    assert on_node.labels is on_node.obj["metadata"]["labels"]
    assert dict(empty.labels) == {} and dict(empty.annotations) == {}


def test_listeners_see_a_pod_become_pending_and_leave_when_bound() -> None:
    cluster = MemoryCluster()
    state = ClusterState()
    seen: list[tuple[str, bool]] = []

    def listener(change: Change) -> None:
        if change.kind == "pod" and change.after is not None:
            seen.append((change.after.name, state.is_pending(change.after.uid)))

    state.subscribe(listener)
    feed = WatchFeed(cluster, state)
    cluster.create(objects.NODE, node("n1"))
    cluster.create(objects.POD, pod("web-0"))
    feed.sync()
    cluster.bind("default", "web-0", "n1")
    feed.sync()
    assert seen == [("web-0", True), ("web-0", False)]
    assert state.pending() == [] and [p.name for p in state.pods_on("n1")] == ["web-0"]


MARKS = st.lists(
    st.one_of(
        OPERATIONS.flatmap(lambda ops: st.just(("ops", ops))),
        st.tuples(st.just("mark"), st.sampled_from(NODES), st.booleans()),
    ),
    max_size=8,
)


def marked_view(state: ClusterState) -> dict[str, Any]:
    return {**view(state), "deleting": [n.name for n in state.deleting_nodes()], "counts": state.node_counts()}


@deterministic(100)
@given(MARKS)
def test_nodes_marked_for_deletion_are_what_a_fresh_state_marked_alike_shows(steps: list[tuple[Any, ...]]) -> None:
    """Karpenter's `MarkForDeletion` (`ClusterState.mark_for_deletion`, a disruption command's nodes from its start)
    and `UnmarkForDeletion`, among the cluster's events: a marked node is one being deleted — no scheduler view, not
    in its provisioner's use nor node count, among `deleting_nodes()` — and the incremental indexes are what a fresh
    state given the same marks shows; a mark goes with its node."""
    cluster = MemoryCluster()
    state = ClusterState()
    feed = WatchFeed(cluster, state)
    for step in steps:
        if step[0] == "ops":
            for operation in step[1]:
                if operation[0] != "sync":
                    run(cluster, operation)
        else:
            feed.sync()
            state.mark_for_deletion([step[1]], marked=step[2])
        feed.sync()
        marks = [n for n in NODES if state.marked_for_deletion(n)]
        assert set(marks) <= set(state.node_names())
        expected = fresh(cluster)
        expected.mark_for_deletion(marks)
        assert marked_view(state) == marked_view(expected)
        assert all(state.existing(n) is None for n in marks)
        assert set(marks) <= {n.name for n in state.deleting_nodes()}
        unmarked = fresh(cluster)  # the use without the marks, less the marked nodes' capacity
        left = unmarked.used().get("default", ZERO)
        for name in marks:
            record = unmarked.node(name)
            if record is not None and not record.deleting:
                left = subtract(left, record.capacity)
        assert state.used().get("default", ZERO) == left
        assert state.node_counts().get("default", 0) == unmarked.node_counts().get("default", 0) - sum(
            1 for n in marks if (r := unmarked.node(n)) is not None and not r.deleting)
