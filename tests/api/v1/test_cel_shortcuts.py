"""The shortcuts `api.v1.cel` takes to reuse verdicts across objects — a rule that reads only some fields of `self`
is evaluated on those fields alone, a rule `self.all(x, P)` is P on each item — give the verdict of the whole rule
evaluated as written, on every node of every object of Karpenter's ported CEL tests and on generated requirement
and budget lists (with the missing fields and wrong types that make CEL's `all` absorb or raise errors)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.cel import CelRule, _evaluate, _run_celpy, compiled_rule
from karpenter_policy.api.v1.crds import CRD_FILES, crd_version
from tests.api.v1.test_karpenter_cel_cases import _expand, merge_patch
from tests.profiles import deterministic

DATA = Path(__file__).parent.parent.parent / "data" / "karpenter-v1-cel"


def _rules_at(value: Any, schema: Mapping[str, Any]) -> Iterator[tuple[CelRule, Any]]:
    for entry in schema.get("x-kubernetes-validations") or ():
        compiled = compiled_rule(entry["rule"], entry.get("message", ""))
        if not compiled.transition:
            yield compiled, value
    if isinstance(value, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key) if key in properties else extra if isinstance(extra, Mapping) else None
            if sub is not None:
                yield from _rules_at(item, sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            yield from _rules_at(item, schema["items"])


def _same_verdict(compiled: CelRule, value: Any) -> None:
    shortcut = _evaluate(compiled, value, None)
    whole = _run_celpy(compiled, value, None)
    assert shortcut[0] is whole[0], (compiled.rule, value, shortcut, whole)
    assert (shortcut[1] is None) is (whole[1] is None), (compiled.rule, value, shortcut, whole)


def test_the_shortcuts_apply_to_the_rules_that_cost_most() -> None:
    rules = [
        compiled_rule(entry["rule"], entry.get("message", ""))
        for api_version, kind in CRD_FILES
        for entry in _all_validations((crd_version(api_version, kind) or pytest.fail(kind)).schema)
    ]
    assert sum(1 for rule in rules if rule.item_program is not None) >= 10
    assert sum(1 for rule in rules if rule.fields is not None) >= 5
    by_text = {rule.rule: rule for rule in rules}
    assert by_text["!has(self.replicas) || !has(self.weight)"].fields == {"replicas", "weight"}
    assert by_text["self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"].item_variable == "x"


def _all_validations(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield from schema.get("x-kubernetes-validations") or ()
    for sub in (schema.get("properties") or {}).values():
        yield from _all_validations(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield from _all_validations(schema[key])


def _case_objects() -> Iterator[Any]:
    for path in sorted(DATA.glob("*.yaml")):
        suite = yaml.safe_load(path.read_text())
        base = _expand(suite["base"])
        for case in suite["cases"]:
            yield merge_patch(base, _expand(case["patch"]))


def test_every_node_of_karpenters_cases_gets_the_whole_rules_verdict() -> None:
    checked = 0
    for obj in _case_objects():
        crd = crd_version(obj["apiVersion"], obj["kind"])
        assert crd is not None
        for compiled, value in _rules_at(obj, crd.schema):
            if compiled.item_program is not None or compiled.fields is not None:
                _same_verdict(compiled, value)
                checked += 1
    assert checked > 1000


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "0", "5", "x", "-1"]))
_requirement = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["kubernetes.io/arch", "karpenter.sh/nodepool", "example.com/team", "", 5]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "Gt", "Lt", "Gte", "Lte", "Equals", 1]),
        "values": st.one_of(st.lists(_scalars, max_size=3), _scalars),
        "minValues": st.one_of(st.integers(-1, 4), st.sampled_from(["2", None])),
    },
)
_budget = st.fixed_dictionaries(
    {},
    optional={
        "nodes": st.sampled_from(["10%", "1", "0", 3]),
        "schedule": st.sampled_from(["@daily", "0 9 * * mon-fri", 7]),
        "duration": st.sampled_from(["8h", "30m", None]),
    },
)


@deterministic(200)
@given(
    st.one_of(
        st.lists(_requirement, max_size=4),
        st.lists(_budget, max_size=3),
        st.dictionaries(st.text(max_size=12), _scalars, max_size=3),
    ),
)
def test_generated_lists_get_the_whole_rules_verdict(value: Any) -> None:
    for api_version, kind in CRD_FILES:
        crd = crd_version(api_version, kind)
        assert crd is not None
        for entry in _all_validations(crd.schema):
            compiled = compiled_rule(entry["rule"], entry.get("message", ""))
            if compiled.item_program is not None or compiled.fields is not None:
                _same_verdict(compiled, value)
