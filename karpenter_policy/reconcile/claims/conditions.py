"""The status conditions of a NodeClaim, as Karpenter v1.14.1 keeps them (operatorpkg's `status.ConditionSet`, the
set `NodeClaim.StatusConditions` declares in core pkg/apis/v1/nodeclaim_status.go).

`Launched`, `Registered` and `Initialized` are the dependents of the root condition `Ready`: each starts Unknown
(reason `AwaitingReconciliation`), is set True (its reason its own type, no message) by the lifecycle step that
reaches it, and `Ready` is True once all three are, Unknown (`UnhealthyDependents`) until then. `Drifted` and
`Consolidatable` are set True when the disruption controller decides so and removed when it no longer does (as
Karpenter clears them). A condition's `lastTransitionTime` changes only when its status does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.kube.objects import format_time

LAUNCHED: Final = "Launched"
REGISTERED: Final = "Registered"
INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
DRIFTED: Final = "Drifted"
CONSOLIDATABLE: Final = "Consolidatable"
#: The dependents of `Ready` (`NewReadyConditions(Launched, Registered, Initialized)`).
LIFECYCLE: Final = (LAUNCHED, REGISTERED, INITIALIZED)
AWAITING = "AwaitingReconciliation"
AWAITING_MESSAGE = "object is awaiting reconciliation"

Condition = dict[str, Any]


def initial(now: dt.datetime) -> list[Condition]:
    """The conditions of a new NodeClaim: the lifecycle and Ready Unknown."""
    stamp = format_time(now)
    return [
        {"type": kind, "status": "Unknown", "reason": AWAITING, "message": AWAITING_MESSAGE,
         "lastTransitionTime": stamp}
        for kind in (*LIFECYCLE, READY)
    ]


def status_of(conditions: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    """The status of condition `kind` ("True", "False", "Unknown"), None when there is none."""
    for condition in conditions:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def _set(conditions: list[Condition], kind: str, status: str, reason: str, message: str, now: dt.datetime) -> bool:
    for condition in conditions:
        if condition.get("type") == kind:
            if (condition.get("status"), condition.get("reason"), condition.get("message", "")) == (
                status, reason, message
            ):
                return False
            if condition.get("status") != status:
                condition["lastTransitionTime"] = format_time(now)
            condition.update(status=status, reason=reason, message=message)
            return True
    conditions.append(
        {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": format_time(now)}
    )
    return True


def _ready(conditions: list[Condition], now: dt.datetime) -> None:
    unhealthy = [kind for kind in LIFECYCLE if status_of(conditions, kind) != "True"]
    if unhealthy:
        message = ", ".join(f"{kind}={status_of(conditions, kind) or 'Unknown'}" for kind in unhealthy)
        _set(conditions, READY, "Unknown", "UnhealthyDependents", message, now)
    else:
        _set(conditions, READY, "True", READY, "", now)


def set_true(
    conditions: Sequence[Mapping[str, Any]], kind: str, now: dt.datetime, message: str = ""
) -> list[Condition] | None:
    """The conditions with `kind` True (its reason its type; `message` as given) and Ready recomputed; None when
    nothing changes."""
    changed = [dict(c) for c in conditions]
    if not _set(changed, kind, "True", kind, message, now):
        return None
    _ready(changed, now)
    return changed


def cleared(conditions: Sequence[Mapping[str, Any]], kind: str) -> list[Condition] | None:
    """The conditions without `kind` (Drifted, Consolidatable); None when there was none."""
    kept = [dict(c) for c in conditions if c.get("type") != kind]
    return kept if len(kept) != len(conditions) else None


__all__ = [
    "CONSOLIDATABLE", "DRIFTED", "INITIALIZED", "LAUNCHED", "LIFECYCLE", "READY", "REGISTERED", "cleared", "initial",
    "set_true", "status_of",
]
