"""Builders for the tests of what happens around a launch: interruption, garbage collection, restarts.

* :class:`World`: the testing API's :class:`~karpenter_policy.testing.Scene` (one in-memory cluster and cloud on
  one virtual clock) with the kill switch and the fault injector below, on which controllers come and go — a
  restart is a fresh :class:`Controller` on the same world.
* :class:`FaultyCloud`: the in-memory cloud behind a seeded random fault injector (EC2's capacity errors,
  throttling, 500s, timeouts before or after the call acted) and a kill hook.
* :class:`HookedCluster`: the in-memory cluster with the same kill hook on every write.
* :class:`Deployment`: a ReplicaSet's stand-in (evicted pods are replaced), and :func:`run`: passes a second.

A *kill* raises :class:`Killed` (a BaseException, so no ``except Exception`` of the controller swallows it) out of
the operation under way: the controller that made the call is dropped, as a process that died there would be.
"""

from __future__ import annotations

import builtins
import datetime as dt
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.errors import CloudError, Throttled
from karpenter_policy.cloud.provider import STATE_TERMINATED, Instance, LaunchRequest, Network, NodeClassResolution
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.patches import PatchType
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import EPOCH, Scene, VirtualClock
from karpenter_policy.testing import Deployment as SceneDeployment

from .conftest import CLUSTER, REGION
from .support import FakeClock

Obj = dict[str, Any]


class Killed(BaseException):
    """The controller's process died here."""


class WallClock:
    """The wall clock of a :class:`FakeClock`: EPOCH plus its seconds (for the tests still on a FakeClock)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def __call__(self) -> dt.datetime:
        return EPOCH + dt.timedelta(seconds=self.clock.now)


class KillSwitch:
    """Counts operations (cloud calls and cluster writes; when ``only`` is given, only those so named) and raises
    Killed before or after the one numbered ``at`` from when it was armed (once)."""

    def __init__(self) -> None:
        self.count = 0
        self.at: int | None = None
        self.after = False
        self.only: str | None = None
        self.fired: str | None = None  # where it fired

    def arm(self, at: int, after: bool, only: str | None = None) -> None:
        self.count, self.at, self.after, self.only, self.fired = 0, at, after, only, None

    def check(self, operation: str, after: bool) -> None:
        if self.only is not None and operation != self.only:
            return
        if not after:
            self.count += 1
        if self.at is not None and self.count == self.at and after == self.after:
            self.at = None
            self.fired = f"{'after' if after else 'before'} {operation} #{self.count}"
            raise Killed(self.fired)


class HookedCluster(MemoryCluster):
    """The in-memory cluster; every write passes the kill switch before and after it acts."""

    def __init__(self, switch: KillSwitch, **options: Any) -> None:
        super().__init__(**options)
        self.switch = switch

    def create(self, kind: objects.Kind, obj: Obj) -> Obj:
        self.switch.check(f"create {kind.kind}", False)
        created = super().create(kind, obj)
        self.switch.check(f"create {kind.kind}", True)
        return created

    def patch(
        self,
        kind: objects.Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        self.switch.check(f"patch {kind.kind}", False)
        patched = super().patch(kind, name, patch, namespace, patch_type, subresource)
        self.switch.check(f"patch {kind.kind}", True)
        return patched

    def bind(self, namespace: str, pod_name: str, node_name: str) -> None:
        self.switch.check("bind", False)
        super().bind(namespace, pod_name, node_name)
        self.switch.check("bind", True)

    def delete(
        self, kind: objects.Kind, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        self.switch.check(f"delete {kind.kind}", False)
        super().delete(kind, name, namespace, grace_period_seconds)
        self.switch.check(f"delete {kind.kind}", True)

    def evict(self, namespace: str, pod_name: str) -> None:
        self.switch.check("evict", False)
        super().evict(namespace, pod_name)
        self.switch.check("evict", True)


class FaultyCloud:
    """A CloudProvider: the in-memory cloud, with faults drawn from ``rng`` on each call (probability
    ``rate``) and the kill switch around each call. Faults: InsufficientInstanceCapacity on the offering a
    launch would take (that pool stays empty), RequestLimitExceeded, a 500, a timeout before the call reached
    EC2, and a timeout after EC2 acted (the answer lost)."""

    FAULTS = ("capacity", "throttled", "server", "timeout", "lost")

    def __init__(self, inner: FakeCloudProvider, switch: KillSwitch, rng: random.Random, rate: float) -> None:
        self.inner = inner
        self.switch = switch
        self.rng = rng
        self.rate = rate
        self.region = inner.region
        self.injected: builtins.list[str] = []

    def _fault(self, operation: str) -> str | None:
        if self.rate <= 0 or self.rng.random() >= self.rate:
            return None
        choices = self.FAULTS if operation == "create" else self.FAULTS[1:]
        fault = self.rng.choice(choices)
        self.injected.append(f"{operation}:{fault}")
        return fault

    def _call(self, operation: str, act: Callable[[], Any], request: LaunchRequest | None = None) -> Any:
        self.switch.check(operation, False)
        fault = self._fault(operation)
        endpoint = "https://ec2.us-east-1.amazonaws.com"
        if fault == "capacity" and request is not None:
            option = next((o for o in request.options if not self.inner.unavailable.is_unavailable(
                o.instance_type, o.zone, o.capacity_type)), None)
            if option is not None:
                self.inner.fail_capacity(option.instance_type, option.zone, option.capacity_type)
        elif fault == "throttled":
            raise Throttled(endpoint, "Request limit exceeded.", operation, code="RequestLimitExceeded")
        elif fault == "server":
            raise CloudError(endpoint, "An internal error has occurred (500)", operation, code="InternalError")
        elif fault == "timeout":
            raise CloudError(endpoint, "Read timeout on endpoint URL", operation)
        answer = act()
        self.switch.check(operation, True)
        if fault == "lost":
            raise CloudError(endpoint, "Read timeout on endpoint URL (the call may have succeeded)", operation)
        return answer

    def create(self, request: LaunchRequest) -> Instance:
        instance: Instance = self._call("create", lambda: self.inner.create(request), request)
        return instance

    def delete(self, instance_id: str) -> None:
        self._call("delete", lambda: self.inner.delete(instance_id))

    def get(self, instance_id: str) -> Instance | None:
        found: Instance | None = self._call("get", lambda: self.inner.get(instance_id))
        return found

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        found: builtins.list[Instance] = self._call("list", lambda: self.inner.list(cluster_name))
        return found

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        return self.inner.instance_types(region, provider)

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        self.inner.mark_unavailable(instance_type, zone, capacity_type, reason)

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        return self.inner.current_image(instance_type, provider)

    def node_class(self, provider: Mapping[str, Any] | None) -> NodeClassResolution:
        return self.inner.node_class(provider)

    def network(self, provider: Mapping[str, Any] | None) -> Network | None:
        return self.inner.network(provider)

    def unlaunchable(self, provider: Mapping[str, Any] | None) -> str | None:
        return self.inner.unlaunchable(provider)

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        return self.inner.collect_launch_templates(cluster_name)


def fake_cloud(clock: FakeClock, names: builtins.list[str] | None = None) -> FakeCloudProvider:
    catalog = load_catalog()
    types = list(catalog.instance_types) if names is None else [t for n in names if (t := catalog.get(n)) is not None]
    return FakeCloudProvider(types, clock=clock, wall_clock=WallClock(clock))


def live_instances(cloud: FakeCloudProvider, cluster_name: str) -> builtins.list[Instance]:
    """Instances of the cluster that are not terminated (what costs money)."""
    return [i for i in cloud.list(cluster_name) if i.state != STATE_TERMINATED]


def orphans(cluster: MemoryCluster, cloud: FakeCloudProvider, cluster_name: str) -> tuple[set[str], set[str]]:
    """(instances with no Node, Nodes of ours with no live instance)."""
    nodes = cluster.list(objects.NODE).items
    node_instances = {node_info.instance_id(n): objects.name(n) for n in nodes if node_info.is_ours(n)}
    instances = {i.id for i in live_instances(cloud, cluster_name)}
    return instances - set(node_instances), {name for i, name in node_instances.items() if i not in instances}


class World(Scene):
    """The testing API's scene with a kill switch on every cluster write and cloud call and a seeded fault
    injector in front of the cloud; controllers come and go on it (a restart is a fresh :meth:`controller`).
    ``seed`` and ``fault_rate`` drive the cloud's faults (none by default)."""

    def __init__(
        self, compiled: Path, *, seed: int = 0, fault_rate: float = 0.0, types: builtins.list[str] | None = None
    ) -> None:
        clock = VirtualClock(EPOCH)
        self.switch = KillSwitch()
        self.rng = random.Random(seed)
        self.inner = fake_cloud(clock, types)
        super().__init__(
            compiled, cluster=HookedCluster(self.switch, clock=clock.wall), clock=clock, cluster_name=CLUSTER,
            cloud=FaultyCloud(self.inner, self.switch, self.rng, fault_rate),
        )
        self.wall = clock.wall
        self.compiled = compiled

    def controller(self, **options: Any) -> Controller:
        return Controller(
            self.cluster, self.cloud, DirectorySource(self.compiled), self.options(**options), region=REGION,
            clock=self.clock, wall_clock=self.clock.wall,
        )

    def orphans(self) -> tuple[set[str], set[str]]:
        return orphans(self.cluster, self.inner, CLUSTER)

    def launch_outside(self, provisioner: str, token: str) -> Instance:
        """An instance tagged for the cluster as if a controller launched it (for a provisioner and a
        constraint set of our choosing)."""
        option = ChosenOffering("m5.xlarge", "us-east-1a", "on-demand", 0.192)
        request = LaunchRequest(
            cluster_name=CLUSTER, provisioner=provisioner, constraint_set_hash="0" * 64, options=[option],
            client_token=token,
        )
        return self.inner.create(request)


class Deployment(SceneDeployment):
    """A ReplicaSet's stand-in of one vCPU pods (`app-<n>`), replacing any that is evicted."""

    def __init__(self, world: World, app: str, count: int, cpu: str = "1") -> None:
        super().__init__(world, app, count, cpu=cpu)
        self.world = world

    @property
    def count(self) -> int:
        return self.replicas

    @count.setter
    def count(self, value: int) -> None:
        self.replicas = value  # what `restore` keeps, without creating or deleting now


def run(world: World, controller: Controller, deployment: Deployment, seconds: int,
        until: Callable[[], bool] | None = None) -> list[ReconcileResult]:
    """One step a second (kubelets, the ReplicaSet, the controller) for `seconds` or until `until()` holds."""
    results = []
    for _ in range(seconds):
        world.kubelet.sync()
        deployment.restore()
        results.append(controller.reconcile_once())
        world.kubelet.sync()
        if until is not None and until():
            break
        world.clock.advance(1)
    return results


def nodes(world: World) -> dict[str, dict[str, object]]:
    return {objects.name(n): n for n in world.cluster.list(objects.NODE).items}


def settled(world: World) -> bool:
    return world.settled()


def start(world: World, pods: int, **options: object) -> tuple[Controller, Deployment]:
    controller = world.controller(batch_max=5.0, **options)
    deployment = Deployment(world, "inflate", pods)
    run(world, controller, deployment, 120, lambda: settled(world) and all(
        node_info.is_initialized(n) for n in nodes(world).values()))
    assert not world.unbound() and nodes(world)
    return controller, deployment
