"""The threaded runner in real time: informers feed it, a pod burst is one batch, a ConfigMap change is taken
while it runs, and stop() ends it. Bounds are generous: these tests check behaviour, not speed."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import Unavailable
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.reconcile.constraints import ConfigMapSource, DirectorySource
from karpenter_policy.reconcile.controller import Controller, ControllerOptions
from karpenter_policy.reconcile.runner import Runner, assemble, run_in_thread

from .conftest import CLUSTER, REGION, fake_cloud
from .support import FakeClock, create_all, daemon_set, inflate

GENEROUS = 20.0


def eventually(predicate: Callable[[], bool], timeout: float = GENEROUS) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def unbound(cluster: MemoryCluster) -> list[str]:
    return [objects.name(p) for p in cluster.list(objects.POD).items if not p["spec"].get("nodeName")]


@pytest.fixture()
def running(compiled: Path, log: Any) -> Iterator[Callable[..., tuple[MemoryCluster, Controller, Runner]]]:
    started: list[tuple[Runner, threading.Thread]] = []

    def start(
        source: Any = None, cluster: MemoryCluster | None = None, freeze: bool = True, **options: Any
    ) -> tuple[MemoryCluster, Controller, Runner]:
        cluster = cluster or MemoryCluster()
        options.setdefault("batch_idle", 0.3)
        runner = assemble(
            cluster,
            fake_cloud(FakeClock()),
            source or DirectorySource(compiled),
            ControllerOptions(cluster_name=CLUSTER, **options),
            region=REGION,
            resync=1.0,
            **({} if freeze else {"freeze": False}),  # the default, production's, unless told
        )
        controller = runner.controller
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        started.append((runner, thread))
        return cluster, controller, runner

    yield start
    for runner, thread in started:
        runner.stop()
        thread.join(GENEROUS)
        assert not thread.is_alive(), "stop() ends the runner"


def test_a_burst_of_pods_is_one_batch_and_every_pod_is_bound(running: Any) -> None:
    cluster, controller, _ = running()
    create_all(cluster, objects.POD, inflate(0, 20))
    assert eventually(lambda: not unbound(cluster) and cluster.list(objects.NODE).items)
    labels = {"provisioner": "default", "capacity_type": "spot"}
    launches = controller.metrics.registry.get_sample_value("karpenter_policy_nodes_launched_total", labels)
    assert launches == len(cluster.list(objects.NODE).items) <= 3


def test_the_runner_gives_a_thread_to_each_controller_of_the_one_list_in_its_order(running: Any) -> None:
    """Virtual time steps through `Controller.controllers`; the threads are the same controllers, one each."""
    _, controller, runner = running()
    names = [c.name for c in controller.controllers]
    assert names == ["provisioning", "garbage", "capacityreservation-capacitytype", "capacityreservation-expiration",
                     "emptiness", "disruption", "termination"]  # no queue: no interruption
    assert [w.name for w in runner.workers] == names
    assert eventually(lambda: all(w.thread.name == f"controller-{w.name}" and w.thread.is_alive()
                                  for w in runner.workers))


def _frozen(obj: object) -> bool:
    """`obj` is in no generation of the collector (`gc.get_objects` lists every tracked object but the frozen)."""
    return not any(found is obj for found in gc.get_objects())


def test_after_its_first_sync_the_runner_freezes_what_the_informers_read_out_of_garbage_collection(
    running: Any,
) -> None:
    """What the first sync read (every object of the cluster, the state built from it) lives as long as the
    process; a full collection walked all of it again and again — at 5,000 nodes under churn each one stalled every
    thread for seconds (benchmarks/README.md, "gc.freeze after the first sync"). The runner freezes the warm heap
    once its informers have listed (`gc.freeze`, after a full collection), before its controllers start, and undoes
    it when it stops."""
    gc.unfreeze()  # what an earlier test of this process froze (the CLI's batch commands freeze for good)
    cluster = MemoryCluster()
    cluster.create(objects.DAEMON_SET, daemon_set("agent", "kube-system", "100m", "128Mi"))
    _, _, runner = running(cluster=cluster)
    assert eventually(lambda: all(worker.thread.ident is not None for worker in runner.workers))
    assert gc.get_freeze_count() > 0
    (cached,) = runner.feed.informers[objects.DAEMON_SET].items_shared()  # read by the first list
    assert _frozen(cached)
    runner.stop()
    assert eventually(lambda: gc.get_freeze_count() == 0)


def test_a_runner_told_not_to_freeze_leaves_the_collector_as_it_is(running: Any) -> None:
    """`freeze=False` is the benchmark's A/B (`scale.py --in-process --what memory --no-gc-freeze`)."""
    gc.unfreeze()
    _, _, runner = running(freeze=False)
    assert eventually(lambda: all(worker.thread.ident is not None for worker in runner.workers))
    assert gc.get_freeze_count() == 0


def test_a_configmap_change_is_taken_while_running(running: Any, configmap: dict[str, Any]) -> None:
    cluster = MemoryCluster()
    created = cluster.create(objects.CONFIG_MAP, configmap)
    meta = configmap["metadata"]
    _, controller, _ = running(source=ConfigMapSource(cluster, meta["namespace"], meta["name"]), cluster=cluster)
    assert eventually(lambda: controller.loaded is not None)
    first = controller.loaded
    bumped = {**created, "metadata": {**created["metadata"], "annotations": {"argocd.argoproj.io/sync": "2"}}}
    bumped["data"] = dict(created["data"])
    cluster.update(objects.CONFIG_MAP, bumped)  # a new resourceVersion: read again (same sets, same hash)
    assert eventually(lambda: controller.loaded is not first)
    assert controller.loaded is not None and first is not None and controller.loaded.hash == first.hash


def test_two_replicas_one_acts_and_the_other_takes_over(compiled: Path, log: Any) -> None:
    """Two replicas on one cluster and one cloud, electing a leader through a Lease: only the leader launches,
    nothing is launched twice, and when it stops the other one provisions the next pods."""
    cluster = MemoryCluster()
    cloud = fake_cloud(FakeClock())
    replicas: list[tuple[Controller, Runner, LeaderElector, threading.Thread]] = []
    for identity in ("replica-a", "replica-b"):
        elector = LeaderElector(
            cluster, "default", "karpenter-policy-reconcile", identity,
            lease_duration=3.0, renew_deadline=2.0, retry_period=0.2,
        ).start()
        runner = assemble(
            cluster, cloud, DirectorySource(compiled), ControllerOptions(cluster_name=CLUSTER, batch_idle=0.3),
            region=REGION, elector=elector, resync=1.0,
        )
        controller = runner.controller
        replicas.append((controller, runner, elector, run_in_thread(runner)))
    try:
        assert eventually(lambda: sum(e.is_leader for _, _, e, _ in replicas) == 1)
        create_all(cluster, objects.POD, inflate(0, 10))
        assert eventually(lambda: not unbound(cluster))

        def launched(controller: Controller) -> float:
            labels = {"provisioner": "default", "capacity_type": "spot"}
            return controller.metrics.registry.get_sample_value("karpenter_policy_nodes_launched_total", labels) or 0

        leader = next(r for r in replicas if r[2].is_leader)
        follower = next(r for r in replicas if r is not leader)
        assert launched(leader[0]) == len(cluster.list(objects.NODE).items) >= 1
        assert launched(follower[0]) == 0, "the follower keeps its caches warm and does nothing"
        assert len(cloud.list(CLUSTER)) == len(cluster.list(objects.NODE).items), "nothing launched twice"

        leader[1].stop()
        leader[2].stop()  # releases the lease
        leader[3].join(GENEROUS)
        assert eventually(lambda: follower[2].is_leader)
        create_all(cluster, objects.POD, inflate(10, 10))
        assert eventually(lambda: not unbound(cluster))
        assert launched(follower[0]) >= 1
        assert len(cloud.list(CLUSTER)) == len(cluster.list(objects.NODE).items)
    finally:
        for _, runner, elector, thread in replicas:
            runner.stop()
            elector.stop()
            thread.join(GENEROUS)


class _LeaseLink:
    """One replica's connection for its Lease requests: `cut` makes them hang until their timeout and fail (its
    renewals cannot get through), while the replica's other requests still reach the cluster — the worst case for
    two leaders: nothing stops its controllers but leadership itself."""

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.cut = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def _through(self, timeout: float | None) -> None:
        if self.cut.is_set():
            threading.Event().wait(timeout if timeout is not None else 30.0)
            raise Unavailable("no answer (cut off)")

    def get(self, kind: Any, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Any:
        self._through(timeout)
        return self.cluster.get(kind, name, namespace)

    def create(self, kind: Any, obj: Any, *, timeout: float | None = None) -> Any:
        self._through(timeout)
        return self.cluster.create(kind, obj)

    def update(self, kind: Any, obj: Any, subresource: str | None = None, *, timeout: float | None = None) -> Any:
        self._through(timeout)
        return self.cluster.update(kind, obj, subresource)


class _Changes:
    """The cluster as one replica's controllers change it: each change that gets through is noted (when, by whom)."""

    CHANGES = ("create", "update", "patch", "delete", "bind", "evict", "record_event")

    def __init__(self, cluster: MemoryCluster, replica: str, log: list[tuple[float, str, str]]) -> None:
        self.cluster, self.replica, self.log = cluster, replica, log

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.cluster, name)
        if name not in self.CHANGES:
            return found

        def change(*args: Any, **kwargs: Any) -> Any:
            self.log.append((time.monotonic(), self.replica, name))
            return found(*args, **kwargs)

        return change


@pytest.mark.slow
def test_a_leader_cut_off_from_the_lease_stops_every_change_before_the_other_replica_starts(
    compiled: Path, log: Any
) -> None:
    """Two replicas on one cluster, pods arriving all the time, so the leader is always changing something. Its
    Lease requests are cut (its other requests still get through): every controller of it makes its last change
    before its last renewal's start plus the renew deadline, and before the other replica's first change."""
    timings = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.2}
    cluster = MemoryCluster()
    cloud = fake_cloud(FakeClock())
    changes: list[tuple[float, str, str]] = []
    links: dict[str, _LeaseLink] = {}
    replicas: dict[str, tuple[Runner, LeaderElector, threading.Thread]] = {}
    for identity in ("replica-a", "replica-b"):
        links[identity] = _LeaseLink(cluster)
        elector = LeaderElector(links[identity], "default", "karpenter-policy-reconcile", identity, **timings).start()
        runner = assemble(
            _Changes(cluster, identity, changes), cloud, DirectorySource(compiled),  # type: ignore[arg-type]
            ControllerOptions(cluster_name=CLUSTER, batch_idle=0.1, batch_max=0.3), region=REGION,
            elector=elector, resync=1.0,
        )
        replicas[identity] = (runner, elector, run_in_thread(runner))
    arriving = threading.Event()

    def pods_keep_arriving() -> None:
        for i in range(10_000):
            if arriving.wait(0.05):
                return
            create_all(cluster, objects.POD, inflate(i, 1))

    feeder = threading.Thread(target=pods_keep_arriving, daemon=True)
    try:
        assert eventually(lambda: sum(e.is_leader for _, e, _ in replicas.values()) == 1)
        leader = next(name for name, (_, e, _) in replicas.items() if e.is_leader)
        other = next(name for name in replicas if name != leader)
        feeder.start()
        assert eventually(lambda: any(who == leader and what == "bind" for _, who, what in changes))

        links[leader].cut.set()
        cut_at = time.monotonic()  # every renewal of the leader that succeeded started before this
        assert eventually(lambda: any(who == other for _, who, _ in changes))
        assert eventually(lambda: any(who == other and what == "bind" for _, who, what in changes))
    finally:
        arriving.set()
        for runner, elector, thread in replicas.values():
            runner.stop()
            elector.stop()
            thread.join(GENEROUS)

    last_by_leader = max(t for t, who, _ in changes if who == leader)
    first_by_other = min(t for t, who, _ in changes if who == other)
    assert last_by_leader < first_by_other, "both replicas changed the cluster at once"
    # a change checked just before the deadline is noted an instant later: a quarter second for a loaded machine
    assert last_by_leader < cut_at + timings["renew_deadline"] + 0.25
