"""The catalog as columns, for the solver and for naming what exists: per label, its distinct values; per type,
the index of its value; the distinct sets of available offerings. Pure and solver-free (z3 stays in the solver);
built once per catalog, node OS and API version (v0.31's labels for a v1alpha5 Provisioner, v1.14.1's for a v1
NodePool: `catalog_keys`, the one list of them) and kept on the catalog (`Catalog.derived`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from karpenter_policy.api.constraintset import INSTANCE_TYPE_KEYS
from karpenter_policy.catalog.catalog import Catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, price_key
from karpenter_policy.model.requirements import Operator, Requirement

_MAX_CACHED_CLASSES = 4096
_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)

#: The instance-type labels the proofs read of a v1alpha5 Provisioner: Karpenter v0.31's (`api.constraintset`'s
#: `INSTANCE_TYPE_KEYS`, but the region, which Karpenter ignores when it schedules).
CATALOG_KEYS: frozenset[str] = INSTANCE_TYPE_KEYS - {wk.REGION}
#: The instance-type labels the proofs read of a v1 NodePool: v0.31's and `model.labels.V1_INSTANCE_LABELS`.
V1_CATALOG_KEYS: frozenset[str] = CATALOG_KEYS | wk.V1_INSTANCE_LABELS
_NO_LAUNCH_LABELS: Mapping[str, tuple[str, ...]] = MappingProxyType({})


def catalog_keys(v1: bool) -> frozenset[str]:
    """The instance-type labels of one API version (`v1`: a Karpenter v1 NodePool; else a v1alpha5 Provisioner):
    the one list the solver's projection (`CatalogTable`) and `diff`'s per-label comparison read. A label of the
    other version is a custom label there, as Karpenter v0.31 knows none of v1's."""
    return V1_CATALOG_KEYS if v1 else CATALOG_KEYS


def launch_labels(v1: bool) -> Mapping[str, tuple[str, ...]]:
    """The labels of one API version whose value a node takes from its launch rather than its instance type, each
    with the values every type offers (`model.labels.V1_LAUNCH_LABELS` for a v1 NodePool; none for v0.31)."""
    return wk.V1_LAUNCH_LABELS if v1 else _NO_LAUNCH_LABELS


#: Labels that come from the offering, not the type.
OFFERING_KEYS: frozenset[str] = frozenset({wk.ZONE, wk.CAPACITY_TYPE})


@dataclass(frozen=True, eq=False)
class CatalogTable:
    """The catalog as columns: for each label, its distinct values (`domains`) and, per type, the index of the
    type's value in them (`len(domain)`: the type does not have the label); the distinct sets of available
    offerings, as (zone index, capacity-type index) pairs, and which one each type has. Built for one API version
    (`v1`): its labels are `catalog_keys(v1)`, and its `launch_values` the labels a node takes from its launch
    (`launch_labels(v1)`: a v1 NodePool's tenancy), which are no column: every type offers each of their values."""

    region: str
    types: tuple[InstanceType, ...]
    catalog: Catalog = field(repr=False)  # what it was built from: its date, the types it knows but lacks
    zones: tuple[str, ...]
    capacity_types: tuple[str, ...]
    domains: Mapping[str, tuple[str, ...]]
    value_index: Mapping[str, tuple[int, ...]]
    offer_sets: tuple[frozenset[tuple[int, int]], ...]
    offer_set_of: tuple[int, ...]
    #: per type, its available offerings as (price_key(price), zone, capacity type), cheapest first
    offerings: tuple[tuple[tuple[float, int, int], ...], ...]
    _gather: Mapping[str, Callable[[Sequence[int]], tuple[int, ...]]] = field(repr=False)
    _gather_offer_sets: Callable[[Sequence[int]], tuple[int, ...]] = field(repr=False)
    _classes: dict[tuple[str, tuple[Requirement, ...]], KeyClasses] = field(default_factory=dict, repr=False)
    v1: bool = False
    launch_values: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NO_LAUNCH_LABELS)

    @classmethod
    def build(cls, catalog: Catalog, os: str = "linux", v1: bool = False) -> CatalogTable:
        types = catalog.instance_types
        labels = [{**it.labels(os), **it.v1_labels} if v1 else it.labels(os) for it in types]
        columns = catalog_keys(v1) - launch_labels(v1).keys()
        keys = sorted(columns | {k for lab in labels for k in lab if k not in OFFERING_KEYS})
        domains: dict[str, tuple[str, ...]] = {}
        value_index: dict[str, tuple[int, ...]] = {}
        for key in keys:
            domain = tuple(sorted({lab[key] for lab in labels if key in lab}))
            position = {v: i for i, v in enumerate(domain)}
            domains[key] = domain
            value_index[key] = tuple(position[lab[key]] if key in lab else len(domain) for lab in labels)
        zones = tuple(sorted({o.zone for it in types for o in it.offerings if o.available}))
        capacity_types = tuple(sorted({o.capacity_type for it in types for o in it.offerings if o.available}))
        zone_index = {z: i for i, z in enumerate(zones)}
        capacity_index = {c: i for i, c in enumerate(capacity_types)}
        set_index: dict[frozenset[tuple[int, int]], int] = {}
        offer_set_of = []
        offerings = []
        for it in types:
            available = tuple(
                sorted(
                    (price_key(o.price), zone_index[o.zone], capacity_index[o.capacity_type])
                    for o in it.offerings
                    if o.available
                )
            )
            offerings.append(available)
            offer_set_of.append(set_index.setdefault(frozenset((z, c) for _, z, c in available), len(set_index)))
        return cls(
            region=catalog.region,
            types=types,
            catalog=catalog,
            zones=zones,
            capacity_types=capacity_types,
            domains=domains,
            value_index=value_index,
            offer_sets=tuple(set_index),
            offer_set_of=tuple(offer_set_of),
            offerings=tuple(offerings),
            _gather={k: _gatherer(idx) for k, idx in value_index.items()},
            _gather_offer_sets=_gatherer(tuple(offer_set_of)),
            v1=v1,
            launch_values=launch_labels(v1),
        )

    def is_catalog_key(self, key: str) -> bool:
        """Whether `key` is a column: a label of this version's instance types (a launch label is not one)."""
        return key in self.domains

    def defines(self, key: str) -> bool:
        """Whether this version's catalog gives `key` its values (a column or a launch label); the other keys of a
        pool's requirements are its custom labels."""
        return key in self.domains or key in self.launch_values

    def key_classes(self, key: str, requirements: tuple[Requirement, ...]) -> KeyClasses:
        """The classes of `key`'s values (the catalog's values, then "absent") under `requirements` (cached:
        most provisioners share their defaults)."""
        cached = self._classes.get((key, requirements))
        if cached is None:
            if len(self._classes) >= _MAX_CACHED_CLASSES:  # a long-running process (the webhook) stays bounded
                self._classes.clear()
            cached = KeyClasses.of([*self.domains[key], None], requirements)
            self._classes[(key, requirements)] = cached
        return cached

    def class_column(self, key: str, classes: KeyClasses) -> tuple[int, ...]:
        """Each type's class of `key`."""
        return self._gather[key](classes.class_by_index)

    def offers_column(self, offers_of_set: Sequence[int]) -> tuple[int, ...]:
        """Each type's offering set, mapped through `offers_of_set`."""
        return self._gather_offer_sets(offers_of_set)

def _gatherer(indices: tuple[int, ...]) -> Callable[[Sequence[int]], tuple[int, ...]]:
    if not indices:
        return lambda _: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda values: (values[only],)
    getter = operator.itemgetter(*indices)
    return lambda values: getter(values)


def table_for(catalog: Catalog, os: str = "linux", v1: bool = False) -> CatalogTable:
    """The table of `catalog` for nodes running `os`, of one API version (`v1`: a Karpenter v1 NodePool's labels),
    built on first use and kept as long as the catalog lives."""
    key = ("catalog-table", os, "v1") if v1 else ("catalog-table", os)
    return catalog.derived(key, lambda: CatalogTable.build(catalog, os, v1))


def _intersect(sets: Iterable[frozenset[int]], everything: Iterable[int]) -> set[int]:
    result = set(everything)
    for s in sets:
        result &= s
    return result


def _accepts(requirement: Requirement, value: str | None) -> bool:
    if value is None:
        return requirement.operator() in _NEGATIVE
    return requirement.has(value)


@dataclass(frozen=True, slots=True)
class KeyClasses:
    """The values of one key grouped by signature (which of the key's terms accept them).

    `class_by_index[i]` = the class of the i-th value given; `allowed[j]` = the classes term j accepts;
    `representative[c]` = the first value of class c (None: the label is absent).
    """

    class_by_index: tuple[int, ...]
    allowed: tuple[frozenset[int], ...]
    representative: tuple[str | None, ...]

    @classmethod
    def of(cls, values: Iterable[str | None], requirements: Sequence[Requirement]) -> KeyClasses:
        by_signature: dict[tuple[bool, ...], int] = {}
        class_by_index: list[int] = []
        representative: list[str | None] = []
        for value in values:
            signature = tuple(_accepts(r, value) for r in requirements)
            index = by_signature.get(signature)
            if index is None:
                index = by_signature[signature] = len(representative)
                representative.append(value)
            class_by_index.append(index)
        allowed = tuple(
            frozenset(index for signature, index in by_signature.items() if signature[j])
            for j in range(len(requirements))
        )
        return cls(tuple(class_by_index), allowed, tuple(representative))

    def accepted_by_all(self) -> set[int]:
        return _intersect(self.allowed, range(len(self.representative)))


def custom_representatives(requirements: Iterable[Requirement]) -> list[str | None]:
    """Values of a custom label that cover every class its requirements can tell apart: each mentioned value,
    one integer per interval between the Gt/Lt bounds (not spelled like a mentioned value), one non-integer,
    and absence."""
    mentioned: set[str] = set()
    cuts = {0}
    for r in requirements:
        mentioned |= r.values
        if r.greater_than is not None:
            cuts.add(r.greater_than + 1)
        if r.less_than is not None:
            cuts.add(r.less_than)
    values: list[str | None] = [*sorted(mentioned)]
    ordered = sorted(cuts)
    for low, high in zip(ordered, [*ordered[1:], None], strict=True):
        number = low
        while str(number) in mentioned:
            number += 1
        if high is None or number < high:
            values.append(str(number))
    other = "other"
    while other in mentioned:
        other += "-"
    values.append(other)
    values.append(None)
    return values


# --- outcomes -----------------------------------------------------------------------------------------------


