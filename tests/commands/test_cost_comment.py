"""The cost in the pull-request comments of `check --workloads` and `diff --workloads` (`--output markdown`), laid
out as infracost's: the monthly figure as the headline, a row per workload (where its pods land, its $/month, its
share of the bill), the nodes folded away; the figures agree with the JSON; the words are the user's (no
"proven", no solver, no "offerings"); and the comment, rendered by markdown-it-py as GitHub renders it, is looked at
in headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browser import CHROMIUM, LAPTOP, look_at, png_size
from markdown_it import MarkdownIt

from karpenter_policy.catalog import load_catalog
from karpenter_policy.model.allocatable import allocatable
from karpenter_policy.model.resources import CPU, MEMORY

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workloads"
PROVIDER = (
    "  provider:\n    subnetSelector: {karpenter.sh/discovery: prod}\n"
    "    securityGroupSelector: {karpenter.sh/discovery: prod}\n"
)
INTERNAL_WORDS = re.compile(r"proven|solver|\bofferings?\b", re.I)


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def provisioner(name: str, body: str) -> str:
    return f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n{body}{PROVIDER}"


def deployment(name: str, replicas: int, cpu: str, memory: str, extra: str = "") -> str:
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n"
        f"  template:\n    spec:\n{extra}      containers:\n        - name: {name}\n          resources:\n"
        f"            requests: {{cpu: \"{cpu}\", memory: {memory}}}\n"
    )


ON_DEMAND = "    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
BATCH = provisioner(
    "batch",
    "  labels: {team: batch}\n  taints:\n    - {key: team, value: batch, effect: NoSchedule}\n  requirements:\n"
    + ON_DEMAND
    + "    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n",
)
TOLERATE_BATCH = (
    "      nodeSelector: {team: batch}\n"
    "      tolerations:\n        - {key: team, operator: Equal, value: batch, effect: NoSchedule}\n"
)


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base/: `default` on m5 on demand; head/: m5 or c6a (cheaper); both with a tainted `batch` on m5.large.
    apps/: `api` (12 × 2 cpu, 4Gi) that moves to c6a, `report` (batch) that stays where it is."""
    root = tmp_path_factory.mktemp("comment")
    family = "    - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [{}]}}\n"
    for side, families in (("base", "m5"), ("head", "m5, c6a")):
        (root / side).mkdir()
        (root / side / "default.yaml").write_text(
            provisioner("default", "  requirements:\n" + ON_DEMAND + family.format(families))
        )
        (root / side / "batch.yaml").write_text(BATCH)
    (root / "apps").mkdir()
    (root / "apps" / "api.yaml").write_text(deployment("api", 12, "2", "4Gi"))
    (root / "apps" / "report.yaml").write_text(deployment("report", 1, "1", "2Gi", TOLERATE_BATCH))
    return root


def money(amount: float) -> str:
    return f"${amount:,.2f}"


def check_json(*args: str) -> dict[str, Any]:
    result = cli("check", *args, "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.slow
def test_check_leads_with_the_monthly_total_then_a_row_per_workload() -> None:
    args = [str(EXAMPLES / "policies"), "--workloads", str(EXAMPLES / "apps"), "--scale", "deployment/inflate=10"]
    capacity = check_json(*args)["capacity"]
    result = cli("check", *args, "--output", "markdown")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    total = sum(node["price"] for node in capacity["nodes"]) * 730
    assert text.splitlines()[0] == f"### ✅ karpenter-policy check: the workloads' nodes cost {money(total)} a month"
    bills = capacity["workloads"]
    assert {b["workload"] for b in bills} == {w for n in capacity["nodes"] for w in n["workloads"]}
    assert abs(sum(b["cost_per_month"] for b in bills) - total) < 0.01 * len(bills), "the shares add up to the bill"
    for bill in bills:
        first = bill["nodes"][0]
        where = f"`{first['provisioner']}` · {first['instance_type']} {first['capacity_type']}"
        row = next(line for line in text.splitlines() if line.startswith(f"| `{bill['workload']}` |"))
        assert row.startswith(f"| `{bill['workload']}` | {bill['pods']} | {where}"), row
        assert f"| {money(bill['cost_per_month'])} | {bill['share']:.0%} |" in row, row
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    costs = [float(re.findall(r"\| \$([\d,.]+) \|", row)[0].replace(",", "")) for row in rows]
    assert costs == sorted(costs, reverse=True), "the dearest first"
    assert f"| **Total** | **{capacity['pods']}** | {len(capacity['nodes'])} new nodes | **{money(total)}** |" in text
    nodes = text[text.index("<details><summary>"):]
    assert "| cpu · memory | $/month |" in nodes and nodes.rstrip().endswith("</details>")
    assert not INTERNAL_WORDS.search(text), INTERNAL_WORDS.findall(text)


def test_a_nodes_price_is_shared_by_the_larger_of_cpu_and_memory_requested(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(provisioner("default", "  requirements:\n" + ON_DEMAND
                                                 + "    - {key: node.kubernetes.io/instance-type, operator: In, "
                                                 "values: [m5.2xlarge]}\n"))
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "cpu.yaml").write_text(deployment("cpu-bound", 1, "2", "2Gi"))
    (tmp_path / "apps" / "memory.yaml").write_text(deployment("memory-bound", 1, "1", "12Gi"))
    capacity = check_json(str(tmp_path / "p.yaml"), "--workloads", str(tmp_path / "apps"))["capacity"]
    (node,) = capacity["nodes"]
    assert node["workloads"] == {"Deployment/cpu-bound": 1, "Deployment/memory-bound": 1}
    m5 = load_catalog().get("m5.2xlarge")
    assert m5 is not None
    room = allocatable(m5)
    cpu_weight = max(2000 / room[CPU], 2 * 2**30 / room[MEMORY])  # 2 of ~7.9 cpu
    memory_weight = max(1000 / room[CPU], 12 * 2**30 / room[MEMORY])  # 12 of ~29 GiB
    bills = {b["workload"]: b for b in capacity["workloads"]}
    expected = node["price"] * memory_weight / (cpu_weight + memory_weight)
    assert bills["Deployment/memory-bound"]["cost_per_hour"] == pytest.approx(expected, abs=1e-6)
    assert bills["Deployment/cpu-bound"]["cost_per_hour"] == pytest.approx(node["price"] - expected, abs=1e-6)
    assert bills["Deployment/memory-bound"]["share"] > 0.5 > bills["Deployment/cpu-bound"]["share"]


def diff_json(root: Path) -> dict[str, Any]:
    result = cli("diff", "base", "head", "--workloads", "apps", "--output", "json", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.slow
def test_diff_leads_with_the_monthly_change_then_each_workload_before_and_after(sides: Path) -> None:
    cost = diff_json(sides)["cost"]
    before, after = (sum(n["price"] for n in cost[side]["nodes"]) * 730 for side in ("base", "head"))
    assert after < before
    result = cli("diff", "base", "head", "--workloads", "apps", "--output", "markdown", cwd=sides)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    lines = text.splitlines()
    headline = re.fullmatch(r"### 📉 Monthly cost decreases by \$([\d,.]+) \(−(\d+)%\)", lines[0])
    assert headline is not None, lines[0]
    assert float(headline[1].replace(",", "")) == pytest.approx(before - after, abs=0.01)
    assert int(headline[2]) == round(100 * (1 - after / before))
    assert f"**{money(before)} → {money(after)} a month** for the workloads' nodes" in text
    (api,) = [b for b in cost["base"]["workloads"] if b["workload"] == "Deployment/api"]
    (api_after,) = [b for b in cost["head"]["workloads"] if b["workload"] == "Deployment/api"]
    row = next(line for line in lines if line.startswith("| `Deployment/api` |"))
    was, now = api["nodes"][0], api_after["nodes"][0]
    assert was["instance_type"].startswith("m5.") and now["instance_type"].startswith("c6a.")
    assert row.startswith(f"| `Deployment/api` | `default` · {was['instance_type']} on-demand → "
                          f"`default` · {now['instance_type']} on-demand | "
                          f"{money(api['cost_per_month'])} → {money(api_after['cost_per_month'])} | −\u2060$"), row
    table = text[: text.index("<details>")]
    assert "Deployment/report" not in table, "an unchanged workload is folded away"
    unchanged = text[text.index("<details><summary>1 workload unchanged</summary>"):]
    assert "| `Deployment/report` | `batch` · m5.large on-demand (both) | $70.08 → $70.08 | $0.00 | " in unchanged
    assert "<details><summary>BASE: " in text and "<details><summary>HEAD: " in text
    assert not INTERNAL_WORDS.search(text), INTERNAL_WORDS.findall(text)


@pytest.mark.slow
def test_the_text_outputs_say_a_month_and_no_internal_word(sides: Path) -> None:
    diff = cli("diff", "base", "head", "--workloads", "apps", cwd=sides)
    assert diff.returncode == 0, diff.stderr
    assert re.search(r"cost of the workloads' nodes: \$[\d,.]+ → \$[\d,.]+ a month \(\$[\d.]+/h → \$[\d.]+/h, −\d+%\)",
                     diff.stdout), diff.stdout
    assert re.search(r"  Deployment/api: m5\.\w+ on-demand → c6a\.\w+ on-demand, \$[\d,.]+ → \$[\d,.]+ a month",
                     diff.stdout), diff.stdout
    assert "combinations; e.g. c6a." in diff.stdout, "the type × zone × capacity row, in words people use"
    check = cli("check", "head", "--workloads", "apps", cwd=sides)
    assert check.returncode == 0, check.stderr
    assert re.search(r"^capacity: 13 pods on \d+ new nodes, \$[\d.]+/h, \$[\d,.]+ a month; on-demand prices$",
                     check.stdout, re.M), check.stdout
    for text in (diff.stdout, check.stdout):
        assert not INTERNAL_WORDS.search(text), INTERNAL_WORDS.findall(text)


#: GitHub's comment column and its Markdown styles (the part that decides how a comment is laid out).
PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><style>
body{margin:0;background:#fff;font:14px/1.5 -apple-system,"Segoe UI","Noto Sans",Helvetica,Arial,sans-serif}
.markdown-body{box-sizing:border-box;width:780px;margin:16px auto;padding:16px;border:1px solid #d0d7de}
.markdown-body table{display:block;width:max-content;max-width:100%;overflow:auto;border-spacing:0;
border-collapse:collapse}
.markdown-body td,.markdown-body th{padding:6px 13px;border:1px solid #d0d7de}
.markdown-body h3{font-size:1.25em;margin:0 0 16px}
.markdown-body p,.markdown-body ul,.markdown-body table,.markdown-body details{margin:0 0 16px}
code{font-size:85%;background:#eff1f3;padding:.2em .4em;border-radius:6px}
</style></head><body><div class="markdown-body">BODY</div></body></html>
"""


def comment_page(markdown: str, path: Path) -> Path:
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    path.write_text(PAGE.replace("BODY", html))
    return path


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
@pytest.mark.parametrize("command", ["check", "diff"])
@pytest.mark.slow
def test_the_comment_reads_well_in_a_browser(command: str, sides: Path, tmp_path: Path) -> None:
    args = ["check", "head", "--workloads", "apps"] if command == "check" else ["diff", "base", "head", "--workloads",
                                                                                  "apps"]
    result = cli(*args, "--output", "markdown", cwd=sides)
    assert result.returncode == 0, result.stderr
    page = comment_page(result.stdout, tmp_path / f"{command}.html")
    selectors = [".markdown-body > *:first-child", ".markdown-body table", "details", "summary"]
    look = look_at(page, tmp_path / f"{command}.png", selectors)
    assert png_size(look.screenshot) == LAPTOP and look.errors == []
    (headline,) = look.boxes[".markdown-body > *:first-child"]
    expected = "karpenter-policy check: the workloads' nodes cost $" if command == "check" else "Monthly cost decreases"
    assert expected in headline.text and look.within_first_screen(".markdown-body > *:first-child")
    cost_table, *_ = look.boxes[".markdown-body table"]
    assert cost_table.text.startswith("Workload") and cost_table.within(look.width, look.height)
    assert cost_table.top > headline.bottom, "the headline first"
    for table in look.opened[".markdown-body table"]:  # the folded tables too, once opened
        assert not table.clipped, f"a table wider than the comment: {table.text[:60]}"
    assert look.scroll_width <= look.width, "nothing sticks out of the page"
    summaries = [s.text for s in look.boxes["summary"]]
    assert any(s.startswith(("1 new node", "2 new nodes", "3 new nodes", "BASE: ")) for s in summaries), summaries
