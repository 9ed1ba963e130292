"""The Cluster behaviours the reconciler relies on, each checked on MemoryCluster and on KubeCluster over
HTTP against the API emulator (the ``backend`` fixture)."""

from __future__ import annotations

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    TooManyRequests,
)
from karpenter_policy.kube.objects import CONFIG_MAP, EVENT, NODE, POD, POD_DISRUPTION_BUDGET

from .conftest import Backend
from .support import names, node, pdb, pod, running_pods, take

# -- create, get, list ---------------------------------------------------------------------------------


def test_created_objects_are_listed_sorted_with_kind_and_server_metadata(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("b", "team-b"))
    created = cluster.create(POD, pod("a", "team-b"))
    cluster.create(POD, pod("z", "team-a"))

    listing = cluster.list(POD)

    assert [(objects.namespace(p), objects.name(p)) for p in listing.items] == [
        ("team-a", "z"), ("team-b", "a"), ("team-b", "b")
    ]
    assert all(item["kind"] == "Pod" and item["apiVersion"] == "v1" for item in listing.items)
    assert objects.uid(created) and objects.creation_timestamp(created)
    assert int(listing.resource_version) >= int(objects.resource_version(created))
    assert names(cluster.list(POD, namespace="team-b").items) == ["a", "b"]
    assert cluster.get(POD, "a", "team-b") == created
    assert cluster.get(POD, "a", "team-a") is None


def test_cluster_scoped_objects_need_no_namespace(backend: Backend) -> None:
    backend.cluster.create(NODE, node("node-1", {"zone": "a"}))

    fetched = backend.cluster.get(NODE, "node-1")

    assert fetched is not None and objects.namespace(fetched) is None and fetched["kind"] == "Node"
    assert names(backend.cluster.list(NODE).items) == ["node-1"]


def test_creating_a_taken_name_raises_already_exists(backend: Backend) -> None:
    backend.cluster.create(CONFIG_MAP, {"metadata": {"name": "policy"}, "data": {"a": "1"}})

    with pytest.raises(AlreadyExists):
        backend.cluster.create(CONFIG_MAP, {"metadata": {"name": "policy"}, "data": {"a": "2"}})
    assert (backend.cluster.get(CONFIG_MAP, "policy") or {})["data"] == {"a": "1"}


def test_generate_name_gives_a_fresh_name_with_the_prefix(backend: Backend) -> None:
    first = backend.cluster.create(NODE, {"metadata": {"generateName": "default-"}})
    second = backend.cluster.create(NODE, {"metadata": {"generateName": "default-"}})

    assert objects.name(first).startswith("default-") and objects.name(second).startswith("default-")
    assert objects.name(first) != objects.name(second)


def test_writes_to_missing_objects_raise_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.cluster.patch(POD, "ghost", {"metadata": {"labels": {"a": "b"}}}, "default")
    with pytest.raises(NotFound):
        backend.cluster.delete(POD, "ghost", "default")
    with pytest.raises(NotFound):
        backend.cluster.update(POD, pod("ghost"))


# -- update and patch: optimistic concurrency -------------------------------------------------------------


def test_update_with_a_stale_resource_version_conflicts(backend: Backend) -> None:
    cluster = backend.cluster
    original = cluster.create(CONFIG_MAP, {"metadata": {"name": "cm"}, "data": {"v": "1"}})
    first = cluster.update(CONFIG_MAP, {**original, "data": {"v": "2"}})

    with pytest.raises(Conflict):
        cluster.update(CONFIG_MAP, {**original, "data": {"v": "stale"}})

    assert int(objects.resource_version(first)) > int(objects.resource_version(original))
    assert (cluster.get(CONFIG_MAP, "cm") or {})["data"] == {"v": "2"}
    assert objects.uid(first) == objects.uid(original)


def test_patch_carrying_a_stale_resource_version_conflicts(backend: Backend) -> None:
    cluster = backend.cluster
    original = cluster.create(CONFIG_MAP, {"metadata": {"name": "cm"}, "data": {"v": "1"}})
    cluster.patch(CONFIG_MAP, "cm", {"data": {"v": "2"}}, "default")

    with pytest.raises(Conflict):
        stale = {"metadata": {"resourceVersion": objects.resource_version(original)}, "data": {"v": "3"}}
        cluster.patch(CONFIG_MAP, "cm", stale, "default")
    assert (cluster.get(CONFIG_MAP, "cm") or {})["data"] == {"v": "2"}


def test_merge_json_and_strategic_patches(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("web", labels={"app": "web", "tier": "front"}, finalizers=["a/x"]))

    merged = cluster.patch(POD, "web", {"metadata": {"labels": {"tier": None, "zone": "a"}}}, "default")
    strategic = cluster.patch(
        POD, "web",
        {"metadata": {"finalizers": ["b/y"]}, "spec": {"containers": [{"name": "app", "image": "app:2"}]}},
        "default", patch_type="strategic",
    )
    json_patched = cluster.patch(
        POD, "web", [{"op": "remove", "path": "/metadata/finalizers/0"}], "default", patch_type="json"
    )

    assert objects.labels(merged) == {"app": "web", "zone": "a"}
    assert objects.finalizers(strategic) == ["a/x", "b/y"]  # strategic merge adds to finalizers
    assert strategic["spec"]["containers"] == [{"name": "app", "image": "app:2"}]  # merged by name
    assert objects.finalizers(json_patched) == ["b/y"]


def test_a_failed_json_patch_test_changes_nothing(backend: Backend) -> None:
    backend.cluster.create(CONFIG_MAP, {"metadata": {"name": "cm"}, "data": {"v": "1"}})

    with pytest.raises(Invalid):
        backend.cluster.patch(
            CONFIG_MAP, "cm",
            [{"op": "test", "path": "/data/v", "value": "0"}, {"op": "replace", "path": "/data/v", "value": "2"}],
            "default", patch_type="json",
        )
    assert (backend.cluster.get(CONFIG_MAP, "cm") or {})["data"] == {"v": "1"}


def test_pod_status_is_written_only_through_the_status_subresource(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("web", phase="Pending"))

    through_object = cluster.patch(POD, "web", {"status": {"phase": "Running"}, "metadata": {"labels": {"a": "b"}}})
    through_status = cluster.patch(POD, "web", {"status": {"phase": "Running"}}, subresource="status")

    assert through_object["status"]["phase"] == "Pending" and objects.labels(through_object) == {"a": "b"}
    assert through_status["status"]["phase"] == "Running"


# -- delete, finalizers --------------------------------------------------------------------------------


def test_delete_without_finalizers_removes_the_object(backend: Backend) -> None:
    backend.cluster.create(POD, pod("web"))

    backend.cluster.delete(POD, "web", "default")

    assert backend.cluster.get(POD, "web", "default") is None
    with pytest.raises(NotFound):
        backend.cluster.delete(POD, "web", "default")


def test_finalizers_hold_a_deleted_object_until_the_last_is_removed(backend: Backend) -> None:
    cluster = backend.cluster
    created = cluster.create(NODE, {**node("node-1"), "metadata": {"name": "node-1", "finalizers": ["k/a", "k/b"]}})
    stream = cluster.watch(NODE, objects.resource_version(created), timeout_seconds=10)

    cluster.delete(NODE, "node-1")
    deleting = cluster.get(NODE, "node-1")
    cluster.delete(NODE, "node-1")  # a second delete changes nothing
    after_one = cluster.patch(NODE, "node-1", {"metadata": {"finalizers": ["k/b"]}})
    cluster.patch(NODE, "node-1", {"metadata": {"finalizers": None}})

    assert deleting is not None and objects.is_deleting(deleting)
    assert objects.is_deleting(after_one) and objects.finalizers(after_one) == ["k/b"]
    assert cluster.get(NODE, "node-1") is None
    events = take(stream, 3)
    stream.close()
    assert [e.type for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert objects.is_deleting(events[0].object)


def test_deletion_timestamp_cannot_be_set_or_cleared_by_a_write(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(CONFIG_MAP, {"metadata": {"name": "cm", "finalizers": ["k/a"]}})
    cluster.delete(CONFIG_MAP, "cm", "default")

    kept = cluster.patch(CONFIG_MAP, "cm", {"metadata": {"deletionTimestamp": None, "labels": {"x": "y"}}})

    assert objects.is_deleting(kept) and objects.labels(kept) == {"x": "y"}


# -- watch ---------------------------------------------------------------------------------------------


def test_watch_delivers_changes_in_order(backend: Backend) -> None:
    cluster = backend.cluster
    start = cluster.list(POD).resource_version
    stream = cluster.watch(POD, start, timeout_seconds=10)

    cluster.create(POD, pod("a"))
    cluster.patch(POD, "a", {"metadata": {"labels": {"v": "2"}}}, "default")
    cluster.create(POD, pod("b"))
    cluster.delete(POD, "a", "default")
    events = take(stream, 4)
    stream.close()

    assert [(e.type, objects.name(e.object)) for e in events] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")
    ]
    versions = [int(e.resource_version) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert all(e.object["kind"] == "Pod" for e in events)


def test_watch_from_no_version_starts_with_the_existing_objects(backend: Backend) -> None:
    backend.cluster.create(POD, pod("b"))
    backend.cluster.create(POD, pod("a"))

    with backend.cluster.watch(POD, "", timeout_seconds=10) as stream:
        events = take(stream, 2)

    assert sorted((e.type, objects.name(e.object)) for e in events) == [("ADDED", "a"), ("ADDED", "b")]


def test_a_watch_restarted_from_its_last_version_misses_nothing(backend: Backend) -> None:
    cluster = backend.cluster
    start = cluster.list(POD).resource_version
    cluster.create(POD, pod("a"))
    first = list(cluster.watch(POD, start, timeout_seconds=1))  # ends when the server's timeout does
    last_seen = first[-1].resource_version

    cluster.create(POD, pod("b"))  # while nobody watches
    cluster.delete(POD, "a", "default")
    with cluster.watch(POD, last_seen, timeout_seconds=10) as stream:
        resumed = take(stream, 2)

    assert [(e.type, objects.name(e.object)) for e in first] == [("ADDED", "a")]
    assert [(e.type, objects.name(e.object)) for e in resumed] == [("ADDED", "b"), ("DELETED", "a")]


def test_a_watch_ends_with_a_bookmark_of_the_latest_version_when_asked(backend: Backend) -> None:
    cluster = backend.cluster
    start = cluster.list(POD).resource_version
    node_version = objects.resource_version(cluster.create(NODE, node("node-1")))  # another kind moves the version

    events = list(cluster.watch(POD, start, timeout_seconds=1, bookmarks=True))
    quiet = list(cluster.watch(POD, start, timeout_seconds=1))

    assert [e.type for e in events] == ["BOOKMARK"]
    assert int(events[0].resource_version) >= int(node_version)
    assert quiet == []


def test_a_watch_from_a_compacted_version_raises_gone_and_a_relist_recovers(backend: Backend) -> None:
    cluster = backend.cluster
    old = cluster.list(POD).resource_version
    cluster.create(POD, pod("a"))
    cluster.create(POD, pod("b"))
    backend.compact()

    with pytest.raises(Gone):
        list(cluster.watch(POD, old, timeout_seconds=5))

    relisted = cluster.list(POD)
    with cluster.watch(POD, relisted.resource_version, timeout_seconds=10) as stream:
        cluster.create(POD, pod("c"))
        events = take(stream, 1)
    assert names(relisted.items) == ["a", "b"]
    assert [(e.type, objects.name(e.object)) for e in events] == [("ADDED", "c")]


def test_a_watch_with_a_selector_sees_objects_enter_and_leave_it(backend: Backend) -> None:
    cluster = backend.cluster
    start = cluster.list(POD).resource_version
    stream = cluster.watch(POD, start, label_selector="app=web", timeout_seconds=10)

    cluster.create(POD, pod("other", labels={"app": "db"}))
    cluster.create(POD, pod("web", labels={"app": "web"}))
    cluster.patch(POD, "other", {"metadata": {"labels": {"app": "web"}}}, "default")
    cluster.patch(POD, "web", {"metadata": {"labels": {"app": "cache"}}}, "default")
    events = take(stream, 3)
    stream.close()

    assert [(e.type, objects.name(e.object)) for e in events] == [
        ("ADDED", "web"), ("ADDED", "other"), ("DELETED", "web")
    ]


def test_watches_of_a_namespace_see_only_it(backend: Backend) -> None:
    cluster = backend.cluster
    stream = cluster.watch(POD, cluster.list(POD).resource_version, namespace="team-b", timeout_seconds=10)

    cluster.create(POD, pod("a", "team-a"))
    cluster.create(POD, pod("b", "team-b"))
    events = take(stream, 1)
    stream.close()

    assert [(objects.namespace(e.object), objects.name(e.object)) for e in events] == [("team-b", "b")]


# -- selectors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app==web,tier!=front", ["web-2"]),
        ("app in (web, db)", ["db", "web-1", "web-2"]),
        ("app notin (web)", ["bare", "db"]),
        ("tier", ["web-1"]),
        ("!tier,app", ["db", "web-2"]),
    ],
)
def test_label_selectors(backend: Backend, selector: str, expected: list[str]) -> None:
    for name, labels in [("web-1", {"app": "web", "tier": "front"}), ("web-2", {"app": "web"}),
                         ("db", {"app": "db"}), ("bare", {})]:
        backend.cluster.create(POD, pod(name, labels=labels))

    assert names(backend.cluster.list(POD, label_selector=selector).items) == expected


def test_field_selectors_find_unbound_pods_and_pods_of_a_node(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("pending"))
    cluster.create(POD, pod("on-1", node="node-1", phase="Running"))
    cluster.create(POD, pod("on-2", node="node-2", phase="Succeeded"))

    assert names(cluster.list(POD, field_selector="spec.nodeName=").items) == ["pending"]
    assert names(cluster.list(POD, field_selector="spec.nodeName=node-1").items) == ["on-1"]
    assert names(cluster.list(POD, field_selector="status.phase!=Succeeded,spec.nodeName!=").items) == ["on-1"]
    assert names(cluster.list(POD, field_selector="metadata.name=on-2").items) == ["on-2"]


def test_an_unsupported_field_selector_is_a_bad_request(backend: Backend) -> None:
    with pytest.raises(BadRequest, match="spec.priority"):
        backend.cluster.list(POD, field_selector="spec.priority=1")
    with pytest.raises(BadRequest):
        backend.cluster.watch(POD, "", label_selector="app in web")


# -- binding and eviction -------------------------------------------------------------------------------


def test_bind_assigns_the_node_once(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("web"))

    cluster.bind("default", "web", "node-1")
    with pytest.raises(Conflict):
        cluster.bind("default", "web", "node-2")

    bound = cluster.get(POD, "web", "default") or {}
    assert bound["spec"]["nodeName"] == "node-1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][-1].items()
    with pytest.raises(NotFound):
        cluster.bind("default", "ghost", "node-1")


def test_evict_deletes_a_pod_no_budget_covers(backend: Backend) -> None:
    backend.cluster.create(POD, pod("web", labels={"app": "web"}, node="node-1", phase="Running", ready=True))

    backend.cluster.evict("default", "web")

    assert backend.cluster.get(POD, "web", "default") is None


def test_a_disruption_budget_blocks_the_eviction_that_would_break_it(backend: Backend) -> None:
    cluster = backend.cluster
    for obj in running_pods(3, "web"):
        cluster.create(POD, obj)
    cluster.create(POD_DISRUPTION_BUDGET, pdb("web", "web", minAvailable=2))

    cluster.evict("default", "web-0")  # 3 healthy, 2 needed: one may go
    with pytest.raises(TooManyRequests):
        cluster.evict("default", "web-1")  # 2 healthy, 2 needed

    assert names(cluster.list(POD).items) == ["web-1", "web-2"]


def test_a_percentage_max_unavailable_rounds_up(backend: Backend) -> None:
    cluster = backend.cluster
    for obj in running_pods(4, "web"):
        cluster.create(POD, obj)
    # 25% of 4 = 1 may be unavailable; one pod is already unready, so none more may go.
    cluster.patch(POD, "web-3", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                  subresource="status")
    cluster.create(POD_DISRUPTION_BUDGET, pdb("web", "web", maxUnavailable="25%"))

    with pytest.raises(TooManyRequests):
        cluster.evict("default", "web-0")
    cluster.evict("default", "web-3")  # the unready pod itself: the healthy budget is still met

    assert names(cluster.list(POD).items) == ["web-0", "web-1", "web-2"]


def test_pending_pods_are_evicted_whatever_the_budget(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("web-0", labels={"app": "web"}, phase="Pending"))
    cluster.create(POD_DISRUPTION_BUDGET, pdb("web", "web", minAvailable=5))

    cluster.evict("default", "web-0")

    assert cluster.get(POD, "web-0", "default") is None


def test_evicting_a_pod_with_finalizers_marks_it_deleting(backend: Backend) -> None:
    backend.cluster.create(POD, pod("web", phase="Running", ready=True, finalizers=["k/hold"]))

    backend.cluster.evict("default", "web")

    assert objects.is_deleting(backend.cluster.get(POD, "web", "default") or {})


# -- events --------------------------------------------------------------------------------------------


def test_repeated_events_are_counted_not_duplicated(backend: Backend) -> None:
    cluster = backend.cluster
    web = cluster.create(POD, pod("web"))

    cluster.record_event(web, "Nominated", "pod should schedule on node-1")
    again = cluster.record_event(web, "Nominated", "pod should schedule on node-1")
    other = cluster.record_event(web, "FailedScheduling", "no instance type fits", type="Warning")

    events = cluster.list(EVENT, namespace="default").items
    assert len(events) == 2
    assert again["count"] == 2 and other["count"] == 1 and other["type"] == "Warning"
    assert again["involvedObject"] == {
        "apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": "default",
        "uid": objects.uid(web), "resourceVersion": objects.resource_version(web),
    }
    assert again["source"] == {"component": "karpenter-policy"}


def test_events_about_nodes_go_to_the_default_namespace(backend: Backend) -> None:
    node_1 = backend.cluster.create(NODE, node("node-1"))

    event = backend.cluster.record_event(node_1, "Launched", "launched c5.large in us-east-1a")

    assert objects.namespace(event) == "default"
    assert event["involvedObject"]["kind"] == "Node"


def test_trimming_the_history_keeps_the_last_changes_replayable_and_forgets_the_rest() -> None:
    """`MemoryCluster.trim_history`: the memory benchmark trims at each turnover boundary so every snapshot holds
    as many changes; a watch from a kept version misses nothing, one from before gets Gone as after compaction."""
    from karpenter_policy.fakes.cluster import MemoryCluster

    cluster = MemoryCluster()
    after_a = objects.resource_version(cluster.create(POD, pod("a")))
    after_b = objects.resource_version(cluster.create(POD, pod("b")))
    cluster.create(POD, pod("c"))
    cluster.trim_history(1)

    with pytest.raises(Gone):
        list(cluster.watch(POD, after_a, timeout_seconds=5))
    with cluster.watch(POD, after_b, timeout_seconds=10) as stream:
        replayed = take(stream, 1)
    assert [(e.type, objects.name(e.object)) for e in replayed] == [("ADDED", "c")]
    cluster.trim_history(5)  # fewer than kept: nothing forgotten
    with cluster.watch(POD, after_b, timeout_seconds=10) as stream:
        assert [objects.name(e.object) for e in take(stream, 1)] == ["c"]
