"""What `scale.py --what memory` watches while bound pods are replaced (issue #23): a sample of the process every
few seconds (RSS, garbage collections, informer relists, the API server's history), how long each garbage
collection stopped the process (`GcPauses`), and tracemalloc started only once caches are warm, with a snapshot at
intervals and the sites that grew most between the first and the last.

Tracing starts after the fleet is built, the controller synced and the first minute of churn has run, so the
100,000 pods of the build are never traced (tracing them made the run at 5,000 nodes last over 20 minutes) and
what tracemalloc sees is only what was allocated after that point and is still alive: growth once warm — with one
caveat the report states. A pod replaced after tracing started is traced, the one it replaced was not: until every
churned pod has been replaced once since tracing began, the traced heap grows by the pods turned over even when the
process does not grow at all. `WarmTracer.report` gives how many pods were first replaced between the first and the
last snapshot (`pods_first_traced_between`) and each site's count per such pod, so a site that grows as pods are
turned over (one object per pod, three …) is told apart from one that grows without bound.

That caveat is gone when snapshots follow turnovers (`TurnoverTracer`, `scale.py --snapshot-every-turnover`): the
churn replaces its pods in turn, so one turnover replaces every churned pod exactly once; tracing starts before
the fleet is built (a small fleet: CPython's free lists recycle blocks allocated before tracing, untraced, which
a later start mistakes for growth — see the class) and a snapshot is taken at the end of every turnover after
the warm-up, the churn holding at the boundary. Consecutive boundaries hold as many pods, so the traced total's
move between them is growth; `verdict` judges it against stated bounds (`VERDICT_SHARE`,
`VERDICT_BYTES_PER_REPLACEMENT`).
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Frames kept per allocation. Tracing costs in proportion to them (a pod's deep copy: 4.5× slower traced with
#: 1 frame, 34× with 16, 70× with 64, on this machine), and at 64 the churn at 500 nodes fell from ~190
#: replacements a second to ~14; 20 reach the innermost line of the package's own code through a pod's deep
#: copy, though not always a thread's first frame (see `attributed`).
TRACE_FRAMES = 20
#: The tracer's own work (snapshots and their reduction): not the process's growth.
OWN = ("/benchmarks/_memtrace.py", "/tracemalloc.py")
#: Where the in-process API server and the benchmark live: what they hold is not the controller's memory.
HARNESS_PARTS = ("/karpenter_policy/fakes/", "/karpenter_policy/testing/", "/karpenter_policy/simulate/",
                 "/benchmarks/")
#: Sites listed per owner in the growth table.
TOP_SITES = 12

Attributed = dict[str, dict[str, tuple[int, int]]]
OWNERS = ("controller", "harness", "benchmark", "unattributed")
#: The turnover verdict's bounds on the traced total's move from the first judged turnover boundary to the last:
#: at most this share of it, and at most this many bytes per replacement made in between — below the smallest
#: object Python can keep (an int is 28 bytes), so one object kept per pod replaced fails the verdict.
VERDICT_SHARE = 0.01
VERDICT_BYTES_PER_REPLACEMENT = 24
#: Sites listed per turnover in the turnover table.
TURNOVER_SITES = 5


def attributed(snapshot: tracemalloc.Snapshot) -> Attributed:
    """The snapshot's allocations, by owner and site: the owner is the harness when the oldest frame of the
    package's or the benchmark's code kept is the benchmark's or the in-process API server's (the churn thread's
    writes: the API server's objects and watch history), the controller otherwise (its informers, state and
    passes); of the harness's, the benchmark's own records (its samples and decisions timed: they grow with the
    run's length by design) are the `benchmark`'s — the innermost frame of the harness's code kept is the
    benchmark's; the site is the innermost frame of the owner's own code — `file:line`, the line that made the object
    kept. With every frame kept, the oldest is the thread's first, and the copies the API server makes for a
    watch the controller reads count as the controller's; a stack deeper than the frames kept is cut at its old
    end, and such a copy counts as the harness's (its innermost frame is the API server's). An allocation whose
    frames kept show no code of the package nor of the benchmark is `unattributed` (its innermost line is the
    site). The tracer's own allocations are left out."""
    found: Attributed = {owner: {} for owner in OWNERS}
    for stat in snapshot.statistics("traceback"):
        if any(frame.filename.endswith(OWN) for frame in stat.traceback):
            continue
        frames = [frame for frame in stat.traceback if "/karpenter_policy/" in frame.filename
                  or "/benchmarks/" in frame.filename]  # oldest first
        if not frames:
            owner, site = "unattributed", str(stat.traceback[-1])
        else:
            owner = "harness" if any(part in frames[0].filename for part in HARNESS_PARTS) else "controller"
            own = [f for f in frames if (owner == "harness") == any(p in f.filename for p in HARNESS_PARTS)]
            frame = (own or frames)[-1]
            if owner == "harness" and "/benchmarks/" in frame.filename:
                owner = "benchmark"
            site = f"{frame.filename.split('/karpenter_policy/')[-1].split('/benchmarks/')[-1]}:{frame.lineno}"
        size, count = found[owner].get(site, (0, 0))
        found[owner][site] = (size + stat.size, count + stat.count)
    return found


def first_replaced(replacements: int, slots: int) -> int:
    """How many of the churn's `slots` bound pods have been replaced at least once after `replacements`
    replacements made in turn (the churn goes through its slots in order): the pods whose objects are traced."""
    return min(max(replacements, 0), slots)


def growth(first: dict[str, tuple[int, int]], last: dict[str, tuple[int, int]], new_pods: int,
           top: int = TOP_SITES) -> list[dict[str, Any]]:
    """The `top` sites whose traced size grew most from `first` to `last` (ties by site, so the table is the same
    for the same snapshots): size and count differences, and the count per pod first traced in between
    (`new_pods`; None when there were none — then any growth is growth)."""
    rows = []
    for site in first.keys() | last.keys():
        size = last.get(site, (0, 0))[0] - first.get(site, (0, 0))[0]
        count = last.get(site, (0, 0))[1] - first.get(site, (0, 0))[1]
        rows.append((-size, site, count))
    rows.sort()
    return [{"site": site, "size_kib": round(-negative / 1024, 1), "count": count,
             "count_per_new_pod": round(count / new_pods, 2) if new_pods else None}
            for negative, site, count in rows[:top]]


def growth_lines(rows: list[dict[str, Any]], per: str = "new pod") -> list[str]:
    """The growth table as text, one site a line; `per`: what `count_per_new_pod` counted over."""
    return [f"{row['site']} {row['size_kib']:+.0f} KiB ({row['count']:+d}"
            + (f", {row['count_per_new_pod']:+g}/{per})" if row["count_per_new_pod"] is not None else ")")
            for row in rows]


@dataclass
class Snapshot:
    """One warm snapshot, reduced to what the report needs (the snapshot itself is dropped at once)."""

    at: float  # seconds since the churn began
    replacements: int  # made since the churn began
    traced_mib: float
    owners: Attributed
    seconds: float  # how long taking and reducing it took (the churn waited as long)
    turnover: int | None = None  # taken at the end of this turnover (`TurnoverTracer`)
    rss_mib: float | None = None
    caught_up: bool | None = None  # the controller's state held the API server's pods when it was taken


def take(elapsed: float, replacements: int, **extra: Any) -> Snapshot:
    """A snapshot now, reduced by owner and site (`attributed`)."""
    began = time.monotonic()
    traced = tracemalloc.get_traced_memory()[0]
    snapshot = tracemalloc.take_snapshot()
    owners = attributed(snapshot)
    del snapshot
    return Snapshot(round(elapsed, 1), replacements, round(traced / 2**20, 1), owners,
                    round(time.monotonic() - began, 1), **extra)


def judged_bytes(snapshot: Snapshot) -> int:
    """What the turnover verdict weighs: every owner's traced bytes but the benchmark's own records (they grow
    with the run's length by design) and the tracer's (never counted by `attributed`)."""
    return sum(size for owner, sites in snapshot.owners.items() if owner != "benchmark"
               for size, _ in sites.values())


def verdict(first_turnover: int, last_turnover: int, first_bytes: int, last_bytes: int, replacements: int,
            rss_mib: tuple[float | None, float | None] = (None, None)) -> dict[str, Any]:
    """The turnover run's verdict: the traced total at the end of `first_turnover` and at the end of
    `last_turnover` (`replacements` made in between) — no growth when it moved up by at most `VERDICT_SHARE` of
    itself and at most `VERDICT_BYTES_PER_REPLACEMENT` bytes per replacement (a fall is no growth)."""
    moved = last_bytes - first_bytes
    share = moved / first_bytes if first_bytes else 0.0
    per = moved / replacements if replacements else 0.0
    ok = share <= VERDICT_SHARE and per <= VERDICT_BYTES_PER_REPLACEMENT
    rss = f"; RSS {rss_mib[0]} → {rss_mib[1]} MiB" if rss_mib[0] is not None and rss_mib[1] is not None else ""
    bounds = f"≤ {VERDICT_SHARE * 100:g} % and ≤ {VERDICT_BYTES_PER_REPLACEMENT} B per replacement"
    line = (f"{'no growth once warm' if ok else 'GROWTH once warm'}: the traced total moved {moved / 1024:+.1f} KiB "
            f"({share * 100:+.2f} %) over turnovers {first_turnover}..{last_turnover}, {per:+.1f} B per replacement "
            f"of {replacements} (bounds: {bounds}){rss}")
    return {"no_growth": ok, "first_turnover": first_turnover, "last_turnover": last_turnover,
            "moved_kib": round(moved / 1024, 1), "moved_percent": round(share * 100, 3),
            "bytes_per_replacement": round(per, 1), "replacements": replacements, "line": line}


def _flat(snapshot: Snapshot) -> dict[str, tuple[int, int]]:
    """Every owner's sites but the benchmark's, keyed `owner site`."""
    return {f"{owner} {site}": value for owner, sites in snapshot.owners.items() if owner != "benchmark"
            for site, value in sites.items()}


@dataclass
class TurnoverTracer:
    """Snapshots at turnover boundaries (one turnover: every churned pod replaced once, in turn; the churn holds
    at each boundary while the snapshot is taken), from the end of turnover `warm` on, tracing from :meth:`start`
    — before the fleet is built. Two boundaries hold as many pods, so what the traced total moves from one to the
    next is growth, not pods turned over (`WarmTracer`'s caveat).

    Why from before the build, not from a warm boundary: CPython hands out dict and list blocks from its free
    lists without a new allocation, and such a block keeps the trace of its first allocation — none, when that
    was before tracing began. Started at the end of turnover 1 (size 100), 2,577 of the 14,300 dicts and lists
    the churn's pods held at the end of turnover 2 were untraced, 30 at the end of turnover 3, while the traced
    total climbed by 1,965, 1,303, 608, 313, 146 KiB a turnover as those blocks left circulation: dilution of
    untraced blocks, not growth. A recycled block also keeps its first site: a site in the tables may have made
    a block that now holds something else (totals are exact, sites approximate)."""

    warm: int = 2
    frames: int = TRACE_FRAMES
    started: bool = False
    snapshots: list[Snapshot] = field(default_factory=list)

    def start(self) -> TurnoverTracer:
        """Trace from now on (before the fleet is built: every block alive later is traced)."""
        tracemalloc.start(self.frames)
        self.started = True
        return self

    def boundary(self, turnover: int, elapsed: float, replacements: int, rss_mib: float | None = None,
                 caught_up: bool | None = None) -> None:
        """At the end of `turnover`: a snapshot once the warm-up is over."""
        if self.started and turnover >= self.warm:
            self.snapshots.append(take(elapsed, replacements, turnover=turnover, rss_mib=rss_mib,
                                       caught_up=caught_up))

    def stop(self) -> None:
        if tracemalloc.is_tracing():
            tracemalloc.stop()

    def traced_kib(self) -> float | None:
        """What the last snapshot weighed for the verdict (None: none yet)."""
        return round(judged_bytes(self.snapshots[-1]) / 1024, 1) if self.snapshots else None

    def report(self, slots: int) -> dict[str, Any]:
        """Per turnover boundary traced: the traced total (judged: all but the benchmark's records) and by owner,
        RSS, and against the boundary before, the growth (KiB and bytes per replacement), the rate reached and
        the sites that grew most; each owner's sites that grew most from the first boundary to the last, and the
        verdict over them."""
        if not self.started or not self.snapshots:
            return {"tracemalloc": None}
        rows = []
        for index, snap in enumerate(self.snapshots):
            row: dict[str, Any] = {
                "turnover": snap.turnover, "at_seconds": snap.at, "replacements": snap.replacements,
                "traced_kib": round(judged_bytes(snap) / 1024, 1), "rss_mib": snap.rss_mib,
                **{f"{owner}_kib": round(sum(size for size, _ in sites.values()) / 1024, 1)
                   for owner, sites in snap.owners.items()},
                "caught_up": snap.caught_up, "took_seconds": snap.seconds}
            if index:
                before = self.snapshots[index - 1]
                made = snap.replacements - before.replacements
                moved = judged_bytes(snap) - judged_bytes(before)
                row.update({"growth_kib": round(moved / 1024, 1),
                            "bytes_per_replacement": round(moved / made, 1) if made else None,
                            # the churn held while the snapshot before was taken: that time left out
                            "replacements_per_second": round(made / max(snap.at - before.at - before.seconds, 1e-9),
                                                             1),
                            "top_sites": growth(_flat(before), _flat(snap), made, TURNOVER_SITES)})
            rows.append(row)
        first, last = self.snapshots[0], self.snapshots[-1]
        found: dict[str, Any] = {
            "mode": "turnover", "traced_from": "before the build", "warm_turnovers": self.warm,
            "frames": self.frames, "churned_pods": slots, "pods_first_traced_between": 0, "turnovers": rows,
            "snapshots": [
                {"at_seconds": s.at, "replacements_since_tracing": s.replacements,
                 "traced_mib": s.traced_mib,
                 **{f"{owner}_mib": round(sum(size for size, _ in sites.values()) / 2**20, 1)
                    for owner, sites in s.owners.items()},
                 "took_seconds": s.seconds}
                for s in self.snapshots
            ],
        }
        if len(self.snapshots) > 1:
            found["verdict"] = verdict(int(first.turnover or 0), int(last.turnover or 0), judged_bytes(first),
                                       judged_bytes(last), last.replacements - first.replacements,
                                       (first.rss_mib, last.rss_mib))
        else:
            found["verdict"] = {"no_growth": None, "line": "no verdict: fewer than two turnover boundaries traced"}
        for owner in OWNERS:
            found[f"growth_{owner}"] = growth(first.owners[owner], last.owners[owner], 0)
        return {"tracemalloc": found}


@dataclass
class WarmTracer:
    """tracemalloc started `after` seconds into the churn, a snapshot every `every` seconds from then on (the
    first one `every` seconds after the start), and one at the end (:meth:`finish`)."""

    after: float
    every: float
    frames: int = TRACE_FRAMES
    started_at: float | None = None
    started_replacements: int = 0
    snapshots: list[Snapshot] = field(default_factory=list)

    def due(self) -> float:
        """When (seconds since the churn began) the tracer next has something to do."""
        if self.started_at is None:
            return self.after
        return self.started_at + self.every * (len(self.snapshots) + 1)

    def tick(self, elapsed: float, replacements: int) -> None:
        """Start tracing, or take a snapshot, when it is due."""
        if elapsed < self.due():
            return
        if self.started_at is None:
            tracemalloc.start(self.frames)
            self.started_at, self.started_replacements = elapsed, replacements
            return
        self._snapshot(elapsed, replacements)

    def finish(self, elapsed: float, replacements: int) -> None:
        """The last snapshot (unless one was just taken), then tracing stops."""
        if self.started_at is None:
            return
        if not self.snapshots or self.snapshots[-1].at < elapsed - 1.0:
            self._snapshot(elapsed, replacements)
        tracemalloc.stop()

    def traced_mib(self) -> float | None:
        """The traced heap now (None: not tracing)."""
        return round(tracemalloc.get_traced_memory()[0] / 2**20, 1) if tracemalloc.is_tracing() else None

    def _snapshot(self, elapsed: float, replacements: int) -> None:
        self.snapshots.append(take(elapsed, replacements))

    def report(self, slots: int) -> dict[str, Any]:
        """The traced totals at each snapshot (in all and by owner) and, between the first snapshot and the last,
        each owner's sites that grew most; `slots`: the bound pods the churn replaces in turn."""
        if self.started_at is None or not self.snapshots:
            return {"tracemalloc": None}
        first, last = self.snapshots[0], self.snapshots[-1]
        since = self.started_replacements
        new_pods = (first_replaced(last.replacements - since, slots)
                    - first_replaced(first.replacements - since, slots))
        found: dict[str, Any] = {
            "started_at_seconds": round(self.started_at, 1),
            "replacements_before_tracing": since,
            "frames": self.frames,
            "churned_pods": slots,
            "pods_first_traced_between": new_pods,
            "snapshots": [
                {"at_seconds": s.at, "replacements_since_tracing": s.replacements - since, "traced_mib": s.traced_mib,
                 **{f"{owner}_mib": round(sum(size for size, _ in sites.values()) / 2**20, 1)
                    for owner, sites in s.owners.items()},
                 "took_seconds": s.seconds}
                for s in self.snapshots
            ],
        }
        for owner in OWNERS:
            found[f"growth_{owner}"] = growth(first.owners[owner], last.owners[owner], new_pods)
        return {"tracemalloc": found}


class GcPauses:
    """How long each garbage collection held the interpreter (`gc.callbacks`: the collector calls back on the
    collecting thread at its start and its stop, every other thread of the process waiting meanwhile): per
    generation the count, the longest pause (wall, and the collecting thread's CPU: on a loaded machine the wall
    figure includes time the process was not even scheduled) and the total, from :meth:`start` to :meth:`stop`.
    What a full collection of a 100,000-pod heap costs every thread is the longest generation-2 pause.

    Of the generation-2 collections, also: which were the runner's own (`ours`, asked at each collection's start:
    `reconcile.heap.HeapCollector.collecting`; a tree without it has none) and which Python's, the longest of
    Python's, and how many of each began while `inside` said a batch was open (both probes are read inside the
    collector's callback: they must take no lock)."""

    def __init__(self, inside: Callable[[], bool] | None = None, ours: Callable[[], bool] | None = None) -> None:
        self.inside = inside or (lambda: False)
        self.ours = ours or (lambda: False)
        self.full = {"runner": 0, "python": 0}
        self.full_in_batch = {"runner": 0, "python": 0}
        self.python_longest = (0.0, 0.0)  # wall, CPU
        self.full_times: list[tuple[str, float, float]] = []  # whose, began (time.monotonic), wall seconds
        self._whose: tuple[str, bool] = ("python", False)
        self._began_monotonic = 0.0
        self.count = [0, 0, 0]
        self.longest = [0.0, 0.0, 0.0]
        self.longest_cpu = [0.0, 0.0, 0.0]
        self.total = [0.0, 0.0, 0.0]
        self.total_cpu = [0.0, 0.0, 0.0]
        self._began: tuple[float, float] | None = None

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._whose = ("runner" if self.ours() else "python", self.inside())
            self._began = (time.perf_counter(), time.thread_time())
            self._began_monotonic = time.monotonic()
            return
        if self._began is None:  # registered while a collection ran
            return
        wall, cpu = time.perf_counter() - self._began[0], time.thread_time() - self._began[1]
        self._began = None
        generation = min(int(info.get("generation", 2)), 2)
        self.count[generation] += 1
        self.total[generation] += wall
        self.total_cpu[generation] += cpu
        if wall > self.longest[generation]:
            self.longest[generation], self.longest_cpu[generation] = wall, cpu
        if generation == 2:
            whose, in_batch = self._whose
            self.full[whose] += 1
            self.full_in_batch[whose] += in_batch
            self.full_times.append((whose, self._began_monotonic, wall))
            if whose == "python" and wall > self.python_longest[0]:
                self.python_longest = (wall, cpu)

    def start(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def report(self) -> dict[str, Any]:
        """Per generation 0, 1, 2: collections, longest pause and its CPU, total wall and CPU (seconds); the full
        ones by whose they were (`full_by`: the runner's, Python's), those begun while a batch was open
        (`full_in_batch_by`) and the longest of Python's; and the objects frozen out of collection now
        (`gc.get_freeze_count`)."""
        return {"gc_pauses": {"collections": list(self.count),
                              "longest_seconds": [round(x, 4) for x in self.longest],
                              "longest_cpu_seconds": [round(x, 4) for x in self.longest_cpu],
                              "total_seconds": [round(x, 3) for x in self.total],
                              "total_cpu_seconds": [round(x, 3) for x in self.total_cpu],
                              "full_by": dict(self.full), "full_in_batch_by": dict(self.full_in_batch),
                              "python_full_longest_seconds": round(self.python_longest[0], 4),
                              "python_full_longest_cpu_seconds": round(self.python_longest[1], 4)},
                "gc_frozen_objects": gc.get_freeze_count()}


def gc_collections() -> list[int]:
    """The garbage collector's collections so far, by generation (0, 1, 2)."""
    return [int(generation["collections"]) for generation in gc.get_stats()]


def informer_counts(fleet: Any) -> dict[str, int]:
    """Lists (the first of each informer and every relist) and 410s so far, over the controller's informers."""
    informers = getattr(getattr(fleet.runner, "feed", None), "informers", None)
    if not isinstance(informers, dict):
        return {}
    stats = [getattr(informer, "stats", None) for informer in informers.values()]
    return {"lists": sum(s.lists for s in stats if s is not None), "gone": sum(s.gone for s in stats if s is not None)}


def memory_lines(result: dict[str, Any], every: float = 60.0) -> list[str]:
    """The memory scenario's result as text: the churn reached, RSS every `every` seconds (and its highest sample,
    when) and, traced, the totals at each snapshot and each owner's growth table."""
    samples = result.get("samples") or []
    lines = [f"memory under churn: {result['nodes']} nodes, {result['pods']} pods, {result['replacements']} "
             f"replacements in {result['seconds']:g} s ({result['churn_achieved_per_second']} a second of "
             f"{result['churn_per_second']:g} asked), RSS sampled every {result['every']:g} s; answer check: "
             f"{result.get('answer_check', '-')}"]
    shown, mark = [], 0.0
    for sample in samples:  # the first sample at or after each multiple of `every`, and the last
        if sample["at_seconds"] >= mark or sample is samples[-1]:
            shown.append(sample)
            mark = (sample["at_seconds"] // every + 1) * every
    lines.append("  RSS MiB: " + ", ".join(f"{s['at_seconds']:.0f} s {s['rss_mib']}" for s in shown))
    if samples:
        top = max(samples, key=lambda s: s["rss_mib"])
        lines.append(f"  highest sample: {top['rss_mib']} MiB at {top['at_seconds']:.0f} s")
    pauses = result.get("gc_pauses")
    if pauses:
        lines.append(f"  garbage collections (gen 0/1/2): {'/'.join(map(str, pauses['collections']))}; longest "
                     f"gen-2 pause {pauses['longest_seconds'][2]:g} s wall ({pauses['longest_cpu_seconds'][2]:g} s "
                     f"CPU), gen-2 total {pauses['total_seconds'][2]:g} s ({pauses['total_cpu_seconds'][2]:g} s CPU); "
                     f"objects frozen "
                     f"{result.get('gc_frozen_objects', '-')} (gc.freeze after the first sync: "
                     f"{result.get('gc_freeze', '-')})")
    traced = result.get("tracemalloc")
    if traced and traced.get("mode") == "turnover":
        lines.extend(turnover_lines(traced))
    elif traced:
        lines.append(f"  tracemalloc ({traced['frames']} frames) from {traced['started_at_seconds']:g} s "
                     f"({traced['replacements_before_tracing']} replacements before); pods first traced between the "
                     f"first and the last snapshot: {traced['pods_first_traced_between']} of "
                     f"{traced['churned_pods']}")
        for snap in traced["snapshots"]:
            lines.append(f"    {snap['at_seconds']:.0f} s: traced {snap['traced_mib']} MiB (controller "
                         f"{snap['controller_mib']}, harness {snap['harness_mib']}, benchmark "
                         f"{snap.get('benchmark_mib', '-')}, unattributed {snap['unattributed_mib']}), "
                         f"{snap['replacements_since_tracing']} replacements since tracing, "
                         f"took {snap['took_seconds']} s")
        for owner in OWNERS:
            lines.append(f"  growth, {owner}, first snapshot → last:")
            lines.extend(f"    {line}" for line in growth_lines(traced.get(f"growth_{owner}", [])))
    return lines


def turnover_lines(traced: dict[str, Any]) -> list[str]:
    """The turnover run as text: where tracing started, a line per turnover boundary (traced total and by owner,
    RSS, growth against the boundary before and its sites) and the verdict."""
    lines = [f"  tracemalloc ({traced['frames']} frames) from before the fleet was built, a snapshot at the end of "
             f"every turnover from turnover {traced['warm_turnovers']} on (one turnover: each of the "
             f"{traced['churned_pods']} churned pods replaced once, in turn; judged: all but the benchmark's own "
             f"records)"]
    for row in traced["turnovers"]:
        growth_text = (f"; {row['growth_kib']:+.1f} KiB, {row['bytes_per_replacement']:+g} B per replacement, "
                       f"{row['replacements_per_second']:g} replacements/s" if "growth_kib" in row else "")
        lines.append(f"    turnover {row['turnover']} ({row['at_seconds']:.0f} s): traced {row['traced_kib']:.1f} KiB "
                     f"(controller {row['controller_kib']:.1f}, harness {row['harness_kib']:.1f}, unattributed "
                     f"{row['unattributed_kib']:.1f}; benchmark {row['benchmark_kib']:.1f}), RSS {row['rss_mib']} "
                     f"MiB, caught up {row['caught_up']}{growth_text}")
        lines.extend(f"      {line}" for line in growth_lines(row.get("top_sites", []), "replacement"))
    rows = traced["turnovers"]
    for owner in OWNERS:
        lines.append(f"  growth, {owner}, end of turnover {rows[0]['turnover']} → {rows[-1]['turnover']}:")
        lines.extend(f"    {line}" for line in growth_lines(traced.get(f"growth_{owner}", [])))
    lines.append(f"  {traced['verdict']['line']}")
    return lines
