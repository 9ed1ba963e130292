"""A DescribeCapacityReservations answer with a number at the edge — 4,000 and 5,000 digits, `1e99999999`, `.inf`,
`NaN` in `availableInstanceCount` / `totalInstanceCount` — over moto's server and the stand-in: the adapter reads
the room as Karpenter reads a number it can, and otherwise says the reservations are unknown or leaves the entry
out; never an exception out of the call (which would stop the provisioning pass) and never room it was not told."""

from __future__ import annotations

import pytest

from karpenter_policy.cloud.aws.provider import AwsCloudProvider

from .conftest import AwsEnv
from .reservations import DeclaredReservation

ZONE = "us-east-1a"


@pytest.mark.parametrize("count", ["9" * 4000, "9" * 5000, "1e99999999", ".inf", "NaN", "-1", ""])
def test_an_edge_number_in_the_room_never_raises_nor_invents_room(aws: AwsEnv, count: str) -> None:
    aws.reservations.declare(DeclaredReservation("cr-edge", "m5.large", ZONE, 2,
                                                 fields={"availableInstanceCount": count,
                                                         "totalInstanceCount": count}))
    provider: AwsCloudProvider = aws.provider()
    spec = {**aws.spec(), "capacityReservationSelectorTerms": [{"id": "cr-edge"}]}
    found = provider.capacity_reservations(spec)
    offered = provider.reserved_offerings(spec)
    if count == "9" * 4000:  # an integer boto3 reads, past EC2's 32-bit counts: the reservation, but no room
        assert found is not None and [r.id for r in found] == ["cr-edge"]
        assert offered is not None and [(o.available, o.capacity) for o in offered["m5.large"]] == [(False, 0)]
    elif count == "-1":  # an integer, but no room
        assert offered is not None and [o.available for o in offered["m5.large"]] == [False]
    else:  # not an integer EC2 would write (boto3 cannot read it): unknown, the class's NodePools wait
        assert found is None and offered is None
