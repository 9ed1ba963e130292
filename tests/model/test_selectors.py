"""The one label-selector matcher (`metav1.LabelSelectorAsSelector`): its operators, and what it refuses."""

from __future__ import annotations

import pytest

from karpenter_policy.model.selectors import NOTHING, Expression, SelectorError, parse_selector, selects

WEB = {"app": "web", "tier": "front"}
BARE: dict[str, str] = {}


def expression(key: str, operator: str, *values: str) -> dict[str, object]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (expression("app", "In", "web", "db"), WEB, True),
        (expression("app", "In", "db"), WEB, False),
        (expression("app", "In", "web"), BARE, False),
        (expression("app", "NotIn", "db"), WEB, True),
        (expression("app", "NotIn", "web"), WEB, False),
        (expression("app", "NotIn", "web"), BARE, True),  # NotIn matches a pod without the label
        (expression("app", "Exists"), WEB, True),
        (expression("app", "Exists"), BARE, False),
        (expression("app", "DoesNotExist"), WEB, False),
        (expression("app", "DoesNotExist"), BARE, True),
        ({"matchLabels": {"app": "web"}, **expression("tier", "In", "front")}, WEB, True),
        ({"matchLabels": {"app": "web"}, **expression("tier", "In", "back")}, WEB, False),  # ANDed
        ({}, WEB, True),  # an empty selector selects everything
        ({}, BARE, True),
        (None, WEB, False),  # an absent one nothing
    ],
)
def test_operators(selector: object, labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected


@pytest.mark.parametrize(
    ("selector", "path"),
    [
        (expression("app", "Nope", "db"), ("matchExpressions", 0, "operator")),
        (expression("app", "Gt", "1"), ("matchExpressions", 0, "operator")),  # a node-selector operator only
        (expression("app", "notin", "db"), ("matchExpressions", 0, "operator")),  # operators are case-sensitive
        (expression("app", "In"), ("matchExpressions", 0, "values")),
        (expression("app", "Exists", "x"), ("matchExpressions", 0, "values")),
        ({"matchExpressions": [{"operator": "Exists"}]}, ("matchExpressions", 0, "key")),
        ({"matchLabels": ["app"]}, ("matchLabels",)),
        ("app=web", ()),
    ],
)
def test_a_malformed_selector_is_an_error_never_another_operator(selector: object, path: tuple[object, ...]) -> None:
    with pytest.raises(SelectorError) as raised:
        selects(selector, {"app": "web"})
    assert raised.value.path == path


def test_an_unknown_operator_cannot_be_built_either() -> None:
    with pytest.raises(SelectorError):
        Expression("app", "Nope", frozenset({"db"}))


def test_absent_is_nothing() -> None:
    assert parse_selector(None) is NOTHING
    assert str(NOTHING) == "<none>"
