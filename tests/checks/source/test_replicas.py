"""A workload's replicas (a Job's parallelism) that is not an integer of 0 to 100,000 is an `invalid-replicas`
error at its file:line:column — in `check --workloads`, `simulate` and `pin` — never a crash, never a plan or a
simulation of a billion pods (it used to be read as 1, silently). `--scale KIND/NAME=N` has the same bound."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest
from clirun import run_cli as cli

from karpenter_policy.api.workloads import MAX_REPLICAS
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.source.workloads import read_documents

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "examples" / "workloads" / "policies"
PINNING = ROOT / "examples" / "pinning" / "policies"
APPS = ROOT / "examples" / "workloads" / "apps"

#: (kind, the field's path as YAML, value) → the message's end.
BAD = [
    ("Deployment", "replicas", "1000000000", "spec.replicas 1000000000 is more than 100,000, the most pods"),
    ("StatefulSet", "replicas", "-1", "spec.replicas -1 cannot be negative"),
    ("ReplicaSet", "replicas", '"3"', "spec.replicas '3' must be an integer of 0 to 100,000"),
    ("Job", "parallelism", "1.5", "spec.parallelism 1.5 must be an integer of 0 to 100,000"),
    ("Deployment", "replicas", "true", "spec.replicas True must be an integer of 0 to 100,000"),
    ("ReplicationController", "replicas", "100001", "spec.replicas 100001 is more than 100,000"),
    ("Deployment", "replicas", "9" * 45, "spec.replicas (a number of 45 digits) is more than 100,000"),
]
API_VERSIONS = {"Job": "batch/v1", "ReplicationController": "v1"}


def manifest(kind: str, field: str, value: str, name: str) -> str:
    return dedent(
        f"""\
        apiVersion: {API_VERSIONS.get(kind, "apps/v1")}
        kind: {kind}
        metadata:
          name: {name}
        spec:
          {field}: {value}
          template:
            metadata:
              labels: {{spark-role: executor}}
            spec:
              containers:
                - name: app
                  image: registry.example/app:1
                  resources: {{requests: {{cpu: 100m}}}}
        """
    )


def write_bad(path: Path) -> list[tuple[int, int, str]]:
    """Every BAD case as one document of `path`; the (line, column, message end) each is expected at."""
    documents, expected, line = [], [], 1
    for number, (kind, field, value, message) in enumerate(BAD):
        documents.append(manifest(kind, field, value, f"w{number}"))
        expected.append((line + 5, len(f"  {field}: ") + 1, message))
        line += documents[-1].count("\n") + 1
    path.write_text("---\n".join(documents))
    return expected


def findings(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.endswith("[invalid-replicas]")]


@pytest.mark.parametrize("value", [0, 1, MAX_REPLICAS])
def test_zero_to_a_hundred_thousand_are_read_as_they_are(value: int) -> None:
    found = read_documents(parse("ok.yaml", manifest("Deployment", "replicas", str(value), "ok")))
    assert found.findings == [] and [w.replicas for w in found.workloads] == [value]


def test_check_workloads_reports_each_at_its_field(tmp_path: Path) -> None:
    expected = write_bad(tmp_path / "bad.yaml")
    result = cli("check", str(POLICIES), "--workloads", str(tmp_path / "bad.yaml"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    reported = findings(result.stdout)
    assert len(reported) == len(BAD), result.stdout
    for (line, column, message), number, text in zip(expected, range(len(BAD)), reported, strict=True):
        assert text.startswith(f"{tmp_path / 'bad.yaml'}:{line}:{column}: error: {BAD[number][0]}/w{number}: "), text
        assert message in text
    assert "capacity: 0 pods" in result.stdout, "none of them is planned"


@pytest.mark.slow
def test_simulate_refuses_them_before_it_runs(tmp_path: Path) -> None:
    write_bad(tmp_path / "bad.yaml")
    build = tmp_path / "build"
    assert cli("compile", str(POLICIES), "-o", str(build)).returncode == 0
    result = cli("simulate", "--constraints", str(build), "--workloads", str(tmp_path / "bad.yaml"))
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert len(findings(result.stderr)) == len(BAD)


@pytest.mark.parametrize("command", ["simulate", "check"])
@pytest.mark.slow
def test_scale_beyond_a_hundred_thousand_is_a_usage_error(command: str, tmp_path: Path) -> None:
    inputs = ["--constraints", str(tmp_path)] if command == "simulate" else [str(POLICIES)]
    for count in ("100001", "1000000000", "9" * 5000):
        scale = f"deployment/inflate={count}"
        result = cli(command, *inputs, "--workloads", str(APPS / "inflate.yaml"), "--scale", scale)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "Invalid value for --scale" in result.stderr and "N is more than 100,000" in result.stderr
        assert max(len(line) for line in result.stderr.splitlines()) < 200


def test_pin_says_why_it_cannot_prove_such_a_workload_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(manifest("Job", "parallelism", "1000000000", "executors"))
    before = path.read_bytes()
    result = cli("pin", str(path), "--policies", str(PINNING), "--write")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (finding,) = findings(result.stderr)
    assert finding.startswith(f"{path}:6:16: error: Job/executors: spec.parallelism 1000000000 is more than")
    assert path.read_bytes() == before
