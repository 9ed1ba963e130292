"""No pod is lost: a provisionable pod is always in an open batch window or covered by a retry that is due, and is
launched for (bound) or reported unschedulable within the batch window, its maximum, and one retry.

(a) pods that arrive while a step is launching for an older batch; (b) a burst of 1,000 pods during a slow launch,
threaded, in real time; (c) pods pending at start-up and at a leader take-over; (d) random interleavings of pod
events, steps, capacity failures and clock moves, each checked against the invariant.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.cloud.provider import Instance, LaunchRequest
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import Controller, ControllerOptions
from karpenter_policy.reconcile.runner import Runner, assemble, run_in_thread
from karpenter_policy.simulate.kubelet import FakeKubelet

from .conftest import CLUSTER, REGION, MakeHarness, fake_cloud
from .support import FakeClock, Harness, container, create_all, inflate, pod

GENEROUS = 60.0


def eventually(predicate: Callable[[], bool], timeout: float = GENEROUS) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def unbound(cluster: MemoryCluster, prefix: str = "") -> list[str]:
    return [
        objects.name(p) for p in cluster.list(objects.POD).items
        if objects.name(p).startswith(prefix) and not p["spec"].get("nodeName")
    ]


def covered(h: Harness) -> list[str]:
    """The pods the cluster shows pending that the invariant does not cover: not planned onto a launch in flight,
    and no batch window open nor retry due (a pod reported unschedulable is still retried: capacity comes back,
    policies change)."""
    provisioner = h.controller.provisioner
    if provisioner.batcher.due() is not None or provisioner.next_due() is not None:
        return []
    planned = h.controller.inflight.planned()
    return [
        f"default/{objects.name(p)}" for p in h.pods()
        if not p["spec"].get("nodeName") and objects.uid(p) not in planned
    ]


def reported(h: Harness) -> set[str]:
    """Pods that got a FailedScheduling Warning Event (no provisioner takes them)."""
    return {
        f"{e['involvedObject'].get('namespace', 'default')}/{e['involvedObject']['name']}"
        for e in h.events("FailedScheduling")
    }


# --- (a) pods that arrive while a step launches for an older batch ----------------------------------------------


class CreatingCloud(FakeCloudProvider):
    """The fake cloud that, during its first launch, lets `arrive` create pods (a watch event mid-step)."""

    def __init__(self, inner: FakeCloudProvider, arrive: Callable[[], None]) -> None:
        self.__dict__.update(inner.__dict__)
        self.arrive: Callable[[], None] | None = arrive

    def create(self, request: LaunchRequest) -> Instance:
        arrive, self.arrive = self.arrive, None
        if arrive is not None:
            arrive()
        return super().create(request)


def test_pods_that_arrive_while_a_step_launches_for_an_older_batch_get_a_batch_of_their_own(
    make_harness: MakeHarness, clock: FakeClock
) -> None:
    cluster = MemoryCluster()
    cloud = CreatingCloud(fake_cloud(clock), lambda: create_all(cluster, objects.POD, inflate(100, 3)))
    h = make_harness(cloud=cloud, cluster=cluster)
    create_all(cluster, objects.POD, inflate(0, 2))
    first = h.batch()
    assert {p for claim in first.launched for p in claim.pods} == {"default/inflate-0", "default/inflate-1"}
    assert unbound(cluster, "inflate-10") == ["inflate-100", "inflate-101", "inflate-102"], "they came mid-step"
    second = h.batch()
    assert second.pending == 3, "the next batch has them"
    placed = [p for claim in second.launched for p in claim.pods] + [p for ps in second.bound.values() for p in ps]
    assert sorted(set(placed)) == ["default/inflate-100", "default/inflate-101", "default/inflate-102"]
    assert unbound(cluster) == []


# --- (b) a burst of 1,000 pods during a slow launch, threaded ------------------------------------------------


class HeldCloud(FakeCloudProvider):
    """A CreateFleet under load: each launch is held while the test holds it (`release`), then takes `delay` seconds.
    `launching` is set when the first launch has started — the test's signal that a launch is in flight."""

    def __init__(self, inner: FakeCloudProvider, delay: float) -> None:
        self.__dict__.update(inner.__dict__)
        self.delay = delay
        self.launching = threading.Event()
        self.release = threading.Event()

    def create(self, request: LaunchRequest) -> Instance:
        self.launching.set()
        self.release.wait(GENEROUS)  # held until the test lets it go (bounded: a broken test cannot hang the run)
        time.sleep(self.delay)  # the scenario's own pace: a slow CreateFleet, not a wait for anything
        return super().create(request)


@pytest.fixture()
def runner(compiled: Path, log: Any) -> Iterator[Callable[..., tuple[MemoryCluster, Controller, Runner]]]:
    started: list[tuple[Runner, threading.Thread]] = []
    stopping = threading.Event()
    kubelets: dict[int, threading.Thread] = {}  # id of a cluster → the thread of its kubelets

    def join(cluster: MemoryCluster) -> None:
        """The launched nodes' kubelets: they join (pods planned onto a node that has not joined wait for it)."""
        kubelet = FakeKubelet(cluster)
        while not stopping.wait(0.05):
            kubelet.sync()

    def start(
        cluster: MemoryCluster | None = None, cloud: Any = None, elector: LeaderElector | None = None,
        **options: Any,
    ) -> tuple[MemoryCluster, Controller, Runner]:
        cluster = cluster or MemoryCluster()
        if id(cluster) not in kubelets:
            kubelets[id(cluster)] = threading.Thread(target=join, args=(cluster,), daemon=True)
            kubelets[id(cluster)].start()
        options.setdefault("batch_idle", 0.3)
        options.setdefault("batch_max", 3.0)
        runner = assemble(
            cluster, cloud or fake_cloud(FakeClock()), DirectorySource(compiled),
            ControllerOptions(cluster_name=CLUSTER, **options), region=REGION, elector=elector, resync=2.0,
        )
        controller = runner.controller
        started.append((runner, run_in_thread(runner)))
        return cluster, controller, runner

    yield start
    stopping.set()
    for started_runner, thread in started:
        started_runner.stop()
        thread.join(GENEROUS)
        assert not thread.is_alive(), "stop() ends the runner"
    for kubelet in kubelets.values():
        kubelet.join(GENEROUS)


@pytest.mark.slow
def test_a_burst_of_a_thousand_pods_during_a_slow_launch_is_all_provisioned(runner: Any) -> None:
    cloud = HeldCloud(fake_cloud(FakeClock()), delay=1.0)
    cluster, _, _ = runner(cloud=cloud)
    create_all(cluster, objects.POD, inflate(0, 10))
    assert cloud.launching.wait(20), "the first batch was never launched"
    # the first batch is launching (held, then a second per CreateFleet): a thousand pods arrive meanwhile
    burst = [pod(f"burst-{i}", labels={"app": "burst"}, containers=[container("250m", "256Mi")],
                 owner=("ReplicaSet", "burst-5d8f")) for i in range(1000)]
    create_all(cluster, objects.POD, burst)
    cloud.release.set()
    assert eventually(lambda: not unbound(cluster), 120), f"{len(unbound(cluster))} pods left pending"


# --- (c) pods pending at start-up and at a leader take-over -------------------------------------------------


def test_pods_pending_at_start_up_are_provisioned_in_the_first_window(runner: Any) -> None:
    cluster = MemoryCluster()
    create_all(cluster, objects.POD, inflate(0, 6))
    cloud = fake_cloud(FakeClock())
    started = time.monotonic()
    runner(cluster=cluster, cloud=cloud)
    assert eventually(lambda: not unbound(cluster), 20)
    assert time.monotonic() - started < 10, "within the first batch window, not after a resync or a retry"


@pytest.mark.slow
def test_pods_pending_before_a_take_over_are_provisioned_within_the_window_after_it(runner: Any) -> None:
    cluster = MemoryCluster()
    now = objects.format_micro_time(__import__("datetime").datetime.now(__import__("datetime").UTC))
    cluster.create(objects.LEASE, {
        "metadata": {"name": "karpenter-policy-reconcile", "namespace": "default"},
        "spec": {"holderIdentity": "old-leader", "leaseDurationSeconds": 3, "acquireTime": now, "renewTime": now},
    })
    elector = LeaderElector(cluster, "default", "karpenter-policy-reconcile", "new-leader",
                            lease_duration=3.0, renew_deadline=2.0, retry_period=0.1).start()
    try:
        runner(cluster=cluster, elector=elector)
        create_all(cluster, objects.POD, inflate(0, 5))  # pending while the old leader's Lease still holds
        assert eventually(lambda: elector.is_leader, 20)
        led = time.monotonic()
        assert eventually(lambda: not unbound(cluster), 20)
        assert time.monotonic() - led < 0.3 + 1.0 + 1.0, "the batch window after the take-over, and a second"
    finally:
        elector.stop()


# --- (d) random interleavings ---------------------------------------------------------------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(1, 4), st.sampled_from(["1", "250m", "64"])),
        st.tuples(st.just("delete"), st.integers(0, 30)),
        st.tuples(st.just("step")),
        st.tuples(st.just("advance"), st.sampled_from([0.1, 0.5, 1.0, 3.0, 11.0])),
        st.tuples(st.just("no-capacity"), st.booleans()),
    ),
    min_size=1,
    max_size=25,
)


@deterministic(80, HealthCheck.function_scoped_fixture)
@given(STEPS)
@pytest.mark.slow
def test_no_interleaving_of_events_steps_and_clock_moves_loses_a_pod(
    make_harness: MakeHarness, clock: FakeClock, steps: list[tuple[Any, ...]]
) -> None:
    cloud = fake_cloud(clock, ["c5.large", "c5.xlarge", "m5.xlarge", "c5.4xlarge"])
    h = make_harness(cloud=cloud)
    created = 0
    for action in steps:
        if action[0] == "create":
            _, count, cpu = action
            create_all(h.cluster, objects.POD, [
                pod(f"p-{created + i}", labels={"app": "p"}, containers=[container(cpu, "512Mi")],
                    owner=("ReplicaSet", "p-5d8f")) for i in range(count)
            ])
            created += count
        elif action[0] == "delete":
            name = f"p-{action[1]}"
            if h.cluster.get(objects.POD, name, "default") is not None:
                h.cluster.delete(objects.POD, name, "default")
        elif action[0] == "step":
            h.step()
            h.kubelet.sync()
            assert covered(h) == [], "a pending pod with no window open and no retry due"
        elif action[0] == "advance":
            clock.advance(action[1])
        else:
            for name in ("c5.large", "c5.xlarge", "m5.xlarge", "c5.4xlarge"):
                for zone in ("us-east-1a", "us-east-1b", "us-east-1c"):
                    for capacity in ("spot", "on-demand"):
                        if action[1]:
                            cloud.fail_capacity(name, zone, capacity)
                        else:
                            cloud.restore_capacity(name, zone, capacity)
    # capacity is back; within idle + max window + one retry, every pod is bound or reported unschedulable
    for name in ("c5.large", "c5.xlarge", "m5.xlarge", "c5.4xlarge"):
        for zone in ("us-east-1a", "us-east-1b", "us-east-1c"):
            for capacity in ("spot", "on-demand"):
                cloud.restore_capacity(name, zone, capacity)
    clock.advance(200)  # the offerings the cloud refused are available again (3 minutes)
    deadline = clock.now + h.controller.options.batch_max + h.controller.options.retry_interval * 2 + 5
    while clock.now <= deadline:
        result = h.step()
        h.kubelet.sync()
        assert covered(h) == [], "a pending pod with no window open and no retry due"
        clock.now = min(result.due, deadline + 1) if result.due is not None else clock.now + 1
    waiting = [objects.name(p) for p in h.pods() if not p["spec"].get("nodeName")]
    assert [f"default/{name}" for name in waiting if f"default/{name}" not in reported(h)] == [], (
        "pods neither launched for nor reported"
    )
