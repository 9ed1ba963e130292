"""Node claim templates from the constraint sets in force and the cloud's live offerings.

"What was reviewed is what can run" (docs/architecture.md, the constraint set): a set launches only the instance types
it admits, and only the offerings (zone x capacity type, price, availability) the cloud reports now — in the zones of
its node template's subnets, without the offerings that recently failed for lack of capacity. Sets with the same node
template share one :class:`~karpenter_policy.scheduling.InstanceTable` of every type the cloud offers there (each
set's template masks it to the types the set admits; the whole table is what explains why a pod fits nowhere, in the
words `check --workloads` uses). A table (and each set's template) is rebuilt only when the cloud's answer changed
(the providers cache theirs for a refresh period), so a pass costs a comparison when nothing moved.

A set compiled for another region than the cloud's is left out, with the reason (its admitted names and
offerings would be another region's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from karpenter_policy.api.constraintset import ConstraintSet, canonical_json
from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate


@dataclass(slots=True)
class Templates:
    """The node claim templates of one pass, the sets they come from (by name), and the sets left out with why."""

    templates: list[NodeClaimTemplate] = field(default_factory=list)
    sets: dict[str, ConstraintSet] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def template(self, name: str) -> NodeClaimTemplate:
        return next(t for t in self.templates if t.name == name)


@dataclass(slots=True)
class _Table:
    types: tuple[InstanceType, ...]
    table: InstanceTable
    templates: dict[str, NodeClaimTemplate] = field(default_factory=dict)  # set hash → template


def _provider_key(constraint_set: ConstraintSet) -> str:
    spec = constraint_set.provider.spec if constraint_set.provider is not None else None
    return canonical_json(spec)


class TemplateBuilder:
    """Builds :class:`Templates` per pass (see the module docstring). `region` is the cloud's."""

    def __init__(self, cloud: CloudProvider, region: str) -> None:
        self.cloud = cloud
        self.region = region
        self._tables: dict[str, _Table] = {}

    def build(self, sets: Sequence[ConstraintSet]) -> Templates:
        """Raises CloudError when the cloud cannot tell its offerings (and has no earlier answer)."""
        out = Templates()
        groups: dict[str, list[ConstraintSet]] = {}
        for constraint_set in sets:
            if constraint_set.region and constraint_set.region != self.region:
                out.left_out[constraint_set.name] = (
                    f"compiled for region {constraint_set.region}, the controller launches in {self.region}"
                )
                continue
            groups.setdefault(_provider_key(constraint_set), []).append(constraint_set)
        used = set()
        for key, members in sorted(groups.items()):
            spec = members[0].provider.spec if members[0].provider is not None else None
            types = tuple(self.cloud.instance_types(provider=spec))
            used.add(key)
            cached = self._tables.get(key)
            if cached is None or cached.types != types:  # identical objects compare at once, copies by value
                cached = self._tables[key] = _Table(types, InstanceTable(types, self.region))
            for constraint_set in members:
                template = cached.templates.get(constraint_set.hash)
                if template is None:
                    try:
                        template = NodeClaimTemplate.from_constraint_set(cached.table, constraint_set)
                    except ValueError as error:  # a kubelet setting the node arithmetic cannot read
                        out.left_out[constraint_set.name] = str(error)
                        continue
                    cached.templates[constraint_set.hash] = template
                out.templates.append(template)
                out.sets[constraint_set.name] = constraint_set
        for stale in set(self._tables) - used:
            del self._tables[stale]
        out.templates.sort(key=lambda t: (-t.weight, t.name))
        return out


__all__ = ["TemplateBuilder", "Templates"]
