"""`karpenter-policy catalog build`: the embedded catalog, joined from its sources (read at build time only).

Sources, each fact taken from the most authoritative one that has it (the id in brackets is what the catalog
records per type and fact, see `Catalog.provenance`):

* [karpenter] Karpenter's published instance-type table (``karpenter-instance-types-YYYY-MM.json``, generated from
  the EC2 API): the label values of every current type — vCPU, memory, architecture, GPUs and accelerators with
  their names and manufacturers, local NVMe, hypervisor, network bandwidth, encryption in transit, and (labels of
  Karpenter v1 only) the CPU manufacturer, sustained clock speed and EBS bandwidth, and from its resources the
  EFA interfaces (`vpc.amazonaws.com/efa`, EC2's `MaximumEfaInterfaces`). Its month is
  the catalog's date. Karpenter v0.31's one hard-coded rule (trn1 as accelerator "inferentia") is kept, as
  `catalog refresh` keeps it.
* [karpenter-v0.31] Karpenter v0.31's table (``karpenter-v0.31-instance-types.json``): the same facts of the types
  Karpenter no longer lists (p2, p3, g3, f1, dl1, u-*tb1 ...) — they are marked previous-generation; their CPU
  and EBS facts, which that table predates, are EC2's where it describes them.
* [ec2] DescribeInstanceTypes as AWS returned it (moto's ``instance_types.json.gz``): the facts of types neither
  table has (newer than the table), the network limits the VPC table lacks, which types sell as spot, and two facts
  no table has: ENA unsupported (`EnaSupport`) and `nested-virtualization` among the processor's features.
* [vpc-limits] Karpenter's VPC limits (``karpenter-vpc-limits-YYYY-MM.json``): ENIs of the default network card
  (what max pods counts, as Karpenter's ENILimitedPods; a type with several cards has more in all), IPv4
  addresses per ENI, branch ENIs for pod-eni (trunking types), bare metal, the interfaces of each network card.
* [offerings] DescribeInstanceTypeOfferings by availability zone as AWS returned it, per region (moto's
  ``instance_type_offerings/availability-zone/<region>.json.gz``): where each type is offered.
* [prices-<region>] The on-demand price tables (``ec2-on-demand-prices-<region>.json``; us-east-1 only): prices,
  and evidence that a type sells in the region. A priced type the offerings lack gets inferred zones there, and so
  does, in every region, a type the offerings lack in *every* region (g4ad, the previous-generation types: a hole
  in the source, not a type sold nowhere): the zones of its family in the region, else of its category and
  generation (g4ad: g4dn's, p3: p3dn's), else of its category, else every zone — recorded as inferred, with the
  rule. A priced name no source describes (cr1.8xlarge) is known by name only.

Each source's date is recorded (``dates``: the month of a table, the day of a price table, the month of moto's
copy from ``moto.json`` in the sources directory), so that findings name the date of the source they rest on.

Types without a Kubernetes architecture (Mac) are left out. The output is deterministic: the same sources give
byte-identical files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from karpenter_policy.catalog.catalog import OFFERINGS_SOURCE, CatalogError, on_demand_prices_file_name
from karpenter_policy.catalog.embedded import (
    COLUMNS,
    FORMAT,
    TYPES_FILE,
    encode_row,
    mask_of,
    offerings_file_name,
)
from karpenter_policy.catalog.prices import load_on_demand_prices
from karpenter_policy.catalog.refresh import instance_type_from_ec2, trn1_accelerator
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import (
    InstanceType,
    instance_category,
    instance_family,
    instance_generation,
    instance_size,
)

KARPENTER = "karpenter"
KARPENTER_V031 = "karpenter-v0.31"
EC2 = "ec2"
VPC_LIMITS = "vpc-limits"
OFFERINGS = OFFERINGS_SOURCE

_CURRENT_TABLE = re.compile(r"^karpenter-instance-types-(\d{4}-\d{2})\.json$")
_V031_TABLE = "karpenter-v0.31-instance-types.json"
_VPC_LIMITS = re.compile(r"^karpenter-vpc-limits-\d{4}-\d{2}\.json$")
_PRICES = re.compile(r"^ec2-on-demand-prices-([a-z0-9-]+)\.json$")
_OFFERINGS_DIR = Path("instance_type_offerings") / "availability-zone"
_DESCRIBED = "instance_types.json.gz"
_MOTO_MANIFEST = "moto.json"
_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}(?:-\d{2})?)(?!\d)")


# --- reading the sources ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sources:
    """What the build reads, loaded and checked for shape."""

    date: str
    descriptions: dict[str, str]  # source id -> what it is
    dates: dict[str, str]  # source id -> when it was taken ("2026-07", "2026-07-20"; absent: unknown)
    current: dict[str, dict[str, str]]  # Karpenter's table: type -> labels
    previous: dict[str, dict[str, str]]  # v0.31's table: type -> labels
    vpc_limits: dict[str, dict[str, Any]]
    described: dict[str, dict[str, Any]]  # DescribeInstanceTypes entries by type
    offerings: dict[str, dict[str, set[str]]]  # region -> type -> zones
    prices: dict[str, dict[str, float]]  # region -> type -> on-demand USD/hour
    price_files: dict[str, Path] = field(default_factory=dict)  # region -> its table, shipped as is
    efa: dict[str, int] = field(default_factory=dict)  # Karpenter's table: type -> its vpc.amazonaws.com/efa


def default_moto_resources() -> Path | None:
    """moto's EC2 resources directory (instance types and offerings), when moto is installed (not imported)."""
    from importlib.util import find_spec

    spec = find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"


def _load(path: Path) -> Any:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return json.loads(raw)
    except FileNotFoundError:
        raise CatalogError(path, "no such file") from None
    except OSError as exc:
        raise CatalogError(path, exc.strerror or str(exc)) from None
    except (ValueError, EOFError) as exc:
        raise CatalogError(path, f"not valid (gzipped) JSON: {exc}") from None


def _table(path: Path) -> tuple[dict[str, dict[str, str]], str, dict[str, int]]:
    """A Karpenter instance-type table: type -> labels, its source line, and type -> the `vpc.amazonaws.com/efa` its
    resources list (the types with EFA; v1.14.1's `efas` without a class's `networkInterfaces`)."""
    document = _load(path)
    types = document.get("types") if isinstance(document, dict) else None
    if not isinstance(types, dict) or not all(
        isinstance(row, dict) and isinstance(row.get("labels"), dict) for row in types.values()
    ):
        raise CatalogError(path, 'expected {"types": {name: {"labels": {...}, ...}}}')
    efa: dict[str, int] = {}
    for name, row in types.items():
        resources = row.get("resources")
        count = resources.get(wk.EFA) if isinstance(resources, dict) else None
        if count is not None:
            if not isinstance(count, str) or not count.isdecimal() or not count.isascii():
                raise CatalogError(path, f"{name}: resources.{wk.EFA} {count!r} is not a count")
            efa[str(name)] = int(count)
    labels = {str(name): {str(k): str(v) for k, v in row["labels"].items()} for name, row in types.items()}
    return labels, str(document.get("source", path.name)), efa


def _last_date(text: str) -> str | None:
    """The last date (YYYY-MM or YYYY-MM-DD) a source line names ("...; 2023-10)")."""
    found = _DATE.findall(text)
    return found[-1] if found else None


def installed_moto_version(moto: Path) -> str | None:
    """The version of the moto release whose EC2 resources directory `moto` is (its dist-info sits beside the
    package), None when it cannot be told."""
    site = moto.parent.parent.parent  # <site>/moto/ec2/resources
    versions = [p.name.removeprefix("moto-").removesuffix(".dist-info") for p in site.glob("moto-*.dist-info")]
    return versions[0] if len(versions) == 1 else None


def _moto_manifest(shared: Path, moto: Path) -> tuple[str | None, str]:
    """The month of moto's copy of EC2 (from moto.json in the sources directory) and how to name it; a moto of
    another release than the one recorded is refused: its copy would make another catalog."""
    path = shared / _MOTO_MANIFEST
    if not path.is_file():
        return None, "moto's copy"
    manifest = _load(path)
    if not isinstance(manifest, dict) or not all(isinstance(manifest.get(k), str) for k in ("version", "date")):
        raise CatalogError(path, 'expected {"version": "5.2.5", "date": "2026-10", ...}')
    installed = installed_moto_version(moto)
    if installed is not None and installed != manifest["version"]:
        raise CatalogError(
            path,
            f"records moto {manifest['version']}, but {moto} is moto {installed}'s: install moto "
            f"{manifest['version']}, or record the new release and its month here",
        )
    return str(manifest["date"]), f"moto {manifest['version']}'s copy"


def _one(directory: Path, pattern: re.Pattern[str], what: str) -> Path:
    """The newest file of `directory` whose name matches `pattern` (names carry the date: the last sorts newest)."""
    found = sorted(p for p in directory.iterdir() if pattern.match(p.name)) if directory.is_dir() else []
    if not found:
        raise CatalogError(directory, f"no {what} ({pattern.pattern}) in it")
    return found[-1]


def read_sources(shared: Path, moto: Path) -> Sources:
    """Read the sources directory (`catalog-sources/`) and moto's EC2 resources. Raises :class:`CatalogError`."""
    current_path = _one(shared, _CURRENT_TABLE, "Karpenter instance-type table")
    match = _CURRENT_TABLE.match(current_path.name)
    assert match is not None
    current, current_source, efa = _table(current_path)
    previous, previous_source, _ = _table(shared / _V031_TABLE)
    vpc_path = _one(shared, _VPC_LIMITS, "Karpenter VPC limits table")
    vpc_document = _load(vpc_path)
    vpc_limits = vpc_document.get("types") if isinstance(vpc_document, dict) else None
    if not isinstance(vpc_limits, dict):
        raise CatalogError(vpc_path, 'expected {"types": {name: {"interfaces": ..., ...}}}')
    described_path = moto / _DESCRIBED
    described = _load(described_path)
    if not isinstance(described, dict):
        raise CatalogError(described_path, "expected DescribeInstanceTypes entries by instance type")
    offerings: dict[str, dict[str, set[str]]] = {}
    offerings_dir = moto / _OFFERINGS_DIR
    for path in sorted(offerings_dir.glob("*.json.gz")) if offerings_dir.is_dir() else []:
        region = path.name.removesuffix(".json.gz")
        zones: dict[str, set[str]] = defaultdict(set)
        entries = _load(path)
        if not isinstance(entries, list):
            raise CatalogError(path, "expected a list of DescribeInstanceTypeOfferings entries")
        for entry in entries:
            if isinstance(entry, dict) and entry.get("InstanceType") and entry.get("Location"):
                zones[str(entry["InstanceType"])].add(str(entry["Location"]))
        offerings[region] = dict(zones)
    if not offerings:
        raise CatalogError(offerings_dir, "no DescribeInstanceTypeOfferings files (<region>.json.gz) in it")
    moto_date, moto_name = _moto_manifest(shared, moto)
    prices: dict[str, dict[str, float]] = {}
    price_files: dict[str, Path] = {}
    descriptions = {
        KARPENTER: current_source,
        KARPENTER_V031: previous_source,
        VPC_LIMITS: str(vpc_document.get("source", vpc_path.name)),
        EC2: f"DescribeInstanceTypes as AWS returned it ({moto_name}: {_DESCRIBED})",
        OFFERINGS: f"DescribeInstanceTypeOfferings by availability zone as AWS returned it, {len(offerings)} regions "
        f"({moto_name}: {_OFFERINGS_DIR}/<region>.json.gz)",
    }
    vpc_match = re.search(r"-(\d{4}-\d{2})\.json$", vpc_path.name)
    dates: dict[str, str | None] = {
        KARPENTER: match.group(1),
        KARPENTER_V031: _last_date(previous_source),
        VPC_LIMITS: vpc_match.group(1) if vpc_match else None,
        EC2: moto_date,
        OFFERINGS: moto_date,
    }
    for path in sorted(shared.iterdir()):
        price_match = _PRICES.match(path.name)
        if price_match is None:
            continue
        region = price_match.group(1)
        prices[region] = load_on_demand_prices(path, region)
        price_files[region] = path
        document = _load(path)
        generated = document.get("generated_at", "?")
        descriptions[f"prices-{region}"] = f"{document.get('source', path.name)} (generated {generated})"
        dates[f"prices-{region}"] = _last_date(str(generated))
    return Sources(
        date=match.group(1),
        descriptions=descriptions,
        dates={source: date for source, date in sorted(dates.items()) if date},
        current=current,
        previous=previous,
        vpc_limits={str(k): v for k, v in vpc_limits.items() if isinstance(v, dict)},
        described={str(k): v for k, v in described.items() if isinstance(v, dict)},
        offerings=offerings,
        prices=prices,
        price_files=price_files,
        efa=efa,
    )


# --- joining ------------------------------------------------------------------------------------------------


@dataclass
class JoinedType:
    """One type's facts and where each came from."""

    facts: InstanceType
    facts_source: str
    network_source: str
    spot: bool
    regions: set[str] = field(default_factory=set)


@dataclass
class Joined:
    """The catalog, joined: the types, each region's zones (observed, and inferred with why), names known only from
    a price table, and the counts of the join."""

    date: str
    descriptions: dict[str, str]
    dates: dict[str, str]
    types: dict[str, JoinedType]
    zones: dict[str, dict[str, set[str]]]  # region -> type -> zones observed
    inferred: dict[str, dict[str, tuple[set[str], str]]]  # region -> type -> (zones, why)
    region_zones: dict[str, list[str]]
    names_only: dict[str, set[str]]  # name -> regions whose price table names it
    dropped: dict[str, str]  # name -> why it is left out
    price_files: dict[str, Path]


def _int_label(labels: Mapping[str, str], key: str, name: str, default: int | None = 0) -> int:
    value = labels.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"{name}: no {key}")
        return default
    if not value.isdigit():
        raise ValueError(f"{name}: {key} {value!r} is not a count")
    return int(value)


def type_from_labels(name: str, labels: Mapping[str, str]) -> InstanceType | None:
    """A type's facts from the label values of a Karpenter table row (None: no Kubernetes architecture)."""
    arch = labels.get(wk.ARCH, "")
    if arch not in ("amd64", "arm64"):
        return None
    accelerator = (
        _int_label(labels, wk.INSTANCE_ACCELERATOR_COUNT, name),
        labels.get(wk.INSTANCE_ACCELERATOR_NAME, ""),
        labels.get(wk.INSTANCE_ACCELERATOR_MANUFACTURER, ""),
    )
    accelerator = trn1_accelerator(name, accelerator[0]) or accelerator
    return InstanceType(
        name=name,
        vcpu=_int_label(labels, wk.INSTANCE_CPU, name, None),
        memory_mib=_int_label(labels, wk.INSTANCE_MEMORY, name, None),
        architectures=(arch,),
        gpu_count=_int_label(labels, wk.INSTANCE_GPU_COUNT, name),
        gpu_name=labels.get(wk.INSTANCE_GPU_NAME, ""),
        gpu_manufacturer=labels.get(wk.INSTANCE_GPU_MANUFACTURER, ""),
        gpu_memory_mib=_int_label(labels, wk.INSTANCE_GPU_MEMORY, name),
        accelerator_count=accelerator[0],
        accelerator_name=accelerator[1],
        accelerator_manufacturer=accelerator[2],
        local_nvme_gib=_int_label(labels, wk.INSTANCE_LOCAL_NVME, name),
        hypervisor=labels.get(wk.INSTANCE_HYPERVISOR, ""),
        network_bandwidth_mbps=_int_label(labels, wk.INSTANCE_NETWORK_BANDWIDTH, name),
        encryption_in_transit=labels.get(wk.INSTANCE_ENCRYPTION_IN_TRANSIT) == "true",
        cpu_manufacturer=labels.get(wk.INSTANCE_CPU_MANUFACTURER, ""),
        cpu_sustained_clock_mhz=_int_label(labels, wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, name),
        ebs_bandwidth_mbps=_int_label(labels, wk.INSTANCE_EBS_BANDWIDTH, name),
    )


def default_card_interfaces(limits: Mapping[str, Any]) -> int:
    """The ENIs of a VPC limits row's default network card (what the VPC CNI uses: Karpenter's ENILimitedPods reads
    NetworkCards[DefaultNetworkCardIndex]); all its ENIs when the row lists no cards (one card)."""
    cards = limits.get("networkCards")
    if not isinstance(cards, list) or not cards:
        return int(limits["interfaces"])
    default = limits.get("defaultNetworkCardIndex", 0)
    for card in cards:
        if isinstance(card, Mapping) and card.get("networkCardIndex") == default:
            return int(card["maximumNetworkInterfaces"])
    raise ValueError(f"no network card {default} (the default) among {cards!r}")


def network_cards(limits: Mapping[str, Any]) -> tuple[int, ...]:
    """The interfaces of each network card of a VPC limits row, in card index order (indexes must be 0..n-1); one
    card of all its ENIs when the row lists no cards."""
    cards = limits.get("networkCards")
    if not isinstance(cards, list) or not cards:
        return (int(limits["interfaces"]),)
    by_index = {int(card["networkCardIndex"]): int(card["maximumNetworkInterfaces"]) for card in cards}
    if sorted(by_index) != list(range(len(cards))):
        raise ValueError(f"network card indexes {sorted(by_index)} are not 0..{len(cards) - 1}")
    return tuple(by_index[i] for i in range(len(cards)))


def _network(name: str, sources: Sources, described: InstanceType | None) -> tuple[dict[str, Any], str]:
    """ENIs, IPv4 per ENI, branch ENIs, bare metal and the interfaces of each network card, and their source."""
    limits = sources.vpc_limits.get(name)
    if limits is not None:
        return {
            "max_enis": default_card_interfaces(limits),
            "ipv4_per_eni": int(limits["ipv4PerInterface"]),
            "branch_enis": int(limits["branchInterfaces"]) if limits.get("trunking") else 0,
            "bare_metal": bool(limits.get("baremetal")),
            "network_cards": network_cards(limits),
        }, VPC_LIMITS
    bare_metal = described.bare_metal if described is not None else "metal" in instance_size(name)
    if described is not None and described.max_enis and described.ipv4_per_eni:
        return {
            "max_enis": described.max_enis,
            "ipv4_per_eni": described.ipv4_per_eni,
            "branch_enis": 0,
            "bare_metal": bare_metal,
            "network_cards": described.network_cards,
        }, EC2
    return {"max_enis": 0, "ipv4_per_eni": 0, "branch_enis": 0, "bare_metal": bare_metal, "network_cards": ()}, ""


def _described_efa(described: InstanceType | None) -> int:
    return described.efa_interfaces if described is not None else 0


def _join_type(name: str, sources: Sources) -> JoinedType | None:
    info = sources.described.get(name)
    try:
        described = instance_type_from_ec2(info, (), None) if info is not None else None
    except ValueError as exc:
        raise CatalogError(EC2, str(exc)) from None
    if name in sources.current:
        facts, facts_source = type_from_labels(name, sources.current[name]), KARPENTER
    elif name in sources.previous:
        facts, facts_source = type_from_labels(name, sources.previous[name]), KARPENTER_V031
    else:
        facts, facts_source = described, EC2
    if facts is None:
        return None
    try:
        network, network_source = _network(name, sources, described)
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(VPC_LIMITS, f"{name}: {exc}") from None
    usage = info.get("SupportedUsageClasses") if info is not None else None
    spot = wk.CAPACITY_SPOT in usage if isinstance(usage, list) else True
    if facts_source == KARPENTER_V031 and described is not None:  # v0.31's table predates v1's CPU and EBS labels
        facts = dataclasses.replace(
            facts,
            cpu_manufacturer=described.cpu_manufacturer,
            cpu_sustained_clock_mhz=described.cpu_sustained_clock_mhz,
            ebs_bandwidth_mbps=described.ebs_bandwidth_mbps,
        )
    facts = dataclasses.replace(
        facts,
        **network,
        previous_generation=facts_source == KARPENTER_V031,
        efa_interfaces=sources.efa.get(name, 0) if name in sources.current else _described_efa(described),
        ena_unsupported=described is not None and described.ena_unsupported,
        nested_virtualization=described is not None and described.nested_virtualization,
    )
    return JoinedType(facts, facts_source, network_source, spot)


def _inferred_zones(name: str, offered: Mapping[str, set[str]], all_zones: Sequence[str]) -> tuple[set[str], str]:
    """Zones for a type sold in a region whose offerings lack it: its family's there, else those of its category
    and generation, else of its category, else every zone."""
    family, category, generation = instance_family(name), instance_category(name), instance_generation(name)
    rules: tuple[Callable[[str], bool], ...] = (
        lambda other: instance_family(other) == family,
        lambda other: (instance_category(other), instance_generation(other)) == (category, generation),
        lambda other: instance_category(other) == category,
    )
    for accepts in rules:
        matching = [other for other in offered if accepts(other)]
        if matching:
            zones = set[str]().union(*(offered[other] for other in matching))
            return zones, "zones of " + ", ".join(sorted({instance_family(other) for other in matching}))
    return set(all_zones), "every zone of the region"


def join(sources: Sources) -> Joined:
    """Join the sources into the catalog (see the module docstring)."""
    names = sorted(
        set(sources.current)
        | set(sources.previous)
        | {n for zones in sources.offerings.values() for n in zones}
        | {n for prices in sources.prices.values() for n in prices}
    )
    types: dict[str, JoinedType] = {}
    dropped: dict[str, str] = {}
    names_only: dict[str, set[str]] = {}
    for name in names:
        if name not in sources.current and name not in sources.previous and name not in sources.described:
            names_only[name] = {r for r, prices in sources.prices.items() if name in prices}
            if not names_only[name]:  # offered, yet described nowhere: nothing to say about it
                del names_only[name]
                dropped[name] = "offered but described by no source"
            continue
        joined = _join_type(name, sources)
        if joined is None:
            dropped[name] = "no Kubernetes architecture"
            continue
        types[name] = joined
    zones: dict[str, dict[str, set[str]]] = {}
    inferred: dict[str, dict[str, tuple[set[str], str]]] = {}
    region_zones: dict[str, list[str]] = {}
    offered_somewhere = {name for offered in sources.offerings.values() for name in offered}
    missing_everywhere = {name for name in types if name not in offered_somewhere}
    for region, offered in sorted(sources.offerings.items()):
        kept = {name: found for name, found in offered.items() if name in types}
        zones[region] = kept
        region_zones[region] = sorted(set[str]().union(*offered.values()))
        for name in kept:
            types[name].regions.add(region)
        sold = set(sources.prices.get(region, {})) | missing_everywhere
        inferred[region] = {}
        for name in sorted(sold):
            if name in types and name not in kept:
                inferred[region][name] = _inferred_zones(name, kept, region_zones[region])
                types[name].regions.add(region)
    return Joined(
        date=sources.date,
        descriptions=sources.descriptions,
        dates=sources.dates,
        types=types,
        zones=zones,
        inferred=inferred,
        region_zones=region_zones,
        names_only=names_only,
        dropped=dropped,
        price_files=sources.price_files,
    )


# --- writing ------------------------------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def types_document(joined: Joined) -> str:
    """types.json (one row per line)."""
    regions = sorted(joined.zones)
    rows = []
    for _, joined_type in sorted(joined.types.items()):
        values = dict(vars(joined_type.facts))
        values["architectures"] = ",".join(joined_type.facts.architectures)
        values["spot"] = joined_type.spot
        values["facts"] = joined_type.facts_source
        values["network"] = joined_type.network_source
        values["regions"] = mask_of(regions, joined_type.regions)
        rows.append(_dumps(encode_row(values)))
    names_only = {name: mask_of(regions, found) for name, found in sorted(joined.names_only.items())}
    head = {
        "columns": list(COLUMNS),
        "date": joined.date,
        "dates": dict(sorted(joined.dates.items())),
        "format": FORMAT,
        "names_only": names_only,
        "regions": regions,
        "sources": dict(sorted(joined.descriptions.items())),
    }
    return _dumps(head)[:-1] + ',"types":[\n' + ",\n".join(rows) + "\n]}\n"


def offerings_document(joined: Joined, region: str) -> str:
    """offerings-<region>.json (one family per line)."""
    zone_names = joined.region_zones[region]
    by_family: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, found in joined.zones[region].items():
        by_family[instance_family(name)][mask_of(zone_names, found)].append(instance_size(name))
    lines = [
        _dumps(family) + ":" + _dumps({str(m): " ".join(sorted(sizes)) for m, sizes in sorted(masks.items())})
        for family, masks in sorted(by_family.items())
    ]
    inferred = {
        name: [mask_of(zone_names, found), why] for name, (found, why) in sorted(joined.inferred[region].items())
    }
    head = _dumps({"format": FORMAT, "inferred": inferred, "region": region, "zones": zone_names})
    return head[:-1] + ',"offered":{\n' + ",\n".join(lines) + "\n}}\n"


def _write_atomically(path: Path, data: bytes) -> None:
    tmp_name = ""
    try:
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
            tmp_name = tmp.name
            tmp.write(data)
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
        tmp_name = ""
    except OSError as exc:
        raise CatalogError(path, f"cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp_name:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def write_embedded(joined: Joined, out: Path) -> list[Path]:
    """Write the embedded catalog's files into `out` (each atomically) and remove the offerings files of regions it
    no longer covers; returns the files written."""
    if not out.is_dir():
        raise CatalogError(out, "not a directory")
    documents: dict[str, bytes] = {TYPES_FILE: types_document(joined).encode()}
    for region in sorted(joined.zones):
        documents[offerings_file_name(region)] = offerings_document(joined, region).encode()
    for region, path in sorted(joined.price_files.items()):
        documents[on_demand_prices_file_name(region)] = path.read_bytes()
    written = []
    for name, data in documents.items():
        _write_atomically(out / name, data)
        written.append(out / name)
    for stale in sorted(out.glob(offerings_file_name("*"))):
        if stale.name not in documents:
            stale.unlink()
    return written


def summary(joined: Joined, written: Iterable[Path] = ()) -> list[str]:
    """What the join found, for the build's output: counts by source, the disagreements, per-region counts, sizes."""
    by_facts: dict[str, int] = defaultdict(int)
    by_network: dict[str, int] = defaultdict(int)
    for t in joined.types.values():
        by_facts[t.facts_source] += 1
        by_network[t.network_source or "unknown"] += 1
    previous = sorted(n for n, t in joined.types.items() if t.facts.previous_generation)
    lines = [
        f"EC2 catalog of {joined.date}: {len(joined.types)} instance types in {len(joined.zones)} regions",
        "sources of: " + ", ".join(f"{source} {date}" for source, date in sorted(joined.dates.items())),
        "facts from: " + ", ".join(f"{s} {n}" for s, n in sorted(by_facts.items())),
        "network limits from: " + ", ".join(f"{s} {n}" for s, n in sorted(by_network.items())),
        f"previous generation ({len(previous)}): {' '.join(previous)}",
    ]
    if joined.names_only:
        lines.append(f"known by name only (a price, no facts): {' '.join(sorted(joined.names_only))}")
    if joined.dropped:
        reasons: dict[str, list[str]] = defaultdict(list)
        for name, why in joined.dropped.items():
            reasons[why].append(name)
        lines += [f"left out ({why}): {' '.join(sorted(names))}" for why, names in sorted(reasons.items())]
    everywhere = set[str].intersection(*(set(inferred) for inferred in joined.inferred.values()))
    if everywhere:
        lines.append(f"missing from the offerings of every region, zones inferred: {' '.join(sorted(everywhere))}")
    for region in sorted(joined.zones):
        inferred = joined.inferred[region]
        line = f"{region}: {len(joined.zones[region]) + len(inferred)} types, {len(joined.region_zones[region])} zones"
        if inferred:
            line += f", {len(inferred)} with inferred zones"
            others = sorted(set(inferred) - everywhere)
            line += f" ({' '.join(others)} and those above)" if others else ""
        lines.append(line)
    for path in written:
        lines.append(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return lines


def build_embedded(shared: Path, moto: Path, out: Path) -> list[str]:
    """Read the sources, join them, write the embedded catalog into `out`; the summary lines."""
    joined = join(read_sources(shared, moto))
    return summary(joined, write_embedded(joined, out))


__all__ = [
    "Joined",
    "Sources",
    "build_embedded",
    "default_card_interfaces",
    "network_cards",
    "default_moto_resources",
    "installed_moto_version",
    "join",
    "read_sources",
    "summary",
]
