"""Admission's one walk (`structural.defaulted_and_problems`: prune, default and check in a single pass over the
object, issue #25's speed) finds exactly what its steps find one after the other: the stored object of
`defaulted`, then `unknown_fields` of the object as written, then `schema_problems` of the stored object — the
same problems, in the same order, at the same paths — on Karpenter v1.14.1's own examples broken in every way
the schema can see (a field removed, nulled, of the wrong type, out of its enum or bounds, unknown, a list item
repeated). The order matters: it is the order of the findings `validate` prints."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.admission import crd_of
from karpenter_policy.api.v1.structural import defaulted, defaulted_and_problems, schema_problems, unknown_fields
from tests.profiles import deterministic

EXAMPLES = Path(__file__).parent.parent.parent / "data" / "karpenter-v1.14.1-examples"
#: Every NodePool and EC2NodeClass of the examples (the documents of a kind with a CRD).
DOCUMENTS = [doc for path in sorted(EXAMPLES.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
             if isinstance(doc, dict) and crd_of(doc) is not None]
#: Values that break a field in each way the schema checks (type, enum, pattern, length, bounds, null, nesting).
BREAKERS: tuple[Any, ...] = (  # copied when used: a document is changed after
    None, "", "x", "30 seconds", "a" * 300, 0, -1, 3, 2**70, 1.5, True, [], {}, ["a", "a"], [{"a": 1}, {"a": 1}],
    {"unknownField": 1}, {"key": "k", "operator": "In", "values": ["v"]}, "WhenEmpty", "Never", "10%",
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _parent(document: dict[str, Any], path: tuple[Any, ...]) -> Any:
    node: Any = document
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def broken_documents(draw: st.DrawFn) -> dict[str, Any]:
    document = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    # Most breaks land in one object or list and its fields, so that its own problems (a required field, its
    # bounds) meet its fields' in one walk, where their order is decided.
    focus = draw(st.sampled_from([path for path in _paths(document) if len(path) > 1]))
    for _ in range(draw(st.integers(0, 6))):
        paths = [path for path in _paths(document) if len(path) > 1]  # apiVersion and kind stay
        if draw(st.booleans()):
            paths = [path for path in paths if path[:len(focus)] == focus] or paths
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(document, path)
        action = draw(st.sampled_from(("replace", "delete", "unknown", "repeat")))
        if action == "replace":
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(BREAKERS)))
        elif action == "delete":
            del parent[path[-1]]
        elif action == "unknown" and isinstance(parent, dict):
            key = draw(st.sampled_from(("unknownField", "requirement", "Budgets")))
            parent[key] = copy.deepcopy(draw(st.sampled_from(BREAKERS)))
        elif action == "repeat" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
    return document


@deterministic(400)
@given(broken_documents())
def test_the_one_walk_finds_what_the_steps_find_in_their_order(document: dict[str, Any]) -> None:
    crd = crd_of(document)
    assert crd is not None
    written = copy.deepcopy(document)
    stored, problems = defaulted_and_problems(document, crd.schema)
    expected_stored = defaulted(document, crd.schema)
    assert stored == expected_stored
    assert problems == [*unknown_fields(document, crd.schema), *schema_problems(expected_stored, crd.schema)]
    assert document == written  # the object as written is never changed


def test_the_examples_break_in_the_ways_the_property_needs() -> None:
    """The property sees NodePools and EC2NodeClasses, and its breakers reach problems of each kind the walk
    orders: an object's own (a required field) before its fields', a list's duplicates after its items'."""
    assert {doc["kind"] for doc in DOCUMENTS} == {"NodePool", "EC2NodeClass"}
    nodepool = copy.deepcopy(next(doc for doc in DOCUMENTS if doc["kind"] == "NodePool"))
    crd = crd_of(nodepool)
    assert crd is not None
    template_spec = nodepool["spec"]["template"]["spec"]
    del template_spec["nodeClassRef"]
    template_spec["requirements"] = [{"key": "k", "operator": "Sometimes", "values": ["a", "a"]}] * 2
    nodepool["spec"]["disruption"] = {"consolidateAfter": "30 seconds", "budgets": [{"nodes": "10%"}] * 2}
    _, problems = defaulted_and_problems(nodepool, crd.schema)
    messages = [(".".join(map(str, p.violation.path)), p.violation.message.split(":")[0]) for p in problems]
    assert messages == [
        ("spec.template.spec.nodeClassRef", "Required value"),
        ("spec.template.spec.requirements.0.operator", "Unsupported value"),
        ("spec.template.spec.requirements.1.operator", "Unsupported value"),
        ("spec.disruption.consolidateAfter", "Invalid value"),
    ]
