"""Read the workloads of a repository (`check --workloads PATHS`): every object that carries a pod template.

Kinds (and the apiVersions taken as theirs: `api.workloads.WORKLOAD_KINDS`): Pod, PodTemplate,
ReplicationController (v1), Deployment, StatefulSet, DaemonSet, ReplicaSet (apps/v1 and its betas), Job and CronJob
(batch/v1, batch/v1beta1). A
`kind: Pod` without `metadata.name` is a bare pod template — the driver/executor templates of Spark
(`spark.kubernetes.{driver,executor}.podTemplateFile`), partial specs with no image and no resources — and is
named after its file. RuntimeClasses (`runtimeclasses`) and PersistentVolumes, PersistentVolumeClaims and
StorageClasses (`volumes`) are read and applied to the pods that use them. Other kinds (Services, ConfigMaps,
Provisioners) are passed over; a Pod already bound to a node (`spec.nodeName`) is too: Karpenter never provisions
for it. A pod spec that cannot be read, or whose resources the API server refuses (`model.podadmission`), is an
`invalid-workload` error at the field (each field the API server refuses its own finding) and no workload.

Each :class:`LocatedWorkload` remembers where its pod template is (file, line, column: the `template:` key of a
controller, the `spec:` key of a Pod), which is where a `workload-unschedulable` finding points.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from karpenter_policy.api.kinds import object_ref
from karpenter_policy.api.violations import (
    ERROR,
    INVALID_REPLICAS,
    INVALID_WORKLOAD,
    PARSE_ERROR,
    QUANTITY_OUT_OF_RANGE,
    WARNING,
)
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.api.workloads import (
    WORKLOAD_KINDS,
    ReplicasError,
    Workload,
    get_path,
    replicas_of,
    template_labels,
    template_path_of,
)
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.files import load_file
from karpenter_policy.checks.source.loader import Document, LoadError, UnreadableFile, discover
from karpenter_policy.checks.source.runtimeclasses import KIND as RUNTIME_CLASS
from karpenter_policy.checks.source.runtimeclasses import (
    RuntimeClass,
    rejected_message,
    runtime_class_of,
    with_runtime_class,
)
from karpenter_policy.checks.source.runtimeclasses import unresolved as runtime_class_unresolved
from karpenter_policy.checks.source.volumes import (
    Volumes,
    conflict_finding,
    conflict_message,
    ignored_v1,
    pod_volumes,
    read_volume_object,
    requirements_of,
    unresolved_finding,
)
from karpenter_policy.model.podadmission import resource_refusals
from karpenter_policy.model.pods import PodSpecError
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling.pods import PodShape, shape_of
from karpenter_policy.scheduling.volumes import with_volumes


@dataclass(frozen=True, slots=True, kw_only=True)
class LocatedWorkload(Workload):
    """One pod template and where it is. `template_path` leads to the template in its document (`()` for a
    Pod); `line`/`column` are those of the template (a Pod's `spec:`); `shape`: its pods' (what the scheduler
    sees); `bare_template`: a Pod without a name (named after its file)."""

    file: str
    line: int
    column: int
    template_path: FieldPath
    shape: PodShape
    bare_template: bool = False

    @property
    def spec_path(self) -> FieldPath:
        """The path of the pod spec in the document."""
        return (*self.template_path, "spec")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"object": self.ref, "file": self.file, "line": self.line, "column": self.column}
        if not self.is_daemon_set:
            data["replicas"] = self.replicas
        if self.namespace:
            data["namespace"] = self.namespace
        return data


@dataclass(frozen=True, slots=True)
class LabelUse:
    """One node-label constraint a workload writes — a nodeSelector entry or a node-affinity expression — and where:
    what the typo hints (`unknown-label-key`, `unknown-label-value`) look at. `values` are (value, line, column);
    `affinity`: in a node-affinity term (which Karpenter validates), not the nodeSelector."""

    workload: str
    file: str
    key: str
    operator: str
    line: int
    column: int
    values: tuple[tuple[str, int, int], ...]
    affinity: bool


def label_uses(doc: Document, workload: LocatedWorkload) -> list[LabelUse]:
    """Every nodeSelector entry and node-affinity expression (required and preferred) of a workload's pod spec."""
    spec_path = workload.spec_path
    spec = get_path(doc.data, spec_path)
    if not isinstance(spec, Mapping):
        return []
    uses: list[LabelUse] = []
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping):
        for key, value in selector.items():
            path = (*spec_path, "nodeSelector", str(key))
            line, column = doc.position(path, at_key=True)
            at_value = (str(value), *doc.position(path))
            uses.append(LabelUse(workload.ref, doc.file, str(key), "In", line, column, (at_value,), False))
    node_affinity = get_path(spec, ("affinity", "nodeAffinity"))
    if not isinstance(node_affinity, Mapping):
        return uses
    terms: list[tuple[FieldPath, Any]] = []
    required = get_path(node_affinity, ("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    for index, term in enumerate(required if isinstance(required, list) else []):
        terms.append((("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", index), term))
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    for index, term in enumerate(preferred if isinstance(preferred, list) else []):
        inner = term.get("preference") if isinstance(term, Mapping) else None
        terms.append((("preferredDuringSchedulingIgnoredDuringExecution", index, "preference"), inner))
    for term_path, term in terms:
        expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
        for index, expression in enumerate(expressions if isinstance(expressions, list) else []):
            if not isinstance(expression, Mapping) or not isinstance(expression.get("key"), str):
                continue
            path = (*spec_path, "affinity", "nodeAffinity", *term_path, "matchExpressions", index)
            line, column = doc.position((*path, "key"))
            raw = expression.get("values")
            written = raw if isinstance(raw, list) else []
            values = tuple((str(v), *doc.position((*path, "values", i))) for i, v in enumerate(written))
            operator = str(expression.get("operator", ""))
            uses.append(LabelUse(workload.ref, doc.file, expression["key"], operator, line, column, values, True))
    return uses


@dataclass(frozen=True, slots=True)
class TopologyKeyUse:
    """One `topologyKey` a workload writes — of a topology spread constraint or a pod (anti-)affinity term — and
    where: what the `unknown-topology-key` hint looks at. `kind` is "topology spread", "pod affinity" or "pod
    anti-affinity"; `required`: DoNotSchedule or a required term (else Karpenter relaxes it away)."""

    workload: str
    file: str
    key: str
    kind: str
    required: bool
    line: int
    column: int


#: Where pod (anti-)affinity terms are in a pod spec: (affinity field, kind, list field, required, term inside).
_AFFINITY_TERMS: tuple[tuple[str, str, str, bool, FieldPath], ...] = (
    ("podAffinity", "pod affinity", "requiredDuringSchedulingIgnoredDuringExecution", True, ()),
    ("podAffinity", "pod affinity", "preferredDuringSchedulingIgnoredDuringExecution", False, ("podAffinityTerm",)),
    ("podAntiAffinity", "pod anti-affinity", "requiredDuringSchedulingIgnoredDuringExecution", True, ()),
    (
        "podAntiAffinity",
        "pod anti-affinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        False,
        ("podAffinityTerm",),
    ),
)


def topology_key_uses(doc: Document, workload: LocatedWorkload) -> list[TopologyKeyUse]:
    """Every topologyKey of a workload's spread constraints and pod (anti-)affinity terms."""
    spec_path = workload.spec_path
    spec = get_path(doc.data, spec_path)
    if not isinstance(spec, Mapping):
        return []
    uses: list[TopologyKeyUse] = []

    def add(path: FieldPath, term: Any, kind: str, required: bool) -> None:
        key = term.get("topologyKey") if isinstance(term, Mapping) else None
        if isinstance(key, str):
            line, column = doc.position((*spec_path, *path, "topologyKey"))
            uses.append(TopologyKeyUse(workload.ref, doc.file, key, kind, required, line, column))

    constraints = spec.get("topologySpreadConstraints")
    for index, constraint in enumerate(constraints if isinstance(constraints, list) else []):
        required = not (isinstance(constraint, Mapping) and constraint.get("whenUnsatisfiable") == "ScheduleAnyway")
        add(("topologySpreadConstraints", index), constraint, "topology spread", required)
    for field_name, kind, list_name, required, inner in _AFFINITY_TERMS:
        terms = get_path(spec, ("affinity", field_name, list_name))
        for index, term in enumerate(terms if isinstance(terms, list) else []):
            add(("affinity", field_name, list_name, index, *inner), get_path(term, inner), kind, required)
    return uses


class WorkloadError(ValueError):
    """A workload that cannot be read (its pod spec: `invalid-workload`; its replicas: `invalid-replicas`);
    `path` leads to the field from the document's root."""

    def __init__(
        self,
        path: FieldPath,
        message: str,
        rule: str = INVALID_WORKLOAD,
        also: tuple[tuple[FieldPath, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.path, self.message, self.rule = path, message, rule
        #: further fields of the same rule, each its own finding (every resource the API server refuses)
        self.also = also


def _check_api_version(data: Any) -> None:
    """Raise WorkloadError when a manifest of a workload kind has an apiVersion that is not a string (kubectl
    refuses it; no apiVersion can match it)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("kind"), str) or data["kind"] not in WORKLOAD_KINDS:
        return
    api_version = data.get("apiVersion")
    if api_version is not None and not isinstance(api_version, str):
        shown = repr(api_version) if len(repr(api_version)) <= 40 else repr(api_version)[:37] + "..."
        raise WorkloadError(("apiVersion",), f"apiVersion must be a string such as apps/v1, not {shown}")


def workload_from_data(
    data: Any,
    file: str = "",
    line: int = 0,
    column: int = 0,
    default_name: str | None = None,
) -> LocatedWorkload | None:
    """The workload a manifest is (None: not a workload, or a Pod bound to a node); raises WorkloadError
    when its pod spec is malformed. `default_name` names a bare pod template (default: the file's stem)."""
    template_path = template_path_of(data)
    if template_path is None:
        _check_api_version(data)
        return None
    template = get_path(data, template_path)
    if template is None:
        template = {}
    if not isinstance(template, Mapping):
        raise WorkloadError(template_path, "the pod template must be a mapping")
    spec = template.get("spec")
    spec_path: FieldPath = (*template_path, "spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise WorkloadError(spec_path, "the pod spec must be a mapping")
    if spec.get("nodeName"):
        return None
    metadata = data.get("metadata") if isinstance(data.get("metadata"), Mapping) else {}
    name = metadata.get("name")
    bare = not (isinstance(name, str) and name)
    if bare:
        name = default_name or (PurePath(file).name.split(".")[0] if file else "(unnamed)")
    namespace = metadata.get("namespace")
    base = Workload(str(data["kind"]), str(name), namespace if isinstance(namespace, str) and namespace else None)
    try:
        shape = shape_of(spec, base.pod_namespace, template_labels(template))
    except PodSpecError as error:
        raise WorkloadError((*spec_path, *error.path), error.message) from None
    refused = resource_refusals(spec)
    if refused:
        first, *rest = [((*spec_path, *r.path), r.said()) for r in refused]
        raise WorkloadError(*first, also=tuple(rest))
    return LocatedWorkload(
        kind=base.kind,
        name=base.name,
        namespace=base.namespace,
        template=template,
        replicas=_replicas(data),
        file=file,
        line=line,
        column=column,
        template_path=template_path,
        shape=shape,
        bare_template=bare,
    )


def _replicas(data: Mapping[str, Any]) -> int:
    """The pods a workload runs at once; WorkloadError (`invalid-replicas`) at the field when that is not an
    integer of 0 to MAX_REPLICAS."""
    try:
        return replicas_of(data)
    except ReplicasError as error:
        raise WorkloadError(error.path, error.message, INVALID_REPLICAS) from None


def workload_of_document(doc: Document) -> LocatedWorkload | None:
    """The workload of a loaded document, placed at its pod template; raises WorkloadError."""
    template_path = template_path_of(doc.data)
    if template_path is None:
        _check_api_version(doc.data)
        return None
    at = template_path if template_path else ("spec",)
    line, column = doc.position(at)
    return workload_from_data(doc.data, doc.file, line, column)


@dataclass(slots=True)
class WorkloadSet:
    """What `read_workloads` found: the workloads (DaemonSets included), the findings about files and specs
    that could not be read, the files read, the workload kinds counted, whether a path was missing, and the node
    labels and topology keys the workloads write (for the typo hints)."""

    workloads: list[LocatedWorkload] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    could_not_run: bool = False
    label_uses: list[LabelUse] = field(default_factory=list)
    topology_keys: list[TopologyKeyUse] = field(default_factory=list)
    #: the RuntimeClasses read (by name: the last of a name wins) and the file of each
    runtime_classes: dict[str, tuple[RuntimeClass, str]] = field(default_factory=dict)
    #: the file of every RuntimeClass document read (a malformed one included)
    runtime_class_files: list[str] = field(default_factory=list)
    #: the workloads that name a RuntimeClass: (position in `workloads`, the name, its line and column)
    runtime_class_uses: list[tuple[int, str, int, int]] = field(default_factory=list)
    #: the PersistentVolumes, PersistentVolumeClaims and StorageClasses read (`volumes`), and (file, kind) of each
    volumes: Volumes = field(default_factory=Volumes)
    volume_files: list[tuple[str, str]] = field(default_factory=list)
    #: each volume object read as it is written (what `simulate` creates in its cluster), in file order
    volume_objects: list[Mapping[str, Any]] = field(default_factory=list)
    #: a StatefulSet's spec.volumeClaimTemplates, by the workload's ref and file
    claim_templates: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    @property
    def daemon_sets(self) -> list[LocatedWorkload]:
        return [w for w in self.workloads if w.is_daemon_set]

    @property
    def pods(self) -> list[LocatedWorkload]:
        """The workloads Karpenter provisions for (everything but DaemonSets)."""
        return [w for w in self.workloads if not w.is_daemon_set]


def read_documents(documents: Iterable[Document], into: WorkloadSet | None = None) -> WorkloadSet:
    """The workloads of already loaded documents."""
    found = into if into is not None else WorkloadSet()
    for doc in documents:
        volume_kind = read_volume_object(doc, found.volumes)
        if volume_kind is not None:
            if isinstance(volume_kind, Finding):
                found.findings.append(volume_kind)
                volume_kind = str(doc.data.get("kind"))
            else:
                found.volume_objects.append(doc.data)
            found.kinds[volume_kind] += 1
            found.volume_files.append((doc.file, volume_kind))
            continue
        runtime_class = runtime_class_of(doc)
        if runtime_class is not None:
            found.kinds[RUNTIME_CLASS] += 1
            found.runtime_class_files.append(doc.file)
            if isinstance(runtime_class, Finding):
                found.findings.append(runtime_class)
            else:
                found.runtime_classes[runtime_class.name] = (runtime_class, doc.file)
                found.findings.extend(runtime_class.warnings)
            continue
        try:
            workload = workload_of_document(doc)
        except WorkloadError as error:
            metadata = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), Mapping) else {}
            ref = object_ref(doc.data.get("kind"), metadata.get("name") or PurePath(doc.file).name.split(".")[0])
            for path, message in ((error.path, error.message), *error.also):
                line, column = doc.position(path)
                found.findings.append(Finding(error.rule, ERROR, message, doc.file, line, column, ref))
            found.kinds[str(doc.data.get("kind"))] += 1
            continue
        if workload is not None:
            found.workloads.append(workload)
            found.kinds[workload.kind] += 1
            found.label_uses += label_uses(doc, workload)
            found.topology_keys += topology_key_uses(doc, workload)
            spec = doc.data.get("spec")
            templates = (
                spec.get("volumeClaimTemplates")
                if isinstance(spec, Mapping) and workload.kind == "StatefulSet"
                else None
            )
            if isinstance(templates, list) and templates:
                found.claim_templates[(workload.ref, workload.file)] = templates
            name = get_path(doc.data, (*workload.spec_path, "runtimeClassName"))
            if isinstance(name, str) and name:
                line, column = doc.position((*workload.spec_path, "runtimeClassName"))
                found.runtime_class_uses.append((len(found.workloads) - 1, name, line, column))
            for path, message in workload.shape.scheduling.out_of_range:
                line, column = doc.position((*workload.spec_path, *path))
                found.findings.append(
                    Finding(QUANTITY_OUT_OF_RANGE, WARNING, message, doc.file, line, column, workload.ref)
                )
    return found


def read_workloads(paths: Sequence[str], max_file_bytes: int | None = None) -> WorkloadSet:
    """Every workload under `paths` (files or directories, *.yaml / *.yml, recursively), in file order."""
    found = WorkloadSet()
    files, missing = discover(paths)
    for path in missing:
        found.findings.append(Finding(PARSE_ERROR, ERROR, f"no such file or directory: {path}", path, 0, 0))
        found.could_not_run = True
    for file in files:
        found.files.append(file)
        try:
            documents = load_file(file, max_file_bytes) if max_file_bytes else load_file(file)
        except UnreadableFile as error:
            found.findings.append(Finding(error.rule, ERROR, error.message, file, error.line, error.column))
            found.could_not_run = True
            continue
        except LoadError as error:
            found.findings.append(Finding(error.rule, ERROR, error.message, file, error.line, error.column))
            continue
        read_documents(documents, found)
    resolve_runtime_classes(found)
    resolve_volumes(found)
    return found


def resolve_runtime_classes(found: WorkloadSet) -> None:
    """Apply each RuntimeClass read to the workloads that name it (`runtimeclasses`): their pods' shapes then carry
    its overhead, nodeSelector and tolerations; a name without a RuntimeClass is a warning; a workload whose pods
    the admission plugin rejects is an error, and no workload (as one whose pod spec cannot be read)."""
    rejected: set[int] = set()
    broken = {f.object_ref for f in found.findings if f.rule == INVALID_WORKLOAD}
    for index, name, line, column in found.runtime_class_uses:
        workload = found.workloads[index]
        known = found.runtime_classes.get(name)
        if known is None:
            if object_ref(RUNTIME_CLASS, name) not in broken:  # one that cannot be read has its error already
                found.findings.append(runtime_class_unresolved(name, workload.file, (line, column), workload.ref))
            continue
        spec = workload.template.get("spec")
        merged = with_runtime_class(spec if isinstance(spec, Mapping) else {}, known[0])
        try:
            if isinstance(merged, str):
                raise PodSpecError(("runtimeClassName",), rejected_message(name, merged))
            shape = shape_of(merged, workload.shape.namespace, workload.labels)
        except PodSpecError as error:
            message = error.message if error.path == ("runtimeClassName",) else rejected_message(name, error.message)
            found.findings.append(Finding(INVALID_WORKLOAD, ERROR, message, workload.file, line, column, workload.ref))
            rejected.add(index)
            continue
        found.workloads[index] = replace(workload, shape=shape)
    if rejected:
        found.workloads = [w for i, w in enumerate(found.workloads) if i not in rejected]
        found.runtime_class_uses = []  # positions no longer hold


#: The most ordinals of a StatefulSet whose claims are looked up (beyond, the pods are read as the last one's).
MAX_ORDINALS = 1000


def resolve_volumes(found: WorkloadSet) -> None:
    """Add each pod's volume topology to its required node affinity (`volumes`, Karpenter's `VolumeTopology.Inject`):
    a claim, PersistentVolume or StorageClass not among the files is a warning (the volume adds nothing); volumes that
    leave no zone are a `volume-zones-conflict` error, and the workload is not scheduled further; a claim Karpenter
    v1.14.1's validation refuses (`volumes.ignored_v1`) makes NodePools ignore the pod. A StatefulSet's
    pods have a claim each (`<template>-<name>-<ordinal>`): when their requirements differ the pods are read as
    ordinal 0's and the docs say so."""
    conflicting: set[int] = set()
    for index, workload in enumerate(found.workloads):
        spec = workload.template.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        templates = found.claim_templates.get((workload.ref, workload.file), [])
        ordinals = min(max(workload.replicas, 1), MAX_ORDINALS) if templates else 1
        pod_name = workload.name if workload.kind == "Pod" and not workload.bare_template else ""
        namespace = workload.pod_namespace
        per_pod = [
            requirements_of(pod_volumes(spec, pod_name, templates, workload.name, i), namespace, found.volumes)
            for i in range(ordinals)
        ]
        ignored = ignored_v1(pod_volumes(spec, pod_name, templates, workload.name, 0), namespace, found.volumes)
        if ignored is not None:  # Karpenter v1.14.1 ignores the pod: a NodePool refuses it (`PodShape.refused_v1`)
            workload = found.workloads[index] = replace(workload, shape=with_volumes(workload.shape, Requirements(),
                                                                                     ignored))  # fmt: skip
        wanted = per_pod[0]
        if not wanted.per_volume and not wanted.missing:
            continue
        at = (workload.file, workload.line, workload.column, workload.ref)
        for missing in dict.fromkeys(m for pod in per_pod for m in pod.missing):
            found.findings.append(unresolved_finding(missing, *at))
        message = next((m for m in map(conflict_message, per_pod) if m is not None), None)
        if message is not None:
            found.findings.append(conflict_finding(message, *at))
            conflicting.add(index)
            continue
        combined = wanted.combined
        alternatives, too_many = wanted.v1_reading()  # too many: a NodePool refuses it, saying why
        if not combined and alternatives is None and too_many is None:
            continue
        found.workloads[index] = replace(workload, shape=with_volumes(workload.shape, combined, too_many,
                                                                      alternatives=alternatives))  # fmt: skip
    if conflicting:
        found.workloads = [w for i, w in enumerate(found.workloads) if i not in conflicting]
