"""Karpenter v1.14.1's `Gte`/`Lte` cases (pkg/scheduling/requirement_test.go), ported as data in
tests/data/karpenter-v1-requirements/gte-lte.yaml: each case intersects its requirements in the model and asks
`has` of each value, as the Go test asks `Has`; `same_as` says which single requirement the intersection equals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.model.requirements import Requirement

CASES_FILE = Path(__file__).resolve().parents[1] / "data" / "karpenter-v1-requirements" / "gte-lte.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(CASES_FILE.read_text(encoding="utf-8"))


def _intersected(terms: list[list[str]]) -> Requirement:
    found = Requirement.new("key", terms[0][0], [terms[0][1]])
    for operator, value in terms[1:]:
        found = found.intersection(Requirement.new("key", operator, [value]))
    return found


def test_every_case_names_its_go_test() -> None:
    assert len(CASES) == 12
    assert all(case["source"].startswith("pkg/scheduling/requirement_test.go:") for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['source'].split(':')[1]} {c['name']}" for c in CASES])
def test_karpenter_gte_lte_case(case: dict[str, Any]) -> None:
    requirement = _intersected(case["requirements"])
    assert {value: requirement.has(value) for value in case["has"]} == case["has"]
    if "same_as" in case:
        assert requirement == _intersected(case["same_as"])
