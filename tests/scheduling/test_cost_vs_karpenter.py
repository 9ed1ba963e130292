"""The default `cost` plan is never dearer than Karpenter's own rule on the same batch (hypothesis).

Random batches of simple pods (cpu and memory requests, no topology) meet instance types whose spot prices are
random per type and zone — not linear in size, as real spot prices are not (issue #19: five 1-vCPU pods were put
on three nodes, dearer than the one node Karpenter's rule launches). Whenever Karpenter's rule places every pod,
so does the cost strategy; with as many pods placed, the cost plan's $/h is at most the Karpenter plan's, and
every claim is launched at the cheapest type of its template that holds its pods in its zones.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.scheduling import COST, KARPENTER, InstanceTable, Plan, Pod, Scheduler, SchedulerOptions
from karpenter_policy.scheduling.vectors import fits

from .support import ZONES, fake_type, pod, template

PROPERTY = deterministic(300)

#: (cpu, memory GiB, pod slots) of the types: three families (compute, general, memory) of five sizes.
SIZES = [(cpu, cpu * ratio, 8 * cpu) for ratio in (2, 4, 8) for cpu in (2, 4, 8, 16, 32)]
SPOT_ZONES = ZONES


@st.composite
def instance_types(draw: st.DrawFn) -> list[InstanceType]:
    """Types priced on demand by size, each spot offering at a random 25–45 % of it (per type and zone)."""
    out = []
    for cpu, memory, pods in SIZES:
        base = fake_type(f"c{cpu}-m{memory}", cpu=cpu, memory_gib=memory, pods=pods)
        on_demand = round(0.04 * cpu + 0.005 * memory, 5)
        offerings = [Offering(zone, "on-demand", on_demand) for zone in ZONES]
        for zone in SPOT_ZONES:
            share = draw(st.integers(250, 450)) / 1000
            offerings.append(Offering(zone, "spot", round(on_demand * share, 5)))
        out.append(dataclasses.replace(base, offerings=tuple(offerings)))
    return out


@st.composite
def batches(draw: st.DrawFn) -> list[Pod]:
    pods: list[Pod] = []
    for w in range(draw(st.integers(1, 3))):
        cpu = draw(st.sampled_from(["250m", "500m", "1", "1500m", "2", "3", "7"]))
        memory = draw(st.sampled_from(["128Mi", "1Gi", "2Gi", "6Gi", "20Gi"]))
        for i in range(draw(st.integers(1, 24))):
            pods.append(pod(f"w{w}-{i}", cpu, memory, labels={"app": f"w{w}"}, order=len(pods)))
    return pods


def plan(table: InstanceTable, pods: list[Pod], strategy: str, requirements: Requirements, cpu: int | None) -> Plan:
    limits = {"cpu": Decimal(cpu)} if cpu else {}
    templates = [template(table, requirements=requirements, limits=limits)]
    return Scheduler(templates, options=SchedulerOptions(strategy)).solve(pods)


@PROPERTY
@given(
    types=instance_types(),
    pods=batches(),
    capacity=st.sampled_from([None, "spot", "on-demand"]),
    cpu_limit=st.sampled_from([None, None, None, 40, 100]),
)
def test_the_cost_plan_is_never_dearer_than_karpenters_rule(
    types: list[InstanceType], pods: list[Pod], capacity: str | None, cpu_limit: int | None
) -> None:
    table = InstanceTable(types)
    requirements = Requirements([Requirement.new(wk.CAPACITY_TYPE, "In", [capacity])] if capacity else [])
    cost = plan(table, pods, COST, requirements, cpu_limit)
    karpenter = plan(table, pods, KARPENTER, requirements, cpu_limit)
    if not karpenter.failures:
        assert not cost.failures
    assert len(cost.failures) <= len(karpenter.failures)
    if len(cost.failures) == len(karpenter.failures):
        assert cost.known_cost <= karpenter.known_cost + 1e-9, (
            [(c.instance_type, c.price, len(c.pods)) for c in cost.claims],
            [(k.instance_type, k.price, len(k.pods)) for k in karpenter.claims],
        )
    # each claim at the cheapest type of the template that holds its pods, in its zones and capacity types
    (only,) = [template(table, requirements=requirements)]
    for claim in cost.claims:
        assert claim.launch is not None and claim.price is not None
        zones = claim.requirements.get(wk.ZONE)
        capacity_types = claim.requirements.get(wk.CAPACITY_TYPE)
        cheapest = min(
            offering.price
            for it in types
            if fits(claim.requests, only.shapes.allocatable[table.position[it.name]])
            for offering in it.offerings
            if offering.price is not None
            and (zones is None or zones.has(offering.zone))
            and (capacity_types is None or capacity_types.has(offering.capacity_type))
            and offering.capacity_type == claim.launch.capacity_type
        )
        assert claim.price <= cheapest + 1e-9
