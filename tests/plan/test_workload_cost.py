"""Cost per workload (`commands.plan.workloadcost`): a node's price split among its pods by their CPU and memory
requests, before, at each workload's own peak and after the waves, in JSON, text and the markdown comment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.fleet import FleetPod
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.workloadcost import shares
from tests.plan.snapshots import FULL, node, pod, policies, provisioner, write
from tests.profiles import deterministic

START = "2026-11-30T09:00:00Z"
M5_LARGE_MONTHLY = 0.096 * 730


def run(tmp_path: Path, *items: dict[str, Any], output: str = "json") -> Any:
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output=output, base=base, head=head),
                          load_catalog())
    assert result.stderr == ""
    return json.loads(result.stdout) if output == "json" else result.stdout


def by_workload(doc: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    return {w["workload"]: (w["before_monthly"], w["peak_monthly"], w["after_monthly"])
            for w in doc["cost"]["workloads"]}


def test_a_node_is_shared_by_requests_and_each_workload_peaks_while_old_and_new_nodes_run(tmp_path: Path) -> None:
    doc = run(tmp_path, node("a"), pod("web-1", "a", "web", cpu="600m", memory="1536Mi"),
              pod("api-1", "a", "api", cpu="200m", memory="512Mi"))

    web, api = 0.75 * M5_LARGE_MONTHLY, 0.25 * M5_LARGE_MONTHLY
    assert [w["workload"] for w in doc["cost"]["workloads"]] == ["default/Deployment/web", "default/Deployment/api"]
    # the drift wave runs one m5.large beside the old one, then the old one goes
    assert by_workload(doc) == {
        "default/Deployment/web": pytest.approx((web, 2 * web, web), abs=0.01),
        "default/Deployment/api": pytest.approx((api, 2 * api, api), abs=0.01),
    }


def test_a_workload_on_a_node_the_change_keeps_costs_the_same_throughout(tmp_path: Path) -> None:
    doc = run(tmp_path, node("a"), pod("web-1", "a", "web", cpu=FULL), node("b", annotations={}),
              pod("db-0", "b", "db", owner=("StatefulSet", "db")))

    assert by_workload(doc)["default/StatefulSet/db"] == pytest.approx((M5_LARGE_MONTHLY,) * 3, abs=0.01)


def test_the_text_and_the_markdown_comment_show_the_workloads(tmp_path: Path) -> None:
    items = (node("a"), pod("web-1", "a", "web"))
    text = run(tmp_path, *items, output="text")
    markdown = run(tmp_path, *items, output="markdown")

    assert "cost a month per workload (a pod's share of its node by requests):\n" \
           "  default/Deployment/web: $70.08 → peak $140.16 → $70.08\n" in text
    assert "<details><summary>Cost per workload (a pod's share of its node by requests)</summary>" in markdown
    assert "| `default/Deployment/web` | $70.08 | $140.16 | $70.08 |" in markdown


def _fleet_pod(index: int, workload: str, cpu: int, memory: int) -> FleetPod:
    made = pod(f"p{index}", "a", workload, cpu=f"{cpu}m", memory=f"{memory}Mi", owner=None)
    return FleetPod(made["metadata"]["name"], "a", workload, moved=False, do_not_evict=False, obj=made)


@deterministic(200)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 4000), st.integers(0, 8192)), min_size=1,
                max_size=8))
def test_the_shares_of_a_node_sum_to_one_and_follow_the_requests(requests: list[tuple[str, int, int]]) -> None:
    pods = [_fleet_pod(i, w, cpu, memory) for i, (w, cpu, memory) in enumerate(requests)]

    got = shares(pods)

    assert sum(got.values()) == pytest.approx(1.0)
    assert all(v >= 0 for v in got.values())
    cpu_total, memory_total = sum(r[1] for r in requests), sum(r[2] for r in requests)
    for workload, share in got.items():
        mine = [r for r in requests if r[0] == workload]
        parts = [sum(r[1] for r in mine) / cpu_total] if cpu_total else []
        parts += [sum(r[2] for r in mine) / memory_total] if memory_total else []
        expected = sum(parts) / len(parts) if parts else len(mine) / len(requests)
        assert share == pytest.approx(expected)


def test_a_pod_moved_onto_a_node_with_room_takes_its_share_of_that_node(tmp_path: Path) -> None:
    """web's pod leaves the drifted a for b, which has room (no replacement): b's price is then shared by both."""
    doc = run(tmp_path, node("a"), pod("web-1", "a", "web"), node("b", annotations={}),
              pod("db-0", "b", "db", owner=("StatefulSet", "db")))

    costs = by_workload(doc)
    assert doc["waves"][0]["replacements"] == []
    assert costs["default/Deployment/web"][2] == pytest.approx(M5_LARGE_MONTHLY / 2, abs=0.01)
    assert costs["default/StatefulSet/db"] == pytest.approx((M5_LARGE_MONTHLY, M5_LARGE_MONTHLY,
                                                             M5_LARGE_MONTHLY / 2), abs=0.01)
