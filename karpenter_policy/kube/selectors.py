"""Label and field selectors, as the API server parses and matches them.

Label selectors come in two forms: the string of a ``labelSelector`` query (``app=web,tier!=db,env in
(a,b),!canary``), parsed here into the clauses of :mod:`karpenter_policy.model.selectors` (which matches them),
and the structured LabelSelector of a PodDisruptionBudget (``matchLabels`` and ``matchExpressions``), which that
module parses and matches. Field selectors support, per kind, the fields the API server supports that the
reconciler and its operators filter on (:data:`FIELDS`: ``metadata.name`` and ``metadata.namespace`` on every
kind, ``spec.nodeName`` and ``status.phase`` on pods, ``involvedObject.name``, ``reason``, ``type``, … on
events); an absent field compares as "", so ``spec.nodeName=`` selects unbound pods, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from karpenter_policy.kube.errors import BadRequest
from karpenter_policy.model.selectors import Expression

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (*_COMMON_FIELDS, "spec.nodeName", "spec.schedulerName", "spec.serviceAccountName", "status.phase",
            "status.podIP", "status.nominatedNodeName"),
    "Node": (*_COMMON_FIELDS, "spec.unschedulable"),
    "Namespace": (*_COMMON_FIELDS, "status.phase"),
    "Event": (*_COMMON_FIELDS, "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
}
"""The field selectors the API server supports, by kind (any other kind: metadata.name and metadata.namespace)."""

_FIELD_PATHS = {"source": "source.component"}  # a selector field that names another path in the object

_SET_REQUIREMENT = re.compile(r"^\s*(?P<key>[^\s!=]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*(?P<key>[^\s!=]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s,]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)\s*$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class BadSelector(BadRequest):
    """400: a selector the API server would reject."""


def _split_clauses(selector: str) -> list[str]:
    """Split on the commas that are not inside ``(...)``."""
    clauses: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            clauses.append("".join(current))
            current = []
        else:
            current.append(char)
    clauses.append("".join(current))
    return [clause for clause in clauses if clause.strip()]


def parse_label_selector(selector: str | None) -> tuple[Expression, ...]:
    """Parse a ``labelSelector`` string; raises :class:`BadSelector` on a clause the API would reject."""
    requirements = []
    for clause in _split_clauses(selector or ""):
        if match := _SET_REQUIREMENT.match(clause):
            values = frozenset(value.strip() for value in match["values"].split(",") if value.strip())
            operator = "In" if match["op"] == "in" else "NotIn"
            requirements.append(Expression(match["key"], operator, values))
        elif match := _EQUALITY.match(clause):
            operator = "NotIn" if match["op"] == "!=" else "In"
            requirements.append(Expression(match["key"], operator, frozenset({match["value"]})))
        elif match := _EXISTS.match(clause):
            requirements.append(Expression(match["key"], "DoesNotExist" if match["neg"] else "Exists"))
        else:
            raise BadSelector(f"unable to parse requirement {clause.strip()!r} in label selector {selector!r}")
        last = requirements[-1]
        if not _LABEL_KEY.match(last.key) or not all(_LABEL_VALUE.match(value) for value in last.values):
            raise BadSelector(f"invalid label key or value in {clause.strip()!r} of label selector {selector!r}")
    return tuple(requirements)


def label_selector_matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    return all(requirement.matches(labels) for requirement in parse_label_selector(selector))


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def parse_field_selector(kind: str, selector: str | None) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate for a ``fieldSelector`` string on objects of ``kind`` (``Pod``, ``Event``, …): ``=``,
    ``==``, ``!=`` on the fields :data:`FIELDS` supports for it (any other is a 400, as on the API server)."""
    supported = FIELDS.get(kind, _COMMON_FIELDS)
    clauses = []
    for clause in _split_clauses(selector or ""):
        match = _EQUALITY.match(clause)
        if not match:
            raise BadSelector(f"invalid field selector clause {clause.strip()!r}")
        if match["key"] not in supported:
            raise BadSelector(f'field label not supported: "{match["key"]}" for {kind} '
                              f"(supported: {', '.join(supported)})")
        clauses.append((_FIELD_PATHS.get(match["key"], match["key"]), match["op"] != "!=", match["value"]))

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) == equal for path, equal, value in clauses)

    return matches
