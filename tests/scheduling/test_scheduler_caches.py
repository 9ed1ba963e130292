"""The scheduler's caches change no plan (hypothesis).

Issue #23 (the scheduler's rate at 5,000 pods) added caches on the paths every claim check takes:

* which topology groups select a pod is remembered by its namespace and labels (`PodShape.selection_key`), not
  by its shape — pods that differ only in their requests share the answer;
* an instance table remembers, per ranking of zones and capacity types, the cheapest type of each mask asked
  (`InstanceTable._cheapest_entry`), and finds a ranking by the identity of the two requirements first
  (`InstanceTable._rank`);
* the keys of a pod's topology groups are made once per scheduling, one object per key (`GroupKeys`);
* an affinity group remembers the domains holding a selected pod while its counts stand (`_next_affinity`);
* a ranking builds its offerings once (`InstanceTable.ranked`), and lists the few types of a claim by their ranks
  (remembered per ranking) instead of a pass over every type (issue #27);
* Karpenter's rule keeps its claims in fewest-pods order by moving the one claim that changed
  (`_Run._fewest_pods_first`), where Karpenter sorts them all before each pod.

With each cache taken away — selection keyed by the shape itself, every cheapest type searched again, every
ranking looked up by value, group keys and offerings made afresh for every question (a claim's types found by a
pass over the whole ranking), affinity domains worked out again, the claims sorted (stably) before each pod — every
plan of both strategies is the same: every pod on the same claim, each claim with the same types in the same order,
the same failures and relaxations. A claim's types listed by their ranks are, for any mask of the catalog's types,
what a pass over a ranking made afresh lists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, known_price
from karpenter_policy.model.requirements import Operator, Requirement
from karpenter_policy.scheduling import COST, KARPENTER, InstanceTable, Pod
from karpenter_policy.scheduling import instances as instances_module
from karpenter_policy.scheduling import scheduler as scheduler_module
from karpenter_policy.scheduling import topology as topology_module
from karpenter_policy.scheduling.pods import PodShape

from .test_cost_vs_karpenter import instance_types
from .test_safety_net_shortcuts import _layout, _solve, batches

PROPERTY = deterministic(100)


def _uncached_cheapest(
    self: InstanceTable, mask: int, zone: Requirement, capacity_type: Requirement
) -> tuple[float, int, int, int] | None:
    ranked = self._rank_sets(zone, capacity_type)
    if not ranked.prefixes or not mask & ranked.prefixes[-1]:
        return None
    return ranked.entries[instances_module._first_meeting(ranked.prefixes, mask)]


_next_affinity = topology_module.TopologyGroup._next_affinity


def _ranked_afresh(self: InstanceTable, mask: int, zone: Requirement, capacity_type: Requirement) -> Any:
    """Every type of the mask in the order of a ranking made afresh, its offerings made afresh: one pass over it."""
    return [
        ChosenOffering(self.names[i], self.zones[z], self.capacity_types[c], known_price(price))
        for price, i, z, c in self._rank_sets(zone, capacity_type).entries
        if mask >> i & 1
    ]


def _affinity_afresh(self: topology_module.TopologyGroup, *args: Any) -> Requirement:
    self._affine = None
    return _next_affinity(self, *args)


def _keys_afresh(self: topology_module.GroupKeys, shape: PodShape, attempt: Any) -> Any:
    return tuple(topology_module._specs(shape, attempt, self.rules is topology_module.TopologyRules.V1_14))


def _sorted_before_each_pod(self: scheduler_module._Run) -> None:
    self.claims.sort(key=lambda claim: len(claim.pods))  # Karpenter's own: a stable sort of every claim


@contextlib.contextmanager
def without_caches() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        # a data descriptor: wins over a value `cached_property` already stored on the shape
        patch.setattr(PodShape, "selection_key", property(lambda shape: (shape.namespace, shape.labels, id(shape))))
        patch.setattr(InstanceTable, "_cheapest_entry", _uncached_cheapest)
        patch.setattr(InstanceTable, "_rank", lambda self, zone, capacity_type: self._rank_sets(zone, capacity_type))
        patch.setattr(InstanceTable, "ranked", _ranked_afresh)
        patch.setattr(topology_module.GroupKeys, "of", _keys_afresh)
        patch.setattr(topology_module.TopologyGroup, "_next_affinity", _affinity_afresh)
        patch.setattr(scheduler_module._Run, "_fewest_pods_first", _sorted_before_each_pod)
        yield


@PROPERTY
@given(types=instance_types(), pods=batches())
def test_the_caches_change_no_plan(types: list[Any], pods: list[Pod]) -> None:
    with without_caches():
        table = InstanceTable(types)
        expected = {strategy: _layout(_solve(table, pods, strategy)) for strategy in (COST, KARPENTER)}
    table = InstanceTable(types)
    assert {strategy: _layout(_solve(table, pods, strategy)) for strategy in (COST, KARPENTER)} == expected


CATALOG_TABLE = InstanceTable.of_catalog(load_catalog())


@PROPERTY
@given(picked=st.lists(st.sets(st.integers(0, len(CATALOG_TABLE.types) - 1), max_size=40), min_size=1, max_size=6),
       zones=st.sets(st.sampled_from(CATALOG_TABLE.zones)),
       capacity=st.sampled_from(((), ("spot",), ("on-demand",), ("spot", "on-demand"))))
def test_a_claims_types_listed_by_their_ranks_are_the_whole_rankings_pass(
    picked: list[set[int]], zones: set[str], capacity: tuple[str, ...]
) -> None:
    """`InstanceTable.ranked` of the catalog's types — a claim's few (listed by their ranks) or most of them (one
    pass), asked again and again of one ranking — lists what a pass over a ranking made afresh lists, in its
    order."""
    table = CATALOG_TABLE
    zone = Requirement.new(wk.ZONE, Operator.IN, sorted(zones)) if zones else Requirement.new(wk.ZONE, Operator.EXISTS)
    capacity_type = (
        Requirement.new(wk.CAPACITY_TYPE, Operator.IN, list(capacity))
        if capacity else Requirement.new(wk.CAPACITY_TYPE, Operator.EXISTS)
    )
    masks = [sum(1 << i for i in bits) for bits in picked]
    for mask in [*masks, table.everything, 0, table.everything >> 7, *masks]:
        assert table.ranked(mask, zone, capacity_type) == _ranked_afresh(table, mask, zone, capacity_type)
