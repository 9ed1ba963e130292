"""Label selectors (`metav1.LabelSelector`): which pods a topology spread or pod (anti-)affinity term counts.

Semantics of `metav1.LabelSelectorAsSelector`: `matchLabels` entries and `matchExpressions` (In, NotIn, Exists,
DoesNotExist) are ANDed; an empty selector (`{}`) selects every pod; an absent one (`None` in the API, which the
callers map to :data:`NOTHING`) selects none. NotIn and DoesNotExist match a pod that lacks the label.

This module is the one matcher of label selectors (the scheduler's topology and affinity groups, the cluster
state's running pods, PodDisruptionBudgets in `kube.disruption`, the API server's `labelSelector` query strings in
`kube.selectors`). A malformed selector — an unknown operator among them — is a :class:`SelectorError` the caller
handles, as Kubernetes refuses it or lets it select nothing: it never matches as some other operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """A malformed selector; `path` leads to the bad field from the selector."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


@dataclass(frozen=True, slots=True)
class Expression:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.operator not in SELECTOR_OPERATORS:
            raise SelectorError(
                ("operator",), f"operator {self.operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}"
            )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the labels satisfy the expression (In, NotIn, Exists, DoesNotExist)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} [{', '.join(sorted(self.values))}]"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector; `selects_nothing` for an absent selector."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Expression, ...] = ()
    selects_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the labels satisfy every matchLabels entry and every expression (a selector that selects nothing
        matches none)."""
        if self.selects_nothing:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(expression.matches(labels) for expression in self.expressions)

    def __str__(self) -> str:
        if self.selects_nothing:
            return "<none>"
        parts = [f"{k}={v}" for k, v in self.match_labels] + [str(e) for e in self.expressions]
        return ", ".join(parts) if parts else "<every pod>"


NOTHING = LabelSelector(selects_nothing=True)


def _label_string(value: object, path: tuple[str | int, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int)):
        return str(value)
    raise SelectorError(path, f"a label value must be a string, not {type(value).__name__}")


def parse_selector(raw: object) -> LabelSelector:
    """A selector from its API form (`None` → :data:`NOTHING`). Raises SelectorError."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise SelectorError((), "a label selector must be a mapping with matchLabels and/or matchExpressions")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise SelectorError(("matchLabels",), "matchLabels must be a mapping of label keys to values")
    match_labels = tuple(
        sorted((str(key), _label_string(value, ("matchLabels", str(key)))) for key, value in labels.items())
    )
    raw_expressions = raw.get("matchExpressions") or []
    if not isinstance(raw_expressions, list):
        raise SelectorError(("matchExpressions",), "matchExpressions must be a list")
    expressions = []
    for index, item in enumerate(raw_expressions):
        at: tuple[str | int, ...] = ("matchExpressions", index)
        if not isinstance(item, Mapping):
            raise SelectorError(at, "a match expression must be a mapping with key, operator and values")
        key, operator, values = item.get("key"), item.get("operator"), item.get("values") or []
        if not isinstance(key, str) or not key:
            raise SelectorError((*at, "key"), "a match expression needs a key")
        if not isinstance(operator, str) or operator not in SELECTOR_OPERATORS:
            raise SelectorError(
                (*at, "operator"), f"operator {operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}"
            )
        if not isinstance(values, list):
            raise SelectorError((*at, "values"), "values must be a list")
        strings = frozenset(_label_string(v, (*at, "values", i)) for i, v in enumerate(values))
        if operator in ("In", "NotIn") and not strings:
            raise SelectorError((*at, "values"), f"operator {operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and strings:
            raise SelectorError((*at, "values"), f"operator {operator} takes no values")
        expressions.append(Expression(key, operator, strings))
    return LabelSelector(match_labels, tuple(sorted(expressions, key=str)))


def selects(raw: object, labels: Mapping[str, str]) -> bool:
    """Whether the selector in API form (`None`: selects nothing) selects `labels`. Raises SelectorError on a
    malformed one (an unknown operator, In without values, …): `metav1.LabelSelectorAsSelector`'s error."""
    return parse_selector(raw).matches(labels)
