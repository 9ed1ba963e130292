"""The scheduler's caches change no plan (hypothesis).

Issue #23 (the scheduler's rate at 5,000 pods) added caches on the paths every claim check takes:

* which topology groups select a pod is remembered by its namespace and labels (`PodShape.selection_key`), not
  by its shape — pods that differ only in their requests share the answer;
* an instance table remembers, per ranking of zones and capacity types, the cheapest type of each mask asked
  (`InstanceTable._cheapest_entry`), and finds a ranking by the identity of the two requirements first
  (`InstanceTable._rank`).

With each cache taken away — selection keyed by the shape itself, every cheapest type searched again, every
ranking looked up by value — every plan of both strategies is the same: every pod on the same claim, each claim
with the same types in the same order, the same failures and relaxations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from profiles import deterministic

from karpenter_policy.model.requirements import Requirement
from karpenter_policy.scheduling import COST, KARPENTER, InstanceTable, Pod
from karpenter_policy.scheduling import instances as instances_module
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


@contextlib.contextmanager
def without_caches() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        # a data descriptor: wins over a value `cached_property` already stored on the shape
        patch.setattr(PodShape, "selection_key", property(lambda shape: (shape.namespace, shape.labels, id(shape))))
        patch.setattr(InstanceTable, "_cheapest_entry", _uncached_cheapest)
        patch.setattr(InstanceTable, "_rank", lambda self, zone, capacity_type: self._rank_sets(zone, capacity_type))
        yield


@PROPERTY
@given(types=instance_types(), pods=batches())
def test_the_caches_change_no_plan(types: list[Any], pods: list[Pod]) -> None:
    with without_caches():
        table = InstanceTable(types)
        expected = {strategy: _layout(_solve(table, pods, strategy)) for strategy in (COST, KARPENTER)}
    table = InstanceTable(types)
    assert {strategy: _layout(_solve(table, pods, strategy)) for strategy in (COST, KARPENTER)} == expected
