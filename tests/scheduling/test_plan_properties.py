"""Properties every scheduling plan has, over random pods and node claim templates (hypothesis).

Random workloads (requests; nodeSelector and required node affinity on zone, arch, capacity type and a custom label;
tolerations; self-selecting zone and hostname spread; hostname self anti-affinity; a host port) meet random
templates (requirements, labels, taints, limits, weights) over Karpenter's fake instance types, with or without a
DaemonSet. Under both strategies, every plan must:

- place each pod once or report it as failed;
- give each claim requirements within its template's and within the final (most relaxed) attempt of each of its
  pods, taints its pods tolerate, and requests equal to its pods' plus the DaemonSet overhead of its template;
- offer only types of the template that satisfy the claim's requirements, in an offering of its zones and capacity
  types, with room for the requests; launch the first of them;
- keep host ports unique per node and at most one pod of a hostname self-anti-affine workload per node;
- keep every DoNotSchedule spread of a workload within maxSkew: per node for hostname, and over the zones the pods
  may use (those some template offers, within the pods' required zones) for zone;
- keep the largest capacity of each claim's options within its template's limits, summed;
- never open a node on a template when a heavier one could have taken its first pod as a fresh node — checked only
  where that is decidable from the plan alone: the heavier template has no limits and the pod no topology terms;
- be the same plan when computed twice.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.model.podtopology import AffinityTerm
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, untolerated
from karpenter_policy.scheduling import (
    COST,
    KARPENTER,
    Attempt,
    NodeClaimTemplate,
    Plan,
    Pod,
    Scheduler,
    SchedulerOptions,
)
from karpenter_policy.scheduling.vectors import ZERO, add, fits

from .cluster import FAKE_TABLE, HOSTNAME, ZONE, make_pod, requirement, spread, term
from .support import ZONES, template

TABLE = FAKE_TABLE
CAPACITY_TYPES = ("on-demand", "spot")
ARCHES = ("amd64", "arm64")
TEAMS = ("a", "b")
TEAM = "example.com/team"
DEDICATED = "dedicated"

PROPERTIES = deterministic(300)


# --- inputs -------------------------------------------------------------------------------------------------------


def subset(values: Sequence[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True).map(sorted)


@st.composite
def templates(draw: st.DrawFn) -> list[NodeClaimTemplate]:
    out = []
    for index in range(draw(st.integers(1, 3))):
        terms: list[Requirement] = []
        if draw(st.booleans()):
            terms.append(Requirement.new(ZONE, "In", draw(subset(ZONES))))
        if draw(st.booleans()):
            terms.append(Requirement.new(wk.CAPACITY_TYPE, "In", draw(subset(CAPACITY_TYPES))))
        if draw(st.booleans()):
            terms.append(Requirement.new(wk.ARCH, "In", draw(subset(ARCHES))))
        labels: dict[str, str] = {}
        team = draw(st.sampled_from(["none", "label", "requirement"]))
        if team == "label":
            labels[TEAM] = draw(st.sampled_from(TEAMS))
        elif team == "requirement":
            terms.append(Requirement.new(TEAM, "In", draw(subset(TEAMS))))
        taints = draw(
            st.sampled_from([(), (Taint(DEDICATED, NO_SCHEDULE, "x"),), (Taint(DEDICATED, PREFER_NO_SCHEDULE, "x"),)])
        )
        limits = draw(
            st.sampled_from(
                [{}, {"cpu": Decimal(4)}, {"cpu": Decimal(10)}, {"cpu": Decimal(40)}, {"memory": Decimal(20 * 2**30)}]
            )
        )
        out.append(
            template(
                TABLE,
                name=f"t{index}",
                requirements=Requirements(terms),
                labels=labels,
                taints=taints,
                limits=limits,
                weight=draw(st.integers(0, 3)),
            )
        )
    return out


@st.composite
def workload(draw: st.DrawFn, index: int) -> list[Pod]:
    labels = {"app": f"w{index}"}
    options: dict[str, Any] = {
        "cpu": draw(st.sampled_from(["0", "100m", "500m", "1", "1500m", "3"])),
        "memory": draw(st.sampled_from(["0", "128Mi", "1Gi", "3Gi"])),
        "labels": labels,
    }
    selector = draw(
        st.sampled_from([None, (ZONE, ZONES), (wk.ARCH, ARCHES), (wk.CAPACITY_TYPE, CAPACITY_TYPES), (TEAM, TEAMS)])
    )
    if selector is not None:
        key, values = selector
        options["node_selector"] = {key: draw(st.sampled_from(values))}
    spreads = []
    zone_spread = draw(st.booleans())
    if zone_spread:
        spreads.append(
            spread(ZONE, draw(st.integers(1, 2)), labels, draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])))
        )
    if draw(st.booleans()):
        spreads.append(
            spread(
                HOSTNAME, draw(st.integers(1, 2)), labels, draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))
            )
        )
    if spreads:
        options["spread_constraints"] = spreads
    terms: list[list[dict[str, Any]]] = []
    for _ in range(draw(st.integers(0, 1 if zone_spread else 2))):  # ORed terms (relaxed one by one)
        kind = draw(st.sampled_from(["zone", "capacity-type", "team-not-in", "arch"]))
        if kind == "zone":
            terms.append([requirement(ZONE, "In", *draw(subset(ZONES)))])
        elif kind == "capacity-type":
            terms.append([requirement(wk.CAPACITY_TYPE, "In", *draw(subset(CAPACITY_TYPES)))])
        elif kind == "team-not-in":
            terms.append([requirement(TEAM, "NotIn", draw(st.sampled_from(TEAMS)))])
        else:
            terms.append([requirement(wk.ARCH, "In", draw(st.sampled_from(ARCHES)))])
    if terms:
        options["required_terms"] = terms
    if draw(st.booleans()):
        options["node_preferences"] = [requirement(wk.CAPACITY_TYPE, "In", draw(st.sampled_from(CAPACITY_TYPES)))]
    if draw(st.booleans()):
        options["tolerations"] = [{"key": DEDICATED, "operator": "Exists"}]
    if draw(st.booleans()):
        options["pod_anti_requirements"] = [term(HOSTNAME, labels)]
    if draw(st.booleans()):
        options["host_ports"] = [8080]
    return [make_pod(**options) for _ in range(draw(st.integers(1, 4)))]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[NodeClaimTemplate], list[Pod], list[Pod]]:
    pods = [pod for index in range(draw(st.integers(1, 4))) for pod in draw(workload(index))]
    daemons = []
    if draw(st.booleans()):
        options: dict[str, Any] = {"cpu": draw(st.sampled_from(["100m", "300m"])), "memory": "64Mi"}
        if draw(st.booleans()):
            options["tolerations"] = [{"operator": "Exists"}]
        if draw(st.booleans()):
            options["node_selector"] = {wk.ARCH: "amd64"}
        daemons.append(make_pod(**options))
    return draw(templates()), pods, daemons


# --- checks -------------------------------------------------------------------------------------------------------


def within(narrow: Requirement, wide: Requirement) -> bool:
    """Every value `narrow` allows, `wide` allows (the generated requirements have no Gt/Lt)."""
    if not narrow.complement:
        return all(wide.has(value) for value in narrow.values)
    return wide.complement and wide.values <= narrow.values


def final_attempt(pod: Pod, plan: Plan, tolerate_prefer_no_schedule: bool) -> Attempt:
    relaxed = plan.relaxed.get(pod.key, ())
    return next(a for a in pod.shape.attempts(tolerate_prefer_no_schedule) if a.relaxed == relaxed)


def selects(term_: AffinityTerm, pod: Pod) -> bool:
    return term_.namespaces.includes(pod.namespace, {}) and term_.selector.matches(pod.labels)


def expected_overhead(template_: NodeClaimTemplate, daemons: Sequence[Pod]) -> tuple[int, ...]:
    """Karpenter's `getDaemonOverhead`, written out again: DaemonSets that tolerate the taints and are compatible."""
    total = ZERO
    for daemon in daemons:
        attempt = daemon.shape.attempts(False)[0]
        if untolerated(template_.taints, attempt.tolerations):
            continue
        if not template_.requirements.admits(attempt.requirements, template_.well_known):
            continue
        total = add(total, daemon.requests)
    return total


def offered_zones(templates_: Sequence[NodeClaimTemplate]) -> set[str]:
    """The zones some template can launch a node in (the zone domains of the run)."""
    zones = set()
    for template_ in templates_:
        for it in TABLE.types:
            if not (template_.types >> TABLE.position[it.name]) & 1:
                continue
            for offering in it.offerings:
                allowed = template_.zone.has(offering.zone) and template_.capacity_type.has(offering.capacity_type)
                if offering.available and allowed:
                    zones.add(offering.zone)
    return zones


def has_topology(pod: Pod) -> bool:
    """Spread or pod (anti-)affinity terms (host ports never keep a pod off a fresh node)."""
    topology = pod.shape.topology
    return bool(topology.spread or topology.affinity or topology.anti_affinity)


def check_claims(plan: Plan, templates_: Sequence[NodeClaimTemplate], daemons: Sequence[Pod], tolerate: bool) -> None:
    by_name = {t.name: t for t in templates_}
    for claim in plan.claims:
        owner = by_name[claim.template]
        requests = expected_overhead(owner, daemons)
        for pod in claim.pods:
            requests = add(requests, pod.requests)
        assert claim.requests == requests, "requests are the pods' and the DaemonSets'"
        assert claim.options, "a claim has an instance type"
        launch = TABLE.position[claim.options[0].instance_type]
        assert claim.allocatable == owner.shapes.allocatable[launch]
        assert fits(claim.requests, claim.allocatable), "the pods fit the launched type"
        zone, capacity_type = claim.requirements.get_or_exists(ZONE), claim.requirements.get_or_exists(wk.CAPACITY_TYPE)
        satisfying = TABLE.type_mask(claim.requirements, os=owner.os)
        for option in claim.options:
            i = TABLE.position[option.instance_type]
            assert (owner.types >> i) & 1, f"{option.instance_type} is not a type of {owner.name}"
            assert (satisfying >> i) & 1, f"{option.instance_type} breaks {claim.requirements}"
            assert zone.has(option.zone) and capacity_type.has(option.capacity_type)
            offered = {(o.zone, o.capacity_type) for o in TABLE.types[i].offerings if o.available}
            assert (option.zone, option.capacity_type) in offered
            assert fits(claim.requests, owner.shapes.allocatable[i])
        for key in owner.requirements:
            assert within(claim.requirements.get_or_exists(key), owner.requirements[key])
        ports: list[Any] = []
        for pod in claim.pods:
            attempt = final_attempt(pod, plan, tolerate)
            for key in attempt.requirements:
                assert key in claim.requirements, f"{pod.key}: {key} missing from the claim"
                assert within(claim.requirements[key], attempt.requirements[key]), f"{pod.key}: {key}"
            assert not untolerated(owner.taints, attempt.tolerations), f"{pod.key} does not tolerate {owner.name}"
            for port in pod.shape.host_ports:
                assert all(not port.conflicts(used) for used in ports), f"{port} twice on a node"
                ports.append(port)
            for other in claim.pods:
                if other is not pod:
                    for anti in attempt.anti_affinity:
                        if anti.required and anti.key == HOSTNAME:
                            assert not selects(anti, other), f"{pod.key} shares a node with {other.key}"
            for constraint in attempt.spread:
                if constraint.key == HOSTNAME and not constraint.soft:
                    own = sum(1 for other in claim.pods if constraint.selector.matches(other.labels))
                    assert own <= constraint.max_skew, f"{own} pods of {pod.labels} on one node"


def check_zone_spread(plan: Plan, templates_: Sequence[NodeClaimTemplate], tolerate: bool) -> None:
    universe = offered_zones(templates_)
    zone_of = {}
    for claim in plan.claims:
        for pod in claim.pods:
            zone_of[pod.key] = claim.requirements.get_or_exists(ZONE)
    workloads: dict[str, list[Pod]] = defaultdict(list)
    for claim in plan.claims:
        for pod in claim.pods:
            workloads[pod.labels["app"]].append(pod)
    for pods in workloads.values():
        attempt = final_attempt(pods[0], plan, tolerate)
        for constraint in attempt.spread:
            if constraint.key != ZONE or constraint.soft:
                continue
            counts: Counter[str] = Counter()
            for pod in pods:
                zone = zone_of[pod.key]
                assert not zone.complement and len(zone.values) == 1, f"{pod.key}: zone not pinned ({zone})"
                counts[next(iter(zone.values))] += 1
            allowed = attempt.strict.get_or_exists(ZONE)
            eligible = [counts.get(z, 0) for z in universe if allowed.has(z)]
            assert max(counts.values()) - min(eligible) <= constraint.max_skew, f"zone skew {dict(counts)}"


def check_limits(plan: Plan, templates_: Sequence[NodeClaimTemplate]) -> None:
    for owner in templates_:
        for resource, limit in owner.limited.items():
            charged = 0
            for claim in plan.claims:
                if claim.template == owner.name:
                    positions = [TABLE.position[o.instance_type] for o in claim.options]
                    charged += max(owner.shapes.capacity[i][resource] for i in positions)
            assert charged <= limit, f"{owner.name} exceeds its limits"


def fresh_node_fits(owner: NodeClaimTemplate, pod: Pod, attempt: Attempt, overhead: tuple[int, ...]) -> bool:
    """Could `owner` launch a fresh node for this pod (no limits, no topology to consult)?"""
    if untolerated(owner.taints, attempt.tolerations):
        return False
    if not owner.requirements.admits(attempt.requirements, owner.well_known):
        return False
    merged = owner.requirements.intersection(attempt.requirements)
    mask = owner.types & TABLE.type_mask(merged, os=owner.os)
    mask &= TABLE.offering_mask(merged.get_or_exists(ZONE), merged.get_or_exists(wk.CAPACITY_TYPE))
    return bool(mask & owner.shapes.fitting(add(overhead, pod.requests)))


def check_weights(plan: Plan, templates_: Sequence[NodeClaimTemplate], daemons: Sequence[Pod], tolerate: bool) -> None:
    ordered = sorted(templates_, key=lambda t: (-t.weight, t.name))
    rank = {t.name: i for i, t in enumerate(ordered)}
    for claim in plan.claims:
        first = claim.pods[0]  # the pod the claim was opened for
        if has_topology(first):
            continue
        attempt = final_attempt(first, plan, tolerate)
        for heavier in ordered[: rank[claim.template]]:
            if heavier.limits:
                continue
            assert not fresh_node_fits(heavier, first, attempt, expected_overhead(heavier, daemons)), (
                f"{first.key} opened a node of {claim.template} though {heavier.name} (heavier) could take it"
            )


def canonical(plan: Plan) -> Any:
    return (
        [
            (c.template, [p.key for p in c.pods], str(c.requirements), c.options, c.requests, c.allocatable)
            for c in plan.claims
        ],
        sorted(plan.failures),
        sorted(plan.relaxed.items()),
        sorted((name, [p.key for p in pods]) for name, pods in plan.existing.items()),
    )


def solve(templates_: Sequence[NodeClaimTemplate], pods: Sequence[Pod], daemons: Sequence[Pod], strategy: str) -> Plan:
    return Scheduler(templates_, daemons=daemons, options=SchedulerOptions(strategy)).solve(pods)


@PROPERTIES
@given(scenarios(), st.sampled_from([KARPENTER, COST]))
def test_every_plan_respects_every_constraint(scenario: Any, strategy: str) -> None:
    templates_, pods, daemons = scenario
    plan = solve(templates_, pods, daemons, strategy)
    tolerate = any(t.effect == PREFER_NO_SCHEDULE for owner in templates_ for t in owner.taints)
    placed = [pod.key for claim in plan.claims for pod in claim.pods]
    assert len(placed) == len(set(placed)), "a pod placed twice"
    assert set(placed).isdisjoint(plan.failures)
    assert set(placed) | set(plan.failures) == {pod.key for pod in pods}
    check_claims(plan, templates_, daemons, tolerate)
    check_zone_spread(plan, templates_, tolerate)
    check_limits(plan, templates_)
    check_weights(plan, templates_, daemons, tolerate)
    assert canonical(solve(templates_, pods, daemons, strategy)) == canonical(plan), "the plan is not deterministic"


def test_properties_see_violations() -> None:
    """The checks are not vacuous: two hostname-anti-affine pods merged onto one claim are caught."""
    owner = template(TABLE, name="t0")
    anti = [term(HOSTNAME, {"app": "w0"})]
    pods = [make_pod(cpu="100m", labels={"app": "w0"}, pod_anti_requirements=anti) for _ in range(2)]
    plan = solve([owner], pods, [], KARPENTER)
    assert len(plan.claims) == 2
    first, second = plan.claims
    requests = add(first.requests, second.pods[0].requests)
    options = tuple(
        o for o in first.options if fits(requests, owner.shapes.allocatable[TABLE.position[o.instance_type]])
    )
    merged = replace(first, pods=(*first.pods, *second.pods), requests=requests, options=options)
    try:
        check_claims(Plan(claims=[merged]), [owner], [], False)
    except AssertionError as error:
        assert "shares a node" in str(error)
    else:
        raise AssertionError("two anti-affine pods on one node went unnoticed")


@PROPERTIES
@given(scenarios(), st.booleans())
def test_the_template_index_never_rules_out_a_template_that_takes_the_pod(scenario: Any, tolerate: bool) -> None:
    """The scheduler asks only the templates its index lets through (taints the pod tolerates, custom labels it
    selects); every template whose taints a pod's attempt tolerates and whose requirements admit it must be among
    them, or a pod would be left pending (or put on a lighter template) for no reason."""
    templates_, pods, _ = scenario
    scheduler = Scheduler(templates_)
    for pod in pods:
        for attempt in pod.shape.attempts(tolerate):
            candidates = scheduler.index.candidates(attempt.requirements, attempt.tolerations)
            for position, template_ in enumerate(scheduler.templates):
                tolerated = not (template_.taints and untolerated(template_.taints, attempt.tolerations))
                if tolerated and template_.requirements.admits(attempt.requirements, template_.well_known):
                    assert candidates >> position & 1, f"{template_.name} ruled out for {attempt.requirements}"
