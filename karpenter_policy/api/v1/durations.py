"""The durations of an admitted Karpenter v1 object that Karpenter's controller cannot decode.

The NodePool and NodeClaim CRDs check a duration's shape with a pattern (`^(([0-9]+(s|m|h))+|Never)$` and the like)
and bound neither its digits nor its sum. Karpenter decodes `consolidateAfter` and `expireAfter` through
`NillableDuration.UnmarshalJSON` (core-v1 pkg/apis/v1/duration.go) and `terminationGracePeriod` and a budget's
`duration` through metav1.Duration's, both `time.ParseDuration`, which refuses a value beyond Go's int64
nanoseconds (`goduration.MAX_DURATION`). The API server stores such an object; Karpenter's controller fails to decode
it. Each is a `duration-overflow` violation at the field. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from karpenter_policy.api.v1.crds import NODECLAIM_KIND, NODEPOOL_KIND
from karpenter_policy.api.v1.goduration import MAX_DURATION, GoDurationError, go_duration_nanoseconds
from karpenter_policy.api.violations import DURATION_OVERFLOW, Path, Violation

_NEVER: Final = "Never"
_NEVER_HINT: Final = "; for no limit write Never"

#: Each duration field of a kind as (path to its object, field, whether `Never` is allowed).
_FIELDS: Final[Mapping[str, tuple[tuple[Path, str, bool], ...]]] = {
    NODEPOOL_KIND: (
        (("spec", "disruption"), "consolidateAfter", True),
        (("spec", "template", "spec"), "expireAfter", True),
        (("spec", "template", "spec"), "terminationGracePeriod", False),
    ),
    NODECLAIM_KIND: (
        (("spec",), "expireAfter", True),
        (("spec",), "terminationGracePeriod", False),
    ),
}


def duration_violations(stored: Mapping[str, Any]) -> list[Violation]:
    """A violation for each duration of `stored` (a NodePool or NodeClaim as the API server stores it, admitted)
    that `time.ParseDuration` refuses; none for any other kind."""
    kind = stored.get("kind")
    found: list[Violation] = []
    for parent, field, never in _FIELDS.get(kind, ()) if isinstance(kind, str) else ():
        holder = _at(stored, parent)
        if holder is not None:
            found.extend(_refused(holder.get(field), (*parent, field), never))
    if kind == NODEPOOL_KIND:
        budgets = (_at(stored, ("spec", "disruption")) or {}).get("budgets")
        for index, budget in enumerate(budgets if isinstance(budgets, list) else ()):
            if type(budget) is dict or isinstance(budget, Mapping):
                found.extend(_refused(budget.get("duration"), ("spec", "disruption", "budgets", index, "duration"),
                                      False))
    return found


def _at(document: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    node: Any = document
    for key in path:
        node = node.get(key) if type(node) is dict or isinstance(node, Mapping) else None
    return node if type(node) is dict or isinstance(node, Mapping) else None


def _refused(value: Any, path: Path, never: bool) -> Iterator[Violation]:
    if not isinstance(value, str) or (never and value == _NEVER):
        return
    try:
        go_duration_nanoseconds(value)
    except GoDurationError:
        shown = value if len(value) <= 40 else f"{value[:24]}… ({len(value)} characters)"
        yield Violation(
            DURATION_OVERFLOW, path,
            f'Karpenter cannot decode "{shown}": time.ParseDuration refuses it, as Go\'s time.Duration holds at most '
            f"{MAX_DURATION} (about 292 years); the API server stores the object, but Karpenter's controller fails "
            f"to read it{_NEVER_HINT if never else ''}",
        )
