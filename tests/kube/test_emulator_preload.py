"""The test API server's seeding hook (`ApiEmulator.preload`, used by benchmarks/scale_server.py): objects stored
at once, read back over HTTP as if they had been created by POSTs, each keeping the creationTimestamp it carries,
and a watch from the list's version sees what comes after them — not them again."""

from __future__ import annotations

from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster

from .emulator import EmulatorThread

AN_HOUR_AGO = "2026-11-30T05:00:00Z"


def _node(name: str, created: str | None) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name, "labels": {"app": "x"}}
    if created:
        metadata["creationTimestamp"] = created
    return {"metadata": metadata, "spec": {}, "status": {}}


def test_preloaded_objects_are_listed_with_their_own_age_and_a_watch_goes_on_from_their_version() -> None:
    with EmulatorThread() as server:
        version = server.emulator.preload(objects.NODE, [_node("old", AN_HOUR_AGO), _node("new", None)])
        cluster = KubeCluster.from_url(server.url)
        try:
            listed = cluster.list(objects.NODE)
            by_name = {objects.name(node): node for node in listed.items}
            assert set(by_name) == {"old", "new"}
            assert by_name["old"]["metadata"]["creationTimestamp"] == AN_HOUR_AGO
            assert by_name["new"]["metadata"]["creationTimestamp"] > AN_HOUR_AGO  # stamped now, as a POST is
            assert all(node["metadata"]["uid"] for node in listed.items)
            assert int(listed.resource_version) == version
            with cluster.watch(objects.NODE, listed.resource_version, timeout_seconds=5) as stream:
                cluster.create(objects.NODE, _node("later", None))
                event = next(iter(stream))
            assert (event.type, objects.name(event.object)) == ("ADDED", "later")
        finally:
            cluster.close()
