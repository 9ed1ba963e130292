"""Which pool a new node comes from when weights tie: Karpenter v1.14.1's `OrderByWeight`
(kubernetes-sigs/karpenter pkg/utils/nodepool/nodepool.go:161) puts a heavier NodePool first and, at equal weight,
the name later in the alphabet; v0.31.1 sorts Provisioners by weight alone and this project keeps their listed
order, A to Z (`scheduling.templates.by_weight`, docs/scheduling.md "Queue")."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import COST, InstanceTable, NodeClaimTemplate, Scheduler, SchedulerOptions
from karpenter_policy.scheduling.templates import by_weight, name_order
from tests.scheduling.support import fake_types, pod, template

TABLE = InstanceTable(fake_types())
NAMES = st.text(alphabet="abcz-0", min_size=1, max_size=6)


def nodepool(name: str, weight: int) -> NodeClaimTemplate:
    return template(TABLE, f"NodePool/{name}", weight=weight, owner_label=wk.NODEPOOL, owner=name)


def provisioner(name: str, weight: int) -> NodeClaimTemplate:
    return template(TABLE, name, weight=weight)


@given(st.lists(st.tuples(NAMES, st.integers(1, 100)), min_size=1, max_size=10, unique_by=lambda p: p[0]),
       st.randoms())
def test_nodepools_go_heaviest_first_as_karpenter_orders_them(pools: list[tuple[str, int]], rnd: random.Random) -> None:
    # pkg/utils/nodepool/suite_test.go:63 "should order the NodePools by weight"
    templates = [nodepool(name, weight) for name, weight in pools]
    rnd.shuffle(templates)
    weights = [t.weight for t in sorted(templates, key=by_weight)]
    assert weights == sorted(weights, reverse=True)


@given(st.lists(NAMES, min_size=1, max_size=10, unique=True), st.randoms())
def test_equal_weight_nodepools_go_later_name_first(names: list[str], rnd: random.Random) -> None:
    # pkg/utils/nodepool/suite_test.go:81 "should order the NodePools by name when the weights are the same"
    templates = [nodepool(name, 10) for name in names]
    rnd.shuffle(templates)
    assert [t.name for t in sorted(templates, key=by_weight)] == [f"NodePool/{n}" for n in sorted(names, reverse=True)]


@given(st.lists(NAMES, min_size=1, max_size=10, unique=True), st.randoms())
def test_equal_weight_provisioners_keep_their_listed_order(names: list[str], rnd: random.Random) -> None:
    templates = [provisioner(name, 10) for name in names]
    rnd.shuffle(templates)
    assert [t.name for t in sorted(templates, key=by_weight)] == sorted(names)


@given(NAMES, NAMES)
def test_the_name_key_orders_as_go_compares_strings(a: str, b: str) -> None:
    assert (name_order(a, descending=False) < name_order(b, descending=False)) == (a < b)
    assert (name_order(a, descending=True) < name_order(b, descending=True)) == (a > b)


def _launched_from(templates: list[NodeClaimTemplate]) -> set[str]:
    plan = Scheduler(templates, options=SchedulerOptions(COST)).solve([pod(f"web-{i}", "1", order=i) for i in range(3)])
    assert plan.claims and not plan.failures
    return {claim.template for claim in plan.claims}


def test_a_tie_between_nodepools_launches_from_the_later_name() -> None:
    assert _launched_from([nodepool("general", 10), nodepool("spot", 10)]) == {"NodePool/spot"}
    assert _launched_from([nodepool("spot", 10), nodepool("general", 10)]) == {"NodePool/spot"}
    assert _launched_from([nodepool("general", 11), nodepool("spot", 10)]) == {"NodePool/general"}


def test_a_tie_between_provisioners_launches_from_the_first_name() -> None:
    assert _launched_from([provisioner("spot", 10), provisioner("general", 10)]) == {"general"}
