"""An instance table's index built once per process for the same types changes no plan (issue #23).

`InstanceTable.shared` hands every caller — the controller's provisioning and disruption template builders, a
scene's — its own table over one index (the masks of labels and offerings, the AWS node shapes), built once for
equal types and region; each table fills its own caches. A plan on such a table — the first one handed out, or one
handed out after another was used — is the plan on a table built on its own; and types that differ in a single
offering (one marked unavailable, as an insufficient-capacity answer marks it) are never answered from the
index of the others.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.offerings import with_unavailable
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling import (
    COST,
    KARPENTER,
    InstanceTable,
    NodeClaimTemplate,
    Pod,
    Scheduler,
    SchedulerOptions,
)
from karpenter_policy.scheduling import instances as instances_module

from .test_cost_vs_karpenter import batches
from .test_safety_net_shortcuts import _layout

CATALOG = load_catalog()
TYPES = tuple(CATALOG.instance_types)
REGION = CATALOG.region


def _plans(table: InstanceTable, pods: list[Pod]) -> dict[str, object]:
    """Both strategies' plans on a template with the AWS node shapes (the path whose shapes are shared)."""
    template = NodeClaimTemplate.build(table, name="default", requirements=Requirements())
    return {s: _layout(Scheduler([template], options=SchedulerOptions(s)).solve(pods)) for s in (COST, KARPENTER)}


@st.composite
def _types_and_a_marked_offering(draw: st.DrawFn) -> tuple[list[InstanceType], tuple[str, str, str]]:
    picked = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=25, unique_by=lambda it: it.name))
    marked = draw(st.sampled_from(picked))
    offering = draw(st.sampled_from(marked.offerings))
    return picked, (marked.name, offering.zone, offering.capacity_type)


@deterministic(60)
@given(chosen=_types_and_a_marked_offering(), pods=batches())
def test_a_shared_table_plans_as_a_table_of_its_own(
    chosen: tuple[list[InstanceType], tuple[str, str, str]], pods: list[Pod]
) -> None:
    types, offering = chosen
    expected = _plans(InstanceTable(types, REGION), pods)
    first = InstanceTable.shared(types, REGION)
    assert _plans(first, pods) == expected
    again = InstanceTable.shared(list(types), REGION)  # a copy of the list, the same answer of the cloud
    assert again is not first and again.names is first.names, "equal types share one index"
    assert _plans(again, pods) == expected, "a table handed out after another was used plans the same"

    marked = with_unavailable(types, [offering])  # one offering unavailable: other types, another index
    assert _plans(InstanceTable.shared(marked, REGION), pods) == _plans(InstanceTable(marked, REGION), pods)


def test_the_index_and_its_node_shapes_are_built_once_and_each_table_keeps_its_own_caches() -> None:
    first = InstanceTable.shared(TYPES, REGION)
    second = InstanceTable.shared(TYPES, REGION)
    template = NodeClaimTemplate.build(first, name="a", requirements=Requirements())
    other = NodeClaimTemplate.build(second, name="b", requirements=Requirements())
    assert other.shapes is not template.shapes and other.shapes.allocatable is template.shapes.allocatable
    assert first.mask_of(Requirements()) == second.mask_of(Requirements())
    assert first._requirement_masks is not second._requirement_masks
    assert other.shapes._fit_cache is not template.shapes._fit_cache
    copies = [dataclasses.replace(it) for it in TYPES[:50]]  # equal types, other objects (a cloud's new answer)
    assert InstanceTable.shared(copies, REGION).names is InstanceTable.shared(TYPES[:50], REGION).names


def test_only_the_last_few_indexes_are_kept() -> None:
    for size in range(1, instances_module.SHARED_LIMIT + 3):
        InstanceTable.shared(TYPES[:size], REGION)
    assert len(instances_module._SHARED) == instances_module.SHARED_LIMIT
