"""A NodePool's instance types with the reserved offerings of the capacity reservations its EC2NodeClass selects.

Karpenter v1.14.1 (aws pkg/providers/instancetype/offering/provider.go `InjectOfferings`) adds to each instance type
one offering per capacity reservation of it (`ReservedCapacityResolver`, here `cloud.capacityreservations
.reserved_offerings`): capacity type `reserved`, the reservation's zone, priced at the type's on-demand price ÷
10,000,000 (so the scheduler, ordering by price, prefers it), and naming its reservation — id, type,
interruptibility and room now — as `model.instancetypes.Offering` carries them. A type no reservation is of is kept
as it is (the same object), and with no reserved offering at all the types come back unchanged, so a NodePool
without reservations gets the very table it had (`reconcile.templates`: a table is rebuilt only when its types
change). `commands/plan/reservedlaunches` adds them for `plan`'s waves.

Pure (no I/O). Which offerings a claim may count on within a pass is `scheduling.reservations`' job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from karpenter_policy.cloud.capacityreservations import ReservedOffering
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.labels import CAPACITY_RESERVED


def as_offering(reserved: ReservedOffering) -> Offering:
    """The reserved offering as an instance type's offering (capacity type `reserved`, its reservation named)."""
    return Offering(
        zone=reserved.zone,
        capacity_type=CAPACITY_RESERVED,
        price=reserved.price,
        available=reserved.available,
        reservation_id=reserved.reservation_id,
        reservation_type=reserved.reservation_type,
        reservation_interruptible=reserved.interruptible,
        reservation_capacity=reserved.capacity,
    )


def with_reserved_offerings(
    types: Sequence[InstanceType], reserved: Mapping[str, Sequence[ReservedOffering]]
) -> tuple[InstanceType, ...]:
    """`types` with each one's reserved offerings added (see the module docstring); a reserved offering of a type
    not among `types` is left out (the NodePool's types are the ones the cloud offers in its subnets' zones)."""
    if not any(reserved.values()):
        return tuple(types)
    out: list[InstanceType] = []
    for instance_type in types:
        extra = reserved.get(instance_type.name, ())
        if extra:
            instance_type = dataclasses.replace(
                instance_type, offerings=(*instance_type.offerings, *(as_offering(o) for o in extra))
            )
        out.append(instance_type)
    return tuple(out)


__all__ = ["as_offering", "with_reserved_offerings"]
