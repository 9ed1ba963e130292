"""Node claim templates from the constraint sets in force and the cloud's live offerings.

"What was reviewed is what can run" (docs/architecture.md, the constraint set): a set launches only the instance types
it admits, and only the offerings (zone x capacity type, price, availability) the cloud reports now — in the zones of
its node template's subnets, without the offerings that recently failed for lack of capacity. Sets with the same node
template share one :class:`~karpenter_policy.scheduling.InstanceTable` of every type the cloud offers there (each
set's template masks it to the types the set admits; the whole table is what explains why a pod fits nowhere, in the
words `check --workloads` uses). A table (and each set's template) is rebuilt only when the cloud's answer changed
(the providers cache theirs for a refresh period), so a pass costs a comparison when nothing moved; its index is
built once per process for the same answer (`InstanceTable.shared`: the provisioner's and the disruption decisions'
builders, and a scene's, each have their own table and templates over it).

A set compiled for another region than the cloud's is left out, with the reason (its admitted names and
offerings would be another region's); so is a NodePool's set whose EC2NodeClass the launcher cannot carry out
(`api.v1.launchsettings`), and a set whose node template cannot launch now for a fact of the cluster the cloud
has not told (`CloudProvider.unlaunchable`: AL2023's service CIDR), until it can — as Karpenter v1 holds such an
EC2NodeClass not ready. Sets and templates are keyed by their pool key (`ConstraintSet.pool`: a Provisioner's
name, `NodePool/<name>`), so a Provisioner and a NodePool of one name run side by side. A NodePool's template keeps
its `minValues` under the controller's policy (`--min-values-policy`, Karpenter's operator flag), and a version
holding a NodePool plans with Karpenter v1.14.1's topology rules (`Templates.topology`), as `check` does.

The types of an EC2NodeClass that selects capacity reservations carry their reserved offerings
(`cloud.reservedtypes`, from `ReservingCloud.reserved_offerings`; none with the ReservedCapacity gate off); while
those reservations are unknown (the cloud could not tell) its sets are left out, so nothing launches as if they were
not there.

The templates of an EC2NodeClass with a placement group carry its id and, for a partition group, its partitions
(`PlacingCloud.placement_requirements`, `NodeClaimTemplate.offered`): the topology domains v1.14.1's offerings per
partition give a spread over `karpenter.k8s.aws/placement-group-partition`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.constraintset import ConstraintSet, canonical_json
from karpenter_policy.api.v1.launchsettings import LaunchSettingsError
from karpenter_policy.cloud.capacityreservations import TERMS as RESERVATION_TERMS
from karpenter_policy.cloud.provider import CloudProvider, PlacingCloud, ReservingCloud
from karpenter_policy.cloud.reservedtypes import with_reserved_offerings
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate, TopologyRules
from karpenter_policy.scheduling.templates import by_weight


@dataclass(slots=True)
class Templates:
    """The node claim templates of one pass, the sets they come from and the sets left out with why, by pool key."""

    templates: list[NodeClaimTemplate] = field(default_factory=list)
    sets: dict[str, ConstraintSet] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def template(self, name: str) -> NodeClaimTemplate:
        return next(t for t in self.templates if t.name == name)

    def with_sets_of(self, other: Templates) -> Templates:
        """These templates and `other`'s side by side (a static NodePool's beside the others: what launches and the
        facts of drift read, never a scheduling run)."""
        return Templates(
            [*self.templates, *other.templates], {**self.sets, **other.sets}, {**self.left_out, **other.left_out}
        )

    def offering_price(self, pool: str, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """$/h of a node's offering as the cloud prices it, available now or not (None: a pool not among these, an
        unknown type or offering, or no price data)."""
        if pool not in self.sets:
            return None
        table = self.template(pool).table
        position = table.position.get(instance_type)
        if position is None:
            return None
        for offering in table.types[position].offerings:
            if offering.zone == zone and offering.capacity_type == capacity_type:
                return offering.price
        return None

    @property
    def topology(self) -> TopologyRules:
        """Whose topology rules a run on these templates follows: v1.14.1's when a NodePool is among them (one
        switch per run, as `check --workloads` decides it for a repository), else v0.31's."""
        return TopologyRules.V1_14 if any(s.is_nodepool for s in self.sets.values()) else TopologyRules.V0_31


@dataclass(slots=True)
class _Table:
    types: tuple[InstanceType, ...]
    table: InstanceTable
    offered: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    templates: dict[str, NodeClaimTemplate] = field(default_factory=dict)  # set hash → template


def _provider_key(spec: object) -> str:
    return canonical_json(spec)


class TemplateBuilder:
    """Builds :class:`Templates` per pass (see the module docstring). `region` is the cloud's; `min_values_policy`
    how NodePools' templates keep their minValues; `reserved_capacity` Karpenter's ReservedCapacity gate."""

    def __init__(
        self, cloud: CloudProvider, region: str, min_values_policy: str = STRICT, *, reserved_capacity: bool = True
    ) -> None:
        self.cloud = cloud
        self.region = region
        self.min_values_policy = min_values_policy
        self.reserved_capacity = reserved_capacity
        self._tables: dict[str, _Table] = {}

    def build(self, sets: Sequence[ConstraintSet]) -> Templates:
        """Raises CloudError when the cloud cannot tell its offerings (and has no earlier answer)."""
        out = Templates()
        groups: dict[str, list[ConstraintSet]] = {}
        specs: dict[str, Mapping[str, Any] | None] = {}
        for constraint_set in sets:
            if constraint_set.region and constraint_set.region != self.region:
                out.left_out[constraint_set.pool] = (
                    f"compiled for region {constraint_set.region}, the controller launches in {self.region}"
                )
                continue
            try:
                launch_spec = constraint_set.launch_spec
            except LaunchSettingsError as error:
                name = constraint_set.provider.name if constraint_set.provider is not None else None
                out.left_out[constraint_set.pool] = f"its EC2NodeClass {name} cannot be launched: {error}"
                continue
            unlaunchable = self.cloud.unlaunchable(launch_spec)
            if unlaunchable is not None:
                name = constraint_set.provider.name if constraint_set.provider is not None else None
                out.left_out[constraint_set.pool] = f"its node template {name} cannot launch now: {unlaunchable}"
                continue
            key = _provider_key(launch_spec)
            specs[key] = launch_spec
            groups.setdefault(key, []).append(constraint_set)
        used = set()
        for key, members in sorted(groups.items()):
            spec = specs[key]
            types = tuple(self.cloud.instance_types(provider=spec))
            if spec and spec.get(RESERVATION_TERMS):
                reserved = (  # a cloud that keeps no capacity reservations (the in-memory one) has none to offer
                    self.cloud.reserved_offerings(spec, enabled=self.reserved_capacity)
                    if isinstance(self.cloud, ReservingCloud)
                    else {}
                )
                if reserved is None:
                    for constraint_set in members:
                        out.left_out[constraint_set.pool] = (
                            "the capacity reservations its EC2NodeClass selects are unknown now"
                        )
                    continue
                types = with_reserved_offerings(types, reserved)
            used.add(key)
            offered = self.cloud.placement_requirements(spec) if isinstance(self.cloud, PlacingCloud) else {}
            cached = self._tables.get(key)
            if cached is None or cached.types != types or cached.offered != offered:  # identical objects at once
                cached = self._tables[key] = _Table(types, InstanceTable.shared(types, self.region), offered)
            for constraint_set in members:
                built = f"{constraint_set.hash}/{self.min_values_policy}"
                template = cached.templates.get(built)
                if template is None:
                    try:
                        template = NodeClaimTemplate.from_constraint_set(
                            cached.table, constraint_set, self.min_values_policy, offered
                        )
                    except ValueError as error:  # a kubelet setting the node arithmetic cannot read
                        out.left_out[constraint_set.pool] = str(error)
                        continue
                    cached.templates[built] = template
                out.templates.append(template)
                out.sets[constraint_set.pool] = constraint_set
        for stale in set(self._tables) - used:
            del self._tables[stale]
        out.templates.sort(key=by_weight)
        return out


__all__ = ["TemplateBuilder", "Templates"]
