"""`validate`: load policy files, check each object against its schema and Karpenter's webhook rules.

No solver here. Findings are placed at the exact node (requirement, label, taint) the rule is about.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from karpenter_policy.api.aws import validate_node_template
from karpenter_policy.api.kinds import (
    NODE_TEMPLATE_API_VERSION,
    NODE_TEMPLATE_KIND,
    POLICY_KINDS,
    PROVISIONER_API_VERSION,
    PROVISIONER_KIND,
    object_ref,
)
from karpenter_policy.api.validation import validate_provisioner
from karpenter_policy.api.violations import (
    DUPLICATE_NAME,
    PARSE_ERROR,
    SCHEMA,
    UNRESOLVED_REFERENCE,
    WARNING,
    Violation,
)
from karpenter_policy.policy.findings import Finding, Location, Report
from karpenter_policy.policy.loader import Document, LoadError, UnreadableFile, discover, load_file
from karpenter_policy.policy.schema import schema_file_for, schema_violations, suggest

_POLICY_GROUPS = {PROVISIONER_API_VERSION.split("/")[0], NODE_TEMPLATE_API_VERSION.split("/")[0]}
_RULES = {PROVISIONER_KIND: validate_provisioner, NODE_TEMPLATE_KIND: validate_node_template}


def place(doc: Document, violation: Violation) -> Finding:
    """Turn a path-based violation into a finding at the node's line and column."""
    line, column = doc.position(violation.path, violation.at_key)
    related = tuple(Location(doc.file, *doc.position(path)) for path in violation.related)
    data = doc.data if isinstance(doc.data, Mapping) else {}
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
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
    if not isinstance(data, Mapping):
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
        expected = PROVISIONER_API_VERSION if kind == PROVISIONER_KIND else NODE_TEMPLATE_API_VERSION
        return None, [Violation(SCHEMA, ("apiVersion",), f"{kind} must have apiVersion {expected}, not {api_version}")]
    if group in _POLICY_GROUPS and api_version in (PROVISIONER_API_VERSION, NODE_TEMPLATE_API_VERSION):
        hint = suggest(kind, sorted(POLICY_KINDS))
        if hint is not None:
            return None, [Violation(SCHEMA, ("kind",), f"unknown kind {kind!r} in {api_version}; did you mean {hint}?")]
    return None, []


def check_document(doc: Document, report: Report) -> list[Finding]:
    """Schema then Karpenter's rules for one document; counts it in `report`."""
    schema_file, problems = _identify(doc)
    if schema_file is None:
        if not problems:
            data = doc.data
            report.skipped[str(data.get("kind"))] += 1
            return []
        report.kinds["(invalid)"] += 1
        return [place(doc, v) for v in problems]
    data = doc.data
    report.kinds[data["kind"]] += 1
    violations = schema_violations(data, schema_file)
    if not violations:
        violations = _RULES[data["kind"]](data)
    return [place(doc, v) for v in violations]


def _cross_object(documents: Sequence[Document]) -> list[Finding]:
    """Rules across objects: one name per kind; providerRef must name a node template given alongside."""
    findings: list[Finding] = []
    seen: dict[tuple[str, str], Document] = {}
    templates: set[str] = set()
    for doc in documents:
        data = doc.data
        name = (data.get("metadata") or {}).get("name") if isinstance(data.get("metadata"), Mapping) else None
        if not isinstance(name, str):
            continue
        key = (str(data.get("kind")), name)
        if data.get("kind") == NODE_TEMPLATE_KIND:
            templates.add(name)
        first = seen.get(key)
        if first is None:
            seen[key] = doc
            continue
        line, column = first.position(("metadata", "name"))
        duplicate = place(
            doc,
            Violation(
                DUPLICATE_NAME,
                ("metadata", "name"),
                f"{key[0]} {name!r} is defined twice (first in {first.file}:{line}); applying both keeps only one",
            ),
        )
        findings.append(replace(duplicate, related=(Location(first.file, line, column),)))
    for doc in documents:
        data = doc.data
        if data.get("kind") != PROVISIONER_KIND:
            continue
        ref = (data.get("spec") or {}).get("providerRef")
        if isinstance(ref, Mapping) and isinstance(ref.get("name"), str) and ref["name"] not in templates:
            findings.append(
                place(
                    doc,
                    Violation(
                        UNRESOLVED_REFERENCE,
                        ("spec", "providerRef", "name"),
                        f"providerRef names AWSNodeTemplate {ref['name']!r}, which is not among the checked files; "
                        "Karpenter cannot launch nodes until it exists",
                        WARNING,
                    ),
                )
            )
    return findings


def validate_paths(paths: Iterable[str], max_file_bytes: int | None = None) -> Report:
    """Validate every policy file under `paths`."""
    report = Report()
    files, missing = discover(paths)
    for path in missing:
        report.findings.append(Finding(PARSE_ERROR, "error", f"no such file or directory: {path}", path, 0, 0))
        report.could_not_run = True
    checked: list[Document] = []
    for file in files:
        report.files += 1
        try:
            documents = load_file(file) if max_file_bytes is None else load_file(file, max_file_bytes)
        except LoadError as error:
            report.findings.append(Finding(PARSE_ERROR, "error", error.message, file, error.line, error.column))
            report.could_not_run |= isinstance(error, UnreadableFile)
            continue
        for doc in documents:
            report.findings.extend(check_document(doc, report))
            if _identify(doc)[0] is not None:
                checked.append(doc)
    report.findings.extend(_cross_object(checked))
    return report
