"""`kube.disruption.disruption_budgets` (every budget over every pod, the pods grouped by namespace and labels
first — what a disruption decision computes each time) gives each budget exactly what `disruption_budget` gives it
alone, for any mix of namespaces, labels, selectors, phases and readiness."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.kube.disruption import disruption_budget, disruption_budgets
from tests.profiles import deterministic

NAMESPACES = st.sampled_from(["default", "team-a"])
APPS = st.sampled_from(["web", "api", "db"])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    labels = {"app": draw(APPS)}
    if draw(st.booleans()):
        labels["tier"] = draw(st.sampled_from(["front", "back"]))
    ready = draw(st.booleans())
    return {"metadata": {"name": f"p{draw(st.integers(0, 10**6))}", "namespace": draw(NAMESPACES), "labels": labels},
            "status": {"phase": draw(st.sampled_from(["Running", "Running", "Succeeded", "Pending"])),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@st.composite
def budgets(draw: st.DrawFn) -> dict[str, Any]:
    selector: dict[str, Any] = draw(st.sampled_from([
        {"matchLabels": {"app": draw(APPS)}},
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]},
        {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
        {},
    ]))
    spec: dict[str, Any] = {"selector": selector}
    spec.update(draw(st.sampled_from([{"minAvailable": 1}, {"maxUnavailable": "50%"}, {"minAvailable": "100%"}])))
    return {"metadata": {"name": "b", "namespace": draw(NAMESPACES)}, "spec": spec}


@deterministic(200)
@given(st.lists(budgets(), max_size=5), st.lists(pods(), max_size=30))
def test_grouped_budgets_equal_each_budget_alone(pdbs: list[dict[str, Any]], cluster: list[dict[str, Any]]) -> None:
    assert disruption_budgets(pdbs, cluster) == [disruption_budget(pdb, cluster) for pdb in pdbs]


def test_a_budget_of_another_namespace_selects_none_of_the_pods() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    pdb = {"metadata": {"name": "b", "namespace": "team-a"}, "spec": {"selector": {}, "minAvailable": 1}}
    (budget,) = disruption_budgets([pdb], [pod])
    assert (budget.expected, budget.healthy) == (0, 0)
