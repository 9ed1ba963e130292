"""benchmarks/scale.py's churn scenario: its burst always needs new nodes, so every row has a CreateFleet to time.

At 2,000 nodes the scenario used to leave every tenth node underutilized: their room took the whole burst, no
CreateFleet was made and the rows read '-' (issue #23)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from karpenter_policy.catalog import load_catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scale  # noqa: E402
from _fleet import NODE_TYPE, node_pods  # noqa: E402


@pytest.mark.parametrize("nodes", [500, 2000, 5000, 100_000])
def test_the_underutilized_nodes_leave_less_room_than_the_burst(nodes: int) -> None:
    indexes = scale.underutilized_indexes(nodes)
    assert len(indexes) == scale.UNDERUTILIZED
    assert len(set(indexes)) == len(indexes) and all(0 <= i < nodes for i in indexes)
    node_type = next(it for it in load_catalog().instance_types if it.name == NODE_TYPE)
    room = scale.burst_room(len(indexes), node_type.vcpu, node_type.memory_mib)
    assert 0 < room < scale.BURST


def test_at_500_nodes_the_scenario_is_the_one_measured_before() -> None:
    assert list(scale.underutilized_indexes(500)) == list(range(0, 500, 10))  # every tenth, as measured before


def test_a_fleet_smaller_than_the_underutilized_count_is_all_underutilized() -> None:
    assert list(scale.underutilized_indexes(20)) == list(range(20))


class _Probe:
    """What `scale.churn_cost` reads of a `DeliveryProbe`."""

    def __init__(self, probing: bool, events: int, watch: float) -> None:
        self.probing, self.events, self.cpu = probing, events, {"watch": watch, "apply": 0.0}


def test_the_controllers_own_cost_per_churn_event_leaves_the_api_servers_watch_out() -> None:
    found = scale.churn_cost(0.05, _Probe(True, 100, 0.02))  # type: ignore[arg-type]
    assert found == {"churn_events": 100, "churn_cpu_ms_per_event_gross": 0.5, "churn_cpu_ms_per_event_own": 0.3}


def test_no_churn_cost_is_reported_without_an_informer_to_probe_or_an_event() -> None:
    assert scale.churn_cost(0.05, _Probe(False, 100, 0.0)) == {}  # type: ignore[arg-type]
    assert scale.churn_cost(0.05, _Probe(True, 0, 0.0)) == {}  # type: ignore[arg-type]


def test_with_the_api_server_in_its_own_process_the_churn_row_times_a_launch_from_the_pods_creation() -> None:
    """`scale.py --in-process --what churn --server-process` at a tiny size: the fleet is seeded into the test API
    server in a process of its own, the controller reads it over HTTP, the churn and the burst are written by the
    server's process — and the row has what the in-process row has, plus the server's delivery (`recv`)."""
    found = scale.measure_churn_server(10, 50.0, settle=1.0, burst=100)  # 10 nodes hold < 100 pods: launches
    assert found["api_server"] == "process"
    assert found["create_fleet_calls"] >= 1
    assert 0 < found["first_create_after_last_pod"] < 30
    assert 0 <= found["last_pod_received_after_created"] <= found["first_create_after_last_pod"]
    assert found["first_create_after_last_received"] > 0
    assert found["churn_events"] > 0 and found["churn_cpu_ms_per_event_own"] > 0
    assert found["churn_achieved_per_second"] > 0
    assert found["burst_unbound_after_wait"] == 0 and found["burst_wait_seconds"] == scale.BURST_WAIT == 60


def test_a_server_row_given_less_time_than_the_launch_says_it_had_no_figure_within_its_wait() -> None:
    """`scale.py --burst-wait S` reaches the row (here through the command line the harness runs,
    `--in-process … --burst-wait 0.5`): its JSON names the wait, and a burst not bound within it leaves no
    all-bound figure, the pods left unbound counted and the answer check failed — 0.5 s is shorter than the batch
    idle (1 s), so no launch can bind the burst in it. The table reads "none in 0.5 s" for what did not come."""
    script = Path(scale.__file__).resolve()
    found = scale.server_row(script, None, 10, 0.0, ["--settle", "1", "--burst", "100", "--burst-wait", "0.5"])
    assert "n/a" not in found, found
    assert found["burst_wait_seconds"] == 0.5
    assert "all_bound_after_last_pod" not in found
    assert found["burst_unbound_after_wait"] > 0
    assert found["answer_check"].startswith("failed: ") and "pods of the burst unbound" in found["answer_check"]
    assert scale.burst_figure(found, "all_bound_after_last_pod") == "none in 0.5 s"


def test_a_burst_wait_that_is_not_a_positive_number_of_seconds_is_refused_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for wait, why in (("0", "a number of seconds above 0"), ("-5", "a number of seconds above 0"),
                      ("abc", "invalid float value: 'abc'"), ("1e99999999", "a number of seconds above 0"),
                      ("nan", "a number of seconds above 0"), ("inf", "a number of seconds above 0"),
                      ("9" * 4000, "a number of seconds above 0"),
                      ("86401", "a number of seconds above 0 and at most 86400")):
        with pytest.raises(SystemExit) as stopped:
            scale.main(["--burst-wait", wait])
        assert stopped.value.code == 2
        assert f"--burst-wait: {why}" in capsys.readouterr().err


def test_a_row_run_in_its_own_process_is_given_its_burst_wait_beyond_the_default() -> None:
    assert scale.row_timeout(["--size", "500"]) == scale.row_timeout(["--burst-wait", "60"]) == 1800
    assert scale.row_timeout(["--size", "500", "--burst-wait", "180"]) == 1800 + 120


@pytest.mark.parametrize("nodes", [1, 7, 19, 20, 30, 500])
def test_every_status_update_of_the_fleet_row_names_a_pod_the_fleet_has(nodes: int) -> None:
    """`measure_size`'s 2,000 status updates go to pods that exist, whatever the fleet's size: they named each
    pod's namespace by the update's number (`team-{i % 20}`) where the pods are in their node's (`team-{node %
    20}`), which agree only when the fleet is a multiple of 20 nodes — under 20 every patch after the first nodes'
    was a 404 and the row failed."""
    names = [f"node-{index}" for index in range(nodes)]
    fleet = {(pod["metadata"]["namespace"], pod["metadata"]["name"])
             for index, node in enumerate(names) for pod in node_pods(node, scale.PODS_PER_NODE, "1", "1Gi", index)}
    targets = scale.event_targets(names, scale.EVENTS)
    assert len(targets) == scale.EVENTS
    assert set(targets) <= fleet
    assert len(set(targets)) == min(scale.EVENTS, len(fleet))  # spread over the fleet, each pod once at most


@pytest.mark.slow
def test_the_fleet_row_runs_on_a_fleet_of_a_few_nodes() -> None:
    """`scale.py --in-process --size 5`: the row is measured end to end (it raised a 404 on the updates before) — its
    windows and updates a tenth of the benchmark's (issue #26: they are the figures' length, not the row's path)."""
    found = scale.measure_size(5, windows={key: value / 10 for key, value in scale.SIZE_WINDOWS.items()},
                               events=scale.EVENTS // 10)
    assert found["nodes"] == 5 and found["pods"] == 5 * scale.PODS_PER_NODE
    assert found["create_fleet_calls"] >= 1 and found["burst_unbound_after_wait"] == 0


def test_the_side_by_side_table_gives_each_figure_of_both_controllers_and_their_ratio() -> None:
    """`scale.py --server-process --controller-baseline REF` prints REF's row and this tree's, size by size and
    churn by churn, with this tree's figure over REF's; a figure that did not come within the row's burst wait
    reads "none in N s" (the default wait for a row that does not name one), a row REF could not run says why."""
    baseline = [
        {"nodes": 500, "churn_per_second": 0.0, "first_create_after_last_pod": 2.0, "last_create_after_last_pod": 4.0,
         "all_bound_after_last_pod": 10.0, "answer_check": "ok"},
        {"nodes": 500, "churn_per_second": 200.0, "n/a": "AttributeError: 'Runner' object has no attribute 'x'"},
    ]
    ours = [
        {"nodes": 500, "churn_per_second": 0.0, "first_create_after_last_pod": 1.0, "last_create_after_last_pod": 3.0,
         "answer_check": "failed: 3 pods of the burst unbound"},
        {"nodes": 500, "churn_per_second": 200.0, "first_create_after_last_pod": 1.1, "answer_check": "ok"},
    ]
    header, _, quiet, churned = scale.side_by_side(baseline, ours, "2947bfc")
    assert "2947bfc" in header
    assert "2 / 1 (0.50×)" in quiet and "4 / 3 (0.75×)" in quiet and "10 / none in 60 s (-)" in quiet
    assert quiet.rstrip().endswith("ok | failed: 3 pods of the burst unbound")
    assert churned.split()[:2] == ["500", "200"]
    assert "n/a (AttributeError: 'Runner' object has no attribute 'x')" in churned


def test_the_side_by_side_table_gives_a_baseline_that_launched_late_its_figure_and_ratio() -> None:
    """With `--burst-wait 180` a baseline controller that launches after 60 s has its figures and a ratio; one
    that launched nothing within the wait reads "none in 180 s", never "-"."""
    late = {"nodes": 500, "churn_per_second": 200.0, "burst_wait_seconds": 180.0,
            "first_create_after_last_pod": 75.5, "last_create_after_last_pod": 80.0,
            "all_bound_after_last_pod": 95.0, "answer_check": "ok"}
    never = {"nodes": 500, "churn_per_second": 200.0, "burst_wait_seconds": 180.0,
             "answer_check": "failed: 1000 pods of the burst unbound"}
    ours = {"nodes": 500, "churn_per_second": 200.0, "burst_wait_seconds": 180.0,
            "first_create_after_last_pod": 1.1, "last_create_after_last_pod": 1.2, "all_bound_after_last_pod": 3.8,
            "answer_check": "ok"}
    _, _, launched, missed = scale.side_by_side([late, never], [ours, ours], "2947bfc")
    assert "75.5 / 1.1 (0.01×)" in launched and "95 / 3.8 (0.04×)" in launched
    assert "none in 180 s / 1.1 (-)" in missed and "none in 180 s / 3.8 (-)" in missed
    assert missed.rstrip().endswith("failed: 1000 pods of the burst unbound | ok")


def test_the_launch_answer_check_finds_an_instance_without_a_node_and_a_node_without_an_instance(
    tmp_path: Path,
) -> None:
    """The answer check of a server-process row (`_controllers.launch_answer`), asked the same of either tree's
    controller: every burst pod bound, every instance of the cluster named by a Node and every Node's instance
    live."""
    from _controllers import launch_answer, orphans
    from _fleet import CLUSTER

    from karpenter_policy.kube import objects
    from karpenter_policy.testing import Scene

    scene = Scene(scale.compiled_policy(scale.TTL, tmp_path), cluster_name=CLUSTER)
    first, second = (scene.add_node("fleet", NODE_TYPE) for _ in range(2))
    nodes = lambda: list(scene.cluster.list(objects.NODE).items)  # noqa: E731
    assert orphans(scene.cloud, nodes()) == ([], [])
    assert launch_answer(lambda: 0, scene.cloud, nodes, settle=0.0) == "ok"
    gone = scene.cluster.get(objects.NODE, first)
    assert gone is not None
    scene.cluster.patch(objects.NODE, first, {"metadata": {"finalizers": None}})  # gone at once, not terminated
    scene.cluster.delete(objects.NODE, first)
    assert scene.cluster.get(objects.NODE, first) is None
    provider = scene.cluster.get(objects.NODE, second)["spec"]["providerID"]  # type: ignore[index]
    scene.cloud.delete(provider.rsplit("/", 1)[1])
    without_node, without_instance = orphans(scene.cloud, nodes())
    assert without_node == [gone["spec"]["providerID"]] and without_instance == [provider]
    assert launch_answer(lambda: 3, scene.cloud, nodes, settle=0.0) == (
        f"failed: 3 pods of the burst unbound; 1 instances without a Node (e.g. {without_node[0]}); 1 Nodes without "
        f"an instance (e.g. {provider})")


def test_a_run_whose_answer_check_failed_still_gives_its_figures(tmp_path: Path) -> None:
    """`run_tree` returns the JSON of a row that exits 1 because its answer check failed (the table shows the
    failure beside the figures); any other failure ends the harness with the run's error."""
    from _fleet import run_tree

    script = tmp_path / "row.py"
    script.write_text("import json, sys\nprint(json.dumps({'first': 1.5, 'answer_check': 'failed: 2 pods unbound'}))\n"
                      "sys.exit(1)\n", encoding="utf-8")
    assert run_tree(script, None, [], timeout=60) == {"first": 1.5, "answer_check": "failed: 2 pods unbound"}
    script.write_text("raise RuntimeError('broken')\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="broken"):
        run_tree(script, None, [], timeout=60)


@pytest.mark.slow
def test_the_server_rows_run_2947bfcs_controller_against_this_trees_api_server() -> None:
    """`scale.py --server-process --controller-baseline 2947bfc` at a tiny size: the controller of 2947bfc (its
    package exported with git archive, driven through `_controllers`: its runner's `view` where this tree's has a
    `feed`) reads this tree's test API server over HTTP in the same scenario, times its CreateFleet from the burst's
    creation and passes the same answer check as this tree's controller."""
    script = Path(scale.__file__).resolve()
    tree = scale.export_tree("2947bfc")
    extra = ["--settle", "1", "--burst", "100", "--burst-wait", "90"]  # the wait reaches 2947bfc's row too
    found = scale.server_row(script, tree, 10, 50.0, extra)  # 10 nodes hold < 100 pods: launches
    assert "n/a" not in found, found
    assert found["burst_wait_seconds"] == 90
    assert found["controller_package"] == str(tree / "karpenter_policy")  # 2947bfc's, not this tree's
    assert found["api_server"] == "process"
    assert found["create_fleet_calls"] >= 1 and 0 < found["first_create_after_last_pod"] < 30
    # the probe found 2947bfc's pods informer in its view; the server stamps a pod's creation when its create
    # returns, and its watch may hand the pod over a moment before that (a CI run read -0.001 s)
    assert found["last_pod_received_after_created"] > -0.05
    assert found["answer_check"] == "ok"
    ours = scale.server_row(script, None, 10, 50.0, extra)
    assert ours["answer_check"] == "ok" and ours["controller_package"] == str(scale.REPOSITORY / "karpenter_policy")
    lines = scale.side_by_side([found], [ours], "2947bfc")
    assert "n/a" not in lines[2] and "×" in lines[2]


def test_the_burst_timeline_counts_what_held_the_process_in_each_span_of_the_burst() -> None:
    """`BurstTimeline.report`: the garbage collections and the consolidation decisions that overlapped the burst's
    delivery (its first write → the informer reading its last pod) and the controller's part (→ the first
    CreateFleet), as seconds of each span — a collection or decision across the boundary counted in both, partly
    — with the collections' count per generation and CPU; a span without an end (no CreateFleet) is left out."""
    timeline = scale.BurstTimeline()
    timeline.collections = [(9.0, 10.5, 0, 0.01), (11.0, 11.5, 2, 0.4), (11.9, 12.3, 1, 0.1), (20.0, 21.0, 2, 0.5)]
    decided = [scale.Decided(1.0, "complete", 0.9, 11.5), scale.Decided(2.0, "pods pending", 1.5, 30.0)]
    found = timeline.report(10.0, 12.0, 13.0, decided)
    assert found == {
        "burst_delivery_gc_seconds": 1.1, "burst_delivery_gc_cpu_seconds": 0.51,
        "burst_delivery_gc_collections": [1, 1, 1], "burst_delivery_decision_seconds": 0.5,
        "burst_controller_gc_seconds": 0.3, "burst_controller_gc_cpu_seconds": 0.1,
        "burst_controller_gc_collections": [0, 1, 0], "burst_controller_decision_seconds": 0.5,
    }
    assert set(timeline.report(10.0, 12.0, None, decided)) == {
        "burst_delivery_gc_seconds", "burst_delivery_gc_cpu_seconds", "burst_delivery_gc_collections",
        "burst_delivery_decision_seconds"}


def test_the_delivery_probe_names_the_longest_gap_between_two_pods_of_the_burst_read() -> None:
    """A gap as long as the batch idle (1 s) in the informer's reading of a burst closes the window mid-burst (the
    burst is then planned in two batches, the first CreateFleet before the last pod's creation): the row says how
    long the longest gap was (`burst_received_longest_gap`)."""
    probe = scale.DeliveryProbe.__new__(scale.DeliveryProbe)
    probe.probing, probe.events, probe.cpu = True, 4, {"apply": 0.004, "watch": 0.002}
    probe.received = {"burst-0": 10.0, "burst-1": 10.1, "burst-2": 11.3, "burst-3": 11.35}
    found = probe.report(11.2, burst=4)
    assert found["burst_received_longest_gap"] == 1.2
    assert found["last_pod_received_after_created"] == 0.15
    probe.received.pop("burst-3")  # not every pod read: no gap, no delivery figure
    assert "burst_received_longest_gap" not in probe.report(11.2, burst=4)
