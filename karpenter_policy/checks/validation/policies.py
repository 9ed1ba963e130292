"""`validate`: load policy files, check each object against its schema and Karpenter's webhook rules.

No solver here. Findings are placed at the exact node (requirement, label, taint) the rule is about. Karpenter v1
objects (NodePool, NodeClaim, EC2NodeClass) and objects of a Karpenter group in a version the tool does not check
are `v1`'s. YAML documents that are not Kubernetes objects (values files, CI workflows, lists) are counted and
skipped; Kubernetes objects of other kinds too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from karpenter_policy.api.aws import validate_node_template
from karpenter_policy.api.kinds import (
    API_VERSIONS,
    NODE_TEMPLATE_API_VERSION,
    NODE_TEMPLATE_KIND,
    PINNING_POLICY_API_VERSION,
    PINNING_POLICY_KIND,
    PLACEMENT_TEST_KIND,
    POLICY_KINDS,
    PROVISIONER_API_VERSION,
    PROVISIONER_KIND,
    object_ref,
)
from karpenter_policy.api.provisionerrules import validate_provisioner
from karpenter_policy.api.schema import nearest_field, schema_file_for, schema_violations
from karpenter_policy.api.v1.crds import EC2NODECLASS_KIND, NODEPOOL_KIND
from karpenter_policy.api.violations import (
    DUPLICATE_NAME,
    ERROR,
    PARSE_ERROR,
    RESTRICTED_LABEL,
    SCHEMA,
    UNRESOLVED_REFERENCE,
    WARNING,
    Violation,
)
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.checks.findings import Finding, Location, Report
from karpenter_policy.checks.jobs import jobs_for
from karpenter_policy.checks.selection import EVERYTHING, Selection
from karpenter_policy.checks.source.files import load_text
from karpenter_policy.checks.source.loader import (
    MAX_FILE_BYTES,
    Document,
    LoadError,
    UnreadableFile,
    discover,
    read_text,
)
from karpenter_policy.checks.suppression import Suppression
from karpenter_policy.checks.validation.v1 import karpenter_object, node_class_ref

_POLICY_GROUPS = {api_version.split("/")[0] for api_version in API_VERSIONS.values()}


def _validate_pinning_policy(data: Mapping[str, Any]) -> list[Violation]:
    # pinning.rules brings in the workload model and the scheduler (~90 ms of imports): only for PinningPolicies
    from karpenter_policy.checks.pinning import validate_pinning_policy

    return validate_pinning_policy(data)


_RULES: dict[str, Callable[[Mapping[str, Any]], list[Violation]]] = {
    PROVISIONER_KIND: validate_provisioner,
    NODE_TEMPLATE_KIND: validate_node_template,
    PINNING_POLICY_KIND: _validate_pinning_policy,
    PLACEMENT_TEST_KIND: lambda data: [],  # the schema says it all; workload references are resolved by `test`
}


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """isinstance(value, Mapping), a dict (what the loader makes) and None (an absent field) asked without the
    ABC's check: a few times a document, each a Python call of its own."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def place(doc: Document, violation: Violation) -> Finding:
    """Turn a path-based violation into a finding at the node's line and column."""
    if violation.in_text is not None:
        line, column = doc.text_position(violation.path, *violation.in_text)
    else:
        line, column = doc.position(violation.path, violation.at_key)
    related = tuple(Location(doc.file, *doc.position(path)) for path in violation.related)
    data = doc.data if _is_mapping(doc.data) else {}
    metadata = data.get("metadata")
    name = metadata.get("name") if _is_mapping(metadata) else None
    return Finding(
        violation.rule,
        violation.severity,
        violation.message,
        doc.file,
        line,
        column,
        object_ref(data.get("kind"), name),
        related,
    )


def _identify(doc: Document) -> tuple[str | None, list[Violation]]:
    """The schema file for the document, or why it is not a policy object we can check (None, [] = skip)."""
    data = doc.data
    if not _is_mapping(data):
        return None, [Violation(SCHEMA, (), f"expected a Kubernetes object (a mapping), found a {type(data).__name__}")]
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        missing = [f for f in ("apiVersion", "kind") if not isinstance(data.get(f), str)]
        return None, [
            Violation(SCHEMA, (), f"not a Kubernetes object: {' and '.join(missing)} missing or not a string")
        ]
    schema_file = schema_file_for(api_version, kind)
    if schema_file is not None:
        return schema_file, []
    group = api_version.split("/")[0]
    if kind in POLICY_KINDS:
        expected = API_VERSIONS[kind]
        return None, [Violation(SCHEMA, ("apiVersion",), f"{kind} must have apiVersion {expected}, not {api_version}")]
    if group in _POLICY_GROUPS and api_version in (
        PROVISIONER_API_VERSION,
        NODE_TEMPLATE_API_VERSION,
        PINNING_POLICY_API_VERSION,
    ):
        hint = nearest_field(kind, sorted(POLICY_KINDS))
        if hint is not None:
            return None, [Violation(SCHEMA, ("kind",), f"unknown kind {kind!r} in {api_version}; did you mean {hint}?")]
    return None, []


def is_kubernetes_object(data: Any) -> bool:
    """Whether a YAML document is (meant to be) a Kubernetes object: a mapping with an `apiVersion` or a `kind`, or
    with both `metadata` and `spec` (a manifest that lost its type, which is reported). A values file, a CI
    workflow or a list is not."""
    if not _is_mapping(data):
        return False
    return "apiVersion" in data or "kind" in data or ("metadata" in data and "spec" in data)


def check_document(doc: Document, report: Report) -> tuple[list[Finding], bool]:
    """Schema then Karpenter's rules for one document, counted in `report`; True when it is a policy object."""
    findings, is_policy, _ = _check_document(doc, report)
    return findings, is_policy


#: Where an error stops the solver from proving a Provisioner: what it reads (requirements, labels) and what its
#: node template is built from. An error elsewhere (a TTL combination, the provider or node template, the name)
#: is independent of scheduling: the Provisioner is still proven, as if that field were fixed. So is one whose only
#: scheduling error is a restricted label key (proven with that key as a custom label).
_SCHEDULING_FIELDS: tuple[tuple[str, ...], ...] = (
    ("spec", "requirements"),
    ("spec", "labels"),
    ("spec", "taints"),
    ("spec", "startupTaints"),
    ("spec", "kubeletConfiguration"),
    ("spec", "limits"),
)


def _blocks_solving(violation: Violation) -> bool:
    # A restricted label key is refused by Karpenter, but to the catalog it is a label like any custom one: the
    # other requirements are still proven (their typos reported) in the same run.
    if violation.severity != ERROR or violation.rule == RESTRICTED_LABEL:
        return False
    return any(violation.path[: len(prefix)] == prefix for prefix in _SCHEDULING_FIELDS)


def _check_document(doc: Document, report: Report) -> tuple[list[Finding], bool, Callable[[Finding], bool]]:
    """`check_document`, and which of its error findings stop the solver (see `_SCHEDULING_FIELDS`)."""
    if not is_kubernetes_object(doc.data):
        report.not_kubernetes[doc.file] += 1
        return [], False, _ALWAYS
    schema_file, problems = _identify(doc)
    if schema_file is None:
        if not problems:
            verdict = karpenter_object(doc.data)
            if verdict is None:
                report.skipped[str(doc.data.get("kind"))] += 1
                return [], False, _ALWAYS
            report.kinds[verdict.kind] += 1
            findings = [place(doc, v) for v in verdict.violations]
            if verdict.kind != NODEPOOL_KIND or not verdict.checked:
                return findings, verdict.checked, _ALWAYS
            blocking = {id(f) for f, v in zip(findings, verdict.violations, strict=True) if _blocks_nodepool(v)}
            return findings, True, lambda finding: id(finding) in blocking
        report.kinds["(invalid)"] += 1
        return [place(doc, v) for v in problems], False, _ALWAYS
    data = doc.data
    report.kinds[data["kind"]] += 1
    violations = schema_violations(data, schema_file)
    if violations:  # a malformed object: nothing can be built from it, unless all it has is a stray field
        stray = all(_stray_field(v) for v in violations) and data["kind"] == PROVISIONER_KIND
        return [place(doc, v) for v in violations], True, _NEVER if stray else _ALWAYS
    violations = _RULES[data["kind"]](data)
    findings = [place(doc, v) for v in violations]
    blocking = {id(f) for f, v in zip(findings, violations, strict=True) if _blocks_solving(v)}
    return findings, True, lambda finding: id(finding) in blocking


#: The fields of a NodePool whose errors leave its scheduling untouched: it is proven all the same (a budget's
#: cron, a consolidation policy), as a Provisioner with a TTL error is.
_NODEPOOL_UNSCHEDULED_FIELDS: tuple[tuple[str, ...], ...] = (("spec", "disruption"),)


def _blocks_nodepool(violation: Violation) -> bool:
    if violation.severity != ERROR:
        return False
    path = violation.path
    return not any(path[: len(prefix)] == prefix for prefix in _NODEPOOL_UNSCHEDULED_FIELDS)


def _ALWAYS(finding: Finding) -> bool:
    return True


def _NEVER(finding: Finding) -> bool:
    return False


def _stray_field(violation: Violation) -> bool:
    """An unknown field the solver can do without: in the provider or consolidation, or a field of the spec that is
    no misspelling of what scheduling reads (`ttlSecondAfterEmpty`, not `requirement`). Karpenter's API server
    refuses the object all the same; its requirements are proven as written."""
    path = violation.path
    if violation.rule != SCHEMA or not violation.at_key or len(path) < 2 or path[0] != "spec":
        return False
    if path[1] in ("provider", "consolidation") and len(path) > 2:
        return True
    scheduling = [str(prefix[1]) for prefix in _SCHEDULING_FIELDS]
    return len(path) == 2 and str(path[1]) not in scheduling and nearest_field(str(path[1]), scheduling) is None


@dataclass(frozen=True, slots=True)
class _Named:
    """What the rules across objects need of one checked object (not its node tree, which is let go): its name,
    and the node template or node class it names (a Provisioner's providerRef, a NodePool's nodeClassRef)."""

    kind: str
    name: str
    object_ref: str
    at: Location
    provider_ref: str | None
    provider_ref_at: Location | None


def _named(doc: Document) -> _Named | None:
    data = doc.data
    metadata = data.get("metadata")
    name = metadata.get("name") if _is_mapping(metadata) else None
    if not isinstance(name, str):
        return None
    spec = data.get("spec")
    ref = spec.get("providerRef") if _is_mapping(spec) else None
    ref_name = ref.get("name") if _is_mapping(ref) and isinstance(ref.get("name"), str) else None
    ref_path: FieldPath = ("spec", "providerRef", "name")
    if (class_ref := node_class_ref(data)) is not None:
        ref_name, ref_path = class_ref.name, class_ref.path
    kind = str(data.get("kind"))
    return _Named(
        kind,
        name,
        object_ref(kind, name),
        Location(doc.file, *doc.position(("metadata", "name"))),
        ref_name,
        Location(doc.file, *doc.position(ref_path)) if ref_name else None,
    )


def _cross_object(objects: Sequence[_Named]) -> list[Finding]:
    """Rules across objects: one name per kind; a providerRef names a node template given alongside, a NodePool's
    nodeClassRef an EC2NodeClass."""
    findings: list[Finding] = []
    first_of: dict[tuple[str, str], _Named] = {}
    templates = {o.name for o in objects if o.kind == NODE_TEMPLATE_KIND}
    node_classes = {o.name for o in objects if o.kind == EC2NODECLASS_KIND}
    for obj in objects:
        first = first_of.setdefault((obj.kind, obj.name), obj)
        if first is not obj:
            findings.append(
                Finding(
                    DUPLICATE_NAME,
                    ERROR,
                    f"{obj.kind} {obj.name!r} is defined twice (first in {first.at.file}:{first.at.line}); "
                    "applying both keeps only one",
                    obj.at.file,
                    obj.at.line,
                    obj.at.column,
                    obj.object_ref,
                    (first.at,),
                )
            )
        if obj.kind == PROVISIONER_KIND and obj.provider_ref is not None and obj.provider_ref not in templates:
            at = obj.provider_ref_at or obj.at
            findings.append(
                Finding(
                    UNRESOLVED_REFERENCE,
                    WARNING,
                    f"providerRef names AWSNodeTemplate {obj.provider_ref!r}, which is not among the checked files; "
                    "Karpenter cannot launch nodes until it exists",
                    at.file,
                    at.line,
                    at.column,
                    obj.object_ref,
                )
            )
        if obj.kind == NODEPOOL_KIND and obj.provider_ref is not None and obj.provider_ref not in node_classes:
            at = obj.provider_ref_at or obj.at
            findings.append(
                Finding(
                    UNRESOLVED_REFERENCE,
                    WARNING,
                    f"nodeClassRef names EC2NodeClass {obj.provider_ref!r}, which is not among the checked files; "
                    "Karpenter does not make the NodePool Ready (nor launch nodes for it) until it exists",
                    at.file,
                    at.line,
                    at.column,
                    obj.object_ref,
                )
            )
    return findings


def validate_paths(
    paths: Iterable[str],
    max_file_bytes: int | None = None,
    on_valid: Callable[[Document], None] | None = None,
    values: Mapping[str, Any] | None = None,
    selection: Selection = EVERYTHING,
    on_checkable: Callable[[Document], None] | None = None,
    jobs: int = 1,
) -> Report:
    """Validate every policy file under `paths`.

    `on_valid` receives each policy document (Provisioner, AWSNodeTemplate, a Karpenter v1 object, ...) that has
    no error finding (`checks.repository` keeps what its readers build from); by default documents are let go as
    soon as they are checked.
    A finding the `selection` disables, or a directive in the file silences (`suppression`), does not count: the
    document goes on as if the rule had not fired. `values` are the template values (`--values`) for `*.yaml.j2`
    files (an empty mapping when None). `on_checkable` receives the policy documents whose errors (if any) leave
    scheduling untouched (`_SCHEDULING_FIELDS`): the solver proves them all the same, so one run shows every
    independent problem.

    `jobs` above 1 checks the files in that many worker processes, 0 as many as there are usable CPUs when the
    files are many (`checks.jobs.jobs_for`); not with `on_valid` or `on_checkable`, which need each document
    in this process. The report is the same as with one.
    """
    suppression = Suppression(selection.disabled)
    report = Report(suppression=suppression)
    files, missing = discover(paths, selection.exclude)
    for path in missing:
        report.findings.append(Finding(PARSE_ERROR, ERROR, f"no such file or directory: {path}", path, 0, 0))
        report.could_not_run = True
    limit = MAX_FILE_BYTES if max_file_bytes is None else max_file_bytes
    named: list[_Named] = []
    if jobs != 1 and (on_valid is not None or on_checkable is not None):
        raise ValueError("validate_paths: only one process can hand documents to on_valid or on_checkable")
    if (count := jobs_for(jobs, len(files))) > 1:
        from karpenter_policy.checks.validation.workers import check_files  # processes only when they are used

        for result in check_files(files, FileTask(limit, values, selection.disabled), count):
            result.merge_into(report, suppression, named)
    else:
        for file in files:
            report.files += 1
            report.file_names.append(file)
            check_file(file, limit, values, report, suppression, named, on_valid, on_checkable)
    report.findings.extend(_cross_object(named))
    return report


def check_file(
    file: str,
    limit: int,
    values: Mapping[str, Any] | None,
    report: Report,
    suppression: Suppression,
    named: list[_Named],
    on_valid: Callable[[Document], None] | None = None,
    on_checkable: Callable[[Document], None] | None = None,
) -> None:
    """Read and check one file: its findings and counts into `report`, its directives into `suppression`, what the
    rules across objects need of each of its objects onto `named`."""
    try:
        text = read_text(file, limit)
        suppression.read(file, text)  # its findings' directives, without reading the file again
        documents = load_text(file, text, limit, values)
    except LoadError as error:
        report.findings.append(Finding(error.rule, ERROR, error.message, file, error.line, error.column))
        report.could_not_run |= isinstance(error, UnreadableFile)
        return
    if all(not is_kubernetes_object(doc.data) for doc in documents):
        report.without_objects.add(file)
    for doc in documents:
        findings, is_policy, blocks = _check_document(doc, report)
        report.findings.extend(findings)
        if not is_policy:
            continue
        if (entry := _named(doc)) is not None:
            named.append(entry)
        if on_valid is None and on_checkable is None:
            continue
        errors = [f for f in findings if f.severity == ERROR and not suppression.suppresses(f)]
        if on_valid is not None and not errors:
            on_valid(doc)
        if on_checkable is not None and not any(blocks(f) for f in errors):
            on_checkable(doc)


@dataclass(frozen=True, slots=True)
class FileTask:
    """What checking a file needs besides its name, as a worker process receives it."""

    limit: int
    values: Mapping[str, Any] | None
    disabled: frozenset[str]

    def run(self, file: str) -> FileResult:
        """Check `file` on its own: what it adds to a run's report."""
        report = Report()
        suppression = Suppression(self.disabled)
        named: list[_Named] = []
        check_file(file, self.limit, self.values, report, suppression, named)
        return FileResult(
            file,
            report.findings,
            tuple(report.kinds.items()),
            tuple(report.skipped.items()),
            tuple(report.not_kubernetes.items()),
            bool(report.without_objects),
            report.could_not_run,
            suppression.taken(file),
            named,
        )


@dataclass(slots=True)
class FileResult:
    """What one file adds to a run's report (a worker's answer): merged in the files' order, the report is the one
    a single process makes."""

    file: str
    findings: list[Finding]
    #: (key, count) in the order first seen: what the file adds to `Report.kinds`, `.skipped`, `.not_kubernetes`.
    kinds: tuple[tuple[str, int], ...]
    skipped: tuple[tuple[str, int], ...]
    not_kubernetes: tuple[tuple[str, int], ...]
    without_objects: bool
    could_not_run: bool
    directives: dict[int, frozenset[str]] | None
    named: list[_Named]

    def merge_into(self, report: Report, suppression: Suppression, named: list[_Named]) -> None:
        """Add this file to `report` as `check_file` would have (counters keep their first-seen order)."""
        report.files += 1
        report.file_names.append(self.file)
        report.findings.extend(self.findings)
        for kind, count in self.kinds:
            report.kinds[kind] += count
        for kind, count in self.skipped:
            report.skipped[kind] += count
        for file, count in self.not_kubernetes:
            report.not_kubernetes[file] += count
        if self.without_objects:
            report.without_objects.add(self.file)
        report.could_not_run |= self.could_not_run
        if self.directives is not None:
            suppression.remember(self.file, self.directives)
        named.extend(self.named)
