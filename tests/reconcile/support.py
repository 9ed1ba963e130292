"""Builders and the step-driven harness of the controller tests: pods and DaemonSets as the API writes them, the
constraint-set ConfigMap `compile` emits, and a controller on an in-memory cluster with a fake clock."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import Unavailable
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.simulate.kubelet import FakeKubelet
from karpenter_policy.simulate.scene import Scene

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "workloads" / "policies"
Obj = dict[str, Any]

#: The `closing` fixture (tests/reconcile/conftest.py): `closing(scene)` is the scene, closed at teardown.
Closing = Callable[[Scene], Scene]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )


def compile_policies(policies: Path, out: Path) -> Path:
    """`karpenter-policy compile POLICIES -o OUT` (the real CLI); OUT."""
    result = run_cli("compile", str(policies), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


def configmap_manifest(compiled: Path) -> Obj:
    """The constraint-set ConfigMap `compile` wrote into OUT/manifests/."""
    (path,) = sorted((compiled / "manifests").glob("configmap-*.yaml"))
    document: Obj = yaml.safe_load(path.read_text())
    return document


# --- pods ----------------------------------------------------------------------------------------------------

#: The pod the Karpenter v1 tests over HTTP apply with kubectl: `web`, one CPU, on the NodePool `default`.
WEB_POD: Obj = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"nodeSelector": {wk.NODEPOOL: "default"},
             "containers": [{"name": "app", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
}


def container(cpu: str | None = None, memory: str | None = None, **limits: str) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: Obj = {"requests": requests} if requests else {}
    if limits:
        resources["limits"] = {k.replace("_", "/"): v for k, v in limits.items()}
    return {"name": "app", "image": "registry.example/app:1", "resources": resources}


def pod(
    name: str,
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    containers: Sequence[Obj] | None = None,
    owner: tuple[str, str] | None = None,
    **spec: Any,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}
        ]
    return {"metadata": meta, "spec": {"containers": list(containers or [container("100m")]), **spec}}


def replicas(app: str, first: int, count: int, **options: Any) -> list[Obj]:
    """Pods `app-<first>` … of a Deployment's ReplicaSet (what scaling a Deployment creates)."""
    options.setdefault("labels", {"app": app})
    options.setdefault("owner", ("ReplicaSet", f"{app}-5d8f7c9b4"))
    return [pod(f"{app}-{i}", **options) for i in range(first, first + count)]


def inflate(first: int, count: int) -> list[Obj]:
    """The seed's `inflate` Deployment: pause pods of one vCPU each (examples/workloads/apps/inflate.yaml)."""
    return replicas("inflate", first, count, containers=[container("1")])


def daemon_set(name: str, namespace: str, cpu: str, memory: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container(cpu, memory)], **spec},
            },
        },
    }


def create_all(cluster: MemoryCluster, kind: objects.Kind, items: Iterable[Obj]) -> None:
    for item in items:
        cluster.create(kind, item)


@contextlib.contextmanager
def nodes_refused(scene: Scene) -> Iterator[None]:
    """While in the block, the scene's in-memory API server refuses every Node created (`Unavailable`: it went
    away) — a controller that stops between a launch and its Node."""
    create = scene.cluster.create

    def refusing(kind: Any, obj: Obj, *args: Any, **kwargs: Any) -> Obj:
        if kind == objects.NODE:
            raise Unavailable("the API server went away")
        return create(kind, obj, *args, **kwargs)

    scene.cluster.create = refusing  # type: ignore[method-assign]
    try:
        yield
    finally:
        scene.cluster.create = create  # type: ignore[method-assign]


# --- the harness ---------------------------------------------------------------------------------------------


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Harness:
    """A controller on an in-memory cluster, driven step by step with a fake clock."""

    cluster: MemoryCluster
    cloud: CloudProvider
    controller: Controller
    kubelet: FakeKubelet
    clock: FakeClock
    log: io.StringIO
    results: list[ReconcileResult] = field(default_factory=list)

    def step(self) -> ReconcileResult:
        result = self.controller.reconcile_once()
        self.results.append(result)
        return result

    def batch(self, limit: int = 50) -> ReconcileResult:
        """Passes, moving the clock to each pass's `due`, until one schedules a batch; then the kubelets run — and,
        for a NodePool's launches, the passes that register their nodes and bind their pods (no pod is bound to a
        node still carrying `karpenter.sh/unregistered`: v1.14.1's registration), as long as the kubelets join."""
        for _ in range(limit):
            result = self.step()
            if result.scheduled:
                self.kubelet.sync()
                self._registered(result)
                return result
            assert result.due is not None, "nothing pending: no batch will close"
            self.clock.now = max(self.clock.now, result.due)
        raise AssertionError("no batch closed")

    def _registered(self, result: ReconcileResult, passes: int = 5) -> None:
        """A few passes more (the clock unmoved) while a node the batch launched still carries the unregistered taint
        and its kubelet joined: its claim registers, then its pods are bound."""
        for _ in range(passes):
            unbound = {f"{objects.namespace(p)}/{objects.name(p)}" for p in self.pods()
                       if not (p.get("spec") or {}).get("nodeName")}
            waiting = [
                launched for launched in result.launched
                if (node := self.cluster.get(objects.NODE, launched.node)) is not None
                and node_info.kubelet_joined(node)
                and (node_info.awaiting_registration(node) or unbound & set(launched.pods))
            ]
            if not waiting:
                return
            self.step()
            self.kubelet.sync()

    # --- what users look at ------------------------------------------------------------------------------------

    def pods(self, namespace: str | None = None) -> list[Obj]:
        return self.cluster.list(objects.POD, namespace).items

    def unbound(self) -> list[str]:
        return [objects.name(p) for p in self.pods() if not (p.get("spec") or {}).get("nodeName")]

    def nodes(self) -> list[Obj]:
        return self.cluster.list(objects.NODE).items

    def node(self, name: str) -> Obj:
        found = self.cluster.get(objects.NODE, name)
        assert found is not None, name
        return found

    def node_of(self, pod_name: str, namespace: str = "default") -> Obj:
        found = self.cluster.get(objects.POD, pod_name, namespace)
        assert found is not None
        return self.node(found["spec"]["nodeName"])

    def events(self, reason: str | None = None) -> list[Obj]:
        return [e for e in self.cluster.list(objects.EVENT).items if reason is None or e["reason"] == reason]

    def log_lines(self) -> list[str]:
        return self.log.getvalue().splitlines()

    def messages(self) -> list[str]:
        """The message column of every Karpenter-format log line."""
        return [line.split("\t")[3] for line in self.log_lines() if line.count("\t") >= 4]


def label(node: Obj, key: str) -> str | None:
    return objects.labels(node).get(key)


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def cpu_of(node: Obj) -> float:
    """vCPUs of a node's instance type (its karpenter.k8s.aws/instance-cpu label)."""
    return float(objects.labels(node)["karpenter.k8s.aws/instance-cpu"])


KARPENTER_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\t(INFO|ERROR|WARN|DEBUG)\tcontroller\.[a-z.]+\t[^\t]+\t\{.*\}$"
)


def trailer(line: str) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads(line.split("\t")[4])
    return fields
