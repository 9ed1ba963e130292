"""The controller at 500 / 2,000 / 5,000 nodes: work per watch event, pending pods to CreateFleet, memory, and
consolidation decisions — this tree next to a baseline tree, measured one right after the other (issue #17 §4).

    .venv/bin/python benchmarks/scale.py [--sizes 500,2000,5000] [--baseline-ref 2947bfc] [--no-baseline] [--json]
                                         [--no-consolidation] [--no-churn] [--churn-rate 200]
                                         [--memory-seconds 600 [--tracemalloc]] [--burst-wait 60]
                                         [--server-process [--server-only] [--server-baseline REF]
                                         [--controller-baseline REF]]
    .venv/bin/python benchmarks/scale.py --in-process --what churn --server-process --size 500 --rate 200

For each size N, a fleet of N m5.2xlarge nodes of ours (Ready, initialized, an hour old, over three zones) with 20
running pods each (350m cpu, 1 GiB: nodes nearly full) is put into an in-memory cluster, their instances into the
fake cloud, and the controller's threaded runner started on it in real time (informers, default 1 s batch idle):

1. **memory**: the process's RSS once the controller has synced (cluster, informer caches and controller state
   together — the in-memory cluster holds a copy of every object the API server would);
2. **work per watch event**: 2,000 pod status updates (bound pods: what a real cluster sends most) are written
   at about 1,000/s; the CPU time of every controller thread (informers, passes, …) during the updates and 2 s
   after, less what the same threads use idle over as long, divided by the events;
3. **provisioning**: 1,000 pending pods (1 cpu, 1 GiB) created in one burst; from the last pod's creation to the
   first CreateFleet call and to the last one (goal: first ≤ idle + 200 ms, every one ≤ idle + 500 ms), and how
   many pods are bound after the burst wait (`--burst-wait`, 60 s unless told); apart, how long the in-process API
   server took to deliver the last pod to the controller's state (`seen`: its creations, deep copies and watch
   events run in this process, under the same interpreter lock) and the controller's own part, from its state
   showing the last pod to the first CreateFleet (`seen→CF`);
4. **consolidation** (N = 1,000 and the largest N, consolidation enabled): the time of one consolidation
   decision over 1,000 underutilized nodes (2 pods each; goal ≤ 1 s), and at the largest N full nodes, a decision
   under way while 1,000 pods arrive: whether the decision stops at its budget and how long the pods wait.

5. **churn** (issue #23; at every N, `--churn-rate` 200/s, `--no-churn` to skip): consolidation on (decisions
   every 10 s, never acted on: validation 3600 s), the N full nodes and 50 of them (evenly spread) left with 2
   pods (underutilized: their room holds fewer than the burst at every N, so the burst always needs launches);
   bound pods replaced at the rate (each replacement created bound to the node of the pod it replaces, then the
   old one deleted) for 12 s, then the burst of 1,000 pending pods — from the last pod's
   creation to the first and last CreateFleet, the decisions taken and their CPU time — next to the same without
   churn (rate 0); `recv` (and `informer_*_cpu_ms_per_event` in the JSON, here and in 3.) splits the delivery
   between the API server and the controller (`DeliveryProbe`); `recv→CF` is the controller's own time from
   reading the last pod to the first CreateFleet, and `ms/ev own` its CPU per event under churn (`churn_cost`);
   `burst_gc_pauses` in the JSON times the collections from the burst's first pod until it is bound, the full
   ones told apart (the runner's own or Python's, begun in the batch window or not: `full_collections`), and
   `burst_full_collections` says when each full one began, from the last pod's creation.
   `--server-process` (`measure_churn_server`): the same scenario with the test API server (tests/kube/emulator.py)
   in a process of its own (benchmarks/scale_server.py: the fleet seeded at once, the churn and the burst written
   there), the controller reading it over HTTP through its kube adapter: this process holds only the controller,
   `recv` is the delivery from creation to the controller's informer, and `sent` its server's part (to the
   server's watch picking the pod up to write it), with the server process's CPU over the churn and the burst;
   `--server-baseline REF` runs each of those rows with REF's test API server too (its tests/ and benchmarks/,
   `export_server_tree`), next to this tree's controller, one right after the other; `--controller-baseline REF`
   runs each with REF's controller (its package, `export_tree`, as `--baseline-ref`; driven through what it had:
   `_controllers`) against this tree's server, REF's row first, then this tree's, printed side by side with the
   ratio (`side_by_side`; a figure that did not come within the burst wait reads "none in N s", a row REF cannot
   run "n/a (why)"); `--burst-wait S` gives every burst row, either controller's, S seconds to bind the burst
   (default 60: an earlier controller may need more to launch at all; the JSON names the wait); every
   server-process row has the same answer check for either controller (`_controllers.launch_answer`: every burst
   pod bound, no instance without a Node, no Node without an instance); each also says what else held the
   controller's process while the burst was read and planned (`BurstTimeline`: garbage collections and
   consolidation decisions, as seconds of each span); `--server-only` keeps to these rows;
6. **memory** (`--memory-seconds S`, this tree, the largest N; alone: `--in-process --what memory --size N
   --seconds S [--every 10] [--no-gc-freeze] [--tracemalloc [--trace-after 60] [--snapshot-every 60] [--frames
   20]]`): RSS every 10 s while bound pods are replaced at the rate for S seconds (goal: ≤ 1.5 GiB at 5,000 nodes /
   100,000 pods after 10 minutes), each sample with the garbage collections, the informers' lists and 410s, the API
   server's history and the decisions so far; every collection from the controllers' start to the churn's end is
   timed (`_memtrace.GcPauses`: the longest generation-2 pause, wall and CPU); `--no-gc-freeze` runs the
   controller without its freeze of the warm heap after the first sync (the A/B; production always freezes);
   `--tracemalloc` starts tracing only once caches are warm (a minute into the churn: the build and the first list
   are never traced), takes a snapshot every minute from then on and reports the traced total at each and, between
   the first and the last, the sites that grew most, split between the controller and the harness (`_memtrace`);
   `--snapshot-every-turnover [--warm-turnovers 2] [--turnovers N]` traces from before the build instead and takes
   the snapshots at turnover boundaries (the churn replaces its pods in turn: one turnover replaces each once;
   the churn holds at each boundary), with per turnover the traced total, its growth and sites, and the verdict
   "no growth once warm" against `_memtrace.VERDICT_*`; the answer check: the controller's state holds the API
   server's pods at the end.

The baseline is the package of `--baseline-ref` (default 2947bfc, before issue #17) exported with git archive and
run with the same script; growth ratios between sizes are printed for both. Each measurement runs in a fresh
process (`--in-process`), one right after the other.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPOSITORY  # noqa: E402
from _controllers import launch_answer, pod_informer  # noqa: E402
from _fleet import (  # noqa: E402
    BASELINE_TREE,
    WORK,
    Fleet,
    _compat,
    build_fleet,
    compiled_policy,
    controller_cpu,
    export_server_tree,
    export_tree,
    pending_pods,
    pod_namespace,
    rss_mib,
    run_tree,
    wait_for,
    without_editable_install,
)
from _memtrace import (  # noqa: E402
    TRACE_FRAMES,
    GcPauses,
    TurnoverTracer,
    WarmTracer,
    gc_collections,
    informer_counts,
    memory_lines,
)

BURST = 1000
BURST_CPU_MILLI = 1000  # each burst pod's request (`pending_pods`' default: 1 cpu, 1 GiB)
BURST_MEMORY_MIB = 1024
UNDERUTILIZED = 50  # nodes left underutilized in the churn scenario, whatever the fleet's size
KEPT = 2  # the pods each of them keeps
EVENTS = 2000
PODS_PER_NODE = 20
DEFAULT_SIZES = (500, 2000, 5000)
GOAL_FIRST = 0.2
GOAL_EVERY = 0.5
GOAL_EVENT_MS = 10.0
GOAL_RSS_MIB = 1536.0
GOAL_DECISION = 1.0
CHURN_RATE = 200.0
#: Seconds a burst row waits for every pod of its burst to be bound (`--burst-wait`): long enough for this tree's
#: controller; an earlier controller (`--controller-baseline 2947bfc`) may need more to launch at all.
BURST_WAIT = 60.0
#: The longest `--burst-wait` a run takes (a day): a row's own time limit grows with it.
MAX_BURST_WAIT = 86400.0
#: Seconds the memory scenario waits, at a turnover boundary, for the controller's state to hold the API server's
#: pods before its snapshot (`--snapshot-every-turnover`), and the changes of the API server's history kept then.
CATCH_UP = 120.0
HISTORY_KEPT = 1000
#: Seconds the memory scenario waits, after its churn, for the controller's state to hold the API server's pods
#: (a relist of 100,000 pods on a loaded machine takes minutes).
ANSWER_WAIT = 300.0
TTL = "  ttlSecondsAfterEmpty: 30"
CONSOLIDATION = "  consolidation:\n    enabled: true"


def _synced(fleet: Fleet, timeout: float) -> bool:
    runner = fleet.runner

    def ready() -> bool:
        health = getattr(runner, "health", None)
        if health is not None:
            return bool(health().ready)
        return all(informer.synced.is_set() for informer in runner.view.required())

    return wait_for(ready, timeout, 0.05)


def _watch_burst(fleet: Fleet) -> list[float]:
    """When the controller's state saw each pod of the burst (empty for a tree whose state cannot be watched):
    the in-memory API server and its watches share this process, so delivering 1,000 creations takes a while."""
    seen: list[float] = []
    state = getattr(fleet.controller, "state", None)
    if state is None or not hasattr(state, "subscribe"):
        return seen

    def note(change: Any) -> None:
        record = change.after
        if change.before is None and record is not None and getattr(record, "name", "").startswith("burst-"):
            seen.append(time.monotonic())

    state.subscribe(note)
    return seen


class DeliveryProbe:
    """Where a burst pod's way from its creation to the controller's state goes (issue #23): the pods informer's
    `_apply` is wrapped on its instance (a tree without that informer is not probed) to note when each burst pod
    reached the informer (`received`: the in-process API server's watch handed it over) and to count, on the
    informer's thread, the CPU spent inside `_apply` (the controller's part: shape check, cache, state, listeners)
    and between two calls (the API server's part: its watch's `__next__` — the copy it makes of each event for
    this watcher — and the informer's loop). CPU time, not wall time: a shared machine does not inflate it."""

    def __init__(self, fleet: Fleet) -> None:
        from karpenter_policy.kube import objects

        self.received: dict[str, float] = {}
        self.cpu = {"apply": 0.0, "watch": 0.0}
        self.events = 0
        self._last_end: float | None = None
        informer = pod_informer(fleet.runner, objects.POD)
        self.probing = informer is not None and hasattr(informer, "_apply")
        if self.probing:
            original = informer._apply
            informer._apply = lambda event: self._timed(original, event)

    def _timed(self, original: Any, event: Any) -> Any:
        started = time.thread_time()
        if self._last_end is not None:
            self.cpu["watch"] += started - self._last_end
        name = str((event.object.get("metadata") or {}).get("name") or "")
        if name.startswith("burst-"):
            self.received.setdefault(name, time.monotonic())  # its creation, not its binding later
        try:
            return original(event)
        finally:
            self._last_end = ended = time.thread_time()
            self.cpu["apply"] += ended - started
            self.events += 1

    def reset(self) -> None:
        """Count from now on (the burst and what comes with it)."""
        self.cpu = {"apply": 0.0, "watch": 0.0}
        self.events = 0

    def report(self, last_created: float, burst: int = BURST) -> dict[str, Any]:
        if not self.probing or not self.events:
            return {}
        found: dict[str, Any] = {
            "informer_apply_cpu_ms_per_event": round(self.cpu["apply"] / self.events * 1000, 3),
            "informer_watch_cpu_ms_per_event": round(self.cpu["watch"] / self.events * 1000, 3),
            "informer_events": self.events,
        }
        if len(self.received) == burst:
            found["last_pod_received_after_created"] = round(max(self.received.values()) - last_created, 3)
            # a gap as long as the batch idle closes the window mid-burst: the burst is planned in two batches
            times = sorted(self.received.values())
            gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
            found["burst_received_longest_gap"] = round(max(gaps, default=0.0), 3)
        return found


def plans_ahead(fleet: Fleet) -> dict[str, float] | None:
    """The plans made ahead so far: used at their window's close, or made again (None: a tree without the
    metric)."""
    registry = getattr(getattr(fleet.controller, "metrics", None), "registry", None)
    if registry is None:
        return None
    return {used: registry.get_sample_value("karpenter_policy_plans_ahead_total", {"used": flag}) or 0.0
            for used, flag in (("used", "true"), ("made_again", "false"))}


def _unbound(fleet: Fleet, prefix: str) -> int:
    from karpenter_policy.kube import objects

    pods = fleet.cluster.list(objects.POD, "default").items
    return sum(1 for p in pods if objects.name(p).startswith(prefix) and not p["spec"].get("nodeName"))


#: `measure_size`'s windows, in seconds: the first passes settle, the idle CPU is sampled, the updates' cost is
#: read after their last one.
SIZE_WINDOWS = {"settle": 3.0, "idle": 4.0, "after_updates": 2.0}


def measure_size(
    nodes: int, burst_wait: float = BURST_WAIT, windows: dict[str, float] | None = None, events: int = EVENTS
) -> dict[str, Any]:
    """The fleet row at `nodes`; `windows` (`SIZE_WINDOWS`) and `events` (pod status updates at 1,000 a second)
    shorter only where a row is run to see it run end to end, not for its figures (`tests/reconcile`)."""
    from karpenter_policy.kube import objects

    windows = {**SIZE_WINDOWS, **(windows or {})}

    compiled = compiled_policy(TTL, WORK / "scale")
    started = time.monotonic()
    fleet = build_fleet(nodes, PODS_PER_NODE, "350m", "1Gi", compiled, {})
    built = time.monotonic() - started
    fleet.start()
    result: dict[str, Any] = {"nodes": nodes, "pods": nodes * PODS_PER_NODE, "build_seconds": round(built, 1)}
    try:
        if not _synced(fleet, 600):
            raise SystemExit("the controller did not sync in 600 s")
        time.sleep(windows["settle"])  # the first passes (adoption, garbage collection) settle
        result["rss_mib"] = round(rss_mib(), 1)
        # --- idle, then pod status updates --------------------------------------------------------------
        window = windows["idle"]
        before = controller_cpu()
        time.sleep(window)
        idle = (controller_cpu() - before) / window
        names = event_targets(fleet.nodes, events)
        before = controller_cpu()
        began = time.monotonic()
        for index, (namespace, name) in enumerate(names):
            fleet.cluster.patch(objects.POD, name, {"metadata": {"annotations": {"bench/tick": str(index)}}},
                                namespace=namespace)
            target = began + (index + 1) / 1000.0
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        time.sleep(windows["after_updates"])
        elapsed = time.monotonic() - began
        used = controller_cpu() - before
        result.update(event_cost(used, idle, elapsed, events))
        # --- a burst of pending pods ----------------------------------------------------------------------
        creates_before = len(fleet.cloud.creates)
        seen = _watch_burst(fleet)
        probe = DeliveryProbe(fleet)
        for pod in pending_pods(BURST):
            fleet.cluster.create(objects.POD, pod)
        last_created = time.monotonic()
        wait_for(lambda: _unbound(fleet, "burst-") == 0, burst_wait, 0.05)
        result.update(probe.report(last_created))
        creates = fleet.cloud.creates[creates_before:]
        result["burst_wait_seconds"] = burst_wait
        result["burst_unbound_after_wait"] = _unbound(fleet, "burst-")
        result["create_fleet_calls"] = len(creates)
        if creates:
            result["first_create_after_last_pod"] = round(creates[0] - last_created, 3)
            result["last_create_after_last_pod"] = round(creates[-1] - last_created, 3)
            if len(seen) == BURST:  # the controller's part: from its state showing the last pod to the launch
                result["last_pod_seen_after_created"] = round(max(seen) - last_created, 3)
                result["first_create_after_last_seen"] = round(creates[0] - max(seen), 3)
        result["batch_idle"] = 1.0
        result["plans_ahead"] = plans_ahead(fleet)
        result["rss_mib_after_burst"] = round(rss_mib(), 1)
    finally:
        fleet.stop()
    return result


def event_targets(nodes: Sequence[str], events: int) -> list[tuple[str, str]]:
    """The (namespace, name) of the bound pod each of `events` status updates goes to: the nodes' pods in turn,
    each in its node's namespace (`pod_namespace`), so a fleet of any size — under `NAMESPACES` nodes too — has
    every pod named."""
    count = len(nodes)
    return [(pod_namespace(i % count), f"{nodes[i % count]}-p{(i // count) % PODS_PER_NODE}") for i in range(events)]


def churn_cost(used: float, probe: DeliveryProbe, server_in_process: bool = True) -> dict[str, Any]:
    """The controller's CPU per pods-informer event while bound pods are replaced (before the burst); `used` is
    the CPU of every thread but the benchmark's and the churn thread's (`Churn.cpu`: its writes into the in-process
    API server). `gross` divides it by the events; `own` leaves out what the informer's thread spent inside the
    in-process API server's watch (its copy of each event for this watcher: a real API server's work, in its own
    process), so it is the controller's work alone per event. CPU time: a loaded machine inflates it far less than
    it stretches every wall-clock figure. With the API server in its own process (`server_in_process` False:
    `--server-process`), what the informer's thread does between two events is the controller's own (reading the
    watch's HTTP stream and decoding it), so `own` is `gross`."""
    if not probe.probing or not probe.events:
        return {}
    outside = probe.cpu["watch"] if server_in_process else 0.0
    return {
        "churn_events": probe.events,
        "churn_cpu_ms_per_event_gross": round(used / probe.events * 1000, 4),
        "churn_cpu_ms_per_event_own": round((used - outside) / probe.events * 1000, 4),
    }


def event_cost(used: float, idle: float, elapsed: float, events: int) -> dict[str, Any]:
    """The controller's CPU per watch event: `gross` is all its threads used over the events' window divided by
    the events (an upper bound: it includes whatever the controller does anyway); `net` subtracts the idle rate
    measured just before over as long, and is None — not 0 — when the controller was as busy idle as under the
    events (an idle rate that high says the controller never rests, which the gross figure and the idle rate
    show; clamping it to 0 read as a free event)."""
    net = used - idle * elapsed
    return {
        "idle_cpu_per_second": round(idle, 4),
        "event_ms_gross": round(used / events * 1000, 3),
        "event_ms": round(net / events * 1000, 3) if net > 0 else None,
    }


class Decided(NamedTuple):
    """One consolidation decision, timed: its duration, how it ended, its thread's CPU time (what a shared machine
    does not inflate), and when it began (CLOCK_MONOTONIC: `BurstTimeline` reads it against the burst)."""

    seconds: float
    ending: str
    cpu: float
    began: float


def _decide_timer() -> list[Decided]:
    """Time every consolidation decision (wrapping the decider the tree has), each appended as one item once the
    decision returns, so a reader never sees a duration without its ending."""
    decisions: list[Decided] = []
    module = _compat("karpenter_policy.reconcile.disruption.decider", "karpenter_policy.reconcile.disruption")
    decider = module.Decider
    original = decider.decide

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start, cpu = time.monotonic(), time.thread_time()
        decision = original(self, *args, **kwargs)
        decisions.append(Decided(time.monotonic() - start, str(getattr(decision, "stopped", "") or "complete"),
                                 time.thread_time() - cpu, start))
        return decision

    decider.decide = timed
    return decisions


def measure_consolidation(nodes: int, pods_per_node: int, with_burst: bool, timeout: float) -> dict[str, Any]:
    from karpenter_policy.kube import objects

    compiled = compiled_policy(CONSOLIDATION, WORK / "scale")
    decisions = _decide_timer()
    fleet = build_fleet(nodes, pods_per_node, "350m", "1Gi", compiled,
                        {"disruption_interval": 1.0, "consolidation_validation": 3600.0})
    fleet.start()
    result: dict[str, Any] = {"nodes": nodes, "pods_per_node": pods_per_node}
    try:
        if not _synced(fleet, 600):
            raise SystemExit("the controller did not sync in 600 s")
        if not with_burst:
            finished = wait_for(lambda: bool(decisions), timeout, 0.05)
            first = decisions[0] if finished else None
            result["decision_seconds"] = round(first[0], 3) if first else None
            result["decision_cpu_seconds"] = round(first[2], 3) if first else None
            result["decision_ended"] = first[1] if first else f"not finished in {timeout:g} s"
            return result
        time.sleep(3.0)  # a decision is under way (quiet cluster, interval passed)
        creates_before = len(fleet.cloud.creates)
        for pod in pending_pods(BURST, prefix="during"):
            fleet.cluster.create(objects.POD, pod)
        last_created = time.monotonic()
        wait_for(lambda: _unbound(fleet, "during-") == 0, timeout, 0.05)
        creates = fleet.cloud.creates[creates_before:]
        result["burst_unbound"] = _unbound(fleet, "during-")
        result["waited_seconds"] = timeout
        if creates:
            result["first_create_after_last_pod"] = round(creates[0] - last_created, 3)
            result["last_create_after_last_pod"] = round(creates[-1] - last_created, 3)
        finished = list(decisions)
        result["decisions_finished"] = len(finished)
        result["decision_endings"] = sorted({d.ending for d in finished})
        result["longest_decision_seconds"] = round(max(d.seconds for d in finished), 3) if finished else None
    finally:
        fleet.stop()
    return result


class Churn:
    """Bound pods replaced at `rate` a second, on a thread of its own: each replacement is created already bound to
    the node of the pod it replaces (a ReplicaSet's new pod that kube-scheduler bound at once), then the old pod is
    deleted — what a busy cluster's rollouts and restarts send. `done` counts the replacements made. The pods are
    replaced in turn (round-robin over `slots`, the bound pods at the start), so one turnover — `len(slots)`
    replacements — replaces every one of them exactly once. With `hold` the churn stops at the end of each
    turnover (`at_boundary` set) until `resume`, and does not rush to catch up afterwards."""

    def __init__(self, fleet: Fleet, rate: float, hold: bool = False) -> None:
        from karpenter_policy.kube import objects

        self.fleet, self.rate, self.hold = fleet, rate, hold
        self.slots: list[dict[str, Any]] = [
            pod for pod in fleet.cluster.list(objects.POD).items if pod["spec"].get("nodeName")
        ]
        self.done = 0
        self.cpu = 0.0  # the churn thread's CPU seconds so far (harness work, left out of the controller's)
        self.stopping = threading.Event()
        self.at_boundary = threading.Event()
        self._resume = threading.Event()
        self.thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def turnovers(self) -> int:
        """The turnovers completed: every pod of `slots` replaced once per turnover."""
        return self.done // len(self.slots) if self.slots else 0

    def resume(self) -> None:
        """Go on past the turnover boundary the churn holds at."""
        self.at_boundary.clear()
        self._resume.set()

    def start(self) -> Churn:
        if self.rate > 0 and self.slots:
            self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._resume.set()
        if self.thread.is_alive():
            self.thread.join(30)

    def _run(self) -> None:
        from karpenter_policy.kube import objects

        began = time.monotonic()
        while not self.stopping.is_set():
            index = self.done % len(self.slots)
            old = self.slots[index]
            metadata = old["metadata"]
            base = metadata["name"].split("-r", 1)[0]
            new = {"metadata": {"name": f"{base}-r{self.done}", "namespace": metadata["namespace"],
                                "labels": dict(metadata.get("labels") or {}),
                                "ownerReferences": metadata.get("ownerReferences", [])},
                   "spec": old["spec"], "status": old["status"]}
            self.slots[index] = self.fleet.cluster.create(objects.POD, new)
            self.fleet.cluster.delete(objects.POD, metadata["name"], namespace=metadata["namespace"])
            self.done += 1
            self.cpu = time.thread_time()
            if self.hold and self.done % len(self.slots) == 0:
                self._resume.clear()
                self.at_boundary.set()
                self._resume.wait()
                began = time.monotonic() - self.done / self.rate  # the pace from here, no rush for the hold
                continue
            delay = began + self.done / self.rate - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)


def underutilized_indexes(nodes: int) -> range:
    """The nodes the churn scenario leaves underutilized: `UNDERUTILIZED` of them, spread evenly over the fleet
    (every tenth at 500 nodes). A fixed number, not a share: the room they free must stay below the burst at every
    size, or the burst is bound to them and no CreateFleet is ever made (every tenth of 2,000 nodes freed room for
    1,400 of the 1,000 pods: the churn rows at 2,000 nodes had no CreateFleet to time)."""
    step = max(1, nodes // UNDERUTILIZED)
    return range(0, min(nodes, step * UNDERUTILIZED), step)


def burst_room(underutilized: int, vcpu: int, memory_mib: int) -> int:
    """How many burst pods the underutilized nodes could take at most (their capacity, not even allocatable, less
    the pods they keep): below `BURST`, the burst needs new nodes."""
    per_node = min((vcpu * 1000 - KEPT * 350) // BURST_CPU_MILLI, (memory_mib - KEPT * 1024) // BURST_MEMORY_MIB)
    return underutilized * max(0, per_node)


def _underutilize(fleet: Fleet, keep: int) -> None:
    """Leave `keep` pods on the nodes of `underutilized_indexes` (consolidation has something to consider)."""
    from karpenter_policy.kube import objects

    for index in underutilized_indexes(len(fleet.nodes)):
        node = fleet.nodes[index]
        for i in range(keep, PODS_PER_NODE):
            fleet.cluster.delete(objects.POD, f"{node}-p{i}", namespace=pod_namespace(index))


def measure_churn(nodes: int, rate: float, settle: float = 12.0, burst_wait: float = BURST_WAIT) -> dict[str, Any]:
    """Consolidation on (decisions every 10 s, never acted on), full nodes and 50 underutilized, bound pods
    replaced at `rate` a second (0: none, the quiet scenario) for `settle` seconds, then a burst of pending pods:
    from the last pod's creation to the first and to the last CreateFleet, and to every pod bound if that came
    within `burst_wait` seconds."""
    from karpenter_policy.kube import objects

    compiled = compiled_policy(CONSOLIDATION, WORK / "scale")
    decisions = _decide_timer()
    fleet = build_fleet(nodes, PODS_PER_NODE, "350m", "1Gi", compiled, {"consolidation_validation": 3600.0})
    _underutilize(fleet, KEPT)
    fleet.start()
    result: dict[str, Any] = {"nodes": nodes, "churn_per_second": rate, "batch_idle": 1.0}
    churn = Churn(fleet, rate)
    try:
        if not _synced(fleet, 600):
            raise SystemExit("the controller did not sync in 600 s")
        time.sleep(3.0)
        churn.start()
        churn_began = time.monotonic()
        probe = DeliveryProbe(fleet)
        cpu_before, churn_before = controller_cpu(), churn.cpu
        time.sleep(settle)  # decisions run under churn
        result.update(churn_cost(controller_cpu() - cpu_before - (churn.cpu - churn_before), probe))
        creates_before = len(fleet.cloud.creates)
        seen = _watch_burst(fleet)
        probe.reset()
        pauses = full_collections(fleet).start()  # from the burst's first pod until it is bound
        for pod in pending_pods(BURST):
            fleet.cluster.create(objects.POD, pod)
        last_created = time.monotonic()
        if wait_for(lambda: _unbound(fleet, "burst-") == 0, burst_wait, 0.05):
            result["all_bound_after_last_pod"] = round(time.monotonic() - last_created, 3)
        pauses.stop()
        result["burst_gc_pauses"] = pauses.report()["gc_pauses"]
        result["burst_full_collections"] = [  # whose, when it began from the last pod's creation, its wall seconds
            (whose, round(began - last_created, 3), round(wall, 3)) for whose, began, wall in pauses.full_times]
        result.update(probe.report(last_created))
        creates = fleet.cloud.creates[creates_before:]
        result["burst_wait_seconds"] = burst_wait
        result["burst_unbound_after_wait"] = _unbound(fleet, "burst-")
        result.update(burst_timing(creates, last_created, seen, probe, BURST))
        result["churn_achieved_per_second"] = round(churn.done / (time.monotonic() - churn_began), 1)
        result.update(run_summary(fleet, decisions))
    finally:
        churn.stop()
        fleet.stop()
    return result


def full_collections(fleet: Fleet) -> GcPauses:
    """Every collection timed, the full ones told apart: the runner's own (`HeapCollector.collecting`; a baseline
    tree without it has none) or Python's, begun while the batch window was open or not."""
    batcher = fleet.controller.batcher
    heap = getattr(fleet.runner, "heap", None)
    return GcPauses(inside=lambda: getattr(batcher, "_opened", None) is not None,  # no lock in a gc callback
                    ours=lambda: bool(getattr(heap, "collecting", False)))


def burst_timing(creates: list[float], last_created: float, seen: list[float], probe: DeliveryProbe,
                 burst: int) -> dict[str, Any]:
    """A burst's CreateFleet calls and when they came, from the last pod's creation, from the state seeing it
    (`seen`) and from the controller's informer reading it (the controller's own part)."""
    found: dict[str, Any] = {"create_fleet_calls": len(creates)}
    if creates:
        found["first_create_after_last_pod"] = round(creates[0] - last_created, 3)
        found["last_create_after_last_pod"] = round(creates[-1] - last_created, 3)
        if len(seen) == burst:
            found["last_pod_seen_after_created"] = round(max(seen) - last_created, 3)
            found["first_create_after_last_seen"] = round(creates[0] - max(seen), 3)
        received = [when for name, when in probe.received.items() if name.startswith("burst-")]
        if len(received) == burst:  # the controller's own part: from reading the last pod to the launch
            found["first_create_after_last_received"] = round(creates[0] - max(received), 3)
    return found


def run_summary(fleet: Fleet, decisions: Sequence[Decided]) -> dict[str, Any]:
    """What a churn run leaves: plans made ahead, the consolidation decisions finished and their CPU, RSS."""
    finished = list(decisions)
    return {
        "plans_ahead": plans_ahead(fleet),
        "decisions": len(finished),
        "decision_cpu_seconds": round(sum(d.cpu for d in finished), 3),
        "longest_decision_seconds": round(max(d.seconds for d in finished), 3) if finished else None,
        "rss_mib": round(rss_mib(), 1),
    }


def _overlap(began: float, ended: float, start: float, end: float) -> float:
    return max(0.0, min(ended, end) - max(began, start))


class BurstTimeline:
    """What else held the controller's process while a burst went from its creation to the first CreateFleet
    (issue #23: is a slow row noise or a cause?): every garbage collection (`gc.callbacks`, as `GcPauses`: the
    collecting thread holds the interpreter, every other thread waits) and every consolidation decision
    (`Decided`: its thread competes with the informer's and the provisioner's for the interpreter lock), each
    read against two spans of the burst — `delivery`, from the burst's first write to the pods informer reading
    its last pod, and `controller`, from then to the first CreateFleet — as the seconds of either span they
    covered; of the collections also how many of each generation fell in the span and their CPU (the collecting
    thread's: what a loaded machine does not stretch)."""

    def __init__(self) -> None:
        self.collections: list[tuple[float, float, int, float]] = []  # began, ended, generation, CPU seconds
        self._began: tuple[float, float] | None = None

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = (time.monotonic(), time.thread_time())
        elif self._began is not None:
            began, cpu = self._began
            self.collections.append((began, time.monotonic(), min(int(info.get("generation", 2)), 2),
                                     time.thread_time() - cpu))
            self._began = None

    def start(self) -> BurstTimeline:
        import gc

        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        import gc

        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def report(self, first_write: float, received: float | None, first_create: float | None,
               decisions: Sequence[Decided]) -> dict[str, Any]:
        """The seconds of each span covered by collections and by decisions (a span whose end is unknown — the
        last pod never read, no CreateFleet — is left out)."""
        spans = {"delivery": (first_write, received)}
        if received is not None:
            spans["controller"] = (received, first_create)
        found: dict[str, Any] = {}
        for name, (start, end) in spans.items():
            if end is None:
                continue
            inside = [(b, e, generation, cpu) for b, e, generation, cpu in self.collections
                      if _overlap(b, e, start, end) > 0]
            found[f"burst_{name}_gc_seconds"] = round(sum(_overlap(b, e, start, end) for b, e, _, _ in inside), 3)
            found[f"burst_{name}_gc_cpu_seconds"] = round(sum(cpu for _, _, _, cpu in inside), 3)
            found[f"burst_{name}_gc_collections"] = [sum(1 for c in inside if c[2] == g) for g in range(3)]
            found[f"burst_{name}_decision_seconds"] = round(
                sum(_overlap(d.began, d.began + d.seconds, start, end) for d in decisions), 3)
        return found


class ServerProcess:
    """The API server of `--server-process` (benchmarks/scale_server.py) in a process of its own, seeded with a
    fleet's nodes and pods in one go; :meth:`ask` sends it one command and reads its JSON answer."""

    def __init__(self, cluster: Any, work: Path, tree: Path | None = None) -> None:
        """`tree`: where the server's code comes from (`export_server_tree`: an earlier commit's tests/ and
        benchmarks/, for `--server-baseline`); None, this repository's."""
        import subprocess

        from karpenter_policy.kube import objects

        work.mkdir(parents=True, exist_ok=True)
        seed = work / f"server-seed-{os.getpid()}.json"
        seed.write_text(json.dumps({"nodes": cluster.list(objects.NODE).items,
                                    "pods": cluster.list(objects.POD).items}), encoding="utf-8")
        root = tree or REPOSITORY
        environment = dict(os.environ)
        environment["PYTHONPATH"] = f"{root}{os.pathsep}{environment.get('PYTHONPATH', '')}"
        self.process = subprocess.Popen(
            [sys.executable, str(root / "benchmarks" / "scale_server.py"), "--seed", str(seed)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment,
        )
        try:
            started = self._read()
        finally:
            seed.unlink()
        self.url = str(started["url"])

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the API server process ended (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._read()

    def cpu(self) -> float:
        """The server process's CPU seconds so far (user and system, every thread), read from /proc: a figure a
        shared machine does not inflate, and one any server's code gives (`--server-baseline`'s too)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)

    def stop(self) -> dict[str, Any]:
        try:
            return self.ask("stop") if self.process.poll() is None else {}
        finally:
            try:
                self.process.wait(30)
            except Exception:  # noqa: BLE001 - a server that does not stop is killed, whatever went wrong
                self.process.kill()
                self.process.wait()


def controller_package() -> str:
    """Where the measured controller's package was imported from (this tree's or a baseline's export): the row
    says which controller it timed."""
    import karpenter_policy

    return str(Path(karpenter_policy.__file__).resolve().parent)


def measure_churn_server(nodes: int, rate: float, settle: float = 12.0, burst: int = BURST,
                         server_tree: Path | None = None, burst_wait: float = BURST_WAIT) -> dict[str, Any]:
    """`measure_churn`'s scenario with the API server in a process of its own (issue #23): the fleet is built as
    in-process, then handed to the test API server (tests/kube/emulator.py, `benchmarks/scale_server.py`) in one
    go; the controller talks to it over HTTP through its kube adapter (`KubeCluster`), and the churn and the burst
    are written by the server's process. This process holds the controller alone, so its CPU is the controller's
    and every delay from a pod's creation to the controller's read is delivery (`recv`), of which `sent` is the
    server's part: its watches picking the last pod up to write it (`scale_server.SentProbe`). `server_tree`:
    the server of an earlier commit (`--server-baseline`), next to the same controller. The burst is given
    `burst_wait` seconds to be bound (`--burst-wait`): a controller that takes longer has no `all_bound…` figure,
    its CreateFleet figures are whatever came by then, and its answer check says how many pods were left."""
    from karpenter_policy.kube import objects
    from karpenter_policy.kube.client import KubeCluster

    compiled = compiled_policy(CONSOLIDATION, WORK / "scale")
    decisions = _decide_timer()
    fleet = build_fleet(nodes, PODS_PER_NODE, "350m", "1Gi", compiled, {"consolidation_validation": 3600.0})
    _underutilize(fleet, KEPT)
    server = ServerProcess(fleet.cluster, WORK / "scale", server_tree)
    fleet.cluster = KubeCluster.from_url(server.url)  # the in-memory copy is dropped: this process holds no server
    result: dict[str, Any] = {"nodes": nodes, "churn_per_second": rate, "batch_idle": 1.0, "api_server": "process",
                              "controller_package": controller_package()}
    timeline = BurstTimeline()
    try:
        fleet.start()
        if not _synced(fleet, 600):
            raise SystemExit("the controller did not sync in 600 s")
        time.sleep(3.0)
        server_cpu = server.cpu()
        server.ask(f"churn {rate}")
        probe = DeliveryProbe(fleet)
        cpu_before = controller_cpu()
        time.sleep(settle)  # decisions run under churn
        result.update(churn_cost(controller_cpu() - cpu_before, probe, server_in_process=False))
        result["server_cpu_seconds_settle"] = round(server.cpu() - server_cpu, 3)
        creates_before = len(fleet.cloud.creates)
        seen = _watch_burst(fleet)
        probe.reset()
        server_cpu = server.cpu()
        timeline.start()
        asked = time.monotonic()
        last_created = float(server.ask(f"burst {burst} burst")["last_created"])
        result["burst_write_seconds"] = round(last_created - asked, 3)  # how fast the server took the burst in
        if wait_for(lambda: server.ask("unbound burst-")["unbound"] == 0, burst_wait, 0.05):
            result["all_bound_after_last_pod"] = round(time.monotonic() - last_created, 3)
        result["server_cpu_seconds_burst"] = round(server.cpu() - server_cpu, 3)  # until all bound (or the wait)
        result.update(probe.report(last_created, burst))
        last_sent = server.ask("sent burst-").get("last_sent")  # a server without the probe: an error, no figure
        if last_sent is not None:
            result["last_pod_sent_after_created"] = round(float(last_sent) - last_created, 3)
        creates = fleet.cloud.creates[creates_before:]
        result["burst_wait_seconds"] = burst_wait
        result["burst_unbound_after_wait"] = server.ask("unbound burst-")["unbound"]
        result.update(burst_timing(creates, last_created, seen, probe, burst))
        timeline.stop()
        received = max(probe.received.values()) if len(probe.received) == burst else None
        result.update(timeline.report(asked, received, creates[0] if creates else None, decisions))
        result.update(run_summary(fleet, decisions))
        result["answer_check"] = launch_answer(lambda: int(server.ask("unbound burst-")["unbound"]), fleet.cloud,
                                               lambda: list(fleet.cluster.list(objects.NODE).items))
    finally:
        timeline.stop()
        fleet.stop()
        stopped = server.stop()
    if stopped.get("churn_seconds"):
        result["churn_achieved_per_second"] = round(stopped["churn_done"] / stopped["churn_seconds"], 1)
    return result


def _running(fleet: Fleet, timeout: float) -> bool:
    """The runner's controllers have started: after its first sync and what it does then (the warm heap frozen out
    of garbage collection: `Runner._freeze_warm_heap`), so a figure taken from here leaves that start-up work out.
    A tree whose runner has no worker threads (2947bfc's single loop) counts as started."""
    workers = getattr(fleet.runner, "workers", None)
    if workers is None:
        return True
    return wait_for(lambda: all(worker.thread.ident is not None for worker in workers), timeout, 0.05)


def _caught_up(fleet: Fleet) -> bool:
    """The controller's state holds exactly the API server's pods (by uid)."""
    from karpenter_policy.kube import objects

    served = {objects.uid(pod) for pod in fleet.cluster.list(objects.POD).items}
    return {record.uid for record in fleet.controller.state.pods()} == served


def measure_memory(nodes: int, rate: float, seconds: float, trace: bool, every: float = 10.0,
                   trace_after: float = 60.0, snapshot_every: float = 60.0,
                   frames: int = TRACE_FRAMES, freeze: bool = True, by_turnover: bool = False,
                   warm_turnovers: int = 2, turnovers: int = 0) -> dict[str, Any]:
    """RSS every `every` seconds while bound pods are replaced at `rate` a second for `seconds` (consolidation on,
    decisions every 10 s): each sample with the garbage collections, the informers' lists and 410s, the API
    server's history and the decisions finished so far, so a step in RSS can be read against what happened. With
    `trace`, tracemalloc from `trace_after` seconds into the churn (caches warm) and a snapshot every
    `snapshot_every` seconds from then on, `frames` frames per allocation (`_memtrace.WarmTracer`). The answer
    check (`answer_check`, "ok" or what failed; the run exits 1 when it failed, its figures printed all the same):
    within `ANSWER_WAIT` seconds of the churn's end the controller's state holds exactly the API server's pods.
    From the runner's start-up on, every garbage collection is timed (`GcPauses`: the longest generation-2 pause);
    `freeze` False runs the controller without its freeze of the warm heap after the first sync (the A/B of
    `--no-gc-freeze`; production always freezes). With `trace` and `by_turnover`, the snapshots follow turnovers
    instead (`_memtrace.TurnoverTracer`), tracing from before the fleet is built: the churn holds at the end of
    each turnover (every churned pod replaced once, in turn), the controller is let catch up (`CATCH_UP`), the API
    server's history is trimmed to `HISTORY_KEPT` changes and garbage collected, and from the end of turnover
    `warm_turnovers` on a snapshot is taken; `turnovers` > 0 ends the churn at the end of that turnover (or at
    `seconds`, whichever comes first)."""
    import gc
    import tracemalloc

    from karpenter_policy.kube import objects

    compiled = compiled_policy(CONSOLIDATION, WORK / "scale")
    decisions = _decide_timer()
    turner = TurnoverTracer(warm_turnovers, frames).start() if trace and by_turnover else None
    fleet = build_fleet(nodes, PODS_PER_NODE, "350m", "1Gi", compiled, {"consolidation_validation": 3600.0})
    _underutilize(fleet, KEPT)
    fleet.start(freeze=freeze)
    result: dict[str, Any] = {"nodes": nodes, "pods": nodes * PODS_PER_NODE, "churn_per_second": rate,
                              "seconds": seconds, "every": every, "rss_mib": [], "samples": [], "gc_freeze": freeze}
    churn = Churn(fleet, rate, hold=turner is not None)
    tracer = WarmTracer(trace_after, snapshot_every, frames) if trace and turner is None else None
    pauses = full_collections(fleet)

    def boundary(elapsed: float) -> bool:
        """At a turnover's end, the churn holding: the tracer's turn; True when the run is over."""
        assert turner is not None
        turnover = churn.turnovers()
        caught = wait_for(lambda: _caught_up(fleet), CATCH_UP, 0.1)
        fleet.cluster.trim_history(HISTORY_KEPT)
        gc.collect()
        turner.boundary(turnover, time.monotonic() - began, churn.done, round(rss_mib(), 1), caught)
        print(f"[memory] {elapsed:.0f} s: end of turnover {turnover} ({churn.done} replacements), caught up "
              f"{caught}, traced {turner.traced_kib()} KiB", file=sys.stderr, flush=True)
        return 0 < turnovers <= turnover

    def sample(elapsed: float) -> None:
        rss = round(rss_mib(), 1)
        result["rss_mib"].append((round(elapsed), rss))
        result["samples"].append({
            "at_seconds": round(elapsed, 1), "rss_mib": rss, "replacements": churn.done,
            "gc_collections": gc_collections(), **informer_counts(fleet),
            "api_server_history": len(getattr(fleet.cluster, "_history", ())), "decisions": len(decisions),
            "traced_mib": tracer.traced_mib() if tracer is not None else None,
            "gc_longest_gen2_seconds": round(pauses.longest[2], 4),
        })
        print(f"[memory] {elapsed:.0f} s: RSS {rss} MiB, {churn.done} replacements, informer lists "
              f"{result['samples'][-1].get('lists', '-')}, gc {result['samples'][-1]['gc_collections']}, longest "
              f"gen-2 pause {pauses.longest[2]:.3f} s", file=sys.stderr, flush=True)

    try:
        if not _synced(fleet, 600) or not _running(fleet, 600):
            raise SystemExit("the controller did not sync in 600 s")
        pauses.start()  # the runner's start-up (its collection before the freeze) left out
        began = time.monotonic()
        sample(0.0)
        churn.start()
        next_sample = every
        while (elapsed := time.monotonic() - began) < seconds:
            due = min(next_sample, seconds, tracer.due() if tracer is not None else seconds)
            if turner is not None:
                if churn.at_boundary.wait(max(0.0, due - elapsed)):
                    if boundary(time.monotonic() - began):
                        break
                    churn.resume()
            else:
                time.sleep(max(0.0, due - elapsed))
            if tracer is not None:
                tracer.tick(time.monotonic() - began, churn.done)
            elapsed = time.monotonic() - began
            if next_sample <= elapsed < seconds:
                sample(elapsed)
                next_sample = (int(elapsed / every) + 1) * every  # a late sample does not shift the grid
        elapsed = time.monotonic() - began
        sample(elapsed)  # the end's, always
        if tracer is not None:
            tracer.finish(elapsed, churn.done)
        if turner is not None:
            turner.stop()
        churn.stop()
        pauses.stop()  # the churn's collections; not the answer check's wait
        result.update(pauses.report())
        print(f"[memory] full collections: {pauses.full} ({pauses.full_in_batch} begun in a batch window), longest "
              f"gen-2 {pauses.longest[2]:.3f} s ({pauses.longest_cpu[2]:.3f} s CPU), longest of Python's "
              f"{pauses.python_longest[0]:.3f} s ({pauses.python_longest[1]:.3f} s CPU)", file=sys.stderr, flush=True)
        result["replacements"] = churn.done
        result["churn_achieved_per_second"] = round(churn.done / elapsed, 1)
        result["api_server_history"] = len(getattr(fleet.cluster, "_history", ()))
        result["decisions"] = len(decisions)
        if tracer is not None:
            result.update(tracer.report(len(churn.slots)))
        if turner is not None:
            result["turnovers_completed"] = churn.turnovers()
            result.update(turner.report(len(churn.slots)))
        state = fleet.controller.state
        served = {objects.uid(pod) for pod in fleet.cluster.list(objects.POD).items}
        caught_up = wait_for(lambda: _caught_up(fleet), ANSWER_WAIT, 0.5)
        result["state_pods"] = len(state.pods())
        result["answer_check"] = "ok" if caught_up else (
            f"failed: {ANSWER_WAIT:g} s after the churn stopped the controller's state holds {result['state_pods']} "
            f"pods, not exactly the API server's {len(served)}")
    finally:
        pauses.stop()
        churn.stop()
        fleet.stop()
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    return result


def in_process(argv: list[str]) -> int:
    if os.environ.get(BASELINE_TREE):
        without_editable_install()
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--what", choices=("fleet", "consolidation", "consolidation-full", "consolidation-burst",
                                           "churn", "memory"), default="fleet")
    parser.add_argument("--rate", type=float, default=CHURN_RATE)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--every", type=float, default=10.0, help="memory: seconds between RSS samples")
    parser.add_argument("--trace-after", type=float, default=60.0,
                        help="memory --tracemalloc: seconds of churn before tracing starts (caches warm)")
    parser.add_argument("--snapshot-every", type=float, default=60.0,
                        help="memory --tracemalloc: seconds between snapshots once tracing")
    parser.add_argument("--frames", type=int, default=TRACE_FRAMES,
                        help="memory --tracemalloc: frames kept per allocation (tracing costs in proportion)")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--server-process", action="store_true",
                        help="churn: the API server in a process of its own, over HTTP (scale_server.py)")
    parser.add_argument("--settle", type=float, default=12.0, help="churn: seconds of churn before the burst")
    parser.add_argument("--burst", type=int, default=BURST, help="churn --server-process: pending pods in the burst")
    parser.add_argument("--server-tree", type=Path, help="churn --server-process: the server's code from there")
    parser.add_argument("--burst-wait", type=float, default=BURST_WAIT,
                        help="fleet, churn: seconds the burst is given to be bound")
    parser.add_argument("--no-gc-freeze", action="store_true",
                        help="memory: the controller without its gc.freeze after the first sync (the A/B)")
    parser.add_argument("--snapshot-every-turnover", action="store_true",
                        help="memory --tracemalloc: tracing from the end of a warm-up turnover (every churned pod "
                             "replaced once, in turn), a snapshot at the end of every turnover after, and the verdict")
    parser.add_argument("--warm-turnovers", type=int, default=2,
                        help="memory --snapshot-every-turnover: the first turnover whose end is snapshotted")
    parser.add_argument("--turnovers", type=int, default=0,
                        help="memory --snapshot-every-turnover: end the churn at the end of this turnover (0: at "
                             "--seconds only)")
    args = parser.parse_args(argv)
    if args.snapshot_every_turnover and not (args.what == "memory" and args.tracemalloc):
        parser.error("--snapshot-every-turnover goes with --what memory --tracemalloc")
    if args.warm_turnovers < 1:
        parser.error("--warm-turnovers must be at least 1 (the first snapshot after a whole turnover)")
    if args.what == "fleet":
        result = measure_size(args.size, args.burst_wait)
    elif args.what == "consolidation":
        result = measure_consolidation(args.size, 2, with_burst=False, timeout=args.timeout)
    elif args.what == "churn" and args.server_process:
        result = measure_churn_server(args.size, args.rate, args.settle, args.burst, args.server_tree,
                                      args.burst_wait)
    elif args.what == "churn":
        result = measure_churn(args.size, args.rate, args.settle, args.burst_wait)
    elif args.what == "memory":
        result = measure_memory(args.size, args.rate, args.seconds, args.tracemalloc, args.every, args.trace_after,
                                args.snapshot_every, args.frames, freeze=not args.no_gc_freeze,
                                by_turnover=args.snapshot_every_turnover, warm_turnovers=args.warm_turnovers,
                                turnovers=args.turnovers)
    elif args.what == "consolidation-full":
        result = measure_consolidation(args.size, PODS_PER_NODE, with_burst=False, timeout=args.timeout)
    else:
        result = measure_consolidation(args.size, PODS_PER_NODE, with_burst=True, timeout=args.timeout)
    print(json.dumps(result))
    return 0 if result.get("answer_check", "ok") == "ok" else 1


def _server_cpu(row: dict[str, Any]) -> str:
    """The server process's CPU seconds over the churn before the burst / over the burst (--server-process)."""
    if "server_cpu_seconds_settle" not in row:
        return "-"
    return f"{row['server_cpu_seconds_settle']:g}/{row.get('server_cpu_seconds_burst', '-')}"


def _or_none(row: dict[str, Any], key: str) -> str:
    """A figure of a burst row for the wide tables: the figure, "none" when it did not come within the burst
    wait, "-" for a row that ran no burst (an n/a row)."""
    if "n/a" in row:
        return "-"
    value = _figure(row, key)
    return "none" if value is None else f"{value:g}"


def _ratio(values: list[float | None]) -> str:
    pairs = [(a, b) for a, b in zip(values, values[1:], strict=False) if a and b]
    return " → ".join(f"{b / a:.2f}×" for a, b in pairs) or "n/a"


#: The label of the server-process rows of this tree's controller and server.
SERVER_ROWS = "server-proc"


def controller_label(ref: str) -> str:
    """The label of the server-process rows of `ref`'s controller (`--controller-baseline`)."""
    return f"ctl {ref}"[:12]


def row_timeout(arguments: list[str]) -> float:
    """How long a row run in its own process may take: 30 minutes, plus its burst wait when longer than the
    default (`--burst-wait` in `arguments`)."""
    wait = float(arguments[arguments.index("--burst-wait") + 1]) if "--burst-wait" in arguments else BURST_WAIT
    return 1800.0 + max(0.0, wait - BURST_WAIT)


def server_row(script: Path, tree: Path | None, size: int, rate: float, extra: list[str]) -> dict[str, Any]:
    """One server-process churn row, run in a process of its own with `tree`'s controller (None: this tree's). A
    baseline's controller that cannot run the row at all gives a row that says why ("n/a"), not an end to the
    comparison; this tree's failing ends it."""
    arguments = ["--size", str(size), "--what", "churn", "--rate", str(rate), "--server-process", *extra]
    if tree is None:
        return run_tree(script, None, arguments, timeout=row_timeout(arguments))
    try:
        return run_tree(script, tree, arguments, timeout=row_timeout(arguments))
    except SystemExit as failed:
        lines = [line for line in str(failed.code).splitlines() if line.strip()]
        return {"nodes": size, "churn_per_second": rate, "n/a": lines[-1].strip()[:200] if lines else "failed"}


def _figure(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def burst_figure(row: dict[str, Any], key: str) -> str:
    """A burst row's figure `key` (seconds from the last pod's creation), or "none in N s" when it did not come
    within the row's burst wait (`burst_wait_seconds`; a row without it waited the default)."""
    value = _figure(row, key)
    if value is not None:
        return f"{value:g}"
    return f"none in {_figure(row, 'burst_wait_seconds') or BURST_WAIT:g} s"


def side_by_side(baseline: list[dict[str, Any]], ours: list[dict[str, Any]], ref: str) -> list[str]:
    """The server-process rows of `ref`'s controller and of this tree's, row by row (same size and churn, run one
    right after the other): first and last CreateFleet and every pod bound from the last pod's creation, each
    `ref / this tree (ratio this ÷ ref)` — the ratio when both have the figure, "none in N s" for a side that had
    none within its burst wait — and each side's answer check; a row `ref` could not run reads "n/a (why)"."""
    header = (f"{'nodes':>6} {'churn/s':>7}  {'first CF ' + ref + ' / this (×)':<34} "
              f"{'last CF':<34} {'all bound':<34} {'answer check (' + ref + ' | this)'}")
    lines = [header, "-" * len(header)]
    for base, row in zip(baseline, ours, strict=False):
        size, rate = row.get("nodes", base.get("nodes")), row.get("churn_per_second", base.get("churn_per_second"))
        if "n/a" in base:
            lines.append(f"{size:>6} {rate:>7g}  n/a ({base['n/a']})")
            continue
        cells = []
        for key in ("first_create_after_last_pod", "last_create_after_last_pod", "all_bound_after_last_pod"):
            old, new = _figure(base, key), _figure(row, key)
            ratio = f"{new / old:.2f}×" if old and new is not None and old > 0 else "-"
            cells.append(f"{burst_figure(base, key)} / {burst_figure(row, key)} ({ratio})")
        lines.append(f"{size:>6} {rate:>7g}  {cells[0]:<34} {cells[1]:<34} {cells[2]:<34} "
                     f"{base.get('answer_check', '-')} | {row.get('answer_check', '-')}")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--in-process"]:
        return in_process(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--baseline-ref", default="2947bfc")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--no-consolidation", action="store_true")
    parser.add_argument("--no-churn", action="store_true")
    parser.add_argument("--churn-rate", type=float, default=CHURN_RATE)
    parser.add_argument("--memory-seconds", type=float, default=0.0,
                        help="also run the memory scenario at the largest size for this long (this tree only)")
    parser.add_argument("--tracemalloc", action="store_true", help="with --memory-seconds: trace allocations")
    parser.add_argument("--trace-after", type=float, default=60.0,
                        help="with --tracemalloc: seconds of churn before tracing starts (caches warm)")
    parser.add_argument("--snapshot-every", type=float, default=60.0,
                        help="with --tracemalloc: seconds between tracemalloc's snapshots")
    parser.add_argument("--frames", type=int, default=TRACE_FRAMES,
                        help="with --tracemalloc: frames kept per allocation (tracing costs in proportion)")
    parser.add_argument("--server-process", action="store_true",
                        help="also run this tree's churn rows with the API server in a process of its own")
    parser.add_argument("--server-only", action="store_true",
                        help="with --server-process: only the server-process churn rows (no fleet, consolidation "
                             "nor in-process rows, no baseline package)")
    parser.add_argument("--server-baseline", metavar="REF",
                        help="with --server-process: each row also with the test API server of REF (its tests/ and "
                             "benchmarks/) next to this tree's controller, the two one right after the other")
    parser.add_argument("--controller-baseline", metavar="REF",
                        help="with --server-process: each row also with REF's controller (its karpenter_policy, "
                             "driven through benchmarks/_controllers.py) against this tree's API server, the two one "
                             "right after the other, printed side by side with their ratio")
    parser.add_argument("--burst-wait", type=float, default=BURST_WAIT, metavar="SECONDS",
                        help="seconds every burst row (either controller's, in-process and server-process) gives "
                             "the burst to be bound before it reads its figures (default %(default)g)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.burst_wait <= MAX_BURST_WAIT:  # NaN, infinity and 1e99999999 too: never a wait for ever
        parser.error(f"--burst-wait: a number of seconds above 0 and at most {MAX_BURST_WAIT:g}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    waiting = ["--burst-wait", f"{args.burst_wait:g}"]
    script = Path(__file__).resolve()
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    only_served = args.server_only and args.server_process
    if not args.no_baseline and not only_served:
        trees.append((args.baseline_ref, export_tree(args.baseline_ref)))
    results: dict[str, Any] = {"date": dt.date.today().isoformat(), "sizes": sizes,
                               "burst_wait_seconds": args.burst_wait, "trees": {}}
    for label, tree in trees:
        rows = []
        for size in sizes if not only_served else ():
            print(f"[scale] {label}: {size} nodes", file=sys.stderr, flush=True)
            arguments = ["--size", str(size), *waiting]
            rows.append(run_tree(script, tree, arguments, timeout=row_timeout(arguments)))
        consolidation = {}
        if not args.no_consolidation and not only_served:
            print(f"[scale] {label}: consolidation", file=sys.stderr, flush=True)
            consolidation["underutilized_1000"] = run_tree(
                script, tree, ["--size", "1000", "--what", "consolidation", "--timeout", "120"], timeout=1800)
            consolidation["full_500"] = run_tree(
                script, tree, ["--size", "500", "--what", "consolidation-full", "--timeout", "120"], timeout=1800)
            consolidation[f"full_{sizes[-1]}_with_burst"] = run_tree(
                script, tree, ["--size", str(sizes[-1]), "--what", "consolidation-burst", "--timeout", "60"],
                timeout=1800)
        churn = []
        if not args.no_churn and not only_served:
            for size in sizes:
                for rate in (0.0, args.churn_rate):
                    print(f"[scale] {label}: {size} nodes, churn {rate:g}/s", file=sys.stderr, flush=True)
                    arguments = ["--size", str(size), "--what", "churn", "--rate", str(rate), *waiting]
                    churn.append(run_tree(script, tree, arguments, timeout=row_timeout(arguments)))
        if not only_served:
            results["trees"][label] = {"fleet": rows, "consolidation": consolidation, "churn": churn}
        if args.server_process and tree is None and not args.no_churn:
            # (name, the controller's tree, extra arguments): the baselines first, then this tree's, row by row
            servers: list[tuple[str, Path | None, list[str]]] = [(SERVER_ROWS, None, [])]
            if args.server_baseline:  # REF's API server, this tree's controller
                servers.insert(0, (f"srv {args.server_baseline}"[:12], None,
                                   ["--server-tree", str(export_server_tree(args.server_baseline))]))
            if args.controller_baseline:  # REF's controller, this tree's API server
                servers.insert(0, (controller_label(args.controller_baseline), export_tree(args.controller_baseline),
                                   []))
            served: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in servers}
            for size in sizes:
                for rate in (0.0, args.churn_rate):
                    for name, tree_of, extra in servers:
                        print(f"[scale] {label}, API server in its own process ({name}): {size} nodes, churn "
                              f"{rate:g}/s", file=sys.stderr, flush=True)
                        served[name].append(server_row(script, tree_of, size, rate, [*extra, *waiting]))
            for name, rows in served.items():
                results["trees"][name] = {"fleet": [], "consolidation": {}, "churn": rows}
            if args.controller_baseline:
                results["controller_baseline"] = controller_label(args.controller_baseline)
    if args.memory_seconds > 0:
        print(f"[scale] this tree: memory under churn for {args.memory_seconds:g} s", file=sys.stderr, flush=True)
        extra = ["--tracemalloc", "--trace-after", str(args.trace_after), "--snapshot-every",
                 str(args.snapshot_every), "--frames", str(args.frames)] if args.tracemalloc else []
        results["memory"] = run_tree(script, None, ["--size", str(sizes[-1]), "--what", "memory", "--rate",
                                                    str(args.churn_rate), "--seconds", str(args.memory_seconds),
                                                    *extra], timeout=args.memory_seconds * 3 + 1800)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"scale.py, {results['date']}: {PODS_PER_NODE} pods per node, bursts of {BURST} pending pods, "
          f"{EVENTS} pod status updates\n")
    unbound_header = f"unbound@{args.burst_wait:g}s"
    header = f"{'tree':<12} {'nodes':>6} {'RSS MiB':>8} {'ms/event':>9} {'gross':>6} {'idle cpu/s':>10} " \
             f"{'first CF':>9} {'last CF':>8} {'seen':>6} {'seen→CF':>8} {unbound_header:>11}"
    print(header)
    print("-" * len(header))
    for label, data in results["trees"].items():
        for row in data["fleet"]:
            net = row.get("event_ms")
            print(f"{label:<12} {row['nodes']:>6} {row['rss_mib']:>8} {'busy' if net is None else net:>9} "
                  f"{row.get('event_ms_gross', '-'):>6} "
                  f"{row['idle_cpu_per_second']:>10} {row.get('first_create_after_last_pod', '-'):>9} "
                  f"{row.get('last_create_after_last_pod', '-'):>8} {row.get('last_pod_seen_after_created', '-'):>6} "
                  f"{row.get('first_create_after_last_seen', '-'):>8} {row['burst_unbound_after_wait']:>11}")
        fleet = data["fleet"]
        print(f"{label:<12} growth: ms/event {_ratio([r.get('event_ms') for r in fleet])}; RSS "
              f"{_ratio([r['rss_mib'] for r in fleet])}; first CreateFleet "
              f"{_ratio([r.get('first_create_after_last_pod') for r in fleet])}")
        for name, row in data["consolidation"].items():
            print(f"{label:<12} consolidation {name}: {json.dumps(row)}")
    header = f"{'tree':<12} {'nodes':>6} {'churn/s':>8} {'first CF':>9} {'last CF':>8} {'sent':>6} {'recv':>6} " \
             f"{'seen':>6} " \
             f"{'seen→CF':>8} {'recv→CF':>8} {'ms/ev own':>9} {'CF calls':>8} {'bound':>6} {'decisions':>9} " \
             f"{'decision CPU s':>14} {unbound_header:>11} {'server CPU s':>12}"
    print(f"\nconsolidation on (full nodes, {UNDERUTILIZED} of them underutilized), bound pods replaced (churn/s), "
          "then the burst:")
    print(header)
    print("-" * len(header))
    for label, data in results["trees"].items():
        for row in data.get("churn", []):
            print(f"{label:<12} {row['nodes']:>6} {row.get('churn_achieved_per_second', '-'):>8} "
                  f"{_or_none(row, 'first_create_after_last_pod'):>9} {_or_none(row, 'last_create_after_last_pod'):>8} "
                  f"{row.get('last_pod_sent_after_created', '-'):>6} "
                  f"{row.get('last_pod_received_after_created', '-'):>6} "
                  f"{row.get('last_pod_seen_after_created', '-'):>6} {row.get('first_create_after_last_seen', '-'):>8} "
                  f"{row.get('first_create_after_last_received', '-'):>8} "
                  f"{row.get('churn_cpu_ms_per_event_own', '-'):>9} "
                  f"{row.get('create_fleet_calls', '-'):>8} {_or_none(row, 'all_bound_after_last_pod'):>6} "
                  f"{row.get('decisions', '-'):>9} {row.get('decision_cpu_seconds', '-'):>14} "
                  f"{row.get('burst_unbound_after_wait', '-'):>11} "
                  f"{_server_cpu(row):>12}")
    for name in (results.get("controller_baseline"),):
        if name and name in results["trees"] and SERVER_ROWS in results["trees"]:
            print(f"\nthe API server in its own process (this tree's), {name}'s controller beside this tree's "
                  f"(seconds from the last pod's creation; burst wait {args.burst_wait:g} s):")
            print("\n".join(side_by_side(results["trees"][name]["churn"], results["trees"][SERVER_ROWS]["churn"],
                                         name.removeprefix("ctl "))))
    if "memory" in results:
        print()
        print("\n".join(memory_lines(results["memory"])))
    print("\nms/event: the controller's CPU per event less its idle rate ('busy': it used as much idle, see gross: "
          "all its CPU over the events' window per event)")
    print("sent (--server-process): from the last pod's creation to the server's watch picking it up to write it; "
          "server CPU s: the API server process's CPU over the churn before the burst (the settle seconds) / from "
          f"the burst until every pod is bound (or the burst wait, {args.burst_wait:g} s)")
    print("first/last CF: from the last pod's creation to the first/last CreateFleet ('none': none within the "
          f"burst wait, {args.burst_wait:g} s); recv: from its creation to the "
          "pods informer receiving it; seen: to the controller's state showing it (the in-process API server's watch "
          "delivery); seen→CF: the controller's part; recv→CF: the controller's own time from reading the last "
          "pod (state, plan, CreateFleet); ms/ev own: the controller's CPU per pods-informer event under churn, the "
          "API server's watch and the churn thread left out (JSON: churn_cpu_ms_per_event_gross/own); "
          "bound: from the last pod's creation to every pod of the burst "
          "bound; JSON: informer_watch/apply_cpu_ms_per_event, the informer thread's CPU per event in the API "
          "server's watch and in the controller's handling")
    print(f"\ngoals: ≤ {GOAL_EVENT_MS:g} ms/event at 5,000 nodes; first CreateFleet ≤ idle + "
          f"{GOAL_FIRST * 1000:.0f} ms, "
          f"every one ≤ idle + {GOAL_EVERY * 1000:.0f} ms; RSS ≤ {GOAL_RSS_MIB:.0f} MiB at 5,000 / 100,000; a "
          f"decision over 1,000 underutilized nodes ≤ {GOAL_DECISION:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
