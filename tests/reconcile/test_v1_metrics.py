"""Karpenter v1.14.1's metric names for a NodePool's nodes, scraped over HTTP from the controller's real /metrics
(`tests/promscrape.py`): `karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`,
`…_disrupted_total{reason, nodepool, capacity_type}`, `…_terminated_total{nodepool, capacity_type, zone}`,
`karpenter_voluntary_disruption_decisions_total{decision, reason, consolidation_type}` (and `…_by_nodepool_total`),
`karpenter_nodepools_limit` and `karpenter_nodepools_usage{resource_type, nodepool}`, `karpenter_nodes_drained_total
{nodepool}` and `karpenter_nodes_lifetime_duration_seconds{nodepool}` (core pkg/metrics/metrics.go,
pkg/controllers/disruption/metrics.go, pkg/controllers/metrics/nodepool/controller.go,
pkg/controllers/node/termination/metrics.go), `karpenter_nodes_terminated_total{nodepool, zone}` and
`karpenter_nodes_termination_duration_seconds{nodepool}`, `karpenter_nodes_created_total{nodepool, zone}` — each
held to v1.14.1's name, type and labels (`karpenter_metrics.KARPENTER_V1`) — beside v0.31's names, which a
Provisioner's nodes keep and a NodePool's no longer get."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from promscrape import scrape, serving

from karpenter_policy.catalog import load_catalog
from karpenter_policy.fakes import eventbridge
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.interruption.eventbridge import parse
from karpenter_policy.reconcile.interruption.handler import disrupted_reason
from karpenter_policy.testing import Scene, compile_policies

from .karpenter_metrics import KARPENTER_V1

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller" / "policies"
#: v1.14.1's metrics with no series until something happens that the story of the name-and-labels test does not
#: make happen (v1.14.1 adds no 0 to them): their own tests check their labels.
NO_SERIES_HERE = {"karpenter_voluntary_disruption_failed_validations_total"}
CONSOLIDATION = Path(__file__).resolve().parent / "data" / "v1consolidation"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE, tmp_path_factory.mktemp("v1metrics") / "build")


@pytest.fixture(scope="module")
def consolidation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(CONSOLIDATION, tmp_path_factory.mktemp("v1metrics-c") / "build")


def _nodepool_and_provisioner_pods(example: Path) -> tuple[Scene, Controller]:
    """The example's scene with a pod for the NodePool `default` and one for the Provisioner `default`, and its
    controller."""
    scene = Scene(example)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    scene.add_pod("legacy", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
    return scene, scene.controller()


def test_launches_are_counted_under_v1_names_for_nodepools_and_v031_names_for_provisioners(example: Path) -> None:
    scene, controller = _nodepool_and_provisioner_pods(example)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        controller.feed.sync()
        found = scrape(port)
    assert found.types["karpenter_nodeclaims_created_total"] == "counter"
    assert found.value("karpenter_nodeclaims_created_total", reason="provisioning", nodepool="default",
                       min_values_relaxed="false") == 1
    assert found.value("karpenter_machines_created", reason="provisioning", provisioner="default") == 1
    assert not found.of("karpenter_machines_created", provisioner="NodePool/default")
    assert found.value("karpenter_nodepools_limit", resource_type="nodes", nodepool="batch") == 2
    assert found.value("karpenter_nodepools_usage", resource_type="cpu", nodepool="default") > 0
    assert not any(s.labels.get("provisioner", "").startswith("NodePool/")
                   for s in found.of("karpenter_provisioner_usage"))


def test_a_consolidation_is_a_voluntary_disruption_decision_and_its_claim_is_disrupted_then_terminated(
    consolidation: Path,
) -> None:
    """An empty node of `under` (consolidateAfter 0s): launched for a pod that then goes, consolidated as empty."""
    scene = Scene(consolidation, types=["m5.large", "m5.xlarge", "m5.2xlarge"])
    scene.add_pod("app", cpu="100m", nodeSelector={wk.NODEPOOL: "under"})
    controller = scene.controller(consolidation_validation=0)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        (node,) = scene.nodes()
        zone = objects.labels(scene.nodes()[node])[wk.ZONE]
        scene.cluster.delete(objects.POD, "app", "default")
        scene.run(controller, 180, until=lambda: node not in scene.nodes() and not scene.nodeclaims())
        found = scrape(port)
    labels = {"decision": "delete", "reason": "empty", "consolidation_type": "empty"}
    assert found.value("karpenter_voluntary_disruption_decisions_total", **labels) == 1
    assert found.value("karpenter_voluntary_disruption_decisions_by_nodepool_total", nodepool="under", **labels) == 1
    assert found.value("karpenter_nodeclaims_disrupted_total", reason="empty", nodepool="under",
                       capacity_type="on-demand") == 1
    assert found.value("karpenter_nodeclaims_terminated_total", nodepool="under", capacity_type="on-demand",
                       zone=zone) == 1
    assert found.total("karpenter_deprovisioning_actions_performed") == 0



def test_each_decision_tells_v1s_eligible_nodes_evaluation_time_and_timeouts(consolidation: Path) -> None:
    """core v1.14.1 pkg/controllers/disruption/controller.go `disrupt` and metrics.go: each method sets
    `karpenter_voluntary_disruption_eligible_nodes{reason}` to its candidates (Emptiness `empty`, Drift `drifted`,
    the consolidations `underutilized`: consolidation.go `ShouldDisrupt` — not a WhenEmpty pool's node, not an empty
    one) and observes its time in `…_decision_evaluation_duration_seconds{reason, consolidation_type}`;
    `…_consolidation_timeouts_total` has its `multi` and `single` series from 0 (`init`) and counts a budget run out.
    A NodePool-only fleet sets none of v0.31's `karpenter_deprovisioning_eligible_machines` or
    `…_evaluation_duration_seconds`."""
    scene = Scene(consolidation, types=["m5.large", "m5.xlarge", "m5.2xlarge"])
    scene.add_pod("kept", cpu="1", nodeSelector={wk.NODEPOOL: "under"})  # underutilized, nothing cheaper: stays
    scene.add_pod("app", cpu="100m", nodeSelector={wk.NODEPOOL: "empty"})  # WhenEmpty: not underutilized
    controller = scene.controller(consolidation_validation=60)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        scene.run(controller, 30)
        settled = scrape(port)
        scene.cluster.delete(objects.POD, "app", "default")
        scene.run(controller, 40)  # `empty`'s consolidateAfter (30 s) passes; the command waits for its validation
        emptied = scrape(port)
        scene.run(controller, 180, until=lambda: len(scene.nodes()) == 1)  # the empty node deleted: `kept`'s left

        ticks = iter(range(1, 1_000_000))
        hurried = Controller(  # a clock that moves at every read: a budget of a microsecond runs out at once
            scene.cluster, scene.cloud, scene.source,
            scene.options(disruption_interval=1.0, single_node_budget=1e-6, consolidation_validation=60),
            region=scene.region, clock=lambda: scene.clock.now + next(ticks) * 1e-3, wall_clock=scene.clock.wall,
            metrics=controller.metrics,
        )
        hurried.take(scene.loaded)
        scene.run(hurried, 5)
        timed_out = scrape(port)
    eligible = "karpenter_voluntary_disruption_eligible_nodes"
    assert {s.labels["reason"]: s.value for s in settled.of(eligible)} == {
        "empty": 0, "drifted": 0, "underutilized": 1}
    assert emptied.value(eligible, reason="empty") == 1
    evaluated = {(s.labels["reason"], s.labels["consolidation_type"])
                 for s in settled.of("karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count")}
    assert evaluated == {("empty", "empty"), ("drifted", ""), ("underutilized", "multi"), ("underutilized", "single")}
    timeouts = "karpenter_voluntary_disruption_consolidation_timeouts_total"
    assert {s.labels["consolidation_type"]: s.value for s in settled.of(timeouts)} == {"multi": 0, "single": 0}
    assert timed_out.value(timeouts, consolidation_type="single") >= 1
    assert timed_out.value(timeouts, consolidation_type="multi") == 0
    assert not settled.of("karpenter_deprovisioning_evaluation_duration_seconds_count")
    assert not [s for s in timed_out.of("karpenter_deprovisioning_eligible_machines")
                if s.labels["deprovisioner"] != "emptiness"]
    assert timed_out.total("karpenter_deprovisioning_consolidation_timeouts") == 0


def test_a_held_consolidation_whose_nodes_are_no_longer_candidates_counts_failed_validations(
    consolidation: Path,
) -> None:
    """core v1.14.1 pkg/controllers/disruption/validation.go `karpenter_voluntary_disruption_failed_validations_total
    {consolidation_type}`: a single-node consolidation held for its validation whose node a `do-not-disrupt` pod now
    holds counts its candidates (`ConsolidationValidator.validateCandidates`); an empty node that a pod lands on
    while it waits counts too (`EmptinessValidator`: none of its candidates left)."""
    scene = Scene(consolidation, types=["m5.large", "m5.xlarge", "m5.2xlarge"])
    big = scene.add_node("NodePool/under", "m5.2xlarge")  # one small pod: replaced by a cheaper node
    scene.add_pod("small", node=big, cpu="100m")
    scene.add_pod("app", cpu="100m", nodeSelector={wk.NODEPOOL: "empty"})
    controller = scene.controller(consolidation_validation=60)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        scene.run(controller, 20)  # the single-node replacement of `big` decided, held for 60 s
        scene.cluster.patch(objects.POD, "small", {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}},
                            "default")
        scene.run(controller, 70)
        single = scrape(port)
        (emptied,) = [n for n, node in scene.nodes().items() if objects.labels(node).get(wk.NODEPOOL) == "empty"]
        scene.cluster.delete(objects.POD, "app", "default")
        scene.run(controller, 40)  # `empty`'s consolidateAfter (30 s): its deletion held for 60 s
        scene.add_pod("back", node=emptied, cpu="100m")
        scene.run(controller, 70)
        both = scrape(port)
    failed = "karpenter_voluntary_disruption_failed_validations_total"
    assert big in scene.nodes() and emptied in scene.nodes()
    assert {s.labels["consolidation_type"]: s.value for s in single.of(failed)} == {"single": 1}
    assert {s.labels["consolidation_type"]: s.value for s in both.of(failed)} == {"single": 1, "empty": 1}


def test_a_nodepools_cost_is_its_claims_offerings_prices_until_they_are_gone(example: Path) -> None:
    """core v1.14.1 pkg/controllers/metrics/nodepool/controller.go `karpenter_nodepools_cost_total{nodepool}` from
    pkg/state/cost/cost.go: each NodePool in force, the sum of its NodeClaims' offering prices (a claim counted once
    it has the instance-type, capacity-type, zone and nodepool labels, until it is gone); a NodePool without a
    claim costs 0, a Provisioner's node is in no NodePool's cost."""
    scene, controller = _nodepool_and_provisioner_pods(example)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        (claim,) = scene.nodeclaims().values()
        controller.feed.sync()
        running = scrape(port)
        for name in list(scene.nodes()):
            scene.cluster.delete(objects.NODE, name)
        scene.run(controller, 180, until=lambda: not scene.nodes() and not scene.nodeclaims())
        controller.feed.sync()  # the state has seen the claim gone
        gone = scrape(port)
    labels = objects.labels(claim)
    offering = next(o for o in load_catalog().get(labels[wk.INSTANCE_TYPE]).offerings  # type: ignore[union-attr]
                    if o.zone == labels[wk.ZONE] and o.capacity_type == labels[wk.CAPACITY_TYPE])
    assert offering.price is not None and offering.price > 0
    costs = {s.labels["nodepool"]: s.value for s in running.of("karpenter_nodepools_cost_total")}
    assert costs == {"default": pytest.approx(offering.price), "batch": 0}
    assert {s.labels["nodepool"]: s.value for s in gone.of("karpenter_nodepools_cost_total")} == {
        "default": 0, "batch": 0}


def test_a_deleted_nodepool_node_is_counted_drained_once_and_its_lifetime_observed(example: Path) -> None:
    """node/termination/suite_test.go:989 "should fire the nodesTerminated counter metric when deleting nodes"
    (`NodesDrainedTotal` 1 for the node's NodePool) and :1003 "should fire the lifetime duration histogram metric
    when deleting nodes" (one sample), as metrics.go and controller.go:172, :383 record them: a NodePool's node,
    launched, left to live an hour, then deleted; a Provisioner's node deleted too is counted in neither."""
    scene, controller = _nodepool_and_provisioner_pods(example)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        nodes = list(scene.nodes())
        scene.run(controller, 3600)
        for name in nodes:
            scene.cluster.delete(objects.NODE, name)
        scene.run(controller, 120, until=lambda: not scene.nodes())
        found = scrape(port)
    assert not scene.nodes()
    assert found.types["karpenter_nodes_drained_total"] == "counter"
    assert [(s.labels, s.value) for s in found.of("karpenter_nodes_drained_total")] == [({"nodepool": "default"}, 1)]
    assert found.types["karpenter_nodes_lifetime_duration_seconds"] == "histogram"
    assert [s.labels for s in found.of("karpenter_nodes_lifetime_duration_seconds_count")] == [{"nodepool": "default"}]
    assert found.value("karpenter_nodes_lifetime_duration_seconds_count", nodepool="default") == 1
    assert 3600 < found.value("karpenter_nodes_lifetime_duration_seconds_sum", nodepool="default") < 3800
    assert found.value("karpenter_nodes_lifetime_duration_seconds_bucket", nodepool="default", le="3600.0") == 0
    assert found.value("karpenter_nodes_lifetime_duration_seconds_bucket", nodepool="default", le="7200.0") == 1
    # metrics.go's buckets run to 30 days (15, 20, 25 and 30 days after 10)
    assert [s.labels["le"] for s in found.of("karpenter_nodes_lifetime_duration_seconds_bucket")][-6:] == [
        "864000.0", "1.296e+06", "1.728e+06", "2.16e+06", "2.592e+06", "+Inf"]


def test_a_deleted_nodepool_node_is_counted_terminated_and_timed_under_v1_names(example: Path) -> None:
    """node/termination/suite_test.go:975 "should fire the terminationSummary metric when deleting nodes"
    (`karpenter_nodes_termination_duration_seconds{nodepool}`: one sample, a summary) and :989 "should fire the
    nodesTerminated counter metric when deleting nodes" (`karpenter_nodes_terminated_total{nodepool}`: 1), with
    v1.14.1's labels (metrics.go: nodepool; pkg/metrics/metrics.go: nodepool and zone); a Provisioner's node, deleted
    too, keeps v0.31.1's `karpenter_nodes_terminated{provisioner}` and `…_termination_time_seconds`, and a NodePool's
    node is in neither of those."""
    scene, controller = _nodepool_and_provisioner_pods(example)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        zones = {objects.labels(n).get(wk.NODEPOOL, ""): objects.labels(n)[wk.ZONE] for n in scene.nodes().values()}
        for name in list(scene.nodes()):
            scene.cluster.delete(objects.NODE, name)
        scene.run(controller, 120, until=lambda: not scene.nodes())
        found = scrape(port)
    assert found.types["karpenter_nodes_terminated_total"] == "counter"
    assert [(s.labels, s.value) for s in found.of("karpenter_nodes_terminated_total")] == [
        ({"nodepool": "default", "zone": zones["default"]}, 1)]
    assert found.types["karpenter_nodes_termination_duration_seconds"] == "summary"
    assert [s.labels for s in found.of("karpenter_nodes_termination_duration_seconds_count")] == [
        {"nodepool": "default"}]
    assert found.value("karpenter_nodes_termination_duration_seconds_count", nodepool="default") == 1
    assert found.value("karpenter_nodes_termination_duration_seconds", nodepool="default", quantile="0.5") >= 5
    assert [(s.labels, s.value) for s in found.of("karpenter_nodes_terminated")] == [
        ({"nodepool": "", "provisioner": "default"}, 1)]
    assert [s.labels for s in found.of("karpenter_nodes_termination_time_seconds_count")] == [
        {"provisioner": "default"}]


def test_a_nodepools_node_is_created_under_v1s_name_when_its_claim_registers(example: Path) -> None:
    """pkg/metrics/metrics.go `NodesCreatedTotal` as nodeclaim/lifecycle/registration.go:122 counts it: the claim
    turning Registered (its kubelet joined) is `karpenter_nodes_created_total{nodepool, zone}` (the claim's labels);
    a Provisioner's node keeps v0.31.1's `karpenter_nodes_created{provisioner}`, and a NodePool's is not in it."""
    scene, controller = _nodepool_and_provisioner_pods(example)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        scene.run(controller, 30)  # the kubelets join
        (claim,) = scene.nodeclaims().values()
        found = scrape(port)
    assert found.types["karpenter_nodes_created_total"] == "counter"
    assert [(s.labels, s.value) for s in found.of("karpenter_nodes_created_total")] == [
        ({"nodepool": "default", "zone": objects.labels(claim)[wk.ZONE]}, 1)]
    assert [(s.labels, s.value) for s in found.of("karpenter_nodes_created")] == [
        ({"nodepool": "", "provisioner": "default"}, 1)]


def test_every_v1_metric_has_v1141s_name_type_labels_and_buckets(consolidation: Path, example: Path) -> None:
    """Each metric of `KARPENTER_V1` (written from core v1.14.1's sources: tests/reconcile/karpenter_metrics.py) as
    the controller exposes it after a NodePool's node was launched, registered, consolidated and terminated (and,
    for `karpenter_nodepools_limit` and `_usage`, the example's NodePools with a node running and `batch`'s limits):
    its type, its label names (a summary's `quantile` besides) and a histogram's buckets."""
    limited = Scene(example)
    limited.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    limited_controller = limited.controller()
    with serving(limited_controller) as port:
        limited.run(limited_controller, 120, until=lambda: not limited.unbound())
        limited_controller.feed.sync()
        limits = scrape(port)
    assert limits.label_names("karpenter_nodepools_limit") == {frozenset({"resource_type", "nodepool"})}
    scene = Scene(consolidation, types=["m5.large", "m5.xlarge", "m5.2xlarge"])
    scene.add_pod("app", cpu="100m", nodeSelector={wk.NODEPOOL: "under"})
    controller = scene.controller(consolidation_validation=0)
    with serving(controller) as port:
        scene.run(controller, 120, until=lambda: not scene.unbound())
        scene.run(controller, 30)
        (node,) = scene.nodes()
        scene.cluster.delete(objects.POD, "app", "default")
        scene.run(controller, 180, until=lambda: node not in scene.nodes() and not scene.nodeclaims())
        controller.feed.sync()
        found = scrape(port)
    for name, (kind, labels, buckets) in KARPENTER_V1.items():
        assert found.types.get(name) == kind, (name, found.types.get(name))
        series = f"{name}_count" if kind == "histogram" else name
        expected = {*labels, "quantile"} if kind == "summary" else set(labels)
        seen = found.label_names(series) | limits.label_names(series)
        if name in NO_SERIES_HERE:  # its labels: the test that makes it count
            assert seen == set(), (name, seen)
            continue
        assert seen == {frozenset(expected)}, (name, seen)
        if buckets is not None:
            edges = {float(s.labels["le"]) for s in found.of(f"{name}_bucket")}
            assert edges == {*map(float, buckets), math.inf}, name


def _instance(scene: Scene, node: str) -> str:
    return str(scene.nodes()[node]["spec"]["providerID"]).rpartition("/")[2]


def test_the_controllers_other_deletions_of_a_nodepools_claims_are_disrupted_with_v1_reasons(example: Path) -> None:
    """Where v1.14.1 deletes a NodeClaim outside a disruption command it counts `karpenter_nodeclaims_disrupted_total`
    with its reason (nodeclaim/lifecycle/launch.go `insufficient_capacity`; aws interruption/utils.go the message's
    v1 kind: `spot_interrupted`, `instance_stopped`, `instance_terminated`) — a Provisioner's node keeps v0.31's
    `karpenter_machines_terminated`."""
    scene = Scene(example)
    queue = scene.queue
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": wk.HOSTNAME}]}}
    for name in ("web-0", "web-1"):  # a node each
        scene.add_pod(name, cpu="1", labels={"app": "web"}, affinity=apart, nodeSelector={wk.NODEPOOL: "default"})
    scene.fail_next_launch()  # the NodePool's first launch: no capacity, its claim deleted
    controller = scene.controller()
    with serving(controller) as port:
        scene.run(controller, 180, until=lambda: not scene.unbound())
        scene.add_pod("legacy", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
        scene.run(controller, 180, until=lambda: not scene.unbound())
        ours = sorted(n for n, node in scene.nodes().items() if objects.labels(node).get(wk.NODEPOOL) == "default")
        legacy = next(n for n in scene.nodes() if n not in ours)
        queue.send(eventbridge.spot_interruption(_instance(scene, ours[0])))
        queue.send(eventbridge.state_change(_instance(scene, ours[1]), "stopped"))
        queue.send(eventbridge.state_change(_instance(scene, legacy), "terminated"))
        scene.run(controller, 5)
        found = scrape(port)
    disrupted = {s.labels["reason"]: (s.labels["nodepool"], s.labels["capacity_type"], s.value)
                 for s in found.of("karpenter_nodeclaims_disrupted_total")}
    assert disrupted == {"insufficient_capacity": ("default", "", 1), "spot_interrupted": ("default", "on-demand", 1),
                         "instance_stopped": ("default", "on-demand", 1)}
    assert [(s.labels, s.value) for s in found.of("karpenter_machines_terminated")] == [
        ({"reason": "interruption", "provisioner": "default"}, 1)]


def test_a_nodepools_node_whose_instance_is_gone_is_garbage_collected_under_v1s_reason(example: Path) -> None:
    """nodeclaim/garbagecollection/controller.go: `garbage_collected`."""
    scene = Scene(example)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (node,) = scene.nodes()
    scene.stop_instance(node)
    scene.run(controller, 900, until=lambda: node not in scene.nodes())
    assert scene.metric(controller, "karpenter_nodeclaims_disrupted_total", reason="garbage_collected",
                        nodepool="default", capacity_type="on-demand") == 1
    for name in ("karpenter_machines_terminated", "karpenter_machines_terminated_total"):
        assert scene.metric(controller, name, reason="garbage_collected", provisioner="NodePool/default") is None


@pytest.mark.parametrize(("body", "reason"), [
    (eventbridge.spot_interruption("i-0a"), "spot_interrupted"),
    (eventbridge.scheduled_change("i-0a"), "scheduled_change"),
    (eventbridge.state_change("i-0a", "stopping"), "instance_stopped"),
    (eventbridge.state_change("i-0a", "stopped"), "instance_stopped"),
    (eventbridge.state_change("i-0a", "shutting-down"), "instance_terminated"),
    (eventbridge.state_change("i-0a", "terminated"), "instance_terminated"),
])
def test_an_interruptions_disrupted_reason_is_its_v1_kind(body: str, reason: str) -> None:
    """aws messages/types.go and statechange/model.go `Kind()`: what `deleteNodeClaim` counts a claim under."""
    assert disrupted_reason(parse(body)) == reason
