"""CreateFleet requests and answers: one instance, instant, from up to 60 instance type x subnet overrides.

A request carries one capacity type: spot with the ``price-capacity-optimized`` allocation strategy (EC2 picks
among the cheapest pools the one least likely to be interrupted), on-demand with ``lowest-price``. Overrides are
grouped by launch template in the order given (cheapest first). Tags go on the instance, its volumes and the
fleet. The client token of a request is derived from the launch's token and the request's content, so a retry
of the same request is idempotent at EC2 and a different request (other overrides) never collides with it.

An instant fleet answers with the instances it launched and, per pool it could not use, an error: the capacity
errors of :data:`UNFULFILLABLE_CODES` mean "try another offering"; anything else is a problem with the request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.constraintset import canonical_json
from karpenter_policy.cloud.capacityreservations import TYPE_CAPACITY_BLOCK, TYPE_DEFAULT
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering

MAX_OVERRIDES = 60
SPOT_ALLOCATION_STRATEGY = "price-capacity-optimized"
ON_DEMAND_ALLOCATION_STRATEGY = "lowest-price"

#: Fleet error codes that mean the pool (type, zone, capacity type) cannot give capacity now (Karpenter v0.31).
UNFULFILLABLE_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        # a full capacity reservation (v1.14.1's `reservationCapacityExceededErrorCode`)
        "ReservationCapacityExceeded",
    }
)
#: The error EC2 gives when a launch template vanished since it was created.
LAUNCH_TEMPLATE_NOT_FOUND = "InvalidLaunchTemplateName.NotFoundException"
LAUNCH_TEMPLATE_ID_NOT_FOUND = "InvalidLaunchTemplateId.NotFound"
LAUNCH_TEMPLATE_NOT_FOUND_CODES = frozenset({LAUNCH_TEMPLATE_NOT_FOUND, LAUNCH_TEMPLATE_ID_NOT_FOUND})


@dataclass(frozen=True, slots=True)
class Override:
    """One pool of the request: an offering, the subnet to launch it in, and the launch template to use."""

    offering: ChosenOffering
    subnet_id: str
    launch_template: str


@dataclass(frozen=True, slots=True)
class Launched:
    instance_id: str
    instance_type: str
    subnet_id: str
    capacity_type: str
    launch_template: str


@dataclass(frozen=True, slots=True)
class FleetError:
    instance_type: str
    subnet_id: str
    zone: str
    capacity_type: str
    code: str
    message: str
    launch_template: str = ""

    @property
    def unfulfillable(self) -> bool:
        return self.code in UNFULFILLABLE_CODES


def request_token(client_token: str, capacity_type: str, overrides: Sequence[Override], attempt: int = 0) -> str:
    """EC2's ClientToken (at most 64 ASCII characters) for one CreateFleet request of a launch; ``attempt``
    tells apart a request sent again on purpose (e.g. after re-creating a vanished launch template)."""
    content: dict[str, object] = {
        "token": client_token,
        "capacityType": capacity_type,
        "overrides": [[o.offering.instance_type, o.subnet_id, o.launch_template] for o in overrides],
    }
    if attempt:
        content["attempt"] = attempt
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in sorted(tags.items())]


def fleet_request(
    capacity_type: str,
    overrides: Sequence[Override],
    tags: Mapping[str, str],
    client_token: str,
    attempt: int = 0,
    reservation_kind: tuple[str, bool] = (TYPE_DEFAULT, False),
    context: str | None = None,
) -> dict[str, Any]:
    """CreateFleet's arguments for one instance of ``capacity_type`` from ``overrides`` (at most 60). A `reserved`
    launch's target capacity type and options are v1.14.1's `CreateFleetInputBuilder` (aws pkg/providers/instance/
    types.go:205-245) for its ``reservation_kind`` (type, interruptible): a capacity block's `capacity-block` with no
    options, an interruptible reservation's `reserved-capacity` with `ReservedCapacityOptions`, else `on-demand`
    with the on-demand options. ``context`` (an EC2NodeClass's ODCR `context`) is the request's `Context`, as
    `WithContextID` sets it (types.go:186, :224); None: no `Context`."""
    if not overrides or len(overrides) > MAX_OVERRIDES:
        raise ValueError(f"CreateFleet takes 1 to {MAX_OVERRIDES} overrides, not {len(overrides)}")
    by_template: dict[str, list[dict[str, str]]] = {}
    for override in overrides:
        by_template.setdefault(override.launch_template, []).append(
            {"InstanceType": override.offering.instance_type, "SubnetId": override.subnet_id}
        )
    request: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": request_token(client_token, capacity_type, overrides, attempt),
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": _target_capacity_type(capacity_type, reservation_kind),
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": pool,
            }
            for name, pool in by_template.items()
        ],
        "TagSpecifications": [
            {"ResourceType": resource, "Tags": _tag_list(tags)} for resource in ("instance", "volume", "fleet")
        ],
    }
    if context is not None:
        request["Context"] = context
    reserved = capacity_type == wk.CAPACITY_RESERVED
    if capacity_type == wk.CAPACITY_SPOT:
        request["SpotOptions"] = {"AllocationStrategy": SPOT_ALLOCATION_STRATEGY}
    elif reserved and reservation_kind[1]:
        request["ReservedCapacityOptions"] = {"ReservationTypes": ["interruptible-capacity-reservation"]}
    elif not (reserved and reservation_kind[0] == TYPE_CAPACITY_BLOCK):
        request["OnDemandOptions"] = {"AllocationStrategy": ON_DEMAND_ALLOCATION_STRATEGY}
    return request


def _target_capacity_type(capacity_type: str, reservation_kind: tuple[str, bool]) -> str:
    if capacity_type != wk.CAPACITY_RESERVED:
        return capacity_type
    if reservation_kind[0] == TYPE_CAPACITY_BLOCK:
        return "capacity-block"
    return "reserved-capacity" if reservation_kind[1] else wk.CAPACITY_ON_DEMAND


def _template_name(entry: Mapping[str, Any]) -> str:
    spec = (entry.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}
    return str(spec.get("LaunchTemplateName") or spec.get("LaunchTemplateId") or "")


def _overrides(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    overrides: Mapping[str, Any] = (entry.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
    return overrides


def parse_fleet_response(
    response: Mapping[str, Any], capacity_type: str, zone_of_subnet: Mapping[str, str]
) -> tuple[list[Launched], list[FleetError]]:
    """The instances launched and the per-pool errors of a CreateFleet answer."""
    launched: list[Launched] = []
    for entry in response.get("Instances") or []:
        overrides = _overrides(entry)
        for instance_id in entry.get("InstanceIds") or []:
            launched.append(
                Launched(
                    instance_id=str(instance_id),
                    instance_type=str(entry.get("InstanceType") or overrides.get("InstanceType") or ""),
                    subnet_id=str(overrides.get("SubnetId") or entry.get("SubnetId") or ""),
                    capacity_type=str(entry.get("Lifecycle") or capacity_type),
                    launch_template=_template_name(entry),
                )
            )
    errors: list[FleetError] = []
    for entry in response.get("Errors") or []:
        overrides = _overrides(entry)
        subnet = str(overrides.get("SubnetId") or "")
        errors.append(
            FleetError(
                instance_type=str(overrides.get("InstanceType") or ""),
                subnet_id=subnet,
                zone=str(overrides.get("AvailabilityZone") or zone_of_subnet.get(subnet, "")),
                capacity_type=str(entry.get("Lifecycle") or capacity_type),
                code=str(entry.get("ErrorCode") or ""),
                message=str(entry.get("ErrorMessage") or ""),
                launch_template=_template_name(entry),
            )
        )
    return launched, errors


__all__ = [
    "LAUNCH_TEMPLATE_NOT_FOUND",
    "LAUNCH_TEMPLATE_NOT_FOUND_CODES",
    "MAX_OVERRIDES",
    "ON_DEMAND_ALLOCATION_STRATEGY",
    "SPOT_ALLOCATION_STRATEGY",
    "UNFULFILLABLE_CODES",
    "FleetError",
    "Launched",
    "Override",
    "fleet_request",
    "parse_fleet_response",
    "request_token",
]
