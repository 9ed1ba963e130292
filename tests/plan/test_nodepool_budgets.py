"""The property of Karpenter v1's waves (`nodepoolwaves`): at no moment do more of a NodePool's nodes drift side by
side than its `Drifted` budget allows at that moment (`MustGetAllowedDisruptions` of its nodes then, less those
disrupting), every drifted node either gets a wave or is named as blocked, and none gets two."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.api.v1.budgets import DRIFTED, allowance
from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.proof.placement import templates_for
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepoolwaves import nodepool_budgets, plan_nodepool_waves
from karpenter_policy.commands.plan.snapshot import read_snapshot
from karpenter_policy.commands.plan.waves import PdbBudgets, Replacements, Timing
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate
from tests.plan.snapshots import listing, pod
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies
from tests.profiles import deterministic

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)  # a Monday
BUDGETS = st.lists(
    st.one_of(
        st.builds(lambda n: {"nodes": str(n)}, st.integers(0, 4)),
        st.builds(lambda p: {"nodes": f"{p}%"}, st.sampled_from([0, 10, 34, 50, 100])),
        st.builds(lambda n, hour, hours: {"nodes": str(n), "schedule": f"0 {hour} * * *", "duration": f"{hours}h"},
                  st.integers(0, 2), st.integers(0, 23), st.integers(1, 6)),
    ).map(lambda b: b if b.get("nodes") != "0" or "schedule" in b else {**b, "reasons": ["Underutilized"]}),
    min_size=1, max_size=3,
)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> list[NodeClaimTemplate]:
    directory = v1_policies(tmp_path_factory.mktemp("pool"), nodepool())
    repository = load_repository([directory], prove=True, catalog=load_catalog())
    return templates_for(repository.checked, InstanceTable.of_catalog(load_catalog()))


@deterministic(60)
@given(budgets=BUDGETS, nodes=st.integers(1, 8), empty=st.sets(st.integers(0, 7)))
def test_drift_waves_never_exceed_the_budget_in_force(templates: list[NodeClaimTemplate], budgets: list[Any],
                                                       nodes: int, empty: set[int]) -> None:
    items: list[dict[str, Any]] = []
    for i in range(nodes):
        items += [pool_node(f"n{i}"), claim(f"n{i}")]
        if i not in empty:
            items.append(pod(f"web-{i}", f"n{i}", "web"))
    fleet = fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json"))
    document = stored_form(yaml.safe_load(nodepool(budgets=json.dumps(budgets))))
    written = nodepool_budgets({"default": document})
    drift = {name: NodeDrift(drifted=True, reasons=("x",)) for name in fleet.nodes}

    rollout = plan_nodepool_waves(fleet, drift, written, START, Timing(), PdbBudgets([], fleet.pod_objects),
                                  Replacements(templates, []))

    waved = [n for w in rollout.waves for n in w.nodes]
    assert sorted(waved + [b.node for b in rollout.blocked]) == sorted(fleet.nodes)
    assert len(set(waved)) == len(waved)
    for wave in rollout.waves:
        # at its start, the waves already running and this one fit the budget of the nodes not yet gone
        running = [w for w in rollout.waves if w.start <= wave.start < w.start + dt.timedelta(seconds=w.seconds)
                   or w is wave]
        gone = sum(1 for w in rollout.waves if w.start + dt.timedelta(seconds=w.seconds) <= wave.start
                   and w is not wave)
        launched_ready = sum(len(w.replacements) for w in rollout.waves
                             if w.start + dt.timedelta(seconds=60) <= wave.start)
        total = nodes - gone + launched_ready
        assert len(running) <= max(allowance(written["default"], DRIFTED, wave.start, total).enforced, 0)
