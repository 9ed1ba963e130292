"""`plan` with BASE = HEAD says what consolidation would do now — the controller's own decisions
(`reconcile/disruption/decider.py`, Karpenter v0.31's empty, multi-node and single-node consolidation) run on the
snapshot's fleet, one command after another: the moves in order with the nodes removed and launched, $/month saved
and pods evicted per workload; the Karpenter nodes it does not take and why, in Karpenter's words; in JSON, text and
the markdown comment, and through the CLI. A property: the moves never take a pod a PodDisruptionBudget protects,
and leave every pod placed on a node that is still there."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.consolidation import Consolidation
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import Fleet
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import Snapshot
from karpenter_policy.commands.plan.waves import Timing
from karpenter_policy.simulate.consolidation import TIMING, consolidate_now
from tests.plan.snapshots import node, pdb, pod, policies, provisioner, write
from tests.profiles import deterministic

ROOT = Path(__file__).resolve().parents[2]
START = "2026-11-30T09:00:00Z"
INITIALIZED = {"karpenter.sh/initialized": "true"}
CONSOLIDATING = provisioner() + "  consolidation: {enabled: true}\n"


def _plan(root: Path, items: list[dict[str, Any]], *, head: str = CONSOLIDATING, base: str | None = None,
          output: str = "json", timeout: str = "60s") -> CommandOutput:
    head_dir = policies(root / "head", head)
    base_dir = policies(root / "base", base) if base is not None else head_dir
    file = write(root / "snapshot.json", *items)
    return plan_command(PlanOptions(snapshot=(file,), start=START, base=base_dir, head=head_dir, output=output,
                                    consolidation_timeout=timeout), load_catalog(), consolidate=consolidate_now)


def _fleet(pods_per_node: list[list[str]]) -> list[dict[str, Any]]:
    """Initialized m5.large nodes n0, n1, … each running web pods of these CPU requests."""
    items: list[dict[str, Any]] = [node(f"n{i}", labels=INITIALIZED) for i in range(len(pods_per_node))]
    for i, requests in enumerate(pods_per_node):
        items += [pod(f"web-{i}-{j}", f"n{i}", "web", cpu=cpu) for j, cpu in enumerate(requests)]
    return items


def test_the_moves_in_karpenters_order_with_savings_and_pods_evicted(tmp_path: Path) -> None:
    result = _plan(tmp_path, _fleet([["300m"], ["300m"], ["300m"], []]))

    assert result.exit_code == 0, result.stderr
    consolidation = json.loads(result.stdout)["consolidation"]
    moves = [(m["stage"], m["action"], m["removed"], m["launched"], m["evicted"]) for m in consolidation["moves"]]
    assert moves == [
        ("empty", "delete", ["n3"], [], {}),  # the empty node first, all at once
        ("multi-node", "delete", ["n0", "n1"], [], {"default/Deployment/web": 2}),  # their pods fit on n2
    ]
    # m5.large on demand in us-east-1: $0.096/h, 730 hours a month
    assert [m["saved_monthly"] for m in consolidation["moves"]] == [70.08, 140.16]
    assert (consolidation["saved_monthly"], consolidation["evicted_pods"]) == (210.24, 2)
    assert consolidation["not_candidates"] == [  # after the moves, what the last decision found
        {"node": "n2", "reason": "consolidation: can't replace with a cheaper node"}]


def test_a_cheaper_node_replaces_one_that_is_too_big(tmp_path: Path) -> None:
    items = [node("big", instance_type="m5.4xlarge", labels=INITIALIZED), pod("web-0", "big", "web", cpu="300m")]

    consolidation = json.loads(_plan(tmp_path, items).stdout)["consolidation"]

    (move,) = consolidation["moves"]
    assert (move["stage"], move["action"], move["removed"], move["evicted_pods"]) == (
        "single-node", "replace", ["big"], 1)
    assert len(move["launched"]) == 1 and move["launched"][0] != "m5.4xlarge"
    assert move["saved_monthly"] > 0


def test_why_a_node_is_not_a_candidate_in_karpenters_words(tmp_path: Path) -> None:
    items = [
        *(node(n, labels=INITIALIZED) for n in ("evict", "budget", "spare")),
        node("young"),  # no karpenter.sh/initialized label
        node("asked", labels=INITIALIZED, annotations={"karpenter.sh/do-not-consolidate": "true"}),
        node("orphan", provisioner="gone", labels=INITIALIZED),
        pod("batch-0", "evict", "batch", annotations={"karpenter.sh/do-not-evict": "true"}),
        pod("db-0", "budget", "db"),
        pdb("db", "db", maxUnavailable=0),
    ]

    consolidation = json.loads(_plan(tmp_path, items).stdout)["consolidation"]

    assert {n["node"]: n["reason"] for n in consolidation["not_candidates"]} == {
        "evict": "pod default/batch-0 has the karpenter.sh/do-not-evict annotation",
        "budget": "PodDisruptionBudget default/db prevents pod evictions",
        "young": "state node isn't initialized",
        "asked": "karpenter.sh/do-not-consolidate annotation exists",
        "orphan": 'provisioner "gone" can\'t be resolved for state node',
    }
    assert [m["removed"] for m in consolidation["moves"]] == [["spare"]]  # the empty one goes


def test_a_provisioner_without_consolidation_takes_nothing(tmp_path: Path) -> None:
    consolidation = json.loads(_plan(tmp_path, _fleet([[], ["300m"]]), head=provisioner()).stdout)["consolidation"]

    assert consolidation["moves"] == []
    assert {n["node"]: n["reason"] for n in consolidation["not_candidates"]} == {
        "n0": 'Provisioner "default" has consolidation disabled',
        "n1": 'Provisioner "default" has consolidation disabled',
    }


def test_only_when_base_is_head(tmp_path: Path) -> None:
    changed = _plan(tmp_path, _fleet([[]]), base=provisioner() + "  consolidation: {enabled: false}\n")

    assert "consolidation" not in json.loads(changed.stdout)


def test_the_consolidation_timeout_bounds_it_and_0s_turns_it_off(tmp_path: Path) -> None:
    items = _fleet([["300m"], ["300m"], []])

    stopped = json.loads(_plan(tmp_path, items, timeout="1us").stdout)
    off = json.loads(_plan(tmp_path, items, timeout="0s").stdout)
    refused = _plan(tmp_path, items, timeout="soon")

    assert stopped["consolidation"]["moves"] == []
    assert stopped["consolidation"]["not_candidates"] == []  # every node is a candidate: none looked at yet
    assert stopped["consolidation"]["notes"] == [
        "consolidation stopped after 0 moves: working out more took longer than --consolidation-timeout (1e-06s); "
        "later moves, and what consolidating the nodes left would find, are not shown"]
    assert "consolidation" not in off
    assert "BASE = HEAD: what consolidation would do now is not worked out (--consolidation-timeout 0s)" in off["notes"]
    assert refused.exit_code == 2 and "--consolidation-timeout \"soon\" is not a duration" in refused.stderr


def test_text_and_the_markdown_comment(tmp_path: Path) -> None:
    items = _fleet([["300m"], ["300m"], []])
    text = _plan(tmp_path, items, output="text").stdout
    markdown = _plan(tmp_path, items, output="markdown").stdout

    assert "consolidation now (BASE = HEAD): 2 moves, saving $140.16 a month, 1 pod evicted\n" in text
    assert "  1. empty delete: n2 · saves $70.08 a month · 0 pods evicted\n" in text
    assert "**consolidation now (BASE = HEAD): 2 moves, saving $140.16 a month, 1 pod evicted**" in markdown
    assert "<details><summary>Consolidation moves, in order</summary>" in markdown
    assert "| 2 | single-node | delete | n0 | — | $70.08 | 1 |" in markdown


def test_through_the_cli(tmp_path: Path) -> None:
    same = policies(tmp_path / "p", CONSOLIDATING)
    file = write(tmp_path / "s.json", *_fleet([[]]))

    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", same, same, "--snapshot", file,
                           "--start", START], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT)})

    assert done.returncode == 0, done.stderr
    assert "consolidation now (BASE = HEAD): 1 move, saving $70.08 a month, 0 pods evicted" in done.stdout


# --- the property -------------------------------------------------------------------------------------------------

TYPES = ["m5.large", "m5.xlarge", "m5.2xlarge"]
#: (node type, [(workload, CPU)]) per node; workload "db" is under a PDB that allows no disruption
Nodes = list[tuple[str, list[tuple[str, str]]]]


def _captured(root: Path, nodes: Nodes) -> tuple[Consolidation, list[dict[str, Any]]]:
    items: list[dict[str, Any]] = [pdb("db", "db", maxUnavailable=0)]
    for i, (instance_type, pods) in enumerate(nodes):
        items.append(node(f"n{i}", instance_type=instance_type, labels=INITIALIZED))
        items += [pod(f"{app}-{i}-{j}", f"n{i}", app, cpu=cpu) for j, (app, cpu) in enumerate(pods)]
    seen: list[Consolidation] = []

    def capture(snapshot: Snapshot, fleet: Fleet, head: PolicySide, catalog: Catalog, now: dt.datetime,
                budget: float, timing: Timing = TIMING) -> Consolidation:
        seen.append(consolidate_now(snapshot, fleet, head, catalog, now, budget, timing))
        return seen[-1]

    same = policies(root / "p", CONSOLIDATING)
    file = write(root / "s.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, base=same, head=same), load_catalog(),
                          consolidate=capture)
    assert result.exit_code == 0, result.stderr
    return seen[0], [i for i in items if i["kind"] == "Pod"]


@deterministic(15)
@given(st.lists(st.tuples(st.sampled_from(TYPES), st.lists(st.tuples(st.sampled_from(["web", "api", "db"]),
                                                                     st.sampled_from(["250m", "1000m", "3000m"])),
                                                           max_size=3)), min_size=1, max_size=5))
def test_the_moves_never_take_a_protected_pod_and_leave_every_pod_placed(nodes: Nodes) -> None:
    with tempfile.TemporaryDirectory() as root:
        consolidation, pods = _captured(Path(root), nodes)

    removed = {name for move in consolidation.moves for name in move.removed}
    assert set(consolidation.placement) == {f"default/{p['metadata']['name']}" for p in pods}  # every pod placed
    assert set(consolidation.placement.values()) <= set(consolidation.nodes)  # on a node that is still there
    assert not removed & set(consolidation.nodes)
    for p in pods:
        if p["metadata"]["labels"]["app"] == "db":  # the PDB allows no disruption: never moved
            assert consolidation.placement[f"default/{p['metadata']['name']}"] == p["spec"]["nodeName"]


def test_a_node_without_status_is_read_as_saying_nothing(tmp_path: Path) -> None:
    """A snapshot's Node with no `status` reads as a Node that reports nothing: the plan goes on, and the other
    nodes' moves are made."""
    items = _fleet([["300m"], ["300m"], []])
    items[0]["status"] = None

    result = _plan(tmp_path, items)

    assert result.exit_code == 0, result.stderr
    consolidation = json.loads(result.stdout)["consolidation"]
    assert "n2" in {name for move in consolidation["moves"] for name in move["removed"]}


@pytest.mark.parametrize("status", ["x", [], [1], True, -1])
def test_a_node_whose_status_is_not_a_map_is_refused_naming_it(tmp_path: Path, status: Any) -> None:
    """A snapshot's Node whose `status` is of another shape (a hostile probe's find: the consolidation's copy of it
    raised TypeError) is an error naming the item, as any field the plan reads of another shape: no plan is made on
    a node whose room and readiness cannot be read."""
    items = _fleet([["300m"], ["300m"], []])
    items[0]["status"] = status

    result = _plan(tmp_path, items)

    assert result.exit_code == 2, result.stderr
    assert ": status is not an object: " in result.stderr and "the snapshot cannot be trusted: no plan" in result.stderr
