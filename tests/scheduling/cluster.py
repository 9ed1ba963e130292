"""The world Karpenter v0.31's scheduling tests run in, replayed around our scheduler.

Karpenter's tests (`pkg/controllers/provisioning/scheduling/*_test.go`) call `ExpectProvisioned`: every pending pod
of the cluster is scheduled, every new node claim is launched by the fake cloud provider (the cheapest instance type
of the claim, in the first of its offerings — spot test-zone-1, spot test-zone-2, on-demand test-zone-1/2/3 — that
the claim allows) and joins the cluster as an uninitialized node, and only the pods passed to that call are bound;
the others stay pending and are scheduled again next time. `ExpectSkew` counts the bound pods a selector selects per
node label (per node name for the hostname key).

:class:`Cluster` does the same with our :class:`~karpenter_policy.scheduling.Scheduler`: nodes it launched (and
static nodes a test adds) are passed back as :class:`ExistingNode` with their bound pods as :class:`ClusterPod`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.model import labels as wk
from karpenter_policy.model.labels import is_restricted_node_label
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.resources import parse_quantity
from karpenter_policy.model.selectors import parse_selector
from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling import (
    KARPENTER,
    ClaimPlan,
    ClusterPod,
    ExistingNode,
    InstanceTable,
    NodeClaimTemplate,
    Plan,
    Pod,
    Scheduler,
    SchedulerOptions,
    TopologyRules,
    shape_of,
)
from karpenter_policy.scheduling.vectors import ZERO, Vector, add, to_vector

from .support import OFFERINGS, fake_types, template

#: Requirement keys a v1.14.1 NodeClaim is never labelled with (besides the well-known labels).
_V1_UNLABELLED = frozenset({wk.HOSTNAME, "karpenter.sh/registered", "karpenter.sh/initialized"})

LABELS = {"test": "test"}  # the `labels` of Karpenter's topology suite
HOSTNAME = wk.HOSTNAME
ZONE = wk.ZONE
CAPACITY_TYPE = wk.CAPACITY_TYPE
ARCH = wk.ARCH
INSTANCE_TYPE = wk.INSTANCE_TYPE
Z1, Z2, Z3 = "test-zone-1", "test-zone-2", "test-zone-3"


# --- pod specs (test.PodOptions) --------------------------------------------------------------------------------------


def spread(
    key: str,
    max_skew: int = 1,
    labels: Mapping[str, str] | None = LABELS,
    when: str = "DoNotSchedule",
    min_domains: int | None = None,
    expressions: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A topology spread constraint; `labels=None` and no expressions: no label selector (selects nothing)."""
    constraint: dict[str, Any] = {"topologyKey": key, "maxSkew": max_skew, "whenUnsatisfiable": when}
    if labels is not None or expressions is not None:
        selector: dict[str, Any] = {}
        if labels is not None:
            selector["matchLabels"] = dict(labels)
        if expressions is not None:
            selector["matchExpressions"] = list(expressions)
        constraint["labelSelector"] = selector
    if min_domains is not None:
        constraint["minDomains"] = min_domains
    return constraint


def term(key: str, labels: Mapping[str, str], **extra: Any) -> dict[str, Any]:
    """A pod (anti-)affinity term selecting pods with `labels` (`namespaces`, `namespaceSelector` in `extra`)."""
    return {"topologyKey": key, "labelSelector": {"matchLabels": dict(labels)}, **extra}


def weighted(weight: int, affinity_term: Mapping[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": dict(affinity_term)}


def zones(*values: str) -> dict[str, Any]:
    return requirement(ZONE, "In", *values)


def requirement(key: str, operator: str, *values: str) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def spec(
    *,
    node_selector: Mapping[str, str] | None = None,
    node_requirements: Sequence[Mapping[str, Any]] | None = None,
    required_terms: Sequence[Sequence[Mapping[str, Any]]] | None = None,
    node_preferences: Sequence[Mapping[str, Any]] | None = None,
    preferred_terms: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] | None = None,
    pod_requirements: Sequence[Mapping[str, Any]] | None = None,
    pod_preferences: Sequence[Mapping[str, Any]] | None = None,
    pod_anti_requirements: Sequence[Mapping[str, Any]] | None = None,
    pod_anti_preferences: Sequence[Mapping[str, Any]] | None = None,
    spread_constraints: Sequence[Mapping[str, Any]] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    host_ports: Sequence[int] = (),
    init_requests: Mapping[str, str] | None = None,
    init_resources: Mapping[str, Any] | None = None,
    limits: Mapping[str, str] | None = None,
    overhead: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod spec as Karpenter's `test.PodOptions` builds it (`buildAffinity`): NodeRequirements are one required
    term, NodePreferences one preferred term of weight 1."""
    body: dict[str, Any] = {}
    if node_selector:
        body["nodeSelector"] = dict(node_selector)
    affinity: dict[str, Any] = {}
    node_affinity: dict[str, Any] = {}
    terms = [list(node_requirements)] if node_requirements is not None else []
    terms += [list(t) for t in required_terms or ()]
    if terms:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
        }
    preferred = [(1, list(node_preferences))] if node_preferences is not None else []
    preferred += [(w, list(t)) for w, t in preferred_terms or ()]
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": t}} for w, t in preferred
        ]
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    for field_name, required, preferences in (
        ("podAffinity", pod_requirements, pod_preferences),
        ("podAntiAffinity", pod_anti_requirements, pod_anti_preferences),
    ):
        if required is None and preferences is None:
            continue
        block: dict[str, Any] = {}
        if required is not None:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = list(required)
        if preferences is not None:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = list(preferences)
        affinity[field_name] = block
    if affinity:
        body["affinity"] = affinity
    if spread_constraints:
        body["topologySpreadConstraints"] = list(spread_constraints)
    if tolerations:
        body["tolerations"] = list(tolerations)
    if host_ports:
        body["hostPorts"] = list(host_ports)
    if init_requests:
        init_resources = {"requests": dict(init_requests)}
    if init_resources:
        body["initContainers"] = [{"name": "init", "resources": dict(init_resources)}]
    if overhead:
        body["overhead"] = dict(overhead)  # what the RuntimeClass admission plugin sets
    if limits:
        body["limits"] = dict(limits)
    return body


_counter = itertools.count()


def make_pod(
    cpu: str | None = None,
    memory: str | None = None,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    name: str | None = None,
    requests: Mapping[str, str] | None = None,
    **options: Any,
) -> Pod:
    """One pod (`test.UnschedulablePod`): requests, labels, namespace and the options of :func:`spec`."""
    body = spec(**options)
    resources: dict[str, Any] = {}
    wanted = dict(requests or {})
    if cpu is not None:
        wanted["cpu"] = cpu
    if memory is not None:
        wanted["memory"] = memory
    if wanted:
        resources["requests"] = wanted
    if "limits" in body:
        resources["limits"] = body.pop("limits")
    container: dict[str, Any] = {"name": "app", "resources": resources}
    ports = body.pop("hostPorts", None)
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    body["containers"] = [container]
    index = next(_counter)
    return Pod(name or f"pod-{index:05d}", shape_of(body, namespace, labels or {}), order=index)


def make_pods(count: int, **options: Any) -> list[Pod]:
    """`test.UnschedulablePods(options, count)`."""
    return [make_pod(**options) for _ in range(count)]


# --- the cluster ------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Node:
    """A node of the simulated cluster (launched for a claim, or added by a test) and the pods bound to it."""

    name: str
    labels: dict[str, str]
    allocatable: Vector
    capacity: Vector
    taints: tuple[Taint, ...] = ()
    template: str | None = None
    initialized: bool = False
    instance_type: str = ""
    pods: list[Pod] = field(default_factory=list)

    def existing(self) -> ExistingNode:
        requested = ZERO
        for pod in self.pods:
            requested = add(requested, pod.requests)
        return ExistingNode(
            name=self.name,
            labels=dict(self.labels),
            taints=self.taints,
            allocatable=self.allocatable,
            requested=requested,
            template=self.template,
            initialized=self.initialized,
            capacity=self.capacity,
        )


def _vector(resources: Mapping[str, str] | None) -> Vector:
    vector, _ = to_vector({k: parse_quantity(v) for k, v in (resources or {}).items()})
    return vector


class Cluster:
    """See the module docstring. `strategy`: the scheduler's packing strategy."""

    def __init__(
        self,
        table: InstanceTable,
        *templates: NodeClaimTemplate,
        strategy: str = KARPENTER,
        daemons: Iterable[Pod] = (),
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        topology: TopologyRules = TopologyRules.V0_31,
    ) -> None:
        self.table = table
        self.topology = topology
        self.templates = list(templates)
        self.strategy = strategy
        self.daemons = list(daemons)
        self.namespace_labels = dict(namespace_labels or {})
        self.nodes: list[Node] = []
        self.pending: dict[str, Pod] = {}
        self.node_of: dict[str, Node] = {}
        self.launched: list[tuple[ClaimPlan, Node]] = []
        self._names = itertools.count(1)

    # --- set-up --------------------------------------------------------------------------------------------------

    def add_node(
        self,
        labels: Mapping[str, str] | None = None,
        allocatable: Mapping[str, str] | None = None,
        taints: Sequence[Taint] = (),
        template: str | None = None,
        initialized: bool = True,
        name: str | None = None,
        capacity: Mapping[str, str] | None = None,
    ) -> Node:
        """A node the test creates (`test.Node`): no allocatable unless given; capacity = allocatable unless given."""
        vector = _vector(allocatable)
        node = Node(
            name=name or f"static-{next(self._names):03d}",
            labels=dict(labels or {}),
            allocatable=vector,
            capacity=vector if capacity is None else _vector(capacity),
            taints=tuple(taints),
            template=template,
            initialized=initialized,
        )
        self.nodes.append(node)
        return node

    def bind(self, pod: Pod, node: Node) -> None:
        """A pod running on a node (`test.Pod{NodeName: ...}`, `ExpectManualBinding`)."""
        self.pending.pop(pod.key, None)
        node.pods.append(pod)
        self.node_of[pod.key] = node

    def delete(self, pod: Pod) -> None:
        """`ExpectDeleted`: the pod leaves the cluster (pending or bound)."""
        self.pending.pop(pod.key, None)
        node = self.node_of.pop(pod.key, None)
        if node is not None:
            node.pods.remove(pod)

    def delete_unscheduled(self) -> None:
        """`ExpectDeleteAllUnscheduledPods`."""
        self.pending.clear()

    # --- ExpectProvisioned ---------------------------------------------------------------------------------------

    def scheduler(self) -> Scheduler:
        cluster_pods = [
            ClusterPod(p, node.name, dict(node.labels), node.taints) for node in self.nodes for p in node.pods
        ]
        return Scheduler(
            self.templates,
            [node.existing() for node in self.nodes],
            self.daemons,
            cluster_pods,
            self.namespace_labels,
            SchedulerOptions(self.strategy, self.topology),
        )

    def provision(self, *pods: Pod, bind: bool = True) -> Plan:
        """`ExpectProvisioned` (`bind=False`: `ExpectProvisionedNoBinding`): schedule every pending pod, launch every
        claim, bind the pods passed in."""
        for pod in pods:
            if pod.key not in self.node_of:  # a bound pod stays where it is
                self.pending[pod.key] = pod
        plan = self.scheduler().solve(list(self.pending.values()))
        passed = {pod.key for pod in pods} if bind else set()
        by_name = {node.name: node for node in self.nodes}
        for name, placed in sorted(plan.existing.items()):
            for pod in placed:
                if pod.key in passed:
                    self.bind(pod, by_name[name])
        for claim in plan.claims:
            node = self._launch(claim)
            for pod in claim.pods:
                if pod.key in passed:
                    self.bind(pod, node)
        return plan

    def _launch(self, claim: ClaimPlan) -> Node:
        """The fake cloud provider's `Create`: the cheapest type of the claim, its first offering the claim allows;
        the node is labelled with the type's labels, the offering, and the claim's single-valued custom labels."""
        template = next(t for t in self.templates if t.name == claim.template)
        launch = claim.launch
        assert launch is not None, f"claim of {claim.template} has no instance type"
        position = self.table.position[launch.instance_type]
        instance_type = self.table.types[position]
        zone = claim.requirements.get_or_exists(ZONE)
        capacity_type = claim.requirements.get_or_exists(CAPACITY_TYPE)
        offered = {(o.zone, o.capacity_type) for o in instance_type.offerings if o.available}
        order = [*OFFERINGS, *sorted(offered - set(OFFERINGS))]
        chosen = next((z, c) for z, c in order if (z, c) in offered and zone.has(z) and capacity_type.has(c))
        labels = instance_type.labels(template.os)
        labels[ZONE], labels[CAPACITY_TYPE] = chosen
        for key in claim.requirements:
            found = claim.requirements[key]
            if not self._labels_nodes(key) or found.operator() != Operator.IN:
                continue
            labels.setdefault(key, sorted(found.values)[0])
        labels.update(template.labels)
        labels[wk.PROVISIONER_NAME] = template.name
        node = Node(
            name=f"{template.name}-node-{next(self._names):03d}",
            labels=labels,
            allocatable=template.shapes.allocatable[position],
            capacity=template.shapes.capacity[position],
            taints=template.taints,
            template=template.name,
            instance_type=launch.instance_type,
        )
        self.nodes.append(node)
        self.launched.append((claim, node))
        return node

    def _labels_nodes(self, key: str) -> bool:
        """A requirement on `key` labels the node: v0.31, unless a restricted node label (`IsRestrictedNodeLabel`);
        in a v1 world (v1.14.1's topology rules: NodePools), unless well known, the hostname or a scheduling
        simulation key (core v1.14.1 nodeclaimtemplate.go `resolveCustomLabelsFromRequirements`): kubernetes.io and
        k8s.io labels of a NodePool are on its nodes."""
        if self.topology is TopologyRules.V1_14:
            return key not in wk.WELL_KNOWN_LABELS and key not in _V1_UNLABELLED
        return not is_restricted_node_label(key)

    # --- expectations --------------------------------------------------------------------------------------------

    def scheduled(self, pod: Pod) -> Node:
        """`ExpectScheduled`."""
        node = self.node_of.get(pod.key)
        assert node is not None, f"{pod.key} was not scheduled"
        return node

    def not_scheduled(self, pod: Pod) -> None:
        """`ExpectNotScheduled`."""
        assert pod.key not in self.node_of, f"{pod.key} was scheduled to {self.node_of[pod.key].name}"

    def skew(
        self,
        key: str,
        labels: Mapping[str, str] | None = LABELS,
        namespace: str | None = "default",
    ) -> list[int]:
        """`ExpectSkew(...).To(ConsistOf(...))`: the bound pods the selector selects per domain of `key`, sorted.
        `labels=None`: every pod (a constraint without a selector lists all pods); `namespace=None`: all."""
        selector = parse_selector({"matchLabels": dict(labels)} if labels is not None else {})
        counts: Counter[str] = Counter()
        for node in self.nodes:
            for pod in node.pods:
                if namespace is not None and pod.namespace != namespace:
                    continue
                if not selector.matches(pod.labels):
                    continue
                domain = node.name if key == HOSTNAME else node.labels.get(key)
                if domain is not None:
                    counts[domain] += 1
        return sorted(counts.values())

    def max_skew(self, key: str, labels: Mapping[str, str] | None = LABELS) -> int:
        """`ExpectMaxSkew`: max - min of :meth:`skew`."""
        counts = self.skew(key, labels)
        return max(counts) - min(counts) if counts else 0

    def new_nodes(self) -> list[Node]:
        return [node for _, node in self.launched]


def provisioner_requirements(*terms: Mapping[str, Any]) -> Requirements:
    """A provisioner's `spec.requirements`."""
    return Requirements(Requirement.new(t["key"], t["operator"], t.get("values", [])) for t in terms)


FAKE_TABLE = InstanceTable(fake_types())


def provisioner(
    name: str = "default", *terms: Mapping[str, Any], table: InstanceTable = FAKE_TABLE, **options: Any
) -> NodeClaimTemplate:
    """`test.Provisioner` over the fake types; without terms, the suites' default requirement (capacity type spot or
    on-demand). `options`: labels, taints, startup_taints, limits, weight, admitted ..."""
    if not terms:
        terms = (requirement(CAPACITY_TYPE, "In", "spot", "on-demand"),)
    return template(table, name=name, requirements=provisioner_requirements(*terms), **options)


def cluster(strategy: str, *templates: NodeClaimTemplate, table: InstanceTable = FAKE_TABLE, **options: Any) -> Cluster:
    """A cluster with these provisioners (default: the suites' one)."""
    return Cluster(table, *(templates or (provisioner(),)), strategy=strategy, **options)
