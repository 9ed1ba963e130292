"""EC2 instance types and their offerings, as Karpenter (v0.31, AWS provider) sees them.

Pure domain: standard library only, no I/O. An :class:`InstanceType` carries what DescribeInstanceTypes
tells about a type (vCPU, memory, architectures, GPUs, accelerators, network, local NVMe, ...) plus its
offerings (:class:`Offering`: zone x capacity type, with a price). :meth:`InstanceType.labels` gives the
well-known node labels Karpenter v0.31 puts on a node of that type; the name-derived values (family, size,
category, generation) follow Karpenter's own parsing of the name (``instanceTypeScheme`` in
``pkg/providers/instancetype/types.go``), so ``u-6tb1`` is category ``u`` and generation ``1``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from karpenter_policy.model import labels as wk

#: The processor feature (`ProcessorInfo.SupportedFeatures`) Karpenter v1.14.1 requires of a type for an
#: EC2NodeClass's `cpuOptions.nestedVirtualization: enabled`.
NESTED_VIRTUALIZATION = "nested-virtualization"

# EC2 architecture names -> Kubernetes (GOARCH) names, as Karpenter's AWSToKubeArchitectures. Anything else
# (i386, x86_64_mac, arm64_mac) has no Kubernetes node image and is dropped.
EC2_TO_KUBE_ARCHITECTURES: dict[str, str] = {"x86_64": "amd64", "arm64": "arm64"}

# Karpenter's instanceTypeScheme, applied to the family: leading letters (category), an optional "-<n>tb"
# (the u-Ntb1 high-memory families), then the generation digits.
_FAMILY_SCHEME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+)")


def instance_family(name: str) -> str:
    """The family: what comes before the first dot (``c5d`` for ``c5d.2xlarge``)."""
    return name.split(".", 1)[0]


def instance_size(name: str) -> str:
    """The size: what comes after the first dot (``2xlarge`` for ``c5d.2xlarge``); ``""`` without a dot."""
    parts = name.split(".", 1)
    return parts[1] if len(parts) == 2 else ""


def instance_category(name: str) -> str:
    """The category: leading letters of the family (``c``, ``inf``, ``trn``; ``u`` for ``u-6tb1``)."""
    match = _FAMILY_SCHEME.match(instance_family(name))
    if match is not None:
        return match.group(1)
    letters = re.match(r"^[a-z]*", instance_family(name))
    return letters.group(0) if letters is not None else ""


def instance_generation(name: str) -> int:
    """The generation: the digits after the category (5 for ``c5d``, 7 for ``m7i-flex``, 1 for ``u-6tb1``).

    Like Karpenter, the ``-<n>tb`` of the high-memory families is skipped. 0 when the name has no generation.
    """
    match = _FAMILY_SCHEME.match(instance_family(name))
    return int(match.group(3)) if match is not None else 0


def kube_architectures(ec2_architectures: Iterable[str]) -> tuple[str, ...]:
    """Map EC2 architecture names to Kubernetes ones (sorted, unique); unsupported ones are dropped."""
    return tuple(sorted({EC2_TO_KUBE_ARCHITECTURES[a] for a in ec2_architectures if a in EC2_TO_KUBE_ARCHITECTURES}))


def lower_kebab_case(value: str) -> str:
    """Karpenter's lowerKabobCase: lower case, spaces to dashes (``"RTX PRO 4500"`` -> ``"rtx-pro-4500"``)."""
    return value.replace(" ", "-").lower()


def price_key(price: float | None) -> float:
    """A price as a sort key: an unknown price (None: no price data) ranks after every known one."""
    return math.inf if price is None else price


def known_price(key: float) -> float | None:
    """The price a :func:`price_key` stands for (None: no price data)."""
    return None if math.isinf(key) else key


def price_text(price: float | None, region: str, places: int = 4) -> str:
    """`$0.0960/h`, or `no price data for eu-west-1` (never a guess)."""
    return f"no price data for {region or 'the region'}" if price is None else f"${price:.{places}f}/h"


@dataclass(frozen=True, slots=True)
class ChosenOffering:
    """One concrete launch choice: an instance type in a zone with a capacity type, and its price (None: the
    catalog has no price data for it)."""

    instance_type: str
    zone: str
    capacity_type: str
    price: float | None

    def to_json(self) -> dict[str, object]:
        """The choice as JSON (instance type, zone, capacity type, price)."""
        return {
            "instance_type": self.instance_type,
            "zone": self.zone,
            "capacity_type": self.capacity_type,
            "price": self.price,
        }


@dataclass(frozen=True, order=True)
class Offering:
    """One way to buy a type: a zone and a capacity type (``on-demand`` / ``spot``) at a price (USD/hour).

    ``price`` is None when the catalog has no price data for it (the embedded catalog prices us-east-1 only):
    the offering can be launched, what it costs is unknown. ``available`` is false when the offering cannot be
    launched: EC2 recently reported insufficient capacity, or (live, as Karpenter does) no price is known.

    A reserved offering (capacity type ``reserved``, Karpenter v1.14.1's offering of a capacity reservation) names
    its reservation: ``reservation_id``, ``reservation_type`` (``default`` / ``capacity-block``),
    ``reservation_interruptible`` and ``reservation_capacity``, the room the reservation reports now (v1.14.1's
    `ReservationCapacity`). Every other offering leaves them empty.
    """

    zone: str
    capacity_type: str
    price: float | None
    available: bool = True
    reservation_id: str = ""
    reservation_type: str = ""
    reservation_interruptible: bool = False
    reservation_capacity: int = 0


@dataclass(frozen=True)
class InstanceType:
    """An EC2 instance type with the facts Karpenter schedules on and labels nodes with.

    ``max_enis`` is the ENI limit of the default network card (what the VPC CNI uses) and ``ipv4_per_eni`` the
    IPv4 addresses per ENI; both 0 when unknown. What a node of the type offers pods (capacity, overhead,
    allocatable, pods) depends on its provisioner too: see :mod:`karpenter_policy.model.allocatable`.
    """

    name: str
    vcpu: int
    memory_mib: int
    architectures: tuple[str, ...]
    gpu_count: int = 0
    gpu_name: str = ""
    gpu_manufacturer: str = ""
    gpu_memory_mib: int = 0
    accelerator_count: int = 0
    accelerator_name: str = ""
    accelerator_manufacturer: str = ""
    local_nvme_gib: int = 0
    bare_metal: bool = False
    hypervisor: str = ""
    network_bandwidth_mbps: int = 0
    max_enis: int = 0
    ipv4_per_eni: int = 0
    encryption_in_transit: bool = False
    offerings: tuple[Offering, ...] = ()
    price_on_demand: float | None = None
    #: Branch network interfaces for pods with their own security groups (``vpc.amazonaws.com/pod-eni``), 0
    #: when the type does not support ENI trunking or the catalog does not say.
    branch_enis: int = 0
    #: A type EC2 no longer lists among its current types (p3, g3, ...): the embedded catalog leaves it out
    #: unless asked (``--allow-previous-generation``), for accounts that still launch it.
    previous_generation: bool = False
    #: The processor's maker as Karpenter v1.14.1 spells it (`intel`, `amd`, `aws`), "" when the catalog does not say.
    cpu_manufacturer: str = ""
    #: The processor's sustained clock speed in MHz (rounded, as v1.14.1), 0 when unknown.
    cpu_sustained_clock_mhz: int = 0
    #: The EBS-optimized maximum bandwidth in Mbps of a type EBS-optimized by default, 0 when not or unknown.
    ebs_bandwidth_mbps: int = 0
    #: The interfaces each network card takes (`NetworkInfo.NetworkCards[].MaximumNetworkInterfaces`, in card index
    #: order); () when the catalog does not say. What v1.14.1's `networkInterfaces` compatibility check reads.
    network_cards: tuple[int, ...] = ()
    #: The EFA interfaces the type supports (`NetworkInfo.EfaInfo.MaximumEfaInterfaces`), 0 without EFA: what
    #: Karpenter v1.14.1 offers as `vpc.amazonaws.com/efa` when the class sets no `networkInterfaces`.
    efa_interfaces: int = 0
    #: ENA is `unsupported` (`NetworkInfo.EnaSupport`): v1.14.1 launches no `networkInterfaces` on such a type.
    ena_unsupported: bool = False
    #: `nested-virtualization` is among `ProcessorInfo.SupportedFeatures` (False also when the catalog does not say).
    nested_virtualization: bool = False

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.offerings, key=lambda o: (o.zone, o.capacity_type, o.reservation_id)))
        if ordered != self.offerings:
            object.__setattr__(self, "offerings", ordered)

    @property
    def family(self) -> str:
        """The instance family: `m5` of `m5.large`."""
        return instance_family(self.name)

    @property
    def size(self) -> str:
        """The instance size: `large` of `m5.large`."""
        return instance_size(self.name)

    @property
    def category(self) -> str:
        """The instance category: `m` of `m5.large`."""
        return instance_category(self.name)

    @property
    def generation(self) -> int:
        """The instance generation: 5 of `m5.large`."""
        return instance_generation(self.name)

    def eni_limited_pods(self, reserved_enis: int = 0) -> int | None:
        """The VPC CNI's pod density (Karpenter's ``ENILimitedPods``): usable ENIs x (IPv4 addresses per ENI - 1)
        + 2, where the usable ENIs are those of the default network card less ``reserved_enis`` (the
        ``aws.reservedENIs`` setting); 0 when none is left. None when the type has no ENI data.

        This is a fact about the type, not a node's pod limit: that is ``model.allocatable.max_pods`` (maxPods,
        podsPerCore, the AMI family, and a fallback when the ENI data is missing).
        """
        if self.max_enis <= 0 or self.ipv4_per_eni <= 0:
            return None
        usable = max(self.max_enis - reserved_enis, 0)
        return usable * (self.ipv4_per_eni - 1) + 2 if usable else 0

    @property
    def max_pods(self) -> int:
        """The ENI-limited pod density with no reserved ENIs, 0 without ENI data (the ``instance-pods`` value of
        :meth:`labels`). Kept for compatibility: a node's pods come from ``model.allocatable.max_pods``."""
        return self.eni_limited_pods() or 0

    def zones(self, capacity_type: str | None = None) -> tuple[str, ...]:
        """Zones with an available offering (of ``capacity_type`` if given), sorted."""
        return tuple(
            sorted(
                {
                    o.zone
                    for o in self.offerings
                    if o.available and (capacity_type is None or o.capacity_type == capacity_type)
                }
            )
        )

    def capacity_types(self) -> tuple[str, ...]:
        """Capacity types with an available offering, sorted."""
        return tuple(sorted({o.capacity_type for o in self.offerings if o.available}))

    def cheapest_offering(
        self, capacity_types: Iterable[str] | None = None, zones: Iterable[str] | None = None
    ) -> Offering | None:
        """The cheapest available offering (ties: zone, then capacity type; unpriced ones last), optionally
        restricted."""
        wanted_capacity = None if capacity_types is None else set(capacity_types)
        wanted_zones = None if zones is None else set(zones)
        candidates = [
            o
            for o in self.offerings
            if o.available
            and (wanted_capacity is None or o.capacity_type in wanted_capacity)
            and (wanted_zones is None or o.zone in wanted_zones)
        ]
        if not candidates:
            return None
        return min(candidates, key=lambda o: (price_key(o.price), o.zone, o.capacity_type))

    @cached_property
    def linux_labels(self) -> dict[str, str]:
        """`labels()` of a Linux node, computed once per type (compile and the checks ask it of every type)."""
        return self.labels()

    def labels(self, os: str = "linux") -> dict[str, str]:
        """The well-known labels Karpenter v0.31 (AWS) sets on a node of this type; `os` is decided by the AMI
        family of the node template (Windows families run `windows`).

        Zone, capacity type and region depend on the offering, not the type, and are not included.
        """
        labels: dict[str, str] = {
            wk.INSTANCE_TYPE: self.name,
            wk.OS: os,
            wk.INSTANCE_CPU: str(self.vcpu),
            wk.INSTANCE_MEMORY: str(self.memory_mib),
            wk.INSTANCE_PODS: str(self.max_pods),
            wk.INSTANCE_HYPERVISOR: self.hypervisor,
            wk.INSTANCE_ENCRYPTION_IN_TRANSIT: "true" if self.encryption_in_transit else "false",
        }
        if len(self.architectures) == 1:
            labels[wk.ARCH] = self.architectures[0]
        family_match = _FAMILY_SCHEME.match(self.family)
        if family_match is not None:
            labels[wk.INSTANCE_CATEGORY] = family_match.group(1)
            labels[wk.INSTANCE_GENERATION] = family_match.group(3)
        if "." in self.name:
            labels[wk.INSTANCE_FAMILY] = self.family
            labels[wk.INSTANCE_SIZE] = self.size
        if self.local_nvme_gib > 0:
            labels[wk.INSTANCE_LOCAL_NVME] = str(self.local_nvme_gib)
        if self.network_bandwidth_mbps > 0:
            labels[wk.INSTANCE_NETWORK_BANDWIDTH] = str(self.network_bandwidth_mbps)
        if self.gpu_count > 0:
            labels[wk.INSTANCE_GPU_NAME] = self.gpu_name
            labels[wk.INSTANCE_GPU_MANUFACTURER] = self.gpu_manufacturer
            labels[wk.INSTANCE_GPU_COUNT] = str(self.gpu_count)
            labels[wk.INSTANCE_GPU_MEMORY] = str(self.gpu_memory_mib)
        if self.accelerator_count > 0:
            labels[wk.INSTANCE_ACCELERATOR_NAME] = self.accelerator_name
            labels[wk.INSTANCE_ACCELERATOR_MANUFACTURER] = self.accelerator_manufacturer
            labels[wk.INSTANCE_ACCELERATOR_COUNT] = str(self.accelerator_count)
        return dict(sorted(labels.items()))

    @cached_property
    def v1_labels(self) -> dict[str, str]:
        """The labels of `model.labels.V1_INSTANCE_LABELS` that Karpenter v1.14.1 (AWS) sets from this type
        (pkg/providers/instancetype/types.go `computeRequirements`), but the tenancy, which every type offers both
        of (`model.labels.TENANCIES`): the CPU manufacturer, sustained clock speed and EBS bandwidth when known,
        and whether the family is a flex one (`-flex` in it, as v1.14.1 decides). Not in :meth:`labels`: v0.31
        knew none of them."""
        labels = {wk.INSTANCE_CAPABILITY_FLEX: "true" if "-flex" in self.family else "false"}
        if self.cpu_manufacturer:
            labels[wk.INSTANCE_CPU_MANUFACTURER] = self.cpu_manufacturer
        if self.cpu_sustained_clock_mhz > 0:
            labels[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = str(self.cpu_sustained_clock_mhz)
        if self.ebs_bandwidth_mbps > 0:
            labels[wk.INSTANCE_EBS_BANDWIDTH] = str(self.ebs_bandwidth_mbps)
        return dict(sorted(labels.items()))


def cheapest(
    instance_types: Iterable[InstanceType],
    capacity_types: Iterable[str] | None = None,
    zones: Iterable[str] | None = None,
) -> list[tuple[InstanceType, Offering]]:
    """Types that have a matching available offering, cheapest first (ties by name; unpriced ones last), as
    Karpenter orders launch candidates."""
    capacity = None if capacity_types is None else tuple(capacity_types)
    wanted_zones = None if zones is None else tuple(zones)
    ranked: list[tuple[InstanceType, Offering]] = []
    for it in instance_types:
        offering = it.cheapest_offering(capacity, wanted_zones)
        if offering is not None:
            ranked.append((it, offering))
    ranked.sort(key=lambda pair: (price_key(pair[1].price), pair[0].name))
    return ranked
