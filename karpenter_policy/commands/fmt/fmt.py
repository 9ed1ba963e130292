"""Format one policy file: Karpenter's defaults made explicit, keys in canonical order, nothing else touched.

A file is cut into its YAML documents (at `---` lines). Each Provisioner and AWSNodeTemplate that passes its
schema is loaded with ruamel.yaml's round-trip loader (comments, quoting, anchors kept); a Provisioner gets the
requirements Karpenter's webhook would add (`api.defaults`), each mapping of `order.ORDERS` its canonical key order
(`comments.reorder` keeps comments with their keys). Only a document that changed is dumped again — in the
indentation the file uses — every other document keeps its exact text, so a formatted file formats to itself
(byte for byte). The result is parsed again and must hold exactly the expected data, or the file is not touched.

Karpenter v1 NodePools (`karpenter.sh/v1`) and EC2NodeClasses (`karpenter.k8s.aws/v1`) the API server would admit
(`api.v1.admission.admit`) are formatted the same way: the defaults their CRDs give (what the API server stores:
`disruption`'s consolidation policy, consolidateAfter and `budgets: [{nodes: 10%}]`, `expireAfter: 720h`, an
EC2NodeClass's `metadataOptions` with a hop limit of 1, a budget's `nodes`) written out where the document leaves
them out — never changing a value it has —, and v1's key order (`order.ORDERS`). One the API server would refuse
is left as it is, with a note naming the first refusal (see validate). Other kinds and versions (a NodeClaim, a
v1beta1 NodePool) are not policies fmt formats: left as they are.

Line endings are kept: a document whose lines end in CRLF (most of them, when they are mixed) is formatted as LF
text and written back with CRLF on every line, comments included; one with a carriage return that ends no line
is left as it is, with a note.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from karpenter_policy.api.defaults import default_provisioner, default_requirements
from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND
from karpenter_policy.api.schema import schema_file_for, schema_violations
from karpenter_policy.api.v1.crds import (
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_KIND,
    NODEPOOL_API_VERSION,
    NODEPOOL_KIND,
)
from karpenter_policy.api.violations import render_path
from karpenter_policy.checks.source.loader import Document, LoadError, parse
from karpenter_policy.commands.fmt.comments import canonical_keys, put_trailing_lines, reorder, take_trailing_lines
from karpenter_policy.commands.fmt.order import ORDERS
from karpenter_policy.commands.fmt.setaside import set_aside

_DOCUMENT_START = re.compile(r"^---(?=[ \t]|\r?$)", re.MULTILINE)
_CRLF = "\r\n"
_NO_WRAP = 1 << 30


class CannotFormat(Exception):
    """A document fmt cannot rewrite faithfully; the file is left as it is."""


@dataclass(slots=True)
class Formatted:
    """One file's text before and after, and what was done to it (for the report)."""

    file: str
    original: str
    updated: str
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.updated != self.original


def split_documents(text: str) -> list[str]:
    """`text` cut before each `---` line; joined again, the pieces are `text`."""
    starts = [m.start() for m in _DOCUMENT_START.finditer(text) if m.start() > 0]
    bounds = [0, *starts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a] or [text]


def format_text(file: str, text: str) -> Formatted:
    """Format the text of one file; raises LoadError when it is not YAML the loader reads (every policy file is
    first read as `validate` reads it)."""
    parse(file, text, expand_lists=False)
    result = Formatted(file, text, text)
    pieces: list[str] = []
    line = 1
    for chunk in split_documents(text):
        pieces.append(_format_line_endings(file, chunk, line, result))
        line += chunk.count("\n")
    result.updated = "".join(pieces)
    return result


def _format_line_endings(file: str, chunk: str, first_line: int, result: Formatted) -> str:
    """`_format_document` of `chunk` in the line endings it has: CRLF text is formatted as LF (ruamel.yaml would
    keep a carriage return on comment lines only) and written back with CRLF; an unchanged chunk stays as it was,
    byte for byte."""
    if "\r" not in chunk:
        return _format_document(file, chunk, first_line, result)
    text = chunk.replace(_CRLF, "\n")
    if "\r" in text:
        line = first_line + text.count("\n", 0, text.index("\r"))
        result.notes.append(f"{file}:{line}: not formatted: a carriage return that does not end a line (CR, not CRLF)")
        return chunk
    formatted = _format_document(file, text, first_line, result)
    if formatted == text:
        return chunk
    crlf = chunk.count(_CRLF) * 2 >= chunk.count("\n")  # most lines end in CRLF
    return formatted.replace("\n", _CRLF) if crlf else formatted


#: The Karpenter v1 objects fmt formats, by (apiVersion, kind).
V1_KINDS: Final = frozenset({(NODEPOOL_API_VERSION, NODEPOOL_KIND), (EC2NODECLASS_API_VERSION, EC2NODECLASS_KIND)})


def _policy_kind(data: Any) -> str | None:
    if not isinstance(data, Mapping):
        return None
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):  # not an object fmt formats: left as it is
        return None
    if (api_version, kind) in V1_KINDS:
        return kind
    if kind not in (PROVISIONER_KIND, NODE_TEMPLATE_KIND):
        return None
    return kind if schema_file_for(api_version, kind) is not None else None


def _format_document(file: str, chunk: str, first_line: int, result: Formatted) -> str:
    documents = parse(file, chunk, expand_lists=False)
    if len(documents) != 1 or (kind := _policy_kind(documents[0].data)) is None:
        return chunk
    data = documents[0].data
    name = f"{kind}/{_name(data)}"
    if kind in (NODEPOOL_KIND, EC2NODECLASS_KIND):
        return _format_v1(file, chunk, first_line, result, documents[0])
    schema = schema_file_for(data["apiVersion"], kind)
    violations = schema_violations(data, schema) if schema is not None else []
    if schema is None or violations:
        where = f"{file}:{first_line}"
        if violations:  # the first schema error at its field, as validate reports it
            line, column = documents[0].position(violations[0].path, violations[0].at_key)
            where = f"{file}:{first_line + line - 1}:{column}"
        reason = f": {violations[0].message}" if violations else ""
        result.notes.append(f"{where}: {name} not formatted: it does not match its schema{reason} (see validate)")
        return chunk
    if _already_formatted(chunk, data, kind):
        return chunk

    def edit(document: Any) -> list[str]:
        changes = _defaults(document) if kind == PROVISIONER_KIND else []
        if _canonical_order(document, ORDERS[kind]):
            changes.append("keys in canonical order")
        return changes

    expected = default_provisioner(data) if kind == PROVISIONER_KIND else data
    return _round_trip_edit(chunk, (file, name), first_line, edit, expected, result)


def _round_trip_edit(
    chunk: str, where: tuple[str, str], first_line: int, edit: Callable[[Any], list[str]], expected: Any,
    result: Formatted,
) -> str:
    """`chunk` loaded with ruamel.yaml's round-trip loader, changed by `edit` (which says what it changed) and
    written back (`_rewritten`); `chunk` itself when nothing changed or ruamel refuses it. Long runs of plain list
    items are first set aside (`setaside`), when the result then reads back as `expected`."""
    quick = _edited_without_long_runs(chunk, where, edit, expected)
    if quick is not None:
        updated, changes = quick
        result.changes += [f"{where[1]}: {change}" for change in changes]
        return updated
    yaml = _round_trip(chunk)
    try:
        document = yaml.load(chunk)
    except YAMLError as error:  # read by the loader, refused by ruamel: leave it as it is
        result.notes.append(f"{where[0]}:{first_line}: {where[1]} not formatted: {error}")
        return chunk
    changes = edit(document)
    if not changes:
        return chunk
    return _rewritten(yaml, document, chunk, where, expected, changes, result)


def _edited_without_long_runs(
    chunk: str, where: tuple[str, str], edit: Callable[[Any], list[str]], expected: Any
) -> tuple[str, list[str]] | None:
    """`_round_trip_edit`'s text and changes with the long runs of `chunk` set aside during the round trip; None
    when it has none, or when anything differs from what the whole round trip would give — no change, a refusal,
    a placeholder moved, data that does not read back as `expected` (the caller then does the whole round
    trip)."""
    aside = set_aside(chunk)
    if aside is None:
        return None
    yaml = _round_trip(chunk)
    try:
        document = yaml.load(aside.text)
    except YAMLError:
        return None
    changes = edit(document)
    if not changes:
        return None
    out = io.StringIO()
    yaml.dump(document, out)
    restored = aside.restore(out.getvalue())
    if restored is None:
        return None
    updated = restored.rstrip("\n") + chunk[len(chunk.rstrip("\n")) :]
    try:
        reread = parse(where[0], updated, expand_lists=False)
    except LoadError:
        return None
    if len(reread) != 1 or reread[0].data != expected:
        return None
    return updated, changes


def _rewritten(
    yaml: Any, loaded: Any, chunk: str, where: tuple[str, str], expected: Any, changes: list[str], result: Formatted
) -> str:
    """`loaded` (the round-trip document of `chunk`, edited) written back, with `chunk`'s trailing newlines; it
    must read back as `expected`, or the file is not formatted (`CannotFormat`). `changes` go into `result`."""
    file, name = where
    out = io.StringIO()
    yaml.dump(loaded, out)
    updated = out.getvalue().rstrip("\n") + chunk[len(chunk.rstrip("\n")) :]
    reread = parse(file, updated, expand_lists=False)
    if len(reread) != 1 or reread[0].data != expected:
        raise CannotFormat(f"{name}: the rewritten document would not hold the same data")
    result.changes += [f"{name}: {change}" for change in changes]
    return updated


def _format_v1(file: str, chunk: str, first_line: int, result: Formatted, document: Document) -> str:
    """`_format_document` for a Karpenter v1 NodePool or EC2NodeClass (see the module docstring)."""
    from karpenter_policy.api.v1.admission import admit  # cel-python: only when a file has v1 objects

    data = document.data
    kind = str(data["kind"])
    name = f"{kind}/{_name(data)}"
    admission = admit(data)
    if admission.refusals:
        refusal = admission.refusals[0]
        line, column = document.position(refusal.path, refusal.at_key)
        where = f"{file}:{first_line + line - 1}:{column}"
        refused = f"Karpenter would refuse it: {refusal.message}"
        result.notes.append(f"{where}: {name} not formatted: {refused} (see validate)")
        return chunk
    expected = with_defaults(data, admission.stored)
    if expected == data and _in_order(chunk, data, kind):
        return chunk

    def edit(loaded: Any) -> list[str]:
        changes = [
            f"Karpenter v1's default {render_path(path)}: {_shown(value)} made explicit"
            for path, value in _add_defaults(loaded, admission.stored, ())
        ]
        if _canonical_order(loaded, ORDERS[kind]):
            changes.append("keys in canonical order")
        return changes

    return _round_trip_edit(chunk, (file, name), first_line, edit, expected, result)


def with_defaults(data: Any, stored: Any) -> Any:
    """`data` with every mapping key the stored form has and `data` lacks added (a list's items matched by
    position, when both lists are as long); a value `data` has is never changed, a key it has never removed."""
    if isinstance(data, Mapping) and isinstance(stored, Mapping):
        merged = {key: with_defaults(value, stored.get(key)) for key, value in data.items()}
        merged.update({key: value for key, value in stored.items() if key not in data})
        return merged
    if isinstance(data, list) and isinstance(stored, list) and len(data) == len(stored):
        return [with_defaults(a, b) for a, b in zip(data, stored, strict=True)]
    return data


def _add_defaults(node: Any, stored: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], Any]]:
    """`with_defaults` on a round-trip document, in place: each key added at the end of its mapping (canonical
    order then moves it), with its path and value."""
    added: list[tuple[tuple[str | int, ...], Any]] = []
    if isinstance(node, CommentedMap) and isinstance(stored, Mapping):
        for key, value in node.items():
            added += _add_defaults(value, stored.get(key), (*path, key))
        for key, value in stored.items():
            if key not in node:
                node[key] = _commented(value)
                added.append(((*path, key), value))
    elif isinstance(node, CommentedSeq) and isinstance(stored, list) and len(node) == len(stored):
        for index, (item, default) in enumerate(zip(node, stored, strict=True)):
            added += _add_defaults(item, default, (*path, index))
    return added


def _commented(value: Any) -> Any:
    """A plain value as round-trip nodes (block style, as the documents fmt writes)."""
    if isinstance(value, Mapping):
        return CommentedMap((key, _commented(item)) for key, item in value.items())
    if isinstance(value, list):
        return CommentedSeq(_commented(item) for item in value)
    return value


def _shown(value: Any) -> str:
    """A default as the change line shows it: compact JSON (`[{"nodes": "10%"}]`)."""
    return json.dumps(value, separators=(", ", ": "))


def _in_order(chunk: str, data: Mapping[str, Any], kind: str) -> bool:
    """Whether every mapping of `order.ORDERS[kind]` is in canonical order (a merge key is left to the round
    trip)."""
    if "<<" in chunk:
        return False
    orders = ORDERS[kind]
    for path in orders:
        for mapping in _plain_mappings_at(data, path):
            keys = list(mapping)
            if canonical_keys(keys, orders[path]) != keys:
                return False
    return True


def _name(data: Mapping[str, Any]) -> str:
    """The object's `metadata.name`, `?` when metadata is not a mapping or the name not a string (the schema
    error then says why; fmt reports it and leaves the document as it is)."""
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else "?"


def _already_formatted(chunk: str, data: Mapping[str, Any], kind: str) -> bool:
    """Whether the schema-valid document `data` needs no change — no default to add, every mapping of
    `order.ORDERS` in canonical order — read from the data the loader gave: the round trip through ruamel.yaml
    (~50 ms a document, pure Python) is then skipped. A merge key (`<<:`) is left to the round trip."""
    if "<<" in chunk:
        return False
    if kind == PROVISIONER_KIND:
        spec = data.get("spec")
        requirements = spec.get("requirements") if isinstance(spec, Mapping) else None
        if default_requirements(list(requirements or [])):
            return False
    return _in_order(chunk, data, kind)


def _plain_mappings_at(data: Mapping[str, Any], path: tuple[str, ...]) -> list[Mapping[str, Any]]:
    """The mappings at `path` (`*`: every list item) of plain loaded data."""
    found: list[Any] = [data]
    for part in path:
        deeper: list[Any] = []
        for node in found:
            if part == "*" and isinstance(node, list):
                deeper += node
            elif isinstance(node, Mapping) and part in node:
                deeper.append(node[part])
        found = deeper
    return [node for node in found if isinstance(node, Mapping)]


def _round_trip(chunk: str) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = _NO_WRAP
    mapping, sequence, offset = _indentation(chunk)
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    yaml.explicit_start = chunk.startswith("---")
    return yaml


def _indentation(text: str) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) the document uses; Kubernetes' usual 2, 4, 2 by default."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    mapping = sequence = offset = None
    for above, below in zip(lines, lines[1:], strict=False):
        if not above.rstrip().endswith(":") or above.lstrip().startswith("- "):
            continue
        parent = len(above) - len(above.lstrip())
        child = len(below) - len(below.lstrip())
        if child <= parent:
            continue
        if below.lstrip().startswith("- "):
            if offset is None:
                offset = child - parent
                sequence = offset + 2
        elif mapping is None:
            mapping = child - parent
    return mapping or 2, sequence or 4, offset if offset is not None else 2


def _defaults(document: CommentedMap) -> list[str]:
    """Append the requirements Karpenter's webhook adds, in the style of those there; what was added."""
    spec = document.get("spec")
    if not isinstance(spec, CommentedMap):
        return []
    existing = spec.get("requirements")
    added = default_requirements(list(existing or []))
    if not added:
        return []
    if not isinstance(existing, CommentedSeq):
        existing = CommentedSeq()
        spec["requirements"] = existing
    following = take_trailing_lines(spec, "requirements") if existing else ""  # about what comes after the list
    quote, flow = _value_style(existing)
    for requirement in added:
        values = CommentedSeq(quote(v) for v in requirement["values"])
        if flow:
            values.fa.set_flow_style()
        existing.append(CommentedMap([("key", requirement["key"]), ("operator", requirement["operator"]),
                                      ("values", values)]))
    put_trailing_lines(spec, "requirements", following)
    return [f"Karpenter's default {r['key']} {r['operator']} [{', '.join(r['values'])}] made explicit" for r in added]


def _value_style(requirements: CommentedSeq) -> tuple[Any, bool]:
    """How the file writes requirement values: the quoting of the first one, and flow (`[a, b]`) or block lists."""
    for requirement in requirements:
        values = requirement.get("values") if isinstance(requirement, Mapping) else None
        if isinstance(values, CommentedSeq) and values:
            first = values[0]
            quote: Any = (
                DoubleQuotedScalarString if isinstance(first, DoubleQuotedScalarString)
                else SingleQuotedScalarString if isinstance(first, SingleQuotedScalarString)
                else str
            )
            return quote, values.fa.flow_style()
    return str, True


def _canonical_order(document: CommentedMap, orders: Mapping[tuple[str, ...], tuple[str, ...]]) -> bool:
    """Reorder every mapping `orders` names (outermost first); True when any key moved."""
    moved = False
    for path in sorted(orders, key=len):
        for mapping, owner in _mappings_at(document, path):
            moved |= reorder(mapping, orders[path], mapping.lc.col or 0, owner)
    return moved


def _mappings_at(
    document: CommentedMap, path: tuple[str, ...]
) -> list[tuple[CommentedMap, tuple[CommentedMap, Any] | None]]:
    """The mappings at `path` (`*`: every list item) with the mapping and key holding each (None for the
    document)."""
    found: list[tuple[Any, tuple[CommentedMap, Any] | None]] = [(document, None)]
    for part in path:
        deeper: list[tuple[Any, tuple[CommentedMap, Any] | None]] = []
        for node, _ in found:
            if part == "*" and isinstance(node, CommentedSeq):
                deeper += [(item, None) for item in node]
            elif isinstance(node, CommentedMap) and part in node:
                deeper.append((node[part], (node, part)))
        found = deeper
    return [(node, owner) for node, owner in found if isinstance(node, CommentedMap)]
