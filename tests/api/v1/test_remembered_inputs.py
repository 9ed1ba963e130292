"""What `api/v1` remembers across objects is keyed by exactly what tells JSON values apart: CEL verdicts by their
inputs (`cel._frozen`: 1, 1.0 and true are three inputs though Python takes them as equal keys), and one walk of
the structural schema gives both the stored form and the unknown fields (`structural.defaulted_and_unknown`)."""

from __future__ import annotations

from typing import Any

from karpenter_policy.api.v1.cel import cel_violations
from karpenter_policy.api.v1.crds import NODEPOOL_API_VERSION, NODEPOOL_KIND, crd_version
from karpenter_policy.api.v1.nodepool import requirement_errors
from karpenter_policy.api.v1.structural import defaulted, defaulted_and_unknown, unknown_fields

_TEXT = {"x-kubernetes-validations": [{"rule": 'string(self) == "1" || string(self) == "0.0"', "message": "m"}]}
_LIST = {"type": "array", "items": {"x-kubernetes-int-or-string": True},
         "x-kubernetes-validations": [{"rule": 'self.all(x, string(x) == "1")', "message": "m"}]}


def test_a_remembered_verdict_is_not_given_to_a_value_python_finds_equal() -> None:
    verdicts = [bool(cel_violations(value, _TEXT)) for value in (1, True, 1.0, 1, 0.0, -0.0, 0, False)]
    assert verdicts == [False, True, True, False, False, True, True, True]
    items = [bool(cel_violations(value, _LIST)) for value in ([1], [True], [1.0], [1, 1])]
    assert items == [False, True, True, False]


def test_members_in_another_order_are_the_same_input() -> None:
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.a < self.b", "message": "a < b"}]}
    assert cel_violations({"a": 1, "b": 2}, schema) == cel_violations({"b": 2, "a": 1}, schema) == []
    assert cel_violations({"b": 1, "a": 2}, schema) != []


def _nodepool(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": NODEPOOL_API_VERSION, "kind": NODEPOOL_KIND, "metadata": {"name": "a"}, "spec": spec}


def test_one_walk_gives_the_stored_form_and_every_unknown_field_at_its_path() -> None:
    crd = crd_version(NODEPOOL_API_VERSION, NODEPOOL_KIND)
    assert crd is not None
    body = _nodepool(
        typo=1,
        disruption={"budgets": [{"nodes": "1"}, {"nodes": "2", "reason": "x"}], "consolidateAfter": None},
        template={"metadata": {"labels": {"a": "b"}, "extra": {}}, "spec": {
            "requirements": [{"key": "a", "operator": "Exists", "minValue": 2}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}},
    )
    stored, problems = defaulted_and_unknown(body, crd.schema)
    assert [(p.violation.path, p.violation.at_key) for p in problems] == [
        (("spec", "typo"), True),
        (("spec", "disruption", "budgets", 1, "reason"), True),
        (("spec", "template", "metadata", "extra"), True),
        (("spec", "template", "spec", "requirements", 0, "minValue"), True),
    ]
    assert stored == defaulted(body, crd.schema)
    assert problems == unknown_fields(body, crd.schema)
    assert "typo" not in stored["spec"] and "consolidateAfter" not in stored["spec"]["disruption"]  # null: pruned
    assert stored["spec"]["disruption"]["budgets"] == [{"nodes": "1"}, {"nodes": "2"}]


def test_a_remembered_requirement_answer_is_given_only_to_the_same_requirement() -> None:
    """`nodepool.requirement_errors` remembers its answers: minValues true and 1 are one key to a dict but two
    answers (Karpenter's message prints the value), and a requirement asked twice gets its answer twice, each a
    list of its own."""
    known = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
    as_one, as_true = requirement_errors({**known, "minValues": 2}), requirement_errors({**known, "minValues": True})
    assert as_one == ["not enough valid values found in [spot] for karpenter.sh/capacity-type, expected at least 2 "
                      "valid values from: [on-demand reserved spot], got: 1", "key karpenter.sh/capacity-type with "
                      "operator In must have at least minimum number of values defined in 'values' field"]
    assert as_true == []  # one valid value: true (1) is met
    first = requirement_errors({**known, "minValues": 2})
    first.append("changed by a caller")
    assert requirement_errors({**known, "minValues": 2}) == as_one
    assert requirement_errors({**known, "values": [1], "minValues": 1.0}) == requirement_errors(
        {**known, "values": ["1"]})  # values are read as text, a float minValues not at all
