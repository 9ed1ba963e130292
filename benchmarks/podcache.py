"""What the controller holds per pod, and its CPU per pod event, with pods as a real API server sends them.

    .venv/bin/python benchmarks/podcache.py [--pods 5000] [--baseline-ref c9e6b99] [--repeat 3]

Each run is a child process (pinned to one core, this tree or the baseline's via `PYTHONPATH`) that feeds
`--pods` watch lines through the pods informer into a `ClusterState` (`reconcile.state.feed.InformerFeed`), each
line decoded with `json.loads` one at a time as `kube/client.py` decodes a watch. A line is a Deployment's pod as
kube-apiserver serves it: two `managedFields` entries, an app container with environment, probes, mounts and a
security context, a sidecar, a projected service-account volume, five conditions and two container statuses
(~6.5 KB). The in-memory API server of `scale.py` hands out deep copies that share every string with its stored
objects, so it cannot show what decoding costs; this harness can.

Reported per tree: KiB held per pod (tracemalloc's traced heap after the last pod minus before the first, the
informer's cache and the state together, in a run of its own), and the informer thread's CPU per event (no
tracing; `time.thread_time` of that thread, decode included). Answer check: the state holds every pod, the bound
ones on their nodes and the unbound ones provisionable with the requests the lines ask (600m CPU, 640Mi).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPOSITORY, baseline_tree, child_environment, pin_to, pinned_cpu, render_table  # noqa: E402

UNBOUND_EVERY = 10  # one pod in ten is pending
#: What every pending pod asks, as the scheduler reads it (app + sidecar; Decimal reprs).
EXPECTED_REQUESTS = "{'cpu': Decimal('0.6'), 'memory': Decimal('671088640')}"


def pod_line(index: int) -> bytes:
    """One ADDED watch line: a Deployment's pod as kube-apiserver serves it."""
    env: list[dict[str, Any]] = [{"name": f"VAR_{k}", "value": f"value-{k}-{index % 7}"} for k in range(12)]
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}})
    probe = {"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    app = {
        "name": "app", "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:2026.11.29-abcdef",
        "imagePullPolicy": "IfNotPresent", "command": ["/bin/app"],
        "args": ["--port=8080", "--log-level=info", "--config=/etc/app/config.yaml"], "env": env,
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"},
                  {"containerPort": 9090, "name": "metrics", "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, **probe},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"}, **probe},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                         {"name": "kube-api-access-x7k2p", "readOnly": True,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    sidecar = {
        "name": "envoy", "image": "envoyproxy/envoy:v1.31.0", "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}, "ports": [{"containerPort": 15001}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    bound = index % UNBOUND_EVERY != 0
    managed = [
        {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T10:00:09Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                                "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}}}}}}
        for manager in ("kube-controller-manager", "kubelet")
    ]
    statuses = [
        {"name": name, "ready": True, "restartCount": 0, "started": True, "image": "img",
         "imageID": "docker.io/library/img@sha256:" + "a" * 64, "containerID": "containerd://" + "b" * 64,
         "state": {"running": {"startedAt": "2026-11-29T10:00:08Z"}}, "lastState": {}}
        for name in ("app", "envoy")
    ]
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"app-7d9f8c6b5-{index:05d}", "generateName": "app-7d9f8c6b5-", "namespace": "team-a",
            "uid": f"0b7c9e2a-1f3d-4c5e-8a9b-{index:012d}", "resourceVersion": str(100000 + index),
            "creationTimestamp": "2026-11-29T10:00:00Z", "managedFields": managed,
            "labels": {"app": "app", "pod-template-hash": "7d9f8c6b5", "team": "a"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-28T10:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-7d9f8c6b5",
                                 "uid": "5f1e2d3c-aaaa-bbbb-cccc-000000000001", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "containers": [app, sidecar], "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "securityContext": {"fsGroup": 2000},
            "serviceAccount": "app", "serviceAccountName": "app", "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoExecute", "key": f"node.kubernetes.io/{key}", "operator": "Exists",
                             "tolerationSeconds": 300} for key in ("not-ready", "unreachable")],
            "volumes": [
                {"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}},
                {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                                "path": "namespace"}]}},
                ]}},
            ],
        },
        "status": {
            "phase": "Running" if bound else "Pending", "qosClass": "Burstable",
            "conditions": [{"type": kind, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": "2026-11-29T10:00:09Z"}
                           for kind in ("Initialized", "Ready", "ContainersReady", "PodReadyToStartContainers")],
            "containerStatuses": statuses if bound else [],
        },
    }
    if bound:
        pod["spec"]["nodeName"] = f"node-{index % 500}"
        pod["status"]["conditions"].append({"type": "PodScheduled", "status": "True"})
        pod["status"].update({"hostIP": "10.0.1.2", "podIP": "10.0.3.4", "podIPs": [{"ip": "10.0.3.4"}],
                              "startTime": "2026-11-29T10:00:05Z"})
    else:
        pod["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    return json.dumps({"type": "ADDED", "object": pod}, separators=(",", ":")).encode()


def child(pods: int, trace: bool) -> dict[str, Any]:
    """Feed the lines through an InformerFeed into a ClusterState; what it held and spent."""
    from karpenter_policy.kube import objects
    from karpenter_policy.kube.cluster import ObjectList, WatchEvent
    from karpenter_policy.reconcile.state.cluster import ClusterState
    from karpenter_policy.reconcile.state.feed import InformerFeed

    lines = [pod_line(i) for i in range(pods)]
    done = threading.Event()
    cpu: dict[str, float] = {}

    class Stream:
        def __init__(self, first: bool) -> None:
            self._first, self._closed = first, threading.Event()

        def __iter__(self) -> Iterator[WatchEvent]:
            if self._first:
                started = time.thread_time()
                for line in lines:
                    data = json.loads(line)
                    yield WatchEvent(data["type"], data["object"])
                cpu["informer"] = time.thread_time() - started  # the last event has been applied by now
                done.set()
            self._closed.wait()

        def close(self) -> None:
            self._closed.set()

        def __enter__(self) -> Stream:
            return self

        def __exit__(self, *exc_info: object) -> None:
            self.close()

    class LineCluster:
        """Lists nothing, then watches the lines (and nothing after)."""

        watches = 0

        def list(self, kind: Any, *args: Any, **kwargs: Any) -> ObjectList:
            return ObjectList([], "1")

        def watch(self, kind: Any, *args: Any, **kwargs: Any) -> Stream:
            first = kind == objects.POD and self.watches == 0
            if kind == objects.POD:
                self.watches += 1
            return Stream(first)

    state = ClusterState()
    if trace:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if trace else 0
    feed = InformerFeed(LineCluster(), state, kinds=(objects.POD,)).start()  # type: ignore[arg-type]
    if not done.wait(600):
        raise SystemExit("the informer did not deliver every line within 600 s")
    held = tracemalloc.get_traced_memory()[0] - before if trace else 0
    records = state.pods()
    pending = state.pending()
    requests = {str(dict(state.scheduling_pod(r).shape.scheduling.requests)) for r in pending}
    answer = {
        "pods": len(records), "pending": len(pending), "requests": sorted(requests),
        "bound_right": all(r.node == f"node-{int(r.name.rsplit('-', 1)[1]) % 500}" for r in records if r.node),
    }
    feed.stop()
    return {"held_kib_per_pod": held / pods / 1024, "cpu_ms_per_event": cpu["informer"] * 1000 / pods,
            "answer": answer}


def run_child(tree: Path, pods: int, trace: bool, cpu: int) -> dict[str, Any]:
    env = {**child_environment(), "PYTHONPATH": str(tree)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--pods", str(pods)]
    argv += ["--trace"] if trace else []
    done = subprocess.run(argv, env=env, capture_output=True, text=True, preexec_fn=pin_to(cpu), check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed ({tree}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=_positive, default=5000)
    parser.add_argument("--repeat", type=_positive, default=3)
    parser.add_argument("--baseline-ref", default=None, help="a git revision measured alternately with this tree")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.pods, args.trace)))
        return 0
    trees = [("this tree", REPOSITORY)]
    with tempfile.TemporaryDirectory() as scratch:
        if args.baseline_ref:
            trees.append((args.baseline_ref, baseline_tree(args.baseline_ref, Path(scratch))))
        cpu = pinned_cpu()
        print(f"load average {os.getloadavg()[0]:.2f}; {args.pods} pods; {len(pod_line(1))} bytes a bound pod's "
              "line", file=sys.stderr)
        rows, failed = [], False
        for name, tree in trees:
            held = run_child(tree, args.pods, True, cpu)
            times = [run_child(tree, args.pods, False, cpu) for _ in range(args.repeat)]
            answer = held["answer"]
            expected = {"pods": args.pods, "pending": -(-args.pods // UNBOUND_EVERY), "bound_right": True,
                        "requests": [EXPECTED_REQUESTS]}
            ok = answer == expected and all(t["answer"] == answer for t in times)
            failed |= not ok
            rows.append([name, f"{held['held_kib_per_pod']:.2f}",
                         " / ".join(f"{t['cpu_ms_per_event']:.3f}" for t in times), "ok" if ok else f"WRONG {answer}"])
    print(render_table(["tree", "KiB held per pod", "informer CPU ms per event", "answer"], rows,
                       frozenset({1, 2})))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
