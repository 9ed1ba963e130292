"""`plan` with BASE = HEAD on Karpenter v1 NodePools: consolidation's commands side by side, as Karpenter v1.14.1's
orchestration queue runs them (core pkg/controllers/disruption/queue.go, controller.go) — a command started, the
next decided at once with the candidates under way left out and counted in their NodePool's budget; each command
held 15 s for validation first (consolidation.go `commandValidationDelay`) and done once its replacement is
initialized (`--node-startup`) and its nodes drained (`--pod-startup` a round). `moves[].wave` says which moves run
together; a Provisioner's move has none (v0.31.1: one command at a time, tests/plan/test_consolidation.py)."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.consolidation import Consolidation
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import Fleet
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import Snapshot
from karpenter_policy.commands.plan.waves import Timing
from karpenter_policy.simulate.consolidation import TIMING, consolidate_now
from tests.plan.snapshots import node, pod, policies, provisioner, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies
from tests.profiles import deterministic

START = "2026-11-30T09:00:00Z"
INITIALIZED = {"karpenter.sh/initialized": "true"}
DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


def disruption(budgets: str = "[{nodes: '100%'}]") -> str:
    return f"  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s\n" \
           f"    budgets: {budgets}\n"


def team_pod(name: str, node_name: str, team: str, cpu: str = "300m") -> dict[str, Any]:
    return pod(name, node_name, f"web-{team}", cpu=cpu, node_selector={"team": team})


def plan(tmp_path: Path, documents: list[str], items: list[dict[str, Any]], *,
         output: str = "json", policy_dir: str | None = None) -> Any:
    same = policy_dir or v1_policies(tmp_path / "p", *documents)
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, base=same, head=same, output=output),
                          load_catalog(), consolidate=consolidate_now)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["consolidation"] if output == "json" else result.stdout


def pool_items(name: str, pool: str, instance_type: str, pods: list[dict[str, Any]], *,
               annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    team = pool.removeprefix("team-")
    return [pool_node(name, pool, instance_type=instance_type, labels={**INITIALIZED, "team": team},
                      annotations=annotations),
            claim(name, pool, instance_type=instance_type), *pods]


def two_pools(tmp_path: Path, budgets: str) -> dict[str, Any]:
    """Two NodePools, each with one m5.xlarge whose one pod (it selects its team) a cheaper node takes: neither
    pod may go to the other pool, so no one command (one replacement at most) takes both nodes."""
    documents = [nodepool(f"team-{t}", labels=f"team: {t}", extra=disruption(budgets)) for t in ("a", "b")]
    items = [*pool_items("a0", "team-a", "m5.xlarge", [team_pod("web-a-0", "a0", "a")]),
             *pool_items("b0", "team-b", "m5.xlarge", [team_pod("web-b-0", "b0", "b")])]
    return plan(tmp_path, documents, items)


def test_two_nodepools_consolidate_side_by_side(tmp_path: Path) -> None:
    """controller.go `Reconcile`: after a command starts the controller decides again at once
    (`RequeueImmediately`); queue.go `StartCommand` marks its candidates for deletion, and the next decision
    leaves them out (suite_test.go:1877 "should not consider candidates that are actively being processed in the
    queue"). Team b's node is decided while team a's replacement is still launching: both moves are of wave 0,
    15 s apart (each held for validation), the second starting before the first ends (60 s node startup)."""
    found = two_pools(tmp_path, "[{nodes: '100%'}]")

    assert [(m["stage"], m["action"], m["removed"], m["wave"]) for m in found["moves"]] == [
        ("single-node", "replace", ["a0"], 0),
        ("single-node", "replace", ["b0"], 0),
    ]
    assert [m["start"] for m in found["moves"]] == ["2026-11-30T09:00:15Z", "2026-11-30T09:00:30Z"]


def test_a_budget_of_one_node_holds_the_next_move_until_the_first_finishes(tmp_path: Path) -> None:
    """helpers.go `BuildDisruptionBudgetMapping`: a node marked for deletion uses up its NodePool's allowance. One
    NodePool whose budget is one node, two nodes that can go: the second command waits until the first has
    finished — its replacement aside, a delete: its pod evicted and Ready elsewhere (15 s) — and is of wave 1."""
    budgets = "[{nodes: '1'}]"
    items = [*pool_items("n0", "team-a", "m5.large", [team_pod("web-0", "n0", "a")]),
             *pool_items("n1", "team-a", "m5.xlarge", [team_pod("web-1", "n1", "a"), team_pod("web-2", "n1", "a")]),
             *pool_items("keep", "team-a", "m5.xlarge", [team_pod("web-3", "keep", "a")],
                         annotations=DO_NOT_DISRUPT)]
    found = plan(tmp_path, [nodepool("team-a", labels="team: a", extra=disruption(budgets))], items)

    assert [(m["action"], m["removed"], m["wave"], m["start"]) for m in found["moves"]] == [
        ("delete", ["n1"], 0, "2026-11-30T09:00:15Z"),  # decided at 0, validated 15 s; drained by 09:00:30
        ("delete", ["n0"], 1, "2026-11-30T09:00:45Z"),  # decided once n1 is gone (09:00:30), validated 15 s
    ]


def test_a_budget_of_30_percent_takes_three_of_ten_nodes_at_a_time(tmp_path: Path) -> None:
    """consolidation_test.go:476 "should only allow 3 nodes to be deleted in single node consolidation delete": ten
    nodes of one NodePool whose budget is 30 %, each with one pod of which two fit a node — the reconciles before
    the queue runs its commands disrupt three nodes, no more. Here the first wave deletes three nodes (the
    decider finds them in one multi-node delete where Karpenter's test, its multi-node skipped, enqueues three
    single-node ones), and no later wave takes more than three (this catalog then has cheaper nodes for the
    pods, Karpenter's test none)."""
    items: list[dict[str, Any]] = []
    for i in range(10):
        items += pool_items(f"n{i}", "team-a", "m5.2xlarge", [team_pod(f"web-{i}", f"n{i}", "a", cpu="3500m")])
    found = plan(tmp_path, [nodepool("team-a", labels="team: a", extra=disruption("[{nodes: '30%'}]"))], items)

    by_wave: Counter[int] = Counter()
    for move in found["moves"]:
        by_wave[move["wave"]] += len(move["removed"])
    assert [m["action"] for m in found["moves"] if m["wave"] == 0] == ["delete"]
    assert by_wave[0] == 3
    assert max(by_wave.values()) == 3


def test_nodepool_candidates_go_by_price_over_reschedule_cost(tmp_path: Path) -> None:
    """consolidation.go:138 `sortCandidates` (by `SavingsRatio`, price / reschedule disruption cost, highest first;
    singlenodeconsolidation.go:141 `SortCandidates`), not v0.31's lowest disruption cost first: n1 (m5.xlarge,
    $0.192/h, two pods: 0.192 / 3) goes before n0 (m5.large, $0.096/h, one pod: 0.096 / 2), though v0.31 would
    take n0 (cost 1 < 2) first. A budget of one node makes it single-node consolidation, one at a time."""
    items = [*pool_items("n0", "team-a", "m5.large", [team_pod("web-0", "n0", "a")]),
             *pool_items("n1", "team-a", "m5.xlarge", [team_pod("web-1", "n1", "a"), team_pod("web-2", "n1", "a")]),
             *pool_items("keep", "team-a", "m5.xlarge", [team_pod("web-3", "keep", "a")],
                         annotations=DO_NOT_DISRUPT)]
    found = plan(tmp_path, [nodepool("team-a", labels="team: a", extra=disruption("[{nodes: '1'}]"))], items)

    assert [m["removed"] for m in found["moves"]] == [["n1"], ["n0"]]
    assert found["not_candidates"] == [{"node": "keep",
                                        "reason": "the node has the karpenter.sh/do-not-disrupt annotation"}]


def test_the_text_and_markdown_name_the_wave(tmp_path: Path) -> None:
    text = plan_output(tmp_path, "text")
    assert "single-node replace: a0 → " in text
    assert "· wave 0, starts 2026-11-30T09:00:15Z" in text
    markdown = plan_output(tmp_path / "md", "markdown")
    assert "| 1 | single-node (wave 0) | replace | a0 |" in markdown


def plan_output(tmp_path: Path, output: str) -> str:
    documents = [nodepool(f"team-{t}", labels=f"team: {t}", extra=disruption()) for t in ("a", "b")]
    items = [*pool_items("a0", "team-a", "m5.xlarge", [team_pod("web-a-0", "a0", "a")]),
             *pool_items("b0", "team-b", "m5.xlarge", [team_pod("web-b-0", "b0", "b")])]
    found: str = plan(tmp_path, documents, items, output=output)
    return found


def test_a_provisioners_command_waits_for_the_nodepools_commands_under_way(tmp_path: Path) -> None:
    """A Provisioner's command runs alone (v0.31.1 deprovisioning/controller.go: one command at a time), NodePools'
    side by side: the NodePool's empty node goes first (emptiness before multi-node consolidation), and the
    Provisioner's two nodes, which one cheaper node replaces, go only once it is gone — the NodePool's moves after
    it are of a later wave. A Provisioner's move has no `wave` or `start` (its JSON is v0.31's, as before)."""
    directory = tmp_path / "p"
    v1_policies(directory, nodepool("team-a", labels="team: a", extra=disruption()))
    policies(directory, provisioner() + "  consolidation: {enabled: true}\n")
    items = [node("n0", labels=INITIALIZED), node("n1", labels=INITIALIZED),
             pod("web-0", "n0", "web", cpu="300m"), pod("web-1", "n1", "web", cpu="300m"),
             *pool_items("a-empty", "team-a", "m5.large", []),
             *pool_items("a0", "team-a", "m5.xlarge", [team_pod("web-a-0", "a0", "a")])]
    found = plan(tmp_path, [], items, policy_dir=str(directory))

    moves = found["moves"]
    assert (moves[0]["stage"], moves[0]["removed"], moves[0]["wave"]) == ("empty", ["a-empty"], 0)
    assert moves[1]["removed"] == ["n0", "n1"] and "wave" not in moves[1] and "start" not in moves[1]
    assert [m["removed"] for m in moves[2:]] == [["a0"]]
    assert moves[2]["wave"] == 2  # the empty node's command ended (wave 1), then the Provisioner's


FLEETS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["m5.large", "m5.xlarge"]),
                            st.lists(st.sampled_from(["250m", "1000m"]), max_size=3)), min_size=1, max_size=6)


@deterministic(15)
@given(fleet=FLEETS, allowed=st.integers(min_value=1, max_value=3))
def test_a_wave_never_takes_more_of_a_nodepool_than_its_budget(fleet: list[tuple[str, str, list[str]]],
                                                               allowed: int) -> None:
    """Within a wave no command has finished, so every command of the wave is under way at its end: the nodes a
    wave removes of a NodePool are at most its budget (`nodes: k`, helpers.go `BuildDisruptionBudgetMapping` less
    the nodes marked for deletion); a node goes in one move at most, and never in the wave its replacement was
    launched in (a replacement under way is no candidate, consolidation_test.go:4706)."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        documents = [nodepool(f"team-{t}", labels=f"team: {t}", extra=disruption(f"[{{nodes: '{allowed}'}}]"))
                     for t in ("a", "b")]
        items: list[dict[str, Any]] = []
        for i, (team, instance_type, requests) in enumerate(fleet):
            pods = [team_pod(f"web-{i}-{j}", f"n{i}", team, cpu) for j, cpu in enumerate(requests)]
            items += pool_items(f"n{i}", f"team-{team}", instance_type, pods)
        found = plan(root, documents, items)

    pool_of = {f"n{i}": f"team-{team}" for i, (team, _, _) in enumerate(fleet)}
    removed: Counter[tuple[int, str]] = Counter()
    launched_in: dict[str, int] = {}
    seen: list[str] = []
    for move in found["moves"]:
        pools = {pool_of.get(name) for name in move["removed"]}
        for name in move["removed"]:
            assert launched_in.get(name, -1) < move["wave"], f"{name} taken while its command is under way"
            removed[move["wave"], pool_of.get(name) or "?"] += 1
        for _ in move["launched"]:  # the moves' replacements are named consolidation-1, -2, … as launched
            name = f"consolidation-{len(launched_in) + 1}"
            launched_in[name] = move["wave"]
            only = next(iter(pools)) if len(pools) == 1 else None
            if only is not None:
                pool_of[name] = only
        seen += move["removed"]
    assert len(seen) == len(set(seen))
    assert all(count <= allowed for (_, pool), count in removed.items() if pool != "?")


def slot_items(name: str, instance_type: str, pods: list[dict[str, Any]], *, initialized: bool = True,
               annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A node of NodePool team-a labelled `slot: x` (no node the NodePool launches has it)."""
    labels = {**(INITIALIZED if initialized else {}), "team": "a", "slot": "x"}
    return [pool_node(name, "team-a", instance_type=instance_type, labels=labels, annotations=annotations),
            claim(name, "team-a", instance_type=instance_type), *pods]


def slot_pod(name: str, node_name: str, cpu: str) -> dict[str, Any]:
    return pod(name, node_name, name, cpu=cpu, node_selector={"slot": "x"})


def test_a_later_decision_places_a_deleting_nodes_pods_again(tmp_path: Path) -> None:
    """Core pkg/controllers/disruption/helpers.go:99 (`SimulateScheduling`: `deletingNodes.CurrentlyReschedulablePods`)
    and suite_test.go:194 "should allow pods on deleting nodes to reschedule to uninitialized nodes": the pods of a
    node being deleted stay bound to it until the drain and each later decision places them again, where a pod of a
    node being deleted may count on a node not initialized yet (a candidate's may not: `UninitializedNodeError`).

    Pods p (800m, on a0) and q (1200m, on b0) only run on `slot: x` nodes: `keep` (m5.large, do-not-disrupt: not a
    candidate) has room for one of them, `fresh` (m5.large) is not initialized yet. The first command deletes a0 (the
    higher price over reschedule cost), its simulation putting p on `keep`. The next decision takes b0: q goes onto
    `keep` and p, placed again, onto `fresh`. Binding p to `keep` from the first command's start (before) left q no
    initialized room, and b0 stayed. At the drains p goes to `fresh` (nominated, it waits for it) and q to `keep`."""
    items = [*slot_items("a0", "m5.xlarge", [slot_pod("p", "a0", "800m")]),
             *slot_items("b0", "m5.large", [slot_pod("q", "b0", "1200m")]),
             *slot_items("keep", "m5.large", [], annotations=DO_NOT_DISRUPT),
             *slot_items("fresh", "m5.large", [], initialized=False)]
    found = captured(tmp_path, [nodepool("team-a", labels="team: a", extra=disruption())], items)

    assert [(m.stage, m.action, m.removed, m.wave) for m in found.moves] == [
        ("single-node", "delete", ("a0",), 0),
        ("single-node", "delete", ("b0",), 0),
    ]
    assert {k: v for k, v in found.placement.items() if k in ("default/p", "default/q")} == {
        "default/p": "fresh", "default/q": "keep"}
    assert found.nodes == ["fresh", "keep"]


def captured(root: Path, documents: list[str], items: list[dict[str, Any]]) -> Consolidation:
    """The plan's consolidation as worked out (with where every pod is at the end, which the JSON leaves out)."""
    seen: list[Consolidation] = []

    def capture(snapshot: Snapshot, fleet: Fleet, head: PolicySide, catalog: Catalog, now: dt.datetime,
                budget: float, timing: Timing = TIMING) -> Consolidation:
        seen.append(consolidate_now(snapshot, fleet, head, catalog, now, budget, timing))
        return seen[-1]

    same = v1_policies(root / "p", *documents)
    file = write(root / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, base=same, head=same), load_catalog(),
                          consolidate=capture)
    assert result.exit_code == 0, result.stderr
    return seen[0]


@deterministic(15)
@given(fleet=FLEETS, allowed=st.integers(min_value=1, max_value=3))
def test_every_pod_ends_placed_on_a_node_left(fleet: list[tuple[str, str, list[str]]], allowed: int) -> None:
    """Pods bound to their nodes until the drain and placed again by each decision (helpers.go:99): at the end every
    pod runs on a node that is still there — none left pending, none on a node a move removed — and a node removed
    had its pods moved at its drain."""
    with tempfile.TemporaryDirectory() as directory:
        documents = [nodepool(f"team-{t}", labels=f"team: {t}", extra=disruption(f"[{{nodes: '{allowed}'}}]"))
                     for t in ("a", "b")]
        items: list[dict[str, Any]] = []
        for i, (team, instance_type, requests) in enumerate(fleet):
            pods = [team_pod(f"web-{i}-{j}", f"n{i}", team, cpu) for j, cpu in enumerate(requests)]
            items += pool_items(f"n{i}", f"team-{team}", instance_type, pods)
        found = captured(Path(directory), documents, items)

    names = {f"default/{item['metadata']['name']}" for item in items if item["kind"] == "Pod"}
    removed = {name for move in found.moves for name in move.removed}
    assert set(found.placement) == names
    assert set(found.placement.values()) <= set(found.nodes)
    assert not removed & set(found.nodes)
