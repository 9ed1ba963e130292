"""The CEL walk's pruning (`api/v1/cel.py` `_has_rules`, held in each schema's `_plan`: no descent below a schema
without a rule at or under it) and the remembered RE2 searches (`_matches` of the structural schema, `_found` /
`_first_match` of the compiled rules) change no verdict: every rule violation of Karpenter's ported CEL cases is the
same with the pruning taken away, a rule deep under rule-less schemas is still run, and an invalid pattern still errs
on every call."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.api.v1 import cel as cel_module
from karpenter_policy.api.v1.admission import check
from karpenter_policy.api.v1.cel import cel_violations
from karpenter_policy.api.v1.celcompile import CelError, _matches
from karpenter_policy.api.v1.crds import crd_version
from karpenter_policy.api.v1.structural import schema_problems
from karpenter_policy.api.violations import CEL_RULE
from tests.api.v1.test_cel_shortcuts import _case_objects


def test_every_case_has_the_same_rule_violations_without_the_pruning(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = list(_case_objects())
    pruned = []
    for obj in objects:
        crd = crd_version(obj["apiVersion"], obj["kind"])
        assert crd is not None
        pruned.append(cel_violations(obj, crd.schema))
    monkeypatch.setattr(cel_module, "_has_rules", lambda schema: True)
    monkeypatch.setattr(cel_module, "_PLANS", {})  # the walk's plans, made again without the pruning
    whole = []
    for obj in objects:
        crd = crd_version(obj["apiVersion"], obj["kind"])
        assert crd is not None
        whole.append(cel_violations(obj, crd.schema))
    assert pruned == whole
    assert sum(len(found) for found in whole) > 50  # the cases refuse: the comparison is not of empty lists


def _nested(rule: str) -> dict[str, Any]:
    leaf = {"type": "string", "x-kubernetes-validations": [{"rule": rule, "message": "deep rule"}]}
    return {"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "array", "items": {"type": "object", "properties": {"c": leaf}}},
        "quiet": {"type": "string"}}}}}


def test_a_rule_deep_under_schemas_without_rules_is_still_run() -> None:
    schema = _nested("self.startsWith('ok')")
    value = {"a": {"quiet": "x", "b": [{"c": "ok-1"}, {"c": "bad"}]}}
    found = cel_violations(value, schema)
    assert [(violation.rule, violation.path, violation.message) for violation in found] == [
        (CEL_RULE, ("a", "b", 1, "c"), "deep rule")]
    assert cel_violations({"a": {"quiet": "bad"}}, schema) == []  # no rule on `quiet`: nothing to fail


def test_a_new_schema_at_a_reused_address_is_not_taken_for_the_old_one() -> None:
    for _ in range(50):  # schemas made and dropped: an id may come back, the verdict must follow the schema
        assert cel_violations({"a": {"b": [{"c": "bad"}]}}, _nested("self == 'ok'")) != []
        assert cel_violations({"a": {"b": [{"c": "bad"}]}}, {"type": "object"}) == []


def test_an_invalid_pattern_errs_on_every_call() -> None:
    for _ in range(3):
        with pytest.raises(CelError):
            _matches("text", "(")
    assert _matches("us-east-1a", "^us-") is True
    assert _matches("eu-west-1a", "^us-") is False


def test_a_schema_pattern_refuses_the_same_value_every_time() -> None:
    schema = {"type": "string", "pattern": "^[0-9]+(s|m|h)$"}
    for _ in range(3):
        assert len(schema_problems("5 minutes", schema)) == 1
        assert schema_problems("5m", schema) == []


def test_a_nodepool_with_a_restricted_requirement_is_refused_each_time_it_is_checked() -> None:
    nodepool = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "a"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}]}}},
    }
    first = check(nodepool)
    assert any(violation.rule == CEL_RULE for violation in first)
    assert check(nodepool) == first
