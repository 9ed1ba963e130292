"""The commands' JSON (`checks/prettyjson.py` through `reporters.json_text`) is byte for byte what the standard
library writes with `indent=2, sort_keys=True, ensure_ascii=False` of the data made displayable — the way it was
written before, kept here as the oracle — whatever the data holds, errors included.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.checks.prettyjson import Written, pretty_json
from karpenter_policy.checks.reporters import displayable, json_text


def displayable_copy(data: Any) -> Any:
    """The data with every string, key or value, `displayable` and tuples as lists (how the reporters used to copy
    it before `json.dumps`)."""
    if isinstance(data, str):
        return displayable(data)
    if isinstance(data, dict):
        return {displayable(k) if isinstance(k, str) else k: displayable_copy(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [displayable_copy(v) for v in data]
    return data


def standard(data: Any) -> str:
    """The oracle: the standard library's pretty JSON of the displayable copy."""
    return json.dumps(displayable_copy(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def outcome(write: Any, data: Any) -> tuple[str, str]:
    """What writing `data` gives: ("ok", the text) or ("error", the exception's type and message)."""
    try:
        return "ok", write(data)
    except (TypeError, ValueError) as error:
        return "error", f"{type(error).__name__}: {error}"


# text with what reports meet: non-ASCII names, control characters, quotes, lone surrogates (undecodable bytes)
texts = st.text(
    alphabet=st.sampled_from(["a", "Z", "0", " ", '"', "\\", "\n", "\t", "\x00", "\x1f", "é", "€", "😀", "\udce9",
                              "\ud800", "/", ":", "\u2028"]),
    max_size=8,
)
scalars = (
    texts
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.none()
)
str_keys = st.dictionaries(texts, st.deferred(lambda: values), max_size=5)
other_keys = st.dictionaries(
    st.integers(-5, 5) | st.floats(allow_nan=False) | st.booleans() | st.none(), st.deferred(lambda: values), max_size=4
)
values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple) | str_keys | other_keys,
    max_leaves=30,
)


@deterministic(500)
@given(data=values)
def test_json_text_is_the_standard_librarys(data: Any) -> None:
    assert outcome(json_text, data) == outcome(standard, data)


def test_a_report_like_document_is_the_standard_librarys() -> None:
    """A findings report's shapes: nested sections, empty lists and objects, floats, a non-UTF-8 file name."""
    report = {
        "findings": [
            {"file": "apps/caf\udce9.yaml", "line": 3, "message": "d\u00e9j\u00e0 \"vu\"\nnext", "related": []},
            {"file": "b.yaml", "line": 0, "cost": 0.1 + 0.2, "ratio": math.inf, "none": None, "ok": True},
        ],
        "summary": OrderedDict([("warnings", 2), ("errors", 0), ("kinds", {})]),
        "placements": (("web", 1e-7), ("api", 12345678901234567890)),
    }
    assert json_text(report) == standard(report)
    assert "caf\\\\xe9" in json_text(report)  # the undecodable byte, spelt out


@pytest.mark.parametrize(
    "data",
    [
        {1: "a", "b": 2},  # keys that do not sort
        {"a": {1, 2}},  # a value JSON has no form for
        [object()],
        {(1, 2): "tuple key"},
    ],
)
def test_the_standard_librarys_errors(data: Any) -> None:
    kind, message = outcome(json_text, data)
    assert kind == "error"
    assert (kind, message) == outcome(standard, data)


def test_strings_are_transformed_only_when_not_ascii() -> None:
    seen: list[str] = []

    def upper(text: str) -> str:
        seen.append(text)
        return text.upper()

    assert pretty_json({"ké": ["x", "é"]}, upper) == '{\n  "KÉ": [\n    "x",\n    "É"\n  ]\n}'
    assert seen == ["ké", "é"]


@deterministic(300)
@given(data=values, part=values, path=st.lists(st.sampled_from(["list", "key"]), max_size=4))
def test_a_written_part_is_the_value_it_was_written_from(data: Any, part: Any, path: list[str]) -> None:
    """`Written` (a part written once, placed as is — SARIF's rule descriptors): the document is byte for byte the one
    with the value in its place, at any depth, beside any data."""

    def place(value: Any) -> Any:
        for step in path:
            value = [data, value] if step == "list" else {"data": data, "part": value}
        return value

    try:
        written = Written(pretty_json(part, displayable))
    except (TypeError, ValueError):
        return  # a value with no JSON form is never written
    assert outcome(lambda d: pretty_json(d, displayable), place(written)) == outcome(
        lambda d: pretty_json(d, displayable), place(part)
    )
