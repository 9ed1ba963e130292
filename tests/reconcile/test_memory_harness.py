"""benchmarks/scale.py's memory scenario (issue #23): tracemalloc starts once caches are warm and its growth table
names the lines that kept what they allocated, and the run's samples say what happened at each RSS reading.

Tracing from the start (before the fleet's 100,000 pods were read) made the 5,000-node run last over 20 minutes;
the table compared one snapshot with another and could not tell pods turned over from growth. With the snapshots
at turnover boundaries (every churned pod replaced once, in turn, between two of them) it can, and a verdict says
whether the traced total grew."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scale  # noqa: E402
from _memtrace import (  # noqa: E402
    GcPauses,
    TurnoverTracer,
    WarmTracer,
    first_replaced,
    growth,
    growth_lines,
    memory_lines,
    verdict,
)

from karpenter_policy.fakes.cluster import MemoryCluster  # noqa: E402
from karpenter_policy.kube import objects  # noqa: E402


@given(st.integers(-5, 10_000), st.integers(-5, 10_000), st.integers(1, 5_000))
def test_the_pods_first_traced_never_exceed_the_pods_churned(before: int, after: int, slots: int) -> None:
    low, high = sorted((before, after))
    assert 0 <= first_replaced(low, slots) <= first_replaced(high, slots) <= slots


def test_the_growth_table_lists_the_sites_that_grew_most_with_their_count_per_new_pod() -> None:
    first = {"a.py:1": (1000, 10), "b.py:2": (5000, 50), "gone.py:3": (4096, 4)}
    last = {"a.py:1": (1000 + 40 * 1024, 410), "b.py:2": (5000 + 2048, 60), "new.py:4": (2048, 1)}
    rows = growth(first, last, new_pods=100, top=3)
    assert [row["site"] for row in rows] == ["a.py:1", "b.py:2", "new.py:4"]  # ties (2 KiB) by site
    assert rows[0] == {"site": "a.py:1", "size_kib": 40.0, "count": 400, "count_per_new_pod": 4.0}
    assert growth_lines(rows)[0] == "a.py:1 +40 KiB (+400, +4/new pod)"
    assert growth(first, last, new_pods=0, top=1)[0]["count_per_new_pod"] is None
    assert growth_lines(growth(first, last, new_pods=0, top=1)) == ["a.py:1 +40 KiB (+400)"]


def test_the_tracer_starts_when_due_and_names_the_line_that_keeps_growing() -> None:
    tracer = WarmTracer(after=5.0, every=10.0)
    kept: list[bytes] = [b"x" * 100 for _ in range(100)]  # allocated before tracing: never seen
    tracer.tick(4.9, 0)
    assert not tracemalloc.is_tracing() and tracer.due() == 5.0
    try:
        tracer.tick(5.0, 7)
        assert tracemalloc.is_tracing() and tracer.due() == 15.0
        tracer.tick(15.0, 107)
        kept.extend(bytes([i % 256]) * 1000 for i in range(2000))  # the growth: 2,000 objects of 1 kB, kept
        tracer.finish(25.0, 207)
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    assert not tracemalloc.is_tracing()
    found = tracer.report(slots=150)["tracemalloc"]
    assert found["started_at_seconds"] == 5.0 and found["replacements_before_tracing"] == 7
    assert [s["at_seconds"] for s in found["snapshots"]] == [15.0, 25.0]
    assert found["pods_first_traced_between"] == 150 - 100  # 100 replaced by the first snapshot, 200 by the last
    top = found["growth_unattributed"][0]  # a test's line: neither the package's nor the benchmark's
    assert top["site"].startswith(f"{__file__}:") and top["count"] >= 2000 and top["size_kib"] >= 1900
    assert len(kept) == 2100


def test_every_full_collection_between_start_and_stop_is_timed_and_none_after() -> None:
    """`GcPauses`: the memory scenario's longest generation-2 pause (what a full collection of the warm heap stops
    every thread for) comes from the collector's own callbacks, one per collection."""
    pauses = GcPauses().start()
    try:
        kept = [[index] for index in range(200_000)]  # a heap to walk
        gc.collect(2)
        gc.collect(2)
    finally:
        pauses.stop()
    gc.collect(2)  # not counted: stopped
    found = pauses.report()["gc_pauses"]
    assert found["collections"][2] >= 2
    assert 0 < found["longest_seconds"][2] <= found["total_seconds"][2] + 0.001
    assert 0 < found["longest_cpu_seconds"][2] <= found["total_cpu_seconds"][2] + 0.001
    assert len(kept) == 200_000
    assert any("longest gen-2 pause" in line for line in memory_lines(
        {"nodes": 1, "pods": 1, "replacements": 0, "seconds": 1.0, "churn_achieved_per_second": 0.0,
         "churn_per_second": 0.0, "every": 1.0, "samples": [], **pauses.report(), "gc_freeze": True}))


def test_the_full_collections_are_told_apart_by_whose_they_were_and_whether_a_batch_was_open() -> None:
    """The memory scenario says whether a full collection was the runner's own (`HeapCollector.collecting` at its
    start) or Python's, and whether it began while a batch window was open: the question of issue #23's item 5."""
    state = {"ours": False, "batch": False}
    pauses = GcPauses(inside=lambda: state["batch"], ours=lambda: state["ours"]).start()
    try:
        gc.collect(2)  # Python's (as an automatic one), no batch
        state["batch"] = True
        gc.collect(2)  # Python's, in a batch
        state["ours"] = True
        gc.collect(2)  # the runner's, in a batch
    finally:
        pauses.stop()
    found = pauses.report()["gc_pauses"]
    assert found["full_by"] == {"runner": 1, "python": 2}
    assert found["full_in_batch_by"] == {"runner": 1, "python": 1}
    assert 0 < found["python_full_longest_seconds"] <= found["longest_seconds"][2]


def test_a_tracer_that_never_started_reports_no_trace() -> None:
    tracer = WarmTracer(after=60.0, every=60.0)
    tracer.tick(10.0, 5)
    tracer.finish(20.0, 10)
    assert tracer.report(slots=10) == {"tracemalloc": None}


@pytest.mark.slow
def test_the_memory_scenario_samples_and_traces_a_small_fleet_under_churn() -> None:
    """`scale.py --in-process --what memory --size 10 --seconds 4 --every 1 --tracemalloc --trace-after 1
    --snapshot-every 1`: every sample has what explains RSS, the snapshots come after tracing started, and the
    controller's state holds the API server's pods at the end (the answer check)."""
    found = scale.measure_memory(10, 50.0, 4.0, trace=True, every=1.0, trace_after=1.0, snapshot_every=1.0)
    samples = found["samples"]
    assert samples[0]["at_seconds"] == 0.0 and samples[-1]["at_seconds"] >= 4.0  # a snapshot may delay the rest
    assert all(s["rss_mib"] > 0 and len(s["gc_collections"]) == 3 and s["lists"] >= 1 for s in samples)
    assert samples[-1]["replacements"] > 0 and found["replacements"] >= samples[-1]["replacements"]
    traced = found["tracemalloc"]
    assert traced["started_at_seconds"] >= 1.0
    assert traced["snapshots"] and all(s["at_seconds"] > traced["started_at_seconds"] for s in traced["snapshots"])
    assert found["answer_check"] == "ok"
    assert found["gc_freeze"] and found["gc_frozen_objects"] > 0  # the runner froze its warm heap after its sync
    assert len(found["gc_pauses"]["collections"]) == 3 and found["gc_pauses"]["collections"][0] > 0
    assert found["state_pods"] == 10 * scale.KEPT  # under 50 nodes every node is left with its 2 pods
    assert any("tracemalloc" in line for line in memory_lines(found))
    assert not tracemalloc.is_tracing()


def _bound_pods(cluster: MemoryCluster, count: int) -> None:
    for index in range(count):
        cluster.create(objects.POD, {
            "metadata": {"name": f"p{index}", "namespace": "default", "labels": {"app": "a"}},
            "spec": {"nodeName": f"node-{index % 2}", "containers": [{"name": "app", "image": "app:1"}]},
            "status": {"phase": "Running"}})


def test_the_churn_replaces_every_pod_once_per_turnover_in_turn_and_holds_at_its_end() -> None:
    """One turnover of `scale.Churn` is every bound pod replaced exactly once, in the slots' order; with `hold` the
    churn stops at the turnover's end until resumed (where `--snapshot-every-turnover` takes its snapshot)."""
    cluster = MemoryCluster()
    _bound_pods(cluster, 5)
    churn = scale.Churn(SimpleNamespace(cluster=cluster), rate=10_000.0, hold=True)  # type: ignore[arg-type]
    names = lambda: sorted(objects.name(p) for p in cluster.list(objects.POD).items)  # noqa: E731
    churn.start()
    try:
        assert churn.at_boundary.wait(30)
        assert churn.done == 5 and churn.turnovers() == 1  # held: not one replacement past the boundary
        assert names() == [f"p{i}-r{i}" for i in range(5)]  # each pod once, in turn
        churn.resume()
        assert churn.at_boundary.wait(30)
        assert churn.done == 10 and churn.turnovers() == 2
        assert names() == [f"p{i}-r{5 + i}" for i in range(5)]
        assert all(p["spec"]["nodeName"] == f"node-{i % 2}"
                   for i, p in enumerate(sorted(cluster.list(objects.POD).items, key=objects.name)))
    finally:
        churn.stop()
    assert not churn.thread.is_alive() and churn.done == 10  # stopped at the boundary it held


def test_the_verdict_holds_the_traced_total_to_its_stated_bounds() -> None:
    mib = 2**20
    flat = verdict(2, 6, 40 * mib, 40 * mib + 44_000, 4_400, (180.0, 181.5))
    assert flat["no_growth"] and flat["bytes_per_replacement"] == 10.0
    assert flat["line"].startswith("no growth once warm: the traced total moved +43.0 KiB (+0.10 %) over turnovers "
                                   "2..6, +10.0 B per replacement of 4400")
    assert flat["line"].endswith("RSS 180.0 → 181.5 MiB")
    per_pod = verdict(2, 6, 40 * mib, 40 * mib + 4_400 * 28, 4_400)  # one int kept per pod replaced: 0.29 %
    assert not per_pod["no_growth"] and per_pod["line"].startswith("GROWTH once warm")
    share = verdict(2, 3, mib, mib + 20_000, 10_000)  # 2 B per replacement, but 1.9 % of the total
    assert not share["no_growth"]
    assert verdict(2, 6, 40 * mib, 39 * mib, 4_400)["no_growth"]  # a fall is no growth


def test_snapshots_at_turnover_boundaries_name_the_line_that_grew_in_its_turnover_only() -> None:
    """`TurnoverTracer`: tracing from its start, no snapshot before the warm-up's end, one per boundary after;
    each turnover's row has its growth against the boundary before and the sites that grew, and the verdict
    weighs the first boundary snapshotted against the last."""
    tracer = TurnoverTracer(warm=2)
    kept: list[bytes] = []
    try:
        tracer.start()
        assert tracemalloc.is_tracing()
        tracer.boundary(1, 2.0, 10_000)  # the warm-up: no snapshot
        assert not tracer.snapshots
        gc.collect()
        tracer.boundary(2, 3.0, 20_000, rss_mib=100.0, caught_up=True)
        kept.extend(bytes([i % 256]) * 1000 for i in range(30_000))  # turnover 3 keeps 30,000 objects of 1 kB
        gc.collect()
        tracer.boundary(3, 4.0, 30_000, rss_mib=102.0, caught_up=True)
        gc.collect()
        tracer.boundary(4, 5.0, 40_000, rss_mib=102.0, caught_up=True)  # turnover 4 keeps nothing more
    finally:
        tracer.stop()
    assert not tracemalloc.is_tracing()
    found = tracer.report(slots=10_000)["tracemalloc"]
    rows = found["turnovers"]
    assert [row["turnover"] for row in rows] == [2, 3, 4] and "growth_kib" not in rows[0]
    # The traced total is the whole process's (an xdist worker's other threads allocate and free beside this
    # test: a CI run read -7.5 MB): each row's growth is its total against the row before, and the planted line is
    # named with its own growth, whatever else moved.
    for before, row in zip(rows, rows[1:], strict=False):
        assert row["growth_kib"] == pytest.approx(row["traced_kib"] - before["traced_kib"], abs=0.2)
        assert row["bytes_per_replacement"] == pytest.approx(row["growth_kib"] * 1024 / 10_000, abs=0.2)
    planted = f"unattributed {__file__}:"
    grew = [site for site in rows[1]["top_sites"] if site["site"].startswith(planted)]
    assert grew and grew[0]["size_kib"] >= 29_000 and grew[0]["count_per_new_pod"] >= 2.9  # 30,000 over 10,000
    assert rows[1]["top_sites"][0] == grew[0]  # 30 MB: no other line grew as much
    assert not [site for site in rows[2]["top_sites"] if site["site"].startswith(planted) and site["size_kib"] > 1]
    assert found["verdict"]["first_turnover"] == 2 and found["verdict"]["last_turnover"] == 4
    assert not found["verdict"]["no_growth"]  # 30 MB kept between the first boundary and the last
    text = memory_lines({"nodes": 1, "pods": 1, "replacements": 40_000, "seconds": 5.0,
                         "churn_achieved_per_second": 1.0, "churn_per_second": 1.0, "every": 1.0, "samples": [],
                         "tracemalloc": found})
    assert any(line.strip().startswith("turnover 3 (4 s): traced") for line in text)
    assert text[-1].strip().startswith("GROWTH once warm: the traced total moved +")
    assert len(kept) == 30_000


@pytest.mark.slow
def test_the_memory_scenario_snapshots_at_turnover_boundaries_and_gives_its_verdict() -> None:
    """`scale.py --in-process --what memory --size 10 --tracemalloc --snapshot-every-turnover --turnovers 3`:
    tracing from before the build, a snapshot at the end of turnovers 2 and 3 (each exactly at its boundary: a
    whole number of turnovers made, the controller caught up), the verdict over 2..3, and the answer check (the
    controller's state holds the API server's pods)."""
    found = scale.measure_memory(10, 200.0, 300.0, trace=True, every=5.0, by_turnover=True, warm_turnovers=2,
                                 turnovers=3)
    traced = found["tracemalloc"]
    slots = traced["churned_pods"]
    assert slots == 10 * scale.KEPT and found["turnovers_completed"] == 3 and found["replacements"] == 3 * slots
    assert traced["traced_from"] == "before the build" and traced["warm_turnovers"] == 2
    assert [(row["turnover"], row["replacements"]) for row in traced["turnovers"]] == [(2, 2 * slots),
                                                                                       (3, 3 * slots)]
    assert all(row["caught_up"] for row in traced["turnovers"])
    assert traced["verdict"]["first_turnover"] == 2 and traced["verdict"]["last_turnover"] == 3
    assert traced["verdict"]["line"].split(":")[0] in ("no growth once warm", "GROWTH once warm")
    assert found["answer_check"] == "ok"
    assert memory_lines(found)[-1].strip() == traced["verdict"]["line"]
    assert not tracemalloc.is_tracing()
