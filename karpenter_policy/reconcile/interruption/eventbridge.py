"""EventBridge events from the interruption queue → :class:`InterruptionMessage`, as Karpenter v0.31 reads them (and
v1.14.1's capacity-reservation interruption, which v0.31 does not know).

An event is recognised by its ``version``, ``source`` and ``detail-type`` (Karpenter's parser key):

* ``aws.ec2`` / ``EC2 Spot Instance Interruption Warning``: a spot interruption, about ``detail.instance-id``;
* ``aws.ec2`` / ``EC2 Instance Rebalance Recommendation``: a rebalance recommendation, ``detail.instance-id``;
* ``aws.ec2`` / ``EC2 Instance State-change Notification``: a state change, ``detail.instance-id``, when
  ``detail.state`` is stopping, stopped, shutting-down or terminated (other states: a no-op);
* ``aws.ec2`` / ``EC2 Capacity Reservation Instance Interruption Warning``: a capacity-reservation interruption
  (Karpenter v1.14.1's messages/capacityreservationinterruption, EventBridge schema
  ``aws.ec2@EC2CapacityReservationInstanceInterruptionWarning``), about ``detail.instance-id``;
* ``aws.health`` / ``AWS Health Event``: a scheduled change, ``detail.affectedEntities[].entityValue``, when
  ``detail.service`` is EC2 and ``detail.eventTypeCategory`` scheduledChange (other health events: a no-op).

All with ``version`` "0". Any other event — another source, another detail-type, an SNS envelope — is a
*no-op* message: read, counted and deleted, never acted on. An empty body is a no-op too (Karpenter's rule).
Each message also carries the ``account`` and ``region`` the event happened in (empty when the event does not
say): the handler acts only on its own account's and region's.
A body that is not a JSON object, a field of the wrong type, a time that is not RFC 3339, or a recognised event
without the instance ids it is about is *malformed*: :func:`parse` raises :class:`MalformedMessage` saying which
field (Karpenter only checks types; a recognised event naming no instance is malformed here too, since it can
only be a broken producer).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class MessageKind(StrEnum):
    """Karpenter's message kinds (also the ``message_type`` label of the metrics)."""

    SPOT_INTERRUPTION = "SpotInterruptionKind"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendationKind"
    SCHEDULED_CHANGE = "ScheduledChangeKind"
    STATE_CHANGE = "StateChangeKind"
    CAPACITY_RESERVATION_INTERRUPTION = "CapacityReservationInterruptionKind"
    NOOP = "NoOpKind"


#: Instance states a state-change notification is acted on for (Karpenter's `acceptedStates`).
ACCEPTED_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
STOPPING_STATES = frozenset({"stopping", "stopped"})

_EC2 = "aws.ec2"
_HEALTH = "aws.health"
_KINDS: dict[tuple[str, str, str], MessageKind] = {
    ("0", _EC2, "EC2 Spot Instance Interruption Warning"): MessageKind.SPOT_INTERRUPTION,
    ("0", _EC2, "EC2 Instance Rebalance Recommendation"): MessageKind.REBALANCE_RECOMMENDATION,
    ("0", _EC2, "EC2 Instance State-change Notification"): MessageKind.STATE_CHANGE,
    ("0", _EC2, "EC2 Capacity Reservation Instance Interruption Warning"): (
        MessageKind.CAPACITY_RESERVATION_INTERRUPTION
    ),
    ("0", _HEALTH, "AWS Health Event"): MessageKind.SCHEDULED_CHANGE,
}


class MalformedMessage(ValueError):
    """The body cannot be read as an event (see the module docstring); the message names the field."""


@dataclass(frozen=True, slots=True)
class InterruptionMessage:
    """One event: its kind, the EC2 instances it is about, when it happened (None: the event does not say), its
    EventBridge id, source and detail-type, for a state change the new state (lower case), and the account and
    region it happened in (empty: the event does not say)."""

    kind: MessageKind
    instance_ids: tuple[str, ...] = ()
    time: dt.datetime | None = None
    id: str = ""
    source: str = ""
    detail_type: str = ""
    state: str = ""
    account: str = ""
    region: str = ""


def parse(body: str) -> InterruptionMessage:
    """Read one event (see the module docstring). Raises MalformedMessage."""
    if not body:
        return InterruptionMessage(MessageKind.NOOP)
    try:
        event = json.loads(body)
    except ValueError as error:
        raise MalformedMessage(f"not JSON: {error}") from None
    except RecursionError:  # nesting deeper than the interpreter's stack: no event looks like that
        raise MalformedMessage("not JSON an event can be: nested too deeply") from None
    if not isinstance(event, dict):
        raise MalformedMessage(f"expected a JSON object, got {_type(event)}")
    version, source, detail_type = (_string(event, key) for key in ("version", "source", "detail-type"))
    event_id = _string(event, "id")
    account, region = _string(event, "account"), _string(event, "region")
    time = _time(event)
    resources = event.get("resources")
    if resources is not None and not (isinstance(resources, list) and all(isinstance(r, str) for r in resources)):
        raise MalformedMessage(f"resources: expected a list of strings, got {_type(resources)}")
    kind = _KINDS.get((version, source, detail_type), MessageKind.NOOP)
    noop = InterruptionMessage(
        MessageKind.NOOP, time=time, id=event_id, source=source, detail_type=detail_type, account=account,
        region=region,
    )
    if kind is MessageKind.NOOP:
        return noop
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise MalformedMessage(f"detail: expected an object, got {_type(detail)}")
    if kind is MessageKind.SCHEDULED_CHANGE:
        return _scheduled_change(detail, noop)
    instance_id = _string(detail, "instance-id", "detail.")
    if not instance_id:
        raise MalformedMessage(f"detail.instance-id: missing from a {detail_type} event")
    if kind is MessageKind.STATE_CHANGE:
        state = _string(detail, "state", "detail.").lower()
        if state not in ACCEPTED_STATES:
            return noop
        return dataclasses.replace(noop, kind=kind, instance_ids=(instance_id,), state=state)
    return dataclasses.replace(noop, kind=kind, instance_ids=(instance_id,))


def _scheduled_change(detail: Mapping[str, Any], noop: InterruptionMessage) -> InterruptionMessage:
    service = _string(detail, "service", "detail.")
    category = _string(detail, "eventTypeCategory", "detail.")
    entities = detail.get("affectedEntities")
    if entities is not None and not isinstance(entities, list):
        raise MalformedMessage(f"detail.affectedEntities: expected a list, got {_type(entities)}")
    ids = []
    for index, entity in enumerate(entities or []):
        if not isinstance(entity, dict):
            raise MalformedMessage(f"detail.affectedEntities[{index}]: expected an object, got {_type(entity)}")
        ids.append(_string(entity, "entityValue", f"detail.affectedEntities[{index}]."))
    if service != "EC2" or category != "scheduledChange":
        return noop  # another service's or category's health event
    instance_ids = tuple(i for i in ids if i)
    if not instance_ids:
        raise MalformedMessage("detail.affectedEntities: no entityValue names an instance")
    return dataclasses.replace(noop, kind=MessageKind.SCHEDULED_CHANGE, instance_ids=instance_ids)


def _string(mapping: Mapping[str, Any], key: str, prefix: str = "") -> str:
    value = mapping.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedMessage(f"{prefix}{key}: expected a string, got {_type(value)}")
    return value


def _time(event: Mapping[str, Any]) -> dt.datetime | None:
    text = _string(event, "time")
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise MalformedMessage(f"time: {text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise MalformedMessage(f"time: {text!r} has no time zone")
    return moment.astimezone(dt.UTC)


def _type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)


__all__ = ["ACCEPTED_STATES", "STOPPING_STATES", "InterruptionMessage", "MalformedMessage", "MessageKind", "parse"]
