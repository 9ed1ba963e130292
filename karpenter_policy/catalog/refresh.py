"""Rebuild the instance-type catalog from an EC2 endpoint (``karpenter-policy catalog refresh``).

:func:`build_catalog` turns what an :class:`EC2CatalogSource` describes (DescribeInstanceTypes,
DescribeInstanceTypeOfferings by availability zone, optionally DescribeSpotPriceHistory) plus the on-demand
price table into a :class:`~karpenter_policy.catalog.catalog.Catalog`, deriving each field the way Karpenter
v0.31 (AWS provider, ``pkg/providers/instancetype/types.go``) does. :func:`refresh_catalog` does that against
a real endpoint and writes the file atomically.

This module never imports boto3 nor the cloud adapters (they sit above the catalog): the caller passes the
source — the CLI passes ``cloud.aws.ec2_catalog_source.Ec2CatalogSource``.

Offerings: one per zone the type is offered in x capacity type the type supports (``SupportedUsageClasses``
restricted to on-demand and spot, as Karpenter skips capacity blocks). On-demand offerings take the type's
on-demand price; spot offerings the zone's latest DescribeSpotPriceHistory price when asked
(``with_spot_prices``), else the on-demand price (as Karpenter does before it has spot prices). A type without
a known price gets offerings priced None: they can be launched, their cost is unknown ("no price data").
Facts DescribeInstanceTypes does not give are taken from the embedded catalog: the branch ENIs of trunking
types (``vpc.amazonaws.com/pod-eni``, from Karpenter's VPC limits). The network facts v1.14.1's EFA capacity and
compatibility checks read are EC2's: the interfaces of each network card (cards numbered 0..n-1 once each, else
the answer is refused), `EfaInfo.MaximumEfaInterfaces`, `EnaSupport` unsupported and `nested-virtualization` among
`ProcessorInfo.SupportedFeatures` (a list of strings).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from karpenter_policy.catalog.catalog import Catalog, CatalogError, catalog_to_json
from karpenter_policy.catalog.embedded import embedded_types
from karpenter_policy.catalog.prices import latest_spot_prices, load_on_demand_prices
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import TRN1_NEURONS
from karpenter_policy.model.instancetypes import (
    NESTED_VIRTUALIZATION,
    InstanceType,
    Offering,
    kube_architectures,
    lower_kebab_case,
)

ZONE_LOCATION_TYPE = "availability-zone"
SUPPORTED_CAPACITY_TYPES = (wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT)

# Karpenter v0.31 hard-codes Trainium (trn1*) as accelerator "inferentia" by "aws" (DescribeInstanceTypes
# had no accelerator data for them then), with model.allocatable.TRN1_NEURONS's device counts (awsNeurons).
_TRN1_PREFIX = "trn1"


def trn1_accelerator(name: str, count: int) -> tuple[int, str, str] | None:
    """Karpenter v0.31's accelerator (count, name, manufacturer) of a trn1 type whatever EC2 says (`count`: EC2's
    device count, for a trn1 type v0.31 does not list); None for other types."""
    if not name.startswith(_TRN1_PREFIX):
        return None
    return TRN1_NEURONS.get(name, count), "inferentia", "aws"


class EC2CatalogSource(Protocol):
    """What the refresh needs from EC2; results are plain dicts shaped like the EC2 API's."""

    def describe_instance_types(self) -> list[dict[str, Any]]: ...

    def describe_instance_type_offerings(self, location_type: str = ZONE_LOCATION_TYPE) -> list[dict[str, Any]]: ...

    def describe_spot_price_history(self) -> list[dict[str, Any]]: ...


class _Bad(Exception):
    pass


def _get(info: Mapping[str, Any], *path: str) -> Any:
    value: Any = info
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


#: EC2's integers are int32s: a count or size beyond that is not EC2's.
_MAX_INT = 2**31 - 1


def _int(value: Any, what: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{what} must be an integer, got {value!r}")
    if not 0 <= value <= _MAX_INT:
        raise _Bad(f"{what} must be between 0 and {_MAX_INT}, got {value}")
    return value


def _gbps(value: Any, what: str) -> float | None:
    """A bandwidth in Gbps: a finite number ≥ 0 (None when absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise _Bad(f"{what} must be a number ≥ 0, got {value!r}")
    return float(value)


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


# --- one instance type --------------------------------------------------------------------------------------


def instance_type_from_ec2(
    info: Mapping[str, Any],
    zones: Iterable[str],
    on_demand_price: float | None,
    spot_prices: Mapping[str, float] | None = None,
) -> InstanceType | None:
    """Build an :class:`InstanceType` from one DescribeInstanceTypes entry, as Karpenter v0.31 reads it.

    ``zones`` are where the type is offered, ``spot_prices`` zone -> spot price (absent: on-demand price).
    Returns None for types without a Kubernetes architecture (i386-only, Mac). Raises ``ValueError`` for an
    entry missing what every type has (name, vCPUs, memory, architectures).
    """
    name = _str(info.get("InstanceType"))
    if not name:
        raise ValueError("an instance type without InstanceType (its name)")
    try:
        return _instance_type(name, info, zones, on_demand_price, spot_prices or {})
    except _Bad as exc:
        raise ValueError(f"{name}: {exc}") from None


def _instance_type(
    name: str,
    info: Mapping[str, Any],
    zones: Iterable[str],
    on_demand_price: float | None,
    spot_prices: Mapping[str, float],
) -> InstanceType | None:
    ec2_architectures = _get(info, "ProcessorInfo", "SupportedArchitectures")
    if not isinstance(ec2_architectures, list):
        raise _Bad("ProcessorInfo.SupportedArchitectures missing")
    architectures = kube_architectures(a for a in ec2_architectures if isinstance(a, str))
    if not architectures:
        return None

    vcpu = _int(_get(info, "VCpuInfo", "DefaultVCpus"), "VCpuInfo.DefaultVCpus")
    memory_mib = _int(_get(info, "MemoryInfo", "SizeInMiB"), "MemoryInfo.SizeInMiB")
    if vcpu <= 0 or memory_mib <= 0:
        raise _Bad("VCpuInfo.DefaultVCpus and MemoryInfo.SizeInMiB must be > 0")

    # GPUs: labels only for a single GPU kind (Karpenter: len(GpuInfo.Gpus) == 1); memory is per GPU.
    gpu_count, gpu_name, gpu_manufacturer, gpu_memory = 0, "", "", 0
    gpus = _get(info, "GpuInfo", "Gpus")
    if isinstance(gpus, list) and len(gpus) == 1 and isinstance(gpus[0], Mapping):
        gpu = gpus[0]
        gpu_count = _int(gpu.get("Count"), "GpuInfo.Gpus[0].Count", 0)
        gpu_name = lower_kebab_case(_str(gpu.get("Name")))
        gpu_manufacturer = lower_kebab_case(_str(gpu.get("Manufacturer")))
        gpu_memory = _int(_get(gpu, "MemoryInfo", "SizeInMiB"), "GpuInfo.Gpus[0].MemoryInfo.SizeInMiB", 0)

    # Accelerators: InferenceAcceleratorInfo with a single kind, then Karpenter v0.31's trn1 special case.
    accelerator_count, accelerator_name, accelerator_manufacturer = 0, "", ""
    accelerators = _get(info, "InferenceAcceleratorInfo", "Accelerators")
    accelerator_list = accelerators if isinstance(accelerators, list) else []
    if len(accelerator_list) == 1 and isinstance(accelerator_list[0], Mapping):
        accelerator = accelerator_list[0]
        accelerator_count = _int(accelerator.get("Count"), "InferenceAcceleratorInfo.Accelerators[0].Count", 0)
        accelerator_name = lower_kebab_case(_str(accelerator.get("Name")))
        accelerator_manufacturer = lower_kebab_case(_str(accelerator.get("Manufacturer")))
    trn1 = trn1_accelerator(
        name, sum(_int(a.get("Count"), "Accelerators[].Count", 0) for a in accelerator_list if isinstance(a, Mapping))
    )
    if trn1 is not None:
        accelerator_count, accelerator_name, accelerator_manufacturer = trn1

    # Local NVMe: total instance storage unless NVMe is unsupported (GB as EC2 reports it).
    local_nvme = 0
    storage = info.get("InstanceStorageInfo")
    if isinstance(storage, Mapping) and _str(storage.get("NvmeSupport")) != "unsupported":
        local_nvme = _int(storage.get("TotalSizeInGB"), "InstanceStorageInfo.TotalSizeInGB", 0)

    # Network: the VPC CNI only uses the default network card's ENIs; bandwidth is the cards' baseline sum.
    raw_network = info.get("NetworkInfo")
    network: Mapping[str, Any] = raw_network if isinstance(raw_network, Mapping) else {}
    cards = [c for c in network.get("NetworkCards") or [] if isinstance(c, Mapping)]
    default_index = network.get("DefaultNetworkCardIndex", 0)
    default_card = next((c for c in cards if c.get("NetworkCardIndex", 0) == default_index), None)
    if default_card is not None and default_card.get("MaximumNetworkInterfaces") is not None:
        max_enis = _int(default_card.get("MaximumNetworkInterfaces"), "NetworkCards[].MaximumNetworkInterfaces")
    else:
        max_enis = _int(network.get("MaximumNetworkInterfaces"), "NetworkInfo.MaximumNetworkInterfaces", 0)
    ipv4_per_eni = _int(network.get("Ipv4AddressesPerInterface"), "NetworkInfo.Ipv4AddressesPerInterface", 0)
    baselines = [
        b for c in cards if (b := _gbps(c.get("BaselineBandwidthInGbps"), "NetworkCards[].BaselineBandwidthInGbps"))
        is not None
    ]
    bandwidth_mbps = round(sum(baselines) * 1000) if baselines else 0

    manufacturer, clock_mhz, ebs_mbps = _processor_and_ebs(info)
    network_cards, efa_interfaces = _cards_and_efa(network, cards)
    features = _get(info, "ProcessorInfo", "SupportedFeatures")
    if features is not None and not (isinstance(features, list) and all(isinstance(f, str) for f in features)):
        raise _Bad(f"ProcessorInfo.SupportedFeatures must be a list of strings, got {features!r}")

    usage_classes = {u for u in info.get("SupportedUsageClasses") or [] if isinstance(u, str)}
    capacity_types = [ct for ct in SUPPORTED_CAPACITY_TYPES if ct in usage_classes]
    offerings: list[Offering] = []
    for zone in sorted(set(zones)):
        for capacity_type in capacity_types:
            price = on_demand_price
            if capacity_type == wk.CAPACITY_SPOT and zone in spot_prices:
                price = spot_prices[zone]
            offerings.append(Offering(zone=zone, capacity_type=capacity_type, price=price))

    return InstanceType(
        name=name,
        vcpu=vcpu,
        memory_mib=memory_mib,
        architectures=architectures,
        gpu_count=gpu_count,
        gpu_name=gpu_name,
        gpu_manufacturer=gpu_manufacturer,
        gpu_memory_mib=gpu_memory,
        accelerator_count=accelerator_count,
        accelerator_name=accelerator_name,
        accelerator_manufacturer=accelerator_manufacturer,
        local_nvme_gib=local_nvme,
        bare_metal=info.get("BareMetal") is True,
        hypervisor=_str(info.get("Hypervisor")),
        network_bandwidth_mbps=bandwidth_mbps,
        max_enis=max_enis,
        ipv4_per_eni=ipv4_per_eni,
        encryption_in_transit=network.get("EncryptionInTransitSupported") is True,
        offerings=tuple(offerings),
        price_on_demand=on_demand_price,
        cpu_manufacturer=manufacturer,
        cpu_sustained_clock_mhz=clock_mhz,
        ebs_bandwidth_mbps=ebs_mbps,
        network_cards=network_cards,
        efa_interfaces=efa_interfaces,
        ena_unsupported=network.get("EnaSupport") == "unsupported",
        nested_virtualization=NESTED_VIRTUALIZATION in (features or ()),
    )


def _cards_and_efa(network: Mapping[str, Any], cards: list[Mapping[str, Any]]) -> tuple[tuple[int, ...], int]:
    """The interfaces of each network card in index order (v1.14.1's `networkInterfaceCompatibility` reads card i as
    the entry whose NetworkCardIndex is i), and `EfaInfo.MaximumEfaInterfaces` (0 without EFA). Cards whose
    indexes are not 0..n-1 are EC2 answering out of shape: refused."""
    by_index: dict[int, int] = {}
    for card in cards:
        index = _int(card.get("NetworkCardIndex"), "NetworkCards[].NetworkCardIndex", 0)
        most = _int(card.get("MaximumNetworkInterfaces"), "NetworkCards[].MaximumNetworkInterfaces", 0)
        if index in by_index:
            raise _Bad(f"NetworkCards lists card {index} twice")
        by_index[index] = most
    if sorted(by_index) != list(range(len(by_index))):
        raise _Bad(f"NetworkCards[].NetworkCardIndex must be 0..{len(by_index) - 1}, got {sorted(by_index)}")
    efa = network.get("EfaInfo")
    if efa is not None and not isinstance(efa, Mapping):
        raise _Bad(f"NetworkInfo.EfaInfo must be an object, got {efa!r}")
    efa_interfaces = _int(efa.get("MaximumEfaInterfaces"), "EfaInfo.MaximumEfaInterfaces", 0) if efa else 0
    return tuple(by_index[i] for i in range(len(by_index))), efa_interfaces


def _processor_and_ebs(info: Mapping[str, Any]) -> tuple[str, int, int]:
    """The CPU manufacturer (lower kebab case), sustained clock speed (MHz, rounded) and EBS bandwidth (Mbps, of a
    type EBS-optimized by default) as aws/karpenter-provider-aws v1.14.1 `computeRequirements` reads them
    (pkg/providers/instancetype/types.go); "" and 0 where EC2 does not say."""
    manufacturer = lower_kebab_case(_str(_get(info, "ProcessorInfo", "Manufacturer")))
    clock = _gbps(_get(info, "ProcessorInfo", "SustainedClockSpeedInGhz"), "ProcessorInfo.SustainedClockSpeedInGhz")
    ebs = 0
    if _get(info, "EbsInfo", "EbsOptimizedSupport") == "default":
        ebs = _int(
            _get(info, "EbsInfo", "EbsOptimizedInfo", "MaximumBandwidthInMbps"),
            "EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps",
            0,
        )
    return manufacturer, 0 if clock is None else math.floor(clock * 1000 + 0.5), ebs  # Go's math.Round


# --- the catalog --------------------------------------------------------------------------------------------


def build_catalog(
    source: EC2CatalogSource,
    on_demand_prices: Mapping[str, float],
    region: str,
    *,
    with_spot_prices: bool = False,
    source_name: str = "EC2",
    date: str = "",
) -> Catalog:
    """Describe every instance type and its zone offerings from ``source`` and price them.

    With ``with_spot_prices`` the spot offerings take the latest DescribeSpotPriceHistory price per zone
    (on-demand where there is none); without, spot is priced on-demand (what the embedded catalog stores).
    ``date`` is recorded as the catalog's (findings name it). An answer that describes no instance type, or
    offers none in any zone, is refused (CatalogError): written over a good catalog it failed every check.
    """
    infos = source.describe_instance_types()
    zones_by_type: dict[str, set[str]] = {}
    for offering in source.describe_instance_type_offerings(location_type=ZONE_LOCATION_TYPE):
        name, zone = _str(offering.get("InstanceType")), _str(offering.get("Location"))
        location_type = _str(offering.get("LocationType"), ZONE_LOCATION_TYPE)
        if name and zone and location_type == ZONE_LOCATION_TYPE:
            zones_by_type.setdefault(name, set()).add(zone)
    spot: dict[str, dict[str, float]] = {}
    if with_spot_prices:
        for (name, zone), price in latest_spot_prices(source.describe_spot_price_history()).items():
            spot.setdefault(name, {})[zone] = price

    types: dict[str, InstanceType] = {}
    for info in infos:
        try:
            it = instance_type_from_ec2(
                info,
                zones_by_type.get(_str(info.get("InstanceType")), set()),
                on_demand_prices.get(_str(info.get("InstanceType"))),
                spot.get(_str(info.get("InstanceType"))),
            )
        except ValueError as exc:
            raise CatalogError(f"{source_name} DescribeInstanceTypes", str(exc)) from None
        if it is not None and it.name not in types:
            types[it.name] = _with_embedded_facts(it)
    if not types:
        raise CatalogError(
            f"{source_name} DescribeInstanceTypes",
            f"described no instance type of {region} that Kubernetes can run: refusing to write an empty catalog",
        )
    if not any(it.offerings for it in types.values()):
        raise CatalogError(
            f"{source_name} DescribeInstanceTypeOfferings",
            f"offers none of the {len(types)} instance types in any zone of {region}: refusing to write a catalog "
            "nothing can launch from",
        )
    return Catalog(region=region, instance_types=tuple(types.values()), date=date)


def _with_embedded_facts(it: InstanceType) -> InstanceType:
    """`it` with the branch ENIs the embedded catalog knows for it (EC2 does not describe ENI trunking), when both
    agree on its ENIs."""
    try:
        known = embedded_types().types.get(it.name)
    except CatalogError:  # no embedded data: nothing to add
        return it
    if known is None or known.facts["max_enis"] != it.max_enis or not known.facts["branch_enis"]:
        return it
    return dataclasses.replace(it, branch_enis=known.facts["branch_enis"])


def resolve_prices(prices: Path | Mapping[str, float] | None, region: str) -> tuple[dict[str, float], str]:
    """On-demand prices and where they come from: a price table file (`Path`), prices already fetched (the Price
    List API's), or None: the table shipped for `region` if there is one, else none (no price data)."""
    if isinstance(prices, Path):
        return load_on_demand_prices(prices, region), str(prices)
    if prices is not None:
        return dict(prices), "the Price List API"
    try:
        return load_on_demand_prices(None, region), f"the table shipped for {region}"
    except CatalogError:
        return {}, "none"


def write_catalog(catalog: Catalog, out_path: Path) -> None:
    """Write ``catalog`` to ``out_path`` atomically (temp file in the same directory, then os.replace)."""
    out_path = Path(out_path)
    directory = out_path.parent
    if not directory.is_dir():
        raise CatalogError(out_path, f"directory {str(directory)!r} does not exist")
    data = catalog_to_json(catalog).encode("utf-8")
    tmp_name = ""
    try:
        with tempfile.NamedTemporaryFile(
            "wb", dir=directory, prefix=f".{out_path.name}.", suffix=".tmp", delete=False
        ) as tmp:
            tmp_name = tmp.name
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, out_path)
        tmp_name = ""
    except OSError as exc:
        raise CatalogError(out_path, f"cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp_name:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def refresh_catalog(
    region: str,
    source: EC2CatalogSource,
    prices: Path | Mapping[str, float] | None,
    out_path: Path,
    *,
    source_name: str = "EC2",
    with_spot_prices: bool = False,
    date: str = "",
) -> Catalog:
    """Rebuild ``region``'s catalog from ``source`` (the caller's EC2 adapter: this package never imports the
    cloud adapters, which sit above it) and write it to ``out_path``.

    ``prices`` are the on-demand prices (see :func:`resolve_prices`). Nothing is written when anything fails.
    Raises :class:`CatalogError` (files) or :class:`~karpenter_policy.cloud.CloudError` (the EC2 endpoint).
    """
    on_demand, _ = resolve_prices(prices, region)
    catalog = build_catalog(
        source, on_demand, region, with_spot_prices=with_spot_prices, source_name=source_name, date=date
    )
    write_catalog(catalog, out_path)
    return catalog


__all__ = [
    "EC2CatalogSource",
    "build_catalog",
    "instance_type_from_ec2",
    "latest_spot_prices",
    "load_on_demand_prices",
    "refresh_catalog",
    "resolve_prices",
    "write_catalog",
]
