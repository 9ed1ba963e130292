"""What a scheduling's runs share (`scheduler.py` `_RunStart`, `TemplateParts`) changes no plan.

A disruption decision runs thousands of schedulings over the same templates and nearly the same nodes, and each
scheduling runs several packing runs (the cost order, its repairs, Karpenter's queue, Karpenter's rule). So the
runs of one scheduling start from one first-fit index, one set of topology domains and the scheduler's own copies of
the nodes — each run copying a node only when it offers it a pod —, and the schedulings of one decision share what
they read of their templates alone. These properties check, over generated clusters (zones, taints, host ports, zone
spreads, nodes of every fill), that the plans are the ones made with everything built again for every run and every
node copied at each run's start, however many schedulings share the templates' parts and however many times one
scheduler solves; and that no run's placement is left on the scheduler's nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.scheduling import STRATEGIES, ExistingNode, Plan, Pod, Scheduler, SchedulerOptions, TemplateParts
from karpenter_policy.scheduling import scheduler as scheduler_module
from karpenter_policy.scheduling.topology import TopologyRules

from .cluster import FAKE_TABLE
from .support import template
from .test_first_fit import scenes

PROPERTIES = deterministic(120)
TEMPLATES = [template(FAKE_TABLE, "default"), template(FAKE_TABLE, "other")]


def _layout(plan: Plan) -> list[Any]:
    """Everything a plan decides: each existing node's pods, each claim's pods, types and requirements, the
    failures and relaxations."""
    existing = {node: [p.key for p in pods] for node, pods in plan.existing.items()}
    claims = [(c.template, [p.key for p in c.pods], [(o.instance_type, o.zone, o.capacity_type) for o in c.options],
               str(c.requirements)) for c in plan.claims]
    return [existing, claims, sorted(plan.failures), sorted(plan.relaxed.items())]


@contextmanager
def nothing_shared() -> Iterator[None]:
    """Each run's set-up built again and every node copied at its start, each scheduling's template parts its own
    (what the shared set-up stands for)."""
    run_start = scheduler_module.Scheduler.run_start
    run_init = scheduler_module._Run.__init__

    def built_again(self: Scheduler) -> Any:
        self._run_start = None
        return run_start(self)

    def copied(self: Any, *args: Any, **kwargs: Any) -> None:
        run_init(self, *args, **kwargs)
        for position in range(len(self.existing)):
            self.own(position)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_module.Scheduler, "run_start", built_again)
        patch.setattr(scheduler_module._Run, "__init__", copied)
        patch.setattr(TemplateParts, "serves", lambda self, templates, rules: False)
        yield


def _solve_twice(nodes: list[ExistingNode], pods: list[Pod], strategy: str, parts: TemplateParts | None) -> list[Any]:
    """Two schedulings sharing `parts`, the first solving twice (all the pods, then the first half)."""
    options = SchedulerOptions(strategy)
    first = Scheduler(TEMPLATES, nodes, options=options, parts=parts)
    second = Scheduler(TEMPLATES, nodes, options=options, parts=parts)
    half = pods[: len(pods) // 2]
    return [_layout(first.solve(pods)), _layout(first.solve(half)), _layout(second.solve(half))]


@PROPERTIES
@given(scene=scenes(), strategy=st.sampled_from(STRATEGIES))
def test_the_shared_setup_changes_no_plan(scene: tuple[list[ExistingNode], list[Pod]], strategy: str) -> None:
    nodes, pods = scene
    with nothing_shared():
        expected = _solve_twice(nodes, pods, strategy, None)
    parts = TemplateParts.of(TEMPLATES, TopologyRules.V0_31)
    assert _solve_twice(nodes, pods, strategy, parts) == expected


@PROPERTIES
@given(scene=scenes(), strategy=st.sampled_from(STRATEGIES))
def test_no_run_leaves_a_placement_on_the_schedulers_nodes(
    scene: tuple[list[ExistingNode], list[Pod]], strategy: str
) -> None:
    nodes, pods = scene
    scheduler = Scheduler(TEMPLATES, nodes, options=SchedulerOptions(strategy))
    before = [(n.name, n.requests, n.requirements, list(n.host_ports)) for n in scheduler.existing]
    scheduler.solve(pods)
    assert all(node.pristine() for node in scheduler.existing)
    assert [(n.name, n.requests, n.requirements, list(n.host_ports)) for n in scheduler.existing] == before


def test_parts_serve_only_the_same_templates_under_the_same_rules() -> None:
    parts = TemplateParts.of(TEMPLATES, TopologyRules.V0_31)
    ordered = sorted(TEMPLATES, key=lambda t: (-t.weight, t.name))
    assert parts.serves(ordered, TopologyRules.V0_31)
    assert not parts.serves(ordered, TopologyRules.V1_14)
    assert not parts.serves([template(FAKE_TABLE, "default"), ordered[1]], TopologyRules.V0_31)
    assert not parts.serves(ordered[:1], TopologyRules.V0_31)
