"""The placement groups a simulation's account holds, as `simulate --placement-group NAME=STRATEGY[:PARTITIONS]`
declares them.

An EC2NodeClass's `placementGroupSelector` names a group (by name or id) and says nothing of it: its strategy and
partition count are the account's, which Karpenter v1.14.1 reads from DescribePlacementGroups (aws
pkg/providers/placementgroup/). A simulation creates the group a class names in its account (`account`), so what
that group is must be said beside the policies: `hdfs=partition:3` a partition group of 3 partitions (EC2 allows
1 … 7 per zone), `hpc=cluster`, `web=spread`. A group no declaration names is a partition group of 7, EC2's most per
zone (the one that shows the most: its nodes' partitions). Light on purpose: the CLI parses the flag without moto.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from karpenter_policy.api.v1.launchsettings import MAX_PARTITIONS
from karpenter_policy.model.resources import abbreviated
from karpenter_policy.simulate.placementgroups import PARTITION

#: EC2's placement strategies (CreatePlacementGroup `Strategy`; `partition` the stand-in's, `placementgroups`).
CLUSTER: Final = "cluster"
SPREAD: Final = "spread"
STRATEGIES: Final = (CLUSTER, PARTITION, SPREAD)


@dataclass(frozen=True, slots=True)
class DeclaredGroup:
    """A placement group of the simulated account: its strategy, and a partition group's partition count."""

    strategy: str = PARTITION
    partition_count: int = MAX_PARTITIONS

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy {self.strategy!r} is none of EC2's: {', '.join(STRATEGIES)}")
        if self.strategy == PARTITION and not 1 <= self.partition_count <= MAX_PARTITIONS:
            raise ValueError(f"a partition group has 1 to {MAX_PARTITIONS} partitions, not {self.partition_count}")
        if self.strategy != PARTITION and self.partition_count:
            raise ValueError(f"a {self.strategy} group has no partitions")


#: The group a class names that no declaration describes.
DEFAULT: Final = DeclaredGroup()


def parse(value: str) -> tuple[str, DeclaredGroup]:
    """`NAME=STRATEGY[:PARTITIONS]` → (name, group); ValueError saying what is wrong (the partition count of a
    partition group defaults to 7)."""
    name, equals, rest = value.partition("=")
    name = name.strip()
    if not equals or not name:
        raise ValueError(f"{value!r} is not NAME=STRATEGY[:PARTITIONS] (hdfs=partition:3, hpc=cluster, web=spread)")
    strategy, colon, count = rest.strip().partition(":")
    strategy = strategy.strip().lower()
    digits = count.strip()
    if colon and strategy != PARTITION:
        raise ValueError(f"{name}: only a partition group has a partition count (partition:N)")
    if colon and (not (digits.isascii() and digits.isdigit()) or len(digits) > 2):  # int() takes '٣' and '³'
        raise ValueError(f"{name}: the partition count {abbreviated(repr(count))} is not a number from 1 to "
                         f"{MAX_PARTITIONS}")
    count_ = int(digits) if colon else MAX_PARTITIONS if strategy == PARTITION else 0
    try:
        return name, DeclaredGroup(strategy, count_)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def parse_all(values: tuple[str, ...] | list[str]) -> dict[str, DeclaredGroup]:
    """Every declaration, by group name; a name declared twice is a ValueError."""
    found: dict[str, DeclaredGroup] = {}
    for value in values:
        name, group = parse(value)
        if name in found:
            raise ValueError(f"{name}: declared twice")
        found[name] = group
    return found


__all__ = ["CLUSTER", "DEFAULT", "PARTITION", "SPREAD", "STRATEGIES", "DeclaredGroup", "parse",
           "parse_all"]
