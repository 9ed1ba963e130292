"""The test API server's change log as its watches read it (issue #23): a watch from a version gets exactly the
changes of its kind made after it, in order, whatever other kinds were written in between, and 410 Gone once the
log (``history_window`` changes of every kind together) no longer reaches back to it — the same answers as before
the log was kept by kind and read from its end, and every watcher of a change reads the same event.

The speed of that reading (the cost of a watch's wake-up no longer grows with the log's length, the JSON of a change
encoded once for every watcher) is measured by benchmarks/scale.py --server-process --server-baseline, not here."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import Gone
from tests.profiles import deterministic

from .emulator import EmulatorThread

END = "end"  # the last pod written: a watch reads up to it, then stops (no timeout to wait out)


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {}, "status": {}}


def _watched(cluster: KubeCluster, version: str) -> list[tuple[str, str, str]]:
    """(type, name, resourceVersion) of every pod event from `version` up to the END pod's creation."""
    seen: list[tuple[str, str, str]] = []
    with cluster.watch(objects.POD, version, "default", timeout_seconds=30) as stream:
        for event in stream:
            seen.append((event.type, objects.name(event.object), objects.resource_version(event.object)))
            if seen[-1][:2] == ("ADDED", END):
                return seen
    raise AssertionError(f"the watch from {version} ended before the last pod: {seen}")


#: A write: (kind, name index, create or delete). Names are few so deletes find something to delete.
WRITES = st.lists(st.tuples(st.sampled_from(["pod", "node"]), st.integers(0, 3), st.booleans()), max_size=14)


@deterministic(25)
@given(writes=WRITES, window=st.integers(2, 12))
def test_a_watch_from_any_version_gets_its_kinds_changes_since_or_410_once_the_log_has_moved_past_it(
    writes: list[tuple[str, int, bool]], window: int
) -> None:
    with EmulatorThread(history_window=window) as server:
        cluster = KubeCluster.from_url(server.url)
        try:
            start = int(cluster.list(objects.POD, "default").resource_version)
            changes: list[tuple[int, str, str, str]] = []  # (version, kind, type, name) of every write, in order
            for kind_name, index, create in writes:
                kind, make = (objects.POD, _pod) if kind_name == "pod" else (objects.NODE, _node)
                name = f"{kind_name}-{index}"
                present = cluster.get(kind, name, "default" if kind_name == "pod" else None) is not None
                if create and not present:
                    written = cluster.create(kind, make(name))
                    changes.append((int(objects.resource_version(written)), kind_name, "ADDED", name))
                elif not create and present:
                    cluster.delete(kind, name, "default" if kind_name == "pod" else None)
                    changes.append((int(cluster.list(kind).resource_version), kind_name, "DELETED", name))
            end = cluster.create(objects.POD, _pod(END))
            changes.append((int(objects.resource_version(end)), "pod", "ADDED", END))
            kept = changes[-window:]  # the log holds the last `window` changes of every kind
            forgotten = changes[-window - 1][0] if len(changes) > window else start
            for position in range(start, changes[-1][0]):
                if position < forgotten:
                    try:
                        _watched(cluster, str(position))
                    except Gone:
                        continue
                    raise AssertionError(f"a watch from {position} (log from {forgotten}) was not told 410 Gone")
                expected = [(kind_type, name, str(version)) for version, kind, kind_type, name in kept
                            if kind == "pod" and version > position]
                assert _watched(cluster, str(position)) == expected
        finally:
            cluster.close()


def test_two_watchers_of_a_change_read_the_same_event() -> None:
    """The event line is encoded once and shared: both watchers decode the same object, and the first watcher's
    reading leaves nothing for the second to see changed."""
    with EmulatorThread() as server:
        cluster = KubeCluster.from_url(server.url)
        try:
            version = cluster.list(objects.POD, "default").resource_version
            labelled = _pod(END)
            labelled["metadata"]["labels"] = {"app": "web"}
            with cluster.watch(objects.POD, version, "default", timeout_seconds=30) as first, \
                    cluster.watch(objects.POD, version, "default", label_selector="app=web",
                                  timeout_seconds=30) as second:
                created = cluster.create(objects.POD, labelled)
                one, two = next(iter(first)), next(iter(second))
            assert (one.type, two.type) == ("ADDED", "ADDED")
            assert one.object == two.object
            assert objects.resource_version(one.object) == objects.resource_version(created)
            assert one.object["metadata"]["labels"] == {"app": "web"}
        finally:
            cluster.close()
