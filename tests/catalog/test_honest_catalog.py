"""Issue #19, "An honest catalog", through the real CLI (the webhook: tests/webhook/test_catalog_holes.py): a type
the offerings source lacks in every region is offered where its kin is (g4ad in us-west-2), findings name the date
of the source they rest on, max pods count the default network card as Karpenter does, and Karpenter v0.31's own
GPU example (a previous-generation family) is a warning, not a dead provisioner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import run_cli as cli
from profiles import fast_first

from karpenter_policy.catalog import load_catalog
from karpenter_policy.model.allocatable import max_pods

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
KARPENTER_EXAMPLES = DATA / "karpenter-v0.31-examples"


def check_json(*args: str) -> dict[str, Any]:
    result = cli("check", *args, "--output", "json")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


G4AD = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: amd-gpu
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [g4ad]
  providerRef:
    name: default
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector: {karpenter.sh/discovery: my-cluster}
  securityGroupSelector: {karpenter.sh/discovery: my-cluster}
"""


# --- a type missing from the offerings of every region ------------------------------------------------------


@pytest.mark.parametrize("region", fast_first(["us-west-2", "eu-west-1", "ap-southeast-2"]))
def test_a_g4ad_provisioner_passes_in_every_region(region: str, tmp_path: Path) -> None:
    """Before: `g4ad is not offered in us-west-2 (...; offered in us-east-1)`, exit 1, in every region but us-east-1
    (moto's DescribeInstanceTypeOfferings lacks g4ad in all 30)."""
    path = tmp_path / "g4ad.yaml"
    path.write_text(G4AD)
    result = cli("check", str(path), "--region", region)
    assert result.returncode == 0, result.stdout
    document = check_json(str(path), "--region", region)
    assert document["summary"]["errors"] == 0 and document["findings"] == []
    [proven] = document["provisioners"]
    assert "g4ad.xlarge" in proven["instance_types"] and all(z.startswith(region) for z in proven["zones"])
    shown = cli("catalog", "show", "g4ad.xlarge", "--region", region)
    assert shown.returncode == 0 and "[inferred: zones of g4dn]" in shown.stdout


# --- each source's date ---------------------------------------------------------------------------------------


def test_findings_about_offerings_name_the_offerings_date(tmp_path: Path) -> None:
    """Before: `not offered in us-east-1 (EC2 catalog of 2026-07; ...)`: the type table's date, not the offerings'."""
    path = tmp_path / "hpc.yaml"
    path.write_text(G4AD.replace("[g4ad]", "[hpc7a, m5]"))
    [finding] = [f for f in check_json(str(path))["findings"] if f["rule"] == "unknown-instance-type"]
    assert "hpc7a is not offered in us-east-1 (EC2 offerings of 2026-10; offered in " in finding["message"]
    assert "2026-07" not in finding["message"]


def test_catalog_show_defines_every_tag_it_prints_with_its_date() -> None:
    """Before: `[offerings]` was printed on every type's zones and defined nowhere; no source said its date."""
    result = cli("catalog", "show", "m5.large", "g4ad.xlarge", "--region", "us-west-2")
    assert result.returncode == 0, result.stderr
    legend = result.stdout.split("sources:\n", 1)[1]
    assert "  [offerings] of 2026-10: DescribeInstanceTypeOfferings" in legend
    assert "  [karpenter] of 2026-07: " in legend and "  [vpc-limits] of 2026-08: " in legend
    assert "  [inferred: ...] zones the offerings lack" in legend
    summary = cli("catalog", "show").stdout
    assert "  [offerings] of 2026-10: " in summary and "  [prices-us-east-1] of 2026-07-20: " in summary


# --- max pods: the default network card ----------------------------------------------------------------------


def _v031_pods() -> dict[str, int]:
    table = json.loads((DATA / "karpenter-v0.31-instance-types.json").read_text())["types"]
    return {name: int(row["labels"]["karpenter.k8s.aws/instance-pods"]) for name, row in table.items()}


@pytest.mark.parametrize(
    ("name", "pods"),
    [("p4d.24xlarge", 737), ("p5.48xlarge", 100), ("trn1.32xlarge", 247), ("trn1n.32xlarge", 247),
     ("dl1.24xlarge", 737), ("c6in.32xlarge", 394), ("m6in.32xlarge", 394), ("r6in.32xlarge", 394)],
)  # fmt: skip
def test_instance_pods_count_the_default_network_card(name: str, pods: int) -> None:
    """Before: every card's ENIs (p4d.24xlarge 2942, p5.48xlarge 3138, trn1.32xlarge 1962, c6in.32xlarge 786)."""
    result = cli("catalog", "show", name)
    assert result.returncode == 0, result.stderr
    assert f"karpenter.k8s.aws/instance-pods={pods}," in result.stdout
    assert f"(max pods {pods})" in result.stdout


@pytest.mark.parametrize(
    ("name", "line"),
    [("p4d.24xlarge", "  4 network cards (15, 15, 15, 15 interfaces), EFA: 4 interfaces\n"),
     ("t2.micro", "  1 network card (2 interfaces), no EFA, ENA unsupported\n"),
     ("m5.large", "  1 network card (3 interfaces), no EFA\n")],
)  # fmt: skip
def test_catalog_show_prints_the_facts_an_ec2nodeclass_launch_is_checked_against(name: str, line: str) -> None:
    """The network cards, EFA interfaces, ENA and nested virtualization that `networkInterfaces` and `cpuOptions`
    narrow types by (model.nodeclassfit) are what `catalog show` says of the type."""
    result = cli("catalog", "show", name)
    assert result.returncode == 0, result.stderr
    assert line in result.stdout


def test_max_pods_agree_with_karpenter_v031_but_where_aws_changed_the_network_cards() -> None:
    """Every type of Karpenter v0.31's table with ENI data gets v0.31's pods, but 11 whose network cards AWS has
    changed since (the VPC limits of 2026-08): the *6in/*6idn .32xlarge and .metal types have 8 ENIs on their default
    card, not 7 (394 pods, not 345), and h1.16xlarge's one card has 8, not 15 (394, not 737). Before: 15 multi-card
    types counted every card's ENIs (p4d.24xlarge 2942, p5.48xlarge 3138, trn1n.32xlarge 3922)."""
    catalog = load_catalog()
    v031 = _v031_pods()
    disagree = {
        it.name: (max_pods(it), v031[it.name])
        for it in catalog
        if it.name in v031 and it.max_enis and max_pods(it) != v031[it.name]
    }
    grown = {f"{family}.{size}": (394, 345) for family in ("c6in", "m6in", "m6idn", "r6in", "r6idn")
             for size in ("32xlarge", "metal")}  # fmt: skip
    assert disagree == {**grown, "h1.16xlarge": (394, 737)}


# --- a previous-generation family AWS still sells ------------------------------------------------------------


@pytest.mark.slow
def test_karpenters_gpu_example_is_a_warning_not_a_dead_provisioner() -> None:
    """Karpenter v0.31's scheduling docs' GPU provisioner (`instance-family In [p3]`). Before: `no-instance-type`
    (exit 1) unless --allow-previous-generation."""
    path = KARPENTER_EXAMPLES / "gpu.yaml"
    result = cli("check", str(path))
    assert result.returncode == 0, result.stdout
    document = check_json(str(path))
    assert [(f["rule"], f["severity"]) for f in document["findings"]] == [("previous-generation", "warning")]
    assert "p3 is a previous-generation family: Karpenter v0.31 launches it" in document["findings"][0]["message"]
    [proven] = document["provisioners"]
    assert proven["instance_types"] == ["p3.16xlarge", "p3.2xlarge", "p3.8xlarge"]
    acknowledged = check_json(str(path), "--allow-previous-generation")
    assert acknowledged["findings"] == [] and acknowledged["provisioners"] == document["provisioners"]
    assert cli("check", str(path), "--fail-on-warn").returncode == 1
