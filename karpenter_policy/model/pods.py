"""What a pod (template) asks of a node, as Karpenter v0.31 and Kubernetes read it. Pure: no I/O.

* **Requirements** (`scheduling.NewPodRequirements`): the `nodeSelector` (each entry `key In [value]`), the
  heaviest preferred node-affinity term treated as required, and the first required `nodeSelectorTerm`
  (`matchFields` are ignored, as Karpenter does).
* **Relaxation** (`Preferences.Relax`) is the scheduler's: `scheduling.pods.PodShape.attempts` drops one soft
  constraint at a time, from these terms and the pod's topology terms.
* **Tolerations** as written.
* **Requests** as Kubernetes computes a pod's effective request (`resourcehelper.PodRequests`): per container,
  `requests`, with `limits` standing in for a resource that has no request (the API server's defaulting);
  the app containers summed, plus the restartable init containers (sidecars, `restartPolicy: Always`), which
  run next to them; each ordinary init container runs alone (with the sidecars started before it), so the pod
  needs the larger of the two; pod-level `spec.resources` requests (Kubernetes 1.32+) replace that sum for CPU,
  memory and huge pages, after the API server's defaulting of them from pod-level limits; plus `spec.overhead`
  (RuntimeClass).

A malformed field is a :class:`PodSpecError` whose `path` leads to it inside the pod spec. A quantity beyond what
Kubernetes holds as an integer (±(2^63-1)) is read capped at that bound and noted in
:attr:`PodScheduling.out_of_range`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import SUPPORTED_OPERATORS, Operator, Requirement, Requirements
from karpenter_policy.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    QuantityError,
    ResourceList,
    add,
    format_quantity,
    maximum,
    out_of_range_message,
    read_quantity,
)
from karpenter_policy.model.taints import PREFER_NO_SCHEDULE, TAINT_EFFECTS, Toleration

SpecPath = tuple[str | int, ...]

#: The extended resources an EC2 node offers (Karpenter v0.31, AWS), next to cpu, memory and pods.
ACCELERATOR_RESOURCES: tuple[str, ...] = (wk.NVIDIA_GPU, wk.AMD_GPU, wk.AWS_NEURON, wk.HABANA_GAUDI)

#: The toleration Karpenter adds as its last relaxation (`toleratePreferNoScheduleTaints`).
TOLERATE_PREFER_NO_SCHEDULE = Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)

_TOLERATION_OPERATORS = ("", "Equal", "Exists")


class PodSpecError(ValueError):
    """A field of a pod spec that cannot be read; `path` leads to it from the pod spec."""

    def __init__(self, path: SpecPath, message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A preferred node-affinity term: its weight (1-100) and its requirements."""

    weight: int
    requirements: Requirements


@dataclass(frozen=True, slots=True)
class PodScheduling:
    """A pod template's scheduling constraints and resource requests (hashable: identical pods group)."""

    node_selector: Requirements = Requirements()
    required_terms: tuple[Requirements, ...] = ()
    preferred_terms: tuple[PreferredTerm, ...] = ()  # heaviest first; equal weights keep their order
    tolerations: tuple[Toleration, ...] = ()
    requests: tuple[tuple[str, Decimal], ...] = ()  # sorted by resource name, zero requests left out
    #: The quantities read capped (beyond ±(2^63-1)): where in the pod spec, and what to say about each.
    out_of_range: tuple[tuple[SpecPath, str], ...] = field(default=(), compare=False)

    @classmethod
    def from_pod_spec(cls, spec: Mapping[str, Any]) -> PodScheduling:
        """Read a pod spec (partial specs welcome: a Spark pod template has no image, no resources)."""
        if not isinstance(spec, Mapping):
            raise PodSpecError((), "the pod spec is not a mapping")
        node_selector = _node_selector(spec.get("nodeSelector"))
        required, preferred = _node_affinity(spec.get("affinity"))
        capped: list[tuple[SpecPath, str]] = []
        requests = pod_requests(spec, capped)
        return cls(
            node_selector=node_selector,
            required_terms=required,
            preferred_terms=preferred,
            tolerations=_tolerations(spec.get("tolerations")),
            requests=tuple(sorted((k, v) for k, v in requests.items() if v != 0)),
            out_of_range=tuple(capped),
        )

    @property
    def resource_requests(self) -> ResourceList:
        """The pod's effective requests (nonzero ones), as a resource list."""
        return dict(self.requests)

    @property
    def requirements(self) -> Requirements:
        """The requirements of the pod as written: its nodeSelector, heaviest preferred term and first required
        term (the scheduler's first attempt; `scheduling.pods` relaxes them)."""
        requirements = self.node_selector
        if self.preferred_terms:
            requirements = requirements.intersection(self.preferred_terms[0].requirements)
        if self.required_terms:
            requirements = requirements.intersection(self.required_terms[0])
        return requirements


def same_toleration(a: Toleration, b: Toleration) -> bool:
    """Kubernetes' `Toleration.MatchToleration`: same key, operator, value and effect."""
    return (a.key, a.operator or "Equal", a.value, a.effect) == (b.key, b.operator or "Equal", b.value, b.effect)


# --- requirements -------------------------------------------------------------------------------------------


def _label_value(value: object, path: SpecPath) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise PodSpecError(path, f"a label value must be a string, not {type(value).__name__}")


def _node_selector(raw: object) -> Requirements:
    if raw is None:
        return Requirements()
    if not isinstance(raw, Mapping):
        raise PodSpecError(("nodeSelector",), "nodeSelector must be a mapping of label keys to values")
    built = []
    for key, value in raw.items():
        built.append(Requirement.new(str(key), Operator.IN, [_label_value(value, ("nodeSelector", str(key)))]))
    return Requirements(built)


def node_selector_term(raw: object, path: SpecPath) -> Requirements:
    """The requirements of one node-selector term (`matchExpressions`; `matchFields` are ignored)."""
    if raw is None:
        return Requirements()
    if not isinstance(raw, Mapping):
        raise PodSpecError(path, "a node selector term must be a mapping")
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise PodSpecError((*path, "matchExpressions"), "matchExpressions must be a list")
    built = []
    for index, expression in enumerate(expressions):
        at = (*path, "matchExpressions", index)
        if not isinstance(expression, Mapping):
            raise PodSpecError(at, "a match expression must be a mapping with key, operator and values")
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if not isinstance(key, str) or not key:
            raise PodSpecError((*at, "key"), "a match expression needs a key")
        if not isinstance(operator, str) or operator not in SUPPORTED_OPERATORS:
            raise PodSpecError(
                (*at, "operator"), f"operator {operator!r} is not one of {', '.join(sorted(SUPPORTED_OPERATORS))}"
            )
        if not isinstance(values, list):
            raise PodSpecError((*at, "values"), "values must be a list")
        strings = [_label_value(v, (*at, "values", i)) for i, v in enumerate(values)]
        if operator == Operator.IN and not strings:
            raise PodSpecError((*at, "values"), f"operator In on {key} needs at least one value")
        if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and strings:
            raise PodSpecError((*at, "values"), f"operator {operator} on {key} takes no values")
        try:
            built.append(Requirement.new(key, str(operator), strings))
        except ValueError as error:
            raise PodSpecError((*at, "values"), str(error)) from None
    return Requirements(built)


def _node_affinity(raw: object) -> tuple[tuple[Requirements, ...], tuple[PreferredTerm, ...]]:
    if raw is None:
        return (), ()
    if not isinstance(raw, Mapping):
        raise PodSpecError(("affinity",), "affinity must be a mapping")
    affinity = raw.get("nodeAffinity")
    if affinity is None:
        return (), ()
    base: SpecPath = ("affinity", "nodeAffinity")
    if not isinstance(affinity, Mapping):
        raise PodSpecError(base, "nodeAffinity must be a mapping")
    required: list[Requirements] = []
    hard = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if hard is not None:
        at: SpecPath = (*base, "requiredDuringSchedulingIgnoredDuringExecution")
        if not isinstance(hard, Mapping):
            raise PodSpecError(at, "requiredDuringSchedulingIgnoredDuringExecution must be a mapping")
        terms = hard.get("nodeSelectorTerms") or []
        if not isinstance(terms, list):
            raise PodSpecError((*at, "nodeSelectorTerms"), "nodeSelectorTerms must be a list")
        required = [node_selector_term(t, (*at, "nodeSelectorTerms", i)) for i, t in enumerate(terms)]
    preferred: list[PreferredTerm] = []
    soft = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if soft is not None:
        at = (*base, "preferredDuringSchedulingIgnoredDuringExecution")
        if not isinstance(soft, list):
            raise PodSpecError(at, "preferredDuringSchedulingIgnoredDuringExecution must be a list")
        for index, item in enumerate(soft):
            if not isinstance(item, Mapping):
                raise PodSpecError((*at, index), "a preferred term must be a mapping with weight and preference")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise PodSpecError((*at, index, "weight"), "weight must be an integer (1-100)")
            term = node_selector_term(item.get("preference"), (*at, index, "preference"))
            preferred.append(PreferredTerm(weight, term))
    preferred.sort(key=lambda term: -term.weight)  # stable: equal weights keep their order
    return tuple(required), tuple(preferred)


def _tolerations(raw: object) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PodSpecError(("tolerations",), "tolerations must be a list")
    tolerations = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise PodSpecError(("tolerations", index), "a toleration must be a mapping")
        operator = item.get("operator") or ""
        if operator not in _TOLERATION_OPERATORS:
            message = f"toleration operator {operator!r} is not Equal or Exists"
            raise PodSpecError(("tolerations", index, "operator"), message)
        effect = item.get("effect") or ""
        if effect and effect not in TAINT_EFFECTS:
            message = f"toleration effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}"
            raise PodSpecError(("tolerations", index, "effect"), message)
        toleration = Toleration.from_api(
            {k: _label_value(v, ("tolerations", index, k)) if k in ("key", "value") else v for k, v in item.items()}
        )
        if toleration.operator == "Exists" and toleration.value:
            raise PodSpecError(("tolerations", index, "value"), "a toleration with operator Exists takes no value")
        tolerations.append(toleration)
    return tuple(tolerations)


# --- resources ----------------------------------------------------------------------------------------------


def _parse_resource_list(raw: object, path: SpecPath, capped: list[tuple[SpecPath, str]] | None) -> ResourceList:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PodSpecError(path, "expected a mapping of resource names to quantities")
    parsed: ResourceList = {}
    for name, value in raw.items():
        at = (*path, str(name))
        try:
            quantity = read_quantity(value)
        except QuantityError as error:
            raise PodSpecError(at, f"{name}: {error}") from None
        if quantity.value < 0:
            # the API server's ValidateNonnegativeQuantity, in its words
            raise PodSpecError(at, f'{name}: Invalid value: "{value}": must be greater than or equal to 0')
        if is_extended_resource(str(name)) and quantity.value % 1:
            # the API server's ValidateResourceQuantityValue: an extended resource is counted in whole devices
            raise PodSpecError(
                at, f'{name}: Invalid value: "{value}": must be an integer (an extended resource is a count of devices)'
            )
        if quantity.out_of_range and capped is not None:
            capped.append((at, out_of_range_message(str(name), value)))
        parsed[str(name)] = quantity.value
    return parsed


#: What a huge-pages resource's name begins with (`hugepages-2Mi`: pages of 2Mi).
HUGEPAGES_PREFIX = "hugepages-"


def is_hugepages(name: str) -> bool:
    """Kubernetes' `IsHugePageResourceName`."""
    return name.startswith(HUGEPAGES_PREFIX)


def is_native_resource(name: str) -> bool:
    """Kubernetes' `IsNativeResource`: a name without a domain (`cpu`), or with a `kubernetes.io` one."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """Kubernetes' `IsExtendedResourceName`: a name with a domain outside `kubernetes.io` (`nvidia.com/gpu`,
    `vpc.amazonaws.com/efa`), not a quota's `requests.` name (whether it is a qualified name:
    `podadmission.name_problem`)."""
    return not is_native_resource(name) and not name.startswith("requests.")


def container_requests(
    container: Mapping[str, Any], path: SpecPath, capped: list[tuple[SpecPath, str]] | None = None
) -> ResourceList:
    """One container's requests, with its limits standing in for resources it does not request; quantities read
    capped are noted in `capped`."""
    resources = container.get("resources")
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise PodSpecError((*path, "resources"), "resources must be a mapping")
    requests = _parse_resource_list(resources.get("requests"), (*path, "resources", "requests"), capped)
    limits = _parse_resource_list(resources.get("limits"), (*path, "resources", "limits"), capped)
    return {**limits, **requests}


def _containers(spec: Mapping[str, Any], key: str) -> list[tuple[Mapping[str, Any], SpecPath]]:
    raw = spec.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PodSpecError((key,), f"{key} must be a list")
    containers: list[tuple[Mapping[str, Any], SpecPath]] = []
    for index, container in enumerate(raw):
        if not isinstance(container, Mapping):
            raise PodSpecError((key, index), "a container must be a mapping")
        containers.append((container, (key, index)))
    return containers


def pod_requests(spec: Mapping[str, Any], capped: list[tuple[SpecPath, str]] | None = None) -> ResourceList:
    """The pod's effective requests, as Kubernetes computes them (see the module docstring); quantities read
    capped are noted in `capped`."""
    total = {**aggregate_container_requests(spec, capped), **_pod_level_requests(spec, capped)}
    return add(total, _parse_resource_list(spec.get("overhead"), ("overhead",), capped))


def aggregate_container_requests(
    spec: Mapping[str, Any], capped: list[tuple[SpecPath, str]] | None = None
) -> ResourceList:
    """The containers' requests as component-helpers' `AggregateContainerRequests` sums them (the module
    docstring's sidecar formula; neither the overhead nor pod-level `spec.resources`)."""
    apps: ResourceList = add(*(container_requests(c, p, capped) for c, p in _containers(spec, "containers")))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container, path in _containers(spec, "initContainers"):
        requests = container_requests(container, path, capped)
        if container.get("restartPolicy") == "Always":  # a sidecar: keeps running next to the app containers
            sidecars = add(sidecars, requests)
            init_peak = maximum(init_peak, sidecars)
        else:
            init_peak = maximum(init_peak, add(requests, sidecars))
    return maximum(add(apps, sidecars), init_peak)


def is_pod_level_resource(name: str) -> bool:
    """The resources `spec.resources` may set (component-helpers' `IsSupportedPodLevelResource`)."""
    return name in (CPU, MEMORY) or is_hugepages(name)


def _pod_level_requests(spec: Mapping[str, Any], capped: list[tuple[SpecPath, str]] | None) -> ResourceList:
    """Pod-level `spec.resources` (Kubernetes 1.32+, `PodLevelResources`): its requests replace the containers'
    sum for CPU, memory and huge pages (`PodRequests`' `applyPodLevelResources`). The API server's defaulting
    (`defaultPodRequests`) is applied first: a pod-level limit stands in for a missing pod-level request when no
    container requests that resource — when one does, the default is the containers' own sum, which changes
    nothing. A cluster that predates the field never sends it."""
    raw = spec.get("resources")
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PodSpecError(("resources",), "resources must be a mapping")
    requests = _parse_resource_list(raw.get("requests"), ("resources", "requests"), capped)
    limits = _parse_resource_list(raw.get("limits"), ("resources", "limits"), capped)
    if limits:
        containers = [c for c, _ in _containers(spec, "containers") + _containers(spec, "initContainers")]
        requested = {name for c in containers for name in _requested_names(c)}
        for name, limit in limits.items():
            if name not in requests and not (name in (CPU, MEMORY) and name in requested):
                requests[name] = limit
    return {name: value for name, value in requests.items() if is_pod_level_resource(name)}


def _requested_names(container: Mapping[str, Any]) -> set[str]:
    """The resources a container requests once defaulted (its limits stand in for missing requests)."""
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return set()
    names: set[str] = set()
    for key in ("requests", "limits"):
        if isinstance(entries := resources.get(key), Mapping):
            names.update(str(name) for name in entries)
    return names


def pod_limits(spec: Mapping[str, Any]) -> ResourceList:
    """The pod's limits as Karpenter v0.31 sums them (`resources.Ceiling(pod).Limits`): the app containers' limits
    added up, then the larger of that and each init container's; no overhead."""
    apps: ResourceList = {}
    for container, path in _containers(spec, "containers"):
        apps = add(apps, _limits(container, path))
    for container, path in _containers(spec, "initContainers"):
        apps = maximum(apps, _limits(container, path))
    return apps


def _limits(container: Mapping[str, Any], path: SpecPath) -> ResourceList:
    resources = container.get("resources")
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise PodSpecError((*path, "resources"), "resources must be a mapping")
    return _parse_resource_list(resources.get("limits"), (*path, "resources", "limits"), None)


def describe_requests(requests: Mapping[str, Decimal], names: Iterable[str] | None = None) -> str:
    """`96 vCPU, 8Gi memory and 2 GPUs` — the requests (or those named) in words."""
    order = [CPU, MEMORY, *ACCELERATOR_RESOURCES]
    wanted = list(names) if names is not None else [n for n in order if requests.get(n)]
    wanted += sorted(n for n in requests if n not in order and names is None and requests[n] and n != "pods")
    parts = [describe_quantity(name, requests.get(name, Decimal(0))) for name in wanted]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


_BINARY_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_bytes(value: Decimal) -> str:
    """`8Gi`, `1536Mi`, `1.5Gi` when exact to a tenth, else the largest unit with a fraction."""
    for suffix, size in _BINARY_UNITS:
        if value >= size and value % size == 0:
            return f"{int(value // size)}{suffix}"
    for suffix, size in _BINARY_UNITS:
        if value >= size:
            scaled = value / size
            return f"{format_quantity(scaled.quantize(Decimal('0.01')).normalize())}{suffix}"
    return format_quantity(value)


def describe_quantity(name: str, value: Decimal) -> str:
    """One request in words: `1.5 vCPU`, `8Gi memory`, `2 GPUs`, `1 Neuron device`, `3 pods`."""
    number = format(value.normalize(), "f") if value != value.to_integral_value() else str(int(value))
    plural = "" if value == 1 else "s"
    if name == CPU:
        return f"{number} vCPU"
    if name == MEMORY:
        return f"{format_bytes(value)} memory"
    if name == wk.NVIDIA_GPU:
        return f"{number} GPU{plural}"
    if name == wk.AMD_GPU:
        return f"{number} AMD GPU{plural}"
    if name == wk.AWS_NEURON:
        return f"{number} Neuron device{plural}"
    if name == wk.HABANA_GAUDI:
        return f"{number} Gaudi accelerator{plural}"
    if name == "pods":
        return f"room for {number} pod{plural}"
    if name == EPHEMERAL_STORAGE:
        return f"{format_bytes(value)} ephemeral storage"
    return f"{format_quantity(value)} {name}"
