"""The provisioner's claims, PersistentVolumes and StorageClasses through the real informers (`InformerFeed`, over HTTP
from the hostile API server, tests/kube/hostile.py): started only once a pending pod with a claim is seen; read into
the state's index by key; an object of another shape (checked at the edge, `kube.volumes.volume_object`) skipped,
counted and logged once while the others are read; a list that is refused (403) leaves the volumes *unavailable*,
never "no claims"."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.objects import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, STORAGE_CLASS, Obj
from karpenter_policy.kube.volumes import VOLUME_KINDS
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import InformerFeed

from .hostile import Answer, HostileServer, status_body
from .support import GENEROUS, eventually, pod

STATE_LOG = "karpenter_policy.reconcile.state.cluster"


@pytest.fixture()
def server() -> Iterator[HostileServer]:
    with HostileServer() as hostile:
        yield hostile


def _claim(name: str, spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _pod(name: str) -> Obj:
    made = pod(name)
    made["metadata"]["uid"] = f"uid-{name}"
    return made


def _pod_with_claim(name: str) -> Obj:
    made = _pod(name)
    made["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    return made


@pytest.fixture()
def feed(server: HostileServer) -> Iterator[InformerFeed]:
    cluster = KubeCluster.from_url(server.url, retries=0)
    running = InformerFeed(cluster, ClusterState()).start()
    try:
        yield running
    finally:
        running.stop()
        cluster.close()


def test_the_volume_informers_start_only_once_a_pod_with_a_claim_is_seen(
    server: HostileServer, feed: InformerFeed
) -> None:
    server.put(POD, _pod("plain"))
    assert feed.wait_synced(GENEROUS)
    eventually(lambda: [r.name for r in feed.state.pods()] == ["plain"], what="the plain pod")
    assert server.count(PERSISTENT_VOLUME_CLAIM, "list") == 0
    assert feed.health().alive  # informers not started are not dead ones
    assert feed.state.volumes_unavailable() is not None

    server.put(PERSISTENT_VOLUME_CLAIM, _claim("data", {"volumeName": "pv-a"}))
    server.put(POD, _pod_with_claim("db"))
    eventually(lambda: feed.state.volumes_unavailable() is None, what="the volume kinds listed")
    assert feed.state.volumes.claims[("default", "data")].volume_name == "pv-a"
    assert all(server.count(kind, "list") for kind in VOLUME_KINDS)


HOSTILE = {
    "a claim whose volumeName is a number": (PERSISTENT_VOLUME_CLAIM, _claim("odd", {"volumeName": 7})),
    "a claim whose spec is a list": (PERSISTENT_VOLUME_CLAIM, _claim("odd", ["pv"])),
    "a claim whose status is a string": (PERSISTENT_VOLUME_CLAIM, {**_claim("odd", {}), "status": "Lost"}),
    "a volume whose first term is a string": (PERSISTENT_VOLUME, {"metadata": {"name": "odd"}, "spec": {
        "nodeAffinity": {"required": {"nodeSelectorTerms": ["zone"]}}}}),
    "a class whose expressions are not a list": (STORAGE_CLASS, {"metadata": {"name": "odd"},
                                                                 "allowedTopologies": [{"matchLabelExpressions": 5}]}),
}


@pytest.mark.parametrize(("kind", "odd"), HOSTILE.values(), ids=HOSTILE.keys())
def test_an_object_of_another_shape_is_skipped_counted_and_logged_once(
    server: HostileServer, feed: InformerFeed, caplog: pytest.LogCaptureFixture, kind: Any, odd: Obj
) -> None:
    caplog.set_level(logging.WARNING, STATE_LOG)
    server.put(PERSISTENT_VOLUME_CLAIM, _claim("data", {"storageClassName": "gp3"}))
    server.put(kind, odd)
    server.put(POD, _pod_with_claim("db"))
    eventually(lambda: feed.state.volumes_unavailable() is None, what="the volume kinds listed")
    server.put(kind, odd)  # again, through the watch: counted again, logged no more
    eventually(lambda: sum(feed.state.malformed.values()) >= 2, what="the second malformed object counted")

    assert feed.state.volumes.claims[("default", "data")].storage_class == "gp3"
    assert "odd" not in feed.state.volumes.volumes and "odd" not in feed.state.volumes.classes
    assert ("default", "odd") not in feed.state.volumes.claims
    ((counted_kind, _),) = feed.state.malformed
    assert counted_kind == kind.plural
    assert len([r for r in caplog.records if r.name == STATE_LOG and "malformed" in r.getMessage()]) == 1
    assert feed.health().healthy  # an odd object is no outage


def test_a_refused_list_leaves_the_volumes_unavailable_never_empty(server: HostileServer, feed: InformerFeed) -> None:
    server.always(STORAGE_CLASS, "list", Answer(403, status_body(403, "Forbidden", "storageclasses is forbidden")))
    server.put(POD, _pod_with_claim("db"))
    eventually(lambda: server.count(STORAGE_CLASS, "list") >= 2, what="the class list tried again")

    assert feed.state.volumes_unavailable() == "storageclasses not listed yet"
    server.heal()
    eventually(lambda: feed.state.volumes_unavailable() is None, what="the classes listed once allowed")
