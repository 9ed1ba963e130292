"""`pin`: write what PinningPolicy rules require (nodeSelector entries, tolerations) into workload manifests.

Without `--write` it prints a unified diff and exits 1 when any manifest needs a change (like `black --check`);
with `--write` it rewrites the files in place, all or nothing (`write_plans`): every changed file is first
checked — still as it was read, writable, its owner keepable — and its new content staged next to it
(`filestaging`); only when all are ready are they renamed into place, each keeping its mode, owner and group. A
symbolic link is never written through (nothing is then written), and a file edited between reading and writing
is not overwritten: nothing is written and the run says so. The temporary files a killed `pin --write` left are
removed. The report names every file written and not written.

Every line that a rule does not change stays byte-identical: the edits are splices into the original text at
the positions the YAML parser reports (a value replaced in the quoting style it had; new entries added after
the last entry of their mapping or list, in the indentation and style of the file — block or flow), not a
re-serialisation of the whole file. A YAML round-trip dumper (ruamel.yaml included) re-flows what it did not
need to touch: it re-indents lists and re-aligns trailing comments. Each edited file is parsed again and must
hold exactly the original data with the pins applied — otherwise it is not written and the run fails (exit 2).

The result of pinning must be schedulable: when the workload scheduling module is available (`policy.schedule`),
every pinned workload is proven to fit a provisioner of the policies before anything is written.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from karpenter_policy.api.violations import (
    ERROR,
    INVALID_REPLICAS,
    PARSE_ERROR,
    PINNING_CONFLICT,
    WORKLOAD_UNSCHEDULABLE,
)
from karpenter_policy.checks.findings import CommandOutput, Finding, Report
from karpenter_policy.checks.pinning import (
    Change,
    PinTarget,
    Rule,
    apply_changes,
    bind_provisioners,
    changes_for,
    resolve,
    rules_from_documents,
    target_findings,
    workload_of,
)
from karpenter_policy.checks.reporters import json_text, render
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.checks.source.loader import (
    TEMPLATE_SUFFIX,
    Document,
    LoadError,
    UnreadableFile,
    discover,
    parse,
    read_text,
)
from karpenter_policy.checks.source.workloads import WorkloadError, read_workloads, workload_from_data
from karpenter_policy.commands.filestaging import (
    LEFTOVER_NOTE,
    WriteOutcome,
    remove_leftovers,
    rewrite_all,
    rewrite_one,
)
from karpenter_policy.commands.filestaging import unified_diff as file_diff

__all__ = [
    "FilePlan",
    "PinResult",
    "Policies",
    "UnsafeEdit",
    "WriteOutcome",
    "load_policies",
    "pin_command",
    "pin_paths",
    "pin_text",
    "write_atomically",
    "write_plans",
]


class UnsafeEdit(Exception):
    """A manifest that cannot be edited without touching lines no rule changes (aliases, odd layouts)."""


# --- planning one file --------------------------------------------------------------------------------------


@dataclass(slots=True)
class PinnedWorkload:
    file: str
    workload: PinTarget
    changes: list[Change]
    pinned_data: Mapping[str, Any] = field(repr=False)
    line: int = 0  # where the pod template is (a Pod's spec), as `policy.workloads` places workloads
    column: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "object": self.workload.ref_in(self.file),
            "namespace": self.workload.namespace,
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(slots=True)
class FilePlan:
    """What pinning does to one file: its text before and after, the workloads changed, the findings."""

    file: str
    original: str
    updated: str
    pinned: list[PinnedWorkload] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list, repr=False)

    @property
    def changed(self) -> bool:
        return self.updated != self.original

    def unified_diff(self) -> str:
        return file_diff(self.file, self.original, self.updated)


def pin_text(file: str, text: str, rules: Sequence[Rule]) -> tuple[FilePlan, list[Finding]]:
    """Plan the pins of one manifest file's text; raises LoadError (unparsable) or UnsafeEdit."""
    documents = parse(file, text)
    newline = "\r\n" if "\r\n" in text else "\n"
    edits: list[_Edit] = []
    findings: list[Finding] = []
    pinned: list[PinnedWorkload] = []
    expected: list[Any] = [doc.data for doc in documents]
    for index, doc in enumerate(documents):
        workload = workload_of(doc.data)
        if workload is None:
            continue
        pins = resolve(rules, workload.metadata, workload.kind, workload.namespace, workload.name, workload.spec)
        if not pins.rules:
            continue
        findings += [f for f in target_findings(doc, workload, rules) if f.rule == PINNING_CONFLICT]
        changes = changes_for(workload.spec, pins)
        if not changes:
            continue
        edits += _Editor(text, doc, workload, newline, len(edits)).edits(changes)
        data = copy.deepcopy(doc.data)
        spec = data
        for part in workload.spec_path:
            spec = spec[part]
        apply_changes(spec, changes)
        expected[index] = data
        line, column = doc.position(workload.template_path or ("spec",))
        pinned.append(PinnedWorkload(file, workload, changes, data, line, column))
    updated = _splice(text, edits)
    if updated != text:
        _verify(file, updated, expected)
    return FilePlan(file, text, updated, pinned, documents), findings


def _verify(file: str, updated: str, expected: Sequence[Any]) -> None:
    """The edited text must parse to the original documents with the pins applied, and nothing else."""
    try:
        after = parse(file, updated)
    except LoadError as error:
        raise UnsafeEdit(f"the edited file would not parse ({error.message} at line {error.line})") from None
    if len(after) != len(expected) or any(a.data != e for a, e in zip(after, expected, strict=False)):
        raise UnsafeEdit("the edited file does not hold the expected data; it is left as it is")


# --- edits --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class _Edit:
    start: int
    order: int
    end: int
    text: str


def _splice(text: str, edits: Iterable[_Edit]) -> str:
    out: list[str] = []
    cursor = 0
    for edit in sorted(edits):
        if edit.start < cursor:
            raise UnsafeEdit("two edits overlap")
        out.append(text[cursor : edit.start])
        out.append(edit.text)
        cursor = edit.end
    out.append(text[cursor:])
    return "".join(out)


_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]*")
_YAML11_SPECIAL = re.compile(
    r"(?i:y|n|yes|no|true|false|on|off|null|~)|[-+]?[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?|0x[0-9a-fA-F_]+|"
    r"0o?[0-7_]+|0b[01_]+|[-+]?\.(inf|Inf|INF|nan|NaN|NAN)|[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?"
)


def render_scalar(value: str, style: str | None = None) -> str:
    """`value` as a YAML string scalar: in `style` (`'`, `"`, None: plain) when that spells the same string
    under YAML 1.1 and 1.2, else double-quoted."""
    if style == "'" and "\n" not in value:
        return "'" + value.replace("'", "''") + "'"
    if style is None and _PLAIN_SAFE.fullmatch(value) and not _YAML11_SPECIAL.fullmatch(value):
        try:
            if yaml.safe_load(value) == value:
                return value
        except yaml.YAMLError:
            pass
    return json.dumps(value, ensure_ascii=False)


def _render_toleration_flow(toleration: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_render_value(v)}" for k, v in toleration.items()) + "}"


def _render_value(value: Any, style: str | None = None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return render_scalar(str(value), style)


class _Editor:
    """The edits that add `changes` to one workload's pod spec, in the file's own layout."""

    def __init__(self, text: str, doc: Document, workload: PinTarget, newline: str, order: int) -> None:
        self.text, self.doc, self.workload, self.newline = text, doc, workload, newline
        self.order = order
        self.result: list[_Edit] = []
        spec_key, spec = _child(doc.node, workload.spec_path)
        if spec is None:  # a Pod template without a spec at all: too unusual to guess a layout for
            raise UnsafeEdit(f"{workload.object_ref} has no spec to pin")
        if not isinstance(spec, MappingNode):
            raise UnsafeEdit(f"{workload.object_ref}: spec is not a mapping")
        self.spec_key, self.spec = spec_key, spec
        self.step = _indent_step(doc.node)
        self.seq_offset, self.item_offset = _sequence_layout(doc.node)

    def _add(self, start: int, end: int, text: str) -> None:
        self.result.append(_Edit(start, self.order, end, text))
        self.order += 1

    def edits(self, changes: Sequence[Change]) -> list[_Edit]:
        selector = [c for c in changes if c.field == "nodeSelector"]
        tolerations = [c for c in changes if c.field == "tolerations"]
        appended: list[tuple[str, Node | None]] = []  # new keys of the spec, in order
        if selector:
            node = _value_of(self.spec, "nodeSelector")
            if node is None or _is_null(node):
                appended.append(("nodeSelector", node))
            else:
                self._selector(node, selector)
        if tolerations:
            node = _value_of(self.spec, "tolerations")
            if node is None or _is_null(node):
                appended.append(("tolerations", node))
            else:
                self._tolerations(node, tolerations)
        for key, null_node in appended:
            mine = selector if key == "nodeSelector" else tolerations
            if null_node is not None:
                self._replace_null(null_node, key, mine)
        new_keys = [(key, selector if key == "nodeSelector" else tolerations) for key, n in appended if n is None]
        if new_keys:
            self._new_spec_keys(new_keys)
        return self.result

    # nodeSelector ----------------------------------------------------------------------------------------

    def _selector(self, node: Node, changes: Sequence[Change]) -> None:
        if not isinstance(node, MappingNode):
            raise UnsafeEdit(f"{self.workload.object_ref}: spec.nodeSelector is not a mapping")
        additions: list[Change] = []
        key_style: str | None = None
        value_style: str | None = None
        for key_node, value_node in node.value:
            key_style = key_style or getattr(key_node, "style", None)
            value_style = value_style or getattr(value_node, "style", None)
        for change in changes:
            value_node = _value_of(node, change.key)
            if value_node is None:
                additions.append(change)
                continue
            if not isinstance(value_node, ScalarNode):
                raise UnsafeEdit(f"{self.workload.object_ref}: nodeSelector {change.key} is not a scalar")
            style = value_node.style if value_node.style in ("'", '"') else None
            self._check_span(value_node)
            self._add(value_node.start_mark.index, value_node.end_mark.index, render_scalar(change.value, style))
        if not additions:
            return
        quote = key_style if key_style in ("'", '"') else None
        vquote = value_style if value_style in ("'", '"') else None
        entries = [(render_scalar(c.key, quote), render_scalar(c.value, vquote)) for c in additions]
        if node.flow_style:
            self._flow_append(node, "}", [f"{k}: {v}" for k, v in entries])
        else:
            column = node.value[0][0].start_mark.column
            lines = [" " * column + f"{k}: {v}" for k, v in entries]
            self._block_append(node, lines)

    # tolerations -----------------------------------------------------------------------------------------

    def _tolerations(self, node: Node, changes: Sequence[Change]) -> None:
        if not isinstance(node, SequenceNode):
            raise UnsafeEdit(f"{self.workload.object_ref}: spec.tolerations is not a list")
        items = [dict(c.toleration or {}) for c in changes]
        if node.flow_style:
            self._flow_append(node, "]", [_render_toleration_flow(t) for t in items])
            return
        dash = node.start_mark.column
        first = node.value[0]
        flow_items = isinstance(first, MappingNode) and first.flow_style
        offset = first.start_mark.column - dash if first.start_mark.line == node.start_mark.line else 2
        lines: list[str] = []
        for toleration in items:
            lines += self._toleration_lines(toleration, dash, max(offset, 2), bool(flow_items))
        self._block_append(node, lines)

    def _toleration_lines(self, toleration: Mapping[str, Any], dash: int, offset: int, flow: bool) -> list[str]:
        if flow:
            return [" " * dash + "-" + " " * (offset - 1) + _render_toleration_flow(toleration)]
        lines = []
        for index, (key, value) in enumerate(toleration.items()):
            prefix = " " * dash + "-" + " " * (offset - 1) if index == 0 else " " * (dash + offset)
            lines.append(f"{prefix}{key}: {_render_value(value)}")
        return lines

    # new keys of the spec --------------------------------------------------------------------------------

    def _new_spec_keys(self, keys: Sequence[tuple[str, Sequence[Change]]]) -> None:
        spec = self.spec
        if spec.flow_style:
            parts = [f"{key}: {self._flow_value(key, changes)}" for key, changes in keys]
            self._flow_append(spec, "}", parts)
            return
        if not spec.value:
            raise UnsafeEdit(f"{self.workload.object_ref}: empty block spec")
        column = spec.value[0][0].start_mark.column
        lines: list[str] = []
        for key, changes in keys:
            lines.append(" " * column + f"{key}:")
            if key == "nodeSelector":
                lines += [
                    " " * (column + self.step) + f"{render_scalar(c.key)}: {render_scalar(c.value)}" for c in changes
                ]
            else:
                for change in changes:
                    lines += self._toleration_lines(
                        dict(change.toleration or {}), column + self.seq_offset, self.item_offset, False
                    )
        self._block_append(spec, lines)

    def _flow_value(self, key: str, changes: Sequence[Change]) -> str:
        if key == "nodeSelector":
            return "{" + ", ".join(f"{render_scalar(c.key)}: {render_scalar(c.value)}" for c in changes) + "}"
        return "[" + ", ".join(_render_toleration_flow(dict(c.toleration or {})) for c in changes) + "]"

    def _replace_null(self, node: Node, key: str, changes: Sequence[Change]) -> None:
        """`nodeSelector:` / `nodeSelector: null` / `tolerations: ~` — the null becomes a flow collection, or for
        an empty value (nothing written after the colon) a block under the key."""
        assert isinstance(node, ScalarNode)
        self._check_span(node)
        if node.start_mark.index == node.end_mark.index:  # `key:` with nothing after it
            key_node = next(k for k, v in self.spec.value if v is node)
            column = key_node.start_mark.column
            if key == "nodeSelector":
                lines = [
                    " " * (column + self.step) + f"{render_scalar(c.key)}: {render_scalar(c.value)}" for c in changes
                ]
            else:
                lines = []
                for change in changes:
                    lines += self._toleration_lines(
                        dict(change.toleration or {}), column + self.seq_offset, self.item_offset, False
                    )
            at = self._line_end(node.end_mark.index)
            self._add(at, at, "".join(self.newline + line for line in lines))
            return
        self._add(node.start_mark.index, node.end_mark.index, self._flow_value(key, changes))

    # text positions ----------------------------------------------------------------------------------------

    def _check_span(self, node: Node) -> None:
        """An alias carries its anchor's position, which may be anywhere: refuse nodes outside the spec."""
        start, end = self.spec.start_mark.index, self.spec.end_mark.index
        if not start <= node.start_mark.index <= node.end_mark.index <= max(end, start):
            raise UnsafeEdit(f"{self.workload.object_ref}: the pod spec uses YAML aliases; pin it by hand")

    def _line_end(self, index: int) -> int:
        end = self.text.find("\n", index)
        if end < 0:
            return len(self.text)
        return end - 1 if end > 0 and self.text[end - 1] == "\r" else end

    def _block_append(self, node: Node, lines: Sequence[str]) -> None:
        """Add `lines` after the last entry of a block mapping or list (after its trailing comment)."""
        leaf = _last_leaf(node)
        self._check_span(leaf)
        index = leaf.end_mark.index
        line_start = self.text.rfind("\n", 0, index) + 1
        if isinstance(leaf, ScalarNode) and leaf.style in ("|", ">") and not self.text[line_start:index].strip():
            # A block scalar ends at the start (or in the indentation) of the line after it.
            self._add(line_start, line_start, "".join(line + self.newline for line in lines))
            return
        at = self._line_end(index)
        self._add(at, at, "".join(self.newline + line for line in lines))

    def _flow_append(self, node: Node, closing: str, parts: Sequence[str]) -> None:
        """Add `parts` before the closing bracket of a flow collection."""
        self._check_span(node)
        end = node.end_mark.index
        close = self.text.rfind(closing, node.start_mark.index, end)
        if close < 0:
            raise UnsafeEdit(f"{self.workload.object_ref}: cannot find the end of a flow collection")
        before = close
        while before > node.start_mark.index and self.text[before - 1] in " \t\r\n":
            before -= 1
        opening = self.text[before - 1] in "{["
        joined = ", ".join(parts)
        self._add(before, before, joined if opening else ", " + joined)


def _child(root: Node, path: Sequence[str | int]) -> tuple[Node | None, Node | None]:
    """The key node and value node at `path` (None when absent)."""
    node: Node | None = root
    key: Node | None = None
    for part in path:
        if not isinstance(node, MappingNode):
            return None, None
        found = next(((k, v) for k, v in node.value if k.value == part), None)
        if found is None:
            return None, None
        key, node = found
    return key, node


def _value_of(node: MappingNode, key: str) -> Node | None:
    return next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == key), None)


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _last_leaf(node: Node) -> Node:
    while True:
        if isinstance(node, MappingNode) and not node.flow_style and node.value:
            node = node.value[-1][1]
        elif isinstance(node, SequenceNode) and not node.flow_style and node.value:
            node = node.value[-1]
        else:
            return node


def _block_mappings(node: Node, depth: int = 0) -> Iterable[tuple[Node, Node]]:
    """(key, value) pairs of the tree, breadth-first enough for layout detection (bounded depth)."""
    if depth > 12:
        return
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key, value
            yield from _block_mappings(value, depth + 1)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            yield from _block_mappings(item, depth + 1)


def _indent_step(root: Node) -> int:
    """The file's mapping indentation: how far a nested block mapping's keys sit right of their parent key."""
    for key, value in _block_mappings(root):
        if isinstance(value, MappingNode) and not value.flow_style and value.value:
            step = int(value.value[0][0].start_mark.column - key.start_mark.column)
            if step > 0 and value.value[0][0].start_mark.line > key.start_mark.line:
                return step
    return 2


def _sequence_layout(root: Node) -> tuple[int, int]:
    """How the file indents a block list under its key (`containers:` then `- name` at +0 or +2…) and where an
    item's content starts after its dash (`- name` → 2, `-   name` → 4)."""
    for key, value in _block_mappings(root):
        if isinstance(value, SequenceNode) and not value.flow_style and value.value:
            offset = value.start_mark.column - key.start_mark.column
            first = value.value[0]
            item = first.start_mark.column - value.start_mark.column
            if first.start_mark.line == value.start_mark.line and item >= 2:
                return max(offset, 0), item
            return max(offset, 0), 2
    return 2, 2


# --- the command --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class PinResult:
    """What `pin` planned (and, with write, did) over a set of workload files."""

    plans: list[FilePlan] = field(default_factory=list)
    report: Report = field(default_factory=Report)
    skipped_templates: list[str] = field(default_factory=list)
    unsafe: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> list[FilePlan]:
        return [p for p in self.plans if p.changed]

    @property
    def pinned(self) -> list[PinnedWorkload]:
        return [w for p in self.plans for w in p.pinned]


def pin_paths(paths: Iterable[str], rules: Sequence[Rule], report: Report | None = None) -> PinResult:
    """Plan the pins of every workload manifest under `paths` (nothing is written here)."""
    result = PinResult(report=report if report is not None else Report())
    files, missing = discover(paths)
    for path in missing:
        result.report.findings.append(Finding(PARSE_ERROR, ERROR, f"no such file or directory: {path}", path, 0, 0))
        result.report.could_not_run = True
    for file in files:
        if file.endswith(TEMPLATE_SUFFIX):
            result.skipped_templates.append(file)
            continue
        result.report.files += 1
        try:
            text = read_text(file)
            plan, findings = pin_text(file, text, rules)
        except LoadError as error:
            result.report.findings.append(Finding(error.rule, ERROR, error.message, file, error.line, error.column))
            result.report.could_not_run |= isinstance(error, UnreadableFile)
            continue
        except UnsafeEdit as error:
            result.unsafe.append((file, str(error)))
            continue
        for doc in plan.documents:
            if workload_of(doc.data) is not None:
                result.report.kinds[str(doc.data.get("kind"))] += 1
            elif isinstance(doc.data, Mapping):
                result.report.skipped[str(doc.data.get("kind"))] += 1
        plan.documents = []
        result.report.findings += findings
        result.plans.append(plan)
    return result


def write_plans(plans: Sequence[FilePlan]) -> WriteOutcome:
    """Rewrite the files of `plans`, all or nothing (see the module docstring)."""
    return rewrite_all(plans, "pin")


def write_atomically(file: str, text: str) -> None:
    """Replace `file`'s content by `text` (UTF-8, keeping a BOM it had), as `write_plans` does for one file;
    raises NotWritable."""
    rewrite_one(file, text, "pin")


#: Proves pinned workloads schedulable: (pinned workloads) → findings (`workload-unschedulable`).
Prover = Callable[[Sequence[PinnedWorkload]], list[Finding]]


@dataclass(slots=True)
class Policies:
    """The policies pinning works from: the report of checking them, the rules (provisioners bound), and the
    proven provisioners (empty when not solved)."""

    report: Report
    rules: list[Rule]
    checked: list[Any] = field(default_factory=list)
    solved: bool = False
    catalog: Any = None


def load_policies(
    paths: Sequence[str],
    *,
    solve: bool,
    catalog: Any = None,
    values: Mapping[str, Any] | None = None,
) -> Policies:
    """Validate (with `solve`: check, with the solver) the policies under `paths`; bind their pinning rules to
    their provisioners."""
    repository = load_repository(paths, values, prove=solve, catalog=catalog)
    report = repository.report
    rules, findings = bind_provisioners(
        rules_from_documents(repository.pinning_documents), repository.taints, repository.nodepool_taints,
        repository.static_nodepools,
    )
    report.findings += findings
    return Policies(report, rules, list(repository.checked), solve, catalog)


def pin_command(
    paths: Sequence[str],
    policies: Policies,
    *,
    write: bool = False,
    output: str = "text",
    prove: Prover | None = None,
    notes: Sequence[str] = (),
) -> CommandOutput:
    """Run `karpenter-policy pin` on loaded policies. Exit 0: nothing to change (or all written); 1: changes needed
    without --write, or errors (invalid policies, conflicting rules, a pinned workload that no provisioner can
    take — nothing is then written); 2: the tool could not run (unreadable file, an edit it cannot make safely).
    """
    rules = policies.rules
    if policies.report.errors or policies.report.could_not_run:
        verb = "checked" if policies.solved else "validated"
        text = render(policies.report, "json" if output == "json" else "text", verb)
        message = "" if output == "json" else "the policies have errors: nothing pinned\n"
        exit_code = 2 if policies.report.could_not_run else 1
        return CommandOutput(exit_code, text if output == "json" else "", (text if output != "json" else "") + message)
    result = pin_paths(paths, rules)
    if prove is not None and result.pinned:
        result.report.findings += prove(result.pinned)
    errors = result.report.errors
    could_not_run = result.report.could_not_run or bool(result.unsafe)
    changed = result.changed
    outcome: WriteOutcome | None = None
    removed = remove_leftovers(plan.file for plan in result.plans) if write else []
    if write and not errors and not could_not_run:
        outcome = write_plans(changed)
        could_not_run = bool(outcome.failed)
    written = outcome is not None and not outcome.failed
    if output == "json":
        exit_code = 2 if could_not_run else 1 if errors or (changed and not write) else 0
        return CommandOutput(exit_code, _json(result, write, outcome, rules, notes), "")
    stderr: list[str] = list(notes)
    stderr += [f"{path}: removed: {LEFTOVER_NOTE}" for path in removed]
    for file, reason in result.unsafe:
        stderr.append(f"{file}: error: cannot pin safely: {reason}")
    for file in result.skipped_templates:
        stderr.append(f"{file}: skipped: a template (*.yaml.j2) is pinned in its source, not its rendering")
    if result.report.findings:
        stderr.append(render(result.report, "text", "pinned").rstrip("\n").rsplit("\n", 1)[0])
    workloads = sum(1 for plan in changed for _ in plan.pinned)
    plural = "s" if workloads != 1 else ""
    files = f"{len(changed)} file{'s' if len(changed) != 1 else ''}"
    stdout = ""
    if not rules:
        stderr.append("no PinningPolicy rules in the policies: nothing to pin")
    if written:
        stdout = "".join(_describe(plan) for plan in changed)
        stderr.append(f"pinned {workloads} workload{plural} in {files}" if changed else "every workload is pinned")
        exit_code = 0
    elif outcome is not None:  # the write failed: say exactly what was and was not written
        exit_code = 2
        stdout = "".join(_describe(plan) for plan in changed if plan.file in outcome.written)
        stderr += [f"{file}: error: not written: {reason}" for file, reason in outcome.failed]
        if outcome.written:
            stderr.append(f"written: {', '.join(outcome.written)}")
            unwritten = [file for file, _ in outcome.failed] + outcome.untouched
            stderr.append(f"not written: {', '.join(unwritten)}")
        else:
            stderr.append(f"nothing written: all {files} are as they were")
    elif could_not_run:
        exit_code = 2
        stderr.append("nothing written")
    elif errors:
        exit_code = 1
        stderr.append("nothing written" if write else f"{workloads} workload{plural} in {files} would be pinned")
        stdout = "" if write else "".join(plan.unified_diff() for plan in changed)
    else:
        stdout = "".join(plan.unified_diff() for plan in changed)
        exit_code = 1 if changed else 0
        stderr.append(
            f"{workloads} workload{plural} in {files} would be pinned (run with --write)"
            if changed
            else "every workload is pinned"
        )
    return CommandOutput(exit_code, stdout, "\n".join(stderr) + "\n" if stderr else "")


def _describe(plan: FilePlan) -> str:
    lines = []
    for pinned in plan.pinned:
        what = ", ".join(
            f"nodeSelector {c.key}={c.value}" if c.field == "nodeSelector" else "a toleration" for c in pinned.changes
        )
        lines.append(f"{plan.file}: pinned {pinned.workload.ref_in(plan.file)}: {what}\n")
    return "".join(lines)


def _json(
    result: PinResult, write: bool, outcome: WriteOutcome | None, rules: Sequence[Rule], notes: Sequence[str]
) -> str:
    written = set(outcome.written) if outcome is not None else set()
    document = {
        "notes": list(notes),
        "files": [
            {
                "file": plan.file,
                "diff": plan.unified_diff(),
                "workloads": [p.to_json() for p in plan.pinned],
                "written": plan.file in written,
            }
            for plan in result.changed
        ],
        "write_errors": [{"file": f, "reason": r} for f, r in outcome.failed] if outcome is not None else [],
        "findings": [f.to_json() for f in result.report.sorted_findings()],
        "unsafe": [{"file": f, "reason": r} for f, r in result.unsafe],
        "skipped_templates": result.skipped_templates,
        "summary": {
            "rules": len(rules),
            "files": result.report.files,
            "changed_files": len(result.changed),
            "pinned_workloads": len(result.pinned),
            "errors": result.report.errors,
            "write": write,
            "written": outcome is not None and not outcome.failed,
        },
    }
    return json_text(document)


def schedulability_prover(policies: Policies, paths: Sequence[str]) -> tuple[Prover | None, list[str]]:
    """The prover of pinned workloads: every workload under `paths` (DaemonSets too: their overhead counts) is
    placed on the proven provisioners of the policies, the pinned ones as pinned; a pinned workload that no
    provisioner can take is a `workload-unschedulable` error. None (and why) when it cannot be built."""
    if not policies.solved:
        return None, ["note: the pinned workloads are not proven schedulable (--no-prove)"]
    from karpenter_policy.checks.proof.placement import schedule_workloads  # the solver (z3) only when proving

    checked = policies.checked
    catalog = policies.catalog

    def prove(pinned: Sequence[PinnedWorkload]) -> list[Finding]:
        found = read_workloads(paths)
        replacements: dict[tuple[str, int, int], Any] = {}
        for p in pinned:
            try:
                replacement = workload_from_data(p.pinned_data, p.file, p.line, p.column)
            except WorkloadError:
                continue  # check reports the malformed spec; pinning did not make it so
            if replacement is not None:
                replacements[(p.file, p.line, p.column)] = replacement
        workloads = [replacements.get((w.file, w.line, w.column), w) for w in found.workloads]
        # a workload whose replicas no plan can hold is not proven, and says so (check reports other malformed specs)
        findings = [f for f in found.findings if f.rule == INVALID_REPLICAS]
        pinned_keys = set(replacements)
        for placement in schedule_workloads(checked, workloads, catalog):
            w = placement.workload
            if placement.schedulable or (w.file, w.line, w.column) not in pinned_keys:
                continue
            message = f"after pinning, {placement.message()}"
            findings.append(Finding(WORKLOAD_UNSCHEDULABLE, ERROR, message, w.file, w.line, w.column, w.ref))
        return findings

    return prove, []
