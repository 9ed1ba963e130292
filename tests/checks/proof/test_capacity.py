"""`check --workloads`' capacity plan and `diff --workloads`' cost change, through the real CLI: what the replicas
need as new nodes, what they cost, and what a policy change does to the bill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import run_cli as cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "workloads"
PROVIDER = (
    "  provider:\n    subnetSelector: {karpenter.sh/discovery: prod}\n"
    "    securityGroupSelector: {karpenter.sh/discovery: prod}\n"
)


def capacity(*args: str) -> dict[str, Any]:
    result = cli("check", *args, "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    found: dict[str, Any] = json.loads(result.stdout)["capacity"]
    return found


def test_the_seed_inflate_packs_onto_few_right_sized_spot_nodes() -> None:
    plan = capacity(
        str(EXAMPLES / "policies" / "default.yaml"),
        "--workloads",
        str(EXAMPLES / "apps" / "inflate.yaml"),
        "--scale",
        "deployment/inflate=10",
    )
    nodes = plan["nodes"]
    assert plan["pods"] == 10 and plan["unscheduled"] == {}
    assert 1 <= len(nodes) <= 2
    assert {n["provisioner"] for n in nodes} == {"default"} and {n["capacity_type"] for n in nodes} == {"spot"}
    # 7 pods on a c6a.2xlarge and 3 on a c6a.xlarge ($0.459/h), not all 10 on a c6a.4xlarge ($0.612/h)
    assert plan["cost_per_hour"] == pytest.approx(0.459)
    assert all(n["cpu_utilisation"] > 0.5 for n in nodes), nodes  # right-sized, not a large half-empty node
    assert plan["estimated"] is True and "on-demand price" in plan["pricing"]


SPARK_FAMILIES = {"c5", "c5a", "c5d", "c5ad", "m5", "c6a"}
SPARK_SIZES = {"2xlarge", "4xlarge", "8xlarge", "9xlarge"}


@pytest.mark.slow
def test_the_seed_spark_job_lands_on_its_families_drivers_on_demand_executors_spot() -> None:
    plan = capacity(
        str(EXAMPLES / "policies" / "kspark.yaml"),
        "--workloads",
        str(EXAMPLES / "apps" / "spark-driver-pod-template.yaml"),
        "--workloads",
        str(EXAMPLES / "apps" / "spark-executor-4vcpu-7g.yaml"),
        "--scale",
        "pod/karpenter-4vcpu-7gb-exec-1=50",
    )
    assert plan["pods"] == 51 and plan["unscheduled"] == {}
    for node in plan["nodes"]:
        family, size = node["instance_type"].split(".")
        assert family in SPARK_FAMILIES and size in SPARK_SIZES and node["zone"] == "us-east-1a"
        owners = set(node["workloads"])
        if owners == {"Pod/spark-driver-pod-template"}:
            assert node["capacity_type"] == "on-demand"
        else:
            assert owners == {"Pod/karpenter-4vcpu-7gb-exec-1"} and node["capacity_type"] == "spot"
    executors = sum(n["workloads"].get("Pod/karpenter-4vcpu-7gb-exec-1", 0) for n in plan["nodes"])
    assert executors == 50


@pytest.mark.slow
def test_the_text_report_ends_with_the_summary_after_the_capacity_table() -> None:
    result = cli(
        "check", str(EXAMPLES / "policies"), "--workloads", str(EXAMPLES / "apps"), "--scale", "deployment/inflate=4"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("capacity: "))
    assert lines[start + 1].split() == [
        "provisioner",
        "instance",
        "type",
        "zone",
        "capacity",
        "nodes",
        "pods",
        "cpu",
        "memory",
        "$/h",
        "$/month",
    ]
    assert lines[-1].startswith("checked ") and lines[-1].endswith("0 errors, 0 warnings")


@pytest.mark.slow
def test_markdown_is_a_pull_request_comment_with_the_cost_per_workload() -> None:
    result = cli("check", str(EXAMPLES / "policies"), "--workloads", str(EXAMPLES / "apps"), "--output", "markdown")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("### ✅ karpenter-policy check: the workloads' nodes cost $")
    assert "| Workload | Pods | Lands on | Monthly cost | Share of the bill |" in text
    assert "| provisioner | instance type | zone | capacity | nodes | pods | cpu · memory | $/month |" in text


@pytest.mark.slow
def test_spot_prices_from_describe_spot_price_history_price_the_spot_nodes(tmp_path: Path) -> None:
    args = [str(EXAMPLES / "policies" / "default.yaml"), "--workloads", str(EXAMPLES / "apps" / "inflate.yaml")]
    args += ["--scale", "deployment/inflate=10"]
    estimated = capacity(*args)
    node = estimated["nodes"][0]
    history = {
        "SpotPriceHistory": [
            {
                "AvailabilityZone": zone,
                "InstanceType": node["instance_type"],
                "ProductDescription": "Linux/UNIX",
                "SpotPrice": f"{node['price'] / 4:.6f}",
                "Timestamp": "2026-11-20T10:00:00+00:00",
            }
            for zone in ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f")
        ]
    }
    prices = tmp_path / "spot.json"
    prices.write_text(json.dumps(history))
    priced = capacity(*args, "--spot-prices", str(prices))
    assert f"spot prices from {prices}" in priced["pricing"]
    assert priced["cost_per_hour"] < estimated["cost_per_hour"]  # the type got cheaper: at least that much


#: Spot prices of tests/reconcile/awsaccount.py's model (a share of the on-demand price, per type and zone: not
#: linear in size), for the types that compete for five 1-vCPU pods; every other type stays at its on-demand price.
SPOT_PRICES = {
    "c6a.large": {"us-east-1a": 0.02547, "us-east-1b": 0.02310, "us-east-1c": 0.02142},
    "c6a.xlarge": {"us-east-1a": 0.05386, "us-east-1b": 0.05003, "us-east-1c": 0.05692},
    "c6a.2xlarge": {"us-east-1a": 0.09119, "us-east-1b": 0.09088, "us-east-1c": 0.08660},
    "m5a.xlarge": {"us-east-1a": 0.04868, "us-east-1b": 0.05040, "us-east-1c": 0.05298},
}


def test_five_pods_on_spot_prices_not_linear_in_size_go_on_the_one_cheaper_node(tmp_path: Path) -> None:
    # Issue #19's regression: the cap took the type cheapest per share (a m5a.xlarge holds 3 of the 5 pods at
    # $0.0487/h) without counting the other two, which then took two c6a.large: $0.0915/h for three nodes, where
    # one c6a.2xlarge holds all five for $0.0866/h.
    history = [
        {
            "AvailabilityZone": zone,
            "InstanceType": name,
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": f"{price:.5f}",
            "Timestamp": "2026-11-27T00:00:00Z",
        }
        for name, zones in SPOT_PRICES.items()
        for zone, price in zones.items()
    ]
    prices = tmp_path / "spot.json"
    prices.write_text(json.dumps({"SpotPriceHistory": history}))
    args = [str(EXAMPLES / "policies" / "default.yaml"), "--workloads", str(EXAMPLES / "apps" / "inflate.yaml")]
    plan = capacity(*args, "--scale", "deployment/inflate=5", "--spot-prices", str(prices))
    assert plan["pods"] == 5 and plan["unscheduled"] == {}
    (node,) = plan["nodes"]
    assert (node["instance_type"], node["zone"], node["capacity_type"]) == ("c6a.2xlarge", "us-east-1c", "spot")
    assert node["pods"] == 5
    assert plan["cost_per_hour"] == pytest.approx(0.0866)


@pytest.mark.slow
def test_bad_scale_and_spot_price_files_are_usage_errors(tmp_path: Path) -> None:
    apps = str(EXAMPLES / "apps")
    bad_scale = cli("check", str(EXAMPLES / "policies"), "--workloads", apps, "--scale", "inflate=ten")
    assert bad_scale.returncode == 2 and "KIND/NAME=N" in bad_scale.stderr and bad_scale.stdout == ""
    broken = tmp_path / "spot.json"
    broken.write_text("{not json")
    bad_prices = cli("check", str(EXAMPLES / "policies"), "--workloads", apps, "--spot-prices", str(broken))
    assert bad_prices.returncode == 2 and f"{broken}: not JSON" in bad_prices.stderr


def provisioner(name: str, body: str) -> str:
    return f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n{body}{PROVIDER}"


API = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 12
  template:
    spec:
      containers:
        - name: api
          resources:
            requests: {cpu: "2", memory: 4Gi}
"""


@pytest.mark.slow
def test_diff_says_what_a_policy_change_does_to_the_bill(tmp_path: Path) -> None:
    base, head, apps = tmp_path / "base", tmp_path / "head", tmp_path / "apps"
    for directory in (base, head, apps):
        directory.mkdir()
    (base / "p.yaml").write_text(
        provisioner(
            "default",
            "  requirements:\n"
            "    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
            "    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}\n",
        )
    )
    (head / "p.yaml").write_text(
        provisioner(
            "default",
            "  requirements:\n"
            "    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
            "    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c6a]}\n",
        )
    )
    (apps / "api.yaml").write_text(API)
    result = cli("diff", str(base), str(head), "--workloads", str(apps), "--output", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    cost = json.loads(result.stdout)["cost"]
    assert cost["head"]["cost_per_hour"] < cost["base"]["cost_per_hour"] and cost["change"] < 0
    (moved,) = cost["workloads"]
    assert moved["workload"] == "Deployment/api"
    assert moved["base"].startswith("m5.") and moved["head"].startswith("c6a.")
    assert moved["base"].endswith(" on-demand") and moved["head"].endswith(" on-demand")
    text = cli("diff", str(base), str(head), "--workloads", str(apps), cwd=tmp_path).stdout
    line = next(x for x in text.splitlines() if x.startswith("cost of the workloads' nodes: "))
    assert "/h → $" in line and "%)" in line and "nodes" in line
    assert f"  Deployment/api: {moved['base']} → {moved['head']}" in text
