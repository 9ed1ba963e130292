"""Placement tests (`kind: PlacementTest`): expectations on where workloads land, checked against the plan of
`check --workloads` — no planner of their own.

A `PlacementTest` (apiVersion `karpenter-policy.dev/v1alpha1`, schema `schemas/placementtest.v1alpha1.json`) holds
tests; each names a workload of the `--workloads` paths (`workload: {kind, name, namespace?}`) and what must hold
(`expect`). What is compared, for the workload's `Placement` (docs/placement-tests.md says the same):

* unless `unschedulable: true`, every replica must be placed (`Placement.schedulable`);
* `provisioner` / `nodePool`: the provisioner that takes it, and the one of every plan node its pods are on;
* `capacityTypes`, `zones`: the (zone, capacity type) pairs its node claim may be launched in — an available
  offering of one of the instance types that fit it, in a zone and capacity type the claim's requirements (the
  provisioner's and the pod's) allow (`Candidate.offerings`) — and those of its plan nodes, must be among these;
* `architectures`, `instanceFamilies`: the values those instance types carry must be among these;
* `unschedulable: true`: not every replica is placed; `reason`: a substring of its `workload-unschedulable` message;
* `maxMonthlyCost`: its share of its plan nodes' price a month (`Capacity.bills`) is at most this; unknown (no price
  data) fails.

So an expectation is a guarantee, not a forecast: `zones: [us-east-1a]` holds only when nothing allows another zone.
Each expectation that does not hold is a `placement-test-failed` error at the expectation's line, saying
`expected zones [us-east-1a], planned [us-east-1a, us-east-1b]`; a reference to no workload (or to several) is one
at the `workload:` line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.kinds import PLACEMENT_TEST_KIND, PROVISIONER_KIND, object_ref
from karpenter_policy.api.violations import ERROR, PLACEMENT_TEST_FAILED
from karpenter_policy.checks.findings import Finding, Location
from karpenter_policy.checks.proof.placement import Placement, WorkloadCheck, money
from karpenter_policy.checks.proof.provisioners import provisioner_ref
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model import labels as wk

__all__ = [
    "Expectation",
    "PlacementTest",
    "TestRun",
    "failures_of",
    "run_placement_tests",
    "tests_of",
]

DEFAULT_NAMESPACE = "default"
_SHOWN = 12
#: expectation fields compared as sets: field → how messages name it
_SET_FIELDS = {
    "capacityTypes": "capacity types",
    "zones": "zones",
    "architectures": "architectures",
    "instanceFamilies": "instance families",
}


@dataclass(frozen=True, slots=True)
class Expectation:
    """What must hold for a workload: the fields of `expect` as written (`values`), each with where it is."""

    values: Mapping[str, Any]
    at: Mapping[str, Location] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PlacementTest:
    """One test of a PlacementTest document: the workload it is about and its expectation."""

    document: str  # metadata.name of the PlacementTest
    name: str
    kind: str
    workload: str
    namespace: str | None
    expect: Expectation
    at: Location  # the test's `workload:` field

    @property
    def ref(self) -> str:
        """`test web-on-spot` — how messages name the test (the finding's object is the PlacementTest)."""
        return f"test {self.name}"

    def matches(self, placement: Placement) -> bool:
        w = placement.workload
        if w.kind.lower() != self.kind.lower() or w.name != self.workload:
            return False
        return self.namespace is None or (w.namespace or DEFAULT_NAMESPACE) == self.namespace


@dataclass(slots=True)
class TestRun:
    """The outcome of the tests: how many ran and failed (a test fails when any expectation of it does), and a
    finding per expectation that does not hold."""

    __test__ = False  # not a pytest class

    tests: int = 0
    failed: int = 0
    findings: list[Finding] = field(default_factory=list)

    def summary(self) -> str:
        """`placement tests: 3 of 4 hold (1 failed)`."""
        held = self.tests - self.failed
        text = f"placement tests: {held} of {self.tests} hold"
        return text + (f" ({self.failed} failed)" if self.failed else "")

    def to_json(self) -> dict[str, int]:
        return {"tests": self.tests, "passed": self.tests - self.failed, "failed": self.failed}


def tests_of(doc: Document) -> list[PlacementTest]:
    """The tests of one schema-valid PlacementTest document, with the positions of their fields."""
    data = doc.data
    document = str((data.get("metadata") or {}).get("name") or "?")
    tests: list[PlacementTest] = []
    for index, raw in enumerate((data.get("spec") or {}).get("tests") or []):
        base = ("spec", "tests", index)
        expect = dict(raw.get("expect") or {})
        at = {key: Location(doc.file, *doc.position((*base, "expect", key))) for key in expect}
        workload = raw.get("workload") or {}
        tests.append(
            PlacementTest(
                document=document,
                name=str(raw.get("name") or f"tests[{index}]"),
                kind=str(workload.get("kind")),
                workload=str(workload.get("name")),
                namespace=workload.get("namespace"),
                expect=Expectation(expect, at),
                at=Location(doc.file, *doc.position((*base, "workload"))),
            )
        )
    return tests


def run_placement_tests(documents: Iterable[Document], result: WorkloadCheck) -> TestRun:
    """Every test of the PlacementTest `documents` against the placements and capacity plan of `check --workloads`."""
    run = TestRun()
    bills = {bill.workload: bill for bill in result.capacity.bills()} if result.capacity is not None else {}
    for doc in documents:
        for test in tests_of(doc):
            run.tests += 1
            failures = failures_of(test, result, bills)
            run.failed += 1 if failures else 0
            run.findings += failures
    return run


def _finding(test: PlacementTest, at: Location, subject: str, message: str) -> Finding:
    return Finding(PLACEMENT_TEST_FAILED, ERROR, f"{test.ref}: {subject}: {message}", at.file, at.line, at.column,
                   object_ref(PLACEMENT_TEST_KIND, test.document))


def failures_of(test: PlacementTest, result: WorkloadCheck, bills: Mapping[str, Any] | None = None) -> list[Finding]:
    """A finding per expectation of `test` that does not hold for `result` (`bills`: its capacity plan's, by
    workload ref; default: worked out here)."""
    if bills is None:
        bills = {bill.workload: bill for bill in result.capacity.bills()} if result.capacity is not None else {}
    wanted = f"{test.kind}/{test.workload}" + (f" in namespace {test.namespace}" if test.namespace else "")
    found = [p for p in result.placements if test.matches(p)]
    if len(found) != 1:
        problem = "no workload" if not found else f"{len(found)} workloads (give workload.namespace)"
        message = f"the reference matches {problem} among the --workloads paths"
        return [_finding(test, test.at, wanted, message)]
    placement = found[0]
    expect, at = test.expect.values, test.expect.at
    subject = placement.ref

    def fail(key: str, message: str) -> Finding:
        return _finding(test, at.get(key, test.at), subject, message)

    if expect.get("unschedulable") is True:
        if placement.schedulable:
            return [fail("unschedulable", f"expected unschedulable, planned {_where(placement)}")]
        reason = expect.get("reason")
        if isinstance(reason, str) and reason not in placement.message():
            return [fail("reason", f"expected reason containing {reason!r}, planned {placement.message()!r}")]
        return []
    if not placement.schedulable:
        key = "unschedulable" if "unschedulable" in expect else next(iter(expect))
        return [fail(key, f"expected every replica placed, planned unschedulable: {placement.message()}")]
    failures: list[Finding] = []
    planned = _planned(placement, result)
    for key in ("provisioner", "nodePool"):
        name = expect.get(key)
        if isinstance(name, str) and planned["provisioner"] != {name}:
            failures.append(fail(key, f"expected {key} {name}, planned {_listed(planned['provisioner'])}"))
    for key, words in _SET_FIELDS.items():
        allowed = expect.get(key)
        if isinstance(allowed, list) and not planned[key] <= set(allowed):
            failures.append(fail(key, f"expected {words} {_listed(allowed)}, planned {_listed(planned[key])}"))
    limit = expect.get("maxMonthlyCost")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        bill = bills.get(placement.ref)
        monthly = 0.0 if bill is None else bill.monthly
        if monthly is None:
            failures.append(fail("maxMonthlyCost", f"expected at most {money(limit)} a month, planned cost unknown "
                                 "(no price data for some of its nodes)"))
        elif monthly > limit:
            failures.append(fail("maxMonthlyCost", f"expected at most {money(limit)} a month, planned "
                                 f"{money(monthly)}"))
    return failures


def _planned(placement: Placement, result: WorkloadCheck) -> dict[str, set[str]]:
    """What the plan allows for a schedulable workload (see the module docstring), per expectation field."""
    nodes = [n for n in (result.capacity.nodes if result.capacity is not None else ()) if placement.ref in n.workloads]
    planned: dict[str, set[str]] = {
        "provisioner": {n.provisioner for n in nodes} | ({placement.provisioner} if placement.provisioner else set()),
        "capacityTypes": {n.capacity_type for n in nodes},
        "zones": {n.zone for n in nodes},
        "architectures": set(),
        "instanceFamilies": {n.instance_type.split(".")[0] for n in nodes},
    }
    chosen = placement.chosen
    if chosen is not None:
        for zone, capacity_type in chosen.offerings():
            planned["zones"].add(zone)
            planned["capacityTypes"].add(capacity_type)
        values = chosen.label_values()
        planned["architectures"] |= values.get(wk.ARCH, set())
        planned["instanceFamilies"] |= values.get(wk.INSTANCE_FAMILY, set())
    return planned


def _where(placement: Placement) -> str:
    if placement.provisioner is None:
        return object_ref(PROVISIONER_KIND, None)
    return provisioner_ref(placement.provisioner)


def _listed(values: Iterable[object]) -> str:
    """`[a, b, c]`, sorted; beyond `_SHOWN` values, the first ones and how many more."""
    names = sorted(str(v) for v in values)
    more = f", ... ({len(names) - _SHOWN} more)" if len(names) > _SHOWN else ""
    return "[" + ", ".join(names[:_SHOWN]) + more + "]"
