"""Issue #19, "Hints and misses found on Karpenter's own examples", through the real CLI: dead values
(multiple-ebs.yaml's Graviton families under the defaulted amd64), `${CLUSTER_NAME}` left in selectors (and the
Flux mark that says it is meant), userData its AMI family cannot read, key typos Karpenter would catch, a zone of
another region, a mistyped --region, `catalog show` of a typo and a --scale of no workload. Inputs are Karpenter
v0.31.1's examples (tests/data/karpenter-v0.31-examples) where the issue names them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clirun import run_cli as run

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "tests" / "data" / "karpenter-v0.31-examples"
WORKLOADS = ROOT / "examples" / "workloads"


def findings(*args: str) -> list[dict[str, Any]]:
    result = run(*args, "--output", "json")
    assert result.returncode in (0, 1), result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return found


def of(found: list[dict[str, Any]], rule: str) -> list[tuple[int, str, str]]:
    return [(f["line"], f["severity"], f["message"]) for f in found if f["rule"] == rule]


def line_of(path: Path, text: str, after: int = 0) -> int:
    """The 1-based number of the first line of `path` (after line `after`) containing `text`."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if i > after and text in line)


# --- dead values ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_families_the_defaults_rule_out_are_named() -> None:
    """multiple-ebs.yaml asks for c6g, c7g, m6g, r6g (arm64) next to amd64 families, and Karpenter adds
    `kubernetes.io/arch In [amd64]`: those four never launch. Before: no finding at all."""
    path = EXAMPLES / "multiple-ebs.yaml"
    found = findings("check", str(path))
    dead = of(found, "dead-value")
    [(line, severity, message)] = [d for d in dead if d[2].startswith("karpenter.k8s.aws/instance-family")]
    assert (line, severity) == (line_of(path, "values: [c6g"), "warning")
    assert message.startswith("karpenter.k8s.aws/instance-family c6g, c7g, m6g, r6g: no instance type the ")
    assert "kubernetes.io/arch In [amd64] (Karpenter default)" in message and "is amd64" in message
    assert not any(f["severity"] == "error" for f in found)  # the other families still launch
    assert run("check", str(path)).returncode == 0


def test_values_every_admitted_type_has_are_not_dead(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    families = "c6g, c7g, c6a, c6i, m6a, m6g, m6i, r6a, r6g, r6i"
    source = (EXAMPLES / "multiple-ebs.yaml").read_text()
    path.write_text(source.replace(families, "c6a, m6a").replace("[medium, large,", "[large,"))
    assert of(findings("check", str(path)), "dead-value") == []


# --- placeholders ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["multiple-ebs.yaml", "bottlerocket.yaml"])
@pytest.mark.slow
def test_a_cluster_name_placeholder_in_selectors_is_a_warning(example: str) -> None:
    """Karpenter's examples ship `karpenter.sh/discovery: "${CLUSTER_NAME}"`. Before: validated clean."""
    path = EXAMPLES / example
    subnet = line_of(path, '"${CLUSTER_NAME}"')
    group = line_of(path, '"${CLUSTER_NAME}"', after=subnet)
    placeholders = of(findings("validate", str(path)), "placeholder")
    assert [(line, severity) for line, severity, _ in placeholders] == [(subnet, "warning"), (group, "warning")]
    assert "holds the placeholder ${CLUSTER_NAME}: Karpenter matches it as written and finds nothing" in (
        placeholders[0][2])  # fmt: skip
    assert run("validate", str(path)).returncode == 0
    assert run("validate", str(path), "--fail-on-warn").returncode == 1


MARKED = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: enabled
spec:
  subnetSelector: {karpenter.sh/discovery: "${CLUSTER_NAME}"}
  securityGroupSelector: {karpenter.sh/discovery: "${CLUSTER_NAME}"}
  tags: {team: "${TEAM}"}
  userData: |
    #!/bin/bash
    echo "${HOSTNAME}" > /etc/motd
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  providerRef: {name: default}
"""


@pytest.mark.slow
def test_an_object_marked_for_flux_substitution_keeps_its_placeholders_for_flux(tmp_path: Path) -> None:
    path = tmp_path / "flux.yaml"
    path.write_text(MARKED)
    assert of(findings("validate", str(path)), "placeholder") == []
    unmarked = tmp_path / "unmarked.yaml"
    unmarked.write_text(MARKED.replace("substitute: enabled", "substitute: disabled"))
    assert len(of(findings("validate", str(unmarked)), "placeholder")) == 3  # two selectors, one tag
    compiled = run("compile", str(path), "-o", "-")
    assert compiled.returncode == 0, compiled.stderr
    [template] = [d for d in yaml.safe_load_all(compiled.stdout) if d and d.get("kind") == "AWSNodeTemplate"]
    assert template["metadata"]["annotations"] == {"kustomize.toolkit.fluxcd.io/substitute": "enabled"}
    assert template["spec"]["subnetSelector"] == {"karpenter.sh/discovery": "${CLUSTER_NAME}"}  # Flux's to fill
    assert template["spec"]["tags"] == {"team": "${TEAM}"}
    assert 'echo "$${HOSTNAME}"' in template["spec"]["userData"]  # the shell's: Flux writes it back as ${HOSTNAME}


# --- userData ----------------------------------------------------------------------------------------------------


def test_karpenters_user_data_examples_are_read_as_their_families_read_them() -> None:
    for example in ("br-custom-userdata.yaml", "al2-custom-userdata.yaml"):
        assert of(findings("validate", str(EXAMPLES / example)), "invalid-user-data") == [], example


def test_bottlerocket_user_data_that_is_not_toml_is_an_error_at_its_line(tmp_path: Path) -> None:
    """Before: validated clean; Karpenter fails every launch with `invalid UserData`."""
    source = (EXAMPLES / "br-custom-userdata.yaml").read_text()
    path = tmp_path / "br.yaml"
    path.write_text(source.replace("kube-api-qps = 30", "kube-api-qps = 30\n    [settings.kubernetes.node-labels\n"))
    [(line, severity, message)] = of(findings("validate", str(path)), "invalid-user-data")
    assert (line, severity) == (line_of(path, "[settings.kubernetes.node-labels"), "error")
    assert message.startswith("userData (Bottlerocket: TOML) line 3: not valid TOML: ")
    text = run("validate", str(path))
    assert text.returncode == 1 and f"br.yaml:{line}:" in text.stdout and "Traceback" not in text.stderr


@pytest.mark.parametrize(
    ("change", "problem", "at"),
    [
        (("    --BOUNDARY--", ""), "the closing --BOUNDARY-- is missing", 'echo "Running a custom user data script"'),
        (('boundary="BOUNDARY"', 'boundary="OTHER"'), "no part: no line --OTHER after the headers", "--BOUNDARY"),
        (("Content-Type: multipart/mixed;", "Content-Type: text/plain;"), "is not multipart", "Content-Type: text"),
        (("    MIME-Version: 1.0", "    MIME-Version: 1.0\n    not a header"), "is not `Name: value`", "not a header"),
    ],
    ids=["no-closing-boundary", "wrong-boundary", "not-multipart", "bad-header"],
)
def test_al2_user_data_that_is_not_mime_multipart_is_an_error_at_its_line(
    change: tuple[str, str], problem: str, at: str, tmp_path: Path
) -> None:
    """Karpenter reads AL2 userData that starts with MIME-Version: as multipart MIME. Before: validated clean."""
    path = tmp_path / "al2.yaml"
    path.write_text((EXAMPLES / "al2-custom-userdata.yaml").read_text().replace(*change))
    [(line, severity, message)] = of(findings("validate", str(path)), "invalid-user-data")
    assert severity == "error" and problem in message, message
    assert line == line_of(path, at, after=line_of(path, "userData:"))


def test_a_plain_shell_script_is_fine_for_al2(tmp_path: Path) -> None:
    path = tmp_path / "al2.yaml"
    source = (EXAMPLES / "al2-custom-userdata.yaml").read_text()
    path.write_text(source.split("  userData: |")[0] + '  userData: |\n    #!/bin/bash\n    echo "Content-Type: x"\n')
    assert of(findings("validate", str(path)), "invalid-user-data") == []


# --- key typos, zones of other regions, --region, catalog show, --scale ---------------------------------------


TYPOS = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  requirements:
    - key: topology.kubernetesio/zone
      operator: In
      values: [us-east-1a]
    - key: karpenterprovisioner-name
      operator: DoesNotExist
  providerRef: {name: default}
"""


def test_key_typos_get_karpenters_hints(tmp_path: Path) -> None:
    """Karpenter's labelHint suggests a well-known key fewer edits away than a fifth of its length. Before: no
    finding for either key."""
    path = tmp_path / "typos.yaml"
    path.write_text(TYPOS)
    hints = of(findings("check", str(path)), "unknown-label-key")
    assert [(line, severity) for line, severity, _ in hints] == [(7, "warning"), (10, "warning")]
    assert hints[0][2].endswith("did you mean topology.kubernetes.io/zone?")
    assert hints[1][2].endswith("did you mean karpenter.sh/provisioner-name?")


def test_a_key_typo_in_a_workload_gets_the_hint_too(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  nodeSelector:\n"
        "    topology.kubernetesio/zone: us-east-1a\n  containers: [{name: web, image: nginx}]\n"
    )
    policy = str(WORKLOADS / "policies" / "default.yaml")
    messages = [m for _, _, m in of(findings("check", policy, "--workloads", str(pod)), "unknown-label-key")]
    assert any("topology.kubernetes.io/zone" in m for m in messages), messages


ZONES = TYPOS.replace("topology.kubernetesio/zone", "topology.kubernetes.io/zone").replace(
    "    - key: karpenterprovisioner-name\n      operator: DoesNotExist\n", ""
)


@pytest.mark.slow
def test_a_zone_of_another_region_has_its_own_rule_and_the_region_to_check(tmp_path: Path) -> None:
    """Before: `unknown-instance-type`, `not a zone of region us-east-1`, no word of us-west-2."""
    path = tmp_path / "zones.yaml"
    path.write_text(ZONES.replace("[us-east-1a]", "[us-west-2a]"))
    [(line, severity, message)] = of(findings("check", str(path)), "zone-outside-region")
    assert (line, severity) == (9, "error")
    assert message == (
        "topology.kubernetes.io/zone us-west-2a: us-west-2a is a zone of us-west-2, not of us-east-1 (the region "
        "checked); for us-west-2's policies, check with --region us-west-2."
    )
    assert run("check", str(path), "--region", "us-west-2").returncode == 0
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(ZONES.replace("[us-east-1a]", "[us-east-1a, us-west-2a]"))
    assert [s for _, s, _ in of(findings("check", str(mixed)), "zone-outside-region")] == ["warning"]
    typo = tmp_path / "typo.yaml"
    typo.write_text(ZONES.replace("[us-east-1a]", "[us-east-1z]"))
    assert of(findings("check", str(typo)), "zone-outside-region") == []  # no region's zone: a typo still


@pytest.mark.parametrize("command", ["check", "compile", "catalog"])
def test_a_mistyped_region_gets_a_suggestion_not_an_internal_path(command: str, tmp_path: Path) -> None:
    """Before: `cannot load the catalog: karpenter_policy/catalog/data/offerings-us-west2.json: no embedded ...`."""
    path = tmp_path / "p.yaml"
    path.write_text(ZONES)
    args = {"check": ["check", str(path)], "compile": ["compile", str(path), "-o", "-"], "catalog": ["catalog", "show"]}
    result = run(*args[command], "--region", "us-west2")
    assert result.returncode == 2 and result.stdout == ""
    assert "--region us-west2: no embedded catalog for region 'us-west2'; did you mean us-west-2?" in result.stderr
    assert "karpenter_policy/catalog/data" not in result.stderr and "Traceback" not in result.stderr


def test_catalog_show_of_a_typo_suggests_like_check() -> None:
    """Before: `m5.lrage: not in the EC2 catalog of 2026-07 (us-east-1)`, no suggestion."""
    result = run("catalog", "show", "m5.lrage")
    assert result.returncode == 1
    assert result.stdout == (
        "m5.lrage: there is no instance type m5.lrage in us-east-1 (not in the EC2 types of 2026-07), did you mean "
        "m5.large?\n"
    )


@pytest.mark.slow
def test_a_scale_of_no_workload_is_a_usage_error() -> None:
    """Before: exit 0, the typo ignored (`capacity: 0 pods on 0 new nodes`); simulate already refused it."""
    policy, apps = str(WORKLOADS / "policies" / "default.yaml"), str(WORKLOADS / "apps" / "inflate.yaml")
    result = run("check", policy, "--workloads", apps, "--scale", "deployment/inflat=5")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "karpenter-policy check: --scale deployment/inflat: no such workload; did you mean deployment/inflate? "
        "(found: deployment/inflate)\n"
    )
    assert run("check", policy, "--workloads", apps, "--scale", "Deployment/inflate=5").returncode == 0
