"""Karpenter v0.31's metrics, scraped over HTTP from the controller's real /metrics endpoint after a story in
virtual time (karpenter_policy.testing): pods provisioned for (one launch refused for lack of capacity), a spot
interruption, an empty node consolidated away, a user's `kubectl delete node` held by a PodDisruptionBudget, a node
whose instance vanished, a provisioner scaled to zero and emptied. Each family has Karpenter's type, labels and
buckets (tests/reconcile/karpenter_metrics.py, written from Karpenter's sources), and counts what happened: every
node deletion, termination and eviction leaves a trace."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from promscrape import Scrape, parse, scrape, serving

from karpenter_policy.cloud.errors import InsufficientCapacity
from karpenter_policy.fakes import eventbridge as events
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.fakes.queue import FakeQueue
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.exposition import ExactCounter, WindowedSummary, exposition, quantile
from karpenter_policy.reconcile.interruption.handler import InterruptionHandler
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import Scene

from .karpenter_metrics import KARPENTER
from .karpenter_policies import BATCH_POD, TYPES, story_policies


@dataclass
class Story:
    scene: Scene
    controller: Controller
    queue: FakeQueue
    handler: InterruptionHandler
    scrapes: dict[str, Scrape] = field(default_factory=dict)
    pods: dict[str, set[str]] = field(default_factory=dict)  # pod names when a scrape was taken
    deleted: dict[str, str] = field(default_factory=dict)  # how → the node it deleted

    @property
    def cloud(self) -> FakeCloudProvider:
        assert isinstance(self.scene.cloud, FakeCloudProvider)
        return self.scene.cloud

    def ours(self, provisioner: str) -> list[str]:
        return sorted(n for n, node in self.scene.nodes().items()
                      if objects.labels(node).get("karpenter.sh/provisioner-name") == provisioner
                      and not objects.is_deleting(node))

    def run_until(self, done: object, seconds: float = 600) -> None:
        assert callable(done)
        self.scene.run(self.controller, seconds, until=done)
        assert done(), "the story did not get there"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return story_policies(tmp_path_factory.mktemp("metrics"))


@pytest.fixture(scope="module")
def story(compiled: Path) -> Story:
    scene = Scene(compiled, types=TYPES)
    queue = FakeQueue(clock=scene.clock)
    controller = scene.controller(interruption_queue=queue)  # interruption is one of its steps
    handler = controller.interruption
    assert handler is not None
    told = Story(scene, controller, queue, handler)
    with serving(controller) as port:
        scene.add_daemon_set("agent", cpu="100m", memory="128Mi")
        scene.add_deployment("web", 3, cpu="1", memory="1Gi")
        # The first launch for the batch pods finds no capacity at all; the retry 10 s later launches.
        told.cloud.fail_next("create", InsufficientCapacity("fake", []))
        batch = scene.add_deployment("job", 2, cpu="1", memory="1Gi", **BATCH_POD)
        told.run_until(lambda: not scene.unbound() and told.ours("batch"))
        for i, node in enumerate(scene.nodes()):  # the DaemonSet's pods (no DaemonSet controller runs here)
            scene.add_pod(f"agent-{i}", namespace="kube-system", node=node, owner=("DaemonSet", "agent"),
                          cpu="100m", memory="128Mi")
        controller.feed.sync()  # the state follows the cluster up to now (a step-driven run feeds it per pass)
        told.scrapes["up"] = scrape(port)
        told.pods["up"] = {objects.name(p) for p in scene.pods()}

        # A spot interruption: the node is deleted, drained, terminated; its pods go to a new batch node.
        (spot,) = told.ours("batch")
        queue.send(events.spot_interruption(node_info.instance_id(scene.nodes()[spot])))
        controller.feed.sync()  # the state follows the cluster up to now (a step-driven run feeds it per pass)
        assert handler.poll_once().acted == {spot: "CordonAndDrain"}  # before the kubelets' next sync
        told.deleted["interruption"] = spot
        told.run_until(lambda: spot not in scene.nodes() and not scene.unbound() and told.ours("batch"))

        # An empty on-demand node: consolidation deletes it once validated.
        empty = scene.add_node("default", "m5.xlarge")
        told.deleted["consolidation"] = empty
        told.run_until(lambda: empty not in scene.nodes())

        # A user deletes the web node while a PodDisruptionBudget allows no eviction: the drain waits, then goes on.
        (web,) = told.ours("default")
        pdb = scene.add_pdb("web", {"app": "web"}, min_available=3)
        scene.cluster.delete(objects.NODE, web)
        told.deleted["user"] = web
        scene.run(controller, 30)
        told.scrapes["held"] = scrape(port)
        scene.cluster.delete(objects.POD_DISRUPTION_BUDGET, objects.name(pdb), "default")
        told.run_until(lambda: web not in scene.nodes() and not scene.unbound())

        # A node whose instance is gone (never consolidated: annotated): garbage collection releases it.
        lost = scene.add_node("default", "m5.large", annotations={"karpenter.sh/do-not-consolidate": "true"})
        told.cloud.delete(node_info.instance_id(scene.nodes()[lost]))
        told.deleted["garbage"] = lost
        told.run_until(lambda: lost not in scene.nodes())

        # The batch job ends: its node is empty for 60 s, then deleted.
        (emptied,) = told.ours("batch")
        batch.scale(0)
        told.deleted["emptiness"] = emptied
        told.run_until(lambda: emptied not in scene.nodes())
        told.scrapes["end"] = scrape(port)
    return told


# --- Karpenter's names, types, labels and buckets ------------------------------------------------------------


@pytest.fixture(scope="module")
def replaced(compiled: Path) -> Scrape:
    """A consolidation that replaces a node by a cheaper one: its first replacement fails to launch, the second is
    launched and initialized; then a decision whose budget runs out at once (a clock that moves at every read)."""
    scene = Scene(compiled, types=["m5.large", "m5.2xlarge"])
    big = scene.add_node("default", "m5.2xlarge")
    controller = scene.controller()
    scene.add_deployment("web", 1, cpu="500m")
    scene.run(controller, 60, until=lambda: scene.pods_on(big) == ["web-0"])
    assert isinstance(scene.cloud, FakeCloudProvider)
    scene.cloud.fail_next("create", InsufficientCapacity("fake", []))
    scene.run(controller, 300, until=lambda: big not in scene.nodes() and not scene.unbound())
    assert big not in scene.nodes() and not scene.unbound()
    ticks = iter(range(1, 1_000_000))

    def hurried(**budgets: float) -> Controller:
        """A controller whose clock moves at every read: a budget of a microsecond runs out at once."""
        built = Controller(
            scene.cluster, scene.cloud, scene.source, scene.options(disruption_interval=1.0, **budgets),
            region=scene.region, clock=lambda: scene.clock.now + next(ticks) * 1e-3, wall_clock=scene.clock.wall,
            metrics=controller.metrics,
        )
        built.take(scene.loaded)  # the source was read by the first controller already
        return built

    scene.run(hurried(single_node_budget=1e-6), 5)  # one node with a pod: single-node consolidation only
    other = scene.add_node("default", "m5.large")  # two underused nodes: multi-node consolidation
    scene.add_pod("other", node=other, cpu="100m")
    scene.run(hurried(multi_node_budget=1e-6), 5)
    with serving(controller) as port:
        return scrape(port)


def test_consolidation_replacements_are_timed_and_failures_counted(replaced: Scrape) -> None:
    assert replaced.value("karpenter_deprovisioning_replacement_machine_launch_failure_counter",
                          deprovisioner="consolidation/replace") == 1
    assert replaced.value("karpenter_deprovisioning_actions_performed", action="consolidation/replace",
                          deprovisioner="consolidation") == 2  # the failed command, then the one carried out
    assert replaced.value("karpenter_machines_created", reason="consolidation/replace", provisioner="default") == 2
    assert replaced.value("karpenter_deprovisioning_replacement_machine_initialized_seconds_count") == 1
    assert replaced.value("karpenter_machines_terminated", reason="consolidation/replace", provisioner="default") == 1
    assert replaced.value("karpenter_deprovisioning_consolidation_timeouts", consolidation_type="multi-machine") >= 1
    assert replaced.value("karpenter_deprovisioning_consolidation_timeouts", consolidation_type="single-machine") >= 1


def test_every_karpenter_metric_has_its_name_type_labels_and_buckets(story: Story, replaced: Scrape) -> None:
    up, end = story.scrapes["up"], story.scrapes["end"]
    for name, (kind, labels, buckets) in KARPENTER.items():
        assert end.types.get(name) == kind, (name, end.types.get(name))
        series = name if kind in ("counter", "gauge") else f"{name}_count" if kind == "histogram" else name
        found = up.label_names(series) | end.label_names(series) | replaced.label_names(series)
        assert found, f"{name}: no series after the story"
        expected = {*labels, "quantile"} if kind == "summary" and series == name else set(labels)
        assert found == {frozenset(expected)}, (name, found)
        if buckets is not None:
            edges = {float(s.labels["le"]) for s in end.of(f"{name}_bucket")}
            assert edges == {*map(float, buckets), math.inf}, name


def test_counters_are_exposed_under_karpenters_names_without_a_total_suffix(story: Story) -> None:
    end = story.scrapes["end"]
    assert end.value("karpenter_nodes_created", nodepool="", provisioner="default") > 0
    assert "karpenter_nodes_created_total" not in end.names()
    assert "karpenter_deprovisioning_actions_performed_total" not in end.names()
    assert end.types["karpenter_cloudprovider_errors_total"] == "counter"  # Karpenter's own name ends in _total
    assert end.types["karpenter_policy_nodes_launched_total"] == "counter"  # ours, prometheus-client's way


# --- what they count -----------------------------------------------------------------------------------------


def test_every_node_launched_and_deleted_is_counted(story: Story) -> None:
    end = story.scrapes["end"]
    launched = {p: end.value("karpenter_machines_launched", provisioner=p) for p in ("default", "batch")}
    # default: the web node, and its replacement after the user deleted it; batch: one, then its replacement.
    assert launched == {"default": 2, "batch": 2}
    assert end.value("karpenter_machines_created", reason="provisioning", provisioner="batch") == 3  # 1 refused
    assert end.value("karpenter_machines_terminated", reason="insufficient_capacity", provisioner="batch") == 1
    for provisioner, count in launched.items():
        assert end.value("karpenter_machines_registered", provisioner=provisioner) == count
        assert end.value("karpenter_nodes_created", nodepool="", provisioner=provisioner) == count
    # The first batch node was interrupted in the second it was launched, before it was initialized.
    assert end.value("karpenter_machines_initialized", provisioner="default") == 2
    assert end.value("karpenter_machines_initialized", provisioner="batch") == 1
    terminated = {s.labels["reason"]: s.value for s in end.of("karpenter_machines_terminated", provisioner="default")}
    assert terminated == {"consolidation/delete": 1, "garbage_collected": 1}
    batch = {s.labels["reason"]: s.value for s in end.of("karpenter_machines_terminated", provisioner="batch")}
    assert batch == {"insufficient_capacity": 1, "interruption": 1, "emptiness/delete": 1}
    # Every one of the five deletions released a node: interruption, consolidation, the user's, garbage
    # collection (default: 3 of them), emptiness (batch: 2).
    assert end.value("karpenter_nodes_terminated", nodepool="", provisioner="default") == 3
    assert end.value("karpenter_nodes_terminated", nodepool="", provisioner="batch") == 2
    assert end.value("karpenter_deprovisioning_actions_performed", action="consolidation/delete",
                     deprovisioner="consolidation") == 1
    assert end.value("karpenter_deprovisioning_actions_performed", action="emptiness/delete",
                     deprovisioner="emptiness") == 1
    assert end.value("karpenter_machines_disrupted", type="emptiness", provisioner="batch") == 1


def test_evictions_are_counted_and_termination_is_timed(story: Story) -> None:
    held, end = story.scrapes["held"], story.scrapes["end"]
    assert held.value("karpenter_policy_evictions_total", outcome="refused") >= 3  # the budget, tried again
    assert end.value("karpenter_policy_evictions_total", outcome="evicted") >= 3 + 2  # web's, and the batch pods'
    # The user's deletion waited 30 s on the budget: the slowest termination of `default` took at least that.
    assert end.value("karpenter_nodes_termination_time_seconds", provisioner="default", quantile="1") >= 30
    assert end.value("karpenter_nodes_termination_time_seconds_count", provisioner="default") == 2  # GC: untimed


def test_interruption_metrics_have_karpenters_names(story: Story) -> None:
    end = story.scrapes["end"]
    assert end.value("karpenter_interruption_received_messages", message_type="SpotInterruptionKind") == 1
    assert end.value("karpenter_interruption_deleted_messages") == 1
    assert end.value("karpenter_interruption_actions_performed", action_type="CordonAndDrain") == 1
    assert end.value("karpenter_interruption_message_latency_time_seconds_count") == 1


def test_cloud_provider_calls_are_measured_per_controller_and_method(story: Story) -> None:
    end = story.scrapes["end"]
    measured = end.of("karpenter_cloudprovider_duration_seconds_count")
    calls = {(s.labels["controller"], s.labels["method"]) for s in measured}
    assert {("provisioner", "Create"), ("provisioner", "GetInstanceTypes"), ("termination", "Delete"),
            ("garbagecollection", "List"), ("deprovisioning", "GetInstanceTypes")} <= calls
    assert {s.labels["provider"] for s in measured} == {"aws"}
    assert end.value("karpenter_cloudprovider_errors_total", controller="provisioner", method="Create",
                     provider="aws", error="InsufficientCapacityError") == 1
    assert end.value("karpenter_cloudprovider_instance_type_cpu_cores", instance_type="m5.xlarge") == 4
    assert end.value("karpenter_cloudprovider_instance_type_memory_bytes", instance_type="m5.xlarge") == 16 * 2**30
    assert end.value("karpenter_cloudprovider_instance_type_price_estimate", instance_type="m5.xlarge",
                     capacity_type="on-demand", region="us-east-1", zone="") == pytest.approx(0.192)


def test_controller_runtime_counts_each_controllers_steps(story: Story) -> None:
    end = story.scrapes["end"]
    for controller in ("provisioner", "deprovisioning", "termination", "emptiness", "garbagecollection"):
        assert end.value("controller_runtime_reconcile_total", controller=controller, result="success") > 0
        assert end.value("controller_runtime_reconcile_errors_total", controller=controller) == 0
        assert end.value("controller_runtime_max_concurrent_reconciles", controller=controller) == 1
        assert end.value("controller_runtime_active_workers", controller=controller) == 0  # none under way now
    # The pass and the provisioner's pieces of it are one reconcile each, not one per piece.
    assert end.value("controller_runtime_reconcile_total", controller="provisioner", result="success") == end.value(
        "controller_runtime_reconcile_total", controller="termination", result="success")


def test_scheduling_and_deprovisioning_durations_are_observed(story: Story) -> None:
    end = story.scrapes["end"]
    assert end.value("karpenter_provisioner_scheduling_duration_seconds_count") >= 4  # a batch per launch
    assert end.value("karpenter_provisioner_scheduling_simulation_duration_seconds_count") >= 4
    for method in ("expiration", "drift", "consolidation"):
        assert end.value("karpenter_deprovisioning_evaluation_duration_seconds_count", method=method) > 0
    assert {s.labels["deprovisioner"] for s in end.of("karpenter_deprovisioning_eligible_machines")} == {
        "expiration", "drift", "consolidation", "emptiness"}


# --- the gauges read from the cluster state ------------------------------------------------------------------


def test_node_gauges_describe_each_node_as_the_state_holds_it(story: Story) -> None:
    up = story.scrapes["up"]
    (web,) = {s.labels["node_name"] for s in up.of("karpenter_nodes_allocatable", provisioner="default")}
    labels = up.of("karpenter_nodes_allocatable", node_name=web, resource_type="cpu")[0].labels
    assert labels["provisioner"] == labels["provisioner_name"] == "default" and labels["capacity_type"] == "on-demand"
    assert labels["instance_type"] and labels["zone"].startswith("us-east-1") and labels["arch"] == "amd64"
    assert labels["nodepool"] == "" and labels["instance_family"] == labels["instance_type"].split(".")[0]
    # 3 web pods of 1 cpu and 1 GiB, one agent pod of 100m and 128 MiB (each counted in `pods`).
    pods = {s.labels["resource_type"]: s.value for s in up.of("karpenter_nodes_total_pod_requests", node_name=web)}
    assert pods == {"cpu": 3.0, "memory": 3 * 2**30, "pods": 3.0}
    daemons = {s.labels["resource_type"]: s.value
               for s in up.of("karpenter_nodes_total_daemon_requests", node_name=web)}
    assert daemons == {"cpu": 0.1, "memory": 128 * 2**20, "pods": 1.0}
    assert up.value("karpenter_nodes_total_pod_limits", node_name=web, resource_type="pods") == 3
    allocatable = up.value("karpenter_nodes_allocatable", node_name=web, resource_type="cpu")
    overhead = up.value("karpenter_nodes_system_overhead", node_name=web, resource_type="cpu")
    capacity = {s.labels["instance_type"]: s.value for s in up.of("karpenter_cloudprovider_instance_type_cpu_cores")}
    assert allocatable + overhead == capacity[labels["instance_type"]] and 0 < overhead < 1


def test_pods_state_has_one_series_per_pod_with_its_nodes_labels(story: Story) -> None:
    up = story.scrapes["up"]
    pods = {s.labels["name"]: s for s in up.of("karpenter_pods_state")}
    assert set(pods) == story.pods["up"]
    job = next(s for name, s in pods.items() if name.startswith("job-"))
    assert job.value == 1 and job.labels["provisioner"] == "batch" and job.labels["capacity_type"] == "spot"
    assert job.labels["phase"] == "Running" and job.labels["node"]
    assert job.labels["owner"] == "/apis/apps/v1/namespaces/default/replicasets/job-5d8f7c9b4"


def test_provisioner_limits_and_usage(story: Story) -> None:
    up = story.scrapes["up"]
    assert up.value("karpenter_provisioner_limit", resource_type="cpu", provisioner="default") == 1000
    assert up.value("karpenter_provisioner_limit", resource_type="cpu", provisioner="batch") == 500
    used = up.value("karpenter_provisioner_usage", resource_type="cpu", provisioner="default")
    cores = {s.labels["instance_type"]: s.value for s in up.of("karpenter_cloudprovider_instance_type_cpu_cores")}
    nodes = up.of("karpenter_nodes_allocatable", provisioner="default", resource_type="cpu")
    assert nodes and used == sum(cores[node.labels["instance_type"]] for node in nodes)  # the nodes' capacity
    assert up.value("karpenter_provisioner_usage_pct", resource_type="cpu", provisioner="default") == int(used / 10)


def test_pods_startup_time_is_observed_for_pods_seen_pending(story: Story) -> None:
    end = story.scrapes["end"]
    # web 3 + 3 again after the user's deletion, job 2 + 2 after the interruption (the agent pods started running).
    assert end.value("karpenter_pods_startup_time_seconds_count") >= 10


def test_a_standby_reports_no_cluster_gauges(story: Story) -> None:
    metrics = story.controller.metrics
    metrics.leading = lambda: False
    try:
        standby = parse(metrics.exposition().decode())
    finally:
        metrics.leading = lambda: True
    assert not standby.of("karpenter_pods_state") and not standby.of("karpenter_nodes_allocatable")
    assert standby.of("karpenter_nodes_created")  # what it counted, it still shows


def test_the_process_and_python_runtime_metrics_are_served(story: Story) -> None:
    """As Karpenter's Go client serves `process_*` and `go_*`: this process's memory, CPU, descriptors and start,
    and Python's version and garbage collector, read at each scrape of the real endpoint."""
    import gc
    import os
    import platform
    import time

    with serving(story.controller) as port:
        before = scrape(port)
        gc.collect(0)
        after = scrape(port)
    assert after.types["process_cpu_seconds_total"] == "counter" and after.value("process_cpu_seconds_total") > 0
    assert after.value("process_resident_memory_bytes") > 10 * 2**20, "a Python process holds more than 10 MiB"
    assert 0 < after.value("process_open_fds") <= after.value("process_max_fds")
    assert after.value("process_open_fds") >= len(os.listdir("/proc/self/fd")) - 2
    assert after.value("process_start_time_seconds") <= time.time()
    (info,) = after.of("python_info")
    assert info.labels["version"] == platform.python_version() and info.value == 1
    assert {s.labels["generation"] for s in after.of("python_gc_collections_total")} == {"0", "1", "2"}
    assert after.value("python_gc_collections_total", generation="0") > before.value(
        "python_gc_collections_total", generation="0"), "read at each scrape"


# --- the exposition's own pieces ------------------------------------------------------------------------------


def test_an_exact_counter_is_a_counter_under_its_own_name() -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    counter = ExactCounter("karpenter_things", "Things.", ["kind"], registry)
    unlabelled = ExactCounter("karpenter_others", "Others.", registry=registry)
    counter.labels("a").inc()
    counter.labels("a").inc(2)
    counter.labels("b")
    scraped = parse(exposition(registry).decode())
    assert scraped.types == {"karpenter_things": "counter", "karpenter_others": "counter"}
    assert scraped.value("karpenter_things", kind="a") == 3 and scraped.value("karpenter_things", kind="b") == 0
    assert scraped.of("karpenter_others") and unlabelled.value() == 0  # shown at 0 from the start, as Go does
    with pytest.raises(ValueError):
        counter.labels("a").inc(-1)


def test_a_windowed_summary_reports_quantiles_of_its_window_and_counts_everything() -> None:
    from prometheus_client import CollectorRegistry

    now = [0.0]
    registry = CollectorRegistry()
    summary = WindowedSummary("karpenter_waits_seconds", "Waits.", registry=registry, clock=lambda: now[0])
    for value in (5, 1, 3, 2, 4):
        summary.observe(value)
    scraped = parse(exposition(registry).decode())
    quantiles = {s.labels["quantile"]: s.value for s in scraped.of("karpenter_waits_seconds")}
    assert quantiles == {"0": 1, "0.5": 3, "0.9": 5, "0.99": 5, "1": 5}
    now[0] = 601.0  # the window (10 minutes) has passed
    summary.observe(10)
    later = parse(exposition(registry).decode())
    assert {s.value for s in later.of("karpenter_waits_seconds")} == {10}
    assert later.value("karpenter_waits_seconds_count") == 6 and later.value("karpenter_waits_seconds_sum") == 25
    assert math.isnan(quantile([], 0.5))


def test_a_drain_released_for_an_instance_gone_is_counted_and_timed(compiled: Path) -> None:
    """Termination's other way out (Karpenter v0.31.1: a node whose instance is gone is not waited for): the
    finalizer's removal counts and times it as a drained node's, and each eviction asked counts by its outcome."""
    scene = Scene(compiled, types=TYPES)
    node = scene.add_node("batch", "m6i.xlarge", capacity_type="spot")
    controller = scene.controller()
    scene.add_pods("job", 2, cpu="1", node=node, lingers=True, **BATCH_POD)
    scene.cluster.delete(objects.NODE, node)
    scene.step(controller)
    draining = parse(controller.metrics.exposition().decode())
    assert draining.value("karpenter_policy_evictions_total", outcome="evicted") == 2
    assert not draining.of("karpenter_nodes_terminated", provisioner="batch")
    scene.advance(20)
    scene.cloud.delete(node_info.instance_id(scene.node(node) or {}))  # reclaimed while its pods shut down
    scene.run(controller, 5, until=lambda: scene.node(node) is None)
    assert scene.node(node) is None
    end = parse(controller.metrics.exposition().decode())
    assert end.value("karpenter_nodes_terminated", provisioner="batch") == 1
    assert end.value("karpenter_nodes_termination_time_seconds_count", provisioner="batch") == 1
    assert end.value("karpenter_nodes_termination_time_seconds", provisioner="batch", quantile="1") >= 20
    assert end.value("karpenter_policy_evictions_total", outcome="evicted") == 2  # not asked again: evicting
