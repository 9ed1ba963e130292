"""Test support: a stand-in for EC2's DescribeCapacityReservations, which moto 5.2 does not serve.

The capacity reservations a test declares (`CapacityReservationStandIn.declare`) are answered in EC2's query
protocol, as XML in EC2's shape (`capacityReservationSet`, `nextToken`), to boto3 talking HTTP through the
`FaultProxy`: `CapacityReservationId.N` (an unknown id: `InvalidCapacityReservationId.NotFound`, as EC2 answers it),
`Filter.N.Name` / `Filter.N.Value.M` (`state`, `owner-id`, `instance-type`, `availability-zone`,
`instance-match-criteria`, `reservation-type`, `tag:<key>`, `tag-key`: values ORed, filters ANDed), and pagination
by `MaxResults` / `NextToken` (`page_size` caps a page lower, so that a test sees several).

`AvailableInstanceCount` is the declared total less the instances launched into the reservation that moto still
runs: the stand-in watches CreateFleet through the proxy (`FaultProxy.observe`), reads the launch template of each
launched instance from moto and counts the instance against the reservation its
`CapacityReservationSpecification.CapacityReservationTarget` names (preference `capacity-reservations-only`). A
CreateFleet whose templates all target full reservations is answered as EC2 answers it: no instance, each override
in the `errorSet` with `ReservationCapacityExceeded`. DescribeInstances says of an instance launched into a reservation
what EC2 says and moto does not: its `capacityReservationId`, the `capacityReservationSpecification` it launched with
(`capacity-reservations-only`, the target) and, for a capacity block's or an interruptible reservation's, its
`instanceLifecycle`.

A declared reservation is written as given: `fields` overrides or removes (None) any element, so a test can send a
hostile shape (a missing id, a count that is no number, a negative count).
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from .faultproxy import Answer, Call, FaultProxy, error_answer

OWNER = "123456789012"
_XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
#: Any namespace (moto writes EC2's without its last slash).
_NS = "{*}"
#: Where EC2 writes each filter's value in a reservation (tags aside).
_FILTERED = {
    "state": "state",
    "owner-id": "ownerId",
    "instance-type": "instanceType",
    "availability-zone": "availabilityZone",
    "instance-match-criteria": "instanceMatchCriteria",
    "reservation-type": "reservationType",
}
_LIVE = ("pending", "running")


@dataclass
class DeclaredReservation:
    """One capacity reservation as EC2 would describe it."""

    id: str
    instance_type: str
    zone: str
    total: int
    match_criteria: str = "targeted"
    state: str = "active"
    owner: str = OWNER
    reservation_type: str = "default"
    end_date: dt.datetime | None = None
    interruptible: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)
    #: elements written instead of the computed ones (None: left out), for hostile shapes
    fields: Mapping[str, str | None] = field(default_factory=dict)

    def elements(self, available: int) -> dict[str, str]:
        written = {
            "capacityReservationId": self.id,
            "ownerId": self.owner,
            "instanceType": self.instance_type,
            "instancePlatform": "Linux/UNIX",
            "availabilityZone": self.zone,
            "tenancy": "default",
            "totalInstanceCount": str(self.total),
            "availableInstanceCount": str(available),
            "state": self.state,
            "instanceMatchCriteria": self.match_criteria,
            "endDateType": "unlimited" if self.end_date is None else "limited",
            "reservationType": self.reservation_type,
            "interruptible": "true" if self.interruptible else "false",
        }
        if self.end_date is not None:
            written["endDate"] = self.end_date.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        for name, value in self.fields.items():
            if value is None:
                written.pop(name, None)
            else:
                written[name] = value
        return written


class CapacityReservationStandIn:
    """DescribeCapacityReservations for the reservations a test declares, their availability counted from moto."""

    def __init__(self, proxy: FaultProxy, ec2: Any, page_size: int = 1000) -> None:
        self._ec2 = ec2  # straight to moto: the stand-in's own reads are not logged by the proxy
        self._lock = threading.Lock()
        self._declared: dict[str, DeclaredReservation] = {}
        self._launched: dict[str, str] = {}  # instance id -> reservation id
        self.page_size = page_size
        proxy.serve("DescribeCapacityReservations", self.respond)
        proxy.serve("CreateFleet", self._refuse_full)
        proxy.observe("CreateFleet", self._count_launches)
        proxy.serve("DescribeInstances", self._describe_instances)
        self._proxy = proxy

    def declare(self, reservation: DeclaredReservation) -> DeclaredReservation:
        with self._lock:
            self._declared[reservation.id] = reservation
        return reservation

    def forget(self, reservation_id: str) -> None:
        """The reservation is gone (cancelled, expired and removed): EC2 no longer describes it."""
        with self._lock:
            self._declared.pop(reservation_id, None)

    def available(self, reservation_id: str) -> int:
        """The declared total less the live instances moto runs that were launched into the reservation."""
        with self._lock:
            declared = self._declared[reservation_id]
            ours = [i for i, r in self._launched.items() if r == reservation_id]
        if not ours:
            return declared.total
        found = self._ec2.describe_instances(InstanceIds=ours)["Reservations"]
        live = sum(1 for r in found for i in r["Instances"] if i["State"]["Name"] in _LIVE)
        return declared.total - live

    def launched_into(self, reservation_id: str) -> list[str]:
        with self._lock:
            return sorted(i for i, r in self._launched.items() if r == reservation_id)

    # --- DescribeCapacityReservations ------------------------------------------------------------------------

    def respond(self, call: Call) -> Answer:
        ids = [v for k, v in sorted(call.params.items(), key=_numbered) if k.startswith("CapacityReservationId.")]
        with self._lock:
            declared = dict(self._declared)
        missing = [i for i in ids if i not in declared]
        if missing:
            return error_answer(
                call, 400, "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{missing[0]}' does not exist",
            )
        chosen = [declared[i] for i in ids] if ids else [declared[k] for k in sorted(declared)]
        filters = _filters(call.params)
        matching = [(r, self.available(r.id)) for r in chosen]
        matching = [(r, n) for r, n in matching if all(_matches(r, n, name, values) for name, values in filters)]
        start = int(call.params.get("NextToken") or 0)
        size = min(int(call.params.get("MaxResults") or self.page_size), self.page_size)
        page = matching[start:start + size]
        items = "".join(_item(r, n) for r, n in page)
        token = f"<nextToken>{start + size}</nextToken>" if start + size < len(matching) else ""
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeCapacityReservationsResponse xmlns="{_XMLNS}">'
            f"<requestId>{uuid.uuid4()}</requestId><capacityReservationSet>{items}</capacityReservationSet>{token}"
            "</DescribeCapacityReservationsResponse>"
        )
        return Answer(200, xml.encode(), {"Content-Type": "text/xml;charset=UTF-8"})

    # --- CreateFleet: counting and refusing -----------------------------------------------------------------

    def _target(self, template: str) -> str | None:
        """The reservation a launch template (name or id, `$Latest`) targets, if any."""
        key = "LaunchTemplateId" if template.startswith("lt-") else "LaunchTemplateName"
        try:
            versions = self._ec2.describe_launch_template_versions(**{key: template}, Versions=["$Latest"])
        except Exception:  # noqa: BLE001 (a template moto does not know targets nothing)
            return None
        for version in versions.get("LaunchTemplateVersions", []):
            spec = version.get("LaunchTemplateData", {}).get("CapacityReservationSpecification") or {}
            if spec.get("CapacityReservationPreference") == "capacity-reservations-only":
                target = (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
                return str(target) if target else None
        return None

    def _templates(self, call: Call) -> list[str]:
        return sorted({
            v for k, v in call.params.items()
            if k.startswith("LaunchTemplateConfigs.")
            and k.endswith(("LaunchTemplateSpecification.LaunchTemplateName",
                            "LaunchTemplateSpecification.LaunchTemplateId"))
        })

    def _refuse_full(self, call: Call) -> Answer | None:
        with self._lock:
            if not self._declared:
                return None
        targets = [self._target(t) for t in self._templates(call)]
        if not targets or any(t is None or t not in self._declared for t in targets):
            return None
        if any(self.available(t) > 0 for t in targets if t is not None):
            return None
        errors = "".join(
            "<item><launchTemplateAndOverrides><overrides>"
            f"<instanceType>{escape(instance_type)}</instanceType><subnetId>{escape(subnet)}</subnetId></overrides>"
            "</launchTemplateAndOverrides><lifecycle>on-demand</lifecycle>"
            "<errorCode>ReservationCapacityExceeded</errorCode>"
            "<errorMessage>Insufficient capacity in the capacity reservation.</errorMessage></item>"
            for instance_type, subnet in call.overrides()
        )
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<CreateFleetResponse xmlns="{_XMLNS}">'
            f"<requestId>{uuid.uuid4()}</requestId><fleetId>fleet-{uuid.uuid4()}</fleetId>"
            f"<errorSet>{errors}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
        )
        return Answer(200, xml.encode(), {"Content-Type": "text/xml;charset=UTF-8"})

    def _describe_instances(self, call: Call) -> Answer | None:
        with self._lock:
            launched = dict(self._launched)
            declared = dict(self._declared)
        if not launched:
            return None
        answer = self._proxy.forward(call)
        if answer.status != 200:
            return answer
        text = answer.body.decode()
        for instance_id, reservation_id in launched.items():
            reservation = declared.get(reservation_id)
            marker = f"<instanceId>{instance_id}</instanceId>"
            if reservation is not None and marker in text:
                text = text.replace(marker, marker + _reserved_elements(reservation))
        return Answer(answer.status, text.encode(), answer.headers)

    def _count_launches(self, call: Call, answer: Answer) -> None:
        with self._lock:
            if not self._declared or answer.status != 200:
                return
        try:
            root = ET.fromstring(answer.body)
        except ET.ParseError:
            return
        for item in root.iterfind(f"{_NS}fleetInstanceSet/{_NS}item"):
            spec = item.find(f"{_NS}launchTemplateAndOverrides/{_NS}launchTemplateSpecification")
            template = None
            if spec is not None:
                template = spec.findtext(f"{_NS}launchTemplateName") or spec.findtext(f"{_NS}launchTemplateId")
            names = [template] if template else self._templates(call)
            targets = {t for t in (self._target(n) for n in names) if t is not None}
            if len(targets) != 1:
                continue
            (target,) = targets
            with self._lock:
                for instance in item.iterfind(f"{_NS}instanceIds/{_NS}item"):
                    if instance.text:
                        self._launched[instance.text] = target


def _reserved_elements(reservation: DeclaredReservation) -> str:
    lifecycle = "capacity-block" if reservation.reservation_type == "capacity-block" else (
        "interruptible-capacity-reservation" if reservation.interruptible else "")
    return (
        f"<capacityReservationId>{escape(reservation.id)}</capacityReservationId>"
        "<capacityReservationSpecification><capacityReservationPreference>capacity-reservations-only"
        "</capacityReservationPreference><capacityReservationTarget><capacityReservationId>"
        f"{escape(reservation.id)}</capacityReservationId></capacityReservationTarget>"
        "</capacityReservationSpecification>"
        + (f"<instanceLifecycle>{lifecycle}</instanceLifecycle>" if lifecycle else "")
    )


def _numbered(item: tuple[str, str]) -> tuple[int, str]:
    tail = item[0].rsplit(".", 1)[-1]
    return (int(tail) if tail.isdigit() else 0, item[0])


def _filters(params: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """`Filter.N.Name` with its `Filter.N.Value.M`, in N's order."""
    found: dict[int, tuple[str, list[tuple[int, str]]]] = {}
    for key, value in params.items():
        parts = key.split(".")
        if parts[0] != "Filter" or len(parts) < 3 or not parts[1].isdigit():
            continue
        name, values = found.get(int(parts[1]), ("", []))
        if parts[2] == "Name":
            name = value
        elif parts[2] == "Value" and len(parts) == 4 and parts[3].isdigit():
            values.append((int(parts[3]), value))
        found[int(parts[1])] = (name, values)
    return [(name, [v for _, v in sorted(values)]) for _, (name, values) in sorted(found.items())]


def _matches(reservation: DeclaredReservation, available: int, name: str, values: list[str]) -> bool:
    if name.startswith("tag:"):
        return reservation.tags.get(name[4:]) in values
    if name == "tag-key":
        return any(key in reservation.tags for key in values)
    element = _FILTERED.get(name)
    if element is None:
        raise ValueError(f"the stand-in does not filter by {name!r}")
    return reservation.elements(available).get(element) in values


def _item(reservation: DeclaredReservation, available: int) -> str:
    elements = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in reservation.elements(available).items())
    tags = "".join(
        f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>" for k, v in sorted(reservation.tags.items())
    )
    return f"<item>{elements}<tagSet>{tags}</tagSet></item>"


__all__ = ["OWNER", "CapacityReservationStandIn", "DeclaredReservation"]
