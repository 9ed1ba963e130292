"""The pure pieces both clusters share: budget arithmetic, patch application, selector parsing, backoff."""

from __future__ import annotations

import pytest

from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.disruption import disruption_budget, eviction_verdict
from karpenter_policy.kube.errors import Invalid
from karpenter_policy.kube.patches import apply_patch
from karpenter_policy.kube.selectors import BadSelector, label_selector_matches, parse_label_selector

from .support import pdb, pod, running_pods


@pytest.mark.parametrize(
    ("spec", "pods", "expected_desired", "expected_allowed"),
    [
        ({"minAvailable": 2}, 3, 2, 1),
        ({"minAvailable": "50%"}, 3, 2, 1),  # 1.5 rounds up
        ({"maxUnavailable": 1}, 3, 2, 1),
        ({"maxUnavailable": "10%"}, 3, 2, 1),  # 0.3 rounds up to 1
        ({"maxUnavailable": 0}, 3, 3, 0),
        ({}, 3, 1, 2),  # neither: minAvailable 1
    ],
)
def test_budget_arithmetic(spec: dict[str, object], pods: int, expected_desired: int, expected_allowed: int) -> None:
    budget = disruption_budget(pdb("web", "web", **spec), running_pods(pods, "web"))

    assert (budget.desired_healthy, budget.disruptions_allowed) == (expected_desired, expected_allowed)


def test_expected_pods_stand_for_the_controller_scale() -> None:
    budget = pdb("web", "web", maxUnavailable=1)
    budget["status"] = {"expectedPods": 3}

    # one replica is already gone (being replaced): the two left may not be disrupted
    assert disruption_budget(budget, running_pods(2, "web")).disruptions_allowed == 0


def test_budgets_select_only_their_namespace_and_labels() -> None:
    other_namespace = running_pods(2, "web", namespace="team-b")
    other_app = running_pods(2, "db")

    budget = disruption_budget(pdb("web", "web", minAvailable=1), [*other_namespace, *other_app])

    assert (budget.expected, budget.healthy) == (0, 0)


def test_a_pod_two_budgets_cover_cannot_be_evicted() -> None:
    pods = running_pods(3, "web")
    verdict = eviction_verdict(pods[0], [pdb("a", "web"), pdb("b", "web")], pods)

    assert not verdict.allowed and verdict.status == 500 and "more than one" in verdict.message


def test_a_null_selector_selects_nothing_and_an_empty_one_everything() -> None:
    pods = running_pods(3, "web")
    null, empty = pdb("web", "web", maxUnavailable=1), pdb("all", "web", maxUnavailable=1)
    null["spec"]["selector"], empty["spec"]["selector"] = None, {}

    assert (disruption_budget(null, pods).expected, disruption_budget(empty, pods).expected) == (0, 3)


def test_a_budget_whose_selector_has_an_unknown_operator_selects_nothing() -> None:
    pods = running_pods(3, "web")
    budget = pdb("web", "web", maxUnavailable=0)
    budget["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "Nope", "values": ["db"]}]}

    assert disruption_budget(budget, pods).expected == 0  # not NotIn [db], which would cover the three
    assert eviction_verdict(pods[0], [budget], pods).allowed


def test_label_selector_strings_match_as_their_structured_clauses() -> None:
    labels = {"app": "web", "tier": "front"}

    assert label_selector_matches("app=web,tier in (front,back),!canary", labels)
    assert not label_selector_matches("app!=web", labels)
    assert label_selector_matches("app notin (db),canary notin (x)", labels)


@pytest.mark.parametrize("selector", ["app in web", "=web", "app=(x)", "a b"])
def test_malformed_label_selectors_are_refused(selector: str) -> None:
    with pytest.raises(BadSelector) as raised:
        parse_label_selector(selector)
    assert raised.value.status == 400


def test_merge_patch_null_deletes_and_lists_replace() -> None:
    obj = pod("web", labels={"a": "1", "b": "2"}, finalizers=["x", "y"])

    patched = apply_patch(obj, {"metadata": {"labels": {"a": None}, "finalizers": ["z"]}}, "merge")

    assert patched["metadata"]["labels"] == {"b": "2"} and patched["metadata"]["finalizers"] == ["z"]
    assert obj["metadata"]["labels"] == {"a": "1", "b": "2"}  # the original is untouched


def test_strategic_merge_directives() -> None:
    obj = pod("web", finalizers=["x", "y"])
    obj["status"] = {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}

    patched = apply_patch(
        obj,
        {
            "$setElementOrder/finalizers": ["x"],
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["y"]},
            "spec": {"containers": [{"name": "app", "$patch": "delete"}, {"name": "sidecar", "image": "s:1"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
        "strategic",
    )

    assert patched["metadata"]["finalizers"] == ["x"]
    assert patched["spec"]["containers"] == [{"name": "sidecar", "image": "s:1"}]
    assert patched["status"]["conditions"] == [
        {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}
    ]


def test_a_patch_of_the_wrong_shape_is_invalid() -> None:
    with pytest.raises(Invalid):
        apply_patch({}, {"op": "add"}, "json")
    with pytest.raises(Invalid):
        apply_patch({}, [{"op": "add"}], "merge")


def test_backoff_doubles_within_jitter_up_to_its_ceiling_and_resets() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0)

    delays = [backoff.next_delay() for _ in range(6)]
    backoff.reset()

    ceilings = [1, 2, 4, 8, 8, 8]
    assert all(ceiling / 2 <= delay <= ceiling for delay, ceiling in zip(delays, ceilings, strict=True))
    assert backoff.next_delay() <= 1.0
