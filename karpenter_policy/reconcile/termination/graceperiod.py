"""`terminationGracePeriod` of a NodePool's node: how long its drain may wait, as Karpenter v1.14.1 bounds it (core
pkg/controllers/node/termination/controller.go `nodeTerminationTime`, terminator/terminator.go `Drain` and
`DeleteExpiringPods`, pkg/controllers/nodeclaim/lifecycle/controller.go
`ensureTerminationGracePeriodTerminationTimeAnnotation`).

The node's **termination time** is when its NodeClaim's deletion was asked plus the claim's
`spec.terminationGracePeriod`; Karpenter writes it on the claim (`karpenter.sh/nodeclaim-termination-timestamp`,
RFC 3339) and reads it from there. Until then the drain goes as any other — evictions that PodDisruptionBudgets may
refuse, pods whose `karpenter.sh/do-not-disrupt` holds them ("true", or a duration not yet run out
since the pod started: `api.v1.donotdisrupt`) not evicted (the drain waits for them) — but each pod
still waited for is *deleted* (no eviction: neither its PDB nor do-not-disrupt holds it) once the termination time
less its own `terminationGracePeriodSeconds` (30 when unset, as Kubernetes defaults it) has come, with its grace
shortened to what is left before the termination time (at least 1 s), so that it ends by then. A pod already
terminating is deleted again so only when its deletion would end after the termination time
(`IsPodEligibleForForcedEviction`). A claim without the field (or a Provisioner's node) has no termination time.
Pure.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from karpenter_policy.api.v1 import donotdisrupt
from karpenter_policy.api.v1.goduration import parse_go_duration
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile.state.records import PodRecord

#: `NodeClaimTerminationTimestampAnnotationKey` (core pkg/apis/v1/labels.go at v1.14.1).
TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
#: Kubernetes' default `terminationGracePeriodSeconds`.
DEFAULT_POD_GRACE_SECONDS: Final = 30


def termination_time(claim: Obj, requested: dt.datetime) -> dt.datetime | None:
    """The node's termination time: the claim's annotation when it has one, else `requested` (when its deletion was
    asked) plus `spec.terminationGracePeriod`; None without either, or when unreadable."""
    stamp = objects.annotations(claim).get(TERMINATION_TIMESTAMP)
    if stamp:
        try:
            return objects.parse_time(stamp)
        except ValueError:
            return None
    spec = claim.get("spec")
    period = spec.get("terminationGracePeriod") if isinstance(spec, dict) else None
    if not isinstance(period, str):
        return None
    try:
        return requested + parse_go_duration(period)
    except ValueError:
        return None


def pod_grace_seconds(pod: Obj) -> int:
    """The pod's `terminationGracePeriodSeconds` (30 when unset or unreadable)."""
    spec = pod.get("spec")
    value: Any = spec.get("terminationGracePeriodSeconds") if isinstance(spec, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else DEFAULT_POD_GRACE_SECONDS


def due_for_deletion(pod: PodRecord, deadline: dt.datetime, now: dt.datetime) -> bool:
    """Whether the drain deletes `pod` now (see the module docstring)."""
    if pod.deleting:
        try:
            ends = objects.parse_time(pod.deletion_timestamp or "")
        except ValueError:
            return False
        if ends <= deadline:
            return False
    return now > deadline - dt.timedelta(seconds=pod_grace_seconds(pod.obj))


def shortened_grace(deadline: dt.datetime, now: dt.datetime) -> int:
    """The grace a pod deleted now is given: the seconds left before the termination time, at least 1."""
    return max(int((deadline - now).total_seconds()), 1)


def do_not_disrupt(pod: PodRecord, now: dt.datetime) -> donotdisrupt.DoNotDisrupt:
    """Its `karpenter.sh/do-not-disrupt` at `now`; `active`: it holds the pod ("true", or a positive duration not yet
    run out since its startTime), which a NodePool node's drain does not evict (v1.14.1's `IsEvictable`,
    `IsDoNotDisruptActive`)."""
    return donotdisrupt.do_not_disrupt(pod.annotations, donotdisrupt.start_time(pod.obj), now)


__all__ = [
    "DEFAULT_POD_GRACE_SECONDS", "TERMINATION_TIMESTAMP", "do_not_disrupt", "due_for_deletion", "pod_grace_seconds",
    "shortened_grace", "termination_time",
]
