"""Karpenter v0.31's waves in virtual time (`waves`, `room`, `pdbstate`, `rolloutbudget`): a command waits for its
replacement to be initialized before it deletes the candidate, at most as long as v0.31.1's `waitForReadiness`
(`pkg/controllers/deprovisioning/controller.go`, `waitRetryOptions`: ~9.5 minutes), after which the command fails
and the loop goes on; a simulation that would put a pod on a replacement not initialized yet is refused
(`helpers.go:115`, "would schedule against a non-initialized node") and the candidate waits; each wave's
PodDisruptionBudgets allow what the pods healthy at its moment leave (`currentHealthy − desiredHealthy`), for v0.31
and v1 alike; `--rollout-timeout` bounds the v0.31 planning too; and across the waves no pod is lost or placed
twice."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.proof.placement import templates_for
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.pdbstate import PdbState
from karpenter_policy.commands.plan.snapshot import read_snapshot
from karpenter_policy.commands.plan.waves import Drain, PdbBudgets, Replacements, Timing, drains_together, plan_waves
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate, Scheduler
from tests.plan import test_nodepool_room as v1
from tests.plan.snapshots import FULL, listing, node, pdb, pod, policies, provisioner, write
from tests.plan.test_nodepool_room import START_TIME, _replay
from tests.plan.v1snapshots import nodepool, v1_policies
from tests.profiles import deterministic

START = "2026-11-30T09:00:00Z"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plan"


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """BASE: default (team: web); HEAD relabels it (team: platform): every node with the hash drifts."""
    root = tmp_path_factory.mktemp("sides")
    return policies(root / "base", provisioner()), policies(root / "head", provisioner(labels="team: platform"))


def plan(sides: tuple[str, str], tmp_path: Path, *items: dict[str, Any], **options: Any) -> dict[str, Any]:
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="json", base=sides[0], head=sides[1],
                                      **options), load_catalog())
    assert result.stderr == ""
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _shown(doc: dict[str, Any]) -> list[tuple[str, list[str], int]]:
    return [(w["start"][11:19], w["nodes"], len(w["replacements"])) for w in doc["waves"]]


def test_a_replacement_slower_than_waitForReadiness_fails_its_command_and_the_candidate_is_retried(
        sides: tuple[str, str], tmp_path: Path) -> None:
    """v0.31.1 controller.go `launchReplacementMachines` waits for the replacement to be initialized
    (`waitForReadiness`, machine_drift_test.go:235 "can replace drifted nodes": "deprovisioning won't delete the
    old machine until the new machine is ready") at most `waitRetryOptions`' ~9.5 minutes (570 s); past it the
    command fails, the candidate is uncordoned and kept (machine_expiration_test.go:341, "should uncordon nodes when
    expiration replacement fails"), the machine it launched stays, and the loop looks again at once (the error's
    requeue, controller.go:128). With `--node-startup 900`: `a`'s command at 10 s fails at 580 s (a wave that
    deletes nothing, `kept: ["a"]`, its launch in `replacements`); `a` is a candidate again, but its pod would go
    onto that replacement, not initialized before 910 s (helpers.go:115): it waits, and `b` goes at 580 s (its pod
    fits on `c`); `a` goes at the first poll after 910 s (595 s + 32 × 10 s = 915 s) onto its replacement,
    launching nothing. The old plan deleted `a` in its first wave and took `b` at 590 s."""
    doc = plan(sides, tmp_path, node("a", created="2026-11-20T08:00:00Z"), pod("api", "a", "api", cpu=FULL),
               node("b", created="2026-11-20T09:00:00Z"), pod("web", "b", "web"),
               node("c", annotations={}), pod("cache", "c", "cache"), node_startup=900.0)

    assert _shown(doc) == [("09:00:10", [], 1), ("09:09:40", ["b"], 0), ("09:15:15", ["a"], 0)]
    assert [w["kept"] for w in doc["waves"]] == [["a"], [], []]
    assert doc["waves"][0]["seconds"] == 570.0 and doc["waves"][0]["evicted_pods"] == 0
    assert {n["name"]: n["wave"] for n in doc["nodes"]}["a"] == 2
    assert any("the candidate is kept and the launched node stays; the candidate is tried again" in n
               for n in doc["notes"])
    assert doc["finishes"] and doc["blocked"] == [] and doc["pending"] == []
    # the node the failed command launched stays: a's and b's nodes go, c and it are left
    assert doc["cost"]["after_monthly"] == doc["cost"]["before_monthly"] * 2 / 3


def test_a_command_whose_pod_would_go_onto_a_replacement_not_initialized_waits_for_it(
        sides: tuple[str, str], tmp_path: Path) -> None:
    """v0.31.1 helpers.go:115 (`simulateScheduling`): a plan that puts a pod on a node not initialized is a pod
    error ("would schedule against a non-initialized node"), and drift.go's `ComputeCommand` skips the candidate
    ("cannot terminate drifted machine since scheduling simulation failed"). `a`'s command fails at 580 s (its
    replacement takes 900 s) and `a`, kept and uncordoned, has room: `b`'s small pod goes onto `a` at 580 s, and
    `a`, retried, waits for its replacement, then goes onto it at 915 s with `b`'s pod, which moves again. (`b` is
    of a type HEAD's template does not know: it offers `a`'s pod no room.) The old plan had `a` gone in its first
    wave, so `b` waited for `a`'s replacement."""
    doc = plan(sides, tmp_path, node("a", created="2026-11-20T08:00:00Z"), pod("api", "a", "api", cpu=FULL),
               node("b", instance_type="m99.large", created="2026-11-20T09:00:00Z"),
               pod("web", "b", "web", cpu="250m"), node_startup=900.0)

    assert _shown(doc) == [("09:00:10", [], 1), ("09:09:40", ["b"], 0), ("09:15:15", ["a"], 0)]
    assert doc["waves"][2]["evicted"] == {"default/Deployment/api": 1, "default/Deployment/web": 1}
    assert doc["pending"] == [] and doc["finishes"]


def test_a_budget_with_pods_still_coming_back_from_the_last_drain_holds_the_next_candidate(
        sides: tuple[str, str], tmp_path: Path) -> None:
    """A drain longer than `waitForDeletion`'s 570 s: `a`'s 20 `web` pods go one at a time (`maxUnavailable: 1`,
    30 s each: evicted from 10 s to 580 s onto `a-room`, which the scheduler asks before `b`; the last Ready at
    610 s) while the loop looks for its next command at 580 s (`waitForDeletion` gave up, then at once). Then one
    `web` pod is not healthy: the budget allows 0 (`currentHealthy − desiredHealthy` = 20 − 20), so
    `filterCandidates` (helpers.go:44) skips `b` ("PDB prevents pod evictions") until the poll at 610 s. An older
    plan computed the budget once from the snapshot and took `b` at 590 s."""
    items = [node("a", created="2026-11-20T08:00:00Z"),
             *(pod(f"web-{i}", "a", "web", cpu="50m", memory="64Mi") for i in range(20)),
             node("b", created="2026-11-20T09:00:00Z"), pod("web-b", "b", "web", cpu="50m", memory="64Mi"),
             node("a-room", annotations={}), pdb("web", "web", maxUnavailable=1)]

    doc = plan(sides, tmp_path, *items, pod_startup=30.0)

    assert _shown(doc) == [("09:00:10", ["a"], 0), ("09:10:10", ["b"], 0)]
    assert doc["waves"][0]["drain_seconds"] == 600.0 and doc["waves"][0]["slowed_by"] == {"default/web": 600.0}
    assert doc["waves"][1]["drain_seconds"] == 30.0


def test_v1_commands_side_by_side_share_a_budget_their_drains_use(tmp_path: Path) -> None:
    """Karpenter v1.14.1: a NodePool budget of 2 lets `n0` and `n1` go side by side, but their `web` pods share a
    PDB (`maxUnavailable: 1`): while `n0`'s drain has a pod down, the budget allows 0 and `n1` is no candidate
    (`ValidatePodsDisruptable`, pkg/controllers/disruption/types.go); it goes once `n0`'s last pod is Ready again
    (40 s). The old plan let both drain at 10 s, each as though the budget were its own."""
    items = [*v1.member("n0", created="2026-11-20T08:00:00Z"),
             *(pod(f"web-{i}", "n0", "web", cpu="100m") for i in range(2)),
             *v1.member("n1", created="2026-11-20T08:01:00Z"),
             *(pod(f"web-{i}", "n1", "web", cpu="100m") for i in range(2, 4)),
             *v1.member("a-spare", "other"), pdb("web", "web", maxUnavailable=1)]

    doc = v1.plan(v1.sides(tmp_path, '[{nodes: "2"}]'), tmp_path, *items)

    assert _shown(doc) == [("09:00:10", ["n0"], 0), ("09:00:40", ["n1"], 0)]
    assert [w["drain_seconds"] for w in doc["waves"]] == [30.0, 30.0]


def _removed_pair(tmp_path: Path, v1_pools: bool) -> tuple[str, str]:
    """BASE: `default` and `legacy`; HEAD removes `legacy` (Provisioners, or with `v1_pools` NodePools)."""
    if v1_pools:
        return (v1_policies(tmp_path / "base", nodepool(), nodepool("legacy", labels="team: legacy")),
                v1_policies(tmp_path / "head", nodepool()))
    return (policies(tmp_path / "base", provisioner(), provisioner("legacy", labels="team: legacy")),
            policies(tmp_path / "head", provisioner()))


@pytest.mark.parametrize("v1_pools", [False, True], ids=["v0.31 Provisioner", "v1 NodePool"])
def test_nodes_removed_at_once_share_a_pdb_while_they_drain(tmp_path: Path, v1_pools: bool) -> None:
    """A removed Provisioner's (NodePool's) nodes are deleted at once and drain together; their `web` pods, one on
    each, share a PDB of `maxUnavailable: 1` (2 healthy: 1 allowed). Kubernetes' Eviction API checks each pod
    against the budget's `disruptionsAllowed` at that moment, whichever node it is on: one pod goes at once, the
    other once the first's replacement is Ready (`--pod-startup` 15 s) — the evictions alternate and the drain
    takes 30 s, the PDB named. The old plan drained each node as though alone against the steady budget: both pods
    at once, 15 s, the budget exceeded."""
    if v1_pools:
        items = [*v1.member("l0", "legacy"), *v1.member("l1", "legacy"), *v1.member("spare")]
    else:
        items = [node("l0", "legacy"), node("l1", "legacy"), node("spare", annotations={})]
    items += [pod("web-0", "l0", "web", cpu="100m"), pod("web-1", "l1", "web", cpu="100m"),
              pdb("web", "web", maxUnavailable=1)]
    file = write(tmp_path / "snapshot.json", *items)

    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="json",
                                      base=_removed_pair(tmp_path, v1_pools)[0],
                                      head=_removed_pair(tmp_path, v1_pools)[1]), load_catalog())
    doc = json.loads(result.stdout)

    removed = doc["waves"][0]
    assert (removed["method"], removed["nodes"], removed["evicted_pods"]) == ("removed", ["l0", "l1"], 2)
    assert removed["drain_seconds"] == 30.0 and removed["slowed_by"] == {"default/web": 30.0}
    assert doc["blocked"] == [] and doc["pending"] == []


def test_drains_together_hand_a_shared_budget_out_in_turn_and_keep_its_allowance() -> None:
    """`drains_together` on three nodes with 2, 2 and 1 pods of one budget allowing 2 at a time: at every moment at
    most 2 of them are down, the nodes take turns (l0 and l1 first, then l2 and l0, then l1), and each drain ends
    when its own last pod is Ready again."""
    pods = [pod(f"web-{i}", f"l{n}", "web") for i, n in enumerate((0, 0, 1, 1, 2))]
    budgets = PdbBudgets([pdb("web", "web", maxUnavailable=2)],
                         [*pods, *(pod(f"other-{i}", None, "web") for i in range(3))])
    groups = {"l0": 2, "l1": 2, "l2": 1}
    steady = [(name, Drain(15.0, {}, None, (("default/web", count),))) for name, count in groups.items()]

    drains = drains_together(steady, PdbState(budgets), 0.0, Timing(pod_startup=15.0))

    went = {name: drain.evictions.at["default/web"] for (name, _), drain in zip(steady, drains, strict=True)
            if drain.evictions is not None}
    assert went == {"l0": [0.0, 15.0], "l1": [0.0, 30.0], "l2": [15.0]}
    assert [d.seconds for d in drains] == [30.0, 45.0, 30.0]
    moments = sorted(t for times in went.values() for t in times)
    assert all(sum(1 for t in moments if t <= at < t + 15.0) <= 2 for at in moments)


def _example(output: str, timeout: str, allow: bool = False) -> tuple[int, str, str]:
    options = PlanOptions(snapshot=(str(EXAMPLE / "snapshot.json"),), start=START, output=output,
                          base=str(EXAMPLE / "base"), head=str(EXAMPLE / "head"), rollout_timeout=timeout,
                          allow_stranded=allow)
    result = plan_command(options, load_catalog())
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("output", ["text", "markdown", "json"])
def test_a_v031_rollout_not_planned_within_its_budget_says_how_far_it_got_and_exits_1(output: str) -> None:
    """The v0.31 worked example (docs/plan.md) with `--rollout-timeout 1us`: the removed Provisioner's wave (at
    once, before any command) and nothing after; the drifted and expiring nodes blocked by `--rollout-timeout`."""
    code, out, err = _example(output, "1us")

    assert (code, err) == (1, "")
    assert ("the v0.31 Provisioners' rollout was not planned to its end: planning took longer than "
            "--rollout-timeout 0.000001s; 1 waves planned up to 2026-11-30T09:00:15Z, 5 drifted or expiring nodes "
            "not planned") in out
    if output == "json":
        doc = json.loads(out)
        assert sorted(b["node"] for b in doc["blocked"] if b["by"] == "--rollout-timeout") == [
            "ip-10-0-1-10", "ip-10-0-1-12", "ip-10-0-2-11", "ip-10-0-2-13", "ip-10-0-3-14"]
        assert all(b["forever"] for b in doc["blocked"]) and not doc["finishes"]


def test_allow_stranded_exits_0_past_the_v031_budget_and_the_default_budget_plans_it_all() -> None:
    code, out, _ = _example("text", "1us", allow=True)
    assert code == 0 and "--rollout-timeout" in out
    code, out, _ = _example("text", "120s")
    assert code == 1 and "--rollout-timeout" not in out and "5 waves" in out


# --- the property: no pod lost or placed twice across v0.31's waves -----------------------------------------------

CPUS = ("100m", "300m", "500m", "900m", FULL)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> list[NodeClaimTemplate]:
    directory = policies(tmp_path_factory.mktemp("head"), provisioner(labels="team: platform"))
    repository = load_repository([directory], prove=True, catalog=load_catalog())
    return templates_for(repository.checked, InstanceTable.of_catalog(load_catalog()))


@deterministic(40)
@given(cpus=st.lists(st.lists(st.sampled_from(CPUS), max_size=3), min_size=1, max_size=6),
       spares=st.lists(st.sampled_from((0, 1, 2)), max_size=2),
       startup=st.sampled_from((60.0, 900.0)), budget=st.sampled_from((None, 1, 2)))
def test_no_pod_is_lost_or_placed_twice_and_the_end_places_what_a_fresh_scheduling_places(
        templates: list[NodeClaimTemplate], cpus: list[list[str]], spares: list[int], startup: float,
        budget: int | None) -> None:
    """The v1 property (test_nodepool_room.py) on v0.31's waves: whether the replacements are up before
    `waitForReadiness` gives up or not, and with a PodDisruptionBudget over every `app0` pod or none, every drifted
    node goes once, every pod it had ends on exactly one node that is not drifted, and as many as a fresh scheduling
    of them places."""
    items: list[dict[str, Any]] = []
    for i, pods in enumerate(cpus):
        items.append(node(f"n{i}", created=f"2026-11-20T08:{i:02d}:00Z"))
        items += [pod(f"p{i}-{j}", f"n{i}", f"app{j}", cpu=cpu, memory="256Mi") for j, cpu in enumerate(pods)]
    for i, used in enumerate(spares):
        items.append(node(f"spare{i}", annotations={}))
        items += [pod(f"s{i}-{j}", f"spare{i}", "stay", cpu="900m", memory="256Mi") for j in range(used)]
    if budget is not None:
        items.append(pdb("app0", "app0", maxUnavailable=budget))
    fleet = fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json"))
    drift = {f"n{i}": NodeDrift(drifted=True, reasons=("x",)) for i in range(len(cpus))}

    rollout = plan_waves(fleet, drift, templates, START_TIME, Timing(node_startup=startup),
                         PdbBudgets(fleet.pdbs, fleet.pod_objects), Replacements(templates, []))

    assert [w.start for w in rollout.waves] == sorted(w.start for w in rollout.waves)
    assert sorted(n for w in rollout.waves for n in w.nodes) == sorted(drift)  # every drifted node goes, once
    placement = _replay(fleet, rollout)
    placed = Counter(key for pods in placement.values() for key in pods)
    moved = [p for name in fleet.nodes for p in fleet.moved_pods(name)]
    assert set(placed.values()) <= {1}  # none twice
    assert sorted(placed) == sorted(p.key for p in moved)  # none lost (every pod here fits an m5 node)
    assert not set(placement) & set(drift)  # none left on a drifted node
    fresh = Scheduler(templates).solve([p.pod for p in moved if p.pod is not None])
    assert len(placed) == len(moved) - len(fresh.failures)


# --- the budgets' arithmetic over time -----------------------------------------------------------------------------

@deterministic(60)
@given(pods=st.integers(1, 12), unavailable=st.integers(1, 4),
       drains=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 6), st.sampled_from((0.0, 90.0))), min_size=1,
                       max_size=8),
       startup=st.sampled_from((0.0, 15.0, 30.0)))
def test_drains_never_have_more_pods_of_a_budget_down_at_once_than_it_allows(
        pods: int, unavailable: int, drains: list[tuple[int, int, float]], startup: float) -> None:
    """Drains one after another in time (`PdbState.evictions`, then `record`; some pods Ready again only after a
    late node is initialized): at every eviction, the pods of the budget down then — counted from the record by
    brute force — stay within `maxUnavailable` (the Eviction API's `disruptionsAllowed` = currentHealthy −
    desiredHealthy), every pod asked is evicted, and a drain told to wait waits for a pod down then."""
    items = [pod(f"web-{i}", "n", "web", cpu="10m") for i in range(pods)]
    budget_doc = pdb("web", "web", maxUnavailable=unavailable)
    state = PdbState(PdbBudgets([budget_doc], items))
    spans: list[tuple[float, float]] = []

    def down(at: float) -> int:
        return sum(1 for since, until in spans if since <= at < until)

    desired = max(0, pods - unavailable)
    for at, asked, late in sorted(drains):
        count = min(asked, pods)
        found = state.evictions({"default/web": count}, float(at), startup)
        if found.waiting_until is not None:
            assert pods - down(at) <= desired and any(until == found.waiting_until for _, until in spans)
            continue
        assert found.stuck is None
        went = found.at["default/web"]
        assert len(went) == count and min(went) == at
        returns = {"default/web": [at + late]} if late else None
        state.record(found, returns, startup)
        spans += [(moment, max(moment, at + late if late and i == len(went) - 1 else 0.0) + startup)
                  for i, moment in enumerate(sorted(went))]
        for moment in went:
            assert pods - down(moment) >= desired  # never fewer healthy than the budget keeps
        assert state.allowed("default/web", float(at)) == max(0, pods - down(at) - desired)
