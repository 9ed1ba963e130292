"""`migrate --workloads APPS`: workloads that select a Provisioner by `karpenter.sh/provisioner-name` select its
NodePool by `karpenter.sh/nodepool` instead.

Karpenter v1 labels its nodes `karpenter.sh/nodepool=<name>` and never `karpenter.sh/provisioner-name`, so a pod
that still selects the old label stays pending (aws/karpenter-provider-aws#5645). `migrate` keeps each
Provisioner's name for its NodePool, so renaming the key is the whole change: in the pod spec of every workload
(`checks.pinning.workload_of`: Pods, pod templates, controllers, CronJobs), the `nodeSelector` key and the `key` of
each `matchExpressions` entry of node affinity (required and preferred). An entry is renamed only when every
Provisioner it names was migrated (a `nodeSelector` value, the `In`/`NotIn` values; `Exists`/`DoesNotExist` only
when every Provisioner read was); otherwise it stays and a note says why.

The edits are splices into the text at the positions the YAML parser reports, as `pin` makes them (a key
replaced in the quoting style it had, `pin.render_scalar`): every other byte stays. Each edited file is parsed
again and must hold exactly the original data with the keys renamed, or it is not written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from karpenter_policy.checks.pinning import workload_of
from karpenter_policy.checks.source.loader import LoadError, parse
from karpenter_policy.commands.pin import render_scalar
from karpenter_policy.model.labels import NODEPOOL as NODEPOOL_LABEL
from karpenter_policy.model.labels import PROVISIONER_NAME

__all__ = ["NODEPOOL_LABEL", "RenamedFile", "rename_selectors"]

_AFFINITY = ("affinity", "nodeAffinity")


@dataclass(slots=True)
class RenamedFile:
    """A workload file before and after, and what was (not) renamed, for the report."""

    file: str
    original: str
    updated: str
    renamed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.updated != self.original


def _entry(node: Node | None, key: str) -> tuple[Node, Node] | None:
    if not isinstance(node, MappingNode):
        return None
    return next(((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == key), None)


def _at(node: Node | None, path: Iterable[str | int]) -> Node | None:
    for part in path:
        if isinstance(part, int):
            node = node.value[part] if isinstance(node, SequenceNode) and part < len(node.value) else None
        else:
            found = _entry(node, part)
            node = found[1] if found is not None else None
    return node


def _items(node: Node | None) -> list[Node]:
    """The mapping items of a sequence (what plain data reads as dicts)."""
    return [item for item in node.value if isinstance(item, MappingNode)] if isinstance(node, SequenceNode) else []


def _expressions(affinity: Node | None) -> list[Node]:
    """The `matchExpressions` entries of a nodeAffinity: required terms, then preferred ones."""
    found: list[Node] = []
    required = _at(affinity, ("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    for term in _items(required):
        found += _items(_at(term, ("matchExpressions",)))
    for preferred in _items(_at(affinity, ("preferredDuringSchedulingIgnoredDuringExecution",))):
        found += _items(_at(preferred, ("preference", "matchExpressions")))
    return found


def _rename_in_data(spec: Any) -> None:
    """The same renames on plain data (what the edited text must hold)."""
    selector = spec.get("nodeSelector") if isinstance(spec, dict) else None
    if isinstance(selector, dict) and PROVISIONER_NAME in selector:
        spec["nodeSelector"] = {(NODEPOOL_LABEL if k == PROVISIONER_NAME else k): v for k, v in selector.items()}


def rename_selectors(
    file: str, text: str, migrated: frozenset[str], everything_migrated: bool
) -> RenamedFile:
    """`text` with the workloads' `karpenter.sh/provisioner-name` selectors renamed (module doc). Raises LoadError
    when the file is not YAML the loader reads."""
    result = RenamedFile(file, text, text)
    documents = parse(file, text, expand_lists=False)
    edits: list[tuple[int, int, str]] = []
    expected: list[Any] = []
    for doc in documents:
        data = copy.deepcopy(doc.data)
        expected.append(data)
        workload = workload_of(doc.data)
        if workload is None:
            continue
        spec_path = workload.spec_path
        spec_node = _at(doc.node, spec_path)
        spec_data: Any = data
        for part in spec_path:
            spec_data = spec_data[part]
        ref = workload.object_ref
        selector = _entry(spec_node, "nodeSelector")
        if selector is not None:
            found = _entry(selector[1], PROVISIONER_NAME)
            if found is not None and _entry(selector[1], NODEPOOL_LABEL) is None:
                key_node, value_node = found
                name = value_node.value if isinstance(value_node, ScalarNode) else None
                if name in migrated:
                    edits.append(_rename(key_node))
                    _rename_in_data(spec_data)
                    result.renamed.append(f"{ref}: nodeSelector {PROVISIONER_NAME}: {name}")
                else:
                    result.kept.append(f"{ref}: nodeSelector {PROVISIONER_NAME}: {name} (not migrated)")
        affinity = _at(spec_node, _AFFINITY)
        data_expressions = _data_expressions(spec_data)
        for node, entry in zip(_expressions(affinity), data_expressions, strict=False):
            key = _entry(node, "key")
            if key is None or not isinstance(key[1], ScalarNode) or key[1].value != PROVISIONER_NAME:
                continue
            values = entry.get("values") or []
            named = all(str(v) in migrated for v in values) if values else everything_migrated
            if named:
                edits.append(_rename(key[1]))
                entry["key"] = NODEPOOL_LABEL
                result.renamed.append(f"{ref}: node affinity {PROVISIONER_NAME} {entry.get('operator')} {values}")
            else:
                result.kept.append(f"{ref}: node affinity {PROVISIONER_NAME} {values} (not every one migrated)")
    if not edits:
        return result
    updated = _splice(text, edits)
    try:
        reread = [d.data for d in parse(file, updated, expand_lists=False)]
    except LoadError:
        reread = None
    if reread != expected:  # never write what does not hold exactly the renamed data
        result.kept += [f"{r} (not written: the edited file would not hold the same data)" for r in result.renamed]
        result.renamed = []
        return result
    result.updated = updated
    return result


def _data_expressions(spec: Any) -> list[dict[str, Any]]:
    """The plain-data `matchExpressions` entries, in `_expressions`' order."""
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not isinstance(node_affinity, Mapping):
        return []
    found: list[dict[str, Any]] = []
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    for term in terms if isinstance(terms, list) else []:
        expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
        found += [e for e in expressions if isinstance(e, dict)] if isinstance(expressions, list) else []
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    for item in preferred if isinstance(preferred, list) else []:
        preference = item.get("preference") if isinstance(item, Mapping) else None
        expressions = preference.get("matchExpressions") if isinstance(preference, Mapping) else None
        found += [e for e in expressions if isinstance(e, dict)] if isinstance(expressions, list) else []
    return found


def _rename(node: Node) -> tuple[int, int, str]:
    style = node.style if isinstance(node, ScalarNode) and node.style in ("'", '"') else None
    return node.start_mark.index, node.end_mark.index, render_scalar(NODEPOOL_LABEL, style)


def _splice(text: str, edits: Sequence[tuple[int, int, str]]) -> str:
    out: list[str] = []
    cursor = 0
    for start, end, replacement in sorted(edits):
        out += [text[cursor:start], replacement]
        cursor = end
    return "".join(out) + text[cursor:]
