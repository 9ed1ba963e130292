"""Karpenter v1.14.1's `minValues` scheduling cases, replayed as data against our scheduler.

The reference (kubernetes-sigs/karpenter v1.14.1) is `pkg/controllers/provisioning/scheduling/
instance_selection_test.go` (Describe "Instance Type Selection" / Context "MinValues", Strict: the default) and the
minValues contexts of `pkg/controllers/provisioning/suite_test.go` (Describe "Provisioning" / "Scheduling" /
"MinValues", with MinValuesPolicy Strict and BestEffort). Each case names its Go file, test and line, and asserts
what the Go case asserts, under both packing strategies. `scheduling/suite_test.go` has no minValues case: its
requirements only carry the `NodeSelectorRequirementWithMinValues` type.

Adaptations (the assertion is kept, the vocabulary changes): the Go cases' custom numeric instance-type label
`karpenter/numerical-value` is `karpenter.k8s.aws/instance-network-bandwidth` here (our instance types carry only
the well-known labels); Go's offering zone `test-zone-1-spot` is `test-zone-1`; "the NodeClaim lists ≥ 2 instance
types" (`supportedInstanceTypes(CreateCalls[0])`) is the claim's launch options; the NodeClaim annotation
`karpenter.sh/nodeclaim-min-values-relaxed: "true"` (and the metric's `min_values_relaxed` label) is the claim's
`min_values_relaxed` and the pod's `relaxed` entry; the relaxed NodeClaim requirement (`minValues: 2`) is that
entry's "3 → 2"; Go sets `MaxInstanceTypes = 1` to test truncation, here `MAX_INSTANCE_TYPES` is patched to 1.

Go cases NOT replayed: none of these files' minValues cases is left out. The NodeClaim metric
(`karpenter_nodeclaims_created_total{min_values_relaxed}`) is the controller's, which runs v1alpha5 constraint sets
only (docs/v1.md): the plan's flag is what a metric would count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.minvalues import BEST_EFFORT, STRICT
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.scheduling import KARPENTER, InstanceTable, NodeClaimTemplate, Plan, Scheduler
from karpenter_policy.scheduling import scheduler as scheduler_module
from karpenter_policy.scheduling.scheduler import COST, SchedulerOptions

from .support import SHAPE, fake_types, pod

NUMERIC = wk.INSTANCE_NETWORK_BANDWIDTH  # Go's custom `karpenter/numerical-value`
SELECTION = "pkg/controllers/provisioning/scheduling/instance_selection_test.go"
PROVISIONING = "pkg/controllers/provisioning/suite_test.go"
STRATEGIES = pytest.mark.parametrize("strategy", [COST, KARPENTER])


def _type(
    name: str, cpu: int, price: float, numeric: int = 0, arch: str = "arm64", zones: Sequence[tuple[str, float]] = ()
) -> InstanceType:
    """A Go `fake.NewInstanceType`: cpu and as many GiB, spot offerings (test-zone-1 at `price` unless `zones`)."""
    offerings = zones or (("test-zone-1", price),)
    return InstanceType(
        name,
        cpu,
        cpu * 1024,
        (arch,),
        network_bandwidth_mbps=numeric,
        offerings=tuple(Offering(zone, "spot", cost) for zone, cost in offerings),
    )


Term = tuple[str, str, tuple[str, ...], int | None]  # key, operator, values, minValues


@dataclass(frozen=True)
class Pool:
    name: str
    terms: tuple[Term, ...]
    weight: int = 0


@dataclass(frozen=True)
class Case:
    """One Go case: its instance types, NodePools and pods (cpu request, pod requirement terms), the policy, and what
    it expects: `scheduled` (each pod on its own node, each node listing ≥ `options` types, on `instance_type` of
    pool `pool`, minValues relaxed or not) or not (`message`: Karpenter's words in the refusal)."""

    go: str
    line: int
    test: str
    types: tuple[InstanceType, ...]
    pools: tuple[Pool, ...]
    pods: tuple[tuple[str, tuple[tuple[str, str, tuple[str, ...]], ...]], ...]
    scheduled: bool
    policy: str = STRICT
    options: int = 1
    separate: bool = False
    instance_type: str | None = None
    pool: str | None = None
    relaxed: str | None = None  # the relaxation's words ("instance-type 3 → 2"); None: not relaxed
    message: str = ""
    truncate_to: int | None = None


TWO = (_type("instance-type-1", 1, 0.52), _type("instance-type-2", 4, 1.0))
NUMBERED = (
    _type("instance-type-1", 1, 0.52, numeric=2),
    _type("instance-type-2", 1, 1.0, numeric=3),
    _type("instance-type-3", 4, 1.2, numeric=4),
)
SMALL_PODS = (("0.9", ()), ("0.9", ()))
BOTH_ZONES = (("test-zone-1", 0.52), ("test-zone-2", 0.54))
RELAX_TYPES = (
    _type("instance-type-1", 4, 0.52, arch="amd64"),
    _type("instance-type-2", 4, 0.52, arch="amd64", zones=(("test-zone-2", 0.52),)),
)
IT = wk.INSTANCE_TYPE
THREE_TYPES = (IT, "In", ("instance-type-1", "instance-type-2", "instance-type-3"))

CASES = [
    Case(SELECTION, 621, "should schedule respecting the minValues from instance-type requirements", TWO,
         (Pool("default", ((IT, "In", ("instance-type-1", "instance-type-2"), 2),)),), SMALL_PODS,
         scheduled=True, separate=True, options=2),
    Case(SELECTION, 693, "should schedule respecting the minValues in Gt operator", NUMBERED,
         (Pool("default", ((NUMERIC, "Gt", ("2",), 2),)),), SMALL_PODS, scheduled=True, separate=True, options=2),
    Case(SELECTION, 784, "scheduler should fail if the minValues in Gt operator is not satisfied", NUMBERED[:2],
         (Pool("default", ((NUMERIC, "Exists", (), 2),)),),
         (("0.9", ((NUMERIC, "Gt", ("2",)),)), ("0.9", ((NUMERIC, "Gt", ("2",)),))),
         scheduled=False, message=f"minValues requirement is not met for label(s) (label(s)=[{NUMERIC}])"),
    Case(SELECTION, 870, "should schedule respecting the minValues in Lt operator",
         (NUMBERED[0], _type("instance-type-2", 2, 1.0, numeric=3), NUMBERED[2]),
         (Pool("default", ((NUMERIC, "Lt", ("4",), 2),)),), SMALL_PODS, scheduled=True, separate=True, options=2),
    Case(SELECTION, 961, "scheduler should fail if the minValues in Lt operator is not satisfied",
         (_type("instance-type-1", 2, 0.52, numeric=2), _type("instance-type-2", 4, 1.2, numeric=4)),
         (Pool("default", ((NUMERIC, "Lt", ("4",), 2),)),), SMALL_PODS, scheduled=False,
         message="minValues incompatibility"),
    Case(SELECTION, 1029, "should schedule considering the max of the minValues of In and NotIn operators in the "
         "instance-type requirements",
         (_type("instance-type-1", 1, 0.52), _type("instance-type-2", 2, 1.0), _type("instance-type-3", 4, 1.2)),
         (Pool("default", ((*THREE_TYPES, 1), (IT, "NotIn", ("instance-type-3",), 2))),), SMALL_PODS,
         scheduled=True, separate=True, options=2),
    Case(SELECTION, 1121, "should schedule considering the max of the minValues of Gt and Lt operators.",
         (*NUMBERED[:2], _type("instance-type-3", 4, 1.2, numeric=4), _type("instance-type-4", 4, 1.2, numeric=5)),
         (Pool("default", ((NUMERIC, "Gt", ("2",), 1), (NUMERIC, "Lt", ("5",), 2))),), SMALL_PODS,
         scheduled=True, separate=True, options=2),
    Case(SELECTION, 1234, "schedule should fail if minimum number of InstanceTypes is not met as per the minValues in "
         "the requirement", tuple(fake_types()[:5]) + tuple(_type(f"extra-{i}", 8, 1.0 + i) for i in range(5)),
         (Pool("default", ((IT, "Exists", (), 11),)),), (("0.1", ()),), scheduled=False,
         message="minValues incompatibility"),
    Case(SELECTION, 1261, "schedule should fail if minimum number of InstanceTypes is not met as per the minValues in "
         "the requirement after truncation", TWO,
         (Pool("default", ((IT, "In", ("instance-type-1", "instance-type-2"), 2),)),), SMALL_PODS,
         scheduled=False, truncate_to=1, message="couldn’t meet minValues requirements"),
    Case(SELECTION, 1331, "should schedule and pick the max of minValues of InstanceTypes if multiple operators are "
         "used for the same requirement.", TWO,
         (Pool("default", ((IT, "Exists", (), 1), (IT, "In", ("instance-type-1", "instance-type-2"), 2))),),
         SMALL_PODS, scheduled=True, separate=True, options=2),
    Case(SELECTION, 1410, "should schedule and respect multiple requirement keys with minValues",
         (_type("instance-type-1", 1, 0.52, arch="arm64"), _type("instance-type-2", 4, 1.0, arch="amd64")),
         (Pool("default", ((wk.ARCH, "Exists", (), 2), (IT, "In", ("instance-type-1", "instance-type-2"), 1))),),
         SMALL_PODS, scheduled=True, separate=True, options=2),
    # suite_test.go, Context "with instance type requirements" (NodePool: the three instance types, minValues 3)
    Case(PROVISIONING, 2911, "MinValuesPolicy Strict / should not schedule when minValues requirement is not met",
         RELAX_TYPES, (Pool("default", ((*THREE_TYPES, 3),)),), (("0.9", ()),), scheduled=False,
         message="minValues incompatibility"),
    Case(PROVISIONING, 2962, "MinValuesPolicy BestEffort / should schedule even when minValues requirement is not met",
         RELAX_TYPES, (Pool("default", ((*THREE_TYPES, 3),)),), (("0.9", ()),), scheduled=True,
         policy=BEST_EFFORT, instance_type="instance-type-1", pool="default", relaxed=f"{IT} 3 → 2"),
    Case(PROVISIONING, 3024, "MinValuesPolicy BestEffort / should relax minValues before falling back to other "
         "nodepools", RELAX_TYPES,
         (Pool("default", ((*THREE_TYPES, 3),), weight=100), Pool("no-min-values", (THREE_TYPES + (None,),),
                                                                   weight=10)),
         (("0.9", ()),), scheduled=True, policy=BEST_EFFORT, instance_type="instance-type-1", pool="default",
         relaxed=f"{IT} 3 → 2"),
    Case(PROVISIONING, 3100, "MinValuesPolicy BestEffort / should choose nodepool with higher weight when relaxing "
         "minValues", RELAX_TYPES,
         (Pool("default", ((*THREE_TYPES, 3),), weight=100), Pool("lower-weight", ((*THREE_TYPES, 3),), weight=10)),
         (("0.9", ()),), scheduled=True, policy=BEST_EFFORT, instance_type="instance-type-1", pool="default",
         relaxed=f"{IT} 3 → 2"),
    # Context "with zone requirements" (NodePool: the three zones, minValues 3)
    Case(PROVISIONING, 3216, "MinValuesPolicy Strict / should not schedule when zone minValues requirement is not met",
         (_type("instance-type-1", 4, 0.52, arch="amd64", zones=BOTH_ZONES),),
         (Pool("default", ((wk.ZONE, "In", ("test-zone-1", "test-zone-2", "test-zone-3"), 3),)),),
         (("0.9", ()),), scheduled=False, message="minValues incompatibility"),
    Case(PROVISIONING, 3259, "MinValuesPolicy BestEffort / should schedule even when zone minValues requirement is "
         "not met", (_type("instance-type-1", 4, 0.52, arch="amd64", zones=BOTH_ZONES),),
         (Pool("default", ((wk.ZONE, "In", ("test-zone-1", "test-zone-2", "test-zone-3"), 3),)),),
         (("0.9", ()),), scheduled=True, policy=BEST_EFFORT, instance_type="instance-type-1", pool="default",
         relaxed=f"{wk.ZONE} 3 → 2"),
    # Context "with both instance type and zone requirements"
    Case(PROVISIONING, 3353, "MinValuesPolicy BestEffort / should schedule when minValues requirement is not met",
         (_type("instance-type-1", 4, 0.52, arch="amd64", zones=BOTH_ZONES),),
         (Pool("default", ((*THREE_TYPES, 3), (wk.ZONE, "In", ("test-zone-1", "test-zone-2", "test-zone-3"), 3))),),
         (("0.9", ()),), scheduled=True, policy=BEST_EFFORT, instance_type="instance-type-1", pool="default",
         relaxed=f"{IT} 3 → 1, {wk.ZONE} 3 → 2"),
]


def _templates(case: Case, table: InstanceTable) -> list[NodeClaimTemplate]:
    templates = []
    for p in case.pools:
        terms = [Requirement.new(key, operator, list(values)) for key, operator, values, _ in p.terms]
        wanted: dict[str, int] = {}
        for key, _, _, count in p.terms:
            if count is not None:
                wanted[key] = max(wanted.get(key, 0), count)
        templates.append(
            NodeClaimTemplate.build(
                table, name=p.name, requirements=Requirements(terms), shape=SHAPE, weight=p.weight,
                owner_label=wk.NODEPOOL, min_values=wanted, min_values_policy=case.policy,
            )
        )
    return templates


def _pods(case: Case) -> list[Any]:
    made = []
    for i, (cpu, terms) in enumerate(case.pods):
        spec: dict[str, Any] = {}
        if terms:
            expressions = [{"key": k, "operator": o, "values": list(v)} for k, o, v in terms]
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}
        made.append(pod(f"pod-{i + 1}", cpu, f"{float(cpu) * 0.9:.2f}Gi", order=i, **spec))
    return made


def _solve(case: Case, strategy: str, monkeypatch: pytest.MonkeyPatch) -> Plan:
    if case.truncate_to is not None:
        monkeypatch.setattr(scheduler_module, "MAX_INSTANCE_TYPES", case.truncate_to)
    table = InstanceTable(case.types)
    return Scheduler(_templates(case, table), options=SchedulerOptions(strategy)).solve(_pods(case))


@STRATEGIES
@pytest.mark.parametrize("case", CASES, ids=[f"{c.go.rsplit('/', 1)[1]}:{c.line}" for c in CASES])
def test_karpenter_min_values_case(case: Case, strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _solve(case, strategy, monkeypatch)
    if not case.scheduled:
        assert not plan.claims, f"{case.go}:{case.line} {case.test}: Karpenter schedules nothing"
        assert len(plan.failures) == len(case.pods)
        for failure in plan.failures.values():
            words = " ".join(f"{r.message} {r.karpenter or ''}" for r in failure.reasons.values())
            assert case.message in words, words
        return
    assert not plan.failures, {k: f.message() for k, f in plan.failures.items()}
    assert sum(len(c.pods) for c in plan.claims) == len(case.pods)
    if case.separate:
        assert len(plan.claims) == len(case.pods), "each pod on a node of its own"
    for claim in plan.claims:
        assert len(claim.options) >= case.options
        if case.instance_type is not None:
            assert claim.instance_type == case.instance_type
        if case.pool is not None:
            assert claim.template == case.pool
        assert claim.min_values_relaxed == (case.relaxed is not None)
        for placed in claim.pods:
            relaxed = " ".join(plan.relaxed.get(placed.key, ()))
            if case.relaxed is None:
                assert "minValues" not in relaxed
            else:
                assert f"({case.relaxed})" in relaxed and "karpenter.sh/nodeclaim-min-values-relaxed" in relaxed


@STRATEGIES
def test_every_claim_keeps_its_min_values_as_pods_pile_up(strategy: str) -> None:
    """Many 3-cpu pods of one NodePool with minValues 4 on instance types: every claim's launch options keep ≥ 4
    distinct types, so a claim stops at what an 8-cpu type holds (Strict), where without minValues claims grow to
    the 16-cpu types alone."""
    types = [_type(f"t-{cpu}-{i}", cpu, 0.1 * cpu + 0.01 * i) for cpu in (2, 4, 8, 16) for i in range(2)]
    table = InstanceTable(types)
    template = NodeClaimTemplate.build(
        table, name="np", requirements=Requirements(), shape=SHAPE, owner_label=wk.NODEPOOL, min_values={IT: 4}
    )
    pods = [pod(f"p{i}", "3", "1Gi", order=i) for i in range(40)]
    plan = Scheduler([template], options=SchedulerOptions(strategy)).solve(pods)
    assert not plan.failures
    for claim in plan.claims:
        assert len({o.instance_type for o in claim.options}) >= 4
        assert not claim.min_values_relaxed
        assert len(claim.pods) <= 2
    # the same NodePool without minValues packs the same pods onto fewer instance-type options
    free = NodeClaimTemplate.build(table, name="np", requirements=Requirements(), shape=SHAPE, owner_label=wk.NODEPOOL)
    unbound = Scheduler([free], options=SchedulerOptions(strategy)).solve(pods)
    assert any(len(c.options) < 4 for c in unbound.claims)


def test_a_provisioner_template_has_no_min_values() -> None:
    """v1alpha5 is unaffected: a template built without minValues (every Provisioner's) never counts them."""
    table = InstanceTable(TWO)
    template = NodeClaimTemplate.build(table, name="p", requirements=Requirements(), shape=SHAPE)
    assert template.min_values == {} and template.types == table.everything


def test_unmet_min_values_counts_as_karpenter_reads_instance_types() -> None:
    """Zones and capacity types are counted over the types' available offerings, names one per type, labels by
    value; a key no type carries has no value."""
    table = InstanceTable((_type("a", 1, 0.1, zones=BOTH_ZONES), _type("b", 2, 0.2, arch="amd64")))
    everything = table.everything
    assert table.unmet_min_values({wk.ZONE: 2, IT: 2, wk.ARCH: 2}, everything) == {}
    assert table.unmet_min_values({wk.ZONE: 3}, everything) == {wk.ZONE: 2}
    only_b = table.mask_of_names(["b"])
    assert table.unmet_min_values({wk.ZONE: 2, IT: 2, wk.CAPACITY_TYPE: 1}, only_b) == {wk.ZONE: 1, IT: 1}
    assert table.unmet_min_values({"example.com/team": 1}, everything) == {"example.com/team": 0}



_POLICIES = st.sampled_from([STRICT, BEST_EFFORT])


@settings(deterministic(60))
@given(
    families=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=8),
    wanted=st.integers(min_value=1, max_value=5),
    cpus=st.lists(st.sampled_from(["0.5", "1", "2", "3"]), min_size=1, max_size=12),
    pinned=st.booleans(),
    policy=_POLICIES,
    strategy=st.sampled_from([COST, KARPENTER]),
)
def test_no_planned_node_keeps_fewer_values_than_its_min_values(
    families: list[int], wanted: int, cpus: list[str], pinned: bool, policy: str, strategy: str
) -> None:
    """Whatever the types, pods and policy: every node of the plan lists instance types carrying at least the
    NodePool's minValues of distinct sizes (`instance-cpu`) — or fewer only where BestEffort relaxed that node, and
    then it says so; Strict never relaxes, and a pod it refuses carries Karpenter's words."""
    types = [_type(f"t{i}-{cpu}", cpu, 0.1 * cpu + 0.001 * i) for i, f in enumerate(families) for cpu in (f, f * 2)]
    table = InstanceTable(types)
    template = NodeClaimTemplate.build(
        table, name="np", requirements=Requirements(), shape=SHAPE, owner_label=wk.NODEPOOL,
        min_values={wk.INSTANCE_CPU: wanted}, min_values_policy=policy,
    )
    spec: dict[str, Any] = {}
    if pinned:  # one size only: a node of it can never meet minValues above 1
        expressions = [{"key": wk.INSTANCE_CPU, "operator": "In", "values": [str(families[0] * 2)]}]
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}
    pods = [pod(f"p{i}", cpu, "0.25Gi", order=i, **spec) for i, cpu in enumerate(cpus)]
    plan = Scheduler([template], options=SchedulerOptions(strategy)).solve(pods)
    for claim in plan.claims:
        sizes = table.values_carried(wk.INSTANCE_CPU, table.mask_of_names(o.instance_type for o in claim.options))
        if claim.min_values_relaxed:
            assert policy == BEST_EFFORT and len(sizes) < wanted
        else:
            assert len(sizes) >= wanted
    for failure in plan.failures.values():
        words = " ".join(f"{r.message} {r.karpenter or ''}" for r in failure.reasons.values())
        assert "minValues" in words or "resources" in {r.kind for r in failure.reasons.values()} or (
            "no instance type" in words
        ), words
