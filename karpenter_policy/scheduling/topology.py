"""Topology spread and pod (anti-)affinity, as Karpenter v0.31 tracks them (`scheduling/topology.go`,
`topologygroup.go`, `topologynodefilter.go`), or — for a run on v1 NodePools (:class:`TopologyRules`) — as
Karpenter v1.14.1 does.

A :class:`TopologyGroup` counts, per domain of one topology key (a zone, a hostname, a capacity type ...), the
pods that its label selector selects in its namespaces. Groups come from the pods being scheduled (their spread
constraints and affinity terms: the pod *owns* the group) and from pods already running with a required
anti-affinity term (*inverse* groups: they keep other pods away from them). Identical groups of many pods are one
group with many owners.

For a pod and a node (claim), :meth:`Topology.add_requirements` narrows the node's requirements to the domains the
pod may use: for a spread constraint the least-loaded domain within `maxSkew` (hostname domains always count from
a minimum of zero: a new node can be made); for affinity the domains where a selected pod already is (or, for a
pod that selects itself and finds none, any allowed domain); for anti-affinity the domains with none.
:meth:`Topology.record` counts a placed pod. Ties between equally loaded domains are broken by name (Karpenter
picks one at random), so a plan is the same on every run.

What v1.14.1 changes, all on spread constraints (v0.31 ignores the three fields; :data:`TopologyRules.V1_14`):

- `matchLabelKeys`: each key's value in the pod's own labels joins the selector as `key In [value]`; a key the pod
  lacks is ignored (`topology.go` `newForTopologies`).
- `nodeAffinityPolicy` (default Honor): Honor counts only nodes that match the pod's nodeSelector and one of its
  required node-affinity terms, as v0.31 always did; Ignore counts every node (`topologynodefilter.go`
  `TopologyNodeFilter.Matches`).
- `nodeTaintsPolicy` (default Ignore): Honor counts only nodes whose taints the pod (as relaxed) tolerates — pods
  running there, pods placed on new nodes of a tainted template — and takes a domain into the group only from a
  template or existing node whose taints it tolerates (`topologydomaingroup.go` `ForEachDomain`, `countDomains`).
- The domains of existing nodes join a spread group only when the node passes the group's node filter
  (`countDomains`); v0.31's rule here (every existing node's labels are domains) stays for other groups.

And one on pod (anti-)affinity: a v1.14.1 affinity group's zero node filter has a taint policy that is not
`Ignore`, so `TopologyDomainGroup.ForEachDomain` gives it only the domains of the templates (NodePools) with a taint
set the pod that makes the group tolerates (as relaxed); the group's counting is unfiltered. A group made by a pod
being scheduled adds every existing node's domain (`countDomains`: the zero filter matches every node); an inverse
anti-affinity group (a running pod's required term, `updateInverseAntiAffinity`) has the template domains its
running pod tolerates only. Groups are one per `TopologyGroup.Hash`, which leaves the tolerations out: the first
pod to make a group decides its domains (:meth:`Topology._new_group`). Under v0.31 every group has every domain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from karpenter_policy.model import labels as wk
from karpenter_policy.model.podtopology import HONOR, IGNORE, AffinityTerm, NamespaceScope, SpreadConstraint
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.selectors import Expression, LabelSelector
from karpenter_policy.model.taints import Taint, Toleration, untolerated
from karpenter_policy.scheduling.pods import Attempt, Pod, PodShape
from karpenter_policy.scheduling.running import ClusterPod, PodsForTopology, as_running


class Kind(IntEnum):
    SPREAD = 0
    AFFINITY = 1
    ANTI_AFFINITY = 2

    def __str__(self) -> str:
        return ("topology spread", "pod affinity", "pod anti-affinity")[self]


class TopologyRules(Enum):
    """Which Karpenter's topology rules a scheduling run follows: v0.31's (Provisioners) or v1.14.1's (NodePools;
    see the module docstring). One switch per run, never per pod: groups are shared by every pod of a run."""

    V0_31 = "v0.31"
    V1_14 = "v1.14"


@dataclass(frozen=True, slots=True)
class DomainSources:
    """Where v1.14.1's spread groups take their domains from: per topology key, per domain, the taint sets of the
    templates offering it (Karpenter's `TopologyDomainGroup`), and the existing nodes as (labels, taints)."""

    templates: Mapping[str, Mapping[str, frozenset[tuple[Taint, ...]]]]
    nodes: Sequence[tuple[Mapping[str, str], tuple[Taint, ...]]] = ()


def template_domain_taints(
    templates: Iterable[tuple[Mapping[str, Collection[str]], Sequence[Taint]]],
) -> dict[str, dict[str, frozenset[tuple[Taint, ...]]]]:
    """:attr:`DomainSources.templates` from each template's (domains, taints)."""
    found: dict[str, dict[str, set[tuple[Taint, ...]]]] = {}
    for domains, taints in templates:
        for key, values in domains.items():
            by_domain = found.setdefault(key, {})
            for value in values:
                by_domain.setdefault(value, set()).add(tuple(taints))
    return {key: {d: frozenset(sets) for d, sets in by_domain.items()} for key, by_domain in found.items()}


class TopologyError(Exception):
    """No domain satisfies a topology constraint for a pod on a node."""


@dataclass(frozen=True, slots=True)
class GroupKey:
    """What makes two groups the same group (Karpenter's `TopologyGroup.Hash`)."""

    kind: Kind
    key: str
    namespaces: NamespaceScope
    selector: LabelSelector
    max_skew: int
    min_domains: int | None
    node_filter: tuple[Requirements, ...] | None
    #: v1.14.1's `nodeTaintsPolicy: Honor`: the tolerations nodes' taints must be within (None: taints ignored)
    tolerations: tuple[Toleration, ...] | None = None
    #: a group of a v1.14.1 run (its domains come from :class:`DomainSources`)
    v1: bool = False
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compared = (self.kind, self.key, self.namespaces, self.selector, self.max_skew, self.min_domains)
        object.__setattr__(self, "_hash", hash((*compared, self.node_filter, self.tolerations, self.v1)))

    def __hash__(self) -> int:  # computed once: groups are looked up by their key for every pod of every run
        return self._hash


def node_filter_of(shape: PodShape, own: bool = False) -> tuple[Requirements, ...]:
    """Karpenter's TopologyNodeFilter: a spread constraint counts only nodes that match the pod's nodeSelector
    and one of its required node-affinity terms. `own` (a v1.14.1 group): the pod's own terms, without the first
    terms of its volumes that v0.31.1's reading puts in them (v1.14.1's `MakeTopologyNodeFilter` reads
    `pod.Spec.Affinity` alone; its volumes' topology goes to the claim's requirements)."""
    pod = shape.unvolumed if own and shape.unvolumed is not None else shape.scheduling
    if not pod.required_terms:
        return (pod.node_selector,)
    return tuple(pod.node_selector.intersection(term) for term in pod.required_terms)


@dataclass(eq=False)
class TopologyGroup:
    spec: GroupKey
    counts: dict[str, int] = field(default_factory=dict)
    owners: set[str] = field(default_factory=set)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    _selects: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = field(default_factory=dict)  # by `selection_key`

    #: the spec's topology key and kind (attributes: asked for every claim a pod is offered)
    key: str = field(init=False)
    kind: Kind = field(init=False)
    #: the key is the hostname
    hostname: bool = field(init=False)
    #: every node passes the spread's node filter (there is none, or one of its terms constrains nothing)
    unfiltered: bool = field(init=False)
    node_filter: tuple[Requirements, ...] = field(init=False)
    #: `GroupKey.tolerations`: nodes with a taint outside them do not count (None: every node counts)
    tolerations: tuple[Toleration, ...] | None = field(init=False)
    #: moves whenever a count does (what `_affine` was worked out at)
    revision: int = field(init=False, default=0)
    #: affinity: (revision, the pod's domains, the domains holding a selected pod that they allow)
    _affine: tuple[int, Requirement, Requirement] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.key, self.kind = self.spec.key, self.spec.kind
        self.hostname = self.key == wk.HOSTNAME
        self.node_filter = self.spec.node_filter or ()
        self.unfiltered = not self.node_filter or any(not term for term in self.node_filter)
        self.tolerations = self.spec.tolerations

    def counts_node(self, taints: Sequence[Taint]) -> bool:
        """A node with these taints passes the group's taint filter (v1.14.1's `nodeTaintsPolicy: Honor`)."""
        tolerations = self.tolerations
        return tolerations is None or not taints or not untolerated(taints, tolerations)

    def register(self, *domains: str) -> None:
        self.revision += 1
        for domain in domains:
            self.counts.setdefault(domain, 0)

    def record(self, *domains: str) -> None:
        self.revision += 1
        for domain in domains:
            self.counts[domain] = self.counts.get(domain, 0) + 1

    def selects(self, shape: PodShape) -> bool:
        """The group counts pods of this shape (namespace and labels)."""
        # Keyed by what selection depends on (namespace and labels), not by the shape: many shapes share labels
        # (pods of one app that differ in their requests), and this is asked for every claim a pod is offered.
        key = shape.selection_key
        found = self._selects.get(key)
        if found is None:
            selected = self.spec.namespaces.includes(shape.namespace, self.namespace_labels)
            found = self._selects[key] = selected and self.spec.selector.matches(shape.label_map)
        return found

    def counts_pod(
        self, shape: PodShape, requirements: Requirements, allow_undefined: frozenset[str], taints: Sequence[Taint] = ()
    ) -> bool:
        """A pod of this shape on a node with these requirements (and taints) counts for the group.
        `allow_undefined`: the keys a node may leave undefined (a new node: the well-known labels; a running node:
        none)."""
        if not self.selects(shape) or not self.counts_node(taints):
            return False
        if self.unfiltered:
            return True
        return any(requirements.admits(f, allow_undefined) for f in self.node_filter)

    def next_domains(self, shape: PodShape, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        if self.kind == Kind.SPREAD:
            return self._next_spread(shape, pod_domains, node_domains)
        if self.kind == Kind.AFFINITY:
            return self._next_affinity(shape, pod_domains, node_domains)
        return self._next_anti_affinity(pod_domains, node_domains)

    def _candidates(self, node_domains: Requirement) -> Iterable[str]:
        """The domains a node may be in, sorted (a hostname group has thousands: ask the node first). Every
        hostname is a domain (a new node's is known the moment it is planned); other keys' domains are the
        universe the group was made with, and those running pods were counted in."""
        if not node_domains.complement:
            hostname = self.hostname
            values = node_domains.values
            if len(values) == 1:  # (most nodes: one hostname, one zone)
                (only,) = values
                return (only,) if (hostname or only in self.counts) and node_domains.has(only) else ()
            return sorted(d for d in values if (hostname or d in self.counts) and node_domains.has(d))
        return sorted(d for d in self.counts if node_domains.has(d))

    def _min_count(self, pod_domains: Requirement) -> int:
        if self.hostname:
            return 0  # a new node is always possible
        lowest = math.inf
        supported = 0
        for domain, count in self.counts.items():
            if pod_domains.has(domain):
                supported += 1
                lowest = min(lowest, count)
        if self.spec.min_domains is not None and supported < self.spec.min_domains:
            return 0
        return 0 if lowest == math.inf else int(lowest)

    def _next_spread(self, shape: PodShape, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        lowest = self._min_count(pod_domains)
        own = 1 if self.selects(shape) else 0
        best, best_count = None, math.inf
        for domain in self._candidates(node_domains):
            count = self.counts.get(domain, 0) + own
            # a tie goes to a domain other than "" (Karpenter's pick among ties is Go's map order)
            if count - lowest <= self.spec.max_skew and (count < best_count or (count == best_count and best == "")):
                best, best_count = domain, count
        if not best:  # Karpenter's `minDomain == ""`: no domain, and the domain "" (a label's empty value) is none
            return Requirement(self.key, False)  # DoesNotExist: no domain
        if _only(node_domains, best):  # the node's own domain: the same set, not a copy to compare
            return node_domains
        return Requirement(self.key, False, frozenset({best}))

    def _next_affinity(self, shape: PodShape, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        # The domains holding a selected pod do not depend on the node: while the counts stay as they are (a pod
        # offered many claims), they are worked out once.
        affine = self._affine
        if affine is not None and affine[0] == self.revision and affine[1] is pod_domains:
            held = affine[2]
        else:
            values = frozenset(d for d, count in self.counts.items() if count > 0 and pod_domains.has(d))
            held = Requirement(self.key, False, values)
            self._affine = (self.revision, pod_domains, held)
        if held.values or not self.selects(shape):
            return held
        # the first pod of a self-affine group picks its domain
        both = pod_domains.intersection(node_domains)
        for domain in self._candidates(both):
            return Requirement(self.key, False, frozenset({domain}))
        for domain in sorted(self.counts):
            if pod_domains.has(domain):
                return Requirement(self.key, False, frozenset({domain}))
        return held

    def _next_anti_affinity(self, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        if self.key == wk.HOSTNAME and not node_domains.complement:  # only the node's own hostname matters
            free = {d for d in node_domains.values if self.counts.get(d, 0) == 0 and pod_domains.has(d)}
        else:
            free = {d for d, count in self.counts.items() if count == 0 and pod_domains.has(d)}
        return Requirement(self.key, False, frozenset(free))


class GroupKeys:
    """The group keys of each attempt's terms, made once for every run of a scheduling (each run asks for every pod
    again), and one object per key: a run's groups are then found by a key that is the very object stored. `rules`:
    whose reading of a spread constraint the keys follow (:class:`TopologyRules`)."""

    def __init__(self, rules: TopologyRules = TopologyRules.V0_31) -> None:
        self.rules = rules
        #: the run follows v1.14.1's rules
        self.v1 = rules is TopologyRules.V1_14
        self._of: dict[int, tuple[Attempt, tuple[GroupKey, ...]]] = {}  # id(attempt) → (attempt, its keys)
        self._canonical: dict[GroupKey, GroupKey] = {}

    def of(self, shape: PodShape, attempt: Attempt) -> tuple[GroupKey, ...]:
        """The keys of the groups a pod of `shape` owns with `attempt` (one of the shape's attempts)."""
        found = self._of.get(id(attempt))
        if found is not None and found[0] is attempt:
            return found[1]
        specs = _specs(shape, attempt, self.v1)
        keys = tuple(self._canonical.setdefault(key, key) for key in specs)
        self._of[id(attempt)] = (attempt, keys)
        return keys


def _specs(shape: PodShape, attempt: Attempt, v1: bool = False) -> list[GroupKey]:
    specs = []
    for constraint in attempt.spread:
        specs.append(_spread_key_v1(shape, attempt, constraint) if v1 else _spread_key(shape, constraint))
    for term in (*attempt.affinity, *attempt.anti_affinity):
        kind = Kind.ANTI_AFFINITY if term.anti else Kind.AFFINITY
        specs.append(_affinity_key(kind, term, v1))
    return specs


def _affinity_key(kind: Kind, term: AffinityTerm, v1: bool) -> GroupKey:
    """The group of a pod (anti-)affinity term (Karpenter's `NewTopologyGroup` with no node filter); `v1`: of a
    v1.14.1 run, whose domains depend on the tolerations of the pod that makes it."""
    return GroupKey(kind, term.key, term.namespaces, term.selector, 2**31 - 1, None, None, v1=v1)


class Topology:
    """Every topology group of a scheduling run (see the module docstring)."""

    def __init__(
        self,
        domains: Mapping[str, Collection[str]],
        cluster_pods: PodsForTopology | Iterable[ClusterPod] = (),
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        group_keys: GroupKeys | None = None,
        sources: DomainSources | None = None,
    ) -> None:
        """`group_keys`: shared by the runs of one scheduling (each run makes its own Topology). `sources`: where a
        v1.14.1 spread group finds its domains (None: in `domains`, as v0.31)."""
        self.domains = domains  # read only: shared with the caller, never copied
        self.sources = sources
        self.group_keys = group_keys if group_keys is not None else GroupKeys()
        self.cluster_pods = as_running(cluster_pods)
        self.namespace_labels = namespace_labels or {}
        self.groups: dict[GroupKey, TopologyGroup] = {}
        self.inverse: dict[GroupKey, TopologyGroup] = {}
        self._owned: dict[str, list[TopologyGroup]] = {}  # pod key → the groups it owns
        # `PodShape.selection_key` → the (non-inverse) groups selecting pods of it
        self._selecting: dict[tuple[str, tuple[tuple[str, str], ...]], list[TopologyGroup]] = {}
        self._version = 0  # changes whenever a count or a pod's groups may have (what `_tests` was made at)
        self._tests: tuple[Pod, Attempt, int, list[tuple[str, Callable[[Iterable[str]], bool]]]] | None = None
        for running in self.cluster_pods.anti_affine():
            for term in running.pod.shape.topology.anti_affinity:
                if term.required:
                    group = self._inverse_group(term, running.pod.shape.scheduling.tolerations)
                    if term.key in running.node_labels:
                        group.record(running.node_labels[term.key])

    @property
    def empty(self) -> bool:
        return not self.groups and not self.inverse

    def _new_group(
        self, spec: GroupKey, tolerations: Sequence[Toleration] = (), inverse: bool = False
    ) -> TopologyGroup:
        """A new group with its domains: v0.31's universe, or v1.14.1's — a spread group's by its node filter, a pod
        (anti-)affinity group's by the `tolerations` of the pod that makes it (`inverse`: a running pod's required
        anti-affinity, without the existing nodes' domains)."""
        group = TopologyGroup(spec, namespace_labels=self.namespace_labels)
        if spec.v1 and self.sources is not None:
            if spec.kind == Kind.SPREAD:
                domains = _v1_domains(group, self.sources)
            else:
                domains = _v1_affinity_domains(spec.key, self.sources, tolerations, inverse)
            group.register(*sorted(domains))
        else:
            group.register(*sorted(self.domains.get(spec.key, ())))
        return group

    def _inverse_group(self, term: AffinityTerm, tolerations: Sequence[Toleration]) -> TopologyGroup:
        """The inverse group of a required anti-affinity term (made, on a v1.14.1 run, with the domains the pod
        holding the term — `tolerations` — tolerates)."""
        spec = _affinity_key(Kind.ANTI_AFFINITY, term, self.group_keys.v1)
        group = self.inverse.get(spec)
        if group is None:
            group = self.inverse[spec] = self._new_group(spec, tolerations, inverse=True)
        return group

    def update(self, pod: Pod, attempt: Attempt) -> None:
        """Make the pod own exactly the groups of this attempt's terms (Karpenter's `Topology.Update`)."""
        self._version += 1
        for group in self._owned.pop(pod.key, ()):
            group.owners.discard(pod.key)
        for term in attempt.anti_affinity:
            if term.required:
                self._inverse_group(term, attempt.tolerations).owners.add(pod.key)
        owned: list[TopologyGroup] = []
        for spec in self.group_keys.of(pod.shape, attempt):
            found = self.groups.get(spec)
            if found is None:
                found = self.groups[spec] = self._new_group(spec, attempt.tolerations)
                self._count(found)
                self._selecting.clear()
            found.owners.add(pod.key)
            owned.append(found)
        if owned:
            self._owned[pod.key] = owned

    def _count(self, group: TopologyGroup) -> None:
        """Count the running pods the group selects, per domain of their nodes (Karpenter's `countDomains`)."""
        candidates = self.cluster_pods.candidates(group.spec.namespaces, group.spec.selector, self.namespace_labels)
        for running in candidates:
            if not group.selects(running.pod.shape):
                continue
            domain = running.node_labels.get(group.key)
            if domain is None and group.key == wk.HOSTNAME:
                domain = running.node_name
            if domain is None:
                continue
            if not group.unfiltered:
                node = Requirements.from_labels(running.node_labels)
                if not any(node.admits(f, frozenset()) for f in group.node_filter):
                    continue
            if not group.counts_node(running.node_taints):
                continue
            group.record(domain)

    def register(self, key: str, domain: str) -> None:
        """A new domain (a new node's hostname) every group on `key` should know."""
        self._version += 1
        for group in (*self.groups.values(), *self.inverse.values()):
            if group.key == key and key != wk.HOSTNAME:  # hostname groups treat unknown hostnames as empty
                group.register(domain)

    def _matching(
        self, pod: Pod, requirements: Requirements, allow_undefined: frozenset[str]
    ) -> Sequence[TopologyGroup]:
        owned = self._owned.get(pod.key, ())
        if not self.inverse:
            return owned
        groups = list(owned)
        for group in self.inverse.values():
            if group.counts_pod(pod.shape, requirements, allow_undefined):
                groups.append(group)
        return groups

    def bystander(self, pod: Pod, attempt: Attempt) -> bool:
        """The pod takes part in no topology group: it owns none (no spread or pod (anti-)affinity terms in this
        attempt) and no group counts pods of its shape."""
        if attempt.has_topology or pod.key in self._owned:
            return False
        return not self.selecting(pod.shape) and not any(g.selects(pod.shape) for g in self.inverse.values())

    def involves(self, pod: Pod) -> bool:
        """The pod owns a group, or some pod keeps others away (then every placement must ask)."""
        return bool(self.inverse) or pod.key in self._owned

    def add_requirements(
        self, pod: Pod, attempt: Attempt, node: Requirements, allow_undefined: frozenset[str]
    ) -> Requirements:
        """The node's requirements narrowed by every group the pod takes part in; TopologyError when a group
        leaves no domain."""
        groups = self._matching(pod, node, allow_undefined)
        if not groups:
            return node
        narrowed = node
        strict = attempt.strict
        shape = pod.shape
        for group in groups:
            key = group.key
            pod_domains = strict.get_or_exists(key)
            node_domains = node.get_or_exists(key)
            domains = group.next_domains(shape, pod_domains, node_domains)
            if domains.is_empty():
                raise TopologyError(
                    f"unsatisfiable {group.kind} constraint on {key} "
                    f"(pods with {group.spec.selector}; {_describe(group, pod_domains, node_domains)})"
                )
            current = narrowed.get(key)
            if current is not domains and current != domains:  # (the same domains: the node is left as it is)
                narrowed = narrowed.add(domains)
        return narrowed

    def refuses(self, pod: Pod, attempt: Attempt, node: Requirements) -> bool:
        """A quick answer for the common refusal: True only when :meth:`add_requirements` would refuse the pod
        on any node whose requirements are within `node` (a claim's, before the pod's are intersected in),
        because some group the pod owns leaves none of the node's domains — a claim whose hostname already has
        its share of a spread, or holds no pod a hostname affinity asks for. False says nothing: the full check
        decides. Only keys on which `node` allows a finite set of values are asked (the node's domains are then
        a subset of them whatever else narrows them).

        A pod is offered many claims in a row while the counts stay the same: what each group allows the pod is
        worked out once per pod, attempt and state of the counts (`_domain_tests`), then asked of each claim."""
        return _refused(self._domain_tests(pod, attempt), node)

    def refusal(self, pod: Pod, attempt: Attempt) -> Callable[[Requirements], bool] | None:
        """:meth:`refuses` for this pod, to ask of many nodes while the counts stay as they are (None: the pod
        owns no group, nothing is refused)."""
        tests = self._domain_tests(pod, attempt)
        if not tests:
            return None
        if len(tests) == 1:  # (most pods: one group; asked of every claim the pod is offered)
            ((key, allowed),) = tests

            def refuses(node: Requirements) -> bool:
                values = node.get(key)  # undefined: every value (never refused)
                if values is None or values.complement or not values.values:
                    return False
                return not allowed(values.values)

            return refuses
        return lambda node: _refused(tests, node)

    def _domain_tests(self, pod: Pod, attempt: Attempt) -> list[tuple[str, Callable[[Iterable[str]], bool]]]:
        cached = self._tests
        if cached is not None and cached[0] is pod and cached[1] is attempt and cached[2] == self._version:
            return cached[3]
        strict = attempt.strict
        owned = self._owned.get(pod.key, ())
        tests = [(g.key, _domains_left(g, pod.shape, strict.get_or_exists(g.key))) for g in owned]

        self._tests = (pod, attempt, self._version, tests)
        return tests

    def selecting(self, shape: PodShape) -> list[TopologyGroup]:
        """The groups (inverse ones aside) whose selector selects pods of this shape."""
        key = shape.selection_key
        found = self._selecting.get(key)
        if found is None:
            found = self._selecting[key] = [g for g in self.groups.values() if g.selects(shape)]
        return found

    def record(
        self, pod: Pod, requirements: Requirements, allow_undefined: frozenset[str], taints: Sequence[Taint] = ()
    ) -> None:
        """Count a pod placed on a node with these requirements (and taints) in every group that counts it."""
        self._version += 1
        for group in self.selecting(pod.shape):  # (they select the pod: `counts_pod` without asking that again)
            if not group.unfiltered and not any(requirements.admits(f, allow_undefined) for f in group.node_filter):
                continue
            if taints and group.tolerations is not None and untolerated(taints, group.tolerations):
                continue
            domains = requirements.get_or_exists(group.key)
            if domains.complement:
                continue
            if group.kind == Kind.ANTI_AFFINITY:
                group.record(*sorted(domains.values))
            elif len(domains.values) == 1:
                group.record(next(iter(domains.values)))
        for group in self.inverse.values():
            if pod.key in group.owners:
                domains = requirements.get_or_exists(group.key)
                if not domains.complement:
                    group.record(*sorted(domains.values))


def _only(requirement: Requirement, value: str) -> bool:
    """The requirement is exactly `In [value]`."""
    return (
        not requirement.complement
        and len(requirement.values) == 1
        and value in requirement.values
        and requirement.greater_than is None
        and requirement.less_than is None
    )


def _refused(tests: Sequence[tuple[str, Callable[[Iterable[str]], bool]]], node: Requirements) -> bool:
    for key, allowed in tests:
        values = node.get_or_exists(key)
        if values.complement or not values.values:  # unbounded, or no domain at all (never "emptied")
            continue
        if not allowed(values.values):
            return True
    return False


def _domains_left(group: TopologyGroup, shape: PodShape, pod_domains: Requirement) -> Callable[[Iterable[str]], bool]:
    """Whether the group, as its counts stand, may leave a pod of `shape` (allowed `pod_domains`) some domain among
    the values given — False only when `TopologyGroup.next_domains` would give no domain, or none of those values,
    on every node whose domains are a subset of them (the same rules, asked of those values only). What does not
    depend on the values is worked out here, once."""
    counts = group.counts
    hostname = group.key == wk.HOSTNAME
    # (loops, not any() over a generator: asked for every claim a pod is offered, mostly of one value)
    if group.kind == Kind.SPREAD:
        # count + own - lowest <= max skew
        limit = group.spec.max_skew + group._min_count(pod_domains) - (1 if group.selects(shape) else 0)

        def spread_allows(values: Iterable[str]) -> bool:
            for d in values:
                count = counts.get(d)
                if (count is not None or hostname) and (count or 0) <= limit:
                    return True
            return False

        return spread_allows
    if group.kind == Kind.AFFINITY:
        # none of the values holds a selected pod: the group offers domains elsewhere, or (no domain anywhere) a pod
        # that selects itself picks one — which may be among the values
        if group.selects(shape) and not any(c > 0 and pod_domains.has(d) for d, c in counts.items()):
            return lambda values: True

        def affinity_allows(values: Iterable[str]) -> bool:
            for d in values:  # noqa: SIM110 (a loop: cheaper than any() over a generator)
                if counts.get(d, 0) > 0 and pod_domains.has(d):
                    return True
            return False

        return affinity_allows

    def anti_affinity_allows(values: Iterable[str]) -> bool:
        for d in values:
            count = counts.get(d)
            if (count is not None or hostname) and not count and pod_domains.has(d):
                return True
        return False

    return anti_affinity_allows


def _spread_key(shape: PodShape, constraint: SpreadConstraint) -> GroupKey:
    return GroupKey(
        Kind.SPREAD,
        constraint.key,
        NamespaceScope(frozenset({shape.namespace})),
        constraint.selector,
        constraint.max_skew,
        constraint.min_domains,
        node_filter_of(shape),
    )


def _spread_key_v1(shape: PodShape, attempt: Attempt, constraint: SpreadConstraint) -> GroupKey:
    """Karpenter v1.14.1's group of a spread constraint (`topology.go` `newForTopologies`, `topologygroup.go`
    `NewTopologyGroup`): `matchLabelKeys` joined to the selector, and the node inclusion policies with their
    defaults (nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore). The tolerations are the attempt's (Karpenter
    makes the group from the pod as relaxed)."""
    selector = constraint.selector
    if constraint.match_label_keys and not selector.selects_nothing:
        labels = shape.label_map
        added = tuple(
            Expression(key, "In", frozenset({labels[key]})) for key in constraint.match_label_keys if key in labels
        )
        if added:
            selector = LabelSelector(selector.match_labels, (*selector.expressions, *added))
    affinity = constraint.node_affinity_policy or HONOR
    taints = constraint.node_taints_policy or IGNORE
    return GroupKey(
        Kind.SPREAD,
        constraint.key,
        NamespaceScope(frozenset({shape.namespace})),
        selector,
        constraint.max_skew,
        constraint.min_domains,
        node_filter_of(shape, own=True) if affinity == HONOR else (),
        attempt.tolerations if taints == HONOR else None,
        v1=True,
    )


def _v1_domains(group: TopologyGroup, sources: DomainSources) -> set[str]:
    """A v1.14.1 spread group's domains: those of the templates with a taint set the group's filter passes
    (`TopologyDomainGroup.ForEachDomain`), and those of the existing nodes that pass its node filter (labels and
    taints: `countDomains`)."""
    key = group.key
    found = {
        domain
        for domain, taint_sets in sources.templates.get(key, {}).items()
        if any(group.counts_node(taints) for taints in taint_sets)
    }
    for labels, taints in sources.nodes:
        domain = labels.get(key)
        if domain is None or domain in found or not group.counts_node(taints):
            continue
        if not group.unfiltered:
            node = Requirements.from_labels(labels)
            if not any(node.admits(f, frozenset()) for f in group.node_filter):
                continue
        found.add(domain)
    return found


def _v1_affinity_domains(
    key: str, sources: DomainSources, tolerations: Sequence[Toleration], inverse: bool
) -> set[str]:
    """A v1.14.1 pod (anti-)affinity group's domains: those of the templates with a taint set `tolerations` tolerate
    (`TopologyDomainGroup.ForEachDomain` under the zero node filter), and — unless `inverse` — every existing node's
    (`countDomains`: the zero filter matches every node, its taints whatever they are)."""
    found = {
        domain
        for domain, taint_sets in sources.templates.get(key, {}).items()
        if any(not taints or not untolerated(taints, tolerations) for taints in taint_sets)
    }
    if not inverse:
        found.update(labels[key] for labels, _ in sources.nodes if key in labels)
    return found


def _describe(group: TopologyGroup, pod_domains: Requirement, node_domains: Requirement) -> str:
    if group.key == wk.HOSTNAME:
        return "every node it could use already has its share"
    counts = ", ".join(f"{d}: {c}" for d, c in sorted(group.counts.items())) or "no domains"
    text = f"counts {counts}"
    if pod_domains.operator() != Operator.EXISTS:
        text += f"; the pod allows {pod_domains.describe_values()}"
    if node_domains.operator() != Operator.EXISTS:
        text += f"; the node allows {node_domains.describe_values()}"
    return text
