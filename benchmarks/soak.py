"""Soak: two simulated hours of a cluster's life through the real controller, and what they cost (issue #11).

    .venv/bin/python benchmarks/soak.py [--seed 42] [--hours 2] [--report soak.html] [--json]

The simulation of `karpenter-policy simulate` (karpenter_policy/simulate: the controller, an in-memory
cluster, moto's EC2 in the process, a virtual clock) plays a trace made from the seed:

- `inflate` (examples/workloads/apps/inflate.yaml, pods of one vCPU on the spot `default` provisioner) rescaled
  every 5 minutes along two waves a day compressed into the trace, with noise;
- a Spark job every 10 minutes: one driver (on-demand) and 4 to 12 executors (spot, 4 vCPU and 7.7 GiB each, as
  examples/workloads/apps/spark-executor-4vcpu-7g.yaml) on the `kspark` provisioner; executors complete after 6
  minutes, the driver after 7, freeing their nodes;
- the `node-agent` DaemonSet on every node;
- spot interruptions at random moments (on average one every 12 minutes), each hitting a random spot node: the
  controller's interruption handler takes the warning, the instance is reclaimed 2 minutes later;
- half-way, a policy PR: `default` moves to Graviton (`kubernetes.io/arch In [arm64]`), a new version of the
  compiled constraint sets that the controller takes on its next pass.

It prints the pods scheduled, the pending time per pod (creation → bound: max, p99, median, in virtual seconds),
the nodes launched and deleted, the dollars spent (each node's $/h over its lifetime) and what a static node group
sized for the peak would have cost over the same two hours (the peak of the pods' requests, cpu and memory, over
the allocatable of one on-demand type, less the DaemonSet: a lower bound, as if every pod packed perfectly), and
the wall time the run took. The same seed prints the same figures. `--report FILE` writes one HTML page, FILE,
with every variant: the comparison first (their figures side by side, what each saved against the static group,
the dollars spent, the nodes and the fleet's $/h over time with the static group dashed), then each variant's
simulation report (`simulate --report`); the same seed writes the same bytes (the wall time is left out).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import REPOSITORY

from karpenter_policy.api.workloads import Workload
from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.source.workloads import read_workloads
from karpenter_policy.model.allocatable import allocatable
from karpenter_policy.model.resources import CPU, MEMORY
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded
from karpenter_policy.simulate.command import overwritten_input
from karpenter_policy.simulate.driver import Simulation, SimulationOptions, SimulationResult, Step
from karpenter_policy.simulate.report import Reference, render_comparison
from karpenter_policy.simulate.report import Run as ReportRun
from karpenter_policy.simulate.timeline import Figures
from karpenter_policy.simulate.workloads import ScenarioWorkload

WORK = REPOSITORY / "benchmarks" / ".work" / "soak"
POLICIES = REPOSITORY / "examples" / "workloads" / "policies"
APPS = REPOSITORY / "examples" / "workloads" / "apps"
#: The manifests of examples/workloads/apps the trace is made of.
MANIFESTS = ("node-agent-daemonset.yaml", "inflate.yaml", "spark-executor-4vcpu-7g.yaml")
REGION = "us-east-1"
INFLATE = "deployment/inflate"
EXECUTORS, DRIVER = "job/spark-exec", "job/spark-driver"
EXECUTOR_SECONDS, DRIVER_SECONDS = 360.0, 420.0
RESCALE_EVERY, JOB_EVERY = 300.0, 600.0
MEAN_BETWEEN_INTERRUPTIONS = 720.0
#: The policy PR: `default` gets this requirement (the pool moves to Graviton).
PR_REQUIREMENT = """    - key: kubernetes.io/arch
      operator: In
      values: ["arm64"]
"""
STATIC_TYPE = "m5.2xlarge"


#: The two policies compared in one run: the examples as they are (empty nodes go after ttlSecondsAfterEmpty), and
#: the same with `consolidation.enabled` in place of the TTL (nodes also go, or shrink, when their pods fit
#: elsewhere).
VARIANTS = {
    "ttl": "ttlSecondsAfterEmpty (the examples)",
    "consolidation": "consolidation.enabled",
}


def _consolidating(text: str) -> str:
    return re.sub(r"(?m)^  ttlSecondsAfterEmpty: \d+$", "  consolidation:\n    enabled: true", text)


def compile_versions(variant: str = "ttl") -> tuple[Loaded, Loaded]:
    """The example policies as they are (`ttl`) or consolidating (`consolidation`), and after the PR, compiled by
    `karpenter-policy compile`."""
    base = WORK / variant / "policies"
    changed = WORK / variant / "policies-pr"
    for target in (base, changed):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(POLICIES, target)
        if variant == "consolidation":
            for path in sorted(target.glob("*.yaml")):
                path.write_text(_consolidating(path.read_text()))
    default = changed / "default.yaml"
    text = default.read_text()
    anchor = "  requirements:\n"
    if anchor not in text:
        raise SystemExit(f"{default}: no `requirements:` to add the PR's requirement to")
    default.write_text(text.replace(anchor, anchor + PR_REQUIREMENT, 1))
    versions = []
    for policies, out in ((base, WORK / variant / "v1"), (changed, WORK / variant / "v2-arm64")):
        subprocess.run(
            [sys.executable, "-m", "karpenter_policy.cli", "compile", str(policies), "-o", str(out)],
            cwd=REPOSITORY, check=True, capture_output=True,
        )
        loaded = DirectorySource(str(out)).poll()
        if not isinstance(loaded, Loaded):
            raise SystemExit(f"{out}: the compiled constraint sets cannot be read")
        versions.append(loaded)
    return versions[0], versions[1]


def _example(name: str) -> Workload:
    (found,) = [w for w in read_workloads([str(APPS / name)]).workloads]
    return found


def workloads() -> list[Workload]:
    executor = _example("spark-executor-4vcpu-7g.yaml")
    driver_template: dict[str, Any] = {
        "metadata": {"labels": {"spark-role": "driver"}},
        "spec": {
            "nodeSelector": {"karpenter.sh/capacity-type": "on-demand", "app": "kspark"},
            "containers": [{"name": "spark-kubernetes-driver", "image": "spark/emr-6.5.0:latest",
                            "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}],
        },
    }
    return [
        _example("node-agent-daemonset.yaml"),
        _example("inflate.yaml"),
        ScenarioWorkload("Job", "spark-exec", executor.namespace, executor.template, 0, run_seconds=EXECUTOR_SECONDS),
        ScenarioWorkload("Job", "spark-driver", executor.namespace, driver_template, 0, run_seconds=DRIVER_SECONDS),
    ]


def trace(seed: int, seconds: float, pr: Loaded) -> list[Step]:
    """The scenario's steps (see the module docstring), in time order."""
    rng = random.Random(seed)
    timed: list[tuple[float, int, Step]] = []
    at = RESCALE_EVERY
    while at < seconds:
        wave = 24 + 16 * math.sin(2 * math.pi * at / (seconds / 2) - math.pi / 2)
        replicas = max(0, round(wave + rng.uniform(-6, 6)))
        timed.append((at, 1, Step(f"inflate to {replicas}", {INFLATE: replicas}, at=at)))
        at += RESCALE_EVERY
    at = JOB_EVERY / 2
    while at < seconds:
        executors = rng.randint(4, 12)
        label = f"spark job: driver and {executors} executors"
        timed.append((at, 2, Step(label, start={DRIVER: 1, EXECUTORS: executors}, at=at)))
        at += JOB_EVERY
    at = rng.expovariate(1 / MEAN_BETWEEN_INTERRUPTIONS)
    while at < seconds:
        moment = float(round(at))
        timed.append((moment, 3, Step("spot interruption", interrupt=1, at=moment)))
        at += rng.expovariate(1 / MEAN_BETWEEN_INTERRUPTIONS)
    timed.append((seconds / 2, 0, Step("policy PR: default moves to arm64", constraints=pr, at=seconds / 2)))
    timed.sort(key=lambda item: (item[0], item[1]))
    return [Step("create the workloads"), *(step for _, _, step in timed)]


@dataclass(frozen=True, slots=True)
class Static:
    """The static node group: `count` nodes of `instance_type` on demand for the whole trace."""

    instance_type: str
    count: int
    price: float
    dollars: float


def spot_prices(catalog: Catalog, ratio: float) -> dict[tuple[str, str], float]:
    """A spot market where every spot offering costs `ratio` × its type's on-demand price."""
    return {
        (t.name, o.zone): round(t.price_on_demand * ratio, 5)
        for t in catalog.instance_types if t.price_on_demand is not None
        for o in t.offerings if o.capacity_type == "spot"
    }


def static_group(catalog: Catalog, figures: Figures, daemon_cpu: int, daemon_memory: int, name: str) -> Static:
    instance_type = catalog.get(name)
    if instance_type is None or instance_type.price_on_demand is None:
        raise SystemExit(f"--static-type {name}: not a priced type of the {catalog.region} catalog")
    room = allocatable(instance_type)
    cpu, memory = room[CPU] - daemon_cpu, room[MEMORY] - daemon_memory
    count = max(math.ceil(figures.peak_cpu / cpu), math.ceil(figures.peak_memory / memory), 1)
    hours = figures.end / 3600.0
    return Static(name, count, instance_type.price_on_demand, round(count * instance_type.price_on_demand * hours, 6))


def daemon_requests(found: Sequence[Workload]) -> tuple[int, int]:
    cpu = memory = 0
    for workload in found:
        if workload.is_daemon_set:
            for container in workload.template.get("spec", {}).get("containers", []):
                requests = container.get("resources", {}).get("requests", {})
                cpu += _millicores(str(requests.get("cpu", "0")))
                memory += _bytes(str(requests.get("memory", "0")))
    return cpu, memory


def _millicores(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def _bytes(text: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


@dataclass(frozen=True, slots=True)
class Run:
    """One variant's soak: the simulation's result, its static group and the wall time it took."""

    variant: str
    result: SimulationResult
    static: Static
    wall: float


def summary(run: Run, seed: int, ratio: float | None) -> dict[str, Any]:
    figures = run.result.figures
    return {
        "variant": run.variant,
        "policy": VARIANTS[run.variant],
        "seed": seed,
        "spot_price_ratio": ratio,
        "virtual_seconds": figures.end,
        "wall_seconds": round(run.wall, 1),
        **asdict(figures),
        "spot_interruptions": len(run.result.interruptions),
        "static": asdict(run.static),
        "errors": len(run.result.errors),
    }


def _saved(run: Run) -> tuple[float, float]:
    """What the variant spent less than the static group: dollars, and the share of the group's."""
    saved = run.static.dollars - run.result.figures.dollars
    return saved, saved / run.static.dollars


def _rows(run: Run, page: bool = False) -> list[tuple[str, str]]:
    """The figures of a variant, as labelled cells; for the report's `page`, without the policy (its column's
    heading) and the wall time (another run, another time)."""
    f, static = run.result.figures, run.static
    rows = [
        ("policy", VARIANTS[run.variant]),
        ("pods scheduled", f"{f.pods_scheduled} of {f.pods_created} ({f.pods_completed} completed, "
                           f"{f.pods_pending_at_end} pending at the end)"),
        ("pending time per pod", f"max {f.pending_max:.1f} s, p99 {f.pending_p99:.1f} s, median "
                                 f"{f.pending_median:.1f} s"),
        ("time to running", f"max {f.running_max:.1f} s, p99 {f.running_p99:.1f} s"),
        ("nodes", f"{f.nodes_launched} launched, {f.nodes_deleted} deleted, {len(run.result.nodes)} at the end"),
        ("spot interruptions", str(len(run.result.interruptions))),
        ("spent", f"${f.dollars:.2f}"),
        ("static node group", f"${static.dollars:.2f} ({static.count} × {static.instance_type})"),
        ("saved", "${:.2f} ({:.0%} of the static group)".format(*_saved(run))),
        ("wall time", f"{run.wall:.1f} s"),
        ("controller errors", str(len(run.result.errors))),
    ]
    return [row for row in rows if row[0] not in ("policy", "wall time")] if page else rows


def render(runs: Sequence[Run], seed: int, ratio: float | None) -> str:
    """The variants' figures side by side."""
    first = runs[0].result.figures
    peak_cpu = max(r.result.figures.peak_cpu for r in runs)
    peak_memory = max(r.result.figures.peak_memory for r in runs)
    spot = "spot priced at on-demand" if ratio is None else f"spot at {ratio:g} × on-demand"
    lines = [
        f"soak: {first.end / 3600:g} h of virtual time, seed {seed}, {spot}; pending: creation → bound, running: "
        "creation → Running (a new node's 45 s startup included), virtual seconds; $: each node's $/h over its "
        f"lifetime; the static group is sized for the peak requests ({peak_cpu / 1000:g} vCPU, "
        f"{peak_memory / 2**30:.1f} GiB) on demand for the whole trace",
        "",
    ]
    columns = [_rows(run) for run in runs]
    labels = [label for label, _ in columns[0]]
    widths = [max(len(label) for label in labels)] + [max(len(v) for _, v in col) for col in columns]
    header = ["", *(run.variant for run in runs)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for i, label in enumerate(labels):
        cells = [label, *(col[i][1] for col in columns)]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    for run in runs:
        if run.result.errors:
            lines.append(f"{run.variant}: first controller error: {run.result.errors[0]}")
    return "\n".join(lines) + "\n"


def report(runs: Sequence[Run], seed: int, hours: float, ratio: float | None) -> str:
    """One page: the variants compared (their figures, the dollars spent against the static group's), then each
    variant's simulation report."""
    static = runs[0].static
    spot = "spot priced at on-demand" if ratio is None else f"spot at {ratio:g} × on-demand"
    outcomes = "; ".join(
        f"{run.variant} spent ${run.result.figures.dollars:.2f}, saving " + "${:.2f} ({:.0%})".format(*_saved(run))
        for run in runs
    )
    lead = (f"{outcomes} — against a static node group of {static.count} × {static.instance_type} on demand, sized "
            f"for the peak, ${static.dollars:.2f} over the trace. Seed {seed}, {spot}.")
    columns = [_rows(run, page=True) for run in runs]
    rows = [(label, [column[i][1] for column in columns]) for i, (label, _) in enumerate(columns[0])]
    reference = Reference(f"static group ({static.count} × {static.instance_type})", static.count,
                          static.count * static.price)
    return render_comparison(
        f"soak: {hours:g} h, seed {seed}",
        lead,
        [ReportRun(run.variant, VARIANTS[run.variant], run.result) for run in runs],
        rows,
        reference,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--hours", type=float, default=2.0, help="virtual hours of the trace (default 2)")
    parser.add_argument("--static-type", default=STATIC_TYPE, help=f"the static group's type (default {STATIC_TYPE})")
    parser.add_argument("--spot-price-ratio", type=float, metavar="R",
                        help="spot offerings cost R × on-demand (default: spot priced at on-demand, as moto has no "
                             "spot market)")
    parser.add_argument("--variant", choices=[*VARIANTS, "both"], default="both",
                        help="the policies: as the examples (ttl), consolidating, or both side by side (default)")
    parser.add_argument("--report", metavar="FILE",
                        help="write the HTML report there: the variants compared, then each one's simulation")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not 0 < args.hours <= 24:
        parser.error("--hours: above 0 and at most 24")
    ratio = args.spot_price_ratio
    if ratio is not None and not 0 < ratio <= 1:
        parser.error("--spot-price-ratio: a share of the on-demand price, above 0 and at most 1")
    catalog = load_catalog(region=REGION)
    static_type = catalog.get(args.static_type)
    if static_type is None or static_type.price_on_demand is None:
        parser.error(f"--static-type {args.static_type}: not a priced type of the {REGION} catalog")
    variants = list(VARIANTS) if args.variant == "both" else [args.variant]
    inputs = [WORK, POLICIES, *(APPS / name for name in MANIFESTS)]  # WORK: each run rewrites it
    if args.report and (why := overwritten_input(args.report, inputs)) is not None:
        parser.error(f"--report {args.report}: {why}; write the report elsewhere")
    WORK.mkdir(parents=True, exist_ok=True)
    found = workloads()
    seconds = args.hours * 3600.0
    options = SimulationOptions(seed=args.seed, spot_prices=spot_prices(catalog, ratio) if ratio else {})
    simulated: list[tuple[str, SimulationResult, float]] = []
    for variant in variants:
        base, pr = compile_versions(variant)
        steps = trace(args.seed, seconds, pr)
        start = time.perf_counter()
        with Simulation(base, found, catalog, options) as simulation:
            result = simulation.run(steps, until=seconds)
        wall = time.perf_counter() - start
        simulated.append((variant, result, wall))
    # One static group for the trace, sized for the highest peak any variant saw (evictions briefly add pods).
    figures = [result.figures for _, result, _ in simulated]
    peak = dataclasses.replace(
        figures[0], peak_cpu=max(f.peak_cpu for f in figures), peak_memory=max(f.peak_memory for f in figures)
    )
    static = static_group(catalog, peak, *daemon_requests(found), args.static_type)
    runs = [Run(variant, result, static, wall) for variant, result, wall in simulated]
    if args.report:
        try:
            Path(args.report).write_text(report(runs, args.seed, args.hours, ratio), encoding="utf-8")
        except OSError as error:
            raise SystemExit(f"soak.py: cannot write {args.report}: {error.strerror}") from None
    if args.json:
        print(json.dumps([summary(run, args.seed, ratio) for run in runs], indent=2))
    else:
        sys.stdout.write(render(runs, args.seed, ratio))
        if args.report:
            print(f"report: {args.report}")


if __name__ == "__main__":
    main()
