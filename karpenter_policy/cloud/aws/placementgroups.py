"""The placement group an EC2NodeClass's `placementGroupSelector` names, as Karpenter v1.14.1 resolves it (aws
pkg/providers/placementgroup/provider.go and types.go): one DescribePlacementGroups filtered to `state=available`,
by `GroupIds` when the selector has an id, else by `GroupNames` (a name that starts with `pg-` is still a name); the
first group of the answer, or none. An answer (a group or none) is kept a minute (v1.14.1's `pgCache`); a call that
fails answers the last group found for that selector if there is one, else raises (v1.14.1's 24-hour
`pgAvailabilityCache` — here it is kept as long as the provider lives). EC2's "no such group"
(`InvalidPlacementGroup.Unknown`) is an answer: none.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.cloud.provider import Clock

#: How long an answer is kept (seconds): v1.14.1's placement group cache (`PlacementGroupTTL`, one minute).
PLACEMENT_GROUP_TTL: Final = 60.0
#: EC2's answer to a name or id it does not know.
UNKNOWN_GROUP: Final = "InvalidPlacementGroup.Unknown"
#: The partition strategy: v1.14.1 launches into the lowest partition the node's requirements allow.
PARTITION: Final = "partition"


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    """A resolved placement group (v1.14.1's `placementgroup.PlacementGroup`)."""

    id: str
    name: str
    strategy: str
    partition_count: int = 0
    spread_level: str = ""


def query(selector: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (EC2 parameter, value) a selector asks by — `GroupIds` for an id, else `GroupNames` — None: it names
    nothing (v1.14.1's `Query.DescribePlacementGroupsInput`)."""
    if selector.get("id"):
        return ("GroupIds", str(selector["id"]))
    if selector.get("name"):
        return ("GroupNames", str(selector["name"]))
    return None


def _group(raw: Mapping[str, Any]) -> PlacementGroup:
    """v1.14.1's `PlacementGroupFromEC2`."""
    return PlacementGroup(
        id=str(raw.get("GroupId") or ""),
        name=str(raw.get("GroupName") or ""),
        strategy=str(raw.get("Strategy") or ""),
        partition_count=int(raw.get("PartitionCount") or 0),
        spread_level=str(raw.get("SpreadLevel") or ""),
    )


class PlacementGroups:
    """See the module docstring."""

    def __init__(self, api: AwsApi, clock: Clock, ttl: float = PLACEMENT_GROUP_TTL) -> None:
        self._api = api
        self._answers: TtlCache[PlacementGroup | None] = TtlCache(clock, ttl)
        self._last_found: dict[tuple[str, str], PlacementGroup] = {}
        self._lock = threading.Lock()

    def get(self, selector: Any) -> PlacementGroup | None:
        """The group `selector` (an EC2NodeClass's `placementGroupSelector`) names; None: no selector, or EC2 has no
        such available group. :class:`CloudError` when EC2 could not be asked and no group was found before."""
        if not isinstance(selector, Mapping) or (asked := query(selector)) is None:
            return None
        parameter, value = asked

        def load() -> PlacementGroup | None:
            try:
                available = [{"Name": "state", "Values": ["available"]}]
                arguments: dict[str, Any] = {"Filters": available, parameter: [value]}
                answer = self._api.call("ec2", "describe_placement_groups", **arguments)
            except NotFound:
                return None
            except CloudError as error:
                if error.code == UNKNOWN_GROUP:
                    return None
                raise
            groups = [g for g in answer.get("PlacementGroups") or () if isinstance(g, Mapping)]
            if not groups:
                return None
            found = _group(groups[0])
            with self._lock:
                self._last_found[asked] = found
            return found

        try:
            return self._answers.get_or_load(asked, load)
        except CloudError:  # not kept: the next call asks again
            with self._lock:
                stale = self._last_found.get(asked)
            if stale is None:
                raise
            return stale


__all__ = ["PARTITION", "PLACEMENT_GROUP_TTL", "UNKNOWN_GROUP", "PlacementGroup", "PlacementGroups", "query"]
