"""A running fleet for the controller benchmarks (scale.py, reaction.py): N nodes of ours with pods bound, the
constraint sets that launched them, the fake cloud that holds their instances, and the controller's runner on
them in real time.

The scene is built through the controller's own code where it exists (the Node a launch registers:
`node_object`; the launch request: the fake cloud's `create`), so a baseline tree (an earlier commit exported by
`--baseline-ref`) builds the same scene. Only APIs both trees have are used; where the module layout differs the
imports try the newer place first (see `_compat`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import BENCHMARKS_DIR, REPOSITORY

WORK = BENCHMARKS_DIR / ".work"
CLUSTER = "bench"
REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
NODE_TYPE = "m5.2xlarge"
FLEET_TYPES = ("m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "m5.8xlarge")

POLICY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: fleet
spec:
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["on-demand"]
    - key: node.kubernetes.io/instance-type
      operator: In
      values: [{types}]
  provider:
    subnetSelector:
      karpenter.sh/discovery: bench
    securityGroupSelector:
      karpenter.sh/discovery: bench
{disruption}
"""


def _compat(*names: str) -> Any:
    """The first module of `names` that imports (the newer layout first)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"none of {', '.join(names)}")


def compiled_policy(disruption: str, work: Path) -> Path:
    """Compile the benchmark's one Provisioner with the given disruption settings (YAML lines under spec)."""
    policies = work / f"policies-{abs(hash(disruption)) % 10**8}"
    policies.mkdir(parents=True, exist_ok=True)
    types = ", ".join(FLEET_TYPES)
    (policies / "fleet.yaml").write_text(POLICY.format(types=types, disruption=disruption), encoding="utf-8")
    out = work / f"compiled-{policies.name}"
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", str(policies), "-o", str(out)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"compile failed: {done.stderr}")
    return out


class TimedCloud:
    """The fake cloud, with the time of every create (CreateFleet) call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.creates: list[float] = []
        self._lock = threading.Lock()

    def create(self, request: Any) -> Any:
        with self._lock:
            self.creates.append(time.monotonic())
        return self.inner.create(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Fleet:
    """The scene: cluster, cloud, the controller and its runner (started with :meth:`start`)."""

    cluster: Any
    cloud: TimedCloud
    compiled: Path
    controller: Any = None
    runner: Any = None
    thread: threading.Thread | None = None
    nodes: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def start(self, elector: Any = None, queue: Any = None, resync: float = 10.0, freeze: bool = True) -> None:
        """Start the runner (with leader election through `elector`, interruption handling from `queue`);
        `freeze` False: without its freeze of the warm heap after the first sync (a tree that has it: the A/B of
        `scale.py --no-gc-freeze`)."""
        controller_module = _compat("karpenter_policy.reconcile.controller")
        constraints = _compat("karpenter_policy.reconcile.constraints")
        runner_module = _compat("karpenter_policy.reconcile.runner")
        # Interruption: a controller of the controller's list, given its queue (#24); before, a handler given to
        # the runner.
        takes_queue = "interruption_queue" in inspect.signature(controller_module.Controller).parameters
        if hasattr(runner_module, "assemble"):  # one place wires the controller to its runner (#24)
            freezing = {} if freeze else {"freeze": False}
            if freezing and "freeze" not in inspect.signature(runner_module.assemble).parameters:
                raise SystemExit("--no-gc-freeze: this tree's runner does not freeze its heap (nothing to turn off)")
            self.runner = runner_module.assemble(
                self.cluster, self.cloud, constraints.DirectorySource(self.compiled),
                controller_module.ControllerOptions(cluster_name=CLUSTER, **self.options), region=REGION,
                elector=elector, resync=resync, interruption_queue=queue, **freezing,
            )
            self.controller = self.runner.controller
            self.thread = threading.Thread(target=self.runner.run, name="runner", daemon=True)
            self.thread.start()
            return
        self.controller = controller_module.Controller(
            self.cluster, self.cloud, constraints.DirectorySource(self.compiled),
            controller_module.ControllerOptions(cluster_name=CLUSTER, **self.options), region=REGION,
            **({"interruption_queue": queue} if takes_queue and queue is not None else {}),
        )
        kwargs: dict[str, Any] = {"resync": resync}
        if elector is not None:
            kwargs["elector"] = elector
        if queue is not None and not takes_queue:
            handler = _compat(
                "karpenter_policy.reconcile.interruption.handler", "karpenter_policy.reconcile.interruption"
            )
            kwargs["interruption"] = handler.InterruptionHandler(
                self.cluster, self.cloud, queue, metrics=self.controller.metrics
            )
        self.runner = runner_module.Runner(self.controller, self.cluster, **kwargs)
        self.thread = threading.Thread(target=self.runner.run, name="runner", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()
        if self.thread is not None:
            self.thread.join(60)


#: The namespaces the fleet's pods are spread over (a node's pods share one: `pod_namespace`).
NAMESPACES = 20


def pod_namespace(index: int) -> str:
    """The namespace of the pods of the fleet's `index`-th node."""
    return f"team-{index % NAMESPACES}"


def node_pods(node: str, count: int, cpu: str, memory: str, index: int) -> list[dict[str, Any]]:
    """The `count` running pods of the fleet's `index`-th node, `node`: `{node}-p0…`, in `pod_namespace(index)`."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{index % 50}-7c9b4",
             "uid": f"rs-{index % 50}", "controller": True}
    return [
        {
            "metadata": {"name": f"{node}-p{i}", "namespace": pod_namespace(index),
                         "labels": {"app": f"app-{index % 50}"}, "ownerReferences": [owner]},
            "spec": {"nodeName": node, "containers": [
                {"name": "app", "image": "registry.example/app:1",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for i in range(count)
    ]


def build_fleet(
    nodes: int, pods_per_node: int, cpu: str, memory: str, compiled: Path, options: dict[str, Any],
    node_age_seconds: float = 3600.0,
) -> Fleet:
    """`nodes` Nodes of ours (m5.2xlarge, on-demand, spread over three zones), each Ready and initialized with
    `pods_per_node` running pods requesting `cpu` and `memory` each; the instances exist in the fake cloud. Built
    with the testing API's scene (karpenter_policy.testing) where the tree has it, else as the controller of a
    baseline tree registers nodes (`node_object`)."""
    from karpenter_policy.catalog import load_catalog
    from karpenter_policy.kube import objects

    FakeCloudProvider = _compat("karpenter_policy.fakes.cloud", "karpenter_policy.cloud.fake").FakeCloudProvider
    catalog = load_catalog()
    try:
        from karpenter_policy.testing import Scene
    except ImportError:
        return _build_fleet_baseline(nodes, pods_per_node, cpu, memory, compiled, options, node_age_seconds)
    cloud = TimedCloud(FakeCloudProvider(list(catalog.instance_types), region=REGION))
    scene = Scene(compiled, cloud=cloud, real_time=True, cluster_name=CLUSTER)  # type: ignore[arg-type]
    fleet = Fleet(scene.cluster, cloud, compiled, options=options)
    for index in range(nodes):
        name = scene.add_node("fleet", NODE_TYPE, zone=ZONES[index % len(ZONES)], age=node_age_seconds,
                              price=0.384)
        fleet.nodes.append(name)
        for pod in node_pods(name, pods_per_node, cpu, memory, index):
            scene.cluster.create(objects.POD, pod)
    cloud.creates.clear()
    return fleet


def _build_fleet_baseline(
    nodes: int, pods_per_node: int, cpu: str, memory: str, compiled: Path, options: dict[str, Any],
    node_age_seconds: float,
) -> Fleet:
    """The same fleet in a tree without the testing API: nodes registered with its `node_object`."""
    import datetime as dt

    from karpenter_policy.catalog import load_catalog
    from karpenter_policy.cloud.provider import LaunchRequest
    from karpenter_policy.kube import objects
    from karpenter_policy.model.instancetypes import ChosenOffering

    FakeCloudProvider = _compat("karpenter_policy.fakes.cloud", "karpenter_policy.cloud.fake").FakeCloudProvider
    MemoryCluster = _compat("karpenter_policy.fakes.cluster", "karpenter_policy.kube.memory").MemoryCluster
    constraints = _compat("karpenter_policy.reconcile.constraints")
    node_info = _compat("karpenter_policy.reconcile.state.nodes", "karpenter_policy.reconcile.nodes")
    templates_module = _compat("karpenter_policy.reconcile.templates")

    created = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=node_age_seconds)
    cluster = MemoryCluster(clock=lambda: created)  # nodes and pods are an hour old
    catalog = load_catalog()
    cloud = FakeCloudProvider(list(catalog.instance_types), region=REGION, wall_clock=lambda: created)
    loaded = constraints.DirectorySource(compiled).poll()
    (constraint_set,) = loaded.sets
    template = templates_module.TemplateBuilder(cloud, REGION).build(loaded.sets).template(constraint_set.name)
    fleet = Fleet(cluster, TimedCloud(cloud), compiled, options=options)
    for index in range(nodes):
        zone = ZONES[index % len(ZONES)]
        request = LaunchRequest(
            cluster_name=CLUSTER, provisioner=constraint_set.name, constraint_set_hash=constraint_set.hash,
            options=[ChosenOffering(NODE_TYPE, zone, "on-demand", 0.384)], client_token=f"bench-{index}",
            requirements=template.requirements, labels=dict(constraint_set.labels),
        )
        instance = cloud.create(request)
        node = node_info.node_object(instance, template, constraint_set, template.requirements)
        node["metadata"]["labels"]["karpenter.sh/initialized"] = "true"
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        name = cluster.create(objects.NODE, node)["metadata"]["name"]
        fleet.nodes.append(name)
        for pod in node_pods(name, pods_per_node, cpu, memory, index):
            cluster.create(objects.POD, pod)
    cluster._clock = lambda: dt.datetime.now(dt.UTC)  # from now on, real time
    cloud._wall_clock = lambda: dt.datetime.now(dt.UTC)
    return fleet


def pending_pods(count: int, cpu: str = "1", memory: str = "1Gi", prefix: str = "burst") -> list[dict[str, Any]]:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{prefix}-5d8f7", "uid": f"rs-{prefix}",
             "controller": True}
    return [
        {
            "metadata": {"name": f"{prefix}-{i}", "namespace": "default", "labels": {"app": prefix},
                         "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        }
        for i in range(count)
    ]


def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def controller_cpu() -> float:
    """CPU seconds used so far by every thread of the process but the calling one (the benchmark's, which
    writes the events): the controller's threads. Read as the process's CPU time less the caller's, so a thread
    that ended between two readings still counts (summing the live threads lost its time and could read
    negative)."""
    return time.process_time() - time.thread_time()


# --- running a baseline tree ------------------------------------------------------------------------------


def export_server_tree(ref: str) -> Path:
    """The test API server of `ref` (tests/ and benchmarks/, where scale_server.py lives) in a directory of its own
    (reused): `scale.py --server-baseline` runs it against this tree's controller."""
    target = WORK / f"server-{ref}"
    if (target / "benchmarks" / "scale_server.py").is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    archive = target / "tree.tar"
    subprocess.run(["git", "archive", "-o", str(archive), ref, "tests", "benchmarks"], cwd=REPOSITORY, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    archive.unlink()
    return target


def export_tree(ref: str) -> Path:
    """The `karpenter_policy` package of `ref` in a directory of its own (reused)."""
    target = WORK / f"baseline-{ref}"
    if (target / "karpenter_policy").is_dir():
        return target
    target.mkdir(parents=True, exist_ok=True)
    archive = target / "tree.tar"
    subprocess.run(["git", "archive", "-o", str(archive), ref, "karpenter_policy"], cwd=REPOSITORY, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    archive.unlink()
    return target


#: Set in a baseline tree's process: `without_editable_install` is to run before anything of the package imports.
BASELINE_TREE = "KARPENTER_POLICY_BENCH_BASELINE_TREE"


def without_editable_install() -> None:
    """Drop the venv's editable-install finder (setuptools' `__editable__…_finder`) from the import system. It
    resolves any `karpenter_policy.*` module a baseline tree lacks to this tree's file, so a baseline process would
    quietly run this tree's `testing` or `fakes`, and fail or measure the wrong code."""
    sys.meta_path[:] = [f for f in sys.meta_path if not str(getattr(f, "__module__", "")).startswith("__editable__")]


def run_tree(script: Path, tree: Path | None, arguments: list[str], timeout: float) -> dict[str, Any]:
    """Run `script --in-process ARGS` with `tree`'s package first on the path (None: this tree); its JSON — also
    when the run exits 1 because its answer check failed (`answer_check` in the JSON: the caller prints it), else a
    failed run ends the harness with the run's stderr."""
    environment = dict(os.environ)
    if tree is not None:
        environment["PYTHONPATH"] = f"{tree}{os.pathsep}{environment.get('PYTHONPATH', '')}"
        environment[BASELINE_TREE] = str(tree)
    done = subprocess.run(
        [sys.executable, str(script), "--in-process", *arguments], capture_output=True, text=True, env=environment,
        timeout=timeout, check=False,
    )
    if done.returncode == 1:  # a run whose answer check failed prints its figures all the same, and says so
        try:
            checked: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            checked = {}
        if str(checked.get("answer_check", "ok")) != "ok":
            return checked
    if done.returncode != 0:
        raise SystemExit(f"{script.name} {' '.join(arguments)} failed ({tree or 'this tree'}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result
