"""A scene to run the controllers on: constraint sets, a cluster, a cloud, one clock, and builders for what a test,
a benchmark or a simulation puts in it.

    scene = Scene(compile_policies("examples/workloads/policies"))  # karpenter_policy.testing compiles them
    node = scene.add_node("default", "m5.xlarge", zone="us-east-1b", age=3600)
    scene.add_pods("web", 3, cpu="500m", node=node)                   # running there
    scene.add_pdb("web", {"app": "web"}, min_available=2)
    scene.add_static_pod("kube-proxy", node)                        # a mirror pod, owned by the Node
    scene.add_pod("job", node=node, lingers=True)                     # evicted, it stays terminating …
    scene.finish_pod("job")                                           # … until its kubelet says it stopped
    web = scene.add_deployment("api", 4, cpu="1")                     # a ReplicaSet's stand-in
    controller = scene.controller(consolidation_validation=15)
    scene.run(controller, 120, until=lambda: not scene.unbound())    # virtual seconds: no waiting

What a scene holds:

* **the cluster** — the in-memory API server (:class:`~karpenter_policy.fakes.cluster.MemoryCluster`), with the
  kubelets' stand-in (:class:`~karpenter_policy.simulate.kubelet.FakeKubelet`) making launched nodes Ready
  `node_startup` seconds after they appear and their pods Running — except instances of the types in
  `never_join`, whose kubelet never joins (a bad AMI or user data: the Node stays as registered, marked Ready
  `Unknown` by the node lifecycle controller's stand-in, and its pods never start);
* **the cloud** — the in-memory one selling the embedded catalog (or `types`), or any
  :class:`~karpenter_policy.cloud.provider.CloudProvider` given (moto's EC2: :func:`moto_cloud`);
* **the clock** — a :class:`VirtualClock` every part reads (monotonic seconds and the wall clock they stand
  for), so a batch window, a TTL or a disruption budget passes in virtual time; or the real clock
  (`real_time=True`) for the threaded runner (:meth:`Scene.runner`).

Builders (`add_*`) create objects as the API would hold them: nodes of ours registered as the controller registers
them (its instance launched in the cloud first, then its Node from the provisioner's template, Ready and
initialized, backdated by `age`; `drifted` as if its provisioner had changed since; extra `finalizers` that hold
its deletion), nodes that are not ours (:meth:`Scene.add_unmanaged_node`: a managed node group's), pods with
requests, owners, labels, annotations, priority, affinity and tolerations, bound to a node or pending (marked
Unschedulable by kube-scheduler when asked), Ready or not — and pods that linger terminating once deleted until
finished (or for ever: stuck terminating), static pods' mirrors owned by their Node —, PodDisruptionBudgets,
DaemonSets, and deployments that replace evicted pods. The cloud sells the catalog's types (`types`: some of them
by name) or instance types given as they are — :func:`instance_type` makes one with the offerings, prices and
availability a test needs. :meth:`Scene.slow_decisions` makes every scheduling simulation of a disruption decision
take virtual time, to exercise the decisions' time budgets. Knobs for what a scene must go wrong or be seen:
nodes that never initialize or lack the termination finalizer, pods with exact owner references, offerings
unavailable from the start (`unavailable`), launches that fail (:meth:`Scene.fail_launches`,
:meth:`Scene.fail_next_launch`), an instance stopped or terminated from outside (:meth:`Scene.stop_instance`),
every eviction recorded with its answer (:meth:`Scene.record_evictions`), an action in the middle of a step when a
controller writes something (:meth:`Scene.on_call`), and an interruption queue (:attr:`Scene.queue`). Readers
answer what tests look at (:meth:`Scene.metric`, :meth:`Scene.unavailable_offerings` among them). The scene imports
test-only parts (the in-memory cluster and cloud): production code never imports it (an import-linter contract).
Simulations (`simulate`, the soak) run on a scene with moto's EC2
(:class:`~karpenter_policy.simulate.aws.MotoCloud`); :mod:`karpenter_policy.testing` is its public face for
tests and benchmarks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from karpenter_policy.api.constraintset import ConstraintSetError
from karpenter_policy.api.v1.statichash import NODEPOOL_HASH
from karpenter_policy.api.workloads import WORKLOAD_KINDS
from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.errors import CloudError, InsufficientCapacity
from karpenter_policy.cloud.provider import STATE_TERMINATED, CloudProvider, Instance, LaunchRequest
from karpenter_policy.cloud.queue import InterruptionQueue
from karpenter_policy.cloud.unavailable import UnavailableOfferings
from karpenter_policy.fakes.cloud import ENDPOINT, INSUFFICIENT_CAPACITY, FakeCloudProvider
from karpenter_policy.fakes.cluster import ClusterCall, MemoryCluster
from karpenter_policy.fakes.queue import FakeQueue
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType, Offering
from karpenter_policy.model.taints import Taint, is_unregistered
from karpenter_policy.reconcile.constraints import ConstraintSource, DirectorySource, FixedSource, Loaded
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.runner import Runner, assemble
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.templates import TemplateBuilder, Templates
from karpenter_policy.simulate.clock import VirtualClock
from karpenter_policy.simulate.kubelet import FakeKubelet
from karpenter_policy.simulate.versions import SceneSource, read_version

CLUSTER = "testing"
REGION = "us-east-1"
#: The finalizer that holds a lingering pod (`Scene.add_pod(lingers=True)`) once deleted, until `Scene.finish_pod`.
LINGER_FINALIZER = "testing.karpenter-policy/lingers"
#: The startup taint of a node that never initializes (`Scene.add_node(never_initialized=True)`): no daemon ever
#: removes it.
NEVER_INITIALIZED_TAINT = {"key": "testing.karpenter-policy/never-initialized", "effect": "NoSchedule"}
#: The annotation the kubelet puts on a static pod's mirror.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_OWNER_API_VERSIONS = {"Node": "v1"} | {kind: known.api_version for kind, known in WORKLOAD_KINDS.items()}
#: Where a scene's wall clock starts (a fixed moment: reproducible timestamps and log lines).
EPOCH = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def instance_type(name: str, offerings: Sequence[tuple[str, str, float | None] | Offering]) -> InstanceType:
    """The catalog's type `name` sold only at `offerings` — each an :class:`Offering` or (zone, capacity type,
    price), available — for scenes that need prices or availability the catalog does not have."""
    found = load_catalog().get(name)
    if found is None:
        raise ValueError(f"no instance type {name} in the catalog")
    sold = tuple(o if isinstance(o, Offering) else Offering(*o) for o in offerings)
    return dataclasses.replace(found, offerings=sold)


class RealClock:
    """The real clock, with the interface of :class:`VirtualClock` (for :meth:`Scene.runner`)."""

    def __call__(self) -> float:
        import time

        return time.monotonic()

    def wall(self) -> dt.datetime:
        """The wall clock now (UTC)."""
        return dt.datetime.now(dt.UTC)

    @property
    def now(self) -> float:
        """Monotonic seconds now."""
        return self()

    def advance_to(self, moment: float) -> None:
        """Refused: the real clock cannot be moved."""
        raise RuntimeError("the real clock moves by itself")

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        import time

        time.sleep(seconds)


class Deployment:
    """A ReplicaSet's stand-in: keeps `replicas` live pods `<app>-<n>` (labels `app: <app>`), creating new ones
    for those evicted or deleted (:meth:`restore`, which :meth:`Scene.run` calls every step)."""

    def __init__(self, scene: Scene, app: str, replicas: int, namespace: str = "default", **pod: Any) -> None:
        self.scene, self.app, self.namespace, self.pod = scene, app, namespace, pod
        self.replicas = 0
        self._next = itertools.count()
        self.scale(replicas)

    def live(self) -> list[Obj]:
        """Its pods not being deleted."""
        return [p for p in self.scene.cluster.list(objects.POD, self.namespace).items
                if objects.labels(p).get("app") == self.app and not objects.is_deleting(p)
                and objects.labels(p).get("scene/deployment") == self.app]

    def scale(self, replicas: int) -> None:
        """Keep `replicas` pods: those of the highest ordinals beyond that deleted, new ones created for the missing."""
        self.replicas = replicas
        live = sorted(self.live(), key=lambda p: int(objects.name(p).rsplit("-", 1)[1]))
        for pod in live[replicas:]:
            self.scene.cluster.delete(objects.POD, objects.name(pod), self.namespace)
        for _ in range(replicas - len(live)):
            labels = {"app": self.app, "scene/deployment": self.app, **dict(self.pod.get("labels") or {})}
            options = {**self.pod, "labels": labels, "owner": ("ReplicaSet", f"{self.app}-5d8f7c9b4")}
            self.scene.add_pod(f"{self.app}-{next(self._next)}", namespace=self.namespace, **options)

    def restore(self) -> None:
        """Recreate the pods evicted or deleted since (what a ReplicaSet controller does)."""
        self.scale(self.replicas)


class Scene:
    """See the module docstring."""

    def __init__(
        self,
        constraints: str | Path | Loaded,
        *,
        cloud: CloudProvider | None = None,
        types: Sequence[str | InstanceType] | None = None,
        region: str = REGION,
        cluster_name: str = CLUSTER,
        real_time: bool = False,
        node_startup: float = 0.0,
        cluster: MemoryCluster | None = None,
        clock: VirtualClock | None = None,
        never_join: Sequence[str] = (),
        unavailable: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        if isinstance(constraints, Loaded):
            self.source: ConstraintSource = FixedSource(constraints)
            self._loaded: Loaded | None = constraints
        else:
            self.source = SceneSource(constraints)
            self._loaded = None
        self.region = region
        self.cluster_name = cluster_name
        self.clock: VirtualClock | RealClock = RealClock() if real_time else clock or VirtualClock(EPOCH)
        self.cluster = cluster or MemoryCluster(clock=self.clock.wall)
        if cloud is None:
            catalog = load_catalog()
            chosen = list(catalog.instance_types) if types is None else [
                t for name in types
                if (t := name if isinstance(name, InstanceType) else catalog.get(name)) is not None
            ]
            cloud = FakeCloudProvider(chosen, region=region, clock=self.clock, wall_clock=self.clock.wall)
        self.cloud = cloud
        for offering in unavailable:  # (type, zone, capacity type): as an insufficient-capacity answer marks one
            cloud.mark_unavailable(*offering, INSUFFICIENT_CAPACITY)
        self.kubelet = FakeKubelet(self.cluster, self.clock, ready_after=node_startup, never_join=never_join)
        self.deployments: list[Deployment] = []
        self._names = itertools.count(1)
        self._templates: tuple[Loaded, Templates] | None = None
        self._queue: FakeQueue | None = None
        self._controllers: list[Controller] = []  # those `controller()` made, closed by `close()`

    @property
    def loaded(self) -> Loaded:
        """The constraint sets of the scene, as the controller loads them."""
        if self._loaded is None:
            assert isinstance(self.source, DirectorySource)
            try:
                self._loaded = read_version(self.source.directory)
            except ConstraintSetError as error:
                raise ValueError(f"{self.source.directory}: the constraint sets do not load: {error}") from None
        return self._loaded

    # --- builders ------------------------------------------------------------------------------------------

    def add_node(
        self,
        provisioner: str,
        instance_type: str,
        *,
        zone: str | None = None,
        capacity_type: str = "on-demand",
        age: float = 0.0,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str | None] | None = None,
        taints: Sequence[Mapping[str, str]] | None = None,
        ready: bool = True,
        initialized: bool = True,
        price: float | None = None,
        drifted: bool = False,
        finalizers: Sequence[str] = (),
        finalizer: bool = True,
        never_initialized: bool = False,
    ) -> str:
        """A node of ours, as the controller registers one: its instance launched in the cloud first (in `zone`,
        default the provisioner's first allowed), its Node from the provisioner's template, Ready and labelled
        initialized unless told otherwise (not `ready`: its kubelet joined and reports it NotReady — unless its
        type is one of the scene's `never_join`: then its kubelet never joined), created `age` seconds ago.
        `annotations` None values remove one the controller would set; `drifted`: stamped with another node hash
        than its provisioner's (as if the provisioner's labels, taints, kubelet or node template had changed since
        it was launched); `finalizers`: more finalizers than the controller's (its deletion waits for them);
        `finalizer` False: without the controller's termination finalizer (as a Node another tool created, or one
        whose finalizer someone removed); `never_initialized`: Ready but never initialized — it carries a startup
        taint (:data:`NEVER_INITIALIZED_TAINT`, listed as one the controller registered it with) that no daemon
        ever removes. A NodePool's node whose kubelet joined is registered (without `karpenter.sh/unregistered`,
        labelled `karpenter.sh/registered`). The Node's name."""
        constraint_set = next((s for s in self.loaded.sets if s.pool == provisioner), None)
        if constraint_set is None:
            raise ValueError(f"no provisioner {provisioner} in {self.source.description}")
        template = self._claim_templates().template(provisioner)
        if zone is None:
            allowed = template.zone
            zone = sorted(allowed.values)[0] if not allowed.complement and allowed.values else f"{self.region}a"
        request = LaunchRequest(
            cluster_name=self.cluster_name, provisioner=provisioner, constraint_set_hash=constraint_set.hash,
            options=[ChosenOffering(instance_type, zone, capacity_type, price)],
            client_token=f"scene-{next(self._names)}", requirements=template.requirements,
            labels=dict(constraint_set.labels),
        )
        instance = self.cloud.create(request)
        node = node_info.node_object(instance, template, constraint_set, template.requirements)
        meta = node["metadata"]
        meta["labels"].update(labels or {})
        for key, value in (annotations or {}).items():
            if value is None:
                meta["annotations"].pop(key, None)
            else:
                meta["annotations"][key] = value
        if drifted:  # a Provisioner's node by v0.31's node hash, a NodePool's by v1's static hash
            meta["annotations"][node_info.ANNOTATION_NODE_HASH] = "drifted"
            if NODEPOOL_HASH in meta["annotations"]:
                meta["annotations"][NODEPOOL_HASH] = "drifted"
        if finalizers:
            meta["finalizers"] = [*meta.get("finalizers", []), *finalizers]
        if not finalizer:
            meta["finalizers"] = [f for f in meta.get("finalizers", []) if f != wk.TERMINATION_FINALIZER]
        if never_initialized:
            listed = json.loads(meta["annotations"].get(node_info.ANNOTATION_STARTUP_TAINTS) or "[]")
            meta["annotations"][node_info.ANNOTATION_STARTUP_TAINTS] = json.dumps(
                [*listed, NEVER_INITIALIZED_TAINT], sort_keys=True)
            taints = [*(taints or ()), NEVER_INITIALIZED_TAINT]
            initialized = False
        if taints:
            node["spec"]["taints"] = [*node["spec"].get("taints", []), *taints]
        if ready:
            node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        elif instance_type not in self.kubelet.never_join:  # its kubelet joined: NotReady
            node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        if constraint_set.is_nodepool and (ready or instance_type not in self.kubelet.never_join):
            # its kubelet joined: registered, as v1.14.1's registration leaves a NodePool's node
            kept = [t for t in node["spec"].get("taints", []) if not is_unregistered(Taint.from_api(t))]
            node["spec"]["taints"] = kept
            if not kept:
                del node["spec"]["taints"]
            meta["labels"][wk.REGISTERED] = "true"
        if ready and initialized:
            meta["labels"][wk.INITIALIZED] = "true"
            startup = {(t.key, t.effect) for t in constraint_set.startup_taints}
            kept = [t for t in node["spec"].get("taints", []) if (t.get("key"), t.get("effect")) not in startup]
            node["spec"]["taints"] = kept
            if not kept:
                del node["spec"]["taints"]
        with self._backdated(age):
            created = self.cluster.create(objects.NODE, node)
        return objects.name(created)

    def _claim_templates(self) -> Templates:
        """The node claim templates of the scene's constraint sets (built once per version)."""
        loaded = self.loaded
        if self._templates is None or self._templates[0] is not loaded:
            self._templates = (loaded, TemplateBuilder(self.cloud, self.region).build(loaded.sets))
        return self._templates[1]

    def add_unmanaged_node(
        self,
        name: str,
        *,
        cpu: str = "32",
        memory: str = "128Gi",
        pods: str = "110",
        zone: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """A Ready node the controller did not launch (a managed node group's, static capacity): its pods count,
        the controller never writes to it. The Node's name."""
        zone = zone or f"{self.region}a"
        resources = {"cpu": cpu, "memory": memory, "pods": pods}
        node = {
            "metadata": {"name": name, "labels": {wk.HOSTNAME: name, wk.ZONE: zone, wk.REGION: self.region,
                                                  "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                                                  **dict(labels or {})}},
            "spec": {"providerID": f"aws:///{zone}/i-unmanaged-{name}"},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }
        return objects.name(self.cluster.create(objects.NODE, node))

    def add_pod(
        self,
        name: str,
        *,
        namespace: str = "default",
        cpu: str | None = "100m",
        memory: str | None = None,
        node: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        owner: tuple[str, str] | None = ("ReplicaSet", "app-5d8f7c9b4"),
        owner_references: Sequence[Mapping[str, Any]] | None = None,
        priority: int | None = None,
        priority_class: str | None = None,
        phase: str | None = None,
        age: float = 0.0,
        lingers: bool = False,
        ready: bool | None = None,
        unschedulable: bool = False,
        started: float | None = None,
        **spec: Any,
    ) -> Obj:
        """A pod: pending (`unschedulable`: marked so by kube-scheduler, `PodScheduled=False`), or bound to `node`
        (Running unless `phase` says otherwise; Ready when Running unless `ready` says otherwise); other pod-spec
        fields (`affinity`, `tolerations`, `nodeSelector`, `topologySpreadConstraints` …) as given. `owner` is its
        controller (kind, name), of the API group its kind belongs to (`Node`: v1, `Job`: batch/v1, others
        apps/v1); `owner_references` instead: the pod's ownerReferences exactly as given (several owners, none a
        controller, another apiVersion, no uid …).

        `lingers`: deleting or evicting it does not remove it at once (the in-memory cluster's default) but leaves
        it terminating — a deletionTimestamp, still bound — as a real pod is while its kubelet stops it, until
        :meth:`finish_pod` (the kubelet saying it stopped); never finished, it stays terminating for ever, as
        behind a kubelet that no longer answers. (The scene holds it with a finalizer of its own,
        :data:`LINGER_FINALIZER`.)

        `started`: a bound pod's `status.startTime`, that many seconds before now (none unless given)."""
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                     "annotations": dict(annotations or {})}
        if owner_references is not None:
            meta["ownerReferences"] = [dict(reference) for reference in owner_references]
        elif owner is not None:
            meta["ownerReferences"] = [{"apiVersion": _OWNER_API_VERSIONS.get(owner[0], "apps/v1"), "kind": owner[0],
                                        "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}]
        if lingers:
            meta["finalizers"] = [LINGER_FINALIZER]
        body: Obj = {"containers": [{"name": "app", "image": "registry.example/app:1",
                                     "resources": {"requests": requests} if requests else {}}], **spec}
        if node is not None:
            body["nodeName"] = node
        if priority is not None:
            body["priority"] = priority
        if priority_class is not None:
            body["priorityClassName"] = priority_class
        pod: Obj = {"metadata": meta, "spec": body}
        if node is not None or phase is not None:
            running = (phase or "Running") == "Running"
            is_ready = running if ready is None else ready
            pod["status"] = {"phase": phase or "Running",
                             "conditions": [{"type": "Ready", "status": "True" if is_ready else "False"}]}
            if started is not None:
                began = self.clock.wall() - dt.timedelta(seconds=started)
                pod["status"]["startTime"] = began.strftime("%Y-%m-%dT%H:%M:%SZ")
        elif unschedulable:
            pod["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        with self._backdated(age):
            return self.cluster.create(objects.POD, pod)

    def add_static_pod(self, name: str, node: str, *, namespace: str = "kube-system", **options: Any) -> Obj:
        """A static pod's mirror on `node`, as its kubelet creates it: owned by the Node (an owner reference of
        apiVersion v1, kind Node, with the Node's uid) and annotated `kubernetes.io/config.mirror`. Other options as
        :meth:`add_pod`'s."""
        found = self.node(node)
        if found is None:
            raise ValueError(f"no node {node}")
        annotations = {MIRROR_ANNOTATION: f"mirror-{name}", **dict(options.pop("annotations", None) or {})}
        pod = self.add_pod(name, namespace=namespace, node=node, owner=None, annotations=annotations, **options)
        reference = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": objects.uid(found), "controller": True}
        patch = {"metadata": {"ownerReferences": [reference], "resourceVersion": objects.resource_version(pod)}}
        return self.cluster.patch(objects.POD, name, patch, namespace)

    def finish_pod(self, name: str, namespace: str = "default") -> None:
        """A lingering pod (`add_pod(lingers=True)`) being deleted has stopped: it goes. A pod not being deleted
        yet is deleted and goes at once (what a force deletion does)."""
        pod = self.cluster.get(objects.POD, name, namespace)
        if pod is None:
            return
        remaining = [f for f in objects.finalizers(pod) if f != LINGER_FINALIZER]
        patch = {"metadata": {"finalizers": remaining or None, "resourceVersion": objects.resource_version(pod)}}
        self.cluster.patch(objects.POD, name, patch, namespace)
        if self.cluster.get(objects.POD, name, namespace) is not None:
            self.cluster.delete(objects.POD, name, namespace)

    def add_pods(self, prefix: str, count: int, **options: Any) -> list[Obj]:
        """`count` pods `<prefix>-<n>` with the same options (labels default to `app: <prefix>`)."""
        options.setdefault("labels", {"app": prefix})
        return [self.add_pod(f"{prefix}-{i}", **options) for i in range(count)]

    def add_deployment(self, app: str, replicas: int, **pod: Any) -> Deployment:
        """A Deployment stand-in of `replicas` pods (options as :meth:`add_pod`'s) that :meth:`step` keeps at its
        size."""
        deployment = Deployment(self, app, replicas, **pod)
        self.deployments.append(deployment)
        return deployment

    def add_pdb(
        self,
        name: str,
        selector: Mapping[str, str],
        *,
        namespace: str = "default",
        min_available: int | str | None = None,
        max_unavailable: int | str | None = None,
        unhealthy_pod_eviction_policy: str | None = None,
    ) -> Obj:
        """A PodDisruptionBudget over the pods `selector` matches, with `min_available` or `max_unavailable` (a number
        or a percentage)."""
        spec: Obj = {"selector": {"matchLabels": dict(selector)}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        if unhealthy_pod_eviction_policy is not None:
            spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
        return self.cluster.create(objects.POD_DISRUPTION_BUDGET,
                                   {"metadata": {"name": name, "namespace": namespace}, "spec": spec})

    def add_daemon_set(
        self, name: str, *, namespace: str = "kube-system", cpu: str = "100m", memory: str = "128Mi", **spec: Any
    ) -> Obj:
        """A DaemonSet whose pods request `cpu` and `memory` (its overhead counts on every node it fits); other pod-spec
        fields as given."""
        template = {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": name, "image": "registry.example/agent:1",
                                             "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}
        return self.cluster.create(objects.DAEMON_SET, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
        })

    # --- what goes wrong, from outside ---------------------------------------------------------------------

    def fail_launches(
        self, instance_type: str, zone: str, capacity_type: str, code: str = INSUFFICIENT_CAPACITY
    ) -> None:
        """From now on every launch of this offering fails with `code` (EC2's error code; insufficient capacity by
        default) — the cloud then marks it unavailable, as the real one does — until :meth:`restore_launches`.
        The in-memory cloud only."""
        self._fake_cloud().fail_capacity(instance_type, zone, capacity_type, code)

    def restore_launches(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """The offering launches again (after :meth:`fail_launches`)."""
        self._fake_cloud().restore_capacity(instance_type, zone, capacity_type)

    def fail_next_launch(self, error: CloudError | None = None) -> None:
        """The next launch request fails as a whole with `error` (by default: no capacity for any of its
        offerings). The in-memory cloud only."""
        self._fake_cloud().fail_next("create", error or InsufficientCapacity(ENDPOINT, []))

    def stop_instance(self, node_or_instance: str, state: str = STATE_TERMINATED) -> None:
        """Someone outside the controller stops or terminates an instance (by its Node's name or its id): the
        cloud reports it in `state` (`stopping`, `stopped`, `shutting-down`, `terminated` …) from now on; the Node
        stays until the controller acts. The in-memory cloud only."""
        found = self.node(node_or_instance)
        instance_id = node_info.instance_id(found) if found is not None else node_or_instance
        self._fake_cloud().set_state(instance_id, state)

    def _fake_cloud(self) -> FakeCloudProvider:
        if not isinstance(self.cloud, FakeCloudProvider):
            raise TypeError(f"this knob needs the in-memory cloud, not {type(self.cloud).__name__}")
        return self.cloud

    def record_evictions(self) -> list[ClusterCall]:
        """Every Eviction asked of the cluster from now on, with its answer (`allowed`, or the error: 429 when a
        PodDisruptionBudget refuses it), in order, in the list returned (it fills as the controllers run)."""
        calls: list[ClusterCall] = []
        self.on_call("evict", calls.append)
        return calls

    def on_call(
        self, verb: str, action: Callable[[ClusterCall], None], kind: objects.Kind | None = None, *, once: bool = False
    ) -> Callable[[], None]:
        """Run `action` each time (or the first time, `once`) a write `verb` — create, update, patch, delete, bind,
        evict — of `kind` (any kind by default) is made to the cluster, right after it, in the middle of the step
        that made it: what happens meanwhile (a pod scheduling while a decision waits, a user deleting a Node
        while it drains). Writes made by `action` are not seen. The in-memory cluster only. The function that
        stops it."""
        fired = False

        def observer(call: ClusterCall) -> None:
            nonlocal fired
            if call.verb != verb or (kind is not None and call.kind != kind) or (once and fired):
                return
            fired = True
            action(call)

        return self.cluster.observe(observer)

    @property
    def queue(self) -> FakeQueue:
        """The scene's interruption queue (in memory, SQS's visibility rules, on the scene's clock): send it
        EventBridge messages (:mod:`karpenter_policy.fakes.eventbridge`), read what is left (`visible()`) and
        what was handled and deleted (`deleted`)."""
        if self._queue is None:
            self._queue = FakeQueue(clock=self.clock)
        return self._queue

    def _backdated(self, age: float) -> contextlib.AbstractContextManager[None]:
        """Objects created inside are stamped `age` seconds before now (a cluster over HTTP stamps its own time:
        only an age of 0 there)."""
        wall = self.clock.wall
        if not hasattr(self.cluster, "stamping"):
            if age:
                raise ValueError("a cluster over HTTP stamps its own creation times: no age")
            return contextlib.nullcontext()
        return self.cluster.stamping(lambda: wall() - dt.timedelta(seconds=age))

    # --- controllers ---------------------------------------------------------------------------------------

    def options(self, **options: Any) -> ControllerOptions:
        """The controller options of the scene (its cluster name; launches one at a time unless told, for reproducible
        instance ids)."""
        options.setdefault("launch_parallelism", 1)  # launches in plan order: reproducible instance ids and logs
        return ControllerOptions(cluster_name=self.cluster_name, **options)

    def controller(self, interruption_queue: InterruptionQueue | None = None, **options: Any) -> Controller:
        """A controller on the scene, in the scene's time, its constraint sets loaded. Its interruption controller
        takes the messages of `interruption_queue` at every step — by default of the scene's own `queue`, once the
        scene has one (a test that read `scene.queue` before building the controller); with neither, the
        controller has no interruption controller, as `reconcile` without --interruption-queue."""
        queue = interruption_queue if interruption_queue is not None else self._queue
        controller = Controller(
            self.cluster, self.cloud, self.source, self.options(**options), region=self.region,
            clock=self.clock, wall_clock=self.clock.wall, interruption_queue=queue,
        )
        controller.refresh_constraint_sets()
        self._controllers.append(controller)
        return controller

    def close(self) -> None:
        """Close the controllers :meth:`controller` made (`Controller.close`: a scene over an API server on HTTP has
        them start a VolumeAttachment informer when a node is terminated); also the end of a ``with Scene(...)``."""
        for controller in self._controllers:
            controller.close()

    def __enter__(self) -> Scene:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def step(self, controller: Controller) -> ReconcileResult:
        """The kubelets, the deployments, one step of every controller (`Controller.reconcile_once`: the list
        production's threads run, interruption included when the controller has a queue), the kubelets again."""
        self.kubelet.sync()
        for deployment in self.deployments:
            deployment.restore()
        result = controller.reconcile_once()
        self.kubelet.sync()
        return result

    def run(
        self,
        controller: Controller,
        seconds: float,
        until: Callable[[], bool] | None = None,
        every: float = 1.0,
    ) -> list[ReconcileResult]:
        """A step every `every` virtual seconds for `seconds`, or until `until()` holds."""
        if isinstance(self.clock, RealClock):
            raise RuntimeError("a real-time scene runs its controllers with runner()")
        results = []
        end = self.clock.now + seconds
        while self.clock.now <= end:
            results.append(self.step(controller))
            if until is not None and until():
                break
            self.clock.advance_to(self.clock.now + every)
        return results

    def wait(self, until: Callable[[], bool], seconds: float = 30.0, every: float = 0.01) -> bool:
        """In a real-time scene (the threaded runner acting), whether `until()` came to hold within `seconds`,
        looked at every `every` seconds; in a virtual-time one, whether it holds now (nothing moves by itself)."""
        if not isinstance(self.clock, RealClock):
            return until()
        deadline = self.clock.now + seconds
        while not until():
            if self.clock.now >= deadline:
                return until()
            self.clock.sleep(every)
        return True

    def advance(self, seconds: float) -> None:
        """Move the scene's clock (a virtual one) forward."""
        self.clock.advance_to(self.clock.now + seconds)

    def slow_decisions(self, controller: Controller, seconds: float) -> None:
        """From now on every scheduling simulation of the controller's disruption decisions takes `seconds` of the
        scene's virtual time (a cluster large enough for a decision to meet its time budgets)."""
        decider = controller.disruption.deprovisioner.decider
        simulate = decider.simulate
        clock = self.clock

        def slow(*args: Any, **kwargs: Any) -> Any:
            clock.advance_to(clock.now + seconds)
            return simulate(*args, **kwargs)

        decider.simulate = slow  # type: ignore[method-assign]

    def settled(self) -> bool:
        """Every pod bound, no node being deleted."""
        return not self.unbound() and not any(objects.is_deleting(n) for n in self.nodes().values())

    @contextlib.contextmanager
    def runner(self, **options: Any) -> Iterator[Runner]:
        """The threaded runner on the scene, in real time (a scene made with `real_time=True`), until the block
        ends."""
        if not isinstance(self.clock, RealClock):
            raise RuntimeError("the threaded runner needs a scene in real time (real_time=True)")
        resync = options.pop("resync", 2.0)
        elector = options.pop("elector", None)
        runner = assemble(
            self.cluster, self.cloud, self.source, self.options(**options), region=self.region, resync=resync,
            elector=elector,
        )
        thread = threading.Thread(target=runner.run, name="scene-runner", daemon=True)
        thread.start()
        try:
            yield runner
        finally:
            runner.stop()
            thread.join(60)

    # --- what tests look at --------------------------------------------------------------------------------

    def nodes(self) -> dict[str, Obj]:
        """Every Node, by name."""
        return {objects.name(n): n for n in self.cluster.list(objects.NODE).items}

    def node(self, name: str) -> Obj | None:
        """The Node, None when there is none."""
        return self.cluster.get(objects.NODE, name)

    def nodeclaims(self) -> dict[str, Obj]:
        """Every NodeClaim (`karpenter.sh/v1`: the controller makes one per launch for a NodePool), by name."""
        return {objects.name(c): c for c in self.cluster.list(objects.NODE_CLAIM).items}

    def pods(self, namespace: str | None = None) -> list[Obj]:
        """Every pod (of `namespace` when given)."""
        return self.cluster.list(objects.POD, namespace).items

    def unbound(self) -> list[str]:
        """Keys of the pods not bound to a node (terminal ones aside)."""
        return [f"{objects.namespace(p)}/{objects.name(p)}" for p in self.pods()
                if not (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") not in wk.TERMINAL_PHASES]

    def pods_on(self, node: str) -> list[str]:
        """The names of the pods bound to `node`, sorted."""
        return sorted(objects.name(p) for p in self.pods() if (p.get("spec") or {}).get("nodeName") == node)

    def events(self, reason: str | None = None) -> list[Obj]:
        """The Kubernetes Events recorded (those of `reason` when given)."""
        return [e for e in self.cluster.list(objects.EVENT).items if reason is None or e.get("reason") == reason]

    def instances(self) -> list[Instance]:
        """The cloud's instances of the scene's cluster that are not terminated."""
        return [i for i in self.cloud.list(self.cluster_name) if i.state != STATE_TERMINATED]

    def unavailable_offerings(self) -> dict[tuple[str, str, str], str]:
        """The offerings (instance type, zone, capacity type) the cloud holds unavailable now, with why."""
        cache = getattr(self.cloud, "unavailable", None)
        return dict(cache.active()) if isinstance(cache, UnavailableOfferings) else {}

    @staticmethod
    def metric(controller: Controller, name: str, **labels: str) -> float | None:
        """A sample of the controller's metrics (`name` as exposed, e.g. `karpenter_nodes_terminated_total`, and
        its labels): its value, None when there is no such sample."""
        return controller.metrics.registry.get_sample_value(name, labels)


__all__ = [
    "CLUSTER",
    "EPOCH",
    "LINGER_FINALIZER",
    "MIRROR_ANNOTATION",
    "NEVER_INITIALIZED_TAINT",
    "REGION",
    "Deployment",
    "RealClock",
    "Scene",
    "instance_type",
]
