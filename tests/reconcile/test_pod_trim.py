"""What the state keeps of a pod (`reconcile.state.pods.trim_pod`): half a real pod's size goes, and nothing the
controller decides by. A trimmed pod and the whole one give the same record, the same scheduling pod, the same
termination and disruption answers; the informer's cache holds the trimmed one; a transform that fails keeps the
object whole and the watch going."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.kube import disruption, objects
from karpenter_policy.kube.cluster import ObjectList, WatchEvent
from karpenter_policy.kube.evictioncost import DELETION_COST, disruption_cost
from karpenter_policy.kube.informer import Informer
from karpenter_policy.reconcile.state import pods as state_pods
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import InformerFeed
from karpenter_policy.reconcile.state.pods import trim_pod
from karpenter_policy.scheduling.pods import PodSpecError

Obj = dict[str, Any]


def real_pod(name: str = "app-1", node: str | None = "node-a") -> Obj:
    """A Deployment's pod as kube-apiserver serves it, with what the controller never reads."""
    app = {
        "name": "app", "image": "registry.example/app:1", "command": ["/app"], "args": ["--port=8080"],
        "env": [{"name": f"VAR_{i}", "value": str(i)} for i in range(10)],
        "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
        "securityContext": {"runAsNonRoot": True},
    }
    sidecar = {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always", "env": [{"name": "A", "value": "1"}],
               "resources": {"requests": {"cpu": "100m"}}}
    pod: Obj = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "resourceVersion": "7",
                     "labels": {"app": "web"}, "annotations": {DELETION_COST: "5"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                          "uid": "rs", "controller": True}]},
        "spec": {
            "containers": [app], "initContainers": [sidecar], "priorityClassName": "system-node-critical",
            "nodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"},
            "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}],
            "volumes": [{"name": "config", "configMap": {"name": "web"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "web-data", "readOnly": False}},
                        {"name": "kube-api-access-7xk2p", "projected": {"defaultMode": 420, "sources": [  # every pod's
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                                "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
        },
        "status": {"phase": "Running" if node else "Pending",
                   "conditions": [{"type": "Ready", "status": "True"},
                                  {"type": "PodScheduled", "status": "True" if node else "False",
                                   **({} if node else {"reason": "Unschedulable"})}],
                   "containerStatuses": [{"name": "app", "ready": True, "imageID": "sha256:" + "a" * 64}]},
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def answers(pod: Obj) -> dict[str, Any]:
    """Everything the controller asks of one pod, in comparable form."""
    state = ClusterState()
    state.apply(objects.POD, "ADDED", pod)
    (record,) = state.pods()
    try:
        scheduling: Any = state.scheduling_pod(record).shape
    except PodSpecError as error:
        scheduling = f"refused: {error}"
    fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name != "obj"}
    return {
        "record": fields, "shape": scheduling, "pending": [p.key for p in state.pending()],
        "critical": state_pods.is_critical(pod), "tolerates_cordon": state_pods.tolerates_unschedulable(pod),
        "controller": state_pods.controller_of(pod), "mirror": state_pods.is_owned_by_node(pod),
        "cost": disruption_cost(pod), "ready": disruption.is_ready(pod),
        "healthy": disruption.is_healthy(pod), "claims": state_pods.volume_claims(pod),
    }


def trimmed(pod: Obj) -> Obj:
    copied = copy.deepcopy(pod)
    trim_pod(copied)
    return copied


def test_a_trimmed_pod_is_half_the_size_and_answers_every_question_the_same() -> None:
    for pod in (real_pod(), real_pod("pending-1", node=None)):
        small = trimmed(pod)

        assert answers(small) == answers(pod)
        assert len(json.dumps(small)) < 0.6 * len(json.dumps(pod))
        (app,), (sidecar,) = small["spec"]["containers"], small["spec"]["initContainers"]
        assert set(app) == {"name", "ports", "resources"} and set(sidecar) == {"name", "resources", "restartPolicy"}
        assert small["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}]
        assert "containerStatuses" not in small["status"]
        assert small["status"]["conditions"] == pod["status"]["conditions"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
_container = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b"])},
    optional={"resources": st.sampled_from([{"requests": {"cpu": "1"}}, {"requests": {"cpu": "x"}}, {}, "odd"]),
              "ports": st.sampled_from([[{"containerPort": 80, "hostPort": 80}], [], "odd"]),
              "restartPolicy": st.sampled_from(["Always", "Never"]), "env": _json, "image": _json},
)


_volume = st.fixed_dictionaries(
    {"name": st.sampled_from(["data", "", 3])},
    optional={"persistentVolumeClaim": st.fixed_dictionaries({"claimName": st.sampled_from(["c", "", None, 1])},
                                                             optional={"readOnly": st.booleans()}) | _json,
              "ephemeral": st.just({"volumeClaimTemplate": {"spec": {}}}) | _json, "configMap": _json},
)


@deterministic(300)
@given(
    containers=st.lists(_container | _json, max_size=3), inits=st.lists(_container, max_size=2) | _json,
    volumes=st.lists(_volume | _json, max_size=3) | _json, statuses=_json,
    phase=st.sampled_from(["Running", "Pending", "Succeeded"]),
    node=st.sampled_from([None, "node-a"]), spec_extra=st.dictionaries(st.sampled_from(["nodeSelector", "x"]), _json),
)
def test_trimming_never_changes_an_answer_and_never_fails(
    containers: list[Any], inits: Any, volumes: Any, statuses: Any, phase: str, node: str | None,
    spec_extra: dict[str, Any],
) -> None:
    pod = real_pod(node=node)
    pod["spec"].update(containers=containers, initContainers=inits, volumes=volumes, **spec_extra)
    pod["status"].update(phase=phase, containerStatuses=statuses)

    assert answers(trimmed(pod)) == answers(pod)


@pytest.mark.parametrize(("odd", "kept"), [
    ({"spec": "x"}, {"spec": "x"}),
    ({"spec": {"containers": "x"}}, {"spec": {"containers": "x"}}),
    ({"status": ["x"]}, {"status": ["x"]}),
    ({"spec": {"containers": [1, None, {"name": "a", "env": []}]}}, {"spec": {"containers": [1, None, {"name": "a"}]}}),
])
def test_a_pod_of_another_shape_is_left_as_it_is_for_the_readers_to_judge(odd: Obj, kept: Obj) -> None:
    pod = {"metadata": {"name": "p"}, **odd}
    trim_pod(pod)
    assert pod == {"metadata": {"name": "p"}, **kept}


class _Lines:
    """A cluster whose pods watch delivers the given events once, then blocks until closed."""

    def __init__(self, events: list[WatchEvent]) -> None:
        self.events, self.delivered = events, threading.Event()

    def list(self, kind: Any, *args: Any, **kwargs: Any) -> ObjectList:
        return ObjectList([], "1")

    def watch(self, kind: Any, *args: Any, **kwargs: Any) -> Any:
        cluster = self

        class Stream:
            closed = threading.Event()

            def __iter__(self) -> Iterator[WatchEvent]:
                yield from cluster.events
                cluster.events = []
                cluster.delivered.set()
                self.closed.wait()

            def close(self) -> None:
                self.closed.set()

            def __enter__(self) -> Stream:
                return self

            def __exit__(self, *exc: object) -> None:
                self.close()

        return Stream()


def test_the_informers_cache_holds_the_trimmed_pod_and_the_state_schedules_it_as_the_whole_one() -> None:
    pending = real_pod("pending-1", node=None)
    cluster = _Lines([WatchEvent("ADDED", copy.deepcopy(pending))])
    state = ClusterState()
    applied = threading.Event()
    state.subscribe(lambda change: applied.set())
    feed = InformerFeed(cluster, state, kinds=(objects.POD,)).start()  # type: ignore[arg-type]
    try:
        assert applied.wait(10)
        (cached,) = feed.informers[objects.POD].items_shared()
        assert "env" not in cached["spec"]["containers"][0]
        assert cached["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}]
        assert answers(cached) == answers(pending)
    finally:
        feed.stop()


def test_a_transform_that_fails_keeps_the_object_whole_and_the_watch_going(caplog: pytest.LogCaptureFixture) -> None:
    def broken(obj: Obj) -> None:
        raise RuntimeError("a bug in a consumer's transform")

    events = [WatchEvent("ADDED", real_pod(f"p-{i}")) for i in range(3)]
    informer = Informer(_Lines(events), objects.POD, transform=broken)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        informer.start()
        try:
            assert informer.wait_until(lambda items: len(items) == 3, 10)
            assert all("env" in pod["spec"]["containers"][0] for pod in informer.items_shared())
            assert informer.health().ok
        finally:
            informer.stop()
    assert sum("the cache's transform failed" in r.getMessage() for r in caplog.records) == 1
