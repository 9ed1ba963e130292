"""Unit tests of the small modules: the review wire format, field paths of positions, the solver cache."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.proof.provisioners import check_provisioner
from karpenter_policy.checks.proof.solver import Solver, Verdict, terms_of
from karpenter_policy.webhook.jsondoc import JsonDocument
from karpenter_policy.webhook.review import (
    MAX_WARNINGS,
    AdmissionResponse,
    BadReview,
    bounded_warnings,
    parse_review,
    response_body,
    shorten,
)
from karpenter_policy.webhook.server import Limits, deadline_seconds, go_duration
from karpenter_policy.webhook.solvercache import CachingSolver

from .support import review_body


def test_response_body_allowed_denied_patched() -> None:
    allowed = json.loads(response_body("u", AdmissionResponse(True)))
    assert allowed == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }
    denied = json.loads(response_body("u", AdmissionResponse(False, "no", ("w",))))["response"]
    assert denied == {"uid": "u", "allowed": False, "status": {"code": 403, "message": "no"}, "warnings": ["w"]}
    patch = [{"op": "add", "path": "/spec/x", "value": "é"}]
    patched = json.loads(response_body("u", AdmissionResponse(True, patch=patch)))["response"]
    assert patched["patchType"] == "JSONPatch" and json.loads(base64.b64decode(patched["patch"])) == patch
    assert AdmissionResponse(True, patch=patch).verdict == "patched"


def test_warnings_are_bounded() -> None:
    assert shorten("a  b\nc") == "a b c"
    long = "x" * 300
    assert len(shorten(long)) == 120 and shorten(long).endswith("…")
    many = [f"warning {i}" for i in range(MAX_WARNINGS + 5)]
    shown = bounded_warnings(many)
    assert len(shown) == MAX_WARNINGS and shown[-1] == "... and 6 more warnings"


def test_parse_review() -> None:
    request = parse_review(review_body({"kind": "Pod"}, uid="abc", namespace="ns", dryRun=True))
    assert (request.uid, request.operation, request.namespace, request.dry_run) == ("abc", "CREATE", "ns", True)
    with pytest.raises(BadReview, match="request.operation must be one of"):
        parse_review(review_body({}, operation={"a": 1}))
    with pytest.raises(BadReview, match="request.oldObject must be a JSON object"):
        parse_review(review_body({}, oldObject="x"))


def test_field_paths() -> None:
    data = {
        "metadata": {"name": "n"},
        "spec": {"requirements": [{"key": "a", "values": ["x", "y"]}], "labels": {"a/b": "c"}},
    }
    doc = JsonDocument(data)
    for path, expected in [
        (("spec", "requirements", 0, "values", 1), "spec.requirements[0].values[1]"),
        (("spec", "labels", "a/b"), "spec.labels[a/b]"),
        (("metadata", "name"), "metadata.name"),
    ]:
        assert doc.field_path(*doc.position(path)) == expected
    assert doc.field_path(*doc.position(("spec", "labels", "a/b"), at_key=True)) == "spec.labels[a/b]"
    assert doc.field_path(0, 0) == ""
    assert JsonDocument({"x": float("nan")}).position(("x",)) != (0, 0)


_JSON = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.sampled_from("abc"), children, max_size=3),
    max_leaves=20,
)


@given(_JSON, st.lists(st.sampled_from(["a", "b", "c", "z", 0, 1, 2, 7]), max_size=5), st.booleans())
def test_a_position_counted_along_its_path_is_the_indexed_one(data: object, path: list[object], at_key: bool) -> None:
    """`position` walks only the path; `_index` (behind `field_path`) numbers every node: they agree, for paths
    that exist and for paths that run past the object (placed at the nearest existing ancestor)."""
    document = JsonDocument({"root": data})
    ranks = document._index()
    full = ("root", *path)
    prefix = next(full[:end] for end in range(len(full), -1, -1) if full[:end] in ranks)
    key_rank, value_rank = ranks[prefix]
    expected = key_rank if at_key and prefix == full else value_rank
    assert document.position(full, at_key=at_key) == (1, expected)


def test_the_solver_cache_gives_the_solvers_answers() -> None:
    catalog = load_catalog()
    plain, cached = Solver(catalog, 5000), CachingSolver(catalog, 5000, cache_size=2)
    conflict = {
        "spec": {
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5"]},
            ]
        }
    }
    fine = {
        "spec": {"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5"]}]}
    }
    for document in (conflict, fine, conflict, fine):
        terms = terms_of(document)
        expected, got = plain.solve(terms), cached.solve(terms)
        assert (got.verdict, got.instance_types, got.witness) == (
            expected.verdict,
            expected.instance_types,
            expected.witness,
        )
        assert [[str(t) for t in core] for core in got.cores] == [[str(t) for t in core] for core in expected.cores]
        assert all(any(member is term for term in terms) for core in got.cores for member in core)
    assert (cached.hits, cached.misses, len(cached)) == (2, 2, 2)
    assert cached.solve(terms_of(conflict)).verdict == Verdict.UNSAT
    off = CachingSolver(catalog, 5000, cache_size=0)
    off.solve(terms_of(fine))
    assert (off.hits, off.misses, len(off)) == (0, 0, 0)


def test_cached_findings_equal_uncached(tmp_path: object) -> None:
    catalog = load_catalog()
    doc = JsonDocument(
        {
            "apiVersion": "karpenter.sh/v1alpha5",
            "kind": "Provisioner",
            "metadata": {"name": "p"},
            "spec": {
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["m5d.x2large", "m5.large"],
                    },
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                ]
            },
        }
    )
    expected, _ = check_provisioner(doc, Solver(catalog))
    solver = CachingSolver(catalog)
    first, _ = check_provisioner(doc, solver)
    second, _ = check_provisioner(doc, solver)
    assert first == second == expected and solver.hits == 1


@pytest.mark.parametrize(
    ("query", "seconds"),
    [
        ("timeout=5s", 4.5),  # the API server's timeoutSeconds: 5, less the 0.5 s margin
        ("timeout=3s", 2.5),
        ("timeout=1s", 0.75),  # a quarter of it when that is less than 0.5 s
        ("timeout=1m0s", 9.5),  # capped by --admission-timeout (10 s)
        ("timeout=1500ms", 1.125),
        ("", 9.5),
        ("timeout=soon", 9.5),
        ("timeout=0s", 9.5),
    ],
)
def test_the_deadline_of_a_request(query: str, seconds: float) -> None:
    assert deadline_seconds(query, Limits()) == pytest.approx(seconds)


def test_go_durations() -> None:
    assert go_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert go_duration("250ms") == pytest.approx(0.25)
    assert go_duration("5") is None and go_duration("-5s") is None and go_duration("") is None
