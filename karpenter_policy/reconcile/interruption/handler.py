"""Interruption handling: EventBridge events from the interruption queue → actions on our Nodes (Karpenter v0.31's
interruption controller).

:meth:`InterruptionHandler.poll_once` receives up to 10 messages (long polling), reads each
(:mod:`~karpenter_policy.reconcile.interruption.eventbridge`) and acts on the Nodes of ours whose instance it names:

| kind | Event (on the NodeClaim and the Node) | action |
|---|---|---|
| spot interruption warning | Warning `SpotInterrupted` | its offering (type, zone, spot) unavailable; cordon, drain |
| rebalance recommendation | Normal `SpotRebalanceRecommendation` | none |
| state change: stopping, stopped | Warning `InstanceStopping` | cordon and drain |
| state change: shutting-down, terminated | Warning `InstanceTerminating` | cordon and drain |
| AWS Health scheduled change (EC2) | Warning `InstanceUnhealthy` | cordon and drain |
| capacity reservation interruption | Warning `CapacityReservationInstanceInterrupted` | room 0; cordon and drain |

*Cordon and drain* goes through the node-deletion path (:func:`~karpenter_policy.reconcile.nodedeletion.delete_node`:
the Node is deleted, its ``karpenter.sh/termination`` finalizer holds it while the controller's termination step
cordons it, evicts its pods and terminates its instance — the same path as every other disruption). It is
logged (``initiating delete from interruption message``) with a Warning Event `TerminatingOnInterruption`. Every
Event goes on the Node's NodeClaim (found in the cluster state by `status.nodeName` or instance; when there is one)
and on the Node, as v1.14.1's `interruption/events/events.go` (and v0.31.1's) publishes each. A Node
already being deleted is left to termination, without a second log line or Event. The deletion is counted as
Karpenter counts it: a Provisioner's node as v0.31's machine terminated (`karpenter_machines_terminated
{reason="interruption"}`), a NodePool's as v1.14.1's NodeClaim disrupted (`karpenter_nodeclaims_disrupted_total`),
its reason the message's v1 kind (:func:`disrupted_reason`).

Each message is deleted once handled; one that cannot be read (malformed) or is about something else (no-op: an
event of another kind, an instance that is not ours, a state not acted on) is deleted too, and counted — it
would come back for ever otherwise. A message whose ``account`` or ``region`` is not the controller's (when the
handler is told its own) is *foreign*: deleted without action and counted in
``karpenter_policy_interruption_foreign_messages_total{reason}`` — a queue shared across accounts or regions, or
fed by a rule that forwards another account's events, must not make the controller act on events about instances
it does not run (Karpenter v0.31 acts on any message). A message whose action failed (the API server could not
be reached) is not deleted: the queue delivers it again after its visibility timeout. A poll that could not
read the queue, list the Nodes, act on a message or delete one says so (:attr:`InterruptionResult.failed`): the
runner counts it as a failed reconcile, as Karpenter's controller returns the error. Nothing a message contains
can make a poll raise. Nodes are matched on the instance id of their ``spec.providerID``; only Nodes this
controller registered are acted on.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import CloudProvider, ReservingCloud
from karpenter_policy.cloud.queue import InterruptionQueue, QueueMessage
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, EventSeverity
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.interruption.eventbridge import (
    STOPPING_STATES,
    InterruptionMessage,
    MalformedMessage,
    MessageKind,
    parse,
)
from karpenter_policy.reconcile.metrics import INTERRUPTION as LABEL
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.termination.nodedeletion import delete_node

INTERRUPTION = logs.logger("interruption")

CORDON_AND_DRAIN = "CordonAndDrain"
NO_ACTION = "NoAction"
REASON_TERMINATING = "TerminatingOnInterruption"
#: Its thread pauses this long after the queue could not be read (a long poll usually paces it).
QUEUE_ERROR_PAUSE = 5.0
#: A poll that answered nothing at once is followed by this pause (a queue that does not long-poll must not spin).
EMPTY_POLL_PAUSE = 0.05

_ACTIONS = {
    MessageKind.SPOT_INTERRUPTION: CORDON_AND_DRAIN,
    MessageKind.SCHEDULED_CHANGE: CORDON_AND_DRAIN,
    MessageKind.STATE_CHANGE: CORDON_AND_DRAIN,
    MessageKind.REBALANCE_RECOMMENDATION: NO_ACTION,
    MessageKind.CAPACITY_RESERVATION_INTERRUPTION: CORDON_AND_DRAIN,
}


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class Notice:
    """The Event a message puts on the Node it is about and on its NodeClaim."""

    reason: str
    message: str
    severity: EventSeverity


def notice(message: InterruptionMessage) -> Notice | None:
    """Karpenter's Event for the message's kind (None for a no-op)."""
    if message.kind is MessageKind.SPOT_INTERRUPTION:
        return Notice("SpotInterrupted", "Spot interruption warning was triggered", "Warning")
    if message.kind is MessageKind.REBALANCE_RECOMMENDATION:
        return Notice("SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered", "Normal")
    if message.kind is MessageKind.CAPACITY_RESERVATION_INTERRUPTION:  # v1.14.1 events.go:44
        return Notice(
            "CapacityReservationInstanceInterrupted", "Capacity Reservation interruption warning was triggered",
            "Warning",
        )
    if message.kind is MessageKind.SCHEDULED_CHANGE:
        return Notice("InstanceUnhealthy", "An unhealthy warning was triggered for the instance", "Warning")
    if message.kind is MessageKind.STATE_CHANGE:
        if message.state in STOPPING_STATES:
            return Notice("InstanceStopping", "Instance is stopping", "Warning")
        return Notice("InstanceTerminating", "Instance is terminating", "Warning")
    return None


def disrupted_reason(message: InterruptionMessage) -> str:
    """The reason v1.14.1 counts a NodeClaim deleted on the message under (`karpenter_nodeclaims_disrupted_total`:
    aws pkg/controllers/interruption/utils.go `deleteNodeClaim` names the message's v1 `Kind()`, messages/types.go;
    a state change is `instance_stopped` or `instance_terminated` by its state, statechange/model.go)."""
    if message.kind is MessageKind.SPOT_INTERRUPTION:
        return "spot_interrupted"
    if message.kind is MessageKind.SCHEDULED_CHANGE:
        return "scheduled_change"
    if message.kind is MessageKind.CAPACITY_RESERVATION_INTERRUPTION:
        return "capacity_reservation_interrupted"
    if message.kind is MessageKind.STATE_CHANGE:
        return "instance_stopped" if message.state in STOPPING_STATES else "instance_terminated"
    return "no_op"


@dataclass(slots=True)
class InterruptionResult:
    """What one poll did. ``kinds``: message id → kind read; ``malformed``: message id → why it is unreadable;
    ``acted``: node → the action taken for it; ``draining``: the Nodes whose deletion this poll requested;
    ``kept``: messages left in the queue to be delivered again; ``foreign``: message id → why it is not the
    controller's (``account`` or ``region``); ``errors``: what failed on single messages; ``error``: the queue
    could not be read or the Nodes listed."""

    received: int = 0
    kinds: dict[str, MessageKind] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)
    deleted: int = 0
    acted: dict[str, str] = field(default_factory=dict)
    draining: list[str] = field(default_factory=list)
    kept: int = 0
    errors: list[str] = field(default_factory=list)
    error: str | None = None
    foreign: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Something went wrong (a failed reconcile): the queue or the Nodes could not be read, or a message could
        not be acted on or deleted."""
        return self.error is not None or bool(self.errors)


class InterruptionHandler:
    """See the module docstring. Messages are matched against the cluster ``state``'s Nodes (by its instance index),
    or without one against ``nodes`` (default: a list from the cluster). ``account`` and ``region``: the
    controller's (None: not known, messages are not checked against it). ``acting``: whether this replica may act
    now, asked once messages are received (the controller gives its guarded cluster and cloud, which ask it before
    each change)."""

    name = "interruption"
    label = LABEL

    def __init__(
        self,
        cluster: Cluster,
        cloud: CloudProvider,
        queue: InterruptionQueue,
        *,
        metrics: Metrics,
        nodes: Callable[[], list[Obj]] | None = None,
        wall_clock: Callable[[], dt.datetime] = _utc_now,
        account: str | None = None,
        region: str | None = None,
        state: ClusterState | None = None,
        acting: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.account = account
        self.region = region
        self.cloud = cloud
        self.queue = queue
        self.metrics = metrics
        self.wall_clock = wall_clock
        self._nodes = nodes or (lambda: cluster.list(objects.NODE).items)
        self._state = state
        self.acting = acting
        self.clock = clock
        self.wake = threading.Event()  # nothing wakes it: it polls the queue (a long poll paces it)
        self._pause = 0.0
        self._handling = threading.Lock()  # held while a received batch is acted on
        self._abandoned = False

    def abandon(self) -> None:
        """Act on nothing more (the runner stops): returns once a batch being acted on is done — not when a receive
        still waits (SQS's long poll, up to 20 s), which then acts on nothing; its messages come back after their
        visibility timeout, for the replica that leads next. So the runner releases the Lease at once, as
        Karpenter's cancelled context ends its poll, rather than up to 20 s later."""
        with self._handling:
            self._abandoned = True

    # --- as a controller (`reconcile.steps.Reconciler`) ------------------------------------------------------

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Take the messages there are: poll until a poll receives nothing (or leaves messages for later, or
        fails). What it acted on goes into `result.interrupted`; a poll that failed (logged) fails the step (a failed
        reconcile, as Karpenter's controller returns the error). Never due by itself."""
        while True:
            started = self.clock()
            polled = self.poll_once(self.acting)
            result.interrupted.update(polled.acted)  # what failed is logged (and counted) by the poll
            result.failed = result.failed or polled.failed
            if not polled.received or polled.kept or polled.error is not None:
                break
        if polled.error is not None:
            self._pause = QUEUE_ERROR_PAUSE
        elif not polled.received and self.clock() - started < EMPTY_POLL_PAUSE:
            self._pause = EMPTY_POLL_PAUSE
        else:
            self._pause = 0.0
        return None

    def poll(self) -> float | None:
        """Its thread polls again at once, or after a pause (the queue failed, or answered nothing at once)."""
        return self._pause

    def poll_once(self, acting: Callable[[], bool] = lambda: True) -> InterruptionResult:
        """Receive and handle one batch of messages. When ``acting()`` is false once they are received (this
        replica stopped, or lost the lease), nothing is done and they come back after their visibility timeout."""
        result = InterruptionResult()
        if self._abandoned:
            return result
        try:
            received = self.queue.receive()
        except CloudError as error:
            self.metrics.interruption_queue_errors.labels("receive").inc()
            result.error = f"could not receive messages from queue {self.queue.name}, {error}"
            INTERRUPTION.error(result.error, extra=self._fields(queue=self.queue.name))
            return result
        result.received = len(received)
        if not received:
            return result
        with self._handling:
            if self._abandoned or not acting():
                result.kept = len(received)
                return result
            self._act_on(received, result)
        return result

    def _act_on(self, received: list[QueueMessage], result: InterruptionResult) -> None:
        try:
            by_instance = self._our_nodes()
        except ClusterError as error:
            result.kept = len(received)
            result.error = f"could not list nodes, {error}"
            INTERRUPTION.error(result.error, extra=self._fields(queue=self.queue.name))
            return
        for raw in received:
            self._one(raw, by_instance, result)

    def _our_nodes(self) -> Callable[[str], Obj | None]:
        """Instance id → the Node of ours that runs it (None: none)."""
        state = self._state
        if state is not None:
            def from_state(instance_id: str) -> Obj | None:
                record = state.node_of_instance(instance_id)
                return record.obj if record is not None and record.ours else None

            return from_state
        found: dict[str, Obj] = {}
        for node in self._nodes():
            instance_id = node_info.instance_id(node)
            if instance_id and node_info.is_ours(node):
                found[instance_id] = node
        return found.get

    def _one(self, raw: QueueMessage, by_instance: Callable[[str], Obj | None], result: InterruptionResult) -> None:
        try:
            message = parse(raw.body)
        except MalformedMessage as error:
            result.malformed[raw.id] = str(error)
            self.metrics.interruption_malformed.inc()
            INTERRUPTION.error(
                "parsing message, %s", error, extra=self._fields(queue=self.queue.name, messageId=raw.id)
            )
            self._delete(raw, result)
            return
        result.kinds[raw.id] = message.kind
        self.metrics.interruption_received.labels(message.kind.value).inc()
        elsewhere = self._foreign(message)
        if elsewhere is not None:
            result.foreign[raw.id] = elsewhere
            self.metrics.interruption_foreign.labels(elsewhere).inc()
            INTERRUPTION.debug(
                "ignoring a message about another %s", elsewhere,
                extra=self._fields(
                    queue=self.queue.name, messageId=raw.id, account=message.account, region=message.region
                ),
            )
            self._delete(raw, result)
            return
        if self._handle(message, by_instance, result):
            self._delete(raw, result)
        else:
            result.kept += 1

    def _foreign(self, message: InterruptionMessage) -> str | None:
        """``account`` or ``region`` when the message is about another one than the controller's, else None (an
        event that does not say is taken as the controller's, as Karpenter takes every event)."""
        if self.account and message.account and message.account != self.account:
            return "account"
        if self.region and message.region and message.region != self.region:
            return "region"
        return None

    def _handle(
        self, message: InterruptionMessage, by_instance: Callable[[str], Obj | None], result: InterruptionResult
    ) -> bool:
        """Act on every Node of ours the message names; False when an action failed (handle it again later)."""
        action = _ACTIONS.get(message.kind)
        if action is None:
            return True
        handled = True
        for instance_id in message.instance_ids:
            node = by_instance(instance_id)
            if node is None:
                continue
            name = objects.name(node)
            fields: dict[str, object] = {
                "queue": self.queue.name, "messageKind": message.kind.value, "node": name, "action": action,
            }
            event = notice(message)
            claim = self._claim_of(node)
            if event is not None:
                self._events(node, claim, event.reason, event.message, event.severity)
            self.metrics.interruption_actions.labels(action).inc()
            result.acted[name] = action
            if message.kind is MessageKind.SPOT_INTERRUPTION:
                self._mark_unavailable(node, message)
            elif message.kind is MessageKind.CAPACITY_RESERVATION_INTERRUPTION:
                self._mark_reservation_unavailable(node)
            if action == CORDON_AND_DRAIN and not self._drain(node, claim, fields, result,
                                                              disrupted_reason(message)):
                handled = False
        if message.time is not None and handled:
            self.metrics.interruption_latency.observe(max(0.0, (self.wall_clock() - message.time).total_seconds()))
        return handled

    def _mark_unavailable(self, node: Obj, message: InterruptionMessage) -> None:
        labels = objects.labels(node)
        instance_type, zone = labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.ZONE, "")
        if instance_type and zone:
            self.cloud.mark_unavailable(instance_type, zone, wk.CAPACITY_SPOT, message.kind.value)

    def _mark_reservation_unavailable(self, node: Obj) -> None:
        """v1.14.1 utils.go `markUnavailableOfferings`: the node's capacity reservation (its
        `karpenter.k8s.aws/capacity-reservation-id` label; none: nothing) has no room until EC2 answers again."""
        reservation = objects.labels(node).get(wk.CAPACITY_RESERVATION_ID, "")
        if reservation and isinstance(self.cloud, ReservingCloud):
            self.cloud.mark_reservation_unavailable(reservation)

    def _claim_of(self, node: Obj) -> Obj | None:
        """The NodeClaim of the Node (`status.nodeName`, else its instance), as the state holds it; without a state,
        listed; None: none, or the list failed (logged; the Node's Event is still recorded)."""
        name, instance = objects.name(node), node_info.instance_id(node)
        state = self._state
        if state is not None:
            claims = [(c.node_name, c.instance_id, c.obj) for c in state.claims()]
        else:
            try:
                listed = self.cluster.list(objects.NODE_CLAIM).items
            except ClusterError as error:
                INTERRUPTION.warning("could not list nodeclaims, %s", error, extra=self._fields())
                return None
            claims = [(str((c.get("status") or {}).get("nodeName") or ""),
                       node_info.instance_id_of(str((c.get("status") or {}).get("providerID") or "")), c)
                      for c in listed]
        found = [obj for node_name, instance_id, obj in claims
                 if node_name == name or (instance and instance_id == instance)]
        return found[0] if found else None

    def _events(self, node: Obj, claim: Obj | None, reason: str, message: str, severity: EventSeverity) -> None:
        """v1.14.1 `interruption/events/events.go` (and v0.31.1's): every kind's Event on the NodeClaim, then on the
        Node."""
        if claim is not None:
            self._event(claim, reason, message, severity)
        self._event(node, reason, message, severity)

    def _drain(self, node: Obj, claim: Obj | None, fields: dict[str, object], result: InterruptionResult,
               v1_reason: str) -> bool:
        """Delete the Node through the node-deletion path; False when the API or EC2 refused (the message comes
        back and this is tried again: every step is idempotent)."""
        name = objects.name(node)
        first = not objects.is_deleting(node)
        if first:  # as Karpenter: logged when the deletion is requested
            INTERRUPTION.info("initiating delete from interruption message", extra=self._fields(**fields))
            if claim is not None:  # v1.14.1 events.go `TerminatingOnInterruption`: the claim's says NodeClaim
                self._event(claim, REASON_TERMINATING, "Interruption triggered termination for the NodeClaim",
                            "Warning")
            self._event(node, REASON_TERMINATING, "Interruption triggered termination for the Node", "Warning")
        try:
            delete_node(self.cluster, node)
        except (ClusterError, CloudError) as error:
            message = f"could not delete node {name} on an interruption message, {error}"
            result.errors.append(message)
            INTERRUPTION.error(message, extra=self._fields(**fields))
            return False
        if first:
            capacity = objects.labels(node).get(wk.CAPACITY_TYPE, "")
            self.metrics.claim_disrupted(node_info.template_of(node) or "", "interruption", v1_reason, capacity)
            self._observe(name)
        result.draining.append(name)
        return True

    def _observe(self, name: str) -> None:
        """Show the cluster state the Node being deleted now, as its watch will: the controllers after this one in
        a step (termination) see the deletion at once. A read that fails leaves it to the watch."""
        if self._state is None:
            return
        try:
            current = self.cluster.get(objects.NODE, name)
        except ClusterError:
            return
        if current is not None:
            self._state.apply(objects.NODE, "MODIFIED", current)

    def _delete(self, raw: QueueMessage, result: InterruptionResult) -> None:
        try:
            self.queue.delete(raw)
        except CloudError as error:
            self.metrics.interruption_queue_errors.labels("delete").inc()
            result.kept += 1
            message = f"could not delete message {raw.id} from queue {self.queue.name}, {error}"
            result.errors.append(message)
            INTERRUPTION.error(message, extra=self._fields(queue=self.queue.name, messageId=raw.id))
            return
        result.deleted += 1
        self.metrics.interruption_deleted.inc()

    def _event(self, node: Obj, reason: str, message: str, severity: EventSeverity) -> None:
        try:
            self.cluster.record_event(node, reason, message, severity)
        except ClusterError as error:
            INTERRUPTION.warning("could not record event %s, %s", reason, error, extra=self._fields())

    def _fields(self, **values: object) -> dict[str, object]:
        return logs.fields(self.wall_clock(), **values)


__all__ = [
    "CORDON_AND_DRAIN",
    "disrupted_reason",
    "NO_ACTION",
    "REASON_TERMINATING",
    "InterruptionHandler",
    "InterruptionResult",
    "Notice",
    "notice",
]
