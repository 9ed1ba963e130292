"""Time `karpenter-policy check` on N generated Provisioners against the embedded catalog, stage by stage.

    .venv/bin/python benchmarks/check.py [--provisioners 100] [--repeat 5] [--work DIR] [--json] [--workloads N]

Generates N varied, realistic Provisioner files (fixed seed) plus the AWSNodeTemplates they reference; about
5% carry one deliberate solver error each (arch vs family, Gt vs Lt, GPU on a non-GPU family, a mistyped
instance type, a mistyped capacity type), whose rule and line the generator records. Then, `--repeat` times
each (best and median kept; every timed run pinned to one core):

  (a) the CLI, `karpenter-policy check DIR --output json`, one subprocess: what a user runs, start-up,
      imports, catalog load and JSON report included; the report is checked against what was planted;
  (b) the same in-process (`check_paths` + JSON report, catalog cache cleared first);
  (c) per stage, in-process: parse (YAML → documents), schema + Karpenter rules, catalog (load + solver
      table), solve (Z3 per provisioner: encoding, checks, core minimisation, findings) and compile
      (`compile_paths` of the compile command, n/a when it is not there).

The goal of the issue: the full check of 100 provisioners × the catalog in < 2 s on this machine. Wall time
depends on what else the machine runs; CPU time (user + system) is printed next to it.

With `--workloads N` (issue 4), N workloads are generated against those provisioners and `check --workloads` is
timed instead: 100 provisioners × 1,000 workloads × the catalog, goal < 5 s (see "--workloads N" below).

With `--shapes` (issue 27), the shapes that were quadratic or close to it are timed instead, each command through
the CLI (`validate`, `check`, `compile -o`, `fmt`), CPU seconds best of `--repeat`: 2,000 Provisioner files
(`--provisioners` is ignored; `fmt` on them once formatted, the pre-commit case), one Provisioner with 10,000
requirements, and one with 10,000 values of one requirement. Goals: 2,000 Provisioners ≤ 5 s, 10,000 values
≤ 2 s (per command).

With `--migrate --baseline-ref REF` (issue 25), `migrate --to v1` of the corpus is timed instead, through this
tree's CLI and REF's alternately (`baseline_main`): every Provisioner proven against its NodePool with Z3, the
diff on stdout, which must be byte-identical.

With `--api v1` (issue 27), the same corpus is checked as Karpenter v1 NodePools and EC2NodeClasses: the
Provisioners and AWSNodeTemplates generated as above are turned into them by the project's own `migrate` (into
`--work`/check-v1, `--node-role KarpenterNodeRole-bench`; every Provisioner is migrated, the planted ones too), so
the v1 twin is built reproducibly from the same seed; the workloads are the same files. A planted error is then
expected as one error of its file (v1's rules word and place some of them otherwise: the mistyped capacity type is
the CRD's `runtime-validation`). The v1 twin of 100 × 1,000: goal < 5 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import BENCHMARKS_DIR, REPOSITORY, Timing, baseline_tree, pinned_cpu, render_table, run_pinned

SEED = 20261123
ERROR_SHARE = 0.05
GOAL_SECONDS = 2.0
CLI = Path(sys.executable).parent / "karpenter-policy"

TEAMS = ("payments", "search", "checkout", "ml", "data", "ads", "identity", "observability", "recsys", "fraud")
# Families known to be in the catalog with these sizes, for each shape of provisioner.
AMD64_FAMILIES = ("c5", "c5a", "c6i", "c6a", "c7i", "m5", "m5a", "m6i", "m6a", "m7i", "r5", "r5a", "r6i", "r6a", "r7i")
ARM64_FAMILIES = ("c6g", "c7g", "m6g", "m7g", "r6g", "r7g")
GPU_FAMILIES = ("g4dn", "g5", "g6")
COMMON_SIZES = ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge")
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d")
PINNED_TYPES = ("m5.large", "m5.xlarge", "m6i.2xlarge", "c6i.4xlarge", "r6i.2xlarge", "c5.9xlarge", "m7i.xlarge")
PURPOSES = ("general", "arm64", "gpu", "batch", "memory", "pinned", "storage", "web")

#: Deliberate solver errors: (kind, rule); each yields exactly one error finding at the recorded line.
PLANTED_KINDS = (
    ("arch-vs-family", "requirements-conflict"),
    ("gt-vs-lt", "requirements-conflict"),
    ("gpu-on-c5", "requirements-conflict"),
    ("instance-type-typo", "unknown-instance-type"),
    ("capacity-type-typo", "no-instance-type"),
)


@dataclass(slots=True)
class Planted:
    kind: str
    rule: str
    file: str
    line: int


@dataclass(slots=True)
class Corpus:
    directory: Path
    files: list[Path]
    planted: list[Planted] = field(default_factory=list)
    #: What its policies are: Provisioners (generated), or NodePools (`migrate_corpus`: the v1 twin).
    pools: str = "Provisioners"


#: `--api`: the Karpenter API the checked policies are written in.
V1ALPHA5, V1 = "v1alpha5", "v1"
#: The IAM role the v1 twin's EC2NodeClasses get (migrate needs one for node templates without an instance profile).
NODE_ROLE = "KarpenterNodeRole-bench"


def migrate_corpus(corpus: Corpus, directory: Path) -> Corpus:
    """`corpus` as Karpenter v1 NodePools and EC2NodeClasses in `directory` (emptied first), by the project's own
    `migrate` (every Provisioner migrated, the planted ones too): the v1 twin of the generated corpus. Its planted
    errors are expected by file only (`Planted.line` 0, `rule` empty): v1 reports some with other rules and lines."""
    import shutil

    from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command

    shutil.rmtree(directory, ignore_errors=True)
    done = migrate_command([str(corpus.directory)], MigrateOptions(out=str(directory), node_role=NODE_ROLE))
    if done.exit_code != 0:
        fail("migrate --to v1", [f"exit code {done.exit_code}"], done.stderr + done.stdout)
    files = sorted(directory.glob("*.yaml"))
    if len(files) != len(corpus.files) or any("kind: Provisioner" in f.read_text(encoding="utf-8") for f in files):
        fail("migrate --to v1", [f"{len(files)} files for {len(corpus.files)}, or a Provisioner left"])
    return Corpus(directory, files, [Planted(p.kind, "", p.file, 0) for p in corpus.planted], pools="NodePools")


ErrorKey = tuple[str, int, str]  # (file name, line, rule) of an error finding


def _matched(found: Counter[ErrorKey], planted: list[Planted]) -> tuple[list[str], Counter[ErrorKey]]:
    """The planted errors not among the errors `found` (file, line, rule), and the errors left once each planted one
    took its own: at its file, line and rule, or (line 0: the v1 twin) any one error of its file."""
    left = Counter(found)
    missing: list[str] = []
    for p in sorted(planted, key=lambda p: (p.line == 0, p.file, p.line, p.rule)):
        if p.line:
            key = (p.file, p.line, p.rule)
        else:
            key = next((k for k in sorted(left.elements()) if k[0] == p.file), (p.file, 0, ""))
        if left[key] > 0:
            left[key] -= 1
        else:
            missing.append(f"missing: {p.rule or 'an error'} at {p.file}:{p.line or '?'} ({p.kind})")
    return missing, +left


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def requirement(self, key: str, operator: str, values: list[str] | None = None) -> int:
        line = self.add(f"    - key: {key}")
        self.add(f"      operator: {operator}")
        if values is not None:
            self.add("      values: [" + ", ".join(json.dumps(v) for v in values) + "]")
        return line

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def render_provisioner(rng: random.Random, index: int, planted: str | None) -> tuple[str, str, int]:
    """One Provisioner file: (name, text, line of the planted error or 0)."""
    team, purpose = rng.choice(TEAMS), rng.choice(PURPOSES)
    if planted == "gpu-on-c5":
        purpose = "general"
    name = f"{team}-{purpose}-{index:04d}"
    out = _Writer()
    error_line = 0
    out.add(f"# {purpose} capacity for {team} (generated by benchmarks/check.py, seed {SEED})")
    out.add("apiVersion: karpenter.sh/v1alpha5")
    out.add("kind: Provisioner")
    out.add("metadata:")
    out.add(f"  name: {name}")
    out.add("spec:")
    out.add(f"  weight: {rng.randint(1, 100)}")
    labels = {"team": team}
    if rng.random() < 0.4:
        labels["example.com/env"] = rng.choice(("prod", "staging"))
    out.add("  labels:")
    for key, value in labels.items():
        out.add(f"    {key}: {value}")
    out.add("  requirements:")
    capacity = rng.choice((["spot"], ["on-demand"], ["spot", "on-demand"]))
    if planted == "capacity-type-typo":
        error_line = out.requirement("karpenter.sh/capacity-type", "In", ["spot-instances"])
    elif purpose in ("batch",) or rng.random() < 0.9:
        out.requirement("karpenter.sh/capacity-type", "In", ["spot"] if purpose == "batch" else capacity)
    arch = "arm64" if purpose == "arm64" else "amd64"
    if planted == "gpu-on-c5":
        out.requirement("kubernetes.io/arch", "In", ["amd64"])
        error_line = out.requirement("karpenter.k8s.aws/instance-family", "In", ["c5"])
        out.requirement("karpenter.k8s.aws/instance-gpu-count", "Gt", ["0"])
    elif planted == "arch-vs-family":
        error_line = out.requirement("kubernetes.io/arch", "In", ["arm64"])
        out.requirement("karpenter.k8s.aws/instance-family", "In", sorted(rng.sample(AMD64_FAMILIES, 3)))
    elif purpose == "gpu":
        out.requirement("kubernetes.io/arch", "In", ["amd64"])
        out.requirement("karpenter.k8s.aws/instance-family", "In", sorted(rng.sample(GPU_FAMILIES, rng.randint(1, 3))))
        out.requirement("karpenter.k8s.aws/instance-gpu-count", "Gt", ["0"])
    elif purpose == "pinned":
        out.requirement("node.kubernetes.io/instance-type", "In", sorted(rng.sample(PINNED_TYPES, rng.randint(1, 4))))
    elif purpose == "memory":
        out.requirement("kubernetes.io/arch", "In", [arch])
        out.requirement("karpenter.k8s.aws/instance-category", "In", ["r", "x"])
        out.requirement("karpenter.k8s.aws/instance-memory", "Gt", [str(rng.choice((32767, 65535, 131071)))])
    elif purpose == "storage":
        out.requirement("kubernetes.io/arch", "In", [arch])
        out.requirement("karpenter.k8s.aws/instance-family", "In", ["i3", "i4i", "m6id", "r6id"])
        out.requirement("karpenter.k8s.aws/instance-local-nvme", "Gt", ["100"])
    else:
        families = ARM64_FAMILIES if arch == "arm64" else AMD64_FAMILIES
        out.requirement("kubernetes.io/arch", "In", [arch])
        if rng.random() < 0.5:
            out.requirement("karpenter.k8s.aws/instance-family", "In", sorted(rng.sample(families, rng.randint(2, 6))))
        else:
            out.requirement("karpenter.k8s.aws/instance-category", "In", sorted(rng.sample(("c", "m", "r"), 2)))
            out.requirement("karpenter.k8s.aws/instance-generation", "Gt", [str(rng.randint(4, 6))])
    if planted == "instance-type-typo":
        out.requirement("node.kubernetes.io/instance-type", "In", ["m5d.x2large"])
        error_line = len(out.lines)  # the values line
    if purpose not in ("pinned", "gpu", "storage") and rng.random() < 0.5:
        if rng.random() < 0.5:
            sizes = sorted(rng.sample(COMMON_SIZES, rng.randint(2, 4)))
            out.requirement("karpenter.k8s.aws/instance-size", "In", sizes)
        else:
            out.requirement("karpenter.k8s.aws/instance-size", "NotIn", ["nano", "micro", "small", "metal"])
    if rng.random() < 0.6:
        out.requirement("topology.kubernetes.io/zone", "In", sorted(rng.sample(ZONES, rng.randint(2, 4))))
    if planted == "gt-vs-lt":
        error_line = out.requirement("karpenter.k8s.aws/instance-cpu", "Gt", ["32"])
        out.requirement("karpenter.k8s.aws/instance-cpu", "Lt", ["16"])
    elif purpose in ("general", "web", "batch") and rng.random() < 0.3:
        out.requirement("karpenter.k8s.aws/instance-cpu", "Gt", ["1"])
        out.requirement("karpenter.k8s.aws/instance-cpu", "Lt", [str(rng.choice((17, 33, 65)))])
    if rng.random() < 0.3:
        out.requirement("team", "In", [team])
    if rng.random() < 0.2:
        out.requirement("example.com/pool", "NotIn", ["legacy"])
    if purpose == "gpu":
        out.add("  taints:")
        out.add("    - key: nvidia.com/gpu")
        out.add('      value: "true"')
        out.add("      effect: NoSchedule")
    out.add("  limits:")
    out.add("    resources:")
    out.add(f"      cpu: {rng.choice((100, 500, 1000, 2000))}")
    if rng.random() < 0.5:
        out.add("  consolidation:")
        out.add("    enabled: true")
    else:
        out.add(f"  ttlSecondsAfterEmpty: {rng.choice((30, 60, 300))}")
    out.add("  providerRef:")
    out.add(f"    name: {'gpu' if purpose == 'gpu' else 'default'}")
    if planted is not None and not error_line:
        raise AssertionError(f"planted {planted} in {name} but recorded no line")
    return name, out.text(), error_line


NODE_TEMPLATES = """\
# The node templates every generated provisioner references.
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector:
    karpenter.sh/discovery: bench
  securityGroupSelector:
    karpenter.sh/discovery: bench
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: gpu
spec:
  amiFamily: AL2
  subnetSelector:
    karpenter.sh/discovery: bench
  securityGroupSelector:
    karpenter.sh/discovery: bench
"""


def generate(directory: Path, count: int, seed: int = SEED) -> Corpus:
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    rng = random.Random(seed)
    planted_count = max(1, round(count * ERROR_SHARE)) if count else 0
    chosen = rng.sample(range(count), planted_count)
    kinds = {index: PLANTED_KINDS[n % len(PLANTED_KINDS)] for n, index in enumerate(sorted(chosen))}
    templates = directory / "_nodetemplates.yaml"
    templates.write_text(NODE_TEMPLATES, encoding="utf-8")
    corpus = Corpus(directory, [templates])
    for index in range(count):
        kind = kinds.get(index)
        name, text, line = render_provisioner(rng, index, kind[0] if kind else None)
        path = directory / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        corpus.files.append(path)
        if kind is not None:
            corpus.planted.append(Planted(kind[0], kind[1], path.name, line))
    return corpus


# --- checking and timing ------------------------------------------------------------------------------------


def check_report(report: dict[str, Any], corpus: Corpus, provisioners: int, returncode: int | None) -> list[str]:
    """Why a JSON report of `check` disagrees with what was generated (empty when it agrees); `provisioners`: how
    many policies (Provisioners, or NodePools of the v1 twin: the report lists both under `provisioners`)."""
    problems: list[str] = []
    expected_code = 1 if corpus.planted else 0
    if returncode is not None and returncode != expected_code:
        problems.append(f"exit code {returncode}, expected {expected_code}")
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    found = Counter((Path(f["file"]).name, f["line"], f["rule"]) for f in errors)
    missing, unexpected = _matched(found, corpus.planted)
    problems += missing
    for file, line, rule in sorted(unexpected.elements()):
        problems.append(f"unexpected: {rule} at {file}:{line}")
    # dead-value: the generator's random requirements leave genuine dead values (`instance-size In [large, ...]` next
    # to `instance-memory Gt 65535`): real findings of the tree under test, their extra solves timed with the rest
    warnings = [f for f in report.get("findings", []) if f.get("severity") == "warning" and f["rule"] != "dead-value"]
    problems += [f"unexpected warning: {w['rule']} at {Path(w['file']).name}:{w['line']}: {w['message']}"
                 for w in warnings]
    proven = [p for p in report.get("provisioners", []) if p.get("verdict") == "sat"]
    expected = provisioners - len(corpus.planted)
    if len(proven) != expected:
        problems.append(f"{len(proven)} {corpus.pools} proven satisfiable, expected {expected}")
    if any(not p.get("instance_types") or "witness" not in p for p in proven):
        problems.append(f"one of the satisfiable {corpus.pools} without instance types or witness")
    return problems


def fail(what: str, problems: list[str], stderr: str = "") -> None:
    print(f"check.py: {what} did not do the expected work:", file=sys.stderr)
    for problem in problems[:20]:
        print(f"  {problem}", file=sys.stderr)
    if stderr:
        print(f"  stderr: {stderr[:2000]}", file=sys.stderr)
    sys.exit(1)


def pinned(cpu: int, action: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run `action` pinned to `cpu`: (result, wall seconds, CPU seconds of this process)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        cpu_start, start = time.process_time(), time.perf_counter()
        result = action()
        return result, time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        os.sched_setaffinity(0, allowed)


@dataclass(slots=True)
class Stages:
    timings: dict[str, Timing] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def add(self, stage: str, wall: float, cpu: float) -> None:
        self.timings.setdefault(stage, Timing()).add(wall, cpu)


def run_stages(corpus: Corpus, provisioners: int, cpu: int, stages: Stages) -> None:
    """One in-process pass, stage by stage, each timed on its own (pinned)."""
    from karpenter_policy.catalog import clear_catalog_cache, load_catalog
    from karpenter_policy.checks.findings import Report
    from karpenter_policy.checks.proof.provisioners import check_provisioner
    from karpenter_policy.checks.proof.solver import Solver
    from karpenter_policy.checks.source.files import load_file
    from karpenter_policy.checks.source.loader import discover
    from karpenter_policy.checks.validation.policies import check_document

    def parse() -> list[Any]:
        files, _ = discover([str(corpus.directory)])
        return [doc for file in files for doc in load_file(file)]

    documents, wall, cpu_s = pinned(cpu, parse)
    stages.add("parse (YAML → documents)", wall, cpu_s)

    def schema() -> list[Any]:
        report = Report()
        valid = []
        for doc in documents:
            findings, is_policy = check_document(doc, report)
            if is_policy and not any(f.severity == "error" for f in findings) and doc.data["kind"] == "Provisioner":
                valid.append(doc)
        return valid

    valid, wall, cpu_s = pinned(cpu, schema)
    stages.add("schema + Karpenter rules", wall, cpu_s)

    def catalog() -> Any:
        clear_catalog_cache()
        return Solver(load_catalog())

    solver, wall, cpu_s = pinned(cpu, catalog)
    stages.add("catalog (load + solver table)", wall, cpu_s)

    def solve() -> list[Any]:
        return [check_provisioner(doc, solver) for doc in valid]

    results, wall, cpu_s = pinned(cpu, solve)
    stages.add(f"solve (Z3, {len(valid)} provisioners)", wall, cpu_s)
    per = sorted(result.seconds for _, result in results)
    stages.notes["solve"] = (
        f"per provisioner: median {per[len(per) // 2] * 1000:.1f} ms, max {per[-1] * 1000:.1f} ms" if per else ""
    )

    try:
        from karpenter_policy.commands.compile.compiler import CompileOptions, compile_paths
    except ImportError as error:
        stages.notes["compile"] = f"n/a ({error})"
        return
    import tempfile

    paths = [str(corpus.directory)]
    ok_dir = Path(tempfile.mkdtemp(prefix="bench-compile-"))
    # Compile refuses inputs with errors: compile the satisfiable provisioners only.
    planted = {p.file for p in corpus.planted}
    for file in corpus.files:
        if file.name not in planted:
            (ok_dir / file.name).write_bytes(file.read_bytes())
    paths = [str(ok_dir)]
    try:
        result, wall, cpu_s = pinned(cpu, lambda: compile_paths(paths, CompileOptions(catalog=load_catalog())))
    except Exception as error:  # the compile command is someone else's work in progress: report, do not fail
        stages.notes["compile"] = f"n/a ({type(error).__name__}: {error})"
        return
    errors = getattr(getattr(result, "report", None), "errors", 0)
    stages.add(f"compile ({provisioners - len(planted)} provisioners, its own validation included)", wall, cpu_s)
    stages.notes["compile"] = f"compile_paths: {errors} errors" if errors else ""


def run_in_process(corpus: Corpus, provisioners: int, cpu: int) -> tuple[float, float]:
    from karpenter_policy.catalog import clear_catalog_cache
    from karpenter_policy.checks.repository import check_paths
    from karpenter_policy.commands.check import render_check

    def full() -> tuple[str, int]:
        clear_catalog_cache()
        report, checked = check_paths([str(corpus.directory)])
        return render_check(report, checked, "json"), report.exit_code()

    (text, code), wall, cpu_s = pinned(cpu, full)
    problems = check_report(json.loads(text), corpus, provisioners, code)
    if problems:
        fail("check_paths (in-process)", problems)
    return wall, cpu_s


def run_cli(corpus: Corpus, provisioners: int, cpu: int) -> tuple[float, float]:
    done = run_pinned([str(CLI), "check", str(corpus.directory), "--output", "json"], cpu)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        fail("karpenter-policy check", [f"exit code {done.returncode}, output is not JSON"], done.stderr)
    problems = check_report(report, corpus, provisioners, done.returncode)
    if problems:
        fail("karpenter-policy check", problems, done.stderr)
    return done.wall, done.cpu


# --- --workloads N: the workload checks -----------------------------------------------------------------------
#
# N workloads (fixed seed) are generated against the provisioners just generated: each aims at one satisfiable
# provisioner (its team label, sometimes its capacity type, architecture, env label, a preferred zone; the GPU
# taint tolerated and a GPU requested for GPU provisioners), a tenth aim at none in particular; kinds vary
# (Deployment, StatefulSet, ReplicaSet, Job, CronJob, Pod, Spark driver/executor pod templates), some with
# init containers, sidecars, two required nodeSelectorTerms or preferred terms; plus a few DaemonSets, each
# file with a Service next to it. About 2% are planted unschedulable (an undefined label, 64 GPUs, 2,000 vCPU,
# a GPU without the toleration), their template line recorded. The full check — validate, the solver on every
# provisioner, reading the workloads, placing every one of them, the findings and the JSON report — is timed
# through the CLI and in-process, and its report checked: every planted error at its line and no other error
# (but for workloads the plan of every replica finds no room for within a provisioner's limits, which the workloads
# planned before them used up), a placement for every workload, warnings only of the kinds equal weights and shared
# teams produce.

WORKLOAD_GOAL_SECONDS = 5.0
#: What a workload-unschedulable error says when the workloads planned before it used up a provisioner's limits:
#: verdicts come from the plan of every replica (issue #19), and 10,000 workloads outgrow some generated limits.
SHARED_LIMITS = "the nodes planned before use up its limits"
WORKLOAD_ERROR_SHARE = 0.02
WORKLOAD_PLANTED = ("undefined-label", "too-many-gpus", "too-many-cpus", "gpu-not-tolerated")
DAEMON_SETS = (("node-exporter", "50m", "64Mi"), ("fluent-bit", "100m", "128Mi"), ("kube-proxy-extra", "25m", "32Mi"))


@dataclass(slots=True)
class WorkloadCorpus:
    directory: Path
    count: int
    planted: list[Planted] = field(default_factory=list)


def _target_shape(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec") or {}
    reqs = {r["key"]: r for r in spec.get("requirements") or []}

    def values(key: str) -> list[str]:
        return [str(v) for v in (reqs.get(key) or {}).get("values") or []]

    return {
        "name": doc["metadata"]["name"],
        "labels": dict(spec.get("labels") or {}),
        "capacity": values("karpenter.sh/capacity-type") if reqs.get("karpenter.sh/capacity-type") else ["on-demand"],
        "arch": values("kubernetes.io/arch"),
        "zones": values("topology.kubernetes.io/zone"),
        "gpu": any(t.get("key") == "nvidia.com/gpu" for t in spec.get("taints") or []),
    }


def generate_workloads(directory: Path, corpus: Corpus, count: int, seed: int = SEED) -> WorkloadCorpus:
    """`count` workloads (DaemonSets on top) aimed at the satisfiable provisioners of `corpus`."""
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    rng = random.Random(seed + 1)
    planted_files = {p.file for p in corpus.planted}
    shapes = [
        _target_shape(doc)
        for path in corpus.files
        if path.name not in planted_files and not path.name.startswith("_")
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    ]
    result = WorkloadCorpus(directory, count)
    planted_at = set(rng.sample(range(count), max(1, round(count * WORKLOAD_ERROR_SHARE))))
    for name, cpu, memory in DAEMON_SETS:
        text = _manifest("DaemonSet", name, "monitoring", {"tolerations": [{"operator": "Exists"}],
                         "containers": [_container(name, cpu, memory)]})
        (directory / f"ds-{name}.yaml").write_text(text, encoding="utf-8")
    kinds = ("Deployment",) * 8 + ("StatefulSet", "StatefulSet", "ReplicaSet", "Job", "Job", "CronJob", "CronJob",
                                  "Pod", "Pod", "SparkDriver", "SparkExecutor")
    for index in range(count):
        kind = rng.choice(kinds)
        shape = rng.choice(shapes)
        aimed = rng.random() >= 0.1
        pod: dict[str, Any] = {"containers": [_container("app", rng.choice(("100m", "250m", "500m", "1")),
                                                         rng.choice(("128Mi", "256Mi", "512Mi", "1Gi", "2Gi")))]}
        selector: dict[str, str] = {}
        if aimed or shape["gpu"]:
            selector["team"] = shape["labels"]["team"]
            if rng.random() < 0.5:
                selector["karpenter.sh/capacity-type"] = rng.choice(shape["capacity"])
            if shape["arch"] and rng.random() < 0.3:
                selector["kubernetes.io/arch"] = shape["arch"][0]
            if "example.com/env" in shape["labels"] and rng.random() < 0.3:
                selector["example.com/env"] = shape["labels"]["example.com/env"]
            if shape["zones"] and rng.random() < 0.2:
                pod["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "preference": {"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [shape["zones"][0]]}]}}]}}
            elif rng.random() < 0.1:
                other = "arm64" if shape["arch"] != ["arm64"] else "amd64"
                pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": [other]},
                                              {"key": "team", "operator": "In", "values": ["nobody"]}]},
                        {"matchExpressions": [{"key": "team", "operator": "Exists"}]}]}}}
            if shape["gpu"]:
                pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
                pod["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
        if rng.random() < 0.2:
            pod["initContainers"] = [_container("init", "1", "512Mi")]
            if rng.random() < 0.3:
                pod["initContainers"].append({**_container("sidecar", "50m", "64Mi"), "restartPolicy": "Always"})
        planted = WORKLOAD_PLANTED[len(result.planted) % len(WORKLOAD_PLANTED)] if index in planted_at else None
        if planted == "undefined-label":
            selector["example.com/tier"] = "gold"
        elif planted == "too-many-gpus":
            pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
            pod["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 64}
        elif planted == "too-many-cpus":
            pod["containers"][0]["resources"]["requests"]["cpu"] = "2000"
        elif planted == "gpu-not-tolerated":
            pod.pop("tolerations", None)
            pod["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
        if selector:
            pod["nodeSelector"] = selector
        name = f"{shape['labels']['team']}-app-{index:04d}"
        text = _manifest(kind, name, shape["labels"]["team"], pod)
        path = directory / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        if planted is not None:
            line = _template_line(text, kind)
            result.planted.append(Planted(planted, "workload-unschedulable", path.name, line))
    return result


def _container(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"name": name, "image": f"example.com/{name}:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}


def _manifest(kind: str, name: str, namespace: str, pod: dict[str, Any]) -> str:
    import yaml

    template = {"metadata": {"labels": {"app": name}}, "spec": pod}
    if kind in ("SparkDriver", "SparkExecutor"):  # a bare pod template file: no name, partial spec
        pod["containers"][0]["name"] = "spark-kubernetes-" + ("driver" if kind == "SparkDriver" else "executor")
        docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Pod", "spec": pod}]
    elif kind == "Pod":
        docs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": pod}]
    else:
        api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
        if kind == "Job":
            pod["restartPolicy"] = "Never"
            body: dict[str, Any] = {"template": template}
        elif kind == "CronJob":
            pod["restartPolicy"] = "OnFailure"
            body = {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}}
        else:
            body = {"selector": {"matchLabels": {"app": name}}, "template": template}
        docs = [{"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": body}]
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
                 "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}})
    return "".join("---\n" + yaml.safe_dump(d, sort_keys=False) for d in docs)


def _template_line(text: str, kind: str) -> int:
    """The line of the pod template: `template:` of a controller (the innermost, for a CronJob), `spec:` of a
    Pod."""
    lines = text.splitlines()
    wanted = "spec:" if kind in ("Pod", "SparkDriver", "SparkExecutor") else "template:"
    found = [i + 1 for i, line in enumerate(lines) if line.strip() == wanted]
    return found[-1] if wanted == "template:" else found[0]


def check_workload_report(report: dict[str, Any], corpus: Corpus, workloads: WorkloadCorpus,
                          returncode: int | None) -> list[str]:
    problems: list[str] = []
    if returncode is not None and returncode != 1:
        problems.append(f"exit code {returncode}, expected 1")
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    found = Counter((Path(f["file"]).name, f["line"], f["rule"]) for f in errors)
    missing, unexpected = _matched(found, [*corpus.planted, *workloads.planted])
    problems += missing
    shared_limits = 0
    for file, line, rule in sorted(unexpected.elements()):
        message = next(f["message"] for f in errors if (Path(f["file"]).name, f["line"]) == (file, line))
        if rule == "workload-unschedulable" and SHARED_LIMITS in message:
            shared_limits += 1  # the plan of every replica: the workloads before it used up the limits it needs
            continue
        problems.append(f"unexpected: {rule} at {file}:{line}: {message}")
    allowed = {"overlap", "shadowed", "limits", "dead-value", "multi-arch"}  # multi-arch: no arch selector (#27)
    problems += [f"unexpected warning: {w['rule']} at {Path(w['file']).name}:{w['line']}"
                 for w in report.get("findings", []) if w.get("severity") == "warning" and w["rule"] not in allowed]
    placed = report.get("workloads", [])
    if len(placed) != workloads.count:
        problems.append(f"{len(placed)} workloads placed, expected {workloads.count}")
    if sum(1 for p in placed if p["schedulable"]) != workloads.count - len(workloads.planted) - shared_limits:
        problems.append("the number of schedulable workloads is off")
    return problems


def workloads_main(args: argparse.Namespace, generated: Corpus, catalog: Any, cpu: int,
                   log: Callable[[str], None], corpus: Corpus | None = None) -> int:
    """`--workloads N`: the workloads are aimed at the `generated` Provisioners; the policies checked are `corpus`
    (default: those; with `--api v1`, their v1 twin)."""
    corpus = corpus if corpus is not None else generated
    from karpenter_policy.catalog import clear_catalog_cache
    from karpenter_policy.checks.proof.placement import check_workloads, schedule
    from karpenter_policy.checks.repository import check_paths
    from karpenter_policy.checks.source.workloads import read_workloads
    from karpenter_policy.commands.check import render_check

    workloads = generate_workloads(args.work.resolve() / "check-workloads", generated, args.workloads)
    log(f"generated {args.workloads} workloads (+{len(DAEMON_SETS)} DaemonSets) in {workloads.directory}; planted "
        f"{len(workloads.planted)} unschedulable ({', '.join(sorted({p.kind for p in workloads.planted}))})")
    argv = [str(CLI), "check", str(corpus.directory), "--workloads", str(workloads.directory), "--output", "json"]
    if args.baseline_ref:
        return baseline_main(args, argv[1:], cpu, log)
    run_pinned(argv, cpu)  # warm-up
    cli, in_process, stages = Timing(), Timing(), Stages()
    summary: dict[str, Any] = {}
    for round_ in range(1, args.repeat + 1):
        log(f"round {round_}/{args.repeat}")
        done = run_pinned(argv, cpu)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            fail("karpenter-policy check --workloads", [f"exit code {done.returncode}, not JSON"], done.stderr)
        problems = check_workload_report(report, corpus, workloads, done.returncode)
        if problems:
            fail("karpenter-policy check --workloads", problems, done.stderr)
        cli.add(done.wall, done.cpu)
        summary = {rule: sum(1 for f in report["findings"] if f["rule"] == rule)
                   for rule in ("workload-unschedulable", "overlap", "shadowed", "limits")}

        def full() -> tuple[str, int]:
            clear_catalog_cache()
            report_, checked_ = check_paths([str(corpus.directory)])
            placements_ = check_workloads(report_, checked_, [str(workloads.directory)])
            return render_check(report_, checked_, "json", placements_), report_.exit_code()

        (text, code), wall, cpu_s = pinned(cpu, full)
        problems = check_workload_report(json.loads(text), corpus, workloads, code)
        if problems:
            fail("check_paths + check_workloads (in-process)", problems)
        in_process.add(wall, cpu_s)

        _, checked = check_paths([str(corpus.directory)], catalog)
        found, wall, cpu_s = pinned(cpu, lambda: read_workloads([str(workloads.directory)]))
        stages.add(f"read workloads ({len(found.workloads)} with DaemonSets)", wall, cpu_s)
        def place(checked: Any = checked, found: Any = found) -> Any:
            return schedule(checked, found.workloads, catalog)

        _, wall, cpu_s = pinned(cpu, place)
        stages.add(f"place them ({len(checked)} {corpus.pools} × {len(catalog)} types)", wall, cpu_s)
        groups = len({w.shape for w in found.workloads if not w.is_daemon_set})
        stages.notes["schedule"] = f"{groups} distinct pod templates among {workloads.count} workloads"
    met = cli.best < WORKLOAD_GOAL_SECONDS
    if args.json:
        print(json.dumps({
            "benchmark": "check --workloads", "date": datetime.date.today().isoformat(),
            "machine": {"cores": os.cpu_count(), "pinned_cpu": cpu, "python": platform.python_version(),
                        "load_average": os.getloadavg()},
            "provisioners": args.provisioners, "workloads": args.workloads, "catalog_types": len(catalog),
            "findings": summary, "cli": _timing_json(cli), "in_process": _timing_json(in_process),
            "stages": {name: _timing_json(t) for name, t in stages.timings.items()}, "notes": stages.notes,
            "goal": {"seconds": WORKLOAD_GOAL_SECONDS, "measured_cli_best": round(cli.best, 3), "met": met},
        }, indent=2))
        return 0
    policies = "Provisioner files" if args.api == V1ALPHA5 else "NodePool files (the v1 twin, migrated)"
    print(f"check --workloads: {args.provisioners} {policies} × {args.workloads} workloads (+"
          f"{len(DAEMON_SETS)} DaemonSets) × {len(catalog)} catalog types ({catalog.region}); "
          f"{len(corpus.planted) + len(workloads.planted)} planted errors, each found at its file:line; best / "
          f"median of {args.repeat}, pinned to CPU {cpu} of {os.cpu_count()}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    header = ("measurement", "wall s best / median", "CPU s best")
    body = [
        ("full check --workloads, CLI (start-up, solver, workloads, JSON)", _pair(cli), f"{cli.cpu_best:.3f}"),
        ("full check --workloads, in-process", _pair(in_process), f"{in_process.cpu_best:.3f}"),
    ]
    body += [(f"  stage: {name}", _pair(t), f"{t.cpu_best:.3f}") for name, t in stages.timings.items()]
    print(render_table(header, body, right=frozenset({1, 2})))
    for stage, note in sorted(stages.notes.items()):
        print(f"{stage}: {note}")
    print(f"findings: {', '.join(f'{rule} {n}' for rule, n in summary.items())}")
    print(f"goal: full check of {args.provisioners} {corpus.pools} × {args.workloads} workloads < "
          f"{WORKLOAD_GOAL_SECONDS:g} s (CLI, best wall time): {'met' if met else 'not met'} ({cli.best:.3f} s; "
          f"median {cli.median:.3f} s; CPU {cli.cpu_best:.3f} s)")
    return 0


def baseline_main(args: argparse.Namespace, command: list[str], cpu: int, log: Callable[[str], None]) -> int:
    """`--baseline-ref REF`: `karpenter-policy COMMAND` through the CLI of this tree and of REF's (`git archive`,
    its sources first on the path), alternately — REF first in odd rounds, this tree first in even ones —, `--repeat`
    times each, pinned: CPU seconds (user + system of the child) and the load average after each run, and the
    SHA-256 of each output, which must be the same for both trees (a speed-up changes no byte)."""
    import hashlib

    work = args.work.resolve()
    tree = baseline_tree(args.baseline_ref, work)
    cli = [sys.executable, "-m", "karpenter_policy.cli", *command]  # both trees alike, each its sources first
    trees = {"this tree": cli, args.baseline_ref: cli}
    environments = {"this tree": {"PYTHONPATH": str(REPOSITORY)}, args.baseline_ref: {"PYTHONPATH": str(tree)}}
    for name, argv in trees.items():  # warm-up: byte code, page cache; and which sources the child imports
        run_pinned(argv, cpu, cwd=work, env=environments[name])
        where = [sys.executable, "-c", "import karpenter_policy; print(karpenter_policy.__file__)"]
        imported = run_pinned(where, cpu, cwd=work, env=environments[name]).stdout.strip()
        if not imported.startswith(environments[name]["PYTHONPATH"] + "/"):
            fail(f"the {name} run", [f"imports {imported}, not {environments[name]['PYTHONPATH']}"])
    rows: list[tuple[str, ...]] = []
    cpu_seconds: dict[str, list[float]] = {name: [] for name in trees}
    digests: dict[str, set[str]] = {name: set() for name in trees}
    for round_ in range(1, args.repeat + 1):
        order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
        for name in order:
            log(f"round {round_}/{args.repeat}: {name}")
            done = run_pinned(trees[name], cpu, cwd=work, env=environments[name])
            if done.returncode not in (0, 1):
                fail(f"karpenter-policy {' '.join(command[:1])} ({name})", [f"exit code {done.returncode}"],
                     done.stderr)
            load = os.getloadavg()[0]
            digest = hashlib.sha256(done.stdout.encode("utf-8")).hexdigest()
            digests[name].add(digest)
            cpu_seconds[name].append(done.cpu)
            rows.append((str(round_), name, f"{done.cpu:.2f}", f"{done.wall:.2f}", f"{load:.1f}", digest[:16]))
    same = len(set().union(*digests.values())) == 1
    print(f"karpenter-policy {' '.join(Path(a).name if a.startswith('/') else a for a in command)}: this tree "
          f"against {args.baseline_ref}, alternately, pinned to CPU {cpu} of {os.cpu_count()}; CPU = user + system of "
          "the child (the figure to trust on a shared machine), load average (1 min) after each run")
    print(render_table(("round", "tree", "CPU s", "wall s", "load", "SHA-256 of the output"), rows,
                       right=frozenset({2, 3, 4})))
    for name, seconds in cpu_seconds.items():
        print(f"{name}: CPU s best {min(seconds):.2f}, median {statistics.median(seconds):.2f}")
    print("outputs: byte-identical" if same else f"outputs DIFFER: {digests}")
    return 0 if same else 1


#: `--shapes`: (name, goal in seconds or None) of each shape; the files are written by `generate_shapes`.
SHAPES = (("2,000 Provisioners", 5.0), ("10,000 requirements", None), ("10,000 values", 2.0))
SHAPE_COMMANDS = ("validate", "check", "compile", "fmt")


def write_one_provisioner(directory: Path, requirements: list[dict[str, Any]]) -> Path:
    """`directory`/shape.yaml: one Provisioner with `requirements` and the AWSNodeTemplate it references."""
    import yaml

    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "metadata": {"name": "default"},
        "spec": {"subnetSelector": {"karpenter.sh/discovery": "demo"},
                 "securityGroupSelector": {"karpenter.sh/discovery": "demo"}},
    }
    provisioner = {
        "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "shape"},
        "spec": {"providerRef": {"name": "default"}, "requirements": requirements},
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "shape.yaml").write_text(yaml.safe_dump_all([provisioner, template], sort_keys=False))
    return directory


def many_requirements(count: int) -> list[dict[str, Any]]:
    """`count` requirements, each on a key of its own."""
    return [{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(count)]


def many_values(count: int) -> list[dict[str, Any]]:
    """One requirement with `count` values."""
    return [{"key": "example.com/team", "operator": "In", "values": [f"team-{i}" for i in range(count)]}]


def generate_shapes(directory: Path) -> dict[str, Path]:
    """The directories of the `SHAPES`, written below `directory`."""
    paths = {SHAPES[0][0]: generate(directory / "provisioners", 2000).directory}
    for (name, _), requirements in zip(SHAPES[1:], (many_requirements(10_000), many_values(10_000)), strict=True):
        paths[name] = write_one_provisioner(directory / name.split()[1], requirements)
    return paths


def shapes_main(args: argparse.Namespace, cpu: int, log: Callable[[str], None]) -> int:
    work: Path = args.work.resolve() / "shapes"
    paths = generate_shapes(work)
    run_pinned([str(CLI), "fmt", str(paths[SHAPES[0][0]]), "--write"], cpu)  # the pre-commit case: formatted
    rows: list[tuple[str, ...]] = []
    figures: dict[str, dict[str, float]] = {}
    for name, goal in SHAPES:
        for command in SHAPE_COMMANDS:
            argv = [str(CLI), command, str(paths[name])]
            if command == "compile":
                argv += ["-o", str(work / "out")]
            timing = Timing()
            for round_ in range(1, args.repeat + 1):
                log(f"{name}: {command} {round_}/{args.repeat}")
                done = run_pinned(argv, cpu)
                if done.returncode not in (0, 1):
                    fail(f"{command} on {name}", [f"exit code {done.returncode}"], done.stderr)
                timing.add(done.wall, done.cpu)
            met = "" if goal is None else ("met" if timing.cpu_best <= goal else "NOT met")
            figures.setdefault(name, {})[command] = round(timing.cpu_best, 3)
            rows.append((name, command, f"{timing.cpu_best:.2f}", _pair(timing),
                         f"≤ {goal:g} s {met}" if goal is not None else ""))
    if args.json:
        print(json.dumps({"benchmark": "check --shapes", "date": datetime.date.today().isoformat(),
                          "load_average": os.getloadavg(), "repeat": args.repeat, "cpu_seconds_best": figures},
                         indent=2))
        return 0
    print(f"check --shapes: CPU seconds (user + system) best of {args.repeat}, pinned to CPU {cpu}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(render_table(("shape", "command", "CPU s best", "wall s best / median", "goal"), rows,
                       right=frozenset({2, 3})))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--provisioners", type=int, default=100, help="Provisioner files to generate (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each measurement; best and median kept")
    parser.add_argument("--work", type=Path, default=BENCHMARKS_DIR / ".work", help="where the files are written")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument("--workloads", type=int, default=0, metavar="N",
                        help="generate N workloads as well and time `check --workloads` instead (goal < 5 s)")
    parser.add_argument("--api", choices=(V1ALPHA5, V1), default=V1ALPHA5,
                        help="check the corpus as v1alpha5 Provisioners (default) or as its v1 twin: NodePools and "
                        "EC2NodeClasses made by `migrate`")
    parser.add_argument("--baseline-ref", metavar="REF", default=None,
                        help="with --workloads: time the CLI of this tree and of REF (git archive) alternately, CLI "
                        "only, and check that their outputs are byte-identical")
    parser.add_argument("--shapes", action="store_true",
                        help="time 2,000 Provisioners, 10,000 requirements and 10,000 values instead")
    parser.add_argument("--migrate", action="store_true",
                        help="with --baseline-ref: time `migrate --to v1` of the corpus (every Provisioner proven "
                        "against its NodePool; the diff on stdout) through this tree's CLI and REF's")
    args = parser.parse_args(argv)
    if args.provisioners < 1 or args.repeat < 1 or args.workloads < 0:
        parser.error("--provisioners and --repeat must be at least 1, --workloads at least 0")
    if not CLI.exists():
        parser.error(f"{CLI} not found: run this with the project's venv python (.venv/bin/python)")

    def log(message: str) -> None:
        print(f"[check.py] {message}", file=sys.stderr, flush=True)

    from karpenter_policy.catalog import load_catalog

    catalog = load_catalog()
    cpu = pinned_cpu()
    if args.shapes:
        return shapes_main(args, cpu, log)
    work: Path = args.work.resolve() / "check"
    corpus = generate(work, args.provisioners)
    kinds = sorted(Counter(p.kind for p in corpus.planted).items())
    log(f"generated {args.provisioners} Provisioners in {work} (seed {SEED}); planted {len(corpus.planted)} errors "
        f"({', '.join(f'{k}: {n}' for k, n in kinds)}); catalog {catalog.region}, {len(catalog)} types; "
        f"pinned to CPU {cpu}")
    generated = corpus
    if args.api == V1:
        corpus = migrate_corpus(generated, work.parent / "check-v1")
        log(f"migrated them to v1 NodePools and EC2NodeClasses in {corpus.directory} (--node-role {NODE_ROLE})")
    if args.migrate:
        if not args.baseline_ref or args.api != V1ALPHA5:
            parser.error("--migrate needs --baseline-ref REF, and reads the v1alpha5 corpus")
        command = ["migrate", str(corpus.directory), "--to", "v1", "--node-role", NODE_ROLE]
        return baseline_main(args, command, cpu, log)
    if args.workloads:
        return workloads_main(args, generated, catalog, cpu, log, corpus)
    run_pinned([str(CLI), "check", str(corpus.directory), "--output", "json"], cpu)  # warm-up: byte code, page cache

    cli, in_process, stages = Timing(), Timing(), Stages()
    for round_ in range(1, args.repeat + 1):
        log(f"round {round_}/{args.repeat}")
        cli.add(*run_cli(corpus, args.provisioners, cpu))
        in_process.add(*run_in_process(corpus, args.provisioners, cpu))
        if args.api == V1ALPHA5:  # (the stages read Provisioners: the v1 twin is timed whole)
            run_stages(corpus, args.provisioners, cpu, stages)

    met = cli.best < GOAL_SECONDS
    rows = [(name, t) for name, t in stages.timings.items()]
    if args.json:
        print(json.dumps({
            "benchmark": "check", "date": datetime.date.today().isoformat(),
            "machine": {"cores": os.cpu_count(), "pinned_cpu": cpu, "python": platform.python_version(),
                        "platform": platform.platform(), "load_average": os.getloadavg()},
            "provisioners": args.provisioners, "catalog_types": len(catalog), "planted_errors": len(corpus.planted),
            "repeat": args.repeat,
            "cli": _timing_json(cli), "in_process": _timing_json(in_process),
            "stages": {name: _timing_json(t) for name, t in rows},
            "notes": stages.notes,
            "goal": {"seconds": GOAL_SECONDS, "measured_cli_best": round(cli.best, 3), "met": met},
        }, indent=2))
        return 0
    policies = "Provisioner files" if args.api == V1ALPHA5 else "NodePool files (the v1 twin, migrated)"
    print(f"check: {args.provisioners} {policies} × {len(catalog)} catalog types ({catalog.region}); "
          f"{len(corpus.planted)} planted solver errors, each found at its file:line; best / median of "
          f"{args.repeat}, pinned to CPU {cpu} of {os.cpu_count()}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    header = ("measurement", "wall s best / median", "CPU s best")
    body = [
        ("full check, CLI (start-up, imports, catalog, JSON)", _pair(cli), f"{cli.cpu_best:.3f}"),
        ("full check, in-process (check_paths + JSON)", _pair(in_process), f"{in_process.cpu_best:.3f}"),
    ]
    body += [(f"  stage: {name}", _pair(t), f"{t.cpu_best:.3f}") for name, t in rows]
    if not any(name.startswith("compile") for name in stages.timings):
        body.append(("  stage: compile", "n/a", "n/a"))
    print(render_table(header, body, right=frozenset({1, 2})))
    for stage, note in sorted(stages.notes.items()):
        if note:
            print(f"{stage}: {note}")
    print(f"goal: full check of {args.provisioners} {corpus.pools} < {GOAL_SECONDS:g} s (CLI, best wall time): "
          f"{'met' if met else 'not met'} ({cli.best:.3f} s; median {cli.median:.3f} s; CPU {cli.cpu_best:.3f} s)")
    return 0


def _pair(t: Timing) -> str:
    return f"{t.best:.3f} / {t.median:.3f}"


def _timing_json(t: Timing) -> dict[str, Any]:
    return {"best": round(t.best, 4), "median": round(t.median, 4), "cpu_best": round(t.cpu_best, 4),
            "runs": [round(s, 4) for s in t.wall]}


if __name__ == "__main__":
    sys.exit(main())
