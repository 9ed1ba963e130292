"""`validate --jobs N`: files checked in worker processes give the report one process gives, byte for byte in every
format; `auto` starts workers only for many files; a worker's failure or death is an internal error naming the
file, never a hang; Ctrl-C ends the run and its workers (`checks/validation/workers.py`, docs/cli.md "Files in
parallel")."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from kube.support import GENEROUS, eventually
from profiles import deterministic
from pytest import MonkeyPatch

from karpenter_policy.checks.jobs import AUTO_THRESHOLD, WorkerFailed, jobs_for, read_jobs, usable_cpus
from karpenter_policy.checks.reporters import render
from karpenter_policy.checks.validation import policies
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.cli import main

REPOSITORY = Path(__file__).resolve().parents[3]
FORMATS = ("text", "json", "sarif", "github", "junit")
#: Every example file of validate and of the v1 objects: valid, refused by a rule, by the schema, by CEL.
EXAMPLES = sorted(
    path
    for folder in ("examples/positive", "examples/negative", "examples/v1/positive", "examples/v1/negative")
    for path in (REPOSITORY / folder).glob("*.yaml")
)
#: Texts no example has: YAML that does not parse, YAML that is no Kubernetes object, a kind that is skipped, a
#: directive silencing the warning on its line, two documents in one file.
EXTRA = {
    "broken": "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: [\n",
    "values": "replicas: 3\nimage: {tag: latest}\n",
    "configmap": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n",
    "silenced": (
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: silenced}\nspec:\n"
        "  providerRef:\n    name: absent  # karpenter-policy: disable=unresolved-reference\n"
    ),
    "two-documents": (
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: absent}\n"
        "spec: {subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n---\nkind: Secret\n---\n- a list\n"
    ),
}


def reports(directory: Path, jobs: int) -> list[str]:
    report = validate_paths([str(directory)], jobs=jobs)
    return [str(report.exit_code()), *(render(report, output) for output in FORMATS)]


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str | Path]]:
    """A policy tree: (relative path, example file to copy or text), with copies under other names (the same
    objects twice: duplicate-name findings across files) and subdirectories (the files' order)."""
    sources: list[str | Path] = [*EXAMPLES, *EXTRA.values()]
    chosen = draw(st.lists(st.sampled_from(sources), min_size=2, max_size=24))
    folders = draw(st.lists(st.sampled_from(("", "a/", "b/c/", "z/")), min_size=len(chosen), max_size=len(chosen)))
    return [(f"{folder}f{n:02d}.yaml", source) for n, (folder, source) in enumerate(zip(folders, chosen, strict=True))]


@deterministic(25)
@given(tree=trees(), jobs=st.sampled_from((2, 3)))
def test_workers_write_the_report_one_process_writes_in_every_format(
    tree: list[tuple[str, str | Path]], jobs: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = tmp_path_factory.mktemp("tree")
    for name, source in tree:
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copyfile(source, target)
        else:
            target.write_text(source, encoding="utf-8")
    assert reports(directory, jobs) == reports(directory, 1)


def test_the_cli_says_the_same_with_workers_and_standard_input_among_the_files() -> None:
    """`-` is read by the parent, in its place among the files; exit code, stdout and stderr are -j 1's."""
    runner = CliRunner()
    stdin = (REPOSITORY / "examples/v1/negative/cel-rule-nodepool.yaml").read_text(encoding="utf-8")
    outputs = []
    for jobs in ("1", "2"):
        done = runner.invoke(
            main, ["validate", "examples/negative", "-", "examples/v1", "--output", "json", "-j", jobs], input=stdin
        )
        outputs.append((done.exit_code, done.stdout, done.stderr))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == 1 and '"file": "<stdin>"' in outputs[0][1]


def test_auto_uses_every_usable_cpu_only_beyond_the_threshold() -> None:
    assert jobs_for(0, AUTO_THRESHOLD) == 1
    assert jobs_for(0, AUTO_THRESHOLD + 1) == usable_cpus() == len(os.sched_getaffinity(0))
    assert jobs_for(0, 1) == 1
    assert jobs_for(3, 10_000) == 3  # asked for: as many as asked, even beyond the CPUs
    assert jobs_for(8, 2) == 2  # never more than the files


def test_jobs_is_a_number_of_processes_or_auto() -> None:
    assert [read_jobs(text) for text in ("auto", "AUTO", "1", "16")] == [0, 0, 1, 16]
    for text in ("0", "-1", "x", "1.5", "", "99999999999", "١"):
        with pytest.raises(ValueError, match="is not a number of processes"):
            read_jobs(text)
    done = CliRunner().invoke(main, ["validate", "policies", "-j", "0"])
    assert done.exit_code == 2
    assert "--jobs '0' is not a number of processes (1 to 1024) or auto" in done.stderr


def test_documents_for_callers_need_one_process() -> None:
    with pytest.raises(ValueError, match="only one process"):
        validate_paths(["policies"], on_valid=lambda doc: None, jobs=2)


@pytest.fixture
def corpus(tmp_path: Path) -> Iterator[Path]:
    """Forty copies of a valid Provisioner: enough chunks for two workers."""
    text = (REPOSITORY / "policies/default.yaml").read_text(encoding="utf-8")
    for n in range(40):
        (tmp_path / f"p{n:02d}.yaml").write_text(text.replace("name: default", f"name: p{n:02d}", 1), encoding="utf-8")
    yield tmp_path


def _fail_on(monkeypatch: MonkeyPatch, name: str, action: str) -> None:
    """A bug met in the worker that checks `name`: an exception, or the process killed (as the OOM killer does)."""
    check = policies.check_file

    def failing(file: str, *args: object, **kwargs: object) -> None:
        if Path(file).name == name and os.getpid() != parent:
            if action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ZeroDivisionError("a bug")
        check(file, *args, **kwargs)  # type: ignore[arg-type]

    parent = os.getpid()
    monkeypatch.setattr(policies, "check_file", failing)


@pytest.mark.parametrize("action", ["raise", "kill"])
def test_a_worker_that_fails_is_an_internal_error_naming_the_file(
    corpus: Path, monkeypatch: MonkeyPatch, action: str
) -> None:
    _fail_on(monkeypatch, "p27.yaml", action)
    with pytest.raises(WorkerFailed) as failed:
        validate_paths([str(corpus)], jobs=2)
    assert failed.value.file == str(corpus / "p27.yaml")
    if action == "kill":
        assert str(failed.value) == f"a worker process was killed by SIGKILL while checking {corpus / 'p27.yaml'}"
    else:
        assert str(failed.value) == f"ZeroDivisionError: a bug (in a worker process, checking {corpus / 'p27.yaml'})"
    done = CliRunner().invoke(main, ["validate", str(corpus), "-j", "2"])
    assert done.exit_code == 2
    assert done.stdout == ""
    assert done.stderr == f"karpenter-policy: internal error: {failed.value}\n"


_BLOCKING_RUN = """
import os, signal, sys
from pathlib import Path
from karpenter_policy.checks.validation import policies
check, parent, marker = policies.check_file, os.getpid(), Path(sys.argv[1])

def blocking(file, *args, **kwargs):
    if file.endswith("p30.yaml") and os.getpid() != parent:
        marker.write_text(str(os.getpid()))
        signal.pause()  # a worker busy for ever (Ctrl-C is the parent's: workers ignore SIGINT)
    check(file, *args, **kwargs)

policies.check_file = blocking
sys.argv = ["karpenter-policy", "validate", sys.argv[2], "-j", "2"]
from karpenter_policy.cli import main
main()
"""


@pytest.mark.slow
def test_ctrl_c_ends_the_run_and_its_workers(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Ctrl-C reaches the terminal's whole process group: the parent says "interrupted" (exit 130, no traceback)
    and ends the workers, even one that would never finish its file."""
    marker = tmp_path_factory.mktemp("marker") / "worker.pid"
    run = subprocess.Popen(
        [sys.executable, "-c", _BLOCKING_RUN, str(marker), str(corpus)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        eventually(lambda: run.poll() is not None or (marker.exists() and marker.read_text() != ""),
                   what="a worker blocked on p30.yaml")
        worker = int(marker.read_text())
        os.killpg(run.pid, signal.SIGINT)
        stdout, stderr = run.communicate(timeout=GENEROUS)
        assert (run.returncode, stdout, stderr) == (130, "", "interrupted\n")
        eventually(lambda: not _alive(worker), what="the blocked worker ended")
    finally:  # whatever failed, nothing of the run is left (its workers are in its process group)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _workers_of(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


@pytest.mark.slow
def test_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL, the OOM killer) cannot end its workers: they end on their own, at the
    closed pipe. A forked worker holds copies of the parent's ends of the pipes; before they were closed in the
    worker, the workers waited for ever."""
    for n in range(600):  # many files: the workers are still at work when the parent is killed
        shutil.copyfile(REPOSITORY / "examples/v1/positive/general-purpose.yaml", tmp_path / f"n{n:03d}.yaml")
    run = subprocess.Popen(
        [sys.executable, "-m", "karpenter_policy.cli", "validate", str(tmp_path), "-j", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=REPOSITORY,
    )
    workers: list[int] = []
    try:
        eventually(lambda: run.poll() is not None or len(_workers_of(run.pid)) == 2, what="two workers")
        workers = _workers_of(run.pid)
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    assert len(workers) == 2, "the run ended before its workers could be seen"
    try:
        eventually(lambda: not any(_alive(worker) for worker in workers), what="the workers ended")
    finally:  # a failure leaves no orphan behind
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
