"""Subnets and security groups chosen by an AWSNodeTemplate's selectors (Karpenter v0.31 semantics), or by an
EC2NodeClass's several terms: each term's selector asked on its own, what they match unioned by id (Karpenter
v1.14.1's `List`, aws pkg/providers/subnet/subnet.go and securitygroup/securitygroup.go).

A selector is a map. ``aws-ids`` / ``aws::ids`` lists ids (comma-separated) and stands alone; ``aws::name`` (a
security group's name: a Karpenter v1 EC2NodeClass's `securityGroupSelectorTerms` `name`, matched as its
`group-name` filter) is ANDed with the tags beside it; any other key is a tag:
value ``*`` matches any resource carrying the tag key, otherwise the value is a comma-separated list of
accepted tag values. Every entry must match (AND): the filters of `cloud/networkselection.selector_filters`, which
`plan` applies to saved answers too. For each zone the launch uses the matching subnet with the
most free IP addresses (ties: the smallest id). Answers are cached for a minute, per selector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpenter_policy.cloud.amiselection import ID_KEYS
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import NotFound
from karpenter_policy.cloud.networkselection import GROUP_NAME_KEY, selector_filters
from karpenter_policy.cloud.provider import Clock

DISCOVERY_TTL = 60.0


@dataclass(frozen=True, slots=True)
class Subnet:
    id: str
    zone: str
    available_ips: int


def _key(selector: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in selector.items()))


class Discovery:
    """Finds (and caches) the subnets and security groups a node template selects."""

    def __init__(self, api: AwsApi, clock: Clock, ttl: float = DISCOVERY_TTL) -> None:
        self._api = api
        self._subnets: TtlCache[tuple[Subnet, ...]] = TtlCache(clock, ttl)
        self._groups: TtlCache[tuple[str, ...]] = TtlCache(clock, ttl)

    def subnets(self, selectors: Sequence[Mapping[str, str]]) -> tuple[Subnet, ...]:
        """Every available subnet any of the selectors matches, sorted by id."""
        by_id = {subnet.id: subnet for selector in selectors for subnet in self._subnets_of(selector)}
        return tuple(by_id[key] for key in sorted(by_id))

    def subnet_per_zone(self, selectors: Sequence[Mapping[str, str]]) -> dict[str, Subnet]:
        """zone -> the subnet any selector matches with the most free addresses there."""
        best: dict[str, Subnet] = {}
        for subnet in self.subnets(selectors):
            current = best.get(subnet.zone)
            if current is None or subnet.available_ips > current.available_ips:
                best[subnet.zone] = subnet
        return dict(sorted(best.items()))

    def security_groups(self, selectors: Sequence[Mapping[str, str]]) -> tuple[str, ...]:
        """The ids of every security group any of the selectors matches, sorted."""
        return tuple(sorted({group for selector in selectors for group in self._groups_of(selector)}))

    def _subnets_of(self, selector: Mapping[str, str]) -> tuple[Subnet, ...]:
        return self._subnets.get_or_load(_key(selector), lambda: self._describe_subnets(selector))

    def _groups_of(self, selector: Mapping[str, str]) -> tuple[str, ...]:
        return self._groups.get_or_load(_key(selector), lambda: self._describe_groups(selector))

    def invalidate(self) -> None:
        self._subnets.invalidate()
        self._groups.invalidate()

    def _describe_subnets(self, selector: Mapping[str, str]) -> tuple[Subnet, ...]:
        filters = selector_filters(selector, "subnet-id")
        try:
            found = list(self._api.paginate("ec2", "describe_subnets", "Subnets", Filters=filters))
        except NotFound:  # an aws-ids entry naming a subnet that does not exist
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

    def _describe_groups(self, selector: Mapping[str, str]) -> tuple[str, ...]:
        filters = selector_filters(selector, "group-id")
        try:
            found = list(self._api.paginate("ec2", "describe_security_groups", "SecurityGroups", Filters=filters))
        except NotFound:
            return ()
        return tuple(sorted({str(g["GroupId"]) for g in found}))


__all__ = ["GROUP_NAME_KEY", "ID_KEYS", "Discovery", "Subnet", "selector_filters"]
