"""Table-test helpers shared by the Karpenter-rule tests: change a valid base document, expect violations."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.violations import ERROR, Path, Violation

#: A change value that removes the field.
DELETE: Any = object()


def apply(doc: Mapping[str, Any], changes: Mapping[Path, Any]) -> dict[str, Any]:
    """A copy of `doc` with each path set to its value (DELETE removes it; index len(list) appends)."""
    out: dict[str, Any] = copy.deepcopy(dict(doc))
    for path, value in changes.items():
        parent: Any = out
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        if value is DELETE:
            del parent[last]
        elif isinstance(parent, list) and last == len(parent):
            parent.append(value)
        else:
            parent[last] = value
    return out


@dataclass(frozen=True)
class Expect:
    rule: str
    path: Path
    fragment: str
    severity: str = ERROR
    at_key: bool = False


@dataclass(frozen=True)
class Case:
    id: str
    changes: Mapping[Path, Any]
    expected: tuple[Expect, ...] = field(default=())


def assert_violations(found: Sequence[Violation], expected: Sequence[Expect]) -> None:
    """`found` is exactly `expected`: same rule, path, severity and at_key, message containing the fragment."""
    remaining = list(found)
    for want in expected:
        match = next(
            (
                v for v in remaining
                if (v.rule, v.path, v.severity, v.at_key) == (want.rule, want.path, want.severity, want.at_key)
                and want.fragment in v.message
            ),
            None,
        )
        assert match is not None, f"missing {want}\n  found: {remaining}"
        remaining.remove(match)
    assert remaining == [], f"unexpected violations: {remaining}"


def ids(cases: Sequence[Case]) -> list[str]:
    return [case.id for case in cases]
