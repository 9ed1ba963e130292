"""The instance-type catalog of one region: look types up, read and write it deterministically.

This module is the bottom of the catalog package: the catalog model, its file format and where the embedded data
lives. Loading one (:mod:`karpenter_policy.catalog.loading`: a file, or the embedded catalog of a region built by
:mod:`karpenter_policy.catalog.embedded`) sits above it, as do the prices, the table, refresh and build. Any
problem reading a catalog file (format 1 below: what ``karpenter-policy catalog refresh`` writes, see
:mod:`karpenter_policy.catalog.refresh`) is a :class:`CatalogError` naming the file and the reason, never a
traceback.

File format (version 1), one instance type per line so diffs stay readable::

    {"date":"2026-11-23","format":1,"region":"us-east-1","types":[
    {"accelerator_count":0,...,"name":"a1.2xlarge","offerings":[["us-east-1a","on-demand",0.204,true],...],...},
    ...
    ]}

An offering is [zone, capacity type, price in USD/hour or null (no price data), available]. ``date`` (optional)
is when the catalog was made; ``branch_enis``, ``previous_generation``, the CPU and EBS facts and the network facts
(``network_cards``: interfaces per card in index order, ``efa_interfaces``, ``ena_unsupported``,
``nested_virtualization``) are optional per type, written only when not their default.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

from karpenter_policy.model.instancetypes import InstanceType, Offering, instance_family

_T = TypeVar("_T")
FORMAT_VERSION = 1
DEFAULT_REGION = "us-east-1"
DATA_PACKAGE = "karpenter_policy.catalog"
DATA_DIR = "data"
#: The source id of zones DescribeInstanceTypeOfferings returned (see `Catalog.sources`).
OFFERINGS_SOURCE = "offerings"


def on_demand_prices_file_name(region: str) -> str:
    """The name of a region's on-demand price table in the catalog directory."""
    return f"ec2-on-demand-prices-{region}.json"


class CatalogError(Exception):
    """A catalog (or price) file is missing or unreadable; ``file`` says which, ``reason`` says why."""

    def __init__(self, file: str | Path, reason: str) -> None:
        self.file = str(file)
        self.reason = reason
        super().__init__(f"{self.file}: {reason}")


@dataclass(frozen=True, slots=True)
class KnownType:
    """What the embedded catalog knows of a type whatever the region, for findings about a type a region's catalog
    lacks: a previous-generation type, or one offered in other regions only (`regions`: those of the catalog that
    offer it; `described`: False for a name only a price table knows)."""

    name: str
    previous_generation: bool
    regions: tuple[str, ...]
    described: bool = True


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where each fact about a type came from (source ids, see `Catalog.sources`): its attributes (vCPU, memory,
    GPUs, ...), its network limits (ENIs, IPv4 per ENI; "" unknown), its zones in the region (`offerings`, or
    `inferred: ...` with the rule) and its price ("" no price data)."""

    facts: str
    network: str
    zones: str
    price: str


@dataclass(frozen=True, slots=True)
class Absence:
    """Why a region's catalog lacks an instance type or family that the catalog knows: it is previous-generation
    (all its types are), or offered only in other `regions` of the catalog (none: in no region it covers);
    `described` is False for a name only a price table knows."""

    previous_generation: bool
    regions: tuple[str, ...]
    described: bool = True


@dataclass(frozen=True)
class Catalog:
    """The instance types of one region, sorted by name.

    `date` is when the catalog's instance types were taken ("2026-07"; "" unknown): the type table's month for the
    embedded catalogs, the day of the refresh for a refreshed one. The embedded catalogs also carry what is known of
    the types a region lacks (`known`), where each fact of each type came from (`provenance`), the sources
    (`sources`: id -> description) and when each was taken (`dates`: id -> date; the offerings' is not the types').
    Previous-generation types are in the catalog like any other (Karpenter v0.31 launches them); a requirement that
    names one gets a warning unless `previous_generation_acknowledged` (``--allow-previous-generation``).
    """

    region: str
    instance_types: tuple[InstanceType, ...]
    date: str = ""
    previous_generation_acknowledged: bool = field(default=False, compare=False)
    known: Mapping[str, KnownType] = field(default_factory=dict, repr=False, compare=False)
    provenance: Mapping[str, Provenance] = field(default_factory=dict, repr=False, compare=False)
    sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    dates: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    _by_name: dict[str, InstanceType] = field(init=False, repr=False, compare=False, hash=False)
    _derived: dict[Hashable, Any] = field(init=False, repr=False, compare=False, hash=False)
    _lock: threading.Lock = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.instance_types, key=lambda it: it.name))
        if ordered != self.instance_types:
            object.__setattr__(self, "instance_types", ordered)
        by_name = {it.name: it for it in ordered}
        if len(by_name) != len(ordered):
            counts = Counter(it.name for it in ordered)
            dupes = sorted(name for name, count in counts.items() if count > 1)
            raise ValueError(f"duplicate instance types: {', '.join(dupes)}")
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_derived", {})
        object.__setattr__(self, "_lock", threading.Lock())

    def derived(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """A structure computed from this catalog (the solver's table, the scheduler's masks), built once and kept
        as long as the catalog lives: no process-wide cache keyed by object identities."""
        with self._lock:
            if key not in self._derived:
                self._derived[key] = build()
            found: _T = self._derived[key]
            return found

    def get(self, name: str) -> InstanceType | None:
        """The instance type of that name, None when the catalog has none."""
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> tuple[str, ...]:
        """The names of the catalog's instance types, in its order."""
        return tuple(it.name for it in self.instance_types)

    def families(self) -> tuple[str, ...]:
        """The instance families (`m5`, `c7g` …), sorted (computed once)."""
        return self.derived("families", lambda: tuple(sorted({it.family for it in self.instance_types})))

    def sizes(self) -> tuple[str, ...]:
        """The instance sizes (`large`, `2xlarge` …), sorted."""
        return tuple(sorted({it.size for it in self.instance_types}))

    def zones(self) -> tuple[str, ...]:
        """Every zone some instance type is offered in, sorted."""
        return tuple(sorted({o.zone for it in self.instance_types for o in it.offerings}))

    def __len__(self) -> int:
        return len(self.instance_types)

    @property
    def description(self) -> str:
        """`EC2 catalog of 2026-07` (the catalog as a whole, named by its instance types' date)."""
        return f"EC2 catalog of {self.date}" if self.date else "EC2 catalog"

    @property
    def types_description(self) -> str:
        """`EC2 types of 2026-07`: what a finding that a type exists or not rests on."""
        return f"EC2 types of {self.date}" if self.date else "EC2 types"

    @property
    def offerings_description(self) -> str:
        """`EC2 offerings of 2026-10`: what a finding about where a type is offered rests on (a refreshed catalog
        took both at once: its date)."""
        date = self.dates.get(OFFERINGS_SOURCE, self.date)
        return f"EC2 offerings of {date}" if date else "EC2 offerings"

    def acknowledging_previous_generation(self) -> Catalog:
        """This catalog, with requirements that name previous-generation types left without a warning."""
        if self.previous_generation_acknowledged:
            return self
        return dataclasses.replace(self, previous_generation_acknowledged=True)

    def absence(self, name: str, family: bool = False) -> Absence | None:
        """Why this catalog lacks the instance type (or, with `family`, the family) `name` though it knows it; None
        when it does not know it (a name no source has: a typo) or has it."""
        if (name in self._by_name) if not family else (name in self.families()):
            return None
        if family:
            found = self.derived("known-families", self._known_families).get(name, ())
        else:
            found = (self.known[name],) if name in self.known else ()
        if not found:
            return None
        return Absence(
            previous_generation=all(t.previous_generation for t in found),
            regions=tuple(sorted({r for t in found for r in t.regions})),
            described=any(t.described for t in found),
        )

    def _known_families(self) -> dict[str, tuple[KnownType, ...]]:
        families: dict[str, list[KnownType]] = {}
        for known in self.known.values():
            families.setdefault(instance_family(known.name), []).append(known)
        return {family: tuple(types) for family, types in families.items()}

    def __iter__(self) -> Iterator[InstanceType]:
        return iter(self.instance_types)


# --- serialisation ------------------------------------------------------------------------------------------

#: Fields added since format 1: written only when they differ from their default, read as it when absent, so
#: files without them stay valid and byte-identical.
_OPTIONAL_FIELDS: dict[str, Any] = {
    "branch_enis": 0,
    "previous_generation": False,
    "cpu_manufacturer": "",
    "cpu_sustained_clock_mhz": 0,
    "ebs_bandwidth_mbps": 0,
    "network_cards": (),
    "efa_interfaces": 0,
    "ena_unsupported": False,
    "nested_virtualization": False,
}
_INSTANCE_TYPE_FIELDS = tuple(f.name for f in fields(InstanceType) if f.name not in _OPTIONAL_FIELDS)


def _instance_type_to_dict(it: InstanceType) -> dict[str, Any]:
    out: dict[str, Any] = {
        name: list(value) if isinstance(value, tuple) else value
        for name, default in _OPTIONAL_FIELDS.items()
        if (value := getattr(it, name)) != default
    }
    for name in _INSTANCE_TYPE_FIELDS:
        value = getattr(it, name)
        if name == "offerings":
            value = [[o.zone, o.capacity_type, o.price, o.available] for o in it.offerings]
        elif name == "architectures":
            value = list(value)
        out[name] = value
    return out


def catalog_to_json(catalog: Catalog) -> str:
    """Serialise deterministically: sorted keys, types in name order, one type per line, no timestamps."""
    lines = [
        json.dumps(_instance_type_to_dict(it), sort_keys=True, separators=(",", ":"), allow_nan=False)
        for it in catalog.instance_types
    ]
    header: dict[str, Any] = {"format": FORMAT_VERSION, "region": catalog.region}
    if catalog.date:
        header["date"] = catalog.date
    head = json.dumps(header, sort_keys=True, separators=(",", ":"))
    body = ",\n".join(lines)
    return head[:-1] + ',"types":[\n' + body + ("\n" if body else "") + "]}\n"


class _Invalid(Exception):
    pass


def _expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    # bool is an int in Python: refuse it where an int is wanted, and vice versa.
    if isinstance(value, bool) and kind is not bool:
        raise _Invalid(f"{what} must be {_kind_name(kind)}, not a boolean")
    if not isinstance(value, kind):
        raise _Invalid(f"{what} must be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _number(value: Any, what: str) -> float:
    number = float(_expect(value, (int, float), what))
    if not math.isfinite(number) or number < 0:
        raise _Invalid(f"{what} must be a finite number >= 0")
    return number


#: The largest count a catalog may hold (2^40: a million times any real instance's memory in MiB), so that the
#: arithmetic on it (float64 where Karpenter's is) stays exact and finite.
MAX_CATALOG_INT = 2**40


def _non_negative_int(value: Any, what: str) -> int:
    number: int = _expect(value, int, what)
    if number < 0:
        raise _Invalid(f"{what} must be >= 0")
    if number > MAX_CATALOG_INT:
        raise _Invalid(f"{what} must be at most {MAX_CATALOG_INT}")
    return number


def _instance_type_from_dict(raw: Any, where: str) -> InstanceType:
    data: dict[str, Any] = _expect(raw, dict, where)
    missing = [name for name in _INSTANCE_TYPE_FIELDS if name not in data]
    if missing:
        raise _Invalid(f"{where}: missing field(s) {', '.join(missing)}")
    name = _expect(data["name"], str, f"{where}.name")
    where = f"{where} ({name})"
    offerings = []
    for i, entry in enumerate(_expect(data["offerings"], list, f"{where}.offerings")):
        what = f"{where}.offerings[{i}]"
        if not isinstance(entry, list) or len(entry) != 4:
            raise _Invalid(f"{what} must be [zone, capacity type, price, available]")
        offerings.append(
            Offering(
                zone=_expect(entry[0], str, f"{what} zone"),
                capacity_type=_expect(entry[1], str, f"{what} capacity type"),
                price=None if entry[2] is None else _number(entry[2], f"{what} price"),
                available=_expect(entry[3], bool, f"{what} available"),
            )
        )
    architectures = _expect(data["architectures"], list, f"{where}.architectures")
    price = data["price_on_demand"]
    it = InstanceType(
        name=name,
        vcpu=_non_negative_int(data["vcpu"], f"{where}.vcpu"),
        memory_mib=_non_negative_int(data["memory_mib"], f"{where}.memory_mib"),
        architectures=tuple(_expect(a, str, f"{where}.architectures[]") for a in architectures),
        gpu_count=_non_negative_int(data["gpu_count"], f"{where}.gpu_count"),
        gpu_name=_expect(data["gpu_name"], str, f"{where}.gpu_name"),
        gpu_manufacturer=_expect(data["gpu_manufacturer"], str, f"{where}.gpu_manufacturer"),
        gpu_memory_mib=_non_negative_int(data["gpu_memory_mib"], f"{where}.gpu_memory_mib"),
        accelerator_count=_non_negative_int(data["accelerator_count"], f"{where}.accelerator_count"),
        accelerator_name=_expect(data["accelerator_name"], str, f"{where}.accelerator_name"),
        accelerator_manufacturer=_expect(data["accelerator_manufacturer"], str, f"{where}.accelerator_manufacturer"),
        local_nvme_gib=_non_negative_int(data["local_nvme_gib"], f"{where}.local_nvme_gib"),
        bare_metal=_expect(data["bare_metal"], bool, f"{where}.bare_metal"),
        hypervisor=_expect(data["hypervisor"], str, f"{where}.hypervisor"),
        network_bandwidth_mbps=_non_negative_int(data["network_bandwidth_mbps"], f"{where}.network_bandwidth_mbps"),
        max_enis=_non_negative_int(data["max_enis"], f"{where}.max_enis"),
        ipv4_per_eni=_non_negative_int(data["ipv4_per_eni"], f"{where}.ipv4_per_eni"),
        encryption_in_transit=_expect(data["encryption_in_transit"], bool, f"{where}.encryption_in_transit"),
        offerings=tuple(offerings),
        price_on_demand=None if price is None else _number(price, f"{where}.price_on_demand"),
        branch_enis=_non_negative_int(data.get("branch_enis", 0), f"{where}.branch_enis"),
        previous_generation=_expect(data.get("previous_generation", False), bool, f"{where}.previous_generation"),
        cpu_manufacturer=_expect(data.get("cpu_manufacturer", ""), str, f"{where}.cpu_manufacturer"),
        cpu_sustained_clock_mhz=_non_negative_int(
            data.get("cpu_sustained_clock_mhz", 0), f"{where}.cpu_sustained_clock_mhz"
        ),
        ebs_bandwidth_mbps=_non_negative_int(data.get("ebs_bandwidth_mbps", 0), f"{where}.ebs_bandwidth_mbps"),
        network_cards=tuple(
            _non_negative_int(card, f"{where}.network_cards[{i}]")
            for i, card in enumerate(_expect(data.get("network_cards", []), list, f"{where}.network_cards"))
        ),
        efa_interfaces=_non_negative_int(data.get("efa_interfaces", 0), f"{where}.efa_interfaces"),
        ena_unsupported=_expect(data.get("ena_unsupported", False), bool, f"{where}.ena_unsupported"),
        nested_virtualization=_expect(
            data.get("nested_virtualization", False), bool, f"{where}.nested_virtualization"
        ),
    )
    if it.vcpu == 0 or it.memory_mib == 0:
        raise _Invalid(f"{where}: vcpu and memory_mib must be > 0")
    return it


def catalog_from_json(text: str | bytes, file: str | Path = "<catalog>") -> Catalog:
    """Parse a catalog document; any problem is a :class:`CatalogError` naming ``file``."""
    try:
        document = json.loads(text)
    except UnicodeDecodeError as exc:
        raise CatalogError(file, f"not UTF-8 text: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise CatalogError(file, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise CatalogError(file, "not a catalog: the JSON nests too deeply") from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise CatalogError(file, "not a catalog: a number in it has too many digits") from None
    try:
        top: dict[str, Any] = _expect(document, dict, "the document")
        version = top.get("format")
        if version != FORMAT_VERSION:
            raise _Invalid(f"unsupported catalog format {version!r} (expected {FORMAT_VERSION})")
        region = _expect(top.get("region"), str, "region")
        if not region:
            raise _Invalid("region must not be empty")
        date = _expect(top.get("date", ""), str, "date")
        raw_types = _expect(top.get("types"), list, "types")
        types = [_instance_type_from_dict(raw, f"types[{i}]") for i, raw in enumerate(raw_types)]
        try:
            return Catalog(region=region, instance_types=tuple(types), date=date)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    except _Invalid as exc:
        raise CatalogError(file, str(exc)) from None


# --- the embedded data ----------------------------------------------------------------------------------------


def embedded_data_file(name: str) -> Traversable:
    """A file shipped in the package's ``data/`` folder (it may not exist)."""
    return resources.files(DATA_PACKAGE).joinpath(DATA_DIR, name)
