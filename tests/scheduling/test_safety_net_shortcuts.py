"""The scheduler's shortcuts change no plan (hypothesis).

Two shortcuts make the cost strategy cheaper to run (issue #23: the scheduler's rate at 5,000 pods):

* a claim that already holds pods is refused at once when a topology group the pod owns leaves none of the
  claim's domains (`Topology.refuses`: a hostname that already has its share of a spread, or holds no pod a
  hostname affinity asks for) — before the requirement algebra the full check would do to find the same;
* the run of Karpenter's rule beside the cost plan stops once a floor under its price passes the cost plan's
  (`floor.CostFloor`).

Batches mix Karpenter's benchmark kinds (plain pods, zonal and hostname spreads, zonal and hostname pod
affinity, and hostname anti-affinity) over types whose spot prices are random per type and zone. The plan must be
the same — every pod on the same claim, each claim with the same types — with the shortcuts and without them; and
the floor, asked after every placement, never stops a Karpenter run whose plan is in fact no dearer than its
ceiling (it is a floor: never above what the run ends up costing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import COST, KARPENTER, InstanceTable, Plan, Pod, Scheduler, SchedulerOptions
from karpenter_policy.scheduling import scheduler as scheduler_module
from karpenter_policy.scheduling.topology import Topology

from .support import pod, template
from .test_cost_vs_karpenter import instance_types

PROPERTY = deterministic(150)

KINDS = ("plain", "zone-spread", "host-spread", "host-affinity", "zone-affinity", "host-anti-affinity")


def _kind_spec(kind: str, selected: str) -> dict[str, Any]:
    if kind.endswith("spread"):
        key = wk.ZONE if kind.startswith("zone") else wk.HOSTNAME
        constraint = {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                      "labelSelector": {"matchLabels": {"group": selected}}}
        return {"topologySpreadConstraints": [constraint]}
    if kind.endswith("affinity"):
        key = wk.ZONE if kind.startswith("zone") else wk.HOSTNAME
        term = {"labelSelector": {"matchLabels": {"group": selected}}, "topologyKey": key}
        which = "podAntiAffinity" if "anti" in kind else "podAffinity"
        return {"affinity": {which: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    return {}


@st.composite
def batches(draw: st.DrawFn) -> list[Pod]:
    pods: list[Pod] = []
    for _ in range(draw(st.integers(1, 60))):
        kind = draw(st.sampled_from(KINDS))
        cpu = draw(st.sampled_from(["100m", "250m", "500m", "1", "1500m", "3"]))
        memory = draw(st.sampled_from(["100Mi", "512Mi", "1Gi", "2Gi", "4Gi"]))
        label, selected = draw(st.sampled_from("abc")), draw(st.sampled_from("abc"))
        spec = _kind_spec(kind, selected)
        pods.append(pod(f"p{len(pods)}", cpu, memory, labels={"group": label}, order=len(pods), **spec))
    return pods


def _solve(table: InstanceTable, pods: list[Pod], strategy: str = COST) -> Plan:
    return Scheduler([template(table)], options=SchedulerOptions(strategy)).solve(pods)


def _layout(plan: Plan) -> list[Any]:
    """Everything a plan decides: each claim's pods, types (in launch order) and requirements; the failures."""
    claims = [(c.template, [p.key for p in c.pods], [(o.instance_type, o.zone, o.capacity_type) for o in c.options],
               str(c.requirements)) for c in plan.claims]
    return [claims, sorted(plan.failures), sorted(plan.relaxed.items())]


@contextlib.contextmanager
def without_shortcuts() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Topology, "_domain_tests", lambda self, pod, attempt: [])  # `refuses`, `refusal`: none
        patch.setattr(scheduler_module, "FLOOR_EVERY", 10**9)  # the floor never asked: Karpenter's run completes
        yield


@PROPERTY
@given(types=instance_types(), pods=batches())
def test_the_shortcuts_change_no_plan(types: list[Any], pods: list[Pod]) -> None:
    table = InstanceTable(types)
    with without_shortcuts():
        expected = {strategy: _layout(_solve(table, pods, strategy)) for strategy in (COST, KARPENTER)}
    assert {strategy: _layout(_solve(table, pods, strategy)) for strategy in (COST, KARPENTER)} == expected


@PROPERTY
@given(types=instance_types(), pods=batches())
def test_the_floor_never_stops_a_run_that_would_have_been_cheap_enough(types: list[Any], pods: list[Pod]) -> None:
    table = InstanceTable(types)
    scheduler = Scheduler([template(table)])
    pending = sorted(pods, key=scheduler_module.queue_order)
    full = scheduler_module._Run(scheduler, pending, KARPENTER).solve()
    if full.failures or full.unpriced:
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_module, "FLOOR_EVERY", 1)  # asked after every placement
        stopped = scheduler_module._Run(scheduler, pending, KARPENTER).solve_below(full.known_cost)
        assert stopped is not None, "the floor passed what the run in fact costs"
        assert _layout(stopped) == _layout(full)


def test_a_karpenter_run_that_cannot_be_cheaper_is_stopped() -> None:
    """The benchmark's shape at 700 pods: Karpenter's rule costs well above the cost plan, and its run is stopped
    (the floor passes a ceiling far below what it costs) — the answer is the cost plan either way."""
    from karpenter_policy.model.requirements import Requirements
    from karpenter_policy.scheduling import NodeClaimTemplate
    from karpenter_policy.scheduling.synthetic import SHAPE, benchmark_types

    table = InstanceTable(benchmark_types(50))
    only = NodeClaimTemplate.build(table, name="default", requirements=Requirements(), shape=SHAPE)
    pods = [pod(f"p{i}", ("100m", "250m", "1", "1500m")[i % 4], ("100Mi", "1Gi", "4Gi")[i % 3], order=i)
            for i in range(700)]
    scheduler = Scheduler([only])
    pending = sorted(pods, key=scheduler_module.queue_order)
    full = scheduler_module._Run(scheduler, pending, KARPENTER).solve()
    cost = scheduler.solve(pods)
    assert not full.failures and cost.known_cost < full.known_cost
    assert scheduler_module._Run(scheduler, pending, KARPENTER).solve_below(cost.known_cost * 0.5) is None
