"""Karpenter v1's NodePool `RuntimeValidate` (kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool_validation.go`,
with `nodeclaim_validation.go`'s `validateTaints` / `ValidateRequirement` and `labels.go`'s `IsRestrictedLabel`),
with the AWS provider's additions to the well-known labels and restricted domains (aws/karpenter-provider-aws
v1.14.1 `pkg/apis/v1/labels.go`, `init`).

The API server admits a NodePool that fails these checks; Karpenter's NodePool readiness controller then marks it
`ValidationSucceeded=False` and never launches from it. Each problem is a `runtime-validation` violation with
Karpenter's message, at the label, taint or requirement at fault.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeGuard

from karpenter_policy.api.violations import RUNTIME_VALIDATION, Path, Violation
from karpenter_policy.model.labels import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    V1_PLACEMENT_GROUP_LABELS,
    label_value_errors,
    qualified_name_errors,
)
from karpenter_policy.model.labels import CAPACITY_TYPE as CAPACITY_TYPE_LABEL
from karpenter_policy.model.labels import NODEPOOL as NODEPOOL_LABEL

INSTANCE_TENANCY_LABEL: Final = "karpenter.k8s.aws/instance-tenancy"

#: `WellKnownLabels` of core `labels.go`, with the AWS provider's `init` additions.
WELL_KNOWN_LABELS: Final[frozenset[str]] = frozenset({
    NODEPOOL_LABEL, "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os", CAPACITY_TYPE_LABEL,
    "node.kubernetes.io/windows-build",
    CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_INTERRUPTIBLE,
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count",
    "topology.k8s.aws/zone-id", INSTANCE_TENANCY_LABEL, *V1_PLACEMENT_GROUP_LABELS,
})
#: `RestrictedLabelDomains`: core's karpenter.sh and the provider's karpenter.k8s.aws.
RESTRICTED_LABEL_DOMAINS: Final[tuple[str, ...]] = ("karpenter.k8s.aws", "karpenter.sh")
#: `RestrictedLabels`.
RESTRICTED_LABELS: Final[frozenset[str]] = frozenset({"kubernetes.io/hostname"})
#: `WellKnownValuesForRequirements` (AWS adds the tenancies).
WELL_KNOWN_VALUES: Final[Mapping[str, frozenset[str]]] = {
    CAPACITY_TYPE_LABEL: frozenset({"on-demand", "spot", "reserved"}),
    INSTANCE_TENANCY_LABEL: frozenset({"dedicated", "default"}),
}
#: `NormalizedLabels`: the deprecated keys read as their GA keys.
NORMALIZED_LABELS: Final[Mapping[str, str]] = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
#: `SupportedNodeSelectorOps`.
SUPPORTED_OPERATORS: Final[tuple[str, ...]] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
_NUMERIC_OPERATORS: Final = frozenset({"Gt", "Lt", "Gte", "Lte"})
_TAINT_EFFECTS: Final = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute", ""})
_GO_ATOI: Final = re.compile(r"^[+-]?[0-9]+$")
_INT64_MAX: Final = 2**63 - 1


def _go_list(values: Sequence[object]) -> str:
    """A Go `%v` of a slice: `[a b c]`."""
    return "[" + " ".join(str(value) for value in values) + "]"


def restricted_label_error(key: str) -> str | None:
    """`IsRestrictedLabel`: why `key` may not be used in a NodePool, None when it may."""
    if key in WELL_KNOWN_LABELS:
        return None
    domain = key.split("/", 1)[0] if "/" in key else ""
    restricted = any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)
    if restricted or key in RESTRICTED_LABELS:
        return (f"using label {key} is not allowed as it might interfere with the internal provisioning logic; "
                f"specify a well known label: {_go_list(sorted(WELL_KNOWN_LABELS))}, or a custom label that does "
                f"not use a restricted domain: {_go_list(sorted(RESTRICTED_LABEL_DOMAINS))}")
    return None


def _go_atoi(text: str) -> int | None:
    if not _GO_ATOI.match(text):
        return None
    number = int(text)
    return number if -_INT64_MAX - 1 <= number <= _INT64_MAX else None


#: Bound of `_REQUIREMENT_ERRORS` (cleared when full: distinct requirements cannot grow it).
_REQUIREMENT_ERRORS_MAX: Final = 4096
#: `requirement_errors`' answers by what it reads of a requirement (NodePools repeat the same requirements).
_REQUIREMENT_ERRORS: dict[tuple[str, str, tuple[str, ...], int | None, type], tuple[str, ...]] = {}


def requirement_errors(requirement: Mapping[str, Any]) -> list[str]:
    """`ValidateRequirement`: the problems of one requirement (its key normalised first). A function of the
    requirement's key, operator, values (as text) and an integer minValues (a bool is one) alone: remembered by
    them."""
    key = str(requirement.get("key", ""))
    operator = str(requirement.get("operator", ""))
    raw_values = requirement.get("values") or []
    values = tuple(str(value) for value in raw_values) if isinstance(raw_values, list) else ()
    min_values = requirement.get("minValues")
    minimum = min_values if isinstance(min_values, int) else None
    remembered = (key, operator, values, minimum, type(minimum))  # True is 1 to a dict, not to a message
    errors = _REQUIREMENT_ERRORS.get(remembered)
    if errors is None:
        errors = tuple(_requirement_errors(key, operator, list(values), minimum))
        if len(_REQUIREMENT_ERRORS) >= _REQUIREMENT_ERRORS_MAX:
            _REQUIREMENT_ERRORS.clear()
        _REQUIREMENT_ERRORS[remembered] = errors
    return list(errors)


def _requirement_errors(key: str, operator: str, values: list[str], min_values: int | None) -> list[str]:
    key = NORMALIZED_LABELS.get(key, key)
    errors: list[str] = []
    if operator not in SUPPORTED_OPERATORS:
        errors.append(f"key {key} has an unsupported operator {operator} not in {_go_list(SUPPORTED_OPERATORS)}")
    restricted = restricted_label_error(key)
    if restricted is not None:
        errors.append(restricted)
    known = WELL_KNOWN_VALUES.get(key)
    if known is not None and key in WELL_KNOWN_LABELS and operator == "In":
        valid = [value for value in values if value in known]
        invalid = [value for value in values if value not in known]
        if not valid:
            errors.append(f"no valid values found in {_go_list(values)} for {key}, expected one of: "
                          f"{_go_list(sorted(known))}, got: {_go_list(invalid)}")
        elif isinstance(min_values, int) and len(valid) < min_values:
            errors.append(f"not enough valid values found in {_go_list(values)} for {key}, expected at least "
                          f"{min_values} valid values from: {_go_list(sorted(known))}, got: {len(valid)}")
    errors.extend(f"key {key} is not a qualified name, {problem}" for problem in qualified_name_errors(key))
    for value in values:
        errors.extend(f"invalid value {value} for key {key}, {problem}" for problem in label_value_errors(value))
    if operator == "In" and not values:
        errors.append(f"key {key} with operator {operator} must have a value defined")
    if operator == "In" and isinstance(min_values, int) and len(values) < min_values:
        errors.append(f"key {key} with operator {operator} must have at least minimum number of values defined in "
                      "'values' field")
    if operator in _NUMERIC_OPERATORS:
        number = _go_atoi(values[0]) if len(values) == 1 else None
        if number is None or number < 0:
            errors.append(f"key {key} with operator {operator} must have a single positive integer value")
    return errors


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """isinstance(value, Mapping), a dict (what objects are made of) and None (an absent field) asked without the
    ABC's check."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def runtime_violations(nodepool: Mapping[str, Any]) -> list[Violation]:
    """`NodePool.RuntimeValidate` of a (defaulted) NodePool: labels, taints and startup taints, requirements."""
    spec = nodepool.get("spec")
    template = spec.get("template") if _is_mapping(spec) else None
    if not _is_mapping(template):
        return []
    base: Path = ("spec", "template")
    found: list[Violation] = []
    metadata = template.get("metadata")
    labels = metadata.get("labels") if _is_mapping(metadata) else None
    if _is_mapping(labels):
        found.extend(_label_violations(labels, (*base, "metadata", "labels")))
    template_spec = template.get("spec")
    if _is_mapping(template_spec):
        seen: set[tuple[str, str]] = set()
        for field in ("taints", "startupTaints"):
            taints = template_spec.get(field)
            if isinstance(taints, list):
                found.extend(_taint_violations(taints, field, seen, (*base, "spec", field)))
        requirements = template_spec.get("requirements")
        if isinstance(requirements, list):
            found.extend(_requirement_violations(requirements, (*base, "spec", "requirements")))
    return found


def _label_violations(labels: Mapping[str, Any], path: Path) -> list[Violation]:
    found: list[Violation] = []
    for raw_key, value in labels.items():
        key = str(raw_key)
        at = (*path, key)
        if key == NODEPOOL_LABEL:
            found.append(Violation(RUNTIME_VALIDATION, at, f'invalid key name "{key}" in labels, restricted',
                                   at_key=True))
        found.extend(Violation(RUNTIME_VALIDATION, at, f'invalid key name "{key}" in labels, "{problem}"',
                               at_key=True) for problem in qualified_name_errors(key))
        found.extend(Violation(RUNTIME_VALIDATION, at, f"invalid value: {value} for label[{key}], {problem}")
                     for problem in label_value_errors(str(value)))
        restricted = restricted_label_error(key)
        if restricted is not None:
            found.append(Violation(RUNTIME_VALIDATION, at, f'invalid key name "{key}" in labels, {restricted}',
                                   at_key=True))
    return found


def _taint_violations(taints: list[Any], field: str, seen: set[tuple[str, str]], path: Path) -> list[Violation]:
    found: list[Violation] = []
    for index, taint in enumerate(taints):
        if not _is_mapping(taint):
            continue
        key, value, effect = (str(taint.get(name, "")) for name in ("key", "value", "effect"))
        problems: list[str] = []
        if not key:
            problems.append(f"invalid value: an empty taint key in {field}")
        problems.extend(f"invalid value: {problem} in {field}" for problem in qualified_name_errors(key))
        if value:
            problems.extend(f"invalid value: {problem} in {field}" for problem in qualified_name_errors(value))
        if effect not in _TAINT_EFFECTS:
            problems.append(f'invalid value: "{effect}" in {field}')
        if (key, effect) in seen:
            problems.append(f"duplicate taint Key/Effect pair {key}={effect}")
        seen.add((key, effect))
        found.extend(Violation(RUNTIME_VALIDATION, (*path, index), problem) for problem in problems)
    return found


def _requirement_violations(requirements: list[Any], path: Path) -> list[Violation]:
    found: list[Violation] = []
    for index, requirement in enumerate(requirements):
        if not _is_mapping(requirement):
            continue
        at = (*path, index)
        found.extend(Violation(RUNTIME_VALIDATION, at, f"invalid value: {error} in requirements, restricted")
                     for error in requirement_errors(requirement))
        if requirement.get("key") == NODEPOOL_LABEL:
            found.append(Violation(RUNTIME_VALIDATION, at,
                                   f'invalid key: "{NODEPOOL_LABEL}" in requirements, restricted'))
    return found
