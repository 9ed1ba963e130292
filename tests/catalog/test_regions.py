"""Issue #12 §1 through the real CLI: every region of the embedded catalog works offline, current types the old
snapshot lacked are there (g4ad), previous-generation types are reported as such (never as typos; issue #19: a
warning, as Karpenter v0.31 launches them), findings name the date of the source they rest on, and without prices
the outputs say "no price data for REGION"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from clirun import run_cli as cli

from karpenter_policy.catalog import load_catalog
from karpenter_policy.catalog.embedded import embedded_regions

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "examples" / "workloads"
PROVIDER = "  providerRef:\n    name: default\n"


def provisioner(path: Path, name: str, *requirements: tuple[str, str, list[str]]) -> Path:
    lines = ["apiVersion: karpenter.sh/v1alpha5", "kind: Provisioner", f"metadata:\n  name: {name}", "spec:"]
    lines.append("  requirements:")
    for key, operator, values in requirements:
        lines.append(f"    - key: {key}\n      operator: {operator}\n      values: [{', '.join(values)}]")
    path.write_text("\n".join(lines) + "\n" + PROVIDER)
    return path


def check_json(*args: str) -> dict[str, Any]:
    result = cli("check", *args, "--output", "json")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def messages(document: dict[str, Any], rule: str = "unknown-instance-type") -> list[tuple[str, str]]:
    return [(f["severity"], f["message"]) for f in document["findings"] if f["rule"] == rule]


# --- regions ------------------------------------------------------------------------------------------------


def test_the_embedded_catalog_covers_thirty_regions_each_with_its_own_zones() -> None:
    regions = embedded_regions()
    assert len(regions) == 30 and {"us-east-1", "us-west-2", "eu-west-1", "ap-southeast-5"} <= set(regions)
    for region in regions:
        catalog = load_catalog(region=region)
        assert catalog.region == region and catalog.date == "2026-07"
        assert len(catalog) > 200, region
        assert catalog.zones() and all(z.startswith(region) for z in catalog.zones()), region


@pytest.mark.parametrize("region", ["us-west-2", "eu-west-1"])
@pytest.mark.slow
def test_check_and_compile_run_in_other_regions(region: str, tmp_path: Path) -> None:
    """Before: `no embedded catalog for region 'us-west-2'; run catalog refresh` (exit 2)."""
    path = provisioner(tmp_path / "p.yaml", "web", ("karpenter.k8s.aws/instance-family", "In", ["m5", "c5"]))
    checked = check_json(str(path), "--region", region)
    [proven] = checked["provisioners"]
    assert proven["verdict"] == "sat" and "m5.large" in proven["instance_types"]
    assert proven["zones"] and all(z.startswith(region) for z in proven["zones"])
    compiled = cli("compile", str(path), "--region", region, "-o", "-")
    assert compiled.returncode == 0, compiled.stderr
    assert "kind: Provisioner" in compiled.stdout


def test_a_region_outside_the_catalog_is_a_usage_error_naming_the_regions(tmp_path: Path) -> None:
    path = provisioner(tmp_path / "p.yaml", "web", ("karpenter.k8s.aws/instance-family", "In", ["m5"]))
    result = cli("check", str(path), "--region", "xx-nowhere-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no embedded catalog for region 'xx-nowhere-1'" in result.stderr and "eu-west-1" in result.stderr


# --- types the old snapshot lacked --------------------------------------------------------------------------


def test_an_amd_gpu_pod_lands_on_g4ad(tmp_path: Path) -> None:
    """Before: `no instance type in us-east-1 has 1 AMD GPU`, and a g4ad provisioner was `did you mean g4dn?`."""
    policy = provisioner(tmp_path / "amd.yaml", "amd", ("node.kubernetes.io/instance-type", "In", ["g4ad.xlarge"]))
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: render\nspec:\n  containers:\n    - name: render\n"
        "      image: rocm\n      resources:\n        limits: {amd.com/gpu: 1}\n"
    )
    document = check_json(str(policy), "--workloads", str(pod))
    assert messages(document) == [] and document["summary"]["errors"] == 0
    assert document["provisioners"][0]["instance_types"] == ["g4ad.xlarge"]
    [workload] = document["workloads"]
    assert workload["provisioner"] == "amd" and workload["instance_types"] == ["g4ad.xlarge"]


# --- previous generation and the catalog's date -------------------------------------------------------------


def test_a_previous_generation_type_is_a_warning_not_a_typo(tmp_path: Path) -> None:
    """Before: `there is no instance type p3.8xlarge in us-east-1, did you mean p5.48xlarge?`."""
    path = provisioner(
        tmp_path / "p.yaml", "gpu", ("node.kubernetes.io/instance-type", "In", ["p3.8xlarge", "p4d.24xlarge"])
    )
    document = check_json(str(path))
    assert messages(document) == []
    assert messages(document, "previous-generation") == [
        (
            "warning",
            "node.kubernetes.io/instance-type p3.8xlarge: p3.8xlarge is a previous-generation type: Karpenter v0.31 "
            "launches it and AWS still sells it, but Karpenter's current instance-type table no longer lists it (its "
            "facts are Karpenter v0.31's); --allow-previous-generation acknowledges it.",
        )
    ]
    assert document["provisioners"][0]["instance_types"] == ["p3.8xlarge", "p4d.24xlarge"]


def test_previous_generation_types_launch_in_their_inferred_zones_and_the_flag_acknowledges_them(
    tmp_path: Path,
) -> None:
    """Before #19: `no-instance-type` without --allow-previous-generation (Karpenter v0.31 launches p3)."""
    path = provisioner(tmp_path / "p.yaml", "gpu", ("node.kubernetes.io/instance-type", "In", ["p3.8xlarge"]))
    without = check_json(str(path))
    assert without["summary"]["errors"] == 0 and "did you mean" not in json.dumps(without["findings"])
    assert [f["rule"] for f in without["findings"]] == ["previous-generation", "unresolved-reference"]
    admitted = check_json(str(path), "--allow-previous-generation")
    assert admitted["summary"]["errors"] == 0
    assert [f["rule"] for f in admitted["findings"]] == ["unresolved-reference"]
    for document in (without, admitted):
        [proven] = document["provisioners"]
        assert proven["instance_types"] == ["p3.8xlarge"] and proven["zones"]
    catalog = load_catalog()
    assert catalog.provenance["p3.8xlarge"].zones.startswith("inferred: ")
    assert catalog.provenance["p3.8xlarge"].facts == "karpenter-v0.31"


@pytest.mark.slow
def test_findings_name_the_catalog_date_and_types_offered_elsewhere(tmp_path: Path) -> None:
    path = provisioner(
        tmp_path / "p.yaml",
        "hpc",
        ("node.kubernetes.io/instance-type", "In", ["m5.lrage", "hpc7a.96xlarge", "m5.large"]),
    )
    found = dict((m.split(":")[0], (s, m)) for s, m in messages(check_json(str(path))))
    severity, typo = found["node.kubernetes.io/instance-type m5.lrage"]
    assert "(not in the EC2 types of 2026-07), did you mean m5.large?" in typo and severity == "warning"
    severity, elsewhere = found["node.kubernetes.io/instance-type hpc7a.96xlarge"]
    # where a type is offered comes from the offerings, of their own date (#19: not the type table's 2026-07)
    assert "hpc7a.96xlarge is not offered in us-east-1 (EC2 offerings of 2026-10; offered in " in elsewhere
    assert "us-east-2" in elsewhere and "did you mean" not in elsewhere


# --- no price data ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_without_prices_the_capacity_plan_says_so_instead_of_guessing() -> None:
    inflate = str(WORKLOADS / "apps" / "inflate.yaml")
    args = (str(WORKLOADS / "policies" / "default.yaml"), "--workloads", inflate, "--scale", "deployment/inflate=3")
    document = check_json(*args, "--region", "eu-west-1")
    capacity = document["capacity"]
    assert capacity["node_count"] >= 1 and capacity["cost_per_hour"] is None
    assert capacity["unpriced_nodes"] == capacity["node_count"]
    assert all(n["price"] is None and n["zone"].startswith("eu-west-1") for n in capacity["nodes"])
    assert document["provisioners"][0]["witness"]["price"] is None
    text = cli("check", *args, "--region", "eu-west-1").stdout
    assert "cost unknown: no price data for eu-west-1" in text
    assert "; no price data for eu-west-1)" in text  # the provisioner's witness
    priced = check_json(*args)["capacity"]  # us-east-1 has a price table
    assert priced["cost_per_hour"] > 0 and priced["unpriced_nodes"] == 0


@pytest.mark.slow
def test_diff_witnesses_without_prices_say_so(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    base.mkdir()
    head.mkdir()
    provisioner(base / "p.yaml", "web", ("karpenter.k8s.aws/instance-family", "In", ["m5"]))
    provisioner(head / "p.yaml", "web", ("karpenter.k8s.aws/instance-family", "In", ["m5", "c5"]))
    result = cli("diff", str(base), str(head), "--region", "eu-west-1")
    assert result.returncode == 0, result.stderr
    witness = r"e\.g\. c5\.\w+ \(eu-west-1., on-demand, no price data for eu-west-1\)(?! \(unconfirmed\))"
    assert re.search(witness, result.stdout)
    assert "$" not in result.stdout


# --- catalog show -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_catalog_show_says_where_each_fact_came_from() -> None:
    result = cli("catalog", "show", "g4ad.xlarge", "p3.8xlarge")
    assert result.returncode == 0  # p3.8xlarge is in the catalog (#19: Karpenter v0.31 launches it)
    lines = result.stdout.splitlines()
    assert lines[0] == "g4ad.xlarge"
    assert "[inferred: zones of g4dn]" in result.stdout and "[vpc-limits]" in result.stdout
    assert "p3.8xlarge (previous generation)" in lines
    summary = cli("catalog", "show", "--region", "eu-west-1")
    assert summary.returncode == 0 and "prices: no price data for eu-west-1" in summary.stdout
    assert "embedded regions (30):" in summary.stdout
