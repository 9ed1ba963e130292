"""Karpenter's own CEL tests, ported as data (tests/data/karpenter-v1-cel/*.yaml, each case naming its Go file and
line), run through `api/v1`: every object the Go test expects the API server to admit is admitted, every one it
expects refused is refused — and, where the Go test calls NodePool.RuntimeValidate, that verdict too."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.api.v1.admission import admit
from karpenter_policy.api.v1.nodepool import runtime_violations

DATA = Path(__file__).parent.parent.parent / "data" / "karpenter-v1-cel"
#: randomdata.Alphanumeric(250), lowercased, as the Go tests build over-long keys.
ALNUM250 = ("k8s0" * 63)[:250]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` merged into `target` (a list replaced whole, null removing a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _expand(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("${ALNUM250}", ALNUM250)
    if isinstance(value, list):
        return [_expand(item) for item in value]
    if isinstance(value, dict):
        return {_expand(key): _expand(item) for key, item in value.items()}
    return value


def _cases() -> Iterator[Any]:
    for path in sorted(DATA.glob("*.yaml")):
        suite = yaml.safe_load(path.read_text())
        go_file = suite["source"].rsplit("/", 1)[1]
        for case in suite["cases"]:
            yield pytest.param(suite, case, id=f"{go_file}:{case['line']}:{case['name']}")


@pytest.mark.parametrize(("suite", "case"), list(_cases()))
def test_karpenter_cel_case(suite: dict[str, Any], case: dict[str, Any]) -> None:
    base = _expand(suite["base"])
    if "old_patch" in case:
        old = merge_patch(base, _expand(case["old_patch"]))
        assert admit(old).admitted, "the object before the update must be admitted"
        new = merge_patch(old, _expand(case["patch"]))
    else:
        old, new = None, merge_patch(base, _expand(case["patch"]))
    if "admit" in case:
        admission = admit(new, old)
        refusals = [f"{v.path}: {v.message}" for v in admission.refusals]
        assert admission.admitted is case["admit"], f"{suite['source']}:{case['line']} {case['name']}: {refusals}"
    if "runtime" in case:
        problems = [v.message for v in runtime_violations(new)]
        assert (not problems) is case["runtime"], f"{suite['source']}:{case['line']} {case['name']}: {problems}"


def test_every_suite_has_cases() -> None:
    """The ported files are there and each ports cases (a renamed data folder would otherwise pass vacuously)."""
    suites = sorted(DATA.glob("*.yaml"))
    assert suites
    for path in suites:
        assert yaml.safe_load(path.read_text())["cases"], path
