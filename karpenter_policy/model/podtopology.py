"""What a pod asks of its neighbours: topology spread constraints, pod (anti-)affinity terms and host ports.

Read from a pod spec as Kubernetes defines them (`core/v1`), for the scheduler (Karpenter v0.31's
`scheduling/topology.go`): a spread constraint counts the pods its label selector selects in the pod's namespace,
per domain of its topology key; an affinity term counts the pods its selector selects in its namespaces (the pod's
own when none are named; `namespaceSelector` picks namespaces by their labels, `{}` meaning all); preferred terms
carry a weight and are dropped one by one when the pod cannot be placed. A host port is unique per node for its
IP (an unspecified IP clashes with every IP), port and protocol.

A spread constraint's `matchLabelKeys`, `nodeAffinityPolicy` and `nodeTaintsPolicy` are read and checked as the API
server admits them (`Honor` or `Ignore`; label keys distinct and apart from the selector's), and kept as written:
Karpenter v0.31 ignores all three, v1.14.1 applies them (`scheduling/topology.py` decides which a run follows).

A malformed field is a :class:`~karpenter_policy.model.pods.PodSpecError` whose path leads to it from the pod spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.model.labels import qualified_name_errors
from karpenter_policy.model.pods import PodSpecError, SpecPath
from karpenter_policy.model.selectors import LabelSelector, SelectorError, parse_selector

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
#: a spread constraint's node inclusion policies (`nodeAffinityPolicy`, `nodeTaintsPolicy`)
HONOR = "Honor"
IGNORE = "Ignore"
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A `topologySpreadConstraints` entry."""

    key: str
    max_skew: int
    selector: LabelSelector
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    min_domains: int | None = None
    #: `matchLabelKeys`: label keys whose values, taken from the pod's own labels, join the selector
    match_label_keys: tuple[str, ...] = ()
    #: `nodeAffinityPolicy` / `nodeTaintsPolicy` as written (None: unset; the reader of each API defaults it)
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None

    @property
    def soft(self) -> bool:
        """Whether the constraint is a preference (`whenUnsatisfiable: ScheduleAnyway`)."""
        return self.when_unsatisfiable == SCHEDULE_ANYWAY

    def __str__(self) -> str:
        return f"topology spread on {self.key} (maxSkew {self.max_skew}, {self.when_unsatisfiable}, {self.selector})"


@dataclass(frozen=True, slots=True)
class NamespaceScope:
    """The namespaces an affinity term counts pods in: `names`, plus those `selector` selects (by the labels of the
    Namespace objects); neither given means the pod's own namespace, filled in by the reader."""

    names: frozenset[str] = frozenset()
    selector: LabelSelector | None = None

    def includes(self, namespace: str, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """Whether the term counts pods of `namespace`: named, or its labels (`namespace_labels`) selected."""
        if namespace in self.names:
            return True
        return self.selector is not None and self.selector.matches(namespace_labels.get(namespace, {}))


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod affinity or anti-affinity term (required, or preferred with a weight)."""

    key: str
    selector: LabelSelector
    namespaces: NamespaceScope
    anti: bool = False
    required: bool = True
    weight: int = 0

    def __str__(self) -> str:
        kind = "pod anti-affinity" if self.anti else "pod affinity"
        strength = "required" if self.required else f"preferred (weight {self.weight})"
        return f"{strength} {kind} on {self.key} to pods with {self.selector}"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """Kubernetes' rule: same port and protocol, and the same IP or either unspecified."""
        if (self.port, self.protocol) != (other.port, other.protocol):
            return False
        unspecified = ("0.0.0.0", "::")
        return self.ip == other.ip or self.ip in unspecified or other.ip in unspecified

    def __str__(self) -> str:
        return f"host port {self.ip}:{self.port}/{self.protocol}"


@dataclass(frozen=True, slots=True)
class PodTopology:
    """The topology terms and host ports of a pod (hashable: identical pods share one)."""

    spread: tuple[SpreadConstraint, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()  # required first, then preferred heaviest first
    anti_affinity: tuple[AffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the pod asks nothing of its neighbours (no spread, affinity, anti-affinity or host port)."""
        return not (self.spread or self.affinity or self.anti_affinity or self.host_ports)


def _selector(raw: object, path: SpecPath) -> LabelSelector:
    try:
        return parse_selector(raw)
    except SelectorError as error:
        raise PodSpecError((*path, *error.path), error.message) from None


def _int(raw: object, path: SpecPath, what: str, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not minimum <= raw <= _INT32_MAX:
        raise PodSpecError(path, f"{what} must be an integer from {minimum} to {_INT32_MAX}")
    return raw


def _key(raw: object, path: SpecPath) -> str:
    if not isinstance(raw, str) or not raw:
        raise PodSpecError(path, "topologyKey must be a non-empty label key")
    return raw


def _policy(raw: object, path: SpecPath, what: str) -> str | None:
    if raw is None:
        return None
    if raw not in (HONOR, IGNORE):
        raise PodSpecError(path, f"{what} must be {HONOR} or {IGNORE}, not {raw!r}")
    return str(raw)


def _match_label_keys(raw: object, path: SpecPath, selector: LabelSelector) -> tuple[str, ...]:
    """`matchLabelKeys` as the API server admits it (`ValidateMatchLabelKeysInTopologySpread`): distinct label keys,
    only beside a `labelSelector`, none of them a key the selector already names."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PodSpecError(path, "matchLabelKeys must be a list of label keys")
    if raw and selector.selects_nothing:
        raise PodSpecError(path, "matchLabelKeys must not be set when labelSelector is not set")
    named = {key for key, _ in selector.match_labels} | {e.key for e in selector.expressions}
    keys: list[str] = []
    for index, key in enumerate(raw):
        if not isinstance(key, str) or qualified_name_errors(key):
            problems = "; ".join(qualified_name_errors(key)) if isinstance(key, str) else "not a string"
            raise PodSpecError((*path, index), f"matchLabelKeys[{index}] must be a label key ({problems})")
        if key in keys:
            raise PodSpecError((*path, index), f"matchLabelKeys names {key!r} twice")
        if key in named:
            raise PodSpecError((*path, index), f"{key!r} is in both matchLabelKeys and labelSelector")
        keys.append(key)
    return tuple(keys)


def _spread(raw: object) -> tuple[SpreadConstraint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PodSpecError(("topologySpreadConstraints",), "topologySpreadConstraints must be a list")
    constraints = []
    for index, item in enumerate(raw):
        at: SpecPath = ("topologySpreadConstraints", index)
        if not isinstance(item, Mapping):
            raise PodSpecError(at, "a topology spread constraint must be a mapping")
        when = item.get("whenUnsatisfiable", DO_NOT_SCHEDULE)
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            message = f"whenUnsatisfiable must be {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}, not {when!r}"
            raise PodSpecError((*at, "whenUnsatisfiable"), message)
        min_domains = item.get("minDomains")
        selector = _selector(item.get("labelSelector"), (*at, "labelSelector"))
        constraints.append(
            SpreadConstraint(
                key=_key(item.get("topologyKey"), (*at, "topologyKey")),
                max_skew=_int(item.get("maxSkew"), (*at, "maxSkew"), "maxSkew", 1),
                selector=selector,
                when_unsatisfiable=str(when),
                min_domains=None if min_domains is None else _int(min_domains, (*at, "minDomains"), "minDomains", 1),
                match_label_keys=_match_label_keys(item.get("matchLabelKeys"), (*at, "matchLabelKeys"), selector),
                node_affinity_policy=_policy(
                    item.get("nodeAffinityPolicy"), (*at, "nodeAffinityPolicy"), "nodeAffinityPolicy"
                ),
                node_taints_policy=_policy(item.get("nodeTaintsPolicy"), (*at, "nodeTaintsPolicy"), "nodeTaintsPolicy"),
            )
        )
    return tuple(constraints)


def _term(raw: object, path: SpecPath, namespace: str, anti: bool, weight: int | None) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise PodSpecError(path, "a pod affinity term must be a mapping with labelSelector and topologyKey")
    names = raw.get("namespaces") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise PodSpecError((*path, "namespaces"), "namespaces must be a list of namespace names")
    raw_selector = raw.get("namespaceSelector")
    namespace_selector = None if raw_selector is None else _selector(raw_selector, (*path, "namespaceSelector"))
    if not names and namespace_selector is None:
        names = [namespace]
    return AffinityTerm(
        key=_key(raw.get("topologyKey"), (*path, "topologyKey")),
        selector=_selector(raw.get("labelSelector"), (*path, "labelSelector")),
        namespaces=NamespaceScope(frozenset(names), namespace_selector),
        anti=anti,
        required=weight is None,
        weight=weight or 0,
    )


def _terms(raw: object, path: SpecPath, namespace: str, anti: bool) -> tuple[AffinityTerm, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise PodSpecError(path, "must be a mapping")
    required: list[AffinityTerm] = []
    hard = raw.get("requiredDuringSchedulingIgnoredDuringExecution")
    if hard is not None:
        at: SpecPath = (*path, "requiredDuringSchedulingIgnoredDuringExecution")
        if not isinstance(hard, list):
            raise PodSpecError(at, "requiredDuringSchedulingIgnoredDuringExecution must be a list")
        required = [_term(term, (*at, i), namespace, anti, None) for i, term in enumerate(hard)]
    preferred: list[AffinityTerm] = []
    soft = raw.get("preferredDuringSchedulingIgnoredDuringExecution")
    if soft is not None:
        at = (*path, "preferredDuringSchedulingIgnoredDuringExecution")
        if not isinstance(soft, list):
            raise PodSpecError(at, "preferredDuringSchedulingIgnoredDuringExecution must be a list")
        for i, item in enumerate(soft):
            if not isinstance(item, Mapping):
                raise PodSpecError((*at, i), "a preferred term must be a mapping with weight and podAffinityTerm")
            weight = _int(item.get("weight"), (*at, i, "weight"), "weight", 1)
            preferred.append(_term(item.get("podAffinityTerm"), (*at, i, "podAffinityTerm"), namespace, anti, weight))
    preferred.sort(key=lambda term: -term.weight)  # stable: equal weights keep their order
    return (*required, *preferred)


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        return ()  # reported by the requests reader
    for c_index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            continue
        raw_ports = container.get("ports") or []
        at: SpecPath = ("containers", c_index, "ports")
        if not isinstance(raw_ports, list):
            raise PodSpecError(at, "ports must be a list")
        for p_index, port in enumerate(raw_ports):
            if not isinstance(port, Mapping):
                raise PodSpecError((*at, p_index), "a container port must be a mapping")
            host_port = port.get("hostPort")
            if host_port is None or host_port == 0:
                continue
            number = _int(host_port, (*at, p_index, "hostPort"), "hostPort", 1)
            protocol = port.get("protocol") or "TCP"
            ip = port.get("hostIP") or "0.0.0.0"
            if not isinstance(protocol, str) or not isinstance(ip, str):
                raise PodSpecError((*at, p_index), "protocol and hostIP must be strings")
            ports.append(HostPort(number, protocol, ip))
    return tuple(sorted(set(ports)))


def pod_topology(spec: Mapping[str, Any], namespace: str) -> PodTopology:
    """The topology terms and host ports of a pod spec in `namespace`. Raises PodSpecError."""
    affinity = spec.get("affinity")
    if affinity is not None and not isinstance(affinity, Mapping):
        raise PodSpecError(("affinity",), "affinity must be a mapping")
    affinity = affinity or {}
    return PodTopology(
        spread=_spread(spec.get("topologySpreadConstraints")),
        affinity=_terms(affinity.get("podAffinity"), ("affinity", "podAffinity"), namespace, anti=False),
        anti_affinity=_terms(affinity.get("podAntiAffinity"), ("affinity", "podAntiAffinity"), namespace, anti=True),
        host_ports=_host_ports(spec),
    )
