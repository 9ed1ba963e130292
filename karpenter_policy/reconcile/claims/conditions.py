"""The status conditions of a NodeClaim, as Karpenter v1.14.1 keeps them (operatorpkg's `status.ConditionSet`, the
set `NodeClaim.StatusConditions` declares in core pkg/apis/v1/nodeclaim_status.go).

`Launched`, `Registered` and `Initialized` are the dependents of the root condition `Ready`: each starts Unknown
(reason `AwaitingReconciliation`), is set True (its reason its own type, no message) by the lifecycle step that
reaches it, and `Ready` is True once all three are, Unknown (`UnhealthyDependents`) until then. `Drifted` and
`Consolidatable` are set True (Drifted with the kind of drift as its reason: `drift_reason`) when the disruption
controller decides so and removed when it no longer does (as
Karpenter clears them). Node termination writes `Drained`, `VolumesDetached` and `InstanceTerminating` (each True with
its type as reason; Drained Unknown `Draining`, VolumesDetached Unknown `AwaitingVolumeDetachment` or False
`TerminationGracePeriodElapsed`, the reason as message too, as v1.14.1 writes them). A condition's
`lastTransitionTime` changes only when its status does (`set_condition`, which the NodePool's
`NodeRegistrationHealthy` is written with too: `nodepoolstatus`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.kube.objects import format_time, parse_time

LAUNCHED: Final = "Launched"
REGISTERED: Final = "Registered"
INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
DRIFTED: Final = "Drifted"
CONSOLIDATABLE: Final = "Consolidatable"
#: What node termination writes while it terminates a claim's Node (core pkg/controllers/node/termination/
#: controller.go at v1.14.1: `awaitDrain`, `awaitVolumeDetachment`, `awaitInstanceTermination`).
DRAINED: Final = "Drained"
VOLUMES_DETACHED: Final = "VolumesDetached"
INSTANCE_TERMINATING: Final = "InstanceTerminating"
#: Their reasons other than their own type: Drained Unknown while draining, VolumesDetached Unknown while
#: attachments are left, False when the termination time came first.
DRAINING: Final = "Draining"
AWAITING_VOLUME_DETACHMENT: Final = "AwaitingVolumeDetachment"
TERMINATION_GRACE_PERIOD_ELAPSED: Final = "TerminationGracePeriodElapsed"
#: The dependents of `Ready` (`NewReadyConditions(Launched, Registered, Initialized)`).
LIFECYCLE: Final = (LAUNCHED, REGISTERED, INITIALIZED)
AWAITING = "AwaitingReconciliation"
#: Launched's reason after a launch that failed for another reason than capacity (launch.go `launchNodeClaim`).
LAUNCH_FAILED = "LaunchFailed"
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


#: The kinds of drift v1.14.1 names as the Drifted condition's reason (core pkg/controllers/nodeclaim/disruption/
#: drift.go `NodePoolDrifted`, `RequirementsDrifted`, `InstanceTypeNotFound`; aws pkg/cloudprovider/drift.go
#: `NodeClassDrift`, `AMIDrift`, `SubnetDrift`, `SecurityGroupDrift`, `CapacityReservationDrift`,
#: `PlacementGroupDrift`),
#: by how the disruption controller's explanation (`reconcile.disruption.decider.drift_reason`, `image_drift`)
#: begins.
DRIFT_REASONS: Final = (
    ("NodePoolDrifted", "NodePoolDrifted"),
    ("RequirementsDrifted", "RequirementsDrifted"),
    ("InstanceTypeNotFound", "InstanceTypeNotFound"),
    ("NodeClassDrifted", "NodeClassDrift"),
    ("its image ", "AMIDrift"),
    ("SubnetDrift", "SubnetDrift"),
    ("SecurityGroupDrift", "SecurityGroupDrift"),
    ("CapacityReservationDrift", "CapacityReservationDrift"),
    ("PlacementGroupDrift", "PlacementGroupDrift"),
    ("provisioner ", "NodePoolDrifted"),  # its NodePool is gone from the constraint sets
)


def drift_reason(why: str) -> str:
    """The Drifted condition's reason, as Karpenter v1.14.1 names the kind of drift, for the disruption controller's
    explanation `why` (its message); `Drifted` for an explanation of no known kind."""
    for start, reason in DRIFT_REASONS:
        if why.startswith(start):
            return reason
    return DRIFTED


def status_of(conditions: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    """The status of condition `kind` ("True", "False", "Unknown"), None when there is none."""
    for condition in conditions:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def set_condition(
    conditions: list[Condition], kind: str, status: str, reason: str, message: str, now: dt.datetime,
    generation: int | None = None,
) -> bool:
    """Set condition `kind` in place, as operatorpkg's `ConditionSet.Set` does: its lastTransitionTime changes only
    with its status; `generation` (the object's `metadata.generation`) is written as its `observedGeneration` when
    given. Whether anything changed."""
    observed = {} if generation is None else {"observedGeneration": generation}
    for condition in conditions:
        if condition.get("type") == kind:
            if (condition.get("status"), condition.get("reason"), condition.get("message", "")) == (
                status, reason, message
            ) and all(condition.get(key) == value for key, value in observed.items()):
                return False
            if condition.get("status") != status:
                condition["lastTransitionTime"] = format_time(now)
            condition.update(status=status, reason=reason, message=message, **observed)
            return True
    conditions.append(
        {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": format_time(now),
         **observed}
    )
    return True



def _ready(conditions: list[Condition], now: dt.datetime) -> None:
    unhealthy = [kind for kind in LIFECYCLE if status_of(conditions, kind) != "True"]
    if unhealthy:
        message = ", ".join(f"{kind}={status_of(conditions, kind) or 'Unknown'}" for kind in unhealthy)
        set_condition(conditions, READY, "Unknown", "UnhealthyDependents", message, now)
    else:
        set_condition(conditions, READY, "True", READY, "", now)


def set_true(
    conditions: Sequence[Mapping[str, Any]], kind: str, now: dt.datetime, message: str = "", reason: str = ""
) -> list[Condition] | None:
    """The conditions with `kind` True (its reason `reason`, else its type; `message` as given) and Ready
    recomputed; None when nothing changes."""
    return _changed(conditions, kind, "True", reason or kind, message, now)


def set_unknown(
    conditions: Sequence[Mapping[str, Any]], kind: str, reason: str, message: str, now: dt.datetime
) -> list[Condition] | None:
    """The conditions with `kind` Unknown (`reason`, `message`) and Ready recomputed; None when nothing changes."""
    return _changed(conditions, kind, "Unknown", reason, message, now)


def set_false(
    conditions: Sequence[Mapping[str, Any]], kind: str, reason: str, message: str, now: dt.datetime
) -> list[Condition] | None:
    """The conditions with `kind` False (`reason`, `message`) and Ready recomputed; None when nothing changes."""
    return _changed(conditions, kind, "False", reason, message, now)


def transition_time(conditions: Sequence[Mapping[str, Any]], kind: str) -> dt.datetime | None:
    """When condition `kind` last changed status (its `lastTransitionTime`); None without one or unreadable."""
    for condition in conditions:
        if condition.get("type") == kind:
            stamp = condition.get("lastTransitionTime")
            try:
                return parse_time(stamp) if isinstance(stamp, str) else None
            except ValueError:
                return None
    return None


def cleared(conditions: Sequence[Mapping[str, Any]], kind: str) -> list[Condition] | None:
    """The conditions without `kind` (Drifted, Consolidatable); None when there was none."""
    kept = [dict(c) for c in conditions if c.get("type") != kind]
    return kept if len(kept) != len(conditions) else None


def _changed(
    conditions: Sequence[Mapping[str, Any]], kind: str, status: str, reason: str, message: str, now: dt.datetime
) -> list[Condition] | None:
    """A copy of the conditions with `kind` set (`set_condition`) and Ready recomputed; None when nothing changes."""
    changed = [dict(c) for c in conditions]
    if not set_condition(changed, kind, status, reason, message, now):
        return None
    _ready(changed, now)
    return changed


__all__ = [
    "AWAITING_VOLUME_DETACHMENT", "CONSOLIDATABLE", "DRAINED", "DRAINING", "DRIFTED", "DRIFT_REASONS", "INITIALIZED",
    "INSTANCE_TERMINATING", "LAUNCHED", "LAUNCH_FAILED", "LIFECYCLE", "READY", "REGISTERED",
    "TERMINATION_GRACE_PERIOD_ELAPSED", "VOLUMES_DETACHED", "cleared", "drift_reason", "initial", "set_condition",
    "set_false", "set_true", "set_unknown", "status_of", "transition_time",
]
