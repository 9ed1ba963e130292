"""Every rule of the shipped CRDs compiles to Python closures (`api.v1.celcompile`), and a closure's verdict —
pass, fail or an evaluation error — is celpy's on every node of every object of Karpenter's ported CEL tests and
on generated values (missing fields, wrong types, nulls, big integers), for the whole rule and for the per-item
predicate of the `self.all` shortcut. A closure may decline (`Unsure`): celpy then decides, so a decline is never
a wrong verdict; the test also holds that closures decline rarely on real objects."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1 import celcompile
from karpenter_policy.api.v1.cel import CelRule, _run_celpy, _verdict, compiled_rule, json_to_cel
from karpenter_policy.api.v1.celcompile import CelError, Unsure
from karpenter_policy.api.v1.crds import CRD_FILES, crd_version
from tests.api.v1.test_cel_shortcuts import _all_validations, _case_objects
from tests.profiles import deterministic


def _shipped_rules() -> list[CelRule]:
    found: dict[str, CelRule] = {}
    for api_version, kind in CRD_FILES:
        crd = crd_version(api_version, kind)
        assert crd is not None, kind
        for entry in _all_validations(crd.schema):
            found.setdefault(entry["rule"], compiled_rule(entry["rule"], entry.get("message", "")))
    return list(found.values())


def _closure_outcome(closure: celcompile.Closure, activation: dict[str, Any]) -> str:
    if not all(celcompile.fits_int64(value) for value in activation.values()):
        return "unsure"
    try:
        result = closure(activation)
    except CelError:
        return "error"
    except Unsure:
        return "unsure"
    return {True: "pass", False: "fail"}.get(result, "unsure") if isinstance(result, bool) else "unsure"


def _celpy_outcome(compiled: CelRule, value: Any, old: Any) -> str:
    passed, error = _run_celpy(compiled, value, old)
    return "error" if error is not None else "pass" if passed else "fail"


def _celpy_item_outcome(compiled: CelRule, item: Any) -> str:
    """celpy's verdict of the rule's per-item predicate on `item`, evaluated once per rule and item: the same items
    stand in many nodes of Karpenter's cases (14,678 decided items are 1,506 distinct ones), and celpy's verdict on
    one is the same every time (`repr` tells 1 from 1.0, True and "1", and keeps a map's order)."""
    key = (compiled.rule, repr(item))
    outcome = _ITEM_OUTCOMES.get(key)
    if outcome is None:
        outcome = _ITEM_OUTCOMES[key] = _evaluate_item(compiled, item)
    return outcome


_ITEM_OUTCOMES: dict[tuple[str, str], str] = {}


def _evaluate_item(compiled: CelRule, item: Any) -> str:
    try:
        result = compiled.item_program.evaluate({compiled.item_variable: json_to_cel(item)})
    except Exception:  # noqa: BLE001 - celpy's error, raised or returned
        return "error"
    passed, error = _verdict(result)
    return "error" if error is not None else "pass" if passed else "fail"


def _agree(compiled: CelRule, value: Any, old: Any = None) -> bool:
    """Asserts the closures' verdicts are celpy's on `value`; True when the whole rule's closure gave one."""
    assert compiled.closure is not None, compiled.rule
    activation = {"self": value, "oldSelf": old} if compiled.transition else {"self": value}
    ours = _closure_outcome(compiled.closure, activation)
    if ours != "unsure":
        assert ours == _celpy_outcome(compiled, value, old), (compiled.rule, value, old, ours)
    if compiled.item_closure is not None and isinstance(value, Mapping | list):
        for item in value:
            mine = _closure_outcome(compiled.item_closure, {str(compiled.item_variable): item})
            if mine != "unsure":
                assert mine == _celpy_item_outcome(compiled, item), (compiled.rule, item, mine)
    return ours != "unsure"


def test_every_rule_of_the_shipped_crds_compiles() -> None:
    rules = _shipped_rules()
    assert len(rules) >= 60
    assert [rule.rule for rule in rules if rule.closure is None] == []
    assert [rule.rule for rule in rules if rule.item_program is not None and rule.item_closure is None] == []


def _nodes(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _nodes(item)


def _distinct_case_nodes() -> list[Any]:
    seen: dict[str, Any] = {}
    for obj in _case_objects():
        for node in _nodes(obj):
            seen.setdefault(json.dumps(node, sort_keys=True), node)
    return list(seen.values())


@pytest.mark.slow
def test_every_rule_agrees_with_celpy_on_every_node_of_karpenters_cases() -> None:
    containers = [node for node in _distinct_case_nodes() if isinstance(node, Mapping | list)]
    nodes = containers[:: max(1, len(containers) // 400)]
    decided = total = 0
    for compiled in _shipped_rules():
        for previous, node in zip([None, *nodes], nodes, strict=False):
            decided += _agree(compiled, node, previous if compiled.transition else None)
            total += 1
    assert total > 20000
    assert decided > total // 3  # a rule on a node of another shape is often left to celpy


@pytest.mark.slow
def test_each_rule_agrees_with_celpy_where_it_stands_in_karpenters_cases() -> None:
    from tests.api.v1.test_cel_shortcuts import _rules_at

    decided = total = 0
    seen: set[tuple[str, str]] = set()
    for obj in _case_objects():
        crd = crd_version(obj["apiVersion"], obj["kind"])
        assert crd is not None
        for compiled, value in _rules_at(obj, crd.schema):
            key = (compiled.rule, json.dumps(value, sort_keys=True))
            if key not in seen:
                seen.add(key)
                decided += _agree(compiled, value)
                total += 1
    assert total > 500
    assert decided >= total * 0.95, (decided, total)


_keys = st.sampled_from(
    ["operator", "values", "minValues", "key", "alias", "id", "tags", "name", "owner", "schedule", "duration",
     "amiFamily", "amiSelectorTerms", "replicas", "weight", "limits", "nodes", "role", "instanceProfile",
     "deviceIndex", "networkCardIndex", "interfaceType", "rootVolume", "snapshotID", "volumeSize", "group", "kind",
     "evictionSoft", "evictionSoftGracePeriod", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
     "karpenter.sh/nodepool", "kubernetes.io/hostname", ""]
)
_strings = st.sampled_from(
    ["", "In", "Gt", "Lte", "NotIn", "0", "1", "-1", " 5", "x", "al2@latest", "windows2022@v1", "al2023", "Custom",
     "AL2", "efa-only", "interface", "karpenter.sh/nodepool", "karpenter.sh/capacity-type", "a.karpenter.sh/x",
     "karpenter.k8s.aws/instance-family", "kubernetes.io/cluster/x", "-x", "memory.available", "cpu", "nodes",
     "eks:eks-cluster-name", "9223372036854775808"]
)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from([2**63, 1.5]), _strings)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.one_of(_keys, _strings), inner,
                                                                         max_size=4)),
    max_leaves=10,
)


@deterministic(300)
@given(_values, _values)
def test_every_rule_agrees_with_celpy_on_generated_values(value: Any, old: Any) -> None:
    for compiled in _shipped_rules():
        _agree(compiled, value, old)


def test_the_differential_test_catches_a_broken_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiler whose `!=` is `==` compiles rules that disagree with celpy: the test above would fail."""
    original = celcompile._relation

    def broken(operator: str, left: Callable[..., Any], right: Callable[..., Any]) -> Callable[..., Any]:
        return original("relation_eq" if operator == "relation_ne" else operator, left, right)

    monkeypatch.setattr(celcompile, "_relation", broken)
    rule = "self.all(k, k != 'karpenter.sh/nodepool')"
    tree = __import__("karpenter_policy.api.v1.cel", fromlist=["_environment"])._environment().compile(rule)
    wrong = compiled_rule.__wrapped__(rule, "")  # a fresh compilation, not the cached one
    assert celcompile.compile_rule(tree) is not None
    with pytest.raises(AssertionError):
        _agree(wrong, {"team": "a"})
