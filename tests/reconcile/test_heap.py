"""The runner's full garbage collections (`reconcile.heap`, issue #23): made when the provisioner is idle — not
while a batch window is open nor while a launch is under way —, at least every backstop under constant pressure,
each freezing what survived; garbage cycles, frozen or not, are freed by the scheduled collections; Python's own
full collections no longer come; every collection is counted, and one that fails never ends the runner.

The batch window and the clock are driven as tests/reconcile/* drive them (a `FakeClock`, `Controller.notify`
and `reconcile_once`); the one threaded test waits on events (a launch entered, a collection ended), never sleeps.
While a test runs, Python's automatic collections are off (`gc.disable`), so what frees a cycle is the collection
the test scheduled, not one Python happened to make.
"""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.provider import Instance, LaunchRequest
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import ControllerOptions
from karpenter_policy.reconcile.heap import (
    ALL,
    BACKSTOP,
    HEAP,
    IDLE,
    RARE_FULL,
    SYNCED,
    UNFROZEN,
    HeapCollector,
    Pacing,
)
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.runner import Runner, assemble

from .conftest import CLUSTER, REGION, fake_cloud
from .support import FakeClock, create_all, inflate

PACING = Pacing(interval=10.0, backstop=60.0, thaw=300.0, thaw_backstop=1200.0)
COLLECTIONS = "karpenter_policy_gc_full_collections_total"


class Cycle:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture()
def quiet_collector() -> Iterator[None]:
    """No automatic collection while the test runs; nothing frozen before nor after it."""
    gc.unfreeze()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


@pytest.fixture()
def idle_runner(compiled: Path, clock: FakeClock, log: Any, quiet_collector: None) -> Iterator[Runner]:
    """A runner on a fake clock, not running: its batch window is driven by hand, its heap collector started as
    `run` starts it after the first sync."""
    runner = assemble(MemoryCluster(), fake_cloud(clock), DirectorySource(compiled),
                      ControllerOptions(cluster_name=CLUSTER, batch_idle=1.0), region=REGION, clock=clock,
                      gc_pacing=PACING)
    runner.heap.start()
    try:
        yield runner
    finally:
        runner.heap.stop()


def collections(metrics: Metrics, reason: str, heap: str) -> float:
    return metrics.registry.get_sample_value(COLLECTIONS, {"reason": reason, "heap": heap}) or 0.0


def test_the_runner_collects_when_the_provisioner_is_idle_and_not_while_a_batch_window_is_open(
    idle_runner: Runner, clock: FakeClock,
) -> None:
    """A full collection that lands in a burst of pending pods delays its first launch by the whole pause (3.35 s
    at 5,000 nodes, benchmarks/README.md): none is made while the batch window is open, one is made as soon as it
    has closed (the pass that closed it done) once the interval has passed."""
    runner, metrics = idle_runner, idle_runner.controller.metrics
    assert runner.idle()
    clock.advance(PACING.interval)
    runner.controller.notify("pod-1")  # a pod became pending: the window opens
    assert not runner.idle()
    assert runner.heap.tick() is None
    clock.advance(0.5)
    runner.controller.notify("pod-2")  # the burst goes on: the window stays open
    assert runner.heap.tick() is None
    clock.advance(1.0)  # batch idle passed: the provisioner's next pass closes the window
    runner.controller.reconcile_once()
    assert runner.controller.batcher.due() is None and runner.idle()
    collection = runner.heap.tick()
    assert collection is not None and (collection.reason, collection.heap) == (IDLE, UNFROZEN)
    assert collections(metrics, IDLE, UNFROZEN) == 1
    assert runner.heap.tick() is None  # not again before the interval
    clock.advance(PACING.interval)
    assert runner.heap.tick() is not None and collections(metrics, IDLE, UNFROZEN) == 2


def test_under_constant_pressure_the_backstop_collects_all_the_same(idle_runner: Runner, clock: FakeClock) -> None:
    """Pods pending all the time (a window always open) must not keep cycles for ever: a collection is made once
    the backstop has passed, idle or not."""
    runner, metrics = idle_runner, idle_runner.controller.metrics
    made = []
    for _ in range(int(PACING.backstop)):
        clock.advance(1.0)
        runner.controller.notify()  # a window always open
        assert not runner.idle()
        if (collection := runner.heap.tick()) is not None:
            made.append((clock.now, collection.reason))
    assert made == [(1_000.0 + PACING.backstop, BACKSTOP)]
    assert collections(metrics, BACKSTOP, UNFROZEN) == 1 and collections(metrics, IDLE, UNFROZEN) == 0


def test_a_cycle_made_unreachable_after_a_freeze_is_freed_by_the_next_scheduled_collection(
    idle_runner: Runner, clock: FakeClock,
) -> None:
    """A cycle made since the last collection is freed by the next one; a cycle that was frozen (alive at a
    collection) and became garbage since is freed by the next collection that thaws the heap — with a freeze that
    was never undone (the runner before), never."""
    runner = idle_runner
    frozen_cycle = Cycle()
    clock.advance(PACING.interval)
    assert runner.heap.tick() is not None  # frozen_cycle is alive: frozen
    young_cycle = Cycle()
    frozen_ref, young_ref = weakref.ref(frozen_cycle), weakref.ref(young_cycle)
    del frozen_cycle, young_cycle
    clock.advance(PACING.interval)
    first = runner.heap.tick()
    assert first is not None and first.heap == UNFROZEN
    assert young_ref() is None  # made after the freeze: collected
    assert frozen_ref() is not None  # frozen: the short collection does not walk it
    clock.now = 1_000.0 + PACING.thaw  # the thaw is due at an idle moment
    thawing = runner.heap.tick()
    assert thawing is not None and thawing.heap == ALL
    assert frozen_ref() is None
    assert collections(runner.controller.metrics, IDLE, ALL) == 1


def test_under_constant_pressure_the_thaw_waits_for_an_idle_moment_up_to_its_backstop(
    idle_runner: Runner, clock: FakeClock,
) -> None:
    """The thaw walks the whole heap (the first sync's cost): it waits for an idle moment, but not for ever."""
    runner = idle_runner
    heaps = []
    while clock.now < 1_000.0 + PACING.thaw_backstop:
        clock.advance(1.0)
        runner.controller.notify()
        if (collection := runner.heap.tick()) is not None:
            heaps.append(collection.heap)
    assert heaps == [UNFROZEN] * (int(PACING.thaw_backstop / PACING.backstop) - 1) + [ALL]


def test_pythons_own_full_collections_no_longer_come_once_the_runner_owns_them(quiet_collector: None) -> None:
    """With Python's thresholds a full collection comes after ten middle ones, whatever the controller is doing;
    once started, the heap collector's are the only ones, and its stop puts Python's thresholds back."""
    gc.set_threshold(700, 10, 10)
    gc.enable()
    made = [0, 0, 0]  # collections by generation while the churn's survivors pile up

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            made[info["generation"]] += 1

    collector = HeapCollector(lambda: True, Metrics(), FakeClock(), PACING)
    collector.start()
    gc.callbacks.append(count)
    try:
        assert gc.get_threshold() == (700, 10, RARE_FULL)
        kept = [[i] for i in range(max(400_000, gc.get_freeze_count()))]  # survivors: churn's new objects
    finally:
        gc.callbacks.remove(count)
        collector.stop()
    assert kept and made[1] > 10  # Python's thresholds would have made a full collection (they did before)
    assert made[2] == 0
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_a_collection_that_fails_is_logged_and_never_ends_the_runner(
    idle_runner: Runner, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever goes wrong in a collection, `tick` returns (the runner's loop goes on), what is alive stays frozen,
    and the next interval tries again."""
    runner = idle_runner

    def broken(generation: int = 2) -> int:
        raise RuntimeError("collector broken")

    monkeypatch.setattr(gc, "collect", broken)
    clock.advance(PACING.interval)
    with caplog.at_level(logging.ERROR, logger="karpenter_policy"):
        assert runner.heap.tick() is None
    assert "a full garbage collection failed" in caplog.text and gc.get_freeze_count() > 0
    monkeypatch.undo()
    assert runner.heap.tick() is None  # not before the next interval
    clock.advance(PACING.interval)
    assert runner.heap.tick() is not None


def test_the_first_sync_collection_is_counted_and_exported(idle_runner: Runner) -> None:
    metrics = idle_runner.controller.metrics
    assert collections(metrics, SYNCED, ALL) == 1
    frozen = metrics.registry.get_sample_value("karpenter_policy_gc_frozen_objects")
    assert frozen is not None and frozen > 0
    assert metrics.registry.get_sample_value("karpenter_policy_gc_last_full_collection_seconds") is not None


class GatedCloud(FakeCloudProvider):
    """Launches wait for `gate`; `entered` is set when one is waiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate, self.entered = threading.Event(), threading.Event()

    def create(self, request: LaunchRequest) -> Instance:
        self.entered.set()
        assert self.gate.wait(60.0), "the test let the launch go"
        return super().create(request)


class Collected(logging.Handler):
    """Sets `idle` when the heap collector logs (at debug, after counting it) a collection made while idle."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.idle = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.args and isinstance(record.args, tuple) and record.args[0] == IDLE:
            self.idle.set()


def test_no_collection_while_a_launch_is_under_way_one_once_the_provisioner_is_idle_again(
    compiled: Path, log: Any,
) -> None:
    """The threaded runner: while the provisioning thread is in a step (its launch waits), the provisioner is not
    idle and no collection is due however long past the interval; once the launch is done, the runner's loop makes
    one (its debug line observed)."""
    cloud = GatedCloud(list(load_catalog().instance_types), clock=FakeClock())
    runner = assemble(MemoryCluster(), cloud, DirectorySource(compiled),
                      ControllerOptions(cluster_name=CLUSTER, batch_idle=0.1), region=REGION,
                      gc_pacing=Pacing(interval=0.001, backstop=3600.0, thaw=3600.0, thaw_backstop=3600.0))
    collected = Collected()
    heap_log = logging.getLogger(HEAP.name)
    level = heap_log.level
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        create_all(runner.controller.cluster, objects.POD, inflate(0, 3))
        assert cloud.entered.wait(60.0), "the batch launched"
        assert not runner.idle() and runner.heap.due(runner.clock()) is None
        before = collections(runner.controller.metrics, IDLE, UNFROZEN)
        heap_log.addHandler(collected)
        heap_log.setLevel(logging.DEBUG)
        cloud.gate.set()
        assert collected.idle.wait(60.0), "a collection once idle"
        assert collections(runner.controller.metrics, IDLE, UNFROZEN) > before
    finally:
        cloud.gate.set()
        heap_log.removeHandler(collected)
        heap_log.setLevel(level)
        runner.stop()
        thread.join(30.0)
    assert not thread.is_alive() and gc.get_freeze_count() == 0


def test_a_standby_is_idle_whatever_its_batch_windows(compiled: Path, clock: FakeClock, log: Any,
                                                      quiet_collector: None) -> None:
    """A standby keeps its state warm — pods it sees become pending open windows — but no provisioning step of its
    closes them until it leads: it is idle all the same, so its heap is collected at its idle pace, not only at the
    backstop."""
    cluster = MemoryCluster()
    elector = LeaderElector(cluster, "default", "karpenter-policy-reconcile", "standby")  # never started: not leading
    runner = assemble(cluster, fake_cloud(clock), DirectorySource(compiled), ControllerOptions(cluster_name=CLUSTER),
                      region=REGION, clock=clock, elector=elector, gc_pacing=PACING)
    runner.heap.start()
    try:
        runner.controller.notify("pod-1")
        assert runner.controller.batcher.due() is not None and runner.idle()
        clock.advance(PACING.interval)
        collection = runner.heap.tick()
        assert collection is not None and collection.reason == IDLE
    finally:
        runner.heap.stop()
