"""Helpers shared by the benchmark scripts: per-core timing, a baseline tool in its own venv, a table.

Nothing here imports `karpenter_policy`: a benchmark decides itself what it measures in-process.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import venv
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BENCHMARKS_DIR = Path(__file__).resolve().parent
REPOSITORY = BENCHMARKS_DIR.parent


def pinned_cpu() -> int:
    """The core every timed run is pinned to: the lowest one this process may use."""
    return min(os.sched_getaffinity(0))


def pin_to(cpu: int | frozenset[int]) -> Callable[[], None]:
    """A `preexec_fn` that pins the child (and everything it starts) to `cpu` (or to a set of CPUs) before it runs."""
    cpus = {cpu} if isinstance(cpu, int) else set(cpu)

    def pin() -> None:
        os.sched_setaffinity(0, cpus)

    return pin


def usable_cpus() -> frozenset[int]:
    """Every CPU this process may use (a run that spreads over them: `validate --jobs auto`)."""
    return frozenset(os.sched_getaffinity(0))


@dataclass(slots=True)
class Timing:
    """Wall-clock seconds of each repetition (and the CPU seconds, user + system, each one used)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.wall)

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_best(self) -> float:
        return min(self.cpu)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)


@dataclass(frozen=True, slots=True)
class Completed:
    """One finished subprocess run: its exit code, output and timing (summed over chunks)."""

    returncode: int
    stdout: str
    stderr: str
    wall: float
    cpu: float


def child_environment() -> dict[str, str]:
    """The environment timed tools run in: this one, but with byte-code caching allowed, so that after the
    untimed warm-up run every tool starts from its `__pycache__`, as it does on a user's machine (a
    PYTHONDONTWRITEBYTECODE=1 in the environment would otherwise make each run recompile its sources)."""
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_pinned(
    argv: Sequence[str], cpu: int | frozenset[int], cwd: Path | None = None, env: dict[str, str] | None = None
) -> Completed:
    """Run `argv` pinned to `cpu` (or a set of CPUs; with `env` added to its environment), capturing its output;
    wall and CPU time (its children's included) measured around the child only."""
    cpu_before = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        list(argv), cwd=cwd, env={**child_environment(), **(env or {})}, capture_output=True, text=True,
        preexec_fn=pin_to(cpu), check=False,
    )
    wall = time.perf_counter() - start
    return Completed(done.returncode, done.stdout, done.stderr, wall, _children_cpu() - cpu_before)


def argument_budget() -> int:
    """Bytes of command line we allow ourselves: the kernel's ARG_MAX less the environment and a margin."""
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        arg_max = 128 * 1024
    environment = sum(len(k) + len(v) + 2 for k, v in os.environ.items())
    return max(16 * 1024, min(arg_max, 2 * 1024 * 1024) - environment - 64 * 1024)


def chunked(prefix: Sequence[str], arguments: Sequence[str], budget: int | None = None) -> list[list[str]]:
    """Command lines `prefix + some arguments` that together pass every argument once, each within the
    byte budget (what xargs does)."""
    limit = argument_budget() if budget is None else budget
    base = sum(len(os.fsencode(part)) + 1 for part in prefix)
    commands: list[list[str]] = []
    current: list[str] = []
    size = base
    for argument in arguments:
        cost = len(os.fsencode(argument)) + 1 + 8  # + the argv pointer
        if current and size + cost > limit:
            commands.append([*prefix, *current])
            current, size = [], base
        current.append(argument)
        size += cost
    if current or not commands:
        commands.append([*prefix, *current])
    return commands


def run_chunked(commands: Iterable[Sequence[str]], cpu: int, cwd: Path | None = None) -> Completed:
    """Run each command in turn (pinned); times are summed, the exit code is the worst one."""
    codes: list[int] = []
    out: list[str] = []
    err: list[str] = []
    wall = cpu_seconds = 0.0
    for argv in commands:
        done = run_pinned(argv, cpu, cwd)
        codes.append(done.returncode)
        out.append(done.stdout)
        err.append(done.stderr)
        wall += done.wall
        cpu_seconds += done.cpu
    return Completed(max(codes, default=0), "".join(out), "".join(err), wall, cpu_seconds)


def tool_venv(directory: Path, requirement: str, executable: str, log: Callable[[str], None]) -> Path:
    """The path of `executable` in a venv of its own at `directory`, created (and `requirement` installed
    with pip) on first use, reused afterwards."""
    binary = directory / "bin" / executable
    if binary.exists():
        return binary
    log(f"creating {directory} and installing {requirement} (first run only)")
    venv.EnvBuilder(with_pip=True, clear=True).create(directory)
    python = directory / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement], check=True,
    )
    if not binary.exists():
        sys.exit(f"{requirement} installed but {binary} is missing")
    return binary


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int]) -> str:
    """A plain-text table; columns whose index is in `right` are right-aligned."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = (
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def baseline_tree(ref: str, work: Path) -> Path:
    """This repository's tree at `ref` (`git archive`), unpacked once under `work` and reused: a baseline measured
    in the same run, with this venv's interpreter and `PYTHONPATH` set to it."""
    tree = work / f"tree-{ref}"
    if not (tree / "karpenter_policy").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(REPOSITORY), "archive", ref], capture_output=True, check=True)
        with tempfile.TemporaryFile() as handle:
            handle.write(archive.stdout)
            handle.seek(0)
            with tarfile.open(fileobj=handle) as tar:
                tar.extractall(tree, filter="data")
    return tree


#: The libraries whose versions `environment` names (the webhook's request path and the checks).
ENVIRONMENT_PACKAGES = ("cryptography", "prometheus-client", "PyYAML", "fastjsonschema", "jsonschema", "z3-solver")


def environment() -> str:
    """One line naming what a figure depends on besides the code: the interpreter (version, path, whether it was
    built with PGO/LTO), OpenSSL, the libraries of `ENVIRONMENT_PACKAGES`, the CPU model and the hypervisor. Figures
    taken on different days compare only when this line is the same."""
    flags = str(sysconfig.get_config_var("CONFIG_ARGS") or "")
    build = ", ".join(
        name
        for name, flag in (("PGO", "--enable-optimizations"), ("LTO", "--with-lto"), ("shared", "--enable-shared"))
        if flag in flags
    )
    versions = []
    for package in ENVIRONMENT_PACKAGES:
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} absent")
    model = hypervisor = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "?":
                model = value.strip()
            if key.strip() == "flags":
                hypervisor = "virtual machine" if " hypervisor" in value else "bare metal"
    return (
        f"Python {platform.python_version()} ({sys.executable} → {Path(sys.executable).resolve()}; built with "
        f"{build or 'no PGO, no LTO'}); {ssl.OPENSSL_VERSION}; {'; '.join(versions)}; CPU {model} ({hypervisor}, "
        f"{os.cpu_count()} cores)"
    )
