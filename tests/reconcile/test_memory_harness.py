"""benchmarks/scale.py's memory scenario (issue #23): tracemalloc starts once caches are warm and its growth table
names the lines that kept what they allocated, and the run's samples say what happened at each RSS reading.

Tracing from the start (before the fleet's 100,000 pods were read) made the 5,000-node run last over 20 minutes;
the table compared one snapshot with another and could not tell pods turned over from growth."""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import scale  # noqa: E402
from _memtrace import GcPauses, WarmTracer, first_replaced, growth, growth_lines, memory_lines  # noqa: E402


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
