"""Karpenter's Events on nodes and pods, and the recorder that publishes them as Karpenter's does (`pkg/events`).

The events of Karpenter v0.31.1 this controller emits, where it takes the decision (their reasons and messages are
Karpenter's; docs/metrics.md lists them with the ones that do not apply):

* Pod, Normal `Nominated` — planned onto a node, being launched for it or existing (`Pod should schedule on:
  node/<name>`);
* Pod, Warning `FailedScheduling` — no provisioner can take it (the reason of `check --workloads`);
* Node, Normal `DeprovisioningTerminating` — a deprovisioning command deletes it (`Deprovisioning Node:
  Consolidation/Delete`);
* Node, Normal `DeprovisioningBlocked` — it cannot be deprovisioned now (a do-not-evict pod, a budget, pods that
  would not schedule: `Cannot deprovision Node: …`);
* Node, Normal `Unconsolidatable` — consolidation cannot remove or replace it (why);
* Pod, Normal `Evicted` — termination evicted it;
* Node, Warning `FailedDraining` — termination could not drain it yet (pods left, an eviction a budget refused).
* Pod, Warning `InvalidDoNotDisruptAnnotation` (Karpenter v1.14.1's, a NodePool node's pod) — its
  `karpenter.sh/do-not-disrupt` is neither "true" nor a positive Go duration, and is ignored; Normal
  `DoNotDisruptUntil` — a duration holds it until then; Normal `DoNotDisruptGracePeriodElapsed` — its duration has
  run out (each where v1.14.1's `IsDoNotDisruptActive` is given a recorder: `do_not_disrupt`).
* NodeClaim, Warning `UnregisteredTaintMissing` (v1.14.1's) — its Node registers without the
  `karpenter.sh/unregistered` taint it should have been written with (`provisioning.claimstatus`).

The interruption handler's (`SpotInterrupted`, …, `TerminatingOnInterruption`) are in `interruption`.

:class:`Recorder` publishes through the cluster (which bumps the count of an Event it already created). Like
Karpenter's recorder it drops an event whose dedupe values (reason and values) it published within the event's
dedupe timeout (2 minutes unless the event says otherwise), and rate-limits nominations (a token bucket of 5 per
second, 10 at once, shared by all pods: a burst of 1,000 pods gets a few, as Karpenter's). A failure to record an
Event is logged, never raised.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from karpenter_policy.api.v1.donotdisrupt import (
    ELAPSED_MESSAGE,
    DoNotDisrupt,
    go_rfc3339,
    invalid_message,
    until_message,
)
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, EventSeverity
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile import logs

EVENTS = logs.logger("events")

NOMINATED = "Nominated"
FAILED_SCHEDULING = "FailedScheduling"
DEPROVISIONING_TERMINATING = "DeprovisioningTerminating"
DEPROVISIONING_BLOCKED = "DeprovisioningBlocked"
UNCONSOLIDATABLE = "Unconsolidatable"
CONSOLIDATION_APPROVED = "ConsolidationApproved"
EVICTED = "Evicted"
FAILED_DRAINING = "FailedDraining"
#: Karpenter v1.14.1's (`events.Disrupted`, `events.TerminationGracePeriodExpiring`, core pkg/events/reason.go).
DISRUPTED = "Disrupted"
TERMINATION_GRACE_PERIOD_EXPIRING = "TerminationGracePeriodExpiring"
#: Karpenter v1.14.1's (terminator/events/events.go `NodeAwaitingVolumeDetachmentEvent`).
AWAITING_VOLUME_DETACHMENT = "AwaitingVolumeDetachment"
#: Karpenter v1.14.1's (core pkg/utils/pod/events.go `InvalidDoNotDisruptAnnotationEvent`, `DoNotDisruptUntilEvent`,
#: `DoNotDisruptGracePeriodElapsedEvent`).
INVALID_DO_NOT_DISRUPT = "InvalidDoNotDisruptAnnotation"
DO_NOT_DISRUPT_UNTIL = "DoNotDisruptUntil"
DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED = "DoNotDisruptGracePeriodElapsed"
#: Karpenter v1.14.1's (core pkg/controllers/nodeclaim/lifecycle/events.go `UnregisteredTaintMissingEvent`).
UNREGISTERED_TAINT_MISSING = "UnregisteredTaintMissing"

#: Karpenter's default dedupe timeout (`events.defaultDedupeTimeout`).
DEDUPE_SECONDS = 120.0
#: Karpenter's `PodNominationRateLimiter`: 5 events a second, bursts of 10.
NOMINATION_RATE, NOMINATION_BURST = 5.0, 10.0


@dataclass(frozen=True, slots=True)
class Event:
    """One Event: `dedupe` values (with the reason) identify repeats dropped within `dedupe_seconds` (none: never
    dropped); `rate_limited` events share the nominations' token bucket."""

    involved: Obj
    type: EventSeverity
    reason: str
    message: str
    dedupe: tuple[str, ...] = ()
    dedupe_seconds: float = DEDUPE_SECONDS
    rate_limited: bool = False


def _title(reason: str) -> str:
    """`consolidation/delete` → `Consolidation/Delete` (Go's `cases.Title` without lowering the rest)."""
    return re.sub(r"(^|[^A-Za-z])([a-z])", lambda m: m[1] + m[2].upper(), reason)


def nominated(pod: Obj, node: str) -> Event:
    """Karpenter's `Nominated` Event on a pod planned onto `node` (rate limited: the nominations' token bucket)."""
    return Event(
        pod, "Normal", NOMINATED, f"Pod should schedule on: node/{node}", (objects.uid(pod),), rate_limited=True
    )


def failed_scheduling(pod: Obj, message: str) -> Event:
    """The pod cannot be scheduled (the provisioner reports it once per reason: not deduped here)."""
    return Event(pod, "Warning", FAILED_SCHEDULING, message)


def deprovisioning_terminating(node: Obj, reason: str) -> Event:
    """`reason`: `<deprovisioner>/<action>` (`consolidation/delete`)."""
    message = f"Deprovisioning Node: {_title(reason)}"
    return Event(node, "Normal", DEPROVISIONING_TERMINATING, message, (objects.uid(node), reason))


def unconsolidatable(node: Obj, why: str) -> Event:
    """Karpenter's `Unconsolidatable` Event on a node, with why (a repeat within 15 minutes dropped)."""
    return Event(node, "Normal", UNCONSOLIDATABLE, why[:1].upper() + why[1:], (objects.uid(node),), 15 * 60.0)


def consolidation_approved(obj: Obj, message: str) -> Event:
    """v1.14.1's `ConsolidationApproved` Event — on a node and its NodeClaim (single-node) or on the NodePool
    (multi-node) — with the Balanced score's message (deduped by the object's uid)."""
    return Event(obj, "Normal", CONSOLIDATION_APPROVED, message, (objects.uid(obj),))


def deprovisioning_blocked(node: Obj, why: str) -> Event:
    """Karpenter's `DeprovisioningBlocked` Event on a node, with why."""
    return Event(node, "Normal", DEPROVISIONING_BLOCKED, f"Cannot deprovision Node: {why}", (objects.uid(node),))


def evicted(pod: Obj) -> Event:
    """Karpenter's `Evicted` Event on a pod termination evicted."""
    return Event(pod, "Normal", EVICTED, "Evicted pod", (objects.name(pod),))


def failed_draining(node: Obj, why: str) -> Event:
    """Karpenter's `FailedDraining` Warning on a node whose drain failed, with why."""
    return Event(node, "Warning", FAILED_DRAINING, f"Failed to drain node, {why}", (objects.name(node),))


def disrupt_pod_delete(pod: Obj, grace: int, pod_grace: int, termination_time: str) -> Event:
    """Karpenter v1's `Disrupted` Event on a pod deleted for its node's terminationGracePeriod
    (terminator/events/events.go `DisruptPodDelete`)."""
    message = (
        f"Deleting the pod to accommodate the terminationTime {termination_time} of the node. The pod was granted "
        f"{grace} seconds of grace-period of its {pod_grace} terminationGracePeriodSeconds. This bypasses the PDB of "
        "the pod and the do-not-disrupt annotation."
    )
    return Event(pod, "Normal", DISRUPTED, message, (objects.name(pod),))


def termination_grace_period_expiring(node: Obj, termination_time: str) -> Event:
    """Karpenter v1's `TerminationGracePeriodExpiring` Warning on a draining node with a termination time
    (`NodeTerminationGracePeriodExpiring`)."""
    message = f"All pods will be deleted by {termination_time}"
    return Event(node, "Warning", TERMINATION_GRACE_PERIOD_EXPIRING, message, (objects.name(node),))


def invalid_do_not_disrupt(pod: Obj, error: str) -> Event:
    """Karpenter v1.14.1's `InvalidDoNotDisruptAnnotation` Warning on a pod whose `karpenter.sh/do-not-disrupt` is
    neither "true" nor a positive duration (ignored), with Go's error; deduped per pod and error."""
    return Event(pod, "Warning", INVALID_DO_NOT_DISRUPT, invalid_message(error), (objects.uid(pod), error))


def do_not_disrupt(pod: Obj, held: DoNotDisrupt) -> Event | None:
    """The Event v1.14.1's `IsDoNotDisruptActive` publishes for a pod's reading (`held`), if any: the
    `InvalidDoNotDisruptAnnotation` Warning; `DoNotDisruptUntil` while a duration holds it (deduped per pod and
    end); `DoNotDisruptGracePeriodElapsed` once it ran out (deduped per pod). "true", absent or no startTime: none."""
    if held.invalid:
        return invalid_do_not_disrupt(pod, held.invalid)
    if held.until is not None:
        return Event(pod, "Normal", DO_NOT_DISRUPT_UNTIL, until_message(held.until),
                     (objects.uid(pod), go_rfc3339(held.until)))
    if held.elapsed:
        return Event(pod, "Normal", DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED, ELAPSED_MESSAGE, (objects.uid(pod),))
    return None


def unregistered_taint_missing(claim: Obj) -> Event:
    """Karpenter v1.14.1's `UnregisteredTaintMissing` Warning on a NodeClaim whose Node registers without the
    `karpenter.sh/unregistered` taint and without `karpenter.sh/registered` (registration.go:82-88); deduped per
    claim uid."""
    message = (
        "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on "
        "Karpenter-managed nodes"
    )
    return Event(claim, "Warning", UNREGISTERED_TAINT_MISSING, message, (objects.uid(claim),))


def awaiting_volume_detachment(node: Obj, attachments: list[str]) -> Event:
    """Karpenter v1's `AwaitingVolumeDetachment` Event on a drained node whose VolumeAttachments hold its instance
    (`NodeAwaitingVolumeDetachmentEvent`: the first five named)."""
    message = f"Awaiting deletion of bound volumeattachments ({logs.options_text(attachments)})"
    return Event(node, "Normal", AWAITING_VOLUME_DETACHMENT, message, (objects.name(node),))


class Recorder:
    """See the module docstring. `clock`: monotonic seconds (the controller's); `fields` makes a log line's
    structured fields."""

    def __init__(
        self, cluster: Cluster, clock: Callable[[], float], fields: Callable[..., dict[str, object]] = logs.fields
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.fields = fields
        self._seen: dict[tuple[str, ...], float] = {}  # dedupe key → until when repeats are dropped
        self._tokens = NOMINATION_BURST
        self._refilled: float | None = None
        self._lock = threading.Lock()

    def publish(self, *events: Event) -> None:
        """Record each Event the dedupe and rate limits allow (a failure to record is logged, never raised)."""
        for event in events:
            if self._allowed(event):
                try:
                    self.cluster.record_event(event.involved, event.reason, event.message, event.type)
                except ClusterError as error:
                    EVENTS.warning("could not record event %s, %s", event.reason, error, extra=self.fields())

    def _allowed(self, event: Event) -> bool:
        now = self.clock()
        with self._lock:
            if event.dedupe:
                key = (event.reason.lower(), *event.dedupe)
                if self._seen.get(key, now) > now:
                    return False
                self._seen[key] = now + event.dedupe_seconds
                if len(self._seen) > 100_000:
                    self._seen = {k: until for k, until in self._seen.items() if until > now}
            if event.rate_limited:
                if self._refilled is not None:
                    elapsed = max(now - self._refilled, 0.0)
                    self._tokens = min(NOMINATION_BURST, self._tokens + elapsed * NOMINATION_RATE)
                self._refilled = now
                if self._tokens < 1:
                    return False
                self._tokens -= 1
        return True


__all__ = [
    "AWAITING_VOLUME_DETACHMENT",
    "CONSOLIDATION_APPROVED",
    "DEPROVISIONING_BLOCKED",
    "DEPROVISIONING_TERMINATING",
    "DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED",
    "DO_NOT_DISRUPT_UNTIL",
    "EVICTED",
    "FAILED_DRAINING",
    "FAILED_SCHEDULING",
    "INVALID_DO_NOT_DISRUPT",
    "NOMINATED",
    "UNCONSOLIDATABLE",
    "UNREGISTERED_TAINT_MISSING",
    "Event",
    "Recorder",
    "awaiting_volume_detachment",
    "deprovisioning_blocked",
    "deprovisioning_terminating",
    "do_not_disrupt",
    "evicted",
    "failed_draining",
    "failed_scheduling",
    "invalid_do_not_disrupt",
    "nominated",
    "unconsolidatable",
    "unregistered_taint_missing",
]
