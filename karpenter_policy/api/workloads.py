"""Workloads: the kinds of object that carry a pod template, and what every reader of one needs.

:data:`WORKLOAD_KINDS` says, for each kind, the apiVersions taken as it, where its pod template is and where it says
how many pods it runs at once; :func:`template_path_of` and :func:`replicas_of` read a manifest with it
(`replicas_of` refuses what is no number of pods the tool plans: the `invalid-replicas` rule). :class:`Workload` is
one pod template of a manifest as both `check --workloads` (which adds where it is written and its pods' shape,
`checks.source.workloads`) and `simulate` (which adds a run time, `simulate.workloads`) use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from karpenter_policy.api.kinds import object_ref
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.api.violations import render_path

_APPS = frozenset({"apps/v1", "apps/v1beta1", "apps/v1beta2", "extensions/v1beta1"})
_BATCH = frozenset({"batch/v1", "batch/v1beta1"})
_CORE = frozenset({"v1"})


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """A kind of object with a pod template: the apiVersions that are it (`api_version`, the current one, first:
    what an owner reference to one says), the path of the pod template in the object (`()`: the object is the pod),
    and the path of the number of pods it runs at once (None: one)."""

    api_version: str
    api_versions: frozenset[str]
    template: FieldPath
    replicas: FieldPath | None = None


POD: Final = "Pod"
DAEMON_SET: Final = "DaemonSet"

#: kind → what it is (see :class:`WorkloadKind`). A DaemonSet's pods are not counted: it runs one on every node.
WORKLOAD_KINDS: Final[dict[str, WorkloadKind]] = {
    POD: WorkloadKind("v1", _CORE, ()),
    "PodTemplate": WorkloadKind("v1", _CORE, ("template",)),
    "ReplicationController": WorkloadKind("v1", _CORE, ("spec", "template"), ("spec", "replicas")),
    "Deployment": WorkloadKind("apps/v1", _APPS, ("spec", "template"), ("spec", "replicas")),
    "StatefulSet": WorkloadKind("apps/v1", _APPS, ("spec", "template"), ("spec", "replicas")),
    DAEMON_SET: WorkloadKind("apps/v1", _APPS, ("spec", "template")),
    "ReplicaSet": WorkloadKind("apps/v1", _APPS, ("spec", "template"), ("spec", "replicas")),
    "Job": WorkloadKind("batch/v1", _BATCH, ("spec", "template"), ("spec", "parallelism")),
    "CronJob": WorkloadKind(
        "batch/v1", _BATCH, ("spec", "jobTemplate", "spec", "template"), ("spec", "jobTemplate", "spec", "parallelism")
    ),
}

#: The most pods of one workload karpenter-policy plans or simulates (`invalid-replicas` beyond).
MAX_REPLICAS: Final = 100_000


def get_path(data: Any, path: FieldPath) -> Any:
    """The value at `path` in nested mappings (None when something on the way is missing or not a mapping)."""
    for part in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def template_path_of(data: Any) -> FieldPath | None:
    """Where the pod template of a manifest is, or None when the manifest is not a workload (of a kind and
    apiVersion of :data:`WORKLOAD_KINDS`; a Pod may leave its apiVersion out: a bare pod template)."""
    if not isinstance(data, Mapping):
        return None
    kind = data.get("kind")
    known = WORKLOAD_KINDS.get(kind) if isinstance(kind, str) else None
    if known is None:
        return None
    api_version = data.get("apiVersion")
    if api_version is None and kind == POD:
        return known.template
    return known.template if isinstance(api_version, str) and api_version in known.api_versions else None


def labels_of(metadata: Any) -> dict[str, str]:
    """The labels of an object's `metadata`, as strings; {} when it has none (or no mapping of them)."""
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def template_labels(template: Any) -> dict[str, str]:
    """The labels of a pod template (`metadata.labels`): those of every pod made from it."""
    return labels_of(template.get("metadata") if isinstance(template, Mapping) else None)


def replicas_problem(value: object) -> str | None:
    """Why `value` is no number of pods karpenter-policy plans (an integer of 0 to MAX_REPLICAS), or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer of 0 to {MAX_REPLICAS:,}"
    if value < 0:
        return "cannot be negative"
    if value > MAX_REPLICAS:
        return f"is more than {MAX_REPLICAS:,}, the most pods of one workload karpenter-policy plans"
    return None


class ReplicasError(ValueError):
    """A manifest's number of pods (`path`, from its root) that is no number the tool plans (`invalid-replicas`)."""

    def __init__(self, path: FieldPath, message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


def _shown(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"(a number of {len(str(abs(value)))} digits)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def replicas_of(data: Mapping[str, Any]) -> int:
    """The pods a workload manifest runs at once (replicas, a Job's parallelism; absent: 1, as the API server
    defaults it; 1 for kinds without); ReplicasError at the field when that is not an integer of 0 to
    MAX_REPLICAS."""
    known = WORKLOAD_KINDS.get(str(data.get("kind")))
    path = known.replicas if known is not None else None
    if path is None:
        return 1
    value = get_path(data, path)
    if value is None:
        return 1
    problem = replicas_problem(value)
    if problem is not None:
        raise ReplicasError(path, f"{render_path(path)} {_shown(value)} {problem}")
    assert isinstance(value, int)
    return value


@dataclass(frozen=True, slots=True)
class Workload:
    """One pod template of a manifest: its kind and name as written, its namespace (None: the manifest names none),
    the template (`metadata`, `spec`) and the pods it runs at once (replicas, a Job's parallelism; 1 for a Pod or a
    template). DaemonSets are workloads too: their pods are not provisioned for, but add to every node."""

    kind: str
    name: str
    namespace: str | None
    template: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    replicas: int = 1

    @property
    def ref(self) -> str:
        """`Deployment/inflate` (the `object` of a finding)."""
        return object_ref(self.kind, self.name)

    @property
    def is_daemon_set(self) -> bool:
        return self.kind == DAEMON_SET

    @property
    def pod_namespace(self) -> str:
        """The namespace of its pods: `default` when the manifest names none."""
        return self.namespace or "default"

    @property
    def labels(self) -> dict[str, str]:
        """The labels of its pod template (those of every pod it runs)."""
        return template_labels(self.template)


def scale_key(ref: str) -> str:
    """The key a `--scale` override names a workload by, in `check --workloads` and `simulate` alike:
    `deployment/inflate` and `Deployment/inflate` name one workload (kinds are matched case-insensitively)."""
    kind, _, name = ref.partition("/")
    return f"{kind.lower()}/{name}"


__all__ = [
    "DAEMON_SET",
    "MAX_REPLICAS",
    "POD",
    "WORKLOAD_KINDS",
    "ReplicasError",
    "Workload",
    "WorkloadKind",
    "get_path",
    "labels_of",
    "replicas_of",
    "replicas_problem",
    "scale_key",
    "template_labels",
    "template_path_of",
]
