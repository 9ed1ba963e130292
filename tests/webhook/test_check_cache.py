"""The whole-check cache on UPDATEs (issue #27): a Provisioner whose update moves only what the API server writes —
`metadata.resourceVersion`, `uid`, `generation`, `creationTimestamp`, the entries of `managedFields`, `status` —
is answered from the cache, and always exactly as a full check of that object answers it (`checks.cache_view`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.catalog import load_catalog
from karpenter_policy.webhook.checks import Checker, CheckResult

from .support import Case, cases

PROVISIONERS = [
    c
    for c in cases()
    if isinstance(c.data, dict)
    and c.data.get("kind") == "Provisioner"
    and c.data.get("apiVersion") == "karpenter.sh/v1alpha5"
    and isinstance(c.data.get("metadata"), dict)
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
_MAPPINGS = st.dictionaries(st.text(max_size=6), _JSON, max_size=4)
#: What the API server writes (the schema's types) and, sometimes, what it never would (any JSON value): a value
#: of the wrong type must still get its own verdict, naming it.
_SERVER_SET: dict[str, st.SearchStrategy[Any]] = {
    "resourceVersion": st.text(max_size=12) | _JSON,
    "uid": st.uuids().map(str) | _JSON,
    "generation": st.integers(min_value=0) | _JSON,
    "creationTimestamp": st.just("2026-11-30T09:00:00Z") | st.text(max_size=20) | _JSON,
    "managedFields": st.lists(_MAPPINGS | _JSON, max_size=3),
}
_STATUS = _MAPPINGS | _JSON


@st.composite
def server_writes(draw: st.DrawFn) -> dict[str, Any]:
    """Some of the fields the API server writes, each present or not."""
    fields = {key: draw(strategy) for key, strategy in _SERVER_SET.items() if draw(st.booleans())}
    if draw(st.booleans()):
        fields["status"] = draw(_STATUS)
    return fields


def _updated(data: dict[str, Any], writes: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(data)
    for key, value in writes.items():
        if key == "status":
            obj["status"] = value
        else:
            obj["metadata"][key] = value
    return obj


@pytest.fixture(scope="module")
def checkers() -> tuple[Checker, Checker]:
    """A caching checker, as a worker holds one, and one that checks every object in full (no cache at all)."""
    catalog = load_catalog()
    return Checker(catalog), Checker(catalog, cache_size=0)


def _answer(result: CheckResult) -> tuple[Any, ...]:
    return result.expected_kind, result.errors, result.warnings, result.findings


@deterministic(300)
@given(case=st.sampled_from(PROVISIONERS), before=server_writes(), after=server_writes())
def test_an_update_of_server_set_fields_gets_the_full_checks_answer(
    checkers: tuple[Checker, Checker], case: Case, before: dict[str, Any], after: dict[str, Any]
) -> None:
    cached, full = checkers
    cached.check(_updated(case.data, before))
    for solve in (True, False):  # validate, and mutate's validation
        obj = _updated(case.data, after)
        assert _answer(cached.check(obj, solve)) == _answer(full.check(obj, solve)), case.id


def _denied_example() -> Case:
    return next(c for c in PROVISIONERS if c.id == "negative/invalid-requirement-unsupported-operator.yaml#0")


def _status(cpu: str, when: str) -> dict[str, Any]:
    return {"resources": {"cpu": cpu, "memory": "48Gi"}, "lastScaleTime": when}


def test_a_new_resource_version_and_status_are_answered_from_the_cache(checkers: tuple[Checker, Checker]) -> None:
    """What a cluster sends when only a Provisioner's status or metadata moved: the second UPDATE costs a hash,
    not the schema, the rules and the solver again (before: every resourceVersion missed the cache). A status
    of another shape (a field added) is checked again: positions are ranks in document order."""
    cached, full = checkers
    seed = next(c for c in PROVISIONERS if c.id == "positive/seed-000-default-spot.yaml#0")
    for case in (_denied_example(), seed):
        first = cached.check(
            _updated(
                case.data, {"resourceVersion": "41", "generation": 1, "status": _status("8", "2026-11-30T08:00:00Z")}
            )
        )
        update = _updated(
            case.data, {"resourceVersion": "42", "generation": 2, "status": _status("12", "2026-11-30T09:00:00Z")}
        )
        assert cached.check(update) is first, case.id  # the same answer object: nothing was checked again
        assert _answer(first) == _answer(full.check(update)), case.id
        reshaped = _updated(case.data, {"resourceVersion": "43", "status": {"conditions": []}})
        assert cached.check(reshaped) is not first
        assert _answer(cached.check(reshaped)) == _answer(full.check(reshaped))


def test_a_server_set_field_of_the_wrong_type_is_still_refused(checkers: tuple[Checker, Checker]) -> None:
    """Only a value of the schema's type stands for the others: a resourceVersion that is not a string is denied
    with the schema's message even when the same Provisioner with a string one is cached."""
    cached, _ = checkers
    data = next(c for c in PROVISIONERS if c.id == "positive/seed-000-default-spot.yaml#0").data
    assert cached.check(_updated(data, {"resourceVersion": "7"})).allowed
    refused = cached.check(_updated(data, {"resourceVersion": 7}))
    assert not refused.allowed
    assert any(line.startswith("metadata.resourceVersion:") for line in refused.errors), refused.errors
