"""The cost of Karpenter v1's waves on a dense fleet (`nodepoolwaves`, `room`): a drift candidate whose pods would
go onto a replacement not initialized yet waits (v1.14.1 pkg/controllers/disruption/helpers.go:138,
`UninitializedNodeError`; drift.go:93 skips it) — decided without a scheduling run when the room tells
(`Room.would_wait`), with the plan a run would give — and the planning's budget (`--rollout-timeout`): past it, the
waves planned so far, the other nodes blocked, a note saying how far it got, exit 1 (0 with `--allow-stranded`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

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
from karpenter_policy.commands.plan.room import Room
from karpenter_policy.commands.plan.snapshot import read_snapshot
from karpenter_policy.commands.plan.waves import PdbBudgets, Replacements, Rollout, Timing
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate, Pod
from tests.plan.snapshots import listing, pod
from tests.plan.test_nodepool_room import START_TIME, member
from tests.plan.v1snapshots import nodepool, v1_policies
from tests.profiles import deterministic

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plan" / "v1"
SIZES = ("100m", "300m", "500m", "900m", "1200m")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> list[NodeClaimTemplate]:
    directory = v1_policies(tmp_path_factory.mktemp("pool"), nodepool(), nodepool("other", labels="team: other"))
    repository = load_repository([directory], prove=True, catalog=load_catalog())
    return templates_for(repository.checked, InstanceTable.of_catalog(load_catalog()))


def _fleet(cpus: Sequence[Sequence[str]]) -> Fleet:
    items: list[dict[str, Any]] = []
    for i, pods in enumerate(cpus):
        items += member(f"n{i:02d}", created=f"2026-11-20T08:{i:02d}:00Z")
        items += [pod(f"p{i}-{j}", f"n{i:02d}", f"app{j}", cpu=cpu, memory="256Mi") for j, cpu in enumerate(pods)]
    return fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json"))


def _rollout(fleet: Fleet, templates: list[NodeClaimTemplate], budget: str, startup: float = 60.0) -> Rollout:
    drift = {name: NodeDrift(drifted=True, reasons=("x",)) for name in fleet.nodes}
    budgets = nodepool_budgets({"default": {"spec": {"disruption": {"budgets": [{"nodes": budget}]}}}})
    return plan_nodepool_waves(fleet, drift, budgets, START_TIME, Timing(node_startup=startup),
                               PdbBudgets([], fleet.pod_objects), Replacements(templates, []))


def _shown(rollout: Rollout) -> list[Any]:
    """What the plan says: each wave's time, nodes, replacements and where its pods went; the blocked and pending."""
    waves = [(w.start, w.method, w.nodes, [(r.instance_type, r.zone) for r in w.replacements],
              [(landing.node, sorted(p.key for p in landing.pods)) for landing in w.landings or []])
             for w in rollout.waves]
    return [waves, rollout.blocked, rollout.pending, rollout.notes]


@contextmanager
def _always_simulated() -> Iterator[None]:
    """Every candidate simulated: the room never tells a waiting one beforehand."""
    with patch.object(Room, "would_wait", lambda self, pods, without, at: None):
        yield


@contextmanager
def _checked(templates: list[NodeClaimTemplate], told: list[float]) -> Iterator[None]:
    """Each time the room tells a candidate waits until some time, the scheduling run it spares says it waits
    until then or later (`told`: the times told)."""
    real = Room.would_wait
    solver = Replacements(templates, [])

    def would_wait(room: Room, pods: Sequence[Pod], without: Sequence[str], at: float) -> float | None:
        answer = real(room, pods, without, at)
        if answer is not None:
            plan = room.plan(pods, without, lambda existing: solver.solve(pods, existing, room))
            waiting = room.uninitialized(plan, at)
            assert waiting is not None and waiting >= answer
            told.append(answer)
        return answer

    with patch.object(Room, "would_wait", would_wait):
        yield


@deterministic(40)
@given(cpus=st.lists(st.lists(st.sampled_from(SIZES), min_size=1, max_size=4), min_size=2, max_size=8),
       budget=st.sampled_from(("1", "2", "100%")), startup=st.sampled_from((0.0, 60.0, 600.0)))
def test_a_candidate_told_waiting_without_a_scheduling_run_gets_the_plan_a_run_gives(
        templates: list[NodeClaimTemplate], cpus: list[list[str]], budget: str, startup: float) -> None:
    fleet = _fleet(cpus)
    with _always_simulated():
        simulated = _rollout(fleet, templates, budget, startup)
    told: list[float] = []
    with _checked(templates, told):
        planned = _rollout(fleet, templates, budget, startup)

    assert _shown(planned) == _shown(simulated)


def test_a_dense_fleets_waiting_candidates_cost_no_scheduling_run_each(templates: list[NodeClaimTemplate]) -> None:
    """Twelve nodes with little room, every one drifted, budget 100 %: each replacement's leftover room would take
    the next candidates' pods, so they wait for it one after another — one scheduling run per command, not one
    per waiting candidate per replacement (the runs grew with the square of the fleet before)."""
    fleet = _fleet([["1200m", "300m"]] * 12)
    runs: list[int] = []
    real = Replacements.solve

    def counted(self: Replacements, *args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return real(self, *args, **kwargs)

    told: list[float | None] = []
    real_wait = Room.would_wait

    def would_wait(room: Room, pods: Sequence[Pod], without: Sequence[str], at: float) -> float | None:
        told.append(real_wait(room, pods, without, at))
        return told[-1]

    with patch.object(Replacements, "solve", counted), patch.object(Room, "would_wait", would_wait):
        rollout = _rollout(fleet, templates, "100%")
    fast = len(runs)
    runs.clear()
    with patch.object(Replacements, "solve", counted), _always_simulated():
        simulated = _rollout(fleet, templates, "100%")

    assert _shown(rollout) == _shown(simulated)
    assert len(rollout.waves) == 12 and any(t is not None for t in told)  # the room told waiting candidates
    assert len({w.start for w in rollout.waves}) > 1  # one after another: each waits for a replacement
    assert fast == len(rollout.waves) < len(runs)  # a run per command; waiting ones cost one each before


def _example(tmp_path: Path, output: str, timeout: str, allow: bool = False) -> tuple[int, str, str]:
    options = PlanOptions(snapshot=(str(EXAMPLE / "snapshot.json"),), start="2026-11-30T09:00:00Z", output=output,
                          base=str(EXAMPLE / "base"), head=str(EXAMPLE / "head"), rollout_timeout=timeout,
                          allow_stranded=allow)
    result = plan_command(options, load_catalog())
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("output", ["text", "markdown", "json"])
def test_a_rollout_not_planned_within_its_budget_says_how_far_it_got_and_exits_1(tmp_path: Path,
                                                                                 output: str) -> None:
    code, out, err = _example(tmp_path, output, "1us")

    assert (code, err) == (1, "")
    assert "not planned to its end: planning took longer than --rollout-timeout 0.000001s" in out
    assert "waves planned up to 2026-11-30T09:00:10Z, 3 drifted or expiring nodes not planned" in out
    if output == "json":
        blocked = {b["node"]: b for b in json.loads(out)["blocked"]}
        assert {n for n, b in blocked.items() if b["by"] == "--rollout-timeout"} == {
            "ip-10-1-1-10", "ip-10-1-1-11", "ip-10-1-3-14"}


def test_allow_stranded_exits_0_past_the_budget_and_the_default_budget_plans_it_all(tmp_path: Path) -> None:
    code, out, _ = _example(tmp_path, "text", "1us", allow=True)
    assert code == 0 and "--rollout-timeout" in out
    code, out, _ = _example(tmp_path, "text", "120s")
    assert "--rollout-timeout" not in out


@pytest.mark.parametrize("value", ["0s", "-1s", "soon", "1ns"])
def test_a_budget_that_is_no_duration_of_more_than_0_is_exit_2_naming_the_flag(tmp_path: Path, value: str) -> None:
    code, out, err = _example(tmp_path, "text", value)
    assert (code, out) == (2, "")
    assert err.startswith(f'karpenter-policy plan: --rollout-timeout "{value}" is not a duration of more than 0')
    # a value below the microsecond is told why it counts as 0; a zero or a negative one is not
    assert ("it rounds to 0: durations are kept to the microsecond" in err) == (value == "1ns")
