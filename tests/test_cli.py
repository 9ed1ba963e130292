"""The `karpenter-policy` command as a user runs it: exit codes, default paths, flags, what it imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from clirun import run_cli as run
from profiles import fast_first

ROOT = Path(__file__).resolve().parent.parent


def test_validate_defaults_to_the_policy_repo() -> None:
    result = run("validate")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith(": 0 errors, 0 warnings")
    assert "Provisioner" in result.stdout and result.stderr == ""


def test_missing_path_cannot_run(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "nope"), "--output", "json")
    assert result.returncode == 2
    finding = json.loads(result.stdout)["findings"][0]
    assert finding["rule"] == "parse-error" and "no such file or directory" in finding["message"]


def test_bad_flag_is_a_usage_error() -> None:
    result = run("validate", "--output", "yaml")
    assert result.returncode == 2
    assert "Invalid value for '--output'" in result.stderr and "Traceback" not in result.stderr


def _write(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "p.yaml"
    file.write_text(text)
    return file


WARNING_ONLY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: zoned
spec:
  requirements:
    - key: failure-domain.beta.kubernetes.io/zone
      operator: In
      values: [us-east-1a]
  provider:
    subnetSelector: {karpenter.sh/discovery: demo}
    securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def test_warnings_fail_only_with_fail_on_warn(tmp_path: Path) -> None:
    file = _write(tmp_path, WARNING_ONLY)
    assert run("validate", str(file)).returncode == 0
    strict = run("validate", str(file), "--fail-on-warn")
    assert strict.returncode == 1
    assert f"{file}:7:12: warning: Provisioner/zoned: label failure-domain.beta.kubernetes.io/zone" in strict.stdout


def test_errors_exit_1_and_point_at_the_line(tmp_path: Path) -> None:
    file = _write(tmp_path, WARNING_ONLY.replace("operator: In", "operator: Within"))
    result = run("validate", str(file), "--output", "json")
    assert result.returncode == 1
    errors = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert [(f["rule"], f["line"], f["column"]) for f in errors] == [("invalid-requirement", 8, 17)]


def test_validate_does_not_load_cloud_cluster_or_solver_clients() -> None:
    code = (
        "import sys; from karpenter_policy.checks.validation.policies import validate_paths;"
        "r = validate_paths(['policies']); assert r.errors == 0;"
        "print(sorted(m for m in ('kubernetes', 'boto3', 'z3', 'ruamel') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version(flag: str) -> None:
    result = run(flag)
    assert result.returncode == 0 and result.stdout


# --- --help and --version: whole descriptions, examples, exit codes; what a build is ---------------------------

COMMANDS = ["validate", "check", "compile", "diff", "plan", "fmt", "pin", "migrate", "rules", "simulate", "webhook",
            "reconcile", "catalog show", "catalog refresh", "catalog build"]


def test_the_command_list_gives_each_description_whole() -> None:
    """click cut each description at the terminal's width with '...'; the list gives the whole first paragraph."""
    result = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env={**os.environ, "COLUMNS": "80"})

    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:", 1)[1].split("Examples:", 1)[0]
    assert "..." not in commands and "\u2026" not in commands
    listed = " ".join(commands.split())
    assert ("Validate, then prove each NodePool and Provisioner satisfiable against the instance-type catalog "
            "(Z3).") in listed
    assert "Exit 1 when pods stay pending." in listed  # simulate's, at the end of a long paragraph
    assert "Examples:" in result.stdout and "Exit codes:" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_s_help_has_examples_and_exit_codes(command: str) -> None:
    result = run(*command.split(), "--help")

    assert result.returncode == 0, result.stderr
    examples = result.stdout.split("Examples:", 1)[1].split("Exit codes:", 1)
    assert f"karpenter-policy {command}" in examples[0]
    assert "\n    0  " in examples[1] and "\n    2  " in examples[1]


@pytest.mark.parametrize(
    ("args", "code"),
    [(("validate", "examples/positive"), 0), (("validate", "examples/negative/invalid-spec-taint-effect.yaml"), 1),
     (("validate", "no-such-dir"), 2), (("fmt", "--check", "no-such-dir"), 2)],
)
def test_the_exit_codes_help_gives_are_those_the_command_returns(args: tuple[str, ...], code: int) -> None:
    described = run(args[0], "--help").stdout.split("Exit codes:", 1)[1]
    assert f"\n    {code}  " in described

    assert run(*args).returncode == code


@pytest.mark.parametrize(
    ("installed", "says"),
    [
        ("0.0.1.dev339+g5ba330f16", "(untagged development build: no release tag in this clone's history)"),
        ("0.0.1.dev2+g5ba330f.d20261129", "(untagged development build: no release tag in this clone's history)"),
        ("1.2.4.dev3+g1a2b3c4", "(development build: 3 commits after the last release tag)"),
        ("1.2.4.dev1+g1a2b3c4", "(development build: 1 commit after the last release tag)"),
        ("0.0.0", "(built without git metadata and without a version given: not a release)"),
        ("1.2.3", ""),
    ],
)
def test_version_says_plainly_what_a_build_that_is_not_a_release_is(installed: str, says: str) -> None:
    """The version as setuptools-scm derived it at install time, given to the CLI through importlib.metadata."""
    code = ("import importlib.metadata as m, sys; m.version = lambda name: sys.argv[1]; "
            "from karpenter_policy.cli import main; main(['--version'])")
    result = subprocess.run([sys.executable, "-c", code, installed], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"karpenter-policy, version {installed}{' ' + says if says else ''}\n"


# --- output: a reader that goes away, file names that are not UTF-8 --------------------------------------------


@pytest.mark.parametrize(
    "args",
    [("validate", "policies", "--output", "json"), ("compile", "policies", "-o", "-"), ("check", "policies")],
    ids=["validate", "compile-stream", "check"],
)
def test_a_closed_stdout_ends_quietly_as_unix_tools_do(args: tuple[str, ...]) -> None:
    """`karpenter-policy validate | true` used to end with "internal error: BrokenPipeError" (exit 2)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "karpenter_policy.cli", *args],
            cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=180, check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == -signal.SIGPIPE, done.stderr  # the shell shows 141, as for `yes | true`
    assert "Error" not in done.stderr and "Traceback" not in done.stderr


NOT_UTF8_NAME = b"caf\xe9.yaml"  # Latin-1 "café.yaml", a valid file name on Linux


def _tree_with_a_latin1_name(tmp_path: Path, text: str) -> Path:
    with open(os.path.join(os.fsencode(tmp_path), NOT_UTF8_NAME), "w") as handle:
        handle.write(text)
    return tmp_path


@pytest.mark.parametrize("output", fast_first(["text", "json", "sarif", "github", "junit"]))
def test_reports_stay_valid_utf8_with_file_names_that_are_not(tmp_path: Path, output: str) -> None:
    invalid = WARNING_ONLY.replace("  provider:", "  foo: 1\n  provider:")  # an unknown field: one error
    tree = _tree_with_a_latin1_name(tmp_path, invalid)
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "validate", str(tree), "--output", output],
        capture_output=True, timeout=60, check=False,
    )
    assert done.returncode == 1, done.stderr
    text = done.stdout.decode("utf-8")  # strict: raises on invalid UTF-8
    shown = f"{tree}/caf\\xe9.yaml"
    if output == "json":
        assert json.loads(text)["findings"][0]["file"] == shown
    elif output == "sarif":
        (result,) = json.loads(text)["runs"][0]["results"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == f"{tree}/caf%E9.yaml"
    elif output == "junit":
        assert ET.fromstring(done.stdout).find("testcase").get("name") == shown  # type: ignore[union-attr]
    else:
        assert shown in text


def test_compile_escapes_such_a_name_in_the_sources_it_records(tmp_path: Path) -> None:
    tree = _tree_with_a_latin1_name(tmp_path, WARNING_ONLY)
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", str(tree), "-o", "-"],
        capture_output=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    stream = list(yaml.safe_load_all(done.stdout.decode("utf-8")))
    (configmap,) = [o for o in stream if o["kind"] == "ConfigMap"]
    assert json.loads(configmap["data"]["zoned.json"])["sources"] == ["caf\\xe9.yaml"]
