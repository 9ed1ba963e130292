"""Fuzz the inputs beyond policy files, in-process, with numbers and structures at the edges: workloads, limits
and quantities, `--values` and `--catalog` files, and the webhook's AdmissionReview bodies.

Each class runs at least 2,000 generated examples in CI (`HYPOTHESIS_PROFILE=ci`; the `dev` profile runs a few, see
`profiles`), derandomized: the same ones in every run. Zero internal errors: nothing but the input's own documented
error (`LoadError`, `ValuesError`, `TemplateError`, `CatalogError`, `BadReview`) may escape, every finding is
well-formed and every report renders, and no webhook answer is an `internal error`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from decimal import ROUND_UP, Context, Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from profiles import examples

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.catalog import Catalog, CatalogError, catalog_from_json, catalog_to_json, load_catalog
from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.proof.limits import limits_findings
from karpenter_policy.checks.proof.placement import check_workloads, schedule
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.source.loader import Document, LoadError, parse
from karpenter_policy.checks.source.templating import TemplateError, ValuesError, load_values, render_template
from karpenter_policy.checks.source.workloads import LocatedWorkload, read_documents
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.commands.compile import manifests
from karpenter_policy.commands.pin import UnsafeEdit, pin_text
from karpenter_policy.model.allocatable import NodeConfiguration, allocatable
from karpenter_policy.model.quantity import MAX_QUANTITY, QuantityError, read_quantity
from karpenter_policy.scheduling import InstanceTable
from karpenter_policy.webhook.checks import Checker
from karpenter_policy.webhook.context import load_policies
from karpenter_policy.webhook.handlers import Handlers
from karpenter_policy.webhook.pinning import PolicyPinner
from karpenter_policy.webhook.review import BadReview, parse_review, response_body

from .edge_strategies import (
    VALUE_TEMPLATES,
    catalog_cases,
    limit_cases,
    quantity_strings,
    quantity_values,
    review_bodies,
    values_cases,
    workload_cases,
)
from .properties import FUZZ, check_rendering, max_line
from .strategies import KNOWN_RULES, Case

ROOT = Path(__file__).resolve().parents[2]
PINNING_POLICIES = ROOT / "examples" / "pinning" / "policies"
EXAMPLES = 2000
CLASS = settings(FUZZ, max_examples=examples(EXAMPLES))
WORKLOAD_RULES = frozenset(
    {
        "parse-error", "invalid-workload", "workload-unschedulable", "overlap", "shadowed", "quantity-out-of-range",
        "unknown-label-value", "unknown-label-key", "invalid-replicas", "multi-arch",
    }
)
POLICY_RULES = KNOWN_RULES | {"limits"}


# --------------------------------------------------------------------------------------------------------
# What the tests run against, built once

@cache
def _scratch() -> str:
    return tempfile.mkdtemp(prefix="karpenter-policy-fuzz-inputs-")


@pytest.fixture(scope="module", autouse=True)
def _clean_scratch() -> Iterator[None]:
    yield
    shutil.rmtree(_scratch(), ignore_errors=True)


def _write(name: str, content: bytes) -> str:
    """`content` in the scratch file `name`, a new file each time: rewriting one in place (truncating it) makes ext4
    flush it to disk at close (auto_da_alloc), milliseconds of waiting per example on a busy machine."""
    path = os.path.join(_scratch(), name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    with open(path, "wb") as handle:
        handle.write(content)
    return path


@cache
def _policies() -> list[CheckedProvisioner]:
    """The bundled policies, checked against the embedded catalog (what workloads are placed on)."""
    report, checked = check_paths([str(ROOT / "policies")], load_catalog())
    assert not report.errors
    return checked


@cache
def _policy_files() -> dict[str, bytes]:
    """The policy files `overlap` and `shadowed` findings point at."""
    return {checked.file: Path(checked.file).read_bytes() for checked in _policies()}


@cache
def _small_catalog() -> Catalog:
    """Every 40th type of the embedded catalog: the quantity consumers' arithmetic, without the catalog's cost."""
    everything = load_catalog()
    return Catalog(everything.region, everything.instance_types[::40])


@cache
def _fixed_workloads() -> list[LocatedWorkload]:
    text = (
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  template:\n    spec:\n"
        "      containers: [{name: a, resources: {requests: {cpu: 100m, memory: 128Mi}}}]\n---\n"
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n"
        "      containers: [{name: a, resources: {requests: {cpu: '2', memory: 4Gi, nvidia.com/gpu: 1}}}]\n"
    )
    return read_documents(parse("fixed.yaml", text)).workloads


@cache
def _handlers() -> Handlers:
    context = load_policies([str(PINNING_POLICIES)])
    pinner = PolicyPinner.from_documents(context.pinning_documents, context.provisioner_taints)
    return Handlers(Checker(load_catalog(), context=context), pinner)


def _check_findings(findings: list[Finding], files: dict[str, bytes], rules: frozenset[str]) -> None:
    for finding in findings:
        assert finding.rule in rules, finding
        assert finding.severity in ("error", "warning"), finding
        assert finding.file in files, finding
        assert 0 <= finding.line <= max_line(files[finding.file]) and finding.column >= 0, finding
        assert finding.message.strip(), finding


# --------------------------------------------------------------------------------------------------------
# Workloads: what `check --workloads` and `pin` read


@CLASS
@given(case=workload_cases())
@pytest.mark.slow
def test_workloads(case: Case) -> None:
    path = _write("workloads.yaml", case.content)
    report = Report()
    result = check_workloads(report, _policies(), [path], load_catalog())
    placements = result.placements
    for rule in sorted({f.rule for f in report.findings}):
        event(f"rule {rule}")
    event(f"{sum(p.schedulable for p in placements)} of {len(placements)} placed")
    _check_findings(report.findings, {path: case.content, **_policy_files()}, WORKLOAD_RULES)
    check_rendering(report, WORKLOAD_RULES)
    json.dumps([p.to_json() for p in placements])
    json.dumps(result.capacity.to_json() if result.capacity is not None else None)
    with contextlib.suppress(LoadError, UnsafeEdit):  # pin reports these: unreadable, or not safely editable
        pin_text(path, case.content.decode("utf-8"), _pin_rules())


@cache
def _pin_rules() -> tuple[Any, ...]:
    return _handlers().pinner.rules  # type: ignore[attr-defined,no-any-return]


# --------------------------------------------------------------------------------------------------------
# Limits and quantities


def _reference(text: str) -> Decimal | None:
    """An independent reading of a simple quantity (short, small exponent): exact Decimal arithmetic, rounded up to
    nano precision, capped at ±(2^63-1); None when it is not that simple."""
    import re

    match = re.fullmatch(r"([+-]?)([0-9]*)(\.[0-9]*)?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?", text)
    if match is None or not (match.group(2) or (match.group(3) or "").strip(".")) or len(text) > 60:
        return None
    sign, whole, fraction, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4) or ""
    context = Context(prec=200)
    number = Decimal((whole or "0") + (fraction if fraction != "." else ""))
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
    decimal = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    if suffix in binary:
        value = context.multiply(number, Decimal(2 ** binary[suffix]))
    else:
        exponent = decimal[suffix] if suffix in decimal else int(suffix[1:])
        value = context.scaleb(number, exponent)
    if value > MAX_QUANTITY:
        value = Decimal(MAX_QUANTITY)
    value = value.quantize(Decimal("1e-9"), rounding=ROUND_UP, context=context)
    return -value if sign == "-" else value


@settings(CLASS, max_examples=examples(3 * EXAMPLES))
@given(raw=st.one_of(quantity_strings(), quantity_values))
def test_quantities_are_read_as_kubernetes_reads_them(raw: Any) -> None:
    try:
        quantity = read_quantity(raw)
    except QuantityError as error:
        assert str(error).strip()
        event("not a quantity")
        return
    event("capped" if quantity.out_of_range else "a quantity")
    assert abs(quantity.value) <= MAX_QUANTITY
    assert quantity.value == quantity.value.quantize(Decimal("1e-9"), context=Context(prec=60))
    if isinstance(raw, str):
        expected = _reference(raw.strip(" \t\n\u00a0\u2028\u3000"))
        if expected is not None:
            event("checked against the reference")
            assert quantity.value == expected, (raw, quantity, expected)


@CLASS
@given(case=limit_cases())
@pytest.mark.slow
def test_limits_and_quantities(case: Case) -> None:
    path = _write("limits.yaml", case.content)
    documents: list[Document] = []
    report = validate_paths([path], on_valid=documents.append)
    _check_findings(report.findings, {path: case.content}, KNOWN_RULES)
    check_rendering(report, KNOWN_RULES)
    for rule in sorted({f.rule for f in report.findings}):
        event(f"rule {rule}")
    event(f"{len(documents)} valid objects")
    catalog = _small_catalog()
    provisioners = [d for d in documents if d.data.get("kind") == "Provisioner"]
    templates = {str(d.data["metadata"]["name"]): d.data for d in documents if d.data.get("kind") == "AWSNodeTemplate"}
    checked = []
    for doc in provisioners:
        line, column = doc.position(("metadata", "name"))
        proven = CheckedProvisioner(
            str(doc.data["metadata"]["name"]), doc.file, line, column, Verdict.SAT, doc.data, catalog.names()
        )
        findings = limits_findings(doc, proven.provisioner, proven.instance_types, InstanceTable.of_catalog(catalog))
        _check_findings(findings, {path: case.content}, POLICY_RULES)
        checked.append(proven)
        provisioner = Provisioner.from_document(doc.data)
        constraint_set = ConstraintSet.of(provisioner, version="v", sources=["limits.yaml"], region=catalog.region,
                                          provider=None, instance_types=catalog)
        json.loads(constraint_set.dumps())
    placements = schedule(checked, _fixed_workloads(), catalog).placements
    json.dumps([p.to_json() for p in placements])
    manifests.to_v1([d.data for d in provisioners], templates)


# --------------------------------------------------------------------------------------------------------
# --values and --catalog files


@CLASS
@given(case=values_cases(), template=st.sampled_from(VALUE_TEMPLATES))
def test_values_files(case: Case, template: str) -> None:
    path = _write("values.yaml", case.content)
    try:
        values = load_values(path)
    except ValuesError as error:
        assert str(error).startswith(path), error
        event("values refused")
        return
    try:
        rendered = render_template("policy.yaml.j2", template, values)
    except TemplateError as error:
        assert error.rule == "template-error" and error.message.strip()
        assert 0 <= error.line <= template.count("\n") + 1
        event(f"template-error: {error.message.split(':')[0]}")
        return
    assert len(rendered.text) <= 4 * 2**20
    event("rendered")


@CLASS
@given(case=catalog_cases())
def test_catalog_files(case: Case) -> None:
    try:
        catalog = catalog_from_json(case.content, "catalog.json")
    except CatalogError as error:
        assert error.file == "catalog.json" and error.reason.strip()
        event("catalog refused")
        return
    event(f"catalog of {len(catalog)} types")
    assert catalog_from_json(catalog_to_json(catalog)) == catalog  # deterministic and lossless
    kubelets: list[dict[str, Any]] = [{}, {"maxPods": 110, "kubeReserved": {"cpu": "1e99999999"}}]
    for instance_type in catalog:
        for kubelet in kubelets:
            allocatable(instance_type, NodeConfiguration.of(kubelet))
    schedule([], _fixed_workloads(), catalog)
    provisioner = Provisioner.from_document({"metadata": {"name": "p"}, "spec": {"limits": {"resources": {}}}})
    ConstraintSet.of(provisioner, version="v", sources=[], region=catalog.region, provider=None,
                     instance_types=catalog).dumps()


# --------------------------------------------------------------------------------------------------------
# Webhook bodies


@CLASS
@given(review=review_bodies())
@pytest.mark.slow
def test_webhook_bodies(review: tuple[str, bytes, str]) -> None:
    endpoint, body, _ = review
    try:
        request = parse_review(body)
    except BadReview as error:
        assert str(error).strip()
        event("bad review (HTTP 400)")
        return
    route = _handlers().routes()[endpoint]
    response = route.handler(request)  # no safety net here: any exception fails the test
    event(f"{endpoint} {response.verdict}")
    answer = json.loads(response_body(request.uid, response))
    assert answer["response"]["uid"] == request.uid
    assert "internal error" not in response.message
    assert not any("internal error" in warning for warning in response.warnings)


# Minimal inputs of the bugs this fuzzer found, as regression tests (pin's own are in tests/commands/test_pin.py).
MINIMAL_BODIES = {
    "a number of 5,000 digits": b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
    + b"9" * 5000
    + b"}",
}


@pytest.mark.parametrize("name", sorted(MINIMAL_BODIES))
def test_webhook_minimal_bodies(name: str) -> None:
    """Each is a 400 (`BadReview`), not a ValueError that drops the connection without an answer."""
    with pytest.raises(BadReview, match="4,300 digits|over the limit"):
        parse_review(MINIMAL_BODIES[name])


def test_a_pod_whose_affinity_operator_is_a_list_is_pinned_or_left_alone() -> None:
    """Found by the fuzzer: `operator: [1]` in a required term made /mutate/pods raise (unhashable list)."""
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u",
                "operation": "CREATE",
                "object": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"labels": {"spark-role": "driver"}},
                    "spec": {
                        "containers": [],
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {"matchExpressions": [{"key": "app", "operator": [1], "values": ["x"]}]}
                                    ]
                                }
                            }
                        },
                    },
                },
            },
        }
    ).encode()
    request = parse_review(body)
    response = _handlers().routes()["/mutate/pods"].handler(request)
    assert response.allowed and "internal error" not in response.message
