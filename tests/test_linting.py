"""The habits of the linters people already use, through the real CLI: standard input, --exclude, YAML that is
not Kubernetes, --disable and suppression comments, -q, JUnit listing every file, SARIF rule help, GitHub
annotations at repository paths, and --help naming no internal file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from profiles import fast_first

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"


def run(*args: str, cwd: Path = ROOT, stdin: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "GITHUB_WORKSPACE"}
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args], cwd=cwd, capture_output=True, text=True,
        input=stdin if stdin is not None else "", timeout=180, env={**environment, **(env or {})}, check=False,
    )


PROVISIONER = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {name}
spec:
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: [m5.large, m5.xlarge]
  providerRef: {{name: {name}}}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: {name}
spec:
  subnetSelector: {{karpenter.sh/discovery: demo}}
  securityGroupSelector: {{karpenter.sh/discovery: demo}}
"""
# One warning (a beta key, line 7) and, for check, one solver error (m9z.large exists nowhere, line 12); its
# AWSNodeTemplate in the same file.
WARNING_AND_ERROR = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: odd
spec:
  requirements:
    - key: failure-domain.beta.kubernetes.io/zone{zone_comment}
      operator: In
      values: [us-east-1a]
    - key: node.kubernetes.io/instance-type
      operator: In
      values: [m9z.large]{type_comment}
  providerRef: {{name: odd}}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: odd
spec:
  subnetSelector: {{karpenter.sh/discovery: demo}}
  securityGroupSelector: {{karpenter.sh/discovery: demo}}
"""
HELM_VALUES = "replicaCount: 2\nimage:\n  repository: nginx\n  tag: stable\n"
WORKFLOW = "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make\n"


def odd(zone_comment: str = "", type_comment: str = "") -> str:
    return WARNING_AND_ERROR.format(zone_comment=zone_comment, type_comment=type_comment)


def findings(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str, int]]:
    return [(f["rule"], f["file"], f["line"]) for f in json.loads(done.stdout)["findings"]]


# --- standard input -------------------------------------------------------------------------------------------


def test_dash_reads_a_rendered_stream_from_standard_input() -> None:
    stream = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n" + odd()

    done = run("check", "-", "--output", "json", stdin=stream)

    assert done.returncode == 1, done.stderr
    assert ("unknown-instance-type", "<stdin>", 17) in findings(done)
    summary = json.loads(done.stdout)["summary"]
    assert summary["files"] == 1 and summary["skipped"] == {"Deployment": 1}


@pytest.mark.slow
def test_standard_input_next_to_files_and_for_compile() -> None:
    valid = PROVISIONER.format(name="from-stdin")

    checked = run("validate", "-", "policies/default.yaml", stdin=valid)
    compiled = run("compile", "-", "-o", "-", stdin=valid)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "in 2 files" in checked.stdout
    assert compiled.returncode == 0, compiled.stderr
    assert "name: from-stdin" in compiled.stdout


def test_an_error_on_standard_input_is_placed_there() -> None:
    done = run("validate", "-", stdin="apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x\n")

    assert done.returncode == 1
    assert done.stdout.startswith("<stdin>:3:")
    assert "[parse-error]" in done.stdout


# --- what is read: --exclude and YAML that is not Kubernetes --------------------------------------------------


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """A policy directory with a Helm values file, a workflow and a chart next to the policies."""
    (tmp_path / "policies" / "charts" / "karpenter").mkdir(parents=True)
    (tmp_path / "policies" / "envs" / "prod").mkdir(parents=True)
    (tmp_path / "policies" / "a.yaml").write_text(PROVISIONER.format(name="a"))
    (tmp_path / "policies" / "envs" / "prod" / "b.yaml").write_text(PROVISIONER.format(name="b"))
    (tmp_path / "policies" / "envs" / "prod" / "values.yaml").write_text(HELM_VALUES)
    (tmp_path / "policies" / "ci.yml").write_text(WORKFLOW)
    (tmp_path / "policies" / "charts" / "karpenter" / "broken.yaml").write_text("{{ .Values.x }}: [\n")
    return tmp_path


def test_yaml_that_is_not_a_kubernetes_object_is_skipped_and_counted(repo: Path) -> None:
    done = run("validate", "policies", "--exclude", "charts", cwd=repo)
    as_json = run("validate", "policies", "--exclude", "charts", "--output", "json", cwd=repo)

    assert done.returncode == 0, done.stdout
    assert "validated 4 objects (2 AWSNodeTemplate, 2 Provisioner) in 4 files" in done.stdout
    assert "skipped 2 YAML documents that are not Kubernetes objects" in done.stdout
    assert json.loads(as_json.stdout)["summary"]["not_kubernetes"] == 2


def test_a_manifest_without_its_type_is_still_an_error(tmp_path: Path) -> None:
    no_kind = PROVISIONER.format(name="a").replace("kind: Provisioner\n", "")
    no_type = PROVISIONER.format(name="b").replace("kind: Provisioner\n", "").replace(
        "apiVersion: karpenter.sh/v1alpha5\n", "")
    (tmp_path / "no-kind.yaml").write_text(no_kind)
    (tmp_path / "no-type.yaml").write_text(no_type)

    done = run("validate", str(tmp_path), "--output", "json")

    assert done.returncode == 1
    assert sorted((rule, Path(file).name) for rule, file, _ in findings(done)) == [
        ("schema", "no-kind.yaml"), ("schema", "no-type.yaml")]


@pytest.mark.parametrize(
    ("patterns", "left"),
    [
        (["charts"], {"a.yaml", "b.yaml", "values.yaml", "ci.yml"}),
        (["charts", "values*.yaml", "*.yml"], {"a.yaml", "b.yaml"}),
        (["policies/charts", "policies/envs/*/values.yaml"], {"a.yaml", "b.yaml", "ci.yml"}),
        (["**/karpenter", "**/prod"], {"a.yaml", "ci.yml"}),
    ],
    ids=["a-name", "names-and-globs", "paths", "double-star"],
)
def test_exclude_leaves_out_files_and_directories(repo: Path, patterns: list[str], left: set[str]) -> None:
    args = [arg for pattern in patterns for arg in ("--exclude", pattern)]

    done = run("validate", "policies", *args, "--output", "junit", cwd=repo)

    assert done.returncode == 0, done.stdout
    names = {Path(case.get("name", "")).name for case in ET.fromstring(done.stdout).iter("testcase")}
    assert names == left


def test_exclude_applies_to_files_named_explicitly_and_says_so(repo: Path) -> None:
    broken = "policies/charts/karpenter/broken.yaml"
    assert run("validate", "policies/a.yaml", broken, cwd=repo).returncode == 1

    done = run("check", "policies/a.yaml", broken, "--exclude", "charts", cwd=repo)

    assert done.returncode == 0, done.stdout
    assert "in 1 file" in done.stdout
    assert done.stderr == (  # not dropped silently
        f"karpenter-policy check: note: {broken} is named on the command line but --exclude charts leaves it out: "
        "it is not read\n"
    )


@pytest.mark.parametrize("command", ["validate", "check", "compile"])
@pytest.mark.parametrize(
    ("args", "said"),
    fast_first([
        (["policies/a.yaml", "--exclude", "a.yaml"], "--exclude leaves out every policy file under policies/a.yaml"),
        (["policies", "--exclude", "*"], "--exclude leaves out every policy file under policies (5)"),
        (["policies/envs/prod", "--exclude", "*.yaml"], "--exclude leaves out every policy file under policies/envs"),
        (["policies/empty"], "no policy files (*.yaml, *.yml, *.yaml.j2) under policies/empty"),
    ], unpack=True),
    ids=["the-file-named", "everything", "every-file-of-a-directory", "an-empty-directory"],
)
def test_a_run_that_reads_no_policy_file_does_not_pass(repo: Path, command: str, args: list[str], said: str) -> None:
    """`--exclude default.yaml` on `validate default.yaml`, `--exclude '*'`: nothing was validated, which used to
    pass silently (exit 0)."""
    (repo / "policies" / "empty").mkdir()
    extra = ["-o", "-"] if command == "compile" else []

    done = run(command, *args, *extra, cwd=repo)

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert f"karpenter-policy {command}: nothing to {command}: {said}" in done.stderr
    assert "Traceback" not in done.stderr


def test_fmt_says_which_named_file_it_leaves_out(repo: Path) -> None:
    """fmt (the pre-commit hook passes the staged files by name) formats the others and says which it skipped."""
    done = run("fmt", "policies/a.yaml", "policies/envs/prod/b.yaml", "--exclude", "b.yaml", cwd=repo)

    assert done.returncode == 0, done.stderr
    assert "note: policies/envs/prod/b.yaml is named on the command line but --exclude b.yaml" in done.stderr
    assert "a/policies/a.yaml" in done.stdout and "b.yaml" not in done.stdout


# --- --disable and suppression comments --------------------------------------------------------------------------


@pytest.mark.slow
def test_disable_drops_a_rules_findings_and_counts_them(tmp_path: Path) -> None:
    file = tmp_path / "odd.yaml"
    file.write_text(odd())

    before = run("check", str(file), "--output", "json")
    after = run("check", str(file), "--output", "json", "--disable", "deprecated-label,unknown-instance-type")

    assert before.returncode == 1 and {r for r, _, _ in findings(before)} == {"deprecated-label",
                                                                               "unknown-instance-type"}
    assert after.returncode == 0, after.stdout
    assert findings(after) == []
    assert json.loads(after.stdout)["summary"]["suppressed"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--disable", "unknwn-instance-type"], "did you mean unknown-instance-type?"),
        (["--disable", "parse-error"], "parse-error cannot be disabled"),
        (["--disable", "overlap,restricted-label"], "restricted-label cannot be disabled"),
    ],
)
def test_a_rule_that_cannot_be_disabled_is_a_usage_error(args: list[str], message: str) -> None:
    for command in ("validate", "check"):
        done = run(command, "policies", *args)
        assert done.returncode == 2
        assert message in done.stderr and "Traceback" not in done.stderr


def test_a_comment_silences_one_finding_on_its_line_or_the_line_below(tmp_path: Path) -> None:
    file = tmp_path / "odd.yaml"
    file.write_text(
        odd(zone_comment="  # karpenter-policy: disable=deprecated-label (the beta key is what our AMI sets)")
        .replace("      values: [m9z.large]", "      # karpenter-policy: disable=unknown-instance-type\n"
                                               "      values: [m9z.large]")
    )

    done = run("check", str(file), "--output", "json")

    assert done.returncode == 0, done.stdout
    assert findings(done) == []
    assert json.loads(done.stdout)["summary"]["suppressed"] == 2


def test_a_comment_silences_only_the_rules_it_names_where_it_stands(tmp_path: Path) -> None:
    file = tmp_path / "odd.yaml"
    # on the wrong line, and naming another rule: nothing is silenced
    file.write_text(odd(zone_comment="  # karpenter-policy: disable=unknown-instance-type")
                    .replace("[m9z.large]", "[m9z.large]  # karpenter-policy: disable=overlap"))

    done = run("check", str(file), "--output", "json")

    assert done.returncode == 1
    assert sorted(r for r, _, _ in findings(done)) == ["deprecated-label", "unknown-instance-type"]


def test_a_comment_cannot_silence_what_karpenter_refuses(tmp_path: Path) -> None:
    file = tmp_path / "p.yaml"
    file.write_text(PROVISIONER.format(name="a").replace(
        "      operator: In", "      operator: Equals  # karpenter-policy: disable=invalid-requirement"))

    done = run("validate", str(file), "--output", "json")

    assert done.returncode == 1
    assert [r for r, _, _ in findings(done)] == ["invalid-requirement"]


@pytest.mark.slow
def test_a_silenced_solver_error_lets_compile_go_on(tmp_path: Path) -> None:
    file = tmp_path / "types.yaml"
    file.write_text(PROVISIONER.format(name="new-types").replace(
        "values: [m5.large, m5.xlarge]",
        "# karpenter-policy: disable=unknown-instance-type\n      values: [m9z.large]"))

    refused = run("compile", str(file), "-o", "-", "--disable", "unresolved-reference")
    stream = run("compile", str(file), "-o", "-")

    assert "[unknown-instance-type]" not in refused.stderr
    assert stream.returncode == 0, stream.stderr
    assert "name: new-types" in stream.stdout


# --- -q ------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_quiet_prints_the_findings_and_nothing_else(tmp_path: Path) -> None:
    file = tmp_path / "odd.yaml"
    file.write_text(odd())

    for command in ("validate", "check"):
        for output in ("text", "github"):
            done = run(command, str(file), "-q", "--output", output)
            lines = done.stdout.splitlines()
            assert lines and all(("[deprecated-label]" in line or "[unknown-instance-type]" in line
                                  or line.startswith("::")) for line in lines), done.stdout
    clean = run("check", "policies", "-q")
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout


def test_quiet_compile_says_nothing_when_all_is_well(tmp_path: Path) -> None:
    done = run("compile", "policies", "-o", str(tmp_path / "out"), "-q")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
    assert (tmp_path / "out" / "constraintsets" / "index.json").is_file()


# --- reports ------------------------------------------------------------------------------------------------------


def test_junit_lists_every_file_passing_ones_too(repo: Path) -> None:
    (repo / "policies" / "odd.yaml").write_text(odd())

    done = run("validate", "policies", "--exclude", "charts", "--output", "junit", cwd=repo)

    suite = ET.fromstring(done.stdout)
    cases = {Path(c.get("name", "")).name: c for c in suite.iter("testcase")}
    assert set(cases) == {"a.yaml", "b.yaml", "values.yaml", "ci.yml", "odd.yaml"}
    assert suite.get("tests") == "5" and suite.get("skipped") == "2"
    assert list(cases["a.yaml"]) == []  # passed
    assert cases["values.yaml"].find("skipped") is not None
    assert cases["odd.yaml"].find("system-out") is not None  # a warning only


@pytest.mark.slow
def test_sarif_rules_carry_a_full_description_help_and_their_page(tmp_path: Path) -> None:
    file = tmp_path / "odd.yaml"
    file.write_text(odd())

    plain = json.loads(run("check", str(file), "--output", "sarif").stdout)
    linked = json.loads(run("check", str(file), "--output", "sarif",
                            env={"KARPENTER_POLICY_DOCS_URL": "https://docs.test/karpenter-policy/docs/"}).stdout)

    from karpenter_policy.api.rules import RULES

    unsilenceable = {r.id for r in RULES if not r.silenceable}
    default_levels = {r.id: r.severity for r in RULES}
    rules = {r["id"]: r for r in plain["runs"][0]["tool"]["driver"]["rules"]}
    assert set(rules) == set(default_levels)  # every declared rule, whether it fired or not
    for rule_id, rule in rules.items():
        assert rule["fullDescription"]["text"] != rule["shortDescription"]["text"], rule_id
        assert f"docs/rules/{rule_id}.md" in rule["help"]["text"]
        if rule_id in unsilenceable:
            assert "cannot be silenced" in rule["help"]["markdown"] and f"disable={rule_id}" not in rule["help"]["text"]
        else:
            assert f"disable={rule_id}" in rule["help"]["markdown"]
        assert rule["defaultConfiguration"]["level"] == default_levels[rule_id], rule_id
        assert (ROOT / "docs" / "rules" / f"{rule_id}.md").is_file(), f"no page for {rule_id}"
    linked_rules = {r["id"]: r for r in linked["runs"][0]["tool"]["driver"]["rules"]}
    assert linked_rules["unknown-instance-type"]["helpUri"] == (
        "https://docs.test/karpenter-policy/docs/rules/unknown-instance-type.md")


def _git_repository(tmp_path: Path) -> Path:
    repository = tmp_path / "platform"
    (repository / "karpenter" / "policies").mkdir(parents=True)
    (repository / ".git").mkdir()  # found as the repository, without running git
    (repository / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repository / "karpenter" / "policies" / "odd.yaml").write_text(odd())
    return repository


def test_github_annotations_name_files_from_the_repository_root(tmp_path: Path) -> None:
    repository = _git_repository(tmp_path)
    workdir = repository / "karpenter"

    done = run("validate", "policies", "--output", "github", cwd=workdir)
    sarif = json.loads(run("validate", "policies", "--output", "sarif", cwd=workdir).stdout)

    annotation = done.stdout.splitlines()[0]
    assert annotation.startswith("::warning file=karpenter/policies/odd.yaml,line=7,"), annotation
    (result,) = sarif["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "karpenter/policies/odd.yaml", "uriBaseId": "%SRCROOT%"}


def test_github_annotations_follow_github_workspace(tmp_path: Path) -> None:
    repository = _git_repository(tmp_path)
    workspace = repository / "karpenter"  # e.g. a checkout into a path of the workspace

    done = run("validate", str(workspace / "policies"), "--output", "github", cwd=tmp_path,
               env={"GITHUB_WORKSPACE": str(workspace)})

    assert done.stdout.startswith("::warning file=policies/odd.yaml,line=7,"), done.stdout


# --- --help -------------------------------------------------------------------------------------------------------


def _commands() -> list[list[str]]:
    return [[], ["validate"], ["check"], ["compile"], ["pin"], ["diff"], ["fmt"], ["catalog"], ["catalog", "refresh"],
            ["webhook"], ["reconcile"], ["simulate"], ["catalog", "show"], ["catalog", "build"], ["rules"]]


@pytest.mark.parametrize("command", fast_first(_commands()), ids=lambda c: " ".join(c) or "main")
def test_help_names_no_internal_file(command: list[str]) -> None:
    done = run(*command, "--help")

    assert done.returncode == 0, done.stderr
    assert not re.search(r"DESIGN|README|\w+\.(md|py)\b", done.stdout), done.stdout
