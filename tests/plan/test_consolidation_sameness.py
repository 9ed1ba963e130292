"""`plan`'s consolidation answers the same with the decisions' shortcuts as without them: the existing nodes with
room for a simulation's smallest pod read from a per-decision index (`DisruptionView.with_room`) instead of a scan
of every node per simulation, each PodDisruptionBudget's counts kept up to date pod change by pod change
(`kube.budgetcounts.BudgetCounts`) instead of counted over every pod at each decision — and where counted, over the
pods its selector's groups hold (`kube.disruption.disruption_budgets`) without matching each pod again —, and each
simulation's runs starting from one set-up, the simulations sharing what they read of their templates
(`scheduling.TemplateParts`). On generated NodePool fleets (two pools, budgets, PodDisruptionBudgets over the
workloads), the plan's whole JSON is byte-identical with the shortcuts replaced by the plain scans and set-ups they
stand for."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.kube import disruption
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile.disruption.decider import Inputs
from karpenter_policy.reconcile.disruption.view import DisruptionView
from karpenter_policy.scheduling import ExistingNode
from karpenter_policy.scheduling.vectors import Vector, add, fits
from karpenter_policy.simulate import consolidation
from karpenter_policy.simulate.consolidation import consolidate_now
from tests.plan.snapshots import pdb, pod, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies
from tests.profiles import deterministic
from tests.scheduling.test_shared_setup import nothing_shared

START = "2026-11-30T09:00:00Z"
INITIALIZED = {"karpenter.sh/initialized": "true"}
#: (team, instance type, its pods' (app, cpu)) per node
FLEETS = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["m5.large", "m5.xlarge", "m5.2xlarge"]),
              st.lists(st.tuples(st.sampled_from(["web", "api"]), st.sampled_from(["250m", "700m", "1500m"])),
                       max_size=4)),
    min_size=2, max_size=8)


def _scan(view: DisruptionView, smallest: Vector) -> list[tuple[str, ExistingNode]]:
    """What `with_room` stands for: every existing node scanned, in order."""
    existing = view.existing.items()
    return [(name, node) for name, node in existing if fits(add(node.requests, smallest), node.allocatable)]


def _each_budget(pdbs: Sequence[Obj], pods: Any) -> list[disruption.Budget]:
    """What `disruption_budgets` stands for: each budget over every pod."""
    listed = list(pods)
    return [disruption.disruption_budget(budget, listed) for budget in pdbs]


_inputs = consolidation._Run.inputs


def _recounted(run: Any) -> Inputs:
    """What the kept counts stand for: the decision counts every budget over every pod."""
    return dataclasses.replace(_inputs(run), pdb_budgets=None)


def _plan(root: Path, fleet: list[tuple[str, str, list[tuple[str, str]]]], allowed: int) -> str:
    documents = [nodepool(f"team-{t}", labels=f"team: {t}", extra=(
        "  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 0s\n"
        f"    budgets: [{{nodes: '{allowed}'}}]\n")) for t in ("a", "b")]
    items: list[dict[str, Any]] = []
    for i, (team, instance_type, pods) in enumerate(fleet):
        items += [pool_node(f"n{i}", f"team-{team}", instance_type=instance_type, labels={**INITIALIZED, "team": team}),
                  claim(f"n{i}", f"team-{team}", instance_type=instance_type)]
        items += [pod(f"{app}-{i}-{j}", f"n{i}", f"{app}-{team}", cpu=cpu, node_selector={"team": team})
                  for j, (app, cpu) in enumerate(pods)]
    items += [pdb(f"{app}-{team}", f"{app}-{team}", maxUnavailable=1) for app in ("web", "api") for team in ("a", "b")]
    policy = v1_policies(root / "p", *documents)
    file = write(root / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, base=policy, head=policy, output="json"),
                          load_catalog(), consolidate=consolidate_now)
    assert result.exit_code == 0, result.stderr
    return result.stdout


@deterministic(12)
@given(fleet=FLEETS, allowed=st.integers(min_value=1, max_value=3))
def test_the_plan_is_byte_identical_without_the_shortcuts(
    fleet: list[tuple[str, str, list[tuple[str, str]]]], allowed: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        fast = _plan(Path(directory) / "fast", fleet, allowed)
        with mock.patch.object(DisruptionView, "with_room", _scan), \
                mock.patch.object(disruption, "disruption_budgets", _each_budget), \
                mock.patch.object(consolidation._Run, "inputs", _recounted), nothing_shared():
            plain = _plan(Path(directory) / "plain", fleet, allowed)
    assert fast.replace("/fast/", "/") == plain.replace("/plain/", "/")
