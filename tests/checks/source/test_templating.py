"""Jinja2 policy templates: strict rendering, template-error at file:line, findings at template lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.checks.findings import Report
from karpenter_policy.checks.source.files import load_file
from karpenter_policy.checks.source.loader import Document, discover
from karpenter_policy.checks.source.templating import (
    TemplateError,
    ValuesError,
    load_values,
    render_template,
)
from karpenter_policy.checks.validation.policies import validate_paths

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "templates"
TEMPLATE = EXAMPLE / "policies" / "platform.yaml.j2"

LOOPED = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {{ name }}
spec:
  requirements:
{% for zone in zones %}
    - key: topology.kubernetes.io/zone
      operator: In
      values: [{{ zone }}]
{% endfor %}
{% if spot %}
    - key: karpenter.sh/capacity-type
      operator: {{ operator }}
      values: [spot]
{% endif %}
  limits:
    resources:
      cpu: {{ cpu }}
  provider:
    subnetSelector: {karpenter.sh/discovery: demo}
    securityGroupSelector: {karpenter.sh/discovery: demo}
"""
VALUES: dict[str, Any] = {"name": "looped", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"], "spot": True,
                          "operator": "In", "cpu": 10}


def _write(tmp_path: Path, text: str, name: str = "p.yaml.j2") -> Path:
    file = tmp_path / name
    file.write_text(text)
    return file


def _validate(path: Path, values: dict[str, Any] | None) -> tuple[Report, list[Document]]:
    docs: list[Document] = []
    report = validate_paths([str(path)], on_valid=docs.append, values=values)
    return report, docs


def _errors(report: Report) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in report.sorted_findings() if f.severity == "error"]


# --- the example: dev vs prod -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "zones", "capacity", "limit", "disruption"),
    [
        ("dev", ["us-east-1a", "us-east-1b"], ["spot"], 64, {"consolidation": {"enabled": True}}),
        ("prod", ["us-east-1a", "us-east-1b", "us-east-1c"], ["on-demand", "spot"], 2000,
         {"ttlSecondsAfterEmpty": 60, "ttlSecondsUntilExpired": 30 * 86400}),
    ],
)
def test_example_renders_per_environment(
    env: str, zones: list[str], capacity: list[str], limit: int, disruption: dict[str, Any]
) -> None:
    report, docs = _validate(EXAMPLE / "policies", load_values(str(EXAMPLE / "values" / f"{env}.yaml")))
    assert report.errors == 0 and report.warnings == 0, report.findings
    by_kind = {d.data["kind"]: d.data for d in docs}
    provisioner, template = by_kind["Provisioner"], by_kind["AWSNodeTemplate"]
    assert provisioner["metadata"]["name"] == f"{env}-general"
    requirements = {r["key"]: r["values"] for r in provisioner["spec"]["requirements"]}
    assert requirements["topology.kubernetes.io/zone"] == zones
    assert requirements["karpenter.sh/capacity-type"] == capacity
    assert provisioner["spec"]["limits"]["resources"]["cpu"] == limit
    assert {k: provisioner["spec"][k] for k in disruption} == disruption
    assert template["spec"]["subnetSelector"] == {"karpenter.sh/discovery": f"platform-{env}"}
    assert "${CLUSTER_NAME:-platform-" in template["spec"]["userData"]  # shell syntax survives rendering


def test_example_without_a_value_is_a_template_error_at_its_line(tmp_path: Path) -> None:
    values = load_values(str(EXAMPLE / "values" / "prod.yaml"))
    del values["cpu_limit"]
    report, docs = _validate(EXAMPLE / "policies", values)
    line = next(i for i, text in enumerate(TEMPLATE.read_text().splitlines(), 1) if "{{ cpu_limit }}" in text)
    assert _errors(report) == [("template-error", line)]
    (finding,) = report.findings
    assert finding.file == str(EXAMPLE / "policies" / "platform.yaml.j2")
    assert "'cpu_limit' is undefined" in finding.message and "--values" in finding.message
    assert docs == []


# --- strictness ---------------------------------------------------------------------------------------------


def test_undefined_variable_is_an_error_never_an_empty_string(tmp_path: Path) -> None:
    values = {k: v for k, v in VALUES.items() if k != "cpu"}
    report, docs = _validate(_write(tmp_path, LOOPED), values)
    assert _errors(report) == [("template-error", 19)]
    assert docs == []


def test_undefined_attribute_and_undefined_in_a_condition(tmp_path: Path) -> None:
    file = _write(tmp_path, "a: {{ settings.missing }}\n")
    report, _ = _validate(file, {"settings": {}})
    assert _errors(report) == [("template-error", 1)]
    assert "has no attribute 'missing'" in report.findings[0].message
    file = _write(tmp_path, "a: 1\n{% if flag %}\nb: 2\n{% endif %}\n")
    report, _ = _validate(file, {})
    assert _errors(report) == [("template-error", 2)]


def test_defaults_and_is_defined_are_allowed(tmp_path: Path) -> None:
    text = "a: {{ x | default('fallback') }}\nb: {{ 'yes' if y is defined else 'no' }}\n"
    rendered = render_template("t.yaml.j2", text, {})
    assert rendered.text == "a: fallback\nb: no\n"


def test_without_values_templates_render_with_an_empty_mapping(tmp_path: Path) -> None:
    report, _ = _validate(_write(tmp_path, LOOPED), None)
    assert _errors(report) == [("template-error", 4)]
    plain = _write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "static.yaml.j2")
    report, _ = _validate(plain, None)
    assert report.errors == 0 and report.skipped["ConfigMap"] == 1


def test_syntax_error_is_a_template_error_at_its_line(tmp_path: Path) -> None:
    file = _write(tmp_path, "a: 1\nb: {{ x + }}\nc: 3\n")
    report, _ = _validate(file, {"x": 1})
    assert _errors(report) == [("template-error", 2)]
    assert report.findings[0].message.startswith("template syntax error:")
    file = _write(tmp_path, "a: 1\n{% for x in y %}\nb: 2\n")
    report, _ = _validate(file, {"y": []})
    assert report.findings[0].rule == "template-error" and report.findings[0].line >= 2


@pytest.mark.parametrize(
    "source",
    [
        "a: {{ ''.__class__.__mro__[1].__subclasses__() }}\n",
        "a: {{ 'x' * 1000000000 }}\n",
        "a: {{ 2 ** 100000000 }}\n",
        "{% include 'other.yaml' %}\n",
        "a: {{ 1 / 0 }}\n",
    ],
)
def test_sandbox_failures_are_template_errors_not_tracebacks(tmp_path: Path, source: str) -> None:
    report, _ = _validate(_write(tmp_path, source), {})
    assert [f.rule for f in report.findings] == ["template-error"]
    assert report.findings[0].line == 1


def test_render_template_raises_template_error_with_file_and_line() -> None:
    with pytest.raises(TemplateError) as caught:
        render_template("policies/x.yaml.j2", "a: 1\n\nb: {{ nope }}\n", {})
    assert (caught.value.file, caught.value.line, caught.value.rule) == ("policies/x.yaml.j2", 3, "template-error")


# --- positions ----------------------------------------------------------------------------------------------


def test_findings_point_at_template_lines_through_loops_and_conditionals(tmp_path: Path) -> None:
    file = _write(tmp_path, LOOPED)
    report, _ = _validate(file, {**VALUES, "operator": "Within"})
    # the bad operator is on template line 14; rendered, it is further down (three zones were expanded)
    assert _errors(report) == [("invalid-requirement", 14)]
    (doc,) = load_file(str(file), values=VALUES)
    assert doc.position(("spec", "requirements", 2, "values", 0))[0] == 10  # third zone: from line 10
    assert doc.position(("spec", "limits", "resources", "cpu"))[0] == 19
    assert doc.position(("spec", "provider", "subnetSelector"))[0] == 21


def test_dropped_blocks_keep_later_lines_right(tmp_path: Path) -> None:
    (doc,) = load_file(str(_write(tmp_path, LOOPED)), values={**VALUES, "spot": False, "zones": []})
    assert doc.position(("spec", "limits", "resources", "cpu"))[0] == 19


def test_multiline_expansion_maps_to_the_expression_line() -> None:
    text = "a: 1\nb: |\n  {{ body | indent(2) }}\nc: 2\n"
    rendered = render_template("t.yaml.j2", text, {"body": "x\ny\nz"})
    assert rendered.text == "a: 1\nb: |\n  x\n  y\n  z\nc: 2\n"
    assert [rendered.template_line(n) for n in range(1, 7)] == [1, 2, 3, 3, 3, 4]


def test_whitespace_control_falls_back_to_identity_lines() -> None:
    text = "a: 1\n{%- if true %}\nb: {{ v }}\n{%- endif %}\nc: 3\n"
    rendered = render_template("t.yaml.j2", text, {"v": 2})
    assert rendered.text == "a: 1\nb: 2\nc: 3\n"
    assert rendered.template_line(3) in (3, 5)  # never a line outside the template


def test_raw_blocks_and_comments_render_verbatim() -> None:
    text = "{# a comment\n   on two lines #}\na: 1\n{% raw %}\nb: '{{ not a variable }}'\n{% endraw %}\nc: 2\n"
    rendered = render_template("t.yaml.j2", text, {})
    assert rendered.text == "\na: 1\n\nb: '{{ not a variable }}'\n\nc: 2\n"
    assert rendered.template_line(2) == 3 and rendered.template_line(4) == 5 and rendered.template_line(6) == 7


def test_yaml_errors_in_the_rendered_text_point_at_template_lines(tmp_path: Path) -> None:
    text = "{% for i in range(3) %}\n# line\n{% endfor %}\na: [1, 2\nb: 3\n"
    report, _ = _validate(_write(tmp_path, text), {})
    (finding,) = report.findings
    assert finding.rule == "parse-error" and "rendered template" in finding.message
    assert finding.line in (4, 5)


# --- discovery and values -----------------------------------------------------------------------------------


def test_discovery_finds_templates(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("x: 1\n")
    (tmp_path / "b.yaml.j2").write_text("x: 1\n")
    (tmp_path / "c.j2").write_text("x: 1\n")
    files, missing = discover([str(tmp_path)])
    assert [Path(f).name for f in files] == ["a.yaml", "b.yaml.j2"] and missing == []


@pytest.mark.parametrize(
    ("text", "message"),
    [("- a\n- b\n", "must be a YAML mapping"), ("a: [1\n", "not valid YAML"), ("1: a\n", "must be a YAML mapping")],
)
def test_bad_values_files(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(text)
    with pytest.raises(ValuesError, match=message):
        load_values(str(file))


def test_missing_values_file_and_empty_values_file(tmp_path: Path) -> None:
    with pytest.raises(ValuesError, match="cannot read"):
        load_values(str(tmp_path / "nope.yaml"))
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    assert load_values(str(tmp_path / "empty.yaml")) == {}


@pytest.mark.slow
def test_cli_bad_values_file_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text("- not a mapping\n")
    result = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", str(EXAMPLE / "policies"), "-o", "-",
         "--values", str(tmp_path / "values.yaml")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "must be a YAML mapping" in result.stderr and "Traceback" not in result.stderr
