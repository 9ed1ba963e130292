"""The simulation as a scenario of timed steps (what a long soak run is written with): steps at given virtual
times that start while earlier work is still under way, and a policy change half-way that the controller takes
on its next pass — the real controller, the in-memory cluster and moto's EC2 in the process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from karpenter_policy.api.workloads import Workload
from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.source.workloads import read_workloads
from karpenter_policy.cli import main
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded
from karpenter_policy.simulate.driver import Simulation, SimulationError, Step

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "workloads" / "policies"
INFLATE = ROOT / "examples" / "workloads" / "apps" / "inflate.yaml"
KEY = "deployment/inflate"


def _compiled(policies: Path, out: Path) -> Loaded:
    result = CliRunner().invoke(main, ["compile", str(policies), "-o", str(out)])
    assert result.exit_code == 0, result.output
    loaded = DirectorySource(str(out)).poll()
    assert isinstance(loaded, Loaded)
    return loaded


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Loaded, Loaded]:
    """The seeds as they are (`default` takes spot only), and a second version where `default` takes on-demand."""
    base = tmp_path_factory.mktemp("scenario")
    changed = base / "policies-on-demand"
    shutil.copytree(POLICIES, changed)
    default = changed / "default.yaml"
    text = default.read_text()
    assert 'values: ["spot"]' in text
    default.write_text(text.replace('values: ["spot"]', 'values: ["on-demand"]'))
    return _compiled(POLICIES, base / "spot"), _compiled(changed, base / "on-demand")


def _inflate() -> list[Workload]:
    return list(read_workloads([str(INFLATE)]).workloads)


@pytest.mark.slow
def test_timed_steps_start_on_time_and_a_policy_change_rolls_the_fleet(
    versions: tuple[Loaded, Loaded],
) -> None:
    spot, on_demand = versions
    steps = [
        Step("create"),
        Step("scale to 5", {KEY: 5}, at=60.0),
        # 10 s later: the first node (launched at 61 s) is not Ready before 106 s; this step does not wait for it
        Step("scale to 10", {KEY: 10}, at=70.0),
        Step("on-demand from now on, scale to 20", {KEY: 20}, constraints=on_demand, at=600.0),
    ]
    with Simulation(spot, _inflate(), load_catalog(region="us-east-1")) as simulation:
        result = simulation.run(steps)

    assert [(s.label, s.started) for s in result.steps[1:]] == [
        ("scale to 5", 60.0), ("scale to 10", 70.0), ("on-demand from now on, scale to 20", 600.0)
    ]
    assert result.steps[1].settled <= 70.0, "the step at 60 s stopped settling when the step at 70 s was due"
    ten = result.steps[2].measurement
    assert sum(n.pods for n in ten.nodes) == 10 and all(n.capacity_type == "spot" for n in ten.nodes)
    assert "2024-01-01T00:01:10.000Z\tINFO\tsimulation\tscaling Deployment/inflate from 5 to 10" in result.log
    assert "constraint sets changed to" in result.log and "loaded 4 constraint set(s)" in result.log

    assert not result.unschedulable and result.pending == 0
    assert result.pods == 20
    spot_nodes = {n.name for n in result.nodes if n.capacity_type == "spot"}
    on_demand_nodes = {n.name for n in result.nodes if n.capacity_type == "on-demand"}
    assert not spot_nodes & {n.name for n in ten.nodes}, "the spot nodes from before the change drifted and went"
    assert on_demand_nodes and not spot_nodes, "every pod now runs on on-demand nodes"
    assert "deprovisioning via drift" in result.log and "no longer satisfies karpenter.sh/capacity-type" in result.log


def test_steps_timed_out_of_order_are_refused(versions: tuple[Loaded, Loaded]) -> None:
    spot, _ = versions
    steps = [Step("create"), Step("late", {KEY: 2}, at=120.0), Step("early", {KEY: 3}, at=60.0)]
    with (
        Simulation(spot, _inflate(), load_catalog(region="us-east-1")) as simulation,
        pytest.raises(SimulationError, match="early: at 60 s, before the step before it"),
    ):
        simulation.run(steps)


@pytest.mark.slow
def test_consolidation_on_moto_shrinks_the_fleet_after_a_scale_down(tmp_path: Path) -> None:
    """`default` on-demand with consolidation: 20 replicas (one c6a.8xlarge), then 3 — the node is replaced by a
    cheaper one (CreateFleet, then TerminateInstances on moto) once it is up, every pod running."""
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    default = policies / "default.yaml"
    default.write_text(default.read_text().replace('values: ["spot"]', 'values: ["on-demand"]').replace(
        "ttlSecondsAfterEmpty: 30", "consolidation:\n    enabled: true"))
    loaded = _compiled(policies, tmp_path / "build")
    steps = [Step("create"), Step("scale to 20", {KEY: 20}), Step("scale to 3", {KEY: 3}),
             Step("quiet", {KEY: 3}, at=1500.0)]
    with Simulation(loaded, _inflate(), load_catalog(region="us-east-1")) as simulation:
        result = simulation.run(steps)

    peak = result.steps[1].measurement
    assert not result.unschedulable and result.pending == 0 and result.pods == 3
    assert "deprovisioning via consolidation replace" in result.log and "saving $" in result.log
    assert sum(n.price or 0 for n in result.nodes) < sum(n.price or 0 for n in peak.nodes) / 4, "the fleet shrank"
    assert not {n.name for n in result.nodes} & {n.name for n in peak.nodes}, "the big node was replaced"
    assert all(n.pods for n in result.nodes), "no node is left empty"
    assert result.end < 1500 + 600, "nothing left to do once consolidated: the run ends"
