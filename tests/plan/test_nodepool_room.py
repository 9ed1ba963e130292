"""Karpenter v1's waves in virtual time with the room on the nodes not deleted (`nodepoolwaves`, `room`): a drift
command's pods go onto the nodes that are not candidates and have room first — the snapshot's untouched nodes, the
replacements of earlier waves once initialized — and new nodes only for the rest, as v1.14.1's `SimulateScheduling`
(pkg/controllers/disruption/helpers.go:53) and the scheduler (pkg/controllers/provisioning/scheduling/scheduler.go:594,
existing nodes first) decide; the waves, `nodes[].wave`, `pending[]` and the cost follow, and no pod is lost or
placed twice on the way."""

from __future__ import annotations

import datetime as dt
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
from karpenter_policy.commands.plan.fleet import Fleet, fleet_of
from karpenter_policy.commands.plan.nodepoolwaves import nodepool_budgets, plan_nodepool_waves
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import read_snapshot
from karpenter_policy.commands.plan.waves import PdbBudgets, Replacements, Rollout, Timing
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate, Scheduler
from tests.plan.snapshots import FULL, listing, pod, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies
from tests.profiles import deterministic

START = "2026-11-30T09:00:00Z"


def sides(root: Path, budgets: str) -> tuple[str, str]:
    """BASE: `default` (team: web) and `other`; HEAD relabels `default` (team: platform) — `other` is untouched."""
    base = v1_policies(root / "base", nodepool(budgets=budgets), nodepool("other", labels="team: other"))
    head = v1_policies(root / "head", nodepool(labels="team: platform", budgets=budgets),
                       nodepool("other", labels="team: other"))
    return base, head


def plan(pair: tuple[str, str], tmp_path: Path, *items: dict[str, Any]) -> dict[str, Any]:
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="json", base=pair[0], head=pair[1]),
                          load_catalog())
    assert result.stderr == ""
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def member(name: str, nodepool_name: str = "default", created: str = "2026-11-20T08:00:00Z") -> list[dict[str, Any]]:
    return [pool_node(name, nodepool_name, created=created), claim(name, nodepool_name, created=created)]


def test_evicted_pods_fit_on_an_untouched_node_and_no_node_is_launched(tmp_path: Path) -> None:
    """v1.14.1 pkg/controllers/disruption/drift_test.go:752, "should delete drifted nodes": a drifted node's pod fits
    on another, undrifted node, so the drifted NodeClaim is deleted without a replacement (one NodeClaim left).
    `Drift.ComputeCommands` (drift.go:63) → `SimulateScheduling` (helpers.go:53) gives the scheduler every active
    node but the candidate; `spare` (NodePool `other`) has room — the old plan launched a node for the pod."""
    items = [*member("d0"), pod("web-0", "d0", "web"), *member("spare", "other")]

    doc = plan(sides(tmp_path, '[{nodes: "1"}]'), tmp_path, *items)

    (wave,) = doc["waves"]
    assert (wave["nodes"], wave["replacements"], wave["evicted_pods"]) == (["d0"], [], 1)
    assert wave["seconds"] == 15.0  # no node to initialize: only the drain
    assert {n["name"]: n["wave"] for n in doc["nodes"]} == {"d0": 0, "spare": None}
    assert doc["pending"] == [] and doc["finishes"]
    m5_large = doc["cost"]["before_monthly"] / 2
    assert doc["cost"]["after_monthly"] == pytest.approx(m5_large, abs=0.01)


def test_the_peak_cost_stays_at_the_cost_before_when_every_pod_fits_on_the_room_left(tmp_path: Path) -> None:
    """Three drifted nodes side by side (a budget of 100 %) whose pods all fit on `spare`: the rollout launches no
    node, so its peak is the cost before — the old plan replaced each node first and peaked at $420.48 a month
    above it (three m5.large beside their nodes) — and after it only `spare` is left."""
    items = [*member("spare", "other")]
    for i in range(3):
        items += [*member(f"n{i}", created=f"2026-11-20T08:0{i}:00Z"), pod(f"web-{i}", f"n{i}", "web")]

    doc = plan(sides(tmp_path, '[{nodes: "100%"}]'), tmp_path, *items)

    cost = doc["cost"]
    assert sum(len(w["replacements"]) for w in doc["waves"]) == 0
    assert cost["peak_monthly"] == cost["before_monthly"]
    assert cost["after_monthly"] == pytest.approx(cost["before_monthly"] / 4, abs=0.01)
    assert sorted(n for w in doc["waves"] for n in w["nodes"]) == ["n0", "n1", "n2"]
    assert sum(w["evicted_pods"] for w in doc["waves"]) >= 3  # a pod put on a node drifting later moves again


def _full_and_small() -> list[dict[str, Any]]:
    """`n0` holds a pod no other node has room for (it needs a new node of 2 vCPUs, 430m of which stay free); `n1`
    holds a DaemonSet's pod (not moved) that leaves no room for it and a small pod that fits in those 430m."""
    return [*member("n0", created="2026-11-20T08:00:00Z"), pod("big-0", "n0", "big", cpu=FULL),
            *member("n1", created="2026-11-20T08:01:00Z"),
            pod("agent-n1", "n1", "agent", cpu=FULL, owner=("DaemonSet", "agent")),
            pod("small-0", "n1", "small", cpu="300m", memory="256Mi")]


def test_a_replacement_from_wave_one_takes_wave_twos_pods(tmp_path: Path) -> None:
    """A budget of 1: `n0`'s command launches a node; `n1`'s comes once `n0` is gone (85 s: the poll at 90 s)
    and its pod goes onto that replacement, initialized by then (helpers.go:53, the replacement is an active node):
    no second node. The old plan launched one for each wave."""
    doc = plan(sides(tmp_path, '[{nodes: "1"}]'), tmp_path, *_full_and_small())

    first, second = doc["waves"]
    assert [(w["start"][11:19], w["nodes"]) for w in doc["waves"]] == [("09:00:10", ["n0"]), ("09:01:30", ["n1"])]
    (replacement,) = first["replacements"]
    assert second["replacements"] == [] and second["evicted_pods"] == 1
    cost, new = doc["cost"], replacement["price"] * 730
    assert cost["peak_monthly"] == pytest.approx(cost["before_monthly"] + new, abs=0.01)  # n0, n1 and it, once
    assert cost["after_monthly"] == pytest.approx(new, abs=0.01)  # it alone: n0's and n1's pods both on it
    assert doc["pending"] == []


def test_a_command_whose_pods_would_go_onto_a_replacement_not_initialized_waits_for_it(tmp_path: Path) -> None:
    """A budget of 2: `n1` could start beside `n0` at 10 s, but its pod would go onto `n0`'s replacement, not
    initialized until 70 s — v1.14.1 refuses such a simulation (helpers.go:138, `UninitializedNodeError`; drift.go:93
    skips the candidate) and tries again at each poll: `n1` goes at 70 s, onto that replacement."""
    doc = plan(sides(tmp_path, '[{nodes: "2"}]'), tmp_path, *_full_and_small())

    assert [(w["start"][11:19], w["nodes"], len(w["replacements"])) for w in doc["waves"]] == [
        ("09:00:10", ["n0"], 1), ("09:01:10", ["n1"], 0)]


def test_an_expired_nodes_pods_go_onto_an_untouched_nodes_room(tmp_path: Path) -> None:
    """Forceful expiry (nodeclaim/expiration/controller.go) deletes first; its pods, pending, are provisioned onto
    existing nodes with room first (scheduler.go:594): no new node."""
    same = v1_policies(tmp_path / "p", nodepool(), nodepool("other", labels="team: other"))
    old = "2026-10-01T00:00:00Z"
    items = [*member("old", created=old), pod("web-0", "old", "web"), *member("spare", "other")]

    doc = plan((same, same), tmp_path, *items)

    (wave,) = doc["waves"]
    assert (wave["method"], wave["nodes"], wave["replacements"]) == ("expiration", ["old"], [])
    assert doc["pending"] == []


# --- the property: no pod lost or placed twice across the waves -------------------------------------------------

START_TIME = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
CPUS = ("100m", "300m", "500m", "900m", FULL, "3")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> list[NodeClaimTemplate]:
    directory = v1_policies(tmp_path_factory.mktemp("pool"), nodepool(), nodepool("other", labels="team: other"))
    repository = load_repository([directory], prove=True, catalog=load_catalog())
    return templates_for(repository.checked, InstanceTable.of_catalog(load_catalog()))


def _replay(fleet: Fleet, rollout: Rollout) -> dict[str, list[str]]:
    """Where each moved pod is after the waves, replayed from their landings (checking each wave moves exactly the
    pods on its nodes then, each onto one node or into `pending`)."""
    placement = {name: [p.key for p in fleet.moved_pods(name)] for name in fleet.nodes}
    pending = Counter(p.pod for p in rollout.pending if not p.held)
    for wave in rollout.waves:
        assert wave.landings is not None
        evicted = Counter(key for name in wave.nodes for key in placement.pop(name, []))
        landed = Counter(p.key for landing in wave.landings for p in landing.pods)
        left = evicted - landed
        assert landed + left == evicted and not landed - evicted  # nothing from nowhere
        for key in left:  # what fits nowhere is pending, once
            assert pending[key] >= 1
            pending[key] -= 1
        assert sum(wave.evicted.values()) == sum(evicted.values())
        for landing in wave.landings:
            placement.setdefault(landing.node, []).extend(p.key for p in landing.pods)
    return placement


@deterministic(40)
@given(cpus=st.lists(st.lists(st.sampled_from(CPUS), max_size=3), min_size=1, max_size=6),
       spares=st.lists(st.sampled_from((0, 1, 2)), max_size=2),
       budget=st.sampled_from(("1", "2", "100%")),
       expiring=st.dictionaries(st.integers(0, 5), st.integers(0, 600), max_size=2))
def test_no_pod_is_lost_or_placed_twice_and_the_end_places_what_a_fresh_scheduling_places(
        templates: list[NodeClaimTemplate], cpus: list[list[str]], spares: list[int], budget: str,
        expiring: dict[int, int]) -> None:
    items: list[dict[str, Any]] = []
    for i, pods in enumerate(cpus):
        items += member(f"n{i}", created=f"2026-11-20T08:{i:02d}:00Z")
        items += [pod(f"p{i}-{j}", f"n{i}", f"app{j}", cpu=cpu, memory="256Mi") for j, cpu in enumerate(pods)]
    for i, used in enumerate(spares):
        items += member(f"spare{i}", "other")
        items += [pod(f"s{i}-{j}", f"spare{i}", "stay", cpu="900m", memory="256Mi") for j in range(used)]
    fleet = fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json"))
    drift = {f"n{i}": NodeDrift(drifted=True, reasons=("x",)) for i in range(len(cpus))}
    for i, seconds in expiring.items():
        if f"n{i}" in drift:
            drift[f"n{i}"] = NodeDrift(drifted=True, reasons=("x",), expires=True,
                                       expires_at=START_TIME + dt.timedelta(seconds=seconds))
    budgets = nodepool_budgets({"default": {"spec": {"disruption": {"budgets": [{"nodes": budget}]}}}})

    rollout = plan_nodepool_waves(fleet, drift, budgets, START_TIME, Timing(), PdbBudgets([], fleet.pod_objects),
                                  Replacements(templates, []))

    assert [w.start for w in rollout.waves] == sorted(w.start for w in rollout.waves)
    assert sorted(n for w in rollout.waves for n in w.nodes) == sorted(drift)  # every drifted node goes, once
    placement = _replay(fleet, rollout)
    placed = Counter(key for pods in placement.values() for key in pods)
    moved = [p for name in fleet.nodes for p in fleet.moved_pods(name)]
    assert set(placed.values()) <= {1}  # none twice
    assert sorted(placed) == sorted(p.key for p in moved)  # none lost (every pod here fits an m, c or r node)
    assert not set(placement) & set(drift)  # none left on a drifted node
    fresh = Scheduler(templates).solve([p.pod for p in moved if p.pod is not None])
    assert len(placed) == len(moved) - len(fresh.failures)


def test_a_node_of_a_type_no_template_knows_still_has_its_pods_moved(tmp_path: Path) -> None:
    """`SimulateScheduling` (helpers.go:53) reschedules the candidate's pods whatever its instance type; a node of
    a type no template knows (and no `status.allocatable`) offers no room, yet its pod goes onto `spare`."""
    items = [pool_node("odd", instance_type="m99.large"), claim("odd", instance_type="m99.large"),
             pod("web-0", "odd", "web"), *member("spare", "other")]

    doc = plan(sides(tmp_path, '[{nodes: "1"}]'), tmp_path, *items)

    (wave,) = doc["waves"]
    assert (wave["nodes"], wave["evicted_pods"], wave["replacements"]) == (["odd"], 1, [])
    assert doc["pending"] == []
