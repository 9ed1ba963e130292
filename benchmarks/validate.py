"""Documents/second of `karpenter-policy validate` next to `check-jsonschema`, on one core; and, with
`--startup`, the tool's own start-up time on one file next to an earlier revision's.

    .venv/bin/python benchmarks/validate.py [--kind provisioner|nodepool] [--documents 5000] [--repeat 3]
                                            [--work DIR] [--json]
    .venv/bin/python benchmarks/validate.py --startup [--baseline-ref main] [--repeat 20]

Generates N varied Provisioner files (one document each, fixed seed; ~2% carry a deliberate Karpenter-rule
error) — or, with `--kind nodepool`, Karpenter v1 NodePool files (`_nodepools.py`; ~2% refused by the v1.14.1 CRD's
schema or CEL rules) —, then times, `--repeat` times each (best and median):
  (a) `karpenter-policy validate DIR --output json`, one subprocess: what a user runs, start-up included;
      its exit code, error count and each error's file:line are checked against what was planted;
  (b) the same work in-process (`validate_paths` + the JSON report), to show the start-up share;
  (a') with more than one usable CPU, (a) again with `--jobs auto`, not pinned: the files in worker processes on
      every usable CPU, its wall and its CPU time (all processes) side by side;
  (c) `check-jsonschema --schemafile schemas/provisioner.v1alpha5.json FILES...` from its own venv
      (`benchmarks/.venv-check-jsonschema`), schema only: it knows none of Karpenter's rules (for NodePools: the
      NodePool CRD's openAPIV3Schema, without its CEL rules, which check-jsonschema cannot run).
Every other timed process is pinned to one core. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    BENCHMARKS_DIR,
    REPOSITORY,
    Completed,
    Timing,
    chunked,
    pinned_cpu,
    render_table,
    run_chunked,
    run_pinned,
    tool_venv,
    usable_cpus,
)
from _nodepools import PLANTED_KINDS as NODEPOOL_PLANTED_KINDS
from _nodepools import nodepool_schema_file, render_nodepool

SEED = 20261122
ERROR_SHARE = 0.02
GOAL_RATIO = 8.0
SCHEMA = REPOSITORY / "schemas" / "provisioner.v1alpha5.json"
CHECK_JSONSCHEMA_VENV = BENCHMARKS_DIR / ".venv-check-jsonschema"
CLI = Path(sys.executable).parent / "karpenter-policy"

# ---------------------------------------------------------------------------------------------------------
# The documents
# ---------------------------------------------------------------------------------------------------------

TEAMS = (
    "payments", "search", "checkout", "ml-platform", "data-eng", "ads", "identity", "observability",
    "mobile-api", "recsys", "fraud", "billing", "growth", "platform", "streaming", "analytics",
)
PURPOSES = ("default", "batch", "spark", "gpu", "arm64", "spot", "web", "ci", "stateful", "inference")
AMD64_FAMILIES = (
    "c5", "c5a", "c5n", "c6i", "c6a", "c7i", "m5", "m5a", "m5n", "m6i", "m6a", "m7i", "r5", "r5a", "r6i",
    "r6a", "r7i", "t3", "i3", "i4i", "x2idn", "z1d",
)
ARM64_FAMILIES = ("c6g", "c6gn", "c7g", "m6g", "m7g", "r6g", "r7g", "t4g", "im4gn", "x2gd")
GPU_FAMILIES = ("g4dn", "g5", "p3", "p4d")
SIZES = ("medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
ZONES = tuple(f"us-east-1{z}" for z in "abcdef")
INSTANCE_TYPES = ("m5.large", "m5.xlarge", "m6i.2xlarge", "c6i.4xlarge", "r6i.2xlarge", "c5.9xlarge")
CLUSTERS = ("prod-use1", "staging-use1", "shared-use1")

#: Deliberate errors: each yields exactly one finding of severity error, at a line the generator records.
PLANTED_KINDS = (
    ("restricted-label", "restricted-label"),  # a node label in a reserved domain
    ("bad-operator", "invalid-requirement"),  # operator Equals
    ("provisioner-name", "restricted-label"),  # a requirement on karpenter.sh/provisioner-name
    ("empty-in", "invalid-requirement"),  # In with no values
    ("gt-not-integer", "invalid-requirement"),  # Gt five
    ("ttl-and-consolidation", "invalid-spec"),  # ttlSecondsAfterEmpty next to consolidation.enabled
)
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"})


def scalar(value: str | int | bool) -> str:
    """A YAML scalar: plain when that reads back as the same string, double-quoted otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    plain = value[:1].isalpha() and value.lower() not in _YAML_WORDS and all(c.isalnum() or c in "-._/" for c in value)
    return value if plain else json.dumps(value)


def flow(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


@dataclass(slots=True)
class Planted:
    """An error written on purpose: the rule expected and where (file name, 1-based line)."""

    kind: str
    rule: str
    file: str
    line: int


@dataclass(slots=True)
class Corpus:
    directory: Path
    files: list[Path]
    planted: list[Planted] = field(default_factory=list)
    expected_warnings: int = 0
    schema: Path = SCHEMA  # what check-jsonschema validates against


class _Writer:
    """Collects the lines of one file and knows the number of the next one."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _requirements(rng: random.Random, purpose: str, arch: str) -> list[tuple[str, str, list[str]]]:
    """Varied, valid requirements (key, operator, values) for one provisioner."""
    found: list[tuple[str, str, list[str]]] = []
    if rng.random() < 0.9:
        capacity = rng.choice((["spot"], ["on-demand"], ["spot", "on-demand"]))
        found.append(("karpenter.sh/capacity-type", "In", ["spot"] if purpose in ("spot", "spark") else capacity))
    if rng.random() < 0.85 or purpose == "arm64":
        found.append(("kubernetes.io/arch", "In", ["amd64", "arm64"] if arch == "both" else [arch]))
    families = {"arm64": ARM64_FAMILIES, "amd64": AMD64_FAMILIES}.get(arch, ARM64_FAMILIES + AMD64_FAMILIES)
    shape = rng.random()
    if purpose == "gpu":
        found.append(("karpenter.k8s.aws/instance-family", "In", sorted(rng.sample(GPU_FAMILIES, rng.randint(1, 3)))))
        found.append(("karpenter.k8s.aws/instance-gpu-count", "Gt", ["0"]))
    elif shape < 0.4:
        found.append(("karpenter.k8s.aws/instance-family", "In", sorted(rng.sample(families, rng.randint(2, 7)))))
    elif shape < 0.75:
        categories = sorted(rng.sample(("c", "m", "r", "i", "t"), rng.randint(1, 3)))
        found.append(("karpenter.k8s.aws/instance-category", "In", categories))
        found.append(("karpenter.k8s.aws/instance-generation", "Gt", [str(rng.randint(2, 6))]))
    elif shape < 0.85:
        found.append(("node.kubernetes.io/instance-type", "In", sorted(rng.sample(INSTANCE_TYPES, rng.randint(1, 4)))))
    if rng.random() < 0.5:
        if rng.random() < 0.5:
            found.append(("karpenter.k8s.aws/instance-size", "In", rng.sample(SIZES, rng.randint(2, 5))))
        else:
            found.append(("karpenter.k8s.aws/instance-size", "NotIn", ["nano", "micro", "small", "metal"]))
    if rng.random() < 0.7:
        found.append(("topology.kubernetes.io/zone", "In", sorted(rng.sample(ZONES, rng.randint(2, 4)))))
    if rng.random() < 0.2:
        found.append(("karpenter.k8s.aws/instance-cpu", "Lt", [str(rng.choice((17, 33, 65, 97)))]))
    if rng.random() < 0.1:
        found.append(("karpenter.k8s.aws/instance-memory", "Gt", [str(rng.choice((4095, 8191, 16383)))]))
    if rng.random() < 0.15:
        found.append(("example.com/pool", rng.choice(("Exists", "In")), []))
    rng.shuffle(found)
    return [(k, op, ["general"] if k == "example.com/pool" and op == "In" else v) for k, op, v in found]


def render_provisioner(rng: random.Random, index: int, planted_kind: str | None) -> tuple[str, str, int, int]:
    """One Provisioner file: (name, text, line of the planted error or 0, warnings it should raise)."""
    team, purpose = rng.choice(TEAMS), rng.choice(PURPOSES)
    name = f"{team}-{purpose}-{index:05d}"
    arch = {"arm64": "arm64", "gpu": "amd64"}.get(purpose) or rng.choice(("amd64", "amd64", "arm64", "both"))
    requirements = _requirements(rng, purpose, arch)
    warnings = 0
    error_line = 0
    out = _Writer()

    out.add(f"# {purpose} capacity for the {team} team (generated by benchmarks/validate.py, seed {SEED})")
    out.add("apiVersion: karpenter.sh/v1alpha5")
    out.add("kind: Provisioner")
    out.add("metadata:")
    out.add(f"  name: {name}")
    if rng.random() < 0.3:
        out.add("  annotations:")
        out.add(f'    karpenter-policy/version: "2026.11.{rng.randint(0, 30)}"')
    if rng.random() < 0.2:
        out.add("  labels:")
        out.add(f"    app.kubernetes.io/managed-by: {rng.choice(('argocd', 'flux', 'helm'))}")
    out.add("spec:")
    if rng.random() < 0.6:
        out.add(f"  weight: {rng.randint(1, 100)}")

    labels = {"team": team} if rng.random() < 0.7 else {}
    if labels and rng.random() < 0.5:
        labels["example.com/cost-center"] = f"cc-{rng.randint(1000, 9999)}"
    if labels and rng.random() < 0.4:
        labels["env"] = rng.choice(("prod", "staging", "dev"))
    if labels or planted_kind == "restricted-label":
        out.add("  labels:")
        for key, value in labels.items():
            out.add(f"    {key}: {scalar(value)}")
        if planted_kind == "restricted-label":
            error_line = out.add(f"    {rng.choice(('kubernetes.io', 'karpenter.sh', 'k8s.io'))}/team: {scalar(team)}")

    taints: list[tuple[str, str, str]] = []
    if purpose == "gpu":
        taints.append(("nvidia.com/gpu", "true", "NoSchedule"))
    if purpose in ("batch", "spark") or rng.random() < 0.2:
        taints.append(("dedicated", team, rng.choice(("NoSchedule", "NoSchedule", "PreferNoSchedule"))))
    if taints:
        out.add("  taints:")
        for key, value, effect in taints:
            out.add(f"    - key: {key}")
            out.add(f"      value: {scalar(value)}")
            out.add(f"      effect: {effect}")
    if rng.random() < 0.1:
        out.add("  startupTaints:")
        out.add("    - key: node.cilium.io/agent-not-ready")
        out.add('      value: "true"')
        out.add("      effect: NoExecute")

    if requirements or planted_kind in ("bad-operator", "provisioner-name", "empty-in", "gt-not-integer"):
        out.add("  requirements:")  # none at all is valid: Karpenter's defaults apply
    bad = rng.randrange(len(requirements)) if planted_kind == "bad-operator" and requirements else None
    if planted_kind == "bad-operator" and bad is None:
        requirements = [("kubernetes.io/os", "In", ["linux"])]
        bad = 0
    for position, (key, operator, values) in enumerate(requirements):
        if key == "topology.kubernetes.io/zone" and rng.random() < 0.05:
            key = "failure-domain.beta.kubernetes.io/zone"  # deprecated: a warning, read as the GA key
            warnings += 1
        out.add(f"    - key: {key}")
        line = out.add(f"      operator: {'Equals' if position == bad else operator}")
        if position == bad:
            error_line = line
        if values:
            out.add(f"      values: {flow(values)}")
    if planted_kind == "provisioner-name":
        error_line = out.add("    - key: karpenter.sh/provisioner-name")
        out.add("      operator: In")
        out.add(f"      values: {flow([name])}")
    elif planted_kind == "empty-in":
        error_line = out.add("    - key: example.com/pool")
        out.add("      operator: In")
        out.add("      values: []")
    elif planted_kind == "gt-not-integer":
        out.add("    - key: karpenter.k8s.aws/instance-generation")
        out.add("      operator: Gt")
        error_line = out.add('      values: ["five"]')

    if purpose == "gpu" or rng.random() < 0.8:
        out.add("  limits:")
        out.add("    resources:")
        out.add(f"      cpu: {rng.choice(('1000', '2k', '500', '4000'))}")
        out.add(f"      memory: {rng.choice(('1000Gi', '4000Gi', '16Ti'))}")
        if purpose == "gpu":
            out.add(f"      nvidia.com/gpu: {rng.choice((8, 16, 64))}")

    lifecycle = rng.random()
    if planted_kind == "ttl-and-consolidation":
        out.add("  consolidation:")
        out.add("    enabled: true")
        error_line = out.add(f"  ttlSecondsAfterEmpty: {rng.choice((30, 60, 300))}")
    elif lifecycle < 0.5:
        out.add("  consolidation:")
        out.add("    enabled: true")
    elif lifecycle < 0.85:
        out.add(f"  ttlSecondsAfterEmpty: {rng.choice((30, 60, 120, 300))}")
    if rng.random() < 0.5:
        out.add(f"  ttlSecondsUntilExpired: {rng.choice((604800, 1209600, 2592000))}")

    if rng.random() < 0.2:
        out.add("  kubeletConfiguration:")
        out.add(f"    maxPods: {rng.choice((58, 110, 234))}")
        out.add("    systemReserved:")
        out.add("      cpu: 100m")
        out.add("      memory: 100Mi")
        out.add("    evictionHard:")
        out.add('      memory.available: "5%"')

    cluster = rng.choice(CLUSTERS)
    if rng.random() < 0.65:
        out.add("  providerRef:")
        out.add(f"    name: {rng.choice(('default', team, f'{team}-{purpose}'))}")
        warnings += 1  # unresolved-reference: no AWSNodeTemplate among the checked files
    else:
        out.add("  provider:  # inline launch settings (deprecated in favour of providerRef, still valid)")
        out.add("    subnetSelector:")
        out.add(f"      karpenter.sh/discovery: {cluster}")
        out.add("    securityGroupSelector:")
        if rng.random() < 0.2:
            out.add(f'      aws-ids: "sg-0{rng.getrandbits(64):016x}"')  # EC2's shape: sg- and 17 hex digits
        else:
            out.add(f"      karpenter.sh/discovery: {cluster}")
        if rng.random() < 0.5:
            out.add(f"    amiFamily: {rng.choice(('AL2', 'Bottlerocket', 'Ubuntu'))}")
        if rng.random() < 0.4:
            out.add(f"    instanceProfile: KarpenterNodeInstanceProfile-{cluster}")
        if rng.random() < 0.5:
            out.add("    tags:")
            out.add(f"      team: {team}")
            out.add(f"      cost-center: {scalar(f'cc-{rng.randint(1000, 9999)}')}")
        if rng.random() < 0.3:
            out.add("    metadataOptions:")
            out.add("      httpEndpoint: enabled")
            out.add("      httpPutResponseHopLimit: 2")
            out.add("      httpTokens: required")
        if rng.random() < 0.3:
            out.add("    blockDeviceMappings:")
            out.add("      - deviceName: /dev/xvda")
            out.add("        ebs:")
            out.add(f"          volumeSize: {rng.choice(('20Gi', '50Gi', '100Gi'))}")
            out.add("          volumeType: gp3")
            out.add("          encrypted: true")
    if planted_kind is not None and not error_line:
        raise AssertionError(f"planted {planted_kind} in {name} but recorded no line")
    return name, out.text(), error_line, warnings


def generate(directory: Path, documents: int, seed: int = SEED, kind: str = "provisioner") -> Corpus:
    """Write `documents` Provisioner (or NodePool) files into `directory` (emptied of earlier .yaml files first)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    rng = random.Random(seed)
    count = max(1, round(documents * ERROR_SHARE)) if documents else 0
    chosen = rng.sample(range(documents), count)
    planted_kinds = NODEPOOL_PLANTED_KINDS if kind == "nodepool" else PLANTED_KINDS
    kinds = {index: planted_kinds[n % len(planted_kinds)] for n, index in enumerate(chosen)}
    corpus = Corpus(directory, [], schema=SCHEMA)
    if kind == "nodepool":
        corpus.schema = nodepool_schema_file(directory.parent)
    for index in range(documents):
        planted = kinds.get(index)
        if kind == "nodepool":  # each refers to an EC2NodeClass not among the files: one unresolved-reference
            name, text, line = render_nodepool(rng, index, planted[0] if planted else None)
            warnings = 1
        else:
            name, text, line, warnings = render_provisioner(rng, index, planted[0] if planted else None)
        path = directory / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        corpus.files.append(path)
        corpus.expected_warnings += warnings
        if planted is not None:
            corpus.planted.append(Planted(planted[0], planted[1], path.name, line))
    return corpus


# ---------------------------------------------------------------------------------------------------------
# Checking and timing
# ---------------------------------------------------------------------------------------------------------


def check_report(report: dict[str, Any], corpus: Corpus, returncode: int | None) -> list[str]:
    """Why a karpenter-policy JSON report disagrees with what was generated (empty when it agrees)."""
    problems: list[str] = []
    expected_code = 1 if corpus.planted else 0
    if returncode is not None and returncode != expected_code:
        problems.append(f"exit code {returncode}, expected {expected_code}")
    summary = report.get("summary", {})
    if summary.get("objects") != len(corpus.files) or summary.get("files") != len(corpus.files):
        problems.append(
            f"checked {summary.get('objects')} objects in {summary.get('files')} files, "
            f"expected {len(corpus.files)}"
        )
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    if len(errors) != len(corpus.planted) or summary.get("errors") != len(corpus.planted):
        problems.append(
            f"{len(errors)} error findings (summary: {summary.get('errors')}), planted {len(corpus.planted)}"
        )
    found = Counter((Path(f["file"]).name, f.get("line"), f["rule"]) for f in errors)
    wanted = Counter((p.file, p.line, p.rule) for p in corpus.planted)
    for file, line, rule in sorted((wanted - found).elements()):
        problems.append(f"missing: {rule} at {file}:{line}")
    for file, line, rule in sorted((found - wanted).elements()):
        problems.append(f"unexpected: {rule} at {file}:{line}")
    if summary.get("warnings") != corpus.expected_warnings:
        problems.append(f"{summary.get('warnings')} warnings, expected {corpus.expected_warnings}")
    return problems


def fail(tool: str, problems: list[str], done: Completed | None = None) -> None:
    print(f"validate.py: {tool} did not do the expected work:", file=sys.stderr)
    for problem in problems[:20]:
        print(f"  {problem}", file=sys.stderr)
    if done is not None and done.stderr:
        print(f"  stderr: {done.stderr[:2000]}", file=sys.stderr)
    sys.exit(1)


def run_cli(corpus: Corpus, cpu: int | frozenset[int], *jobs: str) -> Completed:
    done = run_pinned([str(CLI), "validate", str(corpus.directory), "--output", "json", *jobs], cpu)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        fail("karpenter-policy validate", [f"exit code {done.returncode}, output is not JSON"], done)
    problems = check_report(report, corpus, done.returncode)
    if problems:
        fail("karpenter-policy validate", problems, done)
    return done


def run_in_process(corpus: Corpus, cpu: int) -> tuple[float, float]:
    """validate_paths + the JSON report in this process (pinned to `cpu` meanwhile): (wall, cpu) seconds."""
    from karpenter_policy.checks.reporters import render
    from karpenter_policy.checks.validation.policies import validate_paths

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        cpu_start, start = time.process_time(), time.perf_counter()
        report = validate_paths([str(corpus.directory)])
        text = render(report, "json")
        wall, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        os.sched_setaffinity(0, allowed)
    problems = check_report(json.loads(text), corpus, report.exit_code())
    if problems:
        fail("validate_paths (in-process)", problems)
    return wall, cpu_seconds


def check_jsonschema_commands(binary: Path, corpus: Corpus) -> list[list[str]]:
    """check-jsonschema over every file, as few command lines as fit (paths relative to the corpus dir)."""
    prefix = [str(binary), "--schemafile", str(corpus.schema)]
    return chunked(prefix, [path.name for path in corpus.files])


def run_check_jsonschema(commands: list[list[str]], corpus: Corpus, cpu: int) -> Completed:
    done = run_chunked(commands, cpu, cwd=corpus.directory)
    schema_errors = any(p.rule == "schema" for p in corpus.planted)  # a NodePool's bad duration: the schema's own
    if done.returncode != (1 if schema_errors else 0):  # the other planted errors are rules a schema cannot see
        fail("check-jsonschema", [f"exit code {done.returncode}: {done.stdout[-2000:]}"], done)
    return done


# ---------------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    tool: str
    version: str
    note: str
    documents: int
    timing: Timing

    def rate(self, seconds: float) -> float:
        return self.documents / seconds if seconds > 0 else float("inf")

    def ratios(self, baseline: Row) -> dict[str, float]:
        """Documents/second relative to `baseline`: wall best, wall median, CPU best."""
        return {
            "best": self.rate(self.timing.best) / baseline.rate(baseline.timing.best),
            "median": self.rate(self.timing.median) / baseline.rate(baseline.timing.median),
            "cpu_best": self.rate(self.timing.cpu_best) / baseline.rate(baseline.timing.cpu_best),
        }

    def to_json(self, baseline: Row) -> dict[str, Any]:
        t = self.timing
        return {
            "tool": self.tool, "version": self.version, "note": self.note, "documents": self.documents,
            "seconds": {"best": round(t.best, 4), "median": round(t.median, 4), "runs": [round(s, 4) for s in t.wall]},
            "cpu_seconds": {"best": round(t.cpu_best, 4), "median": round(t.cpu_median, 4),
                            "runs": [round(s, 4) for s in t.cpu]},
            "documents_per_second": {"best": round(self.rate(t.best), 1), "median": round(self.rate(t.median), 1),
                                     "cpu_best": round(self.rate(t.cpu_best), 1)},
            "ratio_vs_check_jsonschema": {k: round(v, 2) for k, v in self.ratios(baseline).items()},
        }


def table(rows: list[Row], baseline: Row) -> str:
    header = (
        "tool", "docs", "wall s best / median", "docs/s best / median", "× check-jsonschema", "CPU s best",
        "× (CPU)",
    )
    body = []
    for row in rows:
        t, ratios = row.timing, row.ratios(baseline)
        body.append((
            row.tool, str(row.documents), f"{t.best:.3f} / {t.median:.3f}",
            f"{row.rate(t.best):,.0f} / {row.rate(t.median):,.0f}", f"{ratios['best']:.2f} / {ratios['median']:.2f}",
            f"{t.cpu_best:.3f}", f"{ratios['cpu_best']:.2f}",
        ))
    return render_table(header, body, right=frozenset(range(1, len(header))))


# ---------------------------------------------------------------------------------------------------------
# Start-up: validate on one file (a pre-commit hook's run)
# ---------------------------------------------------------------------------------------------------------

#: Runs the CLI of the source tree given as the first argument (not the venv's editable install).
LAUNCH = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'karpenter-policy'; "
    "from karpenter_policy.cli import main; main()"
)
STARTUP_CASES = (
    ("validate policies/default.yaml", ["validate", "policies/default.yaml"]),
    ("validate policies/ (the pre-commit hook)", ["validate", "policies/"]),
)


def export_revision(ref: str, into: Path) -> Path:
    """The `karpenter_policy` package of git revision `ref`, unpacked under `into` (nothing checked out)."""
    archive = subprocess.run(["git", "archive", ref, "karpenter_policy"], cwd=REPOSITORY, capture_output=True,
                             check=False)
    if archive.returncode != 0:
        sys.exit(f"validate.py: git archive {ref}: {archive.stderr.decode(errors='replace').strip()}")
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def startup(args: argparse.Namespace) -> int:
    """Wall time of `validate` on one file and on policies/, per variant, minus the bare interpreter's: the tool's
    own time. Variants: the baseline revision, this tree with the validator cache off, this tree with it warm."""
    cpu = pinned_cpu()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="karpenter-policy-startup-") as scratch:
        base = export_revision(args.baseline_ref, Path(scratch) / "baseline")
        cache = Path(scratch) / "cache"
        variants = [
            (f"{args.baseline_ref} (before)", str(base), {}),
            ("this tree, validator cache off", str(REPOSITORY), {"KARPENTER_POLICY_CACHE_DIR": ""}),
            ("this tree, validator cache warm", str(REPOSITORY), {"KARPENTER_POLICY_CACHE_DIR": str(cache)}),
        ]
        interpreter = Timing()
        timings = {(name, case): Timing() for name, _, _ in variants for case, _ in STARTUP_CASES}
        outputs: dict[tuple[str, str], tuple[int, str]] = {}
        for _, source, env in variants:  # warm-up: byte code, page cache, the validator cache
            for _, command in STARTUP_CASES:
                run_pinned([python, "-c", LAUNCH, source, *command], cpu, REPOSITORY, env)
        for _ in range(args.repeat):
            done = run_pinned([python, "-c", "import sys"], cpu, REPOSITORY)
            interpreter.add(done.wall, done.cpu)
            for name, source, env in variants:
                for case, command in STARTUP_CASES:
                    done = run_pinned([python, "-c", LAUNCH, source, *command], cpu, REPOSITORY, env)
                    timings[(name, case)].add(done.wall, done.cpu)
                    outputs.setdefault((name, case), (done.returncode, done.stdout))
        for case, _ in STARTUP_CASES:
            codes = {outputs[(name, case)][0] for name, _, _ in variants}
            if codes != {0}:
                fail("validate (start-up)", [f"{case}: exit codes {sorted(codes)}"])
    rows = []
    for case, _ in STARTUP_CASES:
        for name, _, _ in variants:
            t = timings[(name, case)]
            rows.append((case, name, f"{t.best * 1000:.0f} / {t.median * 1000:.0f}",
                         f"{(t.best - interpreter.best) * 1000:.0f}", f"{t.cpu_best * 1000:.0f}"))
    print(f"start-up: best / median of {args.repeat}, pinned to CPU {cpu} of {os.cpu_count()}; the bare interpreter "
          f"(python -c 'import sys', site and the venv's path hooks included): {interpreter.best * 1000:.0f} ms best; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(render_table(("command", "karpenter-policy", "wall ms best / median", "own ms (best − interpreter)",
                        "CPU ms best"), rows, right=frozenset({2, 3, 4})))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--documents", type=int, default=5000, help="files to generate (default 5000)")
    parser.add_argument("--kind", choices=("provisioner", "nodepool"), default="provisioner",
                        help="v1alpha5 Provisioners (default) or Karpenter v1 NodePools")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs of each tool (default 3; --startup 20)")
    parser.add_argument("--work", type=Path, default=BENCHMARKS_DIR / ".work", help="where the files are written")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument("--startup", action="store_true", help="time validate on one file instead (start-up)")
    parser.add_argument("--baseline-ref", default="main", help="--startup: the git revision to compare with")
    args = parser.parse_args(argv)
    if args.startup:
        args.repeat = args.repeat or 20
        if args.repeat < 1:
            parser.error("--repeat must be at least 1")
        return startup(args)
    args.repeat = args.repeat or 3
    if args.documents < 1 or args.repeat < 1:
        parser.error("--documents and --repeat must be at least 1")

    def log(message: str) -> None:
        print(f"[validate.py] {message}", file=sys.stderr, flush=True)

    if not CLI.exists():
        parser.error(f"{CLI} not found: run this with the project's venv python (.venv/bin/python)")
    cpu = pinned_cpu()
    work: Path = args.work.resolve()
    folder = "provisioners" if args.kind == "provisioner" else "nodepools"
    log(f"generating {args.documents} {args.kind} files in {work / folder} (seed {SEED})")
    corpus = generate(work / folder, args.documents, kind=args.kind)
    kinds = sorted(Counter(p.kind for p in corpus.planted).items())
    log(f"planted {len(corpus.planted)} errors ({', '.join(f'{k}: {n}' for k, n in kinds)}); "
        f"expecting {corpus.expected_warnings} warnings")

    binary = tool_venv(CHECK_JSONSCHEMA_VENV, "check-jsonschema", "check-jsonschema", log)
    baseline_version = run_pinned([str(binary), "--version"], cpu).stdout.strip().split()[-1]
    # "karpenter-policy, version V (what the build is)": the word after "version"
    own_words = run_pinned([str(CLI), "--version"], cpu).stdout.split()
    own_version = own_words[own_words.index("version") + 1] if "version" in own_words[:-1] else " ".join(own_words)
    commands = check_jsonschema_commands(binary, corpus)
    log(f"check-jsonschema {baseline_version} ({len(commands)} command line(s)); karpenter-policy {own_version}; "
        f"pinned to CPU {cpu}")

    # Warm-up (not timed): byte-code caches, page cache.
    empty = work / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    run_pinned([str(CLI), "validate", str(empty), "--output", "json"], cpu)
    run_pinned([*commands[0][:3], *commands[0][3:13]], cpu, cwd=corpus.directory)

    load_before = os.getloadavg()[0]  # other work on the machine shows in wall times, less in CPU times
    cli, in_process, baseline, fixed, spread = Timing(), Timing(), Timing(), Timing(), Timing()
    cpus = usable_cpus()
    for round_ in range(1, args.repeat + 1):
        log(f"round {round_}/{args.repeat}: karpenter-policy validate (subprocess)")
        done = run_cli(corpus, cpu, "--jobs", "1")
        cli.add(done.wall, done.cpu)
        if len(cpus) > 1:
            log(f"round {round_}/{args.repeat}: karpenter-policy validate --jobs auto on {len(cpus)} CPUs")
            done = run_cli(corpus, cpus, "--jobs", "auto")
            spread.add(done.wall, done.cpu)
        log(f"round {round_}/{args.repeat}: validate_paths (in-process)")
        in_process.add(*run_in_process(corpus, cpu))
        log(f"round {round_}/{args.repeat}: check-jsonschema")
        done = run_check_jsonschema(commands, corpus, cpu)
        baseline.add(done.wall, done.cpu)
        done = run_pinned([str(CLI), "validate", str(empty), "--output", "json"], cpu)
        fixed.add(done.wall, done.cpu)

    n = args.documents
    rows = [
        Row("karpenter-policy validate (CLI)", own_version, "schema + Karpenter rules, findings at file:line", n, cli),
        Row("karpenter-policy, in-process", own_version, "validate_paths + JSON report, no start-up", n, in_process),
        Row(f"check-jsonschema {baseline_version}", baseline_version, "schema only", n, baseline),
    ]
    if spread.wall:
        rows.append(Row(f"karpenter-policy validate --jobs auto ({len(cpus)} CPUs)", own_version,
                        "the same, files in worker processes; CPU s: all processes", n, spread))
    ratios = rows[0].ratios(rows[2])
    met = ratios["best"] >= GOAL_RATIO
    spread_ratios = rows[3].ratios(rows[2]) if spread.wall else None
    startup_share = (cli.best - in_process.best) / cli.best
    sizes = [path.stat().st_size for path in corpus.files]
    lines = sum(path.read_bytes().count(b"\n") for path in corpus.files) / n
    if args.json:
        print(json.dumps({
            "benchmark": "validate", "kind": args.kind, "date": datetime.date.today().isoformat(),
            "machine": {"cores": os.cpu_count(), "pinned_cpu": cpu, "python": platform.python_version(),
                        "platform": platform.platform(),
                        "load_average": {"before": load_before, "after": os.getloadavg()[0]}},
            "documents": n, "mean_file_bytes": round(sum(sizes) / n), "mean_file_lines": round(lines, 1),
            "planted_errors": len(corpus.planted), "expected_warnings": corpus.expected_warnings,
            "repeat": args.repeat,
            "tools": [row.to_json(rows[2]) for row in rows],
            "cli_fixed_cost_seconds": {"best": round(fixed.best, 4), "median": round(fixed.median, 4)},
            "startup_share_of_cli": round(startup_share, 3),
            "goal": {"ratio": GOAL_RATIO, "measured": {k: round(v, 2) for k, v in ratios.items()}, "met": met},
            "goal_with_jobs_auto": None if spread_ratios is None else {
                "cpus": len(cpus), "measured": {k: round(v, 2) for k, v in spread_ratios.items()},
                "met_wall": spread_ratios["best"] >= GOAL_RATIO, "met_cpu": spread_ratios["cpu_best"] >= GOAL_RATIO,
            },
        }, indent=2))
        return 0
    print(f"validate: {n} {args.kind} files (mean {lines:.0f} lines, {sum(sizes) / n / 1024:.1f} KiB; "
          f"{len(corpus.planted)} with a planted error, each found at its file:line), "
          f"best / median of {args.repeat}, pinned to CPU {cpu} of {os.cpu_count()}; load average before / after: "
          f"{load_before:.2f} / {os.getloadavg()[0]:.2f}")
    print(table(rows, rows[2]))
    print(f"start-up: the CLI on an empty directory takes {fixed.best:.3f} s (best); CLI minus in-process (best): "
          f"{cli.best - in_process.best:+.3f} s, {startup_share:+.0%} of the CLI's time")
    print("check-jsonschema checks the schema only; karpenter-policy also applies Karpenter's validation rules "
          "and places each finding at file:line")
    print(f"goal ≥ {GOAL_RATIO:g}× check-jsonschema (CLI, one process, best wall time): {'met' if met else 'not met'} "
          f"({ratios['best']:.2f}×; median {ratios['median']:.2f}×; CPU time {ratios['cpu_best']:.2f}×)")
    if spread_ratios is not None:
        print(f"with --jobs auto on {len(cpus)} CPUs (check-jsonschema has no such option: it stays on one): "
              f"wall {spread_ratios['best']:.2f}× (median {spread_ratios['median']:.2f}×), "
              f"CPU time {spread_ratios['cpu_best']:.2f}× — goal in wall time "
              f"{'met' if spread_ratios['best'] >= GOAL_RATIO else 'not met'}, in CPU time "
              f"{'met' if spread_ratios['cpu_best'] >= GOAL_RATIO else 'not met'}; wall times need idle CPUs: "
              f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
