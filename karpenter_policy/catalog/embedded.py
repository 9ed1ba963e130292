"""The embedded catalog (package data, format 2): one file of instance-type facts shared by every region, one file
of zone offerings per region, and the on-demand price tables shipped (us-east-1's). A region's catalog is built on
first use from the shared facts, that region's offerings and its prices, so loading one region reads ~0.1 MB.

``karpenter-policy catalog build`` writes these files (:mod:`karpenter_policy.catalog.build`); this module only
reads them. Layout of ``karpenter_policy/catalog/data/``::

    types.json                         the facts of every type the sources know (one row per line)
    offerings-<region>.json            where each type is offered in <region>: observed or inferred zones
    ec2-on-demand-prices-<region>.json on-demand USD/hour (the `catalog refresh --prices` format)

``types.json``: ``{"columns": [...], "date": "2026-07", "dates": {id: date}, "format": 2, "names_only": {name:
region mask}, "regions": [...], "sources": {id: description}, "types": [[...], ...]}`` — each row lists the ``columns``
(booleans as 0/1, architectures and the interfaces of each network card comma-separated, ``regions`` a bit mask
over ``regions``: where the type is offered, observed or inferred). ``names_only`` are types a price table names
but no source describes.

``offerings-<region>.json``: ``{"format": 2, "inferred": {name: [zone mask, why]}, "offered": {family: {zone
mask: "size size ..."}}, "region": ..., "zones": [...]}`` — zone masks are bit masks over ``zones``; ``offered``
is what DescribeInstanceTypeOfferings returned, ``inferred`` the zones given to a type sold in the region (it has
a price there) that the offerings lack, with the rule that chose them.

A type without a price in the region gets offerings priced None ("no price data"): available, cost unknown.
Spot offerings are priced at the on-demand price (an estimate; `check --spot-prices` gives real ones).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.catalog.catalog import (
    DATA_DIR,
    DATA_PACKAGE,
    OFFERINGS_SOURCE,
    Catalog,
    CatalogError,
    KnownType,
    Provenance,
    embedded_data_file,
    on_demand_prices_file_name,
)
from karpenter_policy.catalog.prices import load_on_demand_prices
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering

FORMAT = 2
TYPES_FILE = "types.json"
#: The columns of a row of types.json, in order.
COLUMNS: tuple[str, ...] = (
    "name",
    "vcpu",
    "memory_mib",
    "architectures",
    "gpu_count",
    "gpu_name",
    "gpu_manufacturer",
    "gpu_memory_mib",
    "accelerator_count",
    "accelerator_name",
    "accelerator_manufacturer",
    "local_nvme_gib",
    "bare_metal",
    "hypervisor",
    "network_bandwidth_mbps",
    "max_enis",
    "ipv4_per_eni",
    "branch_enis",
    "encryption_in_transit",
    "cpu_manufacturer",
    "cpu_sustained_clock_mhz",
    "ebs_bandwidth_mbps",
    "network_cards",
    "efa_interfaces",
    "ena_unsupported",
    "nested_virtualization",
    "previous_generation",
    "spot",
    "facts",
    "network",
    "regions",
)
_FLAGS = ("bare_metal", "encryption_in_transit", "ena_unsupported", "nested_virtualization", "previous_generation")
_BOOLEANS = frozenset({*_FLAGS, "spot"})
_STRINGS = frozenset(
    {"name", "architectures", "gpu_name", "gpu_manufacturer", "accelerator_name", "accelerator_manufacturer",
     "hypervisor", "facts", "network", "cpu_manufacturer", "network_cards"}
)  # fmt: skip


def offerings_file_name(region: str) -> str:
    return f"offerings-{region}.json"


def data_label(name: str) -> str:
    """How messages name a packaged data file."""
    return f"{DATA_PACKAGE.replace('.', '/')}/{DATA_DIR}/{name}"


@dataclass(frozen=True, slots=True)
class EmbeddedType:
    """One row of types.json: the type's facts (InstanceType's arguments but offerings and price), whether it sells
    as spot, its provenance."""

    facts: Mapping[str, Any]
    spot: bool
    facts_source: str
    network_source: str


@dataclass(frozen=True, slots=True)
class EmbeddedTypes:
    """types.json, parsed."""

    date: str
    dates: Mapping[str, str]
    regions: tuple[str, ...]
    sources: Mapping[str, str]
    types: Mapping[str, EmbeddedType]
    known: Mapping[str, KnownType]


def encode_row(row: Mapping[str, Any]) -> list[Any]:
    """A type's values (by column) as a types.json row."""
    return [
        int(row[c]) if c in _BOOLEANS else ",".join(map(str, row[c])) if c == "network_cards" else row[c]
        for c in COLUMNS
    ]


_INT_AT = tuple(i for i, column in enumerate(COLUMNS) if column not in _STRINGS)
_STR_AT = tuple(i for i, column in enumerate(COLUMNS) if column in _STRINGS)
_BOOL_AT = tuple(i for i, column in enumerate(COLUMNS) if column in _BOOLEANS)
#: The columns that are InstanceType arguments, and where they are in a row.
_FACTS_AT = tuple(
    (column, i) for i, column in enumerate(COLUMNS) if column not in ("spot", "facts", "network", "regions")
)
_SPOT, _FACTS, _NETWORK, _REGIONS = (COLUMNS.index(c) for c in ("spot", "facts", "network", "regions"))


def _decode_row(raw: Any, regions: tuple[str, ...]) -> tuple[EmbeddedType, KnownType]:
    # Loaded on every run: checks by type identity (bool is not int here), no per-cell function calls.
    if type(raw) is not list or len(raw) != len(COLUMNS):
        raise ValueError(f"a row must be a list of {len(COLUMNS)} values: {raw!r:.60}")
    if not all(type(raw[i]) is int and raw[i] >= 0 for i in _INT_AT) or not all(type(raw[i]) is str for i in _STR_AT):
        raise ValueError(f"{raw[0]!r}: a value of the wrong kind in {raw!r}")
    if any(raw[i] > 1 for i in _BOOL_AT) or raw[1] == 0 or raw[2] == 0:
        raise ValueError(f"{raw[0]!r}: a flag not 0 or 1, or no vcpu or memory, in {raw!r}")
    facts = {column: raw[i] for column, i in _FACTS_AT}
    for column in _FLAGS:
        facts[column] = bool(facts[column])
    facts["architectures"] = tuple(facts["architectures"].split(","))
    cards = facts["network_cards"]
    if cards and not all(card.isdecimal() and card.isascii() for card in cards.split(",")):
        raise ValueError(f"{raw[0]!r}: network_cards {cards!r} is not counts separated by commas")
    facts["network_cards"] = tuple(int(card) for card in cards.split(",")) if cards else ()
    embedded = EmbeddedType(facts, bool(raw[_SPOT]), raw[_FACTS], raw[_NETWORK])
    return embedded, KnownType(raw[0], facts["previous_generation"], masked(regions, raw[_REGIONS]))


@functools.lru_cache(maxsize=4096)
def masked(items: tuple[str, ...], mask: int) -> tuple[str, ...]:
    """The items whose bit is set in `mask` (cached: types share few masks)."""
    return tuple(item for i, item in enumerate(items) if mask >> i & 1)


def mask_of(items: Sequence[str], chosen: Sequence[str] | frozenset[str] | set[str]) -> int:
    """The bit mask of `chosen` among `items`."""
    return sum(1 << i for i, item in enumerate(items) if item in chosen)


def _read_json(name: str) -> Any:
    resource = embedded_data_file(name)
    label = data_label(name)
    try:
        return json.loads(resource.read_bytes())
    except FileNotFoundError:
        raise CatalogError(label, "no such file (the package data is incomplete: reinstall)") from None
    except OSError as exc:
        raise CatalogError(label, exc.strerror or str(exc)) from None
    except ValueError as exc:
        raise CatalogError(label, f"not valid JSON: {exc}") from None


@functools.lru_cache(maxsize=1)
def embedded_types() -> EmbeddedTypes:
    """types.json, parsed once per process. Raises :class:`CatalogError`."""
    document = _read_json(TYPES_FILE)
    try:
        if document.get("format") != FORMAT or tuple(document["columns"]) != COLUMNS:
            raise ValueError(f"not format {FORMAT} with the expected columns")
        regions = tuple(str(r) for r in document["regions"])
        types: dict[str, EmbeddedType] = {}
        known: dict[str, KnownType] = {}
        for raw in document["types"]:
            embedded, known_type = _decode_row(raw, regions)
            types[known_type.name] = embedded
            known[known_type.name] = known_type
        for name, region_mask in dict(document["names_only"]).items():
            known[str(name)] = KnownType(str(name), True, masked(regions, int(region_mask)), described=False)
        return EmbeddedTypes(
            date=str(document["date"]),
            dates={str(k): str(v) for k, v in dict(document.get("dates") or {}).items()},
            regions=regions,
            sources={str(k): str(v) for k, v in dict(document["sources"]).items()},
            types=types,
            known=known,
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise CatalogError(data_label(TYPES_FILE), f"corrupt embedded catalog: {exc}") from None


def embedded_regions() -> tuple[str, ...]:
    """The regions the embedded catalog covers, sorted."""
    return embedded_types().regions


@functools.lru_cache(maxsize=64)
def _region_zones(region: str) -> tuple[str, ...]:
    """The zones of an embedded region (its offerings file's `zones`), () when it has none or cannot be read."""
    try:
        zones = _read_json(offerings_file_name(region)).get("zones")
    except (CatalogError, AttributeError):
        return ()
    return tuple(str(z) for z in zones) if isinstance(zones, list) else ()


def region_of_zone(zone: str) -> str | None:
    """The embedded region a zone belongs to (`us-west-2` for `us-west-2a`), None when it is the zone of none."""
    for region in embedded_regions():
        if zone.startswith(region) and zone in _region_zones(region):
            return region
    return None


def _zones_by_type(document: Any, region: str) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """type -> its zones, and type -> why for the inferred ones."""
    if document.get("format") != FORMAT or document.get("region") != region:
        raise ValueError(f"not the format {FORMAT} offerings of {region}")
    zone_names = tuple(str(z) for z in document["zones"])
    zones: dict[str, tuple[str, ...]] = {}
    for family, by_mask in dict(document["offered"]).items():
        for mask, sizes in dict(by_mask).items():
            for size in str(sizes).split():
                zones[f"{family}.{size}"] = masked(zone_names, int(mask))
    why: dict[str, str] = {}
    for name, (mask, reason) in dict(document["inferred"]).items():
        zones[str(name)] = masked(zone_names, int(mask))
        why[str(name)] = f"inferred: {reason}"
    return zones, why


def load_region(region: str) -> Catalog:
    """The embedded catalog of `region`, previous-generation types included (see `Catalog.without_previous_
    generation`). Raises :class:`CatalogError` for a region the catalog does not cover."""
    shared = embedded_types()
    if region not in shared.regions:
        raise CatalogError(
            data_label(offerings_file_name(region)),
            f"no embedded catalog for region {region!r} (embedded: {', '.join(shared.regions)}); "
            "run `catalog refresh` and pass --catalog",
        )
    name = offerings_file_name(region)
    document = _read_json(name)
    try:
        zones, inferred = _zones_by_type(document, region)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise CatalogError(data_label(name), f"corrupt embedded catalog: {exc}") from None
    prices, price_source = _prices(region)
    offerings_cache: dict[tuple[tuple[str, ...], bool, float | None], tuple[Offering, ...]] = {}
    types: list[InstanceType] = []
    provenance: dict[str, Provenance] = {}
    for type_name, type_zones in zones.items():
        embedded = shared.types.get(type_name)
        if embedded is None:
            raise CatalogError(data_label(name), f"corrupt embedded catalog: {type_name} is not in {TYPES_FILE}")
        price = prices.get(type_name)
        key = (type_zones, embedded.spot, price)
        offerings = offerings_cache.get(key)
        if offerings is None:  # many types share zones and price: share the (immutable) offerings too
            capacities = (wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT) if embedded.spot else (wk.CAPACITY_ON_DEMAND,)
            offerings = offerings_cache[key] = tuple(Offering(z, c, price) for z in type_zones for c in capacities)
        types.append(InstanceType(**embedded.facts, offerings=offerings, price_on_demand=price))
        provenance[type_name] = Provenance(
            facts=embedded.facts_source,
            network=embedded.network_source,
            zones=inferred.get(type_name, OFFERINGS_SOURCE),
            price=price_source if price is not None else "",
        )
    return Catalog(
        region=region,
        instance_types=tuple(types),
        date=shared.date,
        dates=shared.dates,
        known=shared.known,
        provenance=provenance,
        sources=shared.sources,
    )


def _prices(region: str) -> tuple[dict[str, float], str]:
    """The shipped on-demand prices of `region` ({} when none is shipped) and the source id to record."""
    if not embedded_data_file(on_demand_prices_file_name(region)).is_file():
        return {}, ""
    return load_on_demand_prices(None, region), f"prices-{region}"


__all__ = [
    "COLUMNS",
    "FORMAT",
    "OFFERINGS_SOURCE",
    "TYPES_FILE",
    "EmbeddedType",
    "EmbeddedTypes",
    "embedded_regions",
    "embedded_types",
    "encode_row",
    "load_region",
    "mask_of",
    "masked",
    "offerings_file_name",
    "region_of_zone",
]
