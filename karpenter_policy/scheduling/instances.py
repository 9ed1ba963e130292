"""The instance types a scheduler may launch, as bit masks: which types a requirement accepts, which are offered in
a zone and capacity type, which have room for a request, which is the cheapest — each a few integer ANDs.

Type i of :class:`InstanceTable` is bit i of a Python integer. Masks of requirements (by label value), of
offerings (zone × capacity type) and of "allocatable at least x" (per resource, per node shape) are built once and
cached, so checking a pod against a node claim is a handful of big-integer operations however many types there
are. The index itself (every mask of labels and offerings, and each AWS node shape asked of it) depends only on the
types and the region: :meth:`InstanceTable.shared` builds it once per process for the same types (the same objects,
or equal ones: the types are frozen) and hands each caller its own table over it, whose lazily filled caches are
its own — only data never written after it was built is shared, so tables on different threads share nothing they
write. Node shapes (capacity and allocatable of every type under one kubelet configuration and AMI family) come
from `model.allocatable`; prices from the types' offerings (the live cloud's, or the catalog's). An offering without
a price (the catalog has no price data for its region) can be launched like any other and ranks after every priced
one, the smaller types (vCPU, then memory) first; its ChosenOffering has price None.
"""

from __future__ import annotations

import bisect
import copy
import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.catalog import Catalog
from karpenter_policy.catalog.table import catalog_keys
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType, known_price, price_key
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.scheduling.vectors import RESOURCES, Vector

#: Keys matched against offerings (per zone × capacity type) rather than a type's labels.
OFFERING_KEYS = (wk.ZONE, wk.CAPACITY_TYPE)
#: The label keys every type has a requirement on (a type without the label: DoesNotExist): a v1alpha5
#: Provisioner's (`catalog.table.catalog_keys`, the one list per API version). The OS and region are the same for
#: every type of a node claim template and are matched as such.
TYPE_KEYS: frozenset[str] = catalog_keys(v1=False) - {wk.OS}
#: The type labels of a v1 NodePool's types (Karpenter v1.14.1): v0.31's and `model.labels.V1_INSTANCE_LABELS`,
#: which a v1alpha5 Provisioner's types do not carry (v0.31 knew none of them). Every type offers both tenancies.
V1_TYPE_KEYS: frozenset[str] = catalog_keys(v1=True) - {wk.OS}
_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)
_CACHE_LIMIT = 65536
#: How many indexes :meth:`InstanceTable.shared` keeps (the most recently asked; ~2 MB each over the whole catalog).
SHARED_LIMIT = 4


def bits(indices: Iterable[int]) -> int:
    """The bit mask with the bits of `indices` set."""
    mask = 0
    for index in indices:
        mask |= 1 << index
    return mask


def indices(mask: int) -> list[int]:
    """The set bits of a mask, lowest first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


#: A node shape: capacity and allocatable of a type (one kubelet configuration, AMI family, root volume).
ShapeFunction = Callable[[InstanceType], tuple[Vector, Vector]]


class NodeShapes:
    """Capacity and allocatable of every type of a table under one configuration, and per resource the masks of
    "types with at least x" (what `fitting` ANDs together)."""

    def __init__(self, types: Sequence[InstanceType], shape: ShapeFunction) -> None:
        pairs = [shape(it) for it in types]
        self.capacity: list[Vector] = [c for c, _ in pairs]
        self.allocatable: list[Vector] = [a for _, a in pairs]
        self._at_least = [self._table([a[r] for a in self.allocatable]) for r in range(len(RESOURCES))]
        self._capacity_at_most = [self._table([c[r] for c in self.capacity]) for r in range(len(RESOURCES))]
        self._everything = (1 << len(types)) - 1
        self._fit_cache: dict[Vector, int] = {}

    def fresh(self) -> NodeShapes:
        """The same shapes with a cache of their own (the vectors and masks, never written, are shared)."""
        shapes = copy.copy(self)
        shapes._fit_cache = {}
        return shapes

    @staticmethod
    def _table(values: Sequence[int]) -> tuple[list[int], list[int]]:
        """Sorted distinct values, and for each the mask of the types with at least that value."""
        by_value: dict[int, int] = defaultdict(int)
        for i, value in enumerate(values):
            by_value[value] |= 1 << i
        ordered = sorted(by_value)
        masks = [0] * len(ordered)
        running = 0
        for j in range(len(ordered) - 1, -1, -1):
            running |= by_value[ordered[j]]
            masks[j] = running
        return ordered, masks

    def at_least(self, resource: int, amount: int) -> int:
        """The mask of the types with at least `amount` of the resource (index `resource`)."""
        values, masks = self._at_least[resource]
        j = bisect.bisect_left(values, amount)
        return masks[j] if j < len(values) else 0

    def most(self, resource: int, mask: int) -> int:
        """The largest allocatable amount of `resource` among the types of `mask` (-1 for an empty mask)."""
        values, masks = self._at_least[resource]
        if not mask or not values or not masks[0] & mask:
            return -1
        low, high = 0, len(values) - 1  # the last j whose "at least values[j]" mask meets `mask`
        while low < high:
            middle = (low + high + 1) // 2
            if masks[middle] & mask:
                low = middle
            else:
                high = middle - 1
        return values[low]

    def fitting(self, requests: Vector) -> int:
        """The types whose allocatable has room for `requests` on every resource."""
        cached = self._fit_cache.get(requests)
        if cached is None:
            cached = self._everything
            for r, amount in enumerate(requests):
                if amount > 0:
                    cached &= self.at_least(r, amount)
                    if not cached:
                        break
            if len(self._fit_cache) > _CACHE_LIMIT:
                self._fit_cache.clear()
            self._fit_cache[requests] = cached
        return cached

    def capacity_within(self, limits: Mapping[int, int]) -> int:
        """The types whose capacity is at most `limits[r]` on each limited resource r."""
        mask = self._everything
        for r, limit in limits.items():
            values, masks = self._capacity_at_most[r]
            j = bisect.bisect_right(values, limit)  # masks[j]: the types with more than the limit
            if j < len(values):
                mask &= ~masks[j]
        return mask


@dataclass(frozen=True, slots=True)
class _Ranked:
    """Each type's cheapest offering within some zones and capacity types, cheapest first, and prefix masks."""

    entries: list[tuple[float, int, int, int]]  # (price_key(price), type, zone, capacity type)
    prefixes: list[int]  # prefixes[j]: the types of entries[0..j]
    prices: dict[int, float]  # type → its cheapest allowed price (priced types only)
    first: dict[int, int] = field(default_factory=dict)  # mask → the first j whose prefix meets it (asked before)
    offers: list[ChosenOffering] = field(default_factory=list)  # entries[j] as a ChosenOffering (made when asked)
    rank_of: dict[int, int] = field(default_factory=dict)  # type → its j in entries (made when asked)


class InstanceTable:
    """A universe of instance types (sorted by name) as bit masks; see the module docstring."""

    def __init__(self, types: Iterable[InstanceType], region: str = "") -> None:
        self.types: tuple[InstanceType, ...] = tuple(sorted(types, key=lambda it: it.name))
        self.region = region
        self.names = tuple(it.name for it in self.types)
        self.position = {name: i for i, name in enumerate(self.names)}
        self.everything = (1 << len(self.types)) - 1
        labels = [it.labels() for it in self.types]
        #: per v0.31 type label, its values (`V1_TYPE_KEYS`' others are in `_v1_domains`)
        self.domains: dict[str, tuple[str, ...]] = {}
        self._value_masks: dict[str, list[int]] = {}
        self._index_values(TYPE_KEYS, labels, self.domains, self._value_masks)
        self._v1_domains: dict[str, tuple[str, ...]] = {}
        self._v1_value_masks: dict[str, list[int]] = {}
        self._index_values(V1_TYPE_KEYS - TYPE_KEYS - {wk.INSTANCE_TENANCY}, [it.v1_labels for it in self.types],
                           self._v1_domains, self._v1_value_masks)  # fmt: skip
        self._v1_domains[wk.INSTANCE_TENANCY] = wk.TENANCIES
        self._v1_value_masks[wk.INSTANCE_TENANCY] = [self.everything] * len(wk.TENANCIES) + [0]
        self.zones = tuple(sorted({o.zone for it in self.types for o in it.offerings if o.available}))
        self.capacity_types = tuple(sorted({o.capacity_type for it in self.types for o in it.offerings if o.available}))
        zone_at = {z: j for j, z in enumerate(self.zones)}
        capacity_at = {c: j for j, c in enumerate(self.capacity_types)}
        # per type: (price_key(price), zone, capacity), cheapest first
        self.offerings: list[tuple[tuple[float, int, int], ...]] = []
        pairs: dict[tuple[int, int], int] = defaultdict(int)
        for i, it in enumerate(self.types):
            available = tuple(
                sorted(
                    (price_key(o.price), zone_at[o.zone], capacity_at[o.capacity_type])
                    for o in it.offerings
                    if o.available
                )
            )
            self.offerings.append(available)
            for _, z, c in available:
                pairs[(z, c)] |= 1 << i
        self._pair_masks = dict(pairs)
        by_size = sorted(range(len(self.types)), key=lambda i: (self.types[i].vcpu, self.types[i].memory_mib, i))
        self._size_rank = {i: rank for rank, i in enumerate(by_size)}  # orders the unpriced: smaller first
        self.offered = 0
        for mask in self._pair_masks.values():
            self.offered |= mask
        #: node shapes by a key that names their configuration wholly (`shapes(..., shareable=True)`): built once
        #: for every table over this index, each table taking its own copy
        self._shareable_shapes: dict[object, NodeShapes] = {}
        self._fresh_caches()

    def _fresh_caches(self) -> None:
        """Empty the caches a table fills as it is asked (its own, never shared)."""
        self._requirement_masks: dict[Requirement, int] = {}
        self._offering_masks: dict[tuple[Requirement, Requirement], int] = {}
        self._ranked: dict[tuple[frozenset[int], frozenset[int]], _Ranked] = {}
        self._ranked_by_requirement: dict[tuple[Requirement, Requirement], _Ranked] = {}
        self._ranked_by_identity: dict[tuple[int, int], tuple[Requirement, Requirement, _Ranked]] = {}
        self._shapes: dict[object, NodeShapes] = {}
        self._names: dict[int, tuple[str, ...]] = {}
        self._by_value: dict[str, tuple[tuple[str, int], ...]] = {}

    @classmethod
    def shared(cls, types: Iterable[InstanceType], region: str = "") -> InstanceTable:
        """A table over `types` whose index is built once per process for equal types and region (the last
        :data:`SHARED_LIMIT` asked are kept): what every controller, its disruption decisions and a scene's builders
        ask again and again for the cloud's same answer. The table is the caller's own (see the module docstring)."""
        listed = tuple(types)
        key = (region, tuple(map(id, listed)))  # the same objects: no hashing of 1,392 dataclasses (2.6 ms)
        with _SHARED_LOCK:
            found = _SHARED.get(key)  # (an entry holds its types: their ids are not reused while it is kept)
            if found is None:
                index = next((i for (r, _), (kept, i) in _SHARED.items() if r == region and kept == listed), None)
                found = _SHARED[key] = (listed, index if index is not None else cls(listed, region))
                while len(_SHARED) > SHARED_LIMIT:
                    _SHARED.popitem(last=False)
            else:
                _SHARED.move_to_end(key)
        table = copy.copy(found[1])
        table._fresh_caches()
        return table

    @staticmethod
    def _index_values(
        keys: Iterable[str],
        labels: Sequence[Mapping[str, str]],
        domains: dict[str, tuple[str, ...]],
        value_masks: dict[str, list[int]],
    ) -> None:
        """Per key, the values the types' `labels` carry (sorted) and the mask of each, the last mask the types
        without the label."""
        for key in sorted(keys):
            domain = tuple(sorted({lab[key] for lab in labels if key in lab}))
            where = {v: j for j, v in enumerate(domain)}
            masks = [0] * (len(domain) + 1)
            for i, lab in enumerate(labels):
                masks[where[lab[key]] if key in lab else len(domain)] |= 1 << i
            domains[key] = domain
            value_masks[key] = masks

    @classmethod
    def of_catalog(cls, catalog: Catalog) -> InstanceTable:
        """The table of a catalog, built once and kept on it."""
        return catalog.derived("scheduling-instance-table", lambda: cls(catalog.instance_types, catalog.region))

    def __len__(self) -> int:
        return len(self.types)

    # --- masks -------------------------------------------------------------------------------------------------

    def mask_of_names(self, names: Iterable[str]) -> int:
        """The mask of the named types (names the table does not hold are left out)."""
        return bits(self.position[n] for n in names if n in self.position)

    def names_of(self, mask: int) -> tuple[str, ...]:
        """The names of the types of a mask, sorted (cached: many pods fit the same types)."""
        cached = self._names.get(mask)
        if cached is None:
            if len(self._names) > 4096:
                self._names.clear()
            cached = self._names[mask] = tuple(self.names[i] for i in indices(mask))
        return cached

    def label_values(self, mask: int, keys: frozenset[str] = TYPE_KEYS) -> dict[str, set[str]]:
        """Per instance-type label key (of `keys`: `V1_TYPE_KEYS` for a v1 NodePool), the values the types of
        `mask` carry."""
        found = {
            key: {value for value, types in zip(values, self._value_masks[key], strict=False) if types & mask}
            for key, values in self.domains.items()
        }
        for key in keys:
            if key in self._v1_domains:
                values = zip(self._v1_domains[key], self._v1_value_masks[key], strict=False)
                found[key] = {value for value, types in values if types & mask}
        return found

    def offered_pairs(self, mask: int) -> Iterator[tuple[str, str]]:
        """The (zone, capacity type) pairs in which some type of `mask` has an available offering."""
        for (z, c), types in self._pair_masks.items():
            if types & mask:
                yield self.zones[z], self.capacity_types[c]

    def value_masks(self, key: str) -> tuple[tuple[str, int], ...]:
        """Each value of `key` the table's types carry, with the mask of the types that carry it, as Karpenter
        reads an instance type's requirements: its name (`node.kubernetes.io/instance-type`), the zones and
        capacity types of its available offerings, its labels; none for a key no type has (a custom label).
        Cached per key."""
        cached = self._by_value.get(key)
        if cached is None:
            if key == wk.INSTANCE_TYPE:
                cached = tuple((name, 1 << i) for i, name in enumerate(self.names))
            elif key in OFFERING_KEYS:
                at = 0 if key == wk.ZONE else 1
                values = self.zones if key == wk.ZONE else self.capacity_types
                masks = [0] * len(values)
                for pair, types in self._pair_masks.items():
                    masks[pair[at]] |= types
                cached = tuple(zip(values, masks, strict=True))
            elif key in self._value_masks:
                cached = tuple(zip(self.domains[key], self._value_masks[key], strict=False))
            elif key in self._v1_value_masks:
                cached = tuple(zip(self._v1_domains[key], self._v1_value_masks[key], strict=False))
            else:
                cached = ()
            self._by_value[key] = cached
        return cached

    def values_carried(self, key: str, mask: int) -> set[str]:
        """The distinct values of `key` the types of `mask` carry (`value_masks`)."""
        return {value for value, types in self.value_masks(key) if types & mask}

    def unmet_min_values(self, min_values: Mapping[str, int], mask: int) -> dict[str, int]:
        """The keys of `min_values` whose count the types of `mask` do not meet, each with the distinct values they
        do carry (empty: every minValues met) — Karpenter's `InstanceTypes.SatisfiesMinValues` over the instance
        types a claim keeps (core v1.14.1 pkg/cloudprovider/types.go)."""
        unmet: dict[str, int] = {}
        for key, wanted in min_values.items():
            if key == wk.INSTANCE_TYPE:
                count = mask.bit_count()
            else:
                count = 0
                for _, types in self.value_masks(key):
                    if types & mask:
                        count += 1
                        if count >= wanted:
                            break
            if count < wanted:
                unmet[key] = count
        return unmet

    @staticmethod
    def is_type_key(key: str, keys: frozenset[str] = TYPE_KEYS) -> bool:
        """Whether `key` is a label the instance table decides (an instance-type label of `keys`, the OS and region
        aside)."""
        return key in keys

    def requirement_mask(self, requirement: Requirement) -> int:
        """The types whose label value the requirement accepts (an absent label: only NotIn / DoesNotExist); every
        type for a key that is not a type label (a custom label: the node claim template decides it)."""
        cached = self._requirement_masks.get(requirement)
        if cached is None:
            masks = self._value_masks.get(requirement.key)
            domain = self.domains.get(requirement.key)
            if masks is None:
                masks = self._v1_value_masks.get(requirement.key)
                domain = self._v1_domains.get(requirement.key)
            if masks is None or domain is None:
                cached = self.everything
            else:
                cached = 0
                for j, value in enumerate(domain):
                    if requirement.has(value):
                        cached |= masks[j]
                if requirement.operator() in _NEGATIVE:
                    cached |= masks[-1]
            if len(self._requirement_masks) > _CACHE_LIMIT:
                self._requirement_masks.clear()
            self._requirement_masks[requirement] = cached
        return cached

    def offering_mask(self, zone: Requirement, capacity_type: Requirement) -> int:
        """The types with an available offering in a zone and capacity type both requirements accept."""
        key = (zone, capacity_type)
        cached = self._offering_masks.get(key)
        if cached is None:
            cached = 0
            for (z, c), mask in self._pair_masks.items():
                if zone.has(self.zones[z]) and capacity_type.has(self.capacity_types[c]):
                    cached |= mask
            if len(self._offering_masks) > _CACHE_LIMIT:
                self._offering_masks.clear()
            self._offering_masks[key] = cached
        return cached

    def type_mask(
        self,
        requirements: Requirements,
        keys: Iterable[str] | None = None,
        os: str = "linux",
        type_keys: frozenset[str] = TYPE_KEYS,
    ) -> int:
        """The types whose labels satisfy `requirements` (only `keys` of them when given), for nodes running `os`
        in the table's region; offerings aside. `type_keys`: the labels the types carry (`V1_TYPE_KEYS` for a
        v1 NodePool)."""
        mask = self.everything
        for key in requirements if keys is None else keys:
            if key in type_keys:
                mask &= self.requirement_mask(requirements[key])
            elif key == wk.OS:
                mask &= self.everything if requirements[key].has(os) else 0
            elif key == wk.REGION and self.region:
                mask &= self.everything if requirements[key].has(self.region) else 0
            if not mask:
                return 0
        return mask

    def mask_of(
        self,
        requirements: Requirements,
        keys: Iterable[str] | None = None,
        os: str = "linux",
        type_keys: frozenset[str] = TYPE_KEYS,
    ) -> int:
        """The offered types that satisfy `requirements` (only `keys` of them when given), offerings included."""
        wanted = list(requirements) if keys is None else list(keys)
        mask = self.offered & self.type_mask(requirements, wanted, os, type_keys)
        if mask and any(k in OFFERING_KEYS for k in wanted):
            zone = (
                requirements[wk.ZONE] if wk.ZONE in wanted and wk.ZONE in requirements else Requirement.exists(wk.ZONE)
            )
            capacity = (
                requirements[wk.CAPACITY_TYPE]
                if wk.CAPACITY_TYPE in wanted and wk.CAPACITY_TYPE in requirements
                else Requirement.exists(wk.CAPACITY_TYPE)
            )
            mask &= self.offering_mask(zone, capacity)
        return mask

    # --- shapes and prices --------------------------------------------------------------------------------------

    def shapes(self, key: object, shape: ShapeFunction, *, shareable: bool = False) -> NodeShapes:
        """The node shapes under one configuration (`key` identifies it; built once). `shareable`: `key` names the
        configuration wholly, whoever asks (`scheduling.shapes`' AWS arithmetic), so the shapes are built once for
        every table of the same :meth:`shared` index."""
        found = self._shapes.get(key)
        if found is None:
            if shareable:
                built = self._shareable_shapes.get(key)
                if built is None:
                    built = self._shareable_shapes.setdefault(key, NodeShapes(self.types, shape))
                found = built.fresh()
            else:
                found = NodeShapes(self.types, shape)
            self._shapes[key] = found
        return found

    def _rank(self, zone: Requirement, capacity_type: Requirement) -> _Ranked:
        # First by identity (a claim asks with the same two objects for every pod it is offered; hashing them is a
        # Python call each), the objects kept alongside so that an id is never reused while cached.
        key = (id(zone), id(capacity_type))
        hit = self._ranked_by_identity.get(key)
        if hit is not None and hit[0] is zone and hit[1] is capacity_type:
            return hit[2]
        cached = self._ranked_by_requirement.get((zone, capacity_type))
        if cached is None:
            cached = self._ranked_by_requirement[(zone, capacity_type)] = self._rank_sets(zone, capacity_type)
        if len(self._ranked_by_identity) > _CACHE_LIMIT:
            self._ranked_by_identity.clear()
        self._ranked_by_identity[key] = (zone, capacity_type, cached)
        return cached

    def _rank_sets(self, zone: Requirement, capacity_type: Requirement) -> _Ranked:
        zones = frozenset(j for j, name in enumerate(self.zones) if zone.has(name))
        capacities = frozenset(j for j, name in enumerate(self.capacity_types) if capacity_type.has(name))
        found = self._ranked.get((zones, capacities))
        if found is None:
            best: list[tuple[float, int, int, int]] = []
            for i, offers in enumerate(self.offerings):
                for price, z, c in offers:  # sorted by price: the first allowed one is the cheapest
                    if z in zones and c in capacities:
                        best.append((price, i, z, c))
                        break
            # Cheapest first; without a price (inf), smaller types first: a node no larger than needed.
            best.sort(key=lambda e: (e[0], self._size_rank[e[1]] if math.isinf(e[0]) else e[1], e[2], e[3]))
            prefixes = []
            running = 0
            for entry in best:
                running |= 1 << entry[1]
                prefixes.append(running)
            prices = {i: p for p, i, _, _ in best if known_price(p) is not None}
            found = self._ranked[(zones, capacities)] = _Ranked(best, prefixes, prices)
        return found

    def cheapest(self, mask: int, zone: Requirement, capacity_type: Requirement) -> ChosenOffering | None:
        """The cheapest available offering of a type of `mask` in an allowed zone and capacity type (ties: by
        type name, then zone and capacity type)."""
        entry = self._cheapest_entry(mask, zone, capacity_type)
        if entry is None:
            return None
        price, i, z, c = entry
        return ChosenOffering(self.names[i], self.zones[z], self.capacity_types[c], known_price(price))

    def cheapest_type(self, mask: int, zone: Requirement, capacity_type: Requirement) -> int:
        """The position of the type :meth:`cheapest` would choose; -1 for none."""
        entry = self._cheapest_entry(mask, zone, capacity_type)
        return -1 if entry is None else entry[1]

    def _cheapest_entry(
        self, mask: int, zone: Requirement, capacity_type: Requirement
    ) -> tuple[float, int, int, int] | None:
        ranked = self._rank(zone, capacity_type)
        first = ranked.first
        j = first.get(mask)
        if j is None:  # (the same masks come back: a claim's types, narrowed by the room each pod size leaves)
            prefixes = ranked.prefixes
            j = _first_meeting(prefixes, mask) if prefixes and mask & prefixes[-1] else -1
            if len(first) > _CACHE_LIMIT:
                first.clear()
            first[mask] = j
        return None if j < 0 else ranked.entries[j]

    def ranked(self, mask: int, zone: Requirement, capacity_type: Requirement) -> list[ChosenOffering]:
        """Every type of `mask` with its cheapest allowed offering, cheapest first."""
        ranked = self._rank(zone, capacity_type)
        offers = ranked.offers
        if not offers:  # (immutable: one object per entry, shared by every claim of these zones and capacity types)
            offers += [
                ChosenOffering(self.names[i], self.zones[z], self.capacity_types[c], known_price(price))
                for price, i, z, c in ranked.entries
            ]
        entries = ranked.entries
        if mask.bit_count() * 8 >= len(entries):  # most of the types: one pass over the ranking
            return [offers[j] for j, (_, i, _, _) in enumerate(entries) if (mask >> i) & 1]
        rank_of = ranked.rank_of  # a few (a claim's types): their ranks, sorted
        if not rank_of:
            rank_of.update((i, j) for j, (_, i, _, _) in enumerate(entries))
        ranks = sorted(rank for i in indices(mask) if (rank := rank_of.get(i, -1)) >= 0)
        return [offers[j] for j in ranks]

    def prices(self, zone: Requirement, capacity_type: Requirement) -> Mapping[int, float]:
        """Type → its cheapest price within the zones and capacity types (offered types with a price only)."""
        return self._rank(zone, capacity_type).prices

    def at_most(self, price: float, zone: Requirement, capacity_type: Requirement) -> int:
        """The types whose cheapest allowed offering costs at most `price` (never the unpriced ones)."""
        ranked = self._rank(zone, capacity_type)
        j = bisect.bisect_right(ranked.entries, (price, len(self.types), 0, 0))
        return ranked.prefixes[j - 1] if j > 0 else 0


#: (region, the types' ids) → (the types, the index over them)
_SHARED: OrderedDict[tuple[str, tuple[int, ...]], tuple[tuple[InstanceType, ...], InstanceTable]] = OrderedDict()
_SHARED_LOCK = threading.Lock()


def _first_meeting(prefixes: Sequence[int], mask: int) -> int:
    """The first j with prefixes[j] & mask (prefixes grow; the last one meets the mask)."""
    low, high = 0, len(prefixes) - 1
    while low < high:
        middle = (low + high) // 2
        if mask & prefixes[middle]:
            high = middle
        else:
            low = middle + 1
    return low
