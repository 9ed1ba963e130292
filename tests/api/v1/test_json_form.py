"""`admission.json_form` returns a document already in JSON form as it is (no copy), and any other as its JSON form;
the API server's steps after it never change the document they were given."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.admission import _converted, admit, json_form

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                     st.dates())
_KEYS = st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none())
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=20)


def _shares_a_container(copied: Any, original: Any) -> bool:
    originals = set()

    def collect(value: Any) -> None:
        if isinstance(value, dict | list):
            originals.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                collect(item)

    collect(original)

    def shares(value: Any) -> bool:
        if not isinstance(value, dict | list):
            return False
        return id(value) in originals or any(shares(item) for item in (
            value.values() if isinstance(value, dict) else value))

    return shares(copied)


@given(_VALUES)
@deterministic(300)
def test_the_json_form_is_the_converted_value_and_the_value_itself_when_it_is_one(value: Any) -> None:
    form = json_form(value)
    expected = _converted(value)
    assert form == expected and repr(form) == repr(expected)
    if form is not value:  # converted: a copy of its own, nothing shared with the original
        assert not _shares_a_container(form, value)
    assert json_form(expected) is expected  # the JSON form of a JSON form is itself


def test_a_date_an_integer_key_and_a_tuple_are_converted() -> None:
    value = {"a": [datetime.date(2026, 11, 30)], 1: (True, None)}
    assert json_form(value) == {"a": ["2026-11-30"], "1": [True, None]}


NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "web"},
    "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}},
    "status": {"conditions": []},
}


def test_admission_never_changes_the_document_and_stores_a_copy_of_its_own() -> None:
    doc = copy.deepcopy(NODEPOOL)
    admission = admit(doc)
    assert doc == NODEPOOL  # status kept in the document, though the API server drops it
    assert "status" not in admission.stored and admission.admitted
    assert not _shares_a_container(admission.stored, doc)
