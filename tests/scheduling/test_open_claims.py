"""The cost strategy's index of open node claims (`scheduling/openclaims.py`): best fit chooses exactly what a scan of
every open claim chooses, always.

Best fit offers a pod the open claims of the templates that may take it, in creation order, and keeps the most
evenly used of the first five that accept it. The index, one for every template's claims of a run, skips the claims
of the templates not asked and those whose free cpu, memory or pod slots cannot hold the pod. These properties
check, on whole scheduling runs with zones, capacity types, architectures, taints, limits, host ports, spreads and
anti-affinity in play, that every choice is the one the scan (kept here, as the oracle) makes and that the plans
are identical, with several templates and on both strategies' runs; that the tree yields exactly the open claims of
the templates asked with room as claims are opened, fill up and close; and that claims full for a pod are not asked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.scheduling import (
    COST,
    KARPENTER,
    NodeClaimTemplate,
    Plan,
    Pod,
    Scheduler,
    SchedulerOptions,
    openclaims,
)
from karpenter_policy.scheduling import scheduler as scheduler_module
from karpenter_policy.scheduling.nodes import NodeClaim
from karpenter_policy.scheduling.openclaims import INDEX_FROM, ROOM_ORDER, OpenClaims, room
from karpenter_policy.scheduling.pods import Attempt
from karpenter_policy.scheduling.vectors import CPU_I, INDEX, MEMORY_I, PODS_I, RESOURCES, Vector

from .cluster import FAKE_TABLE, HOSTNAME, ZONE, make_pod, requirement, spread, term
from .support import ZONES, template
from .test_plan_properties import templates

PROPERTIES = deterministic(200)
Run = scheduler_module._Run


def every_open_claim(run: Any, requests: Vector, candidates: int) -> Iterator[NodeClaim]:
    """The oracle: every claim of the run (they are made in creation order) of the candidate templates that is not
    closed, room or not."""
    position = run.s.index.position
    return (
        claim
        for claim in list(run.claims)
        if candidates >> position[id(claim.template)] & 1 and run.open.slots[run._slot[id(claim)]] is claim
    )


@st.composite
def workloads(draw: st.DrawFn) -> list[Pod]:
    """Up to six workloads of up to 30 replicas each, of mixed sizes: many claims, filled to different levels."""
    pods: list[Pod] = []
    for index in range(draw(st.integers(1, 6))):
        labels = {"app": f"w{index}"}
        options: dict[str, Any] = {
            "cpu": draw(st.sampled_from(["100m", "250m", "500m", "1", "1500m", "3", "7"])),
            "memory": draw(st.sampled_from(["64Mi", "512Mi", "1Gi", "3Gi", "12Gi"])),
            "labels": labels,
        }
        selector = draw(st.sampled_from([None, ZONE, wk.ARCH, wk.CAPACITY_TYPE]))
        if selector == ZONE:
            options["node_selector"] = {ZONE: draw(st.sampled_from(ZONES))}
        elif selector == wk.ARCH:
            options["node_selector"] = {wk.ARCH: draw(st.sampled_from(["amd64", "arm64"]))}
        elif selector == wk.CAPACITY_TYPE:
            options["required_terms"] = [[requirement(wk.CAPACITY_TYPE, "In", draw(st.sampled_from(["spot"])))]]
        topology = draw(st.sampled_from(["none", "none", "zone-spread", "hostname-spread", "anti-affinity"]))
        if topology == "zone-spread":
            options["spread_constraints"] = [spread(ZONE, draw(st.integers(1, 3)), labels)]
        elif topology == "hostname-spread":
            options["spread_constraints"] = [spread(HOSTNAME, draw(st.integers(1, 4)), labels, "ScheduleAnyway")]
        elif topology == "anti-affinity":
            options["pod_anti_requirements"] = [term(HOSTNAME, labels)]
        if draw(st.integers(0, 4)) == 0:
            options["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if draw(st.integers(0, 6)) == 0:
            options["host_ports"] = [8080]
        if draw(st.integers(0, 5)) == 0:  # GPU nodes fill up on GPUs first: the index skips them on that too
            options["limits"] = {draw(st.sampled_from(["nvidia.com/gpu", "amd.com/gpu"])): str(draw(st.integers(1, 2)))}
        pods += [make_pod(**options) for _ in range(draw(st.integers(1, 30)))]
    return pods


def summary(plan: Plan) -> dict[str, Any]:
    """Everything a plan says, comparable."""
    return {
        "claims": [
            (c.template, [p.key for p in c.pods], str(c.requirements), c.options, c.requests) for c in plan.claims
        ],
        "failures": sorted(plan.failures),
        "relaxed": dict(plan.relaxed),
        "existing": {node: [p.key for p in pods] for node, pods in plan.existing.items()},
    }


def assert_best_fit_chooses_as_the_scan(made: list[NodeClaimTemplate], pods: list[Pod]) -> None:
    """At every choice, the indexed claims and the scan give the same claim and the same fit; the whole plan is the
    scan's plan."""
    original = Run._best_fit

    def compared(self: Any, pod: Pod, attempt: Attempt, candidates: int) -> bool:
        expected = self._choose(pod, attempt, every_open_claim(self, pod.requests, candidates))
        found = self._choose(pod, attempt, self._open_holding(pod.requests, candidates))
        if expected is None:
            assert found is None, f"{pod.key}: a claim the scan finds none of"
        else:
            assert found is not None and found[0] is expected[0], f"{pod.key}: another claim than the scan's"
            assert found[1] == expected[1]
        return bool(original(self, pod, attempt, candidates))

    def run() -> dict[str, Any]:
        return summary(Scheduler(made, options=SchedulerOptions(COST)).solve(pods))

    with mock.patch.object(Run, "_best_fit", compared):
        indexed = run()
    with mock.patch.object(Run, "_open_holding", every_open_claim):
        scanned = run()
    assert indexed == scanned


#: When a template's claims are indexed: from the first (the index on every claim), after a few, as shipped.
INDEXED_FROM = st.sampled_from([0, 0, 3, INDEX_FROM])


@deterministic(20)
@given(made=templates(), pods=workloads(), index_from=INDEXED_FROM)
def test_best_fit_chooses_what_a_scan_of_every_open_claim_chooses(
    made: list[NodeClaimTemplate], pods: list[Pod], index_from: int
) -> None:
    with mock.patch.object(openclaims, "INDEX_FROM", index_from):
        assert_best_fit_chooses_as_the_scan(made, pods)


@pytest.mark.slow
@deterministic(300)
@given(made=templates(), pods=workloads(), index_from=INDEXED_FROM)
def test_best_fit_chooses_what_a_scan_of_every_open_claim_chooses_on_many_scenes(
    made: list[NodeClaimTemplate], pods: list[Pod], index_from: int
) -> None:
    with mock.patch.object(openclaims, "INDEX_FROM", index_from):
        assert_best_fit_chooses_as_the_scan(made, pods)


def vector(cpu: int, memory: int, pods: int, gpus: int = 0) -> Vector:
    values = [0] * len(RESOURCES)
    values[CPU_I], values[MEMORY_I], values[PODS_I], values[INDEX[wk.NVIDIA_GPU]] = cpu, memory, pods, gpus
    return tuple(values)


GIB = 2**30
_TEMPLATE = template(FAKE_TABLE, "default")
operations = st.lists(
    st.tuples(
        st.sampled_from(["open", "open", "grow", "close", "ask", "ask"]),
        st.integers(0, 1000),  # which claim (modulo how many there are), or which types
        # requests: millicores, GiB, pods, GPUs
        st.tuples(st.integers(0, 16_000), st.integers(0, 64), st.integers(0, 30), st.sampled_from([0, 0, 0, 1, 2, 9])),
    ),
    max_size=80,
)


def holds(free: tuple[int, ...], requests: Vector) -> bool:
    """Whether a room (in :data:`ROOM_ORDER`) holds `requests` on every resource."""
    return all(amount >= requests[r] for amount, r in zip(free, ROOM_ORDER, strict=True))


@PROPERTIES
@given(steps=operations, index_from=st.integers(0, 20))
def test_the_index_yields_the_open_claims_with_room_in_creation_order(
    steps: list[tuple[str, int, tuple[int, int, int, int]]], index_from: int
) -> None:
    """Claims of three templates opened, filled and closed in any order (past several doublings of the tree): asked
    for a request and some of the templates, the index gives every open claim of those templates in creation order
    while at most `index_from` were made, and from then on exactly the open claims of those templates whose room
    holds it, in creation order (the claims filled and closed before it was built included)."""
    index = OpenClaims(index_from)
    claims: list[NodeClaim] = []
    slots: list[int] = []
    tags: list[int] = []
    closed: set[int] = set()
    everything = FAKE_TABLE.everything
    for action, which, (cpu, gib, count, gpus) in steps:
        requests = vector(cpu, gib * GIB, count, gpus)
        if action == "open":
            options = everything & ~((which * 0x9E3779B1) % (everything + 1))  # some of the types, maybe none
            claim = NodeClaim.new(_TEMPLATE, f"claim-{len(claims)}", options)
            claim.requests = requests
            tags.append(1 << which % 3)
            slots.append(index.add(claim, tags[-1]))
            claims.append(claim)
        elif claims and action == "grow":
            k = which % len(claims)
            claims[k].requests = requests
            index.update(slots[k], claims[k])
        elif claims and action == "close":
            k = which % len(claims)
            index.close(slots[k])
            closed.add(k)
        else:
            among = which % 8  # some of the three templates (maybe none)
            expected = [
                (k, claim)
                for k, claim in enumerate(claims)
                if k not in closed
                and tags[k] & among
                and (not index.indexed or holds(room(claim), requests))
            ]
            assert index.indexed == (len(claims) > index_from)
            assert list(index.holding(requests, among)) == [slots[k] for k, _ in expected]
            assert list(index.claims(requests, among)) == [claim for _, claim in expected]
    assert len(index) == len(claims) - len(closed)


def _offered_indexed_and_scanned(
    made: list[NodeClaimTemplate], pods: list[Pod]
) -> tuple[tuple[int, dict[str, Any]], tuple[int, dict[str, Any]]]:
    """The cost strategy's plan of `pods` and how many open claims best fit was offered in all, with the index of
    open claims (from the first claim) and with the scan of every open claim."""
    original = Run._choose
    offered = 0

    def counted(self: Any, pod: Pod, attempt: Attempt, claims: Iterator[NodeClaim]) -> Any:
        def each() -> Iterator[NodeClaim]:
            nonlocal offered
            for claim in claims:
                offered += 1
                yield claim

        return original(self, pod, attempt, each())

    def run() -> tuple[int, dict[str, Any]]:
        nonlocal offered
        offered = 0
        with mock.patch.object(Run, "_choose", counted):
            plan = Scheduler(made, options=SchedulerOptions(COST)).solve(pods)
        return offered, summary(plan)

    with mock.patch.object(openclaims, "INDEX_FROM", 0):
        indexed = run()
    with mock.patch.object(Run, "_open_holding", every_open_claim):
        scanned = run()
    return indexed, scanned


def test_a_pod_is_not_offered_the_claims_too_full_for_it() -> None:
    """Nodes sized for pods of 1.5 vCPU keep some room, so with a few 0.1 vCPU pods in the run they stay open: a scan
    offers each 1.5 vCPU pod every claim made before it (quadratic), the index only those with room for it (indexed
    from the first claim here; as shipped, from the :data:`INDEX_FROM`-th)."""
    pods = [make_pod("100m", "64Mi", {"app": "small"}) for _ in range(3)]
    pods += [make_pod("1500m", "1Gi", {"app": "medium"}) for _ in range(120)]
    made = [template(FAKE_TABLE, "default")]
    (indexed, plan), (scanned, scanned_plan) = _offered_indexed_and_scanned(made, pods)
    assert plan == scanned_plan
    assert not plan["failures"]
    assert indexed < len(pods), f"the index offered {indexed} claims to {len(pods)} pods"
    assert scanned > 10 * len(pods), f"the scan offered {scanned}: the scene no longer has many full claims open"


@deterministic(20)
@given(made=templates(), pods=workloads(), index_from=INDEXED_FROM, strategy=st.sampled_from([COST, KARPENTER]))
def test_the_indexed_schedulers_plans_are_the_scans_on_both_strategies(
    made: list[NodeClaimTemplate], pods: list[Pod], index_from: int, strategy: str
) -> None:
    """Whole plans, as `Scheduler.solve` makes them — on the cost strategy its runs (packing, repairs, the queue order
    and Karpenter's rule beside them), on Karpenter's rule its run alone —, with the index of every template's open
    claims (from the first claim, the fourth or as shipped) and with the scan of every open claim of the templates
    asked: the same claims, pods, requirements, options and failures."""

    def run() -> dict[str, Any]:
        return summary(Scheduler(made, options=SchedulerOptions(strategy)).solve(pods))

    with mock.patch.object(openclaims, "INDEX_FROM", index_from):
        indexed = run()
    with mock.patch.object(Run, "_open_holding", every_open_claim):
        scanned = run()
    assert indexed == scanned


def test_a_gpu_pod_is_not_offered_the_claims_out_of_gpus() -> None:
    """GPU nodes fill up on GPUs while cpu, memory and pod slots are left: with a few small pods in the run they stay
    open, and a scan — or an index of cpu, memory and pod slots alone — offered each one-GPU pod every claim made
    before it. The index keeps each claim's free GPUs too (every resource instance types offer), so a GPU pod is
    offered only the claims with a GPU left (indexed from the first claim here; failed on 6d754a0: 3,485 claims offered
    to 123 pods)."""
    gpu_types = Requirements([Requirement.new(wk.INSTANCE_TYPE, "In", ["gpu-vendor-instance-type"])])
    made = [template(FAKE_TABLE, "gpu", gpu_types)]
    pods = [make_pod("100m", "64Mi", {"app": "small"}) for _ in range(3)]
    pods += [make_pod("100m", "64Mi", {"app": "trainer"}, limits={wk.NVIDIA_GPU: "1"}) for _ in range(120)]
    (indexed, plan), (scanned, scanned_plan) = _offered_indexed_and_scanned(made, pods)
    assert plan == scanned_plan
    assert not plan["failures"]
    assert len(plan["claims"]) >= 60, "each node holds two GPU pods"
    assert indexed < 2 * len(pods), f"the index offered {indexed} claims to {len(pods)} pods"
    assert scanned > 10 * len(pods), f"the scan offered {scanned}: the scene no longer has many claims open"
