"""What the Kubernetes API server refuses in a pod spec's resources, in its words. Pure: no I/O.

Kubernetes' `ValidateResourceRequirements` (pkg/apis/core/validation/validation.go), run on every container and
init container (sidecars too) after the API server's defaulting (a limit stands in for a missing request), and on
`spec.overhead` as limits (`validateOverhead`):

* a resource name that is not a qualified name, a name without a domain that is not `cpu`, `memory`,
  `ephemeral-storage` or `hugepages-<size>` ("must be a standard resource type or fully qualified", "must be a
  standard resource for containers"), or a domain name that is not an extended resource ("doesn't follow extended
  resource name standard");
* a non-overcommitable resource — an extended resource (`nvidia.com/gpu`, `vpc.amazonaws.com/efa`) or huge pages
  (`helper.IsOvercommitAllowed`) — requested without a limit ("Limit must be set for non overcommitable
  resources") or with a request other than its limit ("must be equal to … limit of …");
* any other request greater than its limit ("must be less than or equal to … limit of …");
* huge pages that are not a whole number of pages ("… is not positive integer multiple of hugepages-…"), or
  without cpu or memory in the same requirements ("HugePages require cpu or memory");
* pod-level `spec.resources` (`validatePodResources`, as in Kubernetes v1.34, where `PodLevelResources` is on by
  default and takes huge pages): the same rules, with a name other than `cpu`, `memory` or `hugepages-<size>`
  refused ("Unsupported value: … supported values: "cpu", "hugepages-", "memory""); a pod-level request below the
  containers' aggregate requests (`AggregateContainerRequests`: the sidecar formula of `pods`) ("must be greater than
  or equal to aggregate container requests of …"); a container's limit above the pod-level limit ("must be less
  than or equal to pod limits of …"). Only resources with a pod-level request are held to the aggregate: one the
  pod leaves to the API server's defaulting (`defaultPodRequests`) gets the aggregate itself, but huge pages, whose
  pod-level request defaults to their pod-level limit.

A negative quantity and an extended resource that is not a whole number are refused earlier, as the spec is read
(`pods._parse_resource_list`, with the same words). Only manifests are held to these rules (`check --workloads`,
`diff --workloads` and `--equivalent`, `migrate --workloads`, `test`, `pin`, the webhook's pod path): a pod the API
server holds — the controller's, a `plan` snapshot's — was admitted, and is read as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from karpenter_policy.model.labels import qualified_name_errors
from karpenter_policy.model.pods import (
    HUGEPAGES_PREFIX,
    PodSpecError,
    SpecPath,
    aggregate_container_requests,
    is_extended_resource,
    is_hugepages,
    is_native_resource,
    is_pod_level_resource,
)
from karpenter_policy.model.quantity import QuantityError, canonical, is_binary, read_quantity
from karpenter_policy.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, abbreviated

#: Names without a domain the API server knows (`helper.IsStandardResourceName`), not all of them a container's.
_STANDARD_RESOURCES = frozenset({
    CPU, MEMORY, EPHEMERAL_STORAGE, "pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
    "configmaps", "persistentvolumeclaims", "storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "services.nodeports",
    "services.loadbalancers",
})
#: The container resources without a domain (`helper.IsStandardContainerResourceName`), huge pages aside.
_CONTAINER_RESOURCES = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE})
#: `resourcehelper.SupportedPodLevelResources()` as the API server lists them (sorted; huge pages by their prefix).
_POD_LEVEL_SUPPORTED = ", ".join(f'"{name}"' for name in sorted((CPU, MEMORY, HUGEPAGES_PREFIX)))

#: How what is said of a refusal begins (the API server's own words follow).
REFUSES = "the API server refuses this pod: "
LIMIT_REQUIRED = "Limit must be set for non overcommitable resources"
HUGEPAGES_ALONE = "HugePages require cpu or memory"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One thing the API server refuses: `path` leads to the field from the pod spec, `message` says it in the
    API server's words (its error type first: `Required value`, `Invalid value`, `Forbidden`)."""

    path: SpecPath
    message: str

    def field(self, root: str = "spec") -> str:
        """The field as the API server names it: `spec.containers[0].resources.requests[nvidia.com/gpu]`."""
        text = root
        for part in self.path:
            if isinstance(part, int) or text.endswith(("requests", "limits", "overhead")):
                text += f"[{part}]"
            else:
                text += f".{part}"
        return text

    def said(self) -> str:
        """What is said of it where the field is shown (a finding at its line): `REFUSES` and the message."""
        return f"{REFUSES}{self.message}"


def overcommit_allowed(name: str) -> bool:
    """`helper.IsOvercommitAllowed`: a native resource other than huge pages may be requested below its limit."""
    return is_native_resource(name) and not is_hugepages(name)


def name_problem(name: str) -> str | None:
    """Why the API server refuses `name` as a container's resource (`validateContainerResourceName`), or None."""
    problems = qualified_name_errors(name)
    if problems:
        return problems[0]
    if "/" not in name:
        if name in _CONTAINER_RESOURCES or is_hugepages(name):
            return None
        if name not in _STANDARD_RESOURCES:
            return "must be a standard resource type or fully qualified"
        return "must be a standard resource for containers"
    if not is_native_resource(name) and (not is_extended_resource(name) or qualified_name_errors(f"requests.{name}")):
        return "doesn't follow extended resource name standard"
    return None


def _container_name_refusal(name: str) -> str | None:
    """`validateContainerResourceName`'s words for `name`, or None."""
    problem = name_problem(name)
    return None if problem is None else f'Invalid value: "{name}": {problem}'


def _pod_level_name_refusal(name: str) -> str | None:
    """`validatePodResourceName`'s words for `name` in pod-level `spec.resources`, or None."""
    problems = qualified_name_errors(name)
    if problems:
        return f'Invalid value: "{name}": {problems[0]}'
    if "/" not in name and name not in _STANDARD_RESOURCES and not is_hugepages(name):
        return f'Invalid value: "{name}": must be a standard resource type or fully qualified'
    if not is_pod_level_resource(name):
        return f'Unsupported value: "{name}": supported values: {_POD_LEVEL_SUPPORTED}'
    return None


def _hugepages_multiple(name: str, value: Decimal) -> bool:
    """`helper.IsHugePageResourceValueDivisible`: a whole number of the pages its name sizes."""
    try:
        size = read_quantity(name[len(HUGEPAGES_PREFIX):]).value
    except QuantityError:
        return False
    return size > 0 and value % size == 0


def _not_whole_pages(name: str, written: object) -> str:
    return f'Invalid value: "{written}": {written} is not positive integer multiple of {name}'


def _entries(raw: object) -> list[tuple[str, object, Decimal]]:
    """A resource list's (name, as written — abbreviated as a message shows it —, value), by name; entries that
    cannot be read left out (the reading of the spec refuses them first)."""
    if not isinstance(raw, Mapping):
        return []
    entries = []
    for name, written in raw.items():
        try:
            entries.append((str(name), abbreviated(str(written)), read_quantity(written).value))
        except QuantityError:
            continue
    return sorted(entries, key=lambda entry: entry[0])


def requirements_refusals(
    resources: object,
    path: SpecPath,
    *,
    limits_only: bool = False,
    name_refusal: Callable[[str], str | None] = _container_name_refusal,
) -> list[Refusal]:
    """`validateResourceRequirements` of one `resources` mapping at `path` (a container's `resources`; with
    `limits_only`, `spec.overhead` read as limits; `name_refusal` the names' rule: a container's, or the pod
    level's)."""
    if limits_only:
        limits, requests = _entries(resources), []
        limits_path, requests_path = path, path
    else:
        if not isinstance(resources, Mapping):
            return []
        limits, requests = _entries(resources.get("limits")), _entries(resources.get("requests"))
        limits_path, requests_path = (*path, "limits"), (*path, "requests")
    refusals: list[Refusal] = []
    for name, written, value in limits:
        at = (*limits_path, name)
        if (problem := name_refusal(name)) is not None:
            refusals.append(Refusal(at, problem))
        elif is_hugepages(name) and not _hugepages_multiple(name, value):
            refusals.append(Refusal(at, _not_whole_pages(name, written)))
    limit_of = {name: (written, value) for name, written, value in limits}
    for name, written, value in requests:
        at = (*requests_path, name)
        if (problem := name_refusal(name)) is not None:
            refusals.append(Refusal(at, problem))
            continue
        limit = limit_of.get(name)
        if limit is None:
            if not overcommit_allowed(name):
                refusals.append(Refusal(at, f"Required value: {LIMIT_REQUIRED} ({name} has no limit)"))
        elif value != limit[1] and not overcommit_allowed(name):
            refusals.append(Refusal(at, f'Invalid value: "{written}": must be equal to {name} limit of {limit[0]}'))
        elif value > limit[1]:
            refusals.append(
                Refusal(at, f'Invalid value: "{written}": must be less than or equal to {name} limit of {limit[0]}')
            )
        if is_hugepages(name) and not _hugepages_multiple(name, value):
            refusals.append(Refusal(at, _not_whole_pages(name, written)))
    named = [name for name, _, _ in (*limits, *requests)]
    if any(is_hugepages(n) for n in named) and not any(n in (CPU, MEMORY) for n in named):
        refusals.append(Refusal(path, f"Forbidden: {HUGEPAGES_ALONE}"))
    return refusals


def _pod_level_refusals(spec: Mapping[str, Any]) -> list[Refusal]:
    """Pod-level `spec.resources` (`validatePodResources`): its requirements under the pod level's names, then
    `validatePodResourceConsistency` (module doc)."""
    resources = spec.get("resources")
    if not isinstance(resources, Mapping):
        return []
    refusals = requirements_refusals(resources, ("resources",), name_refusal=_pod_level_name_refusal)
    try:
        aggregate = aggregate_container_requests(spec)
    except PodSpecError:
        return refusals  # the reading of the spec refuses it first
    requests, limits = _entries(resources.get("requests")), _entries(resources.get("limits"))
    named = {name for name, _, _ in requests}
    # the API server's defaulting: a pod-level huge-pages limit is its request (a cpu or memory limit becomes the
    # request only when no container requests it, and then the aggregate is nothing)
    defaulted = [(n, w, v) for n, w, v in limits if is_hugepages(n) and n not in named]
    for name, written, value in sorted([*requests, *defaulted], key=lambda entry: entry[0]):
        total = aggregate.get(name)
        if total is not None and total > value:
            shown = canonical(total, is_binary(_first_written(spec, name)))
            refusals.append(Refusal(
                ("resources", "requests" if name in named else "limits", name),  # a defaulted one: at its limit
                f'Invalid value: "{written}": must be greater than or equal to aggregate container requests of {shown}',
            ))
    pod_limits = {name: (written, value) for name, written, value in limits}
    containers = spec.get("containers")
    for index, container in enumerate(containers if isinstance(containers, list) else []):
        own = container.get("resources") if isinstance(container, Mapping) else None
        for name, written, value in _entries(own.get("limits") if isinstance(own, Mapping) else None):
            limit = pod_limits.get(name)
            if limit is not None and value > limit[1]:
                refusals.append(Refusal(
                    ("containers", index, "resources", "limits", name),
                    f'Invalid value: "{written}": must be less than or equal to pod limits of {limit[0]}',
                ))
    return refusals


def _first_written(spec: Mapping[str, Any], name: str) -> object:
    """`name` as the first container (app containers, then init containers) that asks for it writes it: the
    aggregate keeps that quantity's format (`Quantity.Add` on a copy of the first)."""
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            own = container.get("resources") if isinstance(container, Mapping) else None
            for part in ("requests", "limits"):
                listed = own.get(part) if isinstance(own, Mapping) else None
                for written_name, value in listed.items() if isinstance(listed, Mapping) else ():
                    if str(written_name) == name:
                        return value
    return None


def resource_refusals(spec: Mapping[str, Any]) -> list[Refusal]:
    """Everything the API server refuses in a pod spec's resources (see the module docstring): the containers'
    in order, then the init containers', then the overhead's and the pod-level resources'; within one container
    its limits by name, then its requests by name."""
    refusals: list[Refusal] = []
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            if isinstance(container, Mapping):
                refusals += requirements_refusals(container.get("resources"), (key, index, "resources"))
    if "overhead" in spec:
        refusals += requirements_refusals(spec.get("overhead"), ("overhead",), limits_only=True)
    refusals += _pod_level_refusals(spec)
    return refusals
