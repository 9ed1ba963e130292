"""No sequence of API answers makes the controller terminate an instance whose Node exists.

The controller runs over real HTTP against the hostile API server of tests/kube (the real KubeCluster): one Node of
ours, whose instance the fake cloud holds, launched long ago. Each list of Nodes (the state's and garbage
collection's own confirmation) is answered truthfully or with something no reader can trust — an empty 200, a
body that is not JSON, a 200 `Status`, `items: "abc"`, `[null]`, items without metadata, a 500, a 410 — in any
order, while the clock moves past every grace period and garbage collection runs again and again. The instance
must live; and once the API tells the truth again, a Node whose instance really is gone is still collected (the
safety does not switch collection off).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.cloud.provider import LaunchRequest
from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import Controller, ControllerOptions
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import ListFeed
from karpenter_policy.reconcile.state.nodes import ANNOTATION_HASH, ANNOTATION_INSTANCE

from .conftest import CLUSTER, REGION, fake_cloud
from .support import FakeClock

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from kube.hostile import SERVER_ERROR, Answer, HostileServer, status_body  # noqa: E402

LONG_AGO = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

HOSTILE: dict[str, Answer] = {
    "empty 200": Answer(body=b""),
    "not JSON": Answer(body=b"<html>proxy error</html>"),
    "200 Status": Answer(body=status_body(200, "", "")),
    "items not a list": Answer(body={"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "9"},
                                     "items": "abc"}),
    "items [null]": Answer(body={"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "9"},
                                 "items": [None]}),
    "item without metadata": Answer(body={"apiVersion": "v1", "kind": "NodeList",
                                          "metadata": {"resourceVersion": "9"}, "items": [{"metadata": "x"}]}),
    "500": SERVER_ERROR,
    "410": Answer(status=410, body=status_body(410, "Expired", "too old resource version")),
}


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with HostileServer() as hostile:
        yield hostile


def node_of(instance_id: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "finalizers": [wk.TERMINATION_FINALIZER],
                     "creationTimestamp": objects.format_time(LONG_AGO),
                     "labels": {"karpenter.sh/provisioner-name": "default", "karpenter.sh/initialized": "true"},
                     "annotations": {ANNOTATION_HASH: "sha256:x", ANNOTATION_INSTANCE: instance_id}},
        "spec": {"providerID": f"aws:///us-east-1a/{instance_id}"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58"}},
    }


def launch(cloud: Any, token: str, provisioner: str = "default") -> str:
    request = LaunchRequest(
        cluster_name=CLUSTER, provisioner=provisioner, constraint_set_hash="sha256:x",
        options=[ChosenOffering("m5.xlarge", "us-east-1a", "on-demand", 0.192)], client_token=token,
    )
    return str(cloud.create(request).id)


@deterministic(60, HealthCheck.function_scoped_fixture)
@given(st.lists(st.tuples(st.sampled_from(["truth", *HOSTILE]), st.sampled_from([1.0, 30.0, 200.0])),
                min_size=1, max_size=12))
@pytest.mark.slow
def test_no_answer_of_the_api_makes_the_controller_terminate_an_instance_whose_node_exists(
    server: HostileServer, compiled: Path, log: Any, answers: list[tuple[str, float]]
) -> None:
    server.heal()
    for existing in server.state(objects.NODE):
        server.remove(objects.NODE, objects.name(existing))
    clock = FakeClock()
    cloud = fake_cloud(clock)
    cloud._wall_clock = lambda: LONG_AGO  # its instances were launched long ago
    instance = launch(cloud, "node-1")
    server.put(objects.NODE, node_of(instance, "node-1"))
    cluster = KubeCluster.from_url(server.url, retries=0)
    controller = Controller(
        cluster, cloud, DirectorySource(compiled),
        ControllerOptions(cluster_name=CLUSTER, gc_interval=1.0, gc_instance_grace=10.0, gc_node_grace=10.0),
        region=REGION, clock=clock, feed=ListFeed(cluster, ClusterState()),
    )
    controller.reconcile_once()
    for answer, advance in answers:
        clock.advance(advance)
        if answer != "truth":
            for _ in range(3):  # the state's list and garbage collection's own confirmation
                server.script(objects.NODE, "list", HOSTILE[answer])
        controller.reconcile_once()
        assert cloud.get(instance) is not None, f"the instance of a live Node was terminated after: {answers}"
        server.heal()


def test_a_node_whose_instance_is_gone_is_still_collected_once_the_api_tells_the_truth(
    server: HostileServer, compiled: Path, log: Any
) -> None:
    server.heal()
    for existing in server.state(objects.NODE):
        server.remove(objects.NODE, objects.name(existing))
    clock = FakeClock()
    cloud = fake_cloud(clock)
    cloud._wall_clock = lambda: LONG_AGO
    # No Node names it, and its provisioner is gone (nothing adopts it): garbage after two healthy looks.
    orphan = launch(cloud, "orphan", provisioner="retired")
    cluster = KubeCluster.from_url(server.url, retries=0)
    controller = Controller(
        cluster, cloud, DirectorySource(compiled),
        ControllerOptions(cluster_name=CLUSTER, gc_interval=1.0, gc_instance_grace=10.0),
        region=REGION, clock=clock, feed=ListFeed(cluster, ClusterState()),
    )
    server.script(objects.NODE, "list", HOSTILE["empty 200"])
    controller.reconcile_once()  # an unhealthy look: proves nothing
    clock.advance(20)
    controller.reconcile_once()  # the first healthy look: missing since now
    assert cloud.get(orphan) is not None, "one look is not enough"
    clock.advance(20)
    controller.reconcile_once()  # a second healthy look, over the grace period later
    assert cloud.get(orphan) is None


def test_a_node_of_an_odd_shape_is_skipped_and_counted_and_protects_the_instance_it_names(
    server: HostileServer, compiled: Path, log: Any
) -> None:
    """A Node whose `spec` is not a map (and one whose `status` is not either) used to make every collection
    raise, so orphans were never collected again. Now each pass skips them and counts them; the instance such a
    Node mentions is kept (what cannot be read cannot prove an instance has no Node); a true orphan still goes."""
    server.heal()
    for existing in server.state(objects.NODE):
        server.remove(objects.NODE, objects.name(existing))
    clock = FakeClock()
    cloud = fake_cloud(clock)
    cloud._wall_clock = lambda: LONG_AGO
    named = launch(cloud, "named", provisioner="retired")
    orphan = launch(cloud, "orphan", provisioner="retired")
    odd_spec = node_of(named, "odd-spec")
    odd_spec["spec"] = "x"
    odd_status = node_of("i-0000000000000000f", "odd-status")
    odd_status["status"] = ["x"]
    server.put(objects.NODE, odd_spec)
    server.put(objects.NODE, odd_status)
    cluster = KubeCluster.from_url(server.url, retries=0)
    controller = Controller(
        cluster, cloud, DirectorySource(compiled),
        ControllerOptions(cluster_name=CLUSTER, gc_interval=1.0, gc_instance_grace=10.0, gc_node_grace=10.0),
        region=REGION, clock=clock, feed=ListFeed(cluster, ClusterState()),
    )
    collected = []
    for _ in range(4):
        result = controller.reconcile_once()
        assert result.garbage is not None and result.garbage.errors == [], result.garbage
        collected += result.garbage.terminated
        clock.advance(11)

    assert collected == [orphan] and cloud.get(orphan) is None
    assert cloud.get(named) is not None, "named by a Node that could not be read: kept"
    counted = {reason for (kind, reason), count in controller.state.malformed.items() if kind == "nodes" and count}
    assert counted == {"spec is not an object", "status is not an object"}
    assert {objects.name(n) for n in server.state(objects.NODE)} == {"odd-spec", "odd-status"}, "never written to"
