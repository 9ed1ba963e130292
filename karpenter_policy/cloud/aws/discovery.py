"""The subnets and security groups the controller's launch settings select, asked of EC2: one DescribeSubnets /
DescribeSecurityGroups call per filter set, the answers united by id (Karpenter v1.14.1's `List`, aws
pkg/providers/subnet/subnet.go and securitygroup/securitygroup.go).

The filter sets are `cloud/networkselection.filter_sets` of the settings — an EC2NodeClass's terms read as v1.14.1's
`getFilterSets` (a tag value literal), an AWSNodeTemplate's selector as v0.31.1 (a tag value split at commas) — the
same sets `plan` applies to saved answers. For each zone the launch uses the matching subnet with the most free IP
addresses (ties: the smallest id). Answers are cached for a minute, per filter set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import NotFound
from karpenter_policy.cloud.networkselection import GROUP_ID, SUBNET_ID, filter_sets
from karpenter_policy.cloud.provider import Clock

DISCOVERY_TTL = 60.0

#: One filter set: the `Filters` of one Describe* call.
FilterSet = Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Subnet:
    id: str
    zone: str
    available_ips: int


def _key(filters: FilterSet) -> str:
    return json.dumps([dict(f) for f in filters], sort_keys=True)


class Discovery:
    """Finds (and caches) the subnets and security groups launch settings select."""

    def __init__(self, api: AwsApi, clock: Clock, ttl: float = DISCOVERY_TTL) -> None:
        self._api = api
        self._subnets: TtlCache[tuple[Subnet, ...]] = TtlCache(clock, ttl)
        self._groups: TtlCache[tuple[str, ...]] = TtlCache(clock, ttl)

    def subnets(self, settings: Mapping[str, Any] | None) -> tuple[Subnet, ...]:
        """Every available subnet any of the settings' filter sets matches, sorted by id."""
        by_id = {subnet.id: subnet for filters in filter_sets(settings, SUBNET_ID)
                 for subnet in self._subnets_of(filters)}
        return tuple(by_id[key] for key in sorted(by_id))

    def subnet_per_zone(self, settings: Mapping[str, Any] | None) -> dict[str, Subnet]:
        """zone -> the subnet the settings select with the most free addresses there."""
        best: dict[str, Subnet] = {}
        for subnet in self.subnets(settings):
            current = best.get(subnet.zone)
            if current is None or subnet.available_ips > current.available_ips:
                best[subnet.zone] = subnet
        return dict(sorted(best.items()))

    def security_groups(self, settings: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The ids of every security group any of the settings' filter sets matches, sorted."""
        sets = filter_sets(settings, GROUP_ID)
        return tuple(sorted({group for filters in sets for group in self._groups_of(filters)}))

    def _subnets_of(self, filters: FilterSet) -> tuple[Subnet, ...]:
        return self._subnets.get_or_load(_key(filters), lambda: self._describe_subnets(filters))

    def _groups_of(self, filters: FilterSet) -> tuple[str, ...]:
        return self._groups.get_or_load(_key(filters), lambda: self._describe_groups(filters))

    def invalidate(self) -> None:
        self._subnets.invalidate()
        self._groups.invalidate()

    def _describe_subnets(self, filters: FilterSet) -> tuple[Subnet, ...]:
        try:
            found = list(self._api.paginate("ec2", "describe_subnets", "Subnets", Filters=list(filters)))
        except NotFound:  # an id naming a subnet that does not exist
            return ()
        return tuple(
            sorted(
                (
                    Subnet(str(s["SubnetId"]), str(s["AvailabilityZone"]), int(s.get("AvailableIpAddressCount", 0)))
                    for s in found
                    if s.get("State", "available") == "available"
                ),
                key=lambda s: s.id,
            )
        )

    def _describe_groups(self, filters: FilterSet) -> tuple[str, ...]:
        try:
            found = list(self._api.paginate("ec2", "describe_security_groups", "SecurityGroups", Filters=list(filters)))
        except NotFound:
            return ()
        return tuple(sorted({str(g["GroupId"]) for g in found}))


__all__ = ["Discovery", "FilterSet", "Subnet"]
