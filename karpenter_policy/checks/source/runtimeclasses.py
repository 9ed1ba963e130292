"""RuntimeClasses among the workloads (`check --workloads`), applied to the pods that name them as Kubernetes'
RuntimeClass admission plugin does before any scheduler sees the pod: `overhead.podFixed` becomes the pod's
`spec.overhead` (so it adds to the pod's requests), `scheduling.nodeSelector` is merged into its nodeSelector and
`scheduling.tolerations` into its tolerations.

A pod whose `runtimeClassName` names no RuntimeClass among the files read is an `unresolved-reference` warning (the
class may live in the cluster; its overhead is then not counted). A pod the plugin would reject — its own
`overhead` differs from the class's, or its nodeSelector sets a key of the class's to another value — is an
`invalid-workload` error, as is a RuntimeClass whose overhead, nodeSelector or tolerations cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.violations import (
    ERROR,
    INVALID_WORKLOAD,
    QUANTITY_OUT_OF_RANGE,
    UNRESOLVED_REFERENCE,
    WARNING,
)
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model.pods import PodScheduling, PodSpecError
from karpenter_policy.model.resources import parse_quantity

KIND = "RuntimeClass"
API_VERSIONS = frozenset({"node.k8s.io/v1", "node.k8s.io/v1beta1"})

#: Where a RuntimeClass's fields go in a pod spec, for reading them as the pod's: pod spec field → class field.
_AS_POD = {"overhead": ("overhead", "podFixed"), "nodeSelector": ("scheduling", "nodeSelector"),
           "tolerations": ("scheduling", "tolerations")}  # fmt: skip


@dataclass(frozen=True, slots=True)
class RuntimeClass:
    """A RuntimeClass: what it adds to a pod (`pod_fixed`, the overhead; `node_selector`; `tolerations`), and the
    `quantity-out-of-range` warnings of its overhead (read capped, as a pod's own requests are)."""

    name: str
    pod_fixed: Mapping[str, Any] | None
    node_selector: Mapping[str, Any]
    tolerations: tuple[Any, ...]
    warnings: tuple[Finding, ...] = ()


def runtime_class_of(doc: Document) -> RuntimeClass | Finding | None:
    """The RuntimeClass a document is (None: it is not one), or the `invalid-workload` finding that says why it
    cannot be read."""
    data = doc.data
    if not isinstance(data, Mapping) or data.get("kind") != KIND:
        return None
    if not isinstance(data.get("apiVersion"), str) or data["apiVersion"] not in API_VERSIONS:
        return None
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    ref = f"{KIND}/{name}"
    if not isinstance(name, str) or not name:
        line, column = doc.position(("metadata",))
        return Finding(INVALID_WORKLOAD, ERROR, "a RuntimeClass needs metadata.name", doc.file, line, column, ref)
    fields: dict[str, Any] = {}
    for pod_field, (section, key) in _AS_POD.items():
        part = data.get(section)
        value = part.get(key) if isinstance(part, Mapping) else None
        if value is not None:
            fields[pod_field] = value
    try:
        scheduling = PodScheduling.from_pod_spec(fields)
    except PodSpecError as error:
        line, column = doc.position(_class_path(error.path))
        return Finding(INVALID_WORKLOAD, ERROR, error.message, doc.file, line, column, ref)
    warnings = tuple(
        Finding(QUANTITY_OUT_OF_RANGE, WARNING, message, doc.file, *doc.position(_class_path(path)), ref)
        for path, message in scheduling.out_of_range
    )
    return RuntimeClass(
        name,
        fields.get("overhead"),
        fields.get("nodeSelector") or {},
        tuple(fields.get("tolerations") or ()),
        warnings,
    )


def _class_path(pod_path: FieldPath) -> FieldPath:
    """Where a field read as the pod's (`overhead`, `nodeSelector`, `tolerations` …) stands in the RuntimeClass."""
    if not pod_path:
        return ()
    return (*_AS_POD.get(str(pod_path[0]), ()), *pod_path[1:])


def with_runtime_class(spec: Mapping[str, Any], runtime_class: RuntimeClass) -> dict[str, Any] | str:
    """The pod spec as the RuntimeClass admission plugin leaves it, or why the plugin rejects the pod."""
    merged = dict(spec)
    if runtime_class.pod_fixed is not None:
        own = spec.get("overhead")
        if own is not None and not _same_quantities(own, runtime_class.pod_fixed):
            return f"its overhead differs from the podFixed overhead of RuntimeClass {runtime_class.name}"
        merged["overhead"] = dict(runtime_class.pod_fixed)
    if runtime_class.node_selector:
        selector = dict(spec.get("nodeSelector") or {})
        for key, value in runtime_class.node_selector.items():
            if key in selector and str(selector[key]) != str(value):
                return (
                    f"its nodeSelector {key}={selector[key]} conflicts with {key}={value} of RuntimeClass "
                    f"{runtime_class.name} (scheduling.nodeSelector)"
                )
            selector[key] = value
        merged["nodeSelector"] = selector
    if runtime_class.tolerations:
        tolerations = list(spec.get("tolerations") or [])
        tolerations += [t for t in runtime_class.tolerations if t not in tolerations]
        merged["tolerations"] = tolerations
    return merged


def rejected_message(name: str, reason: str) -> str:
    """The `invalid-workload` message of a pod the RuntimeClass admission plugin rejects."""
    return f"Kubernetes rejects the pod (runtimeClassName {name}): {reason}"


def unresolved(name: str, file: str, path: tuple[int, int], ref: str) -> Finding:
    """The `unresolved-reference` warning of a runtimeClassName that names no RuntimeClass among the files."""
    message = (
        f"runtimeClassName {name}: there is no RuntimeClass {name} among the files read; its overhead is not "
        "counted, and Kubernetes rejects the pod if the cluster has none"
    )
    return Finding(UNRESOLVED_REFERENCE, WARNING, message, file, path[0], path[1], ref)


def _same_quantities(a: Any, b: Any) -> bool:
    if not isinstance(a, Mapping) or not isinstance(b, Mapping) or set(a) != set(b):
        return False
    try:
        return all(parse_quantity(str(a[k])) == parse_quantity(str(b[k])) for k in a)
    except ValueError:
        return False


__all__ = [
    "API_VERSIONS",
    "KIND",
    "RuntimeClass",
    "rejected_message",
    "runtime_class_of",
    "unresolved",
    "with_runtime_class",
]
