"""Disruption budgets in `check` (issue #25): the budget findings at the budget's file:line, silenced like any
finding, and the week's timeline in `--output markdown` (a golden file: tests/data/budgets/), in the zone asked
for; the flags as a user gives them; `diff`'s comment on budgets that changed."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.options import BudgetView, PolicyOptions
from karpenter_policy.commands.check import check_command
from karpenter_policy.commands.diff import diff_command
from karpenter_policy.commands.flags import DiffFlags

DATA = Path(__file__).resolve().parents[1] / "data" / "budgets"
GOLDEN = DATA / "check-markdown.md"
ROOT = Path(__file__).resolve().parents[2]

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: web
spec:
  disruption:
    consolidateAfter: 1m
    budgets:
      - nodes: "10%"
      - nodes: "0"
        schedule: "{schedule}"
        duration: 8h
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [spot]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-prod
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: prod}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: prod}}}}]
"""
WEEK = BudgetView(week_of=date(2026, 3, 25))


def check(tmp_path: Path, text: str, output: str = "text", view: BudgetView = WEEK) -> tuple[int, str]:
    (tmp_path / "pool.yaml").write_text(text)
    result = check_command([str(tmp_path)], output, PolicyOptions(budgets=view))
    return result.exit_code, result.stdout


def test_the_markdown_timeline_is_the_golden_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)
    view = BudgetView(nodes=4, timezone="Europe/Paris", week_of=date(2026, 3, 25))
    result = check_command(["policies"], "markdown", PolicyOptions(budgets=view))
    assert result.stdout == GOLDEN.read_text(encoding="utf-8")


def test_the_timeline_follows_the_time_zone_karpenter_does_not(tmp_path: Path) -> None:
    text = POOL.format(schedule="0 8 * * mon-fri")
    _, utc = check(tmp_path, text, "markdown")
    _, paris = check(tmp_path, text, "markdown", BudgetView(timezone="Europe/Paris", week_of=date(2026, 3, 25)))
    assert "| Mon 08:00 | Mon 16:00 | 0 (budgets[1]) |" in utc and "(UTC)" in utc
    assert "| Mon 09:00 | Mon 17:00 | 0 (budgets[1]) |" in paris and "(Europe/Paris)" in paris


def test_a_budget_finding_is_at_the_budget_s_line(tmp_path: Path) -> None:
    code, out = check(tmp_path, POOL.format(schedule="TZ=Europe/Paris 0 9 * * mon-fri"))
    assert code == 1
    assert f"{tmp_path / 'pool.yaml'}:11:19: error: NodePool/web: Karpenter cannot parse this schedule" in out
    assert "[budget-unreadable]" in out


def test_a_directive_silences_a_budget_finding(tmp_path: Path) -> None:
    text = POOL.format(schedule="0 22 * * *").replace('      - nodes: "0"', '      - nodes: "50%"').replace(
        '      - nodes: "50%"', '      # karpenter-policy: disable=budget-overlap\n      - nodes: "50%"')
    code, out = check(tmp_path, text)
    assert code == 0 and "budget-overlap" not in out and "1 finding suppressed: 0 errors, 0 warnings" in out
    code, out = check(tmp_path, text.replace("      # karpenter-policy: disable=budget-overlap\n", ""))
    assert code == 0 and "10:9: warning: NodePool/web: this budget never decides" in out and "[budget-overlap]" in out


def test_sound_budgets_say_nothing(tmp_path: Path) -> None:
    code, out = check(tmp_path, POOL.format(schedule="0 8 * * mon-fri"))
    assert code == 0 and "budget-" not in out


def test_the_flags(tmp_path: Path) -> None:
    (tmp_path / "pool.yaml").write_text(POOL.format(schedule="0 8 * * mon-fri"))
    base = [sys.executable, "-m", "karpenter_policy.cli", "check", str(tmp_path), "--output", "markdown"]
    done = subprocess.run([*base, "--nodes", "30", "--timezone", "Asia/Kolkata", "--budget-week", "2026-03-25"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "30 nodes (--nodes)" in done.stdout and "week of Mon 2026-03-23 (Asia/Kolkata)" in done.stdout
    assert "| Mon 13:30 | Mon 21:30 | 0 (budgets[1]) |" in done.stdout
    refused = subprocess.run([*base, "--timezone", "Mars/Olympus"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "'Mars/Olympus' is not a time zone" in refused.stderr


def test_diff_comments_on_the_stretches_whose_allowance_changed(tmp_path: Path) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    base.mkdir()
    head.mkdir()
    (base / "pool.yaml").write_text(POOL.format(schedule="0 8 * * mon-fri"))
    (head / "pool.yaml").write_text(POOL.format(schedule="0 9 * * mon-fri"))
    flags = DiffFlags(base=str(base), head=str(head), output="markdown", exit_code_on_diff=True)
    out = diff_command(flags, load_catalog())
    assert out.exit_code == 1, "a budget change is a difference"
    assert "#### Disruption budgets changed, week of Mon " in out.stdout
    assert "NodePool <code>web</code> (pool.yaml:1): 10 nodes (assumed; --nodes N to change): BASE → HEAD" in (
        out.stdout)
    assert "| Mon 08:00 | Mon 09:00 | 0 (budgets[1]) → 1 (budgets[0]) |" in out.stdout
    assert "| Mon 16:00 | Mon 17:00 | 1 (budgets[0]) → 0 (budgets[1]) |" in out.stdout
    same = diff_command(DiffFlags(base=str(base), head=str(base), output="markdown"), load_catalog())
    assert "Disruption budgets" not in same.stdout


def test_json_carries_the_week(tmp_path: Path) -> None:
    code, out = check(tmp_path, POOL.format(schedule="0 8 * * mon-fri"), "json")
    (week,) = json.loads(out)["budgets"]
    assert (week["nodepool"], week["nodes"], week["nodes_from"]) == ("web", 10, "assumed; --nodes N to change")
    assert (week["start"], week["end"]) == ("2026-03-23T00:00:00Z", "2026-03-30T00:00:00Z")
    drifted = week["reasons"]["Drifted"]["spans"]
    assert drifted[:2] == [
        {"start": "2026-03-23T00:00:00Z", "end": "2026-03-23T08:00:00Z", "allowed": 1, "deciding": [0],
         "unreadable": []},
        {"start": "2026-03-23T08:00:00Z", "end": "2026-03-23T16:00:00Z", "allowed": 0, "deciding": [1],
         "unreadable": []},
    ]
