"""What a node of an instance type offers pods: capacity, overhead and allocatable, as Karpenter v0.31 computes them.

One copy of the arithmetic of Karpenter v0.31.1's AWS provider (``pkg/providers/instancetype/types.go``:
``computeCapacity``, ``kubeReservedResources``, ``systemReservedResources``, ``evictionThreshold``, ``pods``,
``ENILimitedPods``, ``ephemeralStorage``), for the solver, compile, the scheduler and the webhook alike. Pure:
standard library and ``model/`` only, no I/O.

A :class:`NodeConfiguration` is what a provisioner decides about its nodes: the kubelet configuration
(``spec.kubeletConfiguration``), the AMI family and block device mappings of its node template (and an
EC2NodeClass's ``instanceStorePolicy: RAID0``, whose nodes' ephemeral storage is the instance store, as v1.14.1's
``ephemeralStorage``, and its ``efa-only`` network interfaces on card 0, which take ENIs from the pods as v1.14.1's
``ENILimitedPods``), and Karpenter's global settings (:class:`GlobalSettings`). :func:`node_resources` gives,
for one instance type under it, the capacity, the three overheads and the allocatable (capacity minus
kube-reserved, system-reserved and the eviction threshold, per resource of the capacity, as Karpenter core's
``InstanceType.Allocatable``).
:func:`max_pods` is the one pods-per-node rule and :func:`node_labels` the labels a node gets.

Units are integers: cpu in millicores, memory and ephemeral-storage in bytes, the rest in counts. Quantities
from the configuration (kubeReserved, systemReserved, eviction thresholds, volume sizes) are rounded up to
those units, as the kubelet reads them (``MilliValue`` / ``Value``), so allocatable is never overstated.
Where Karpenter computes in float64 (the VM memory overhead, kube-reserved cpu, percentage and default
eviction thresholds) the same float64 operations are done here, in the same order (Python floats are IEEE 754
binary64 too), and the result read back like Go's ``resource.MustParse(fmt.Sprint(x))``, so every value equals
Karpenter's to the byte. Allocatable may be negative (overhead larger than the node): nothing fits there.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

from karpenter_policy.model import amifamily
from karpenter_policy.model import labels as wk
from karpenter_policy.model.amifamily import DEFAULT_AMI_FAMILY, AMIFamily, instance_type_os
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.nodeclassfit import (
    EFA_ONLY,
    NETWORK_INTERFACES,
    Interface,
    efas,
    interfaces_of,
    nested_virtualization_of,
)
from karpenter_policy.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, parse_quantity

#: The resources of a node's capacity, in the order results list them (the last one on Windows only).
NODE_RESOURCES: tuple[str, ...] = (
    CPU,
    MEMORY,
    EPHEMERAL_STORAGE,
    PODS,
    wk.POD_ENI,
    wk.NVIDIA_GPU,
    wk.AMD_GPU,
    wk.AWS_NEURON,
    wk.HABANA_GAUDI,
    wk.EFA,
    wk.PRIVATE_IPV4,
)

MIB = 2**20
GIB = 2**30
#: A decimal gigabyte: EC2's `TotalSizeInGB`, which Karpenter writes as `"<n>G"`.
GB = 10**9
#: An EC2NodeClass's field naming how the instance store is used, and its one value.
INSTANCE_STORE_POLICY, RAID0 = "instanceStorePolicy", "RAID0"
#: The kubelet's own default maxPods: the pods of a type when its ENI data is unknown (see :func:`max_pods`).
DEFAULT_MAX_PODS = 110
#: Graviton (arm64) types keep 64 MiB for the kernel's contiguous memory allocator (CMA).
ARM64_CMA_RESERVED = 64 * MIB
#: kube-reserved cpu: (from, to, share) of the node's millicores (Karpenter's, after Bottlerocket's).
KUBE_RESERVED_CPU_RANGES: tuple[tuple[int, int, float], ...] = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)
DEFAULT_KUBE_RESERVED_EPHEMERAL_STORAGE = GIB
DEFAULT_EVICTION_MEMORY = 100 * MIB
#: Default nodefs.available eviction threshold, percent of the ephemeral storage.
DEFAULT_EVICTION_NODEFS_PERCENT = 10
MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"
#: Karpenter's trn1 special case: DescribeInstanceTypes had no accelerator data for Trainium.
TRN1_NEURONS = {"trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16}

Units = dict[str, int]

_PERCENTAGE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


# --- configuration -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GlobalSettings:
    """Karpenter's ``karpenter-global-settings`` that change a node's shape (v0.31 defaults)."""

    #: ``aws.vmMemoryOverheadPercent``: the share of memory the hypervisor keeps.
    vm_memory_overhead_percent: float = 0.075
    #: ``aws.reservedENIs``: ENIs kept out of the VPC CNI's reach.
    reserved_enis: int = 0
    #: ``aws.enableENILimitedPodDensity``: without maxPods, pods follow the ENI limit (else 110).
    enable_eni_limited_pod_density: bool = True
    #: ``aws.enablePodENI``: nodes advertise ``vpc.amazonaws.com/pod-eni`` (security groups for pods).
    enable_pod_eni: bool = False


DEFAULT_SETTINGS = GlobalSettings()


@dataclass(frozen=True, slots=True)
class Threshold:
    """An eviction threshold: a percentage of the resource's capacity, or an absolute amount in units."""

    percent: float | None = None
    amount: int = 0

    def of(self, capacity: int) -> int:
        """The threshold for a capacity (Karpenter's ``computeEvictionSignal``, float64 as there)."""
        if self.percent is None:
            return self.amount
        return _go_float_quantity(math.ceil(float(capacity) / 100 * self.percent))


@dataclass(frozen=True, slots=True)
class KubeletConfiguration:
    """The parts of a provisioner's ``spec.kubeletConfiguration`` that shape a node (amounts in units)."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_hard: Mapping[str, Threshold] = field(default_factory=dict)
    eviction_soft: Mapping[str, Threshold] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None, where: str = "kubeletConfiguration") -> KubeletConfiguration:
        """Read a ``kubeletConfiguration`` mapping; other keys are ignored. ValueError names the bad field."""
        if spec is None:
            return cls()
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(spec).__name__}")
        return cls(
            max_pods=_count(spec.get("maxPods"), f"{where}.maxPods"),
            pods_per_core=_count(spec.get("podsPerCore"), f"{where}.podsPerCore"),
            kube_reserved=_reserved(spec.get("kubeReserved"), f"{where}.kubeReserved"),
            system_reserved=_reserved(spec.get("systemReserved"), f"{where}.systemReserved"),
            eviction_hard=_thresholds(spec.get("evictionHard"), f"{where}.evictionHard"),
            eviction_soft=_thresholds(spec.get("evictionSoft"), f"{where}.evictionSoft"),
        )


@dataclass(frozen=True, slots=True)
class BlockDeviceMapping:
    """One entry of a node template's ``blockDeviceMappings`` (volume size in bytes; None: not given)."""

    device_name: str | None = None
    volume_size: int | None = None
    root_volume: bool = False

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], where: str) -> BlockDeviceMapping:
        """A mapping read from a node template's `blockDeviceMappings` entry; ValueError naming the field (`where`) when
        a value has the wrong type."""
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(spec).__name__}")
        device = spec.get("deviceName")
        if device is not None and not isinstance(device, str):
            raise ValueError(f"{where}.deviceName: expected a string, got {type(device).__name__}")
        ebs = spec.get("ebs")
        if ebs is not None and not isinstance(ebs, Mapping):
            raise ValueError(f"{where}.ebs: expected a mapping, got {type(ebs).__name__}")
        size = None if ebs is None or ebs.get("volumeSize") is None else ebs["volumeSize"]
        root = spec.get("rootVolume", False)
        if not isinstance(root, bool):
            raise ValueError(f"{where}.rootVolume: expected true or false, got {root!r}")
        return cls(device, None if size is None else _units(EPHEMERAL_STORAGE, size, f"{where}.ebs.volumeSize"), root)


@dataclass(frozen=True, slots=True)
class NodeConfiguration:
    """What a provisioner (with its node template) decides about the shape of its nodes."""

    kubelet: KubeletConfiguration = KubeletConfiguration()
    ami_family: AMIFamily = DEFAULT_AMI_FAMILY
    block_device_mappings: tuple[BlockDeviceMapping, ...] = ()
    settings: GlobalSettings = DEFAULT_SETTINGS
    #: An EC2NodeClass's `instanceStorePolicy: RAID0`: the instance store, striped, is the kubelet's storage.
    instance_store_raid0: bool = False
    #: An EC2NodeClass's `efa-only` network interfaces on network card 0 (`efa_only_enis`): ENIs no pod IP comes from.
    efa_only_enis: int = 0
    #: A v1 NodePool's node (Karpenter v1.14.1): it offers `vpc.amazonaws.com/efa` (`model.nodeclassfit.efas`);
    #: Karpenter v0.31.1 offers none.
    offers_efa: bool = False
    #: The EC2NodeClass's `networkInterfaces` (None: it sets none), which decide the EFA offered and the types.
    interfaces: tuple[Interface, ...] | None = None
    #: The EC2NodeClass's `cpuOptions.nestedVirtualization` is `enabled`: only types whose processor supports it.
    nested_virtualization: bool = False

    @classmethod
    def of(
        cls,
        kubelet: Mapping[str, Any] | None = None,
        ami_family_name: str | None = None,
        block_device_mappings: Sequence[Mapping[str, Any]] | None = None,
        settings: GlobalSettings = DEFAULT_SETTINGS,
    ) -> NodeConfiguration:
        """From the raw spec fields: the provisioner's ``kubeletConfiguration``, the node template's (or inline
        provider's) ``amiFamily`` and ``blockDeviceMappings``. ValueError names the bad field."""
        mappings = tuple(
            BlockDeviceMapping.from_spec(mapping, f"blockDeviceMappings[{i}]")
            for i, mapping in enumerate(block_device_mappings or ())
        )
        return cls(KubeletConfiguration.from_spec(kubelet), amifamily.ami_family(ami_family_name), mappings, settings)

    @property
    def ephemeral_storage(self) -> int:
        """The size of the kubelet's root volume in bytes (Karpenter's ``ephemeralStorage``): the mapping marked
        rootVolume; else, for Custom, the last mapping; else the mapping of the family's ephemeral device; else
        that device's default size (20Gi; Windows 50Gi). A mapping without a volume size is passed over."""
        family = self.ami_family
        mappings = self.block_device_mappings
        if mappings:
            root = next((m for m in mappings if m.root_volume), None)
            if root is not None and root.volume_size is not None:
                return root.volume_size
            if family.is_custom:
                last = mappings[-1].volume_size
                return last if last is not None else family.default_ephemeral_size
            device = next((m for m in mappings if m.device_name == family.ephemeral_block_device), None)
            if device is not None and device.volume_size is not None:
                return device.volume_size
        return family.default_ephemeral_size

    def ephemeral_storage_of(self, instance_type: InstanceType) -> int:
        """A node's ephemeral storage in bytes (v1.14.1's `ephemeralStorage`, aws
        pkg/providers/instancetype/types.go): under `instanceStorePolicy: RAID0` the type's instance store
        (`TotalSizeInGB` as decimal gigabytes, `"%dG"`) when it has one, else the root volume's
        (:attr:`ephemeral_storage`)."""
        if self.instance_store_raid0 and instance_type.local_nvme_gib > 0:
            return instance_type.local_nvme_gib * GB
        return self.ephemeral_storage


DEFAULT_NODE = NodeConfiguration()


def node_configuration(kubelet: Mapping[str, Any] | None, node_template: Mapping[str, Any] | None) -> NodeConfiguration:
    """The node configuration of a provisioner's kubelet settings and its node template's spec (AMI family, block
    device mappings, an EC2NodeClass's `instanceStorePolicy`). ValueError names the bad field."""
    spec = node_template or {}
    mappings = spec.get("blockDeviceMappings")
    family = spec.get("amiFamily")
    node = NodeConfiguration.of(
        kubelet, str(family) if family else None, mappings if isinstance(mappings, list) else None
    )
    if spec.get(INSTANCE_STORE_POLICY) == RAID0:
        node = dataclasses.replace(node, instance_store_raid0=True)
    interfaces, nested = interfaces_of(spec), nested_virtualization_of(spec)
    if interfaces is not None or nested:
        node = dataclasses.replace(node, interfaces=interfaces, nested_virtualization=nested)
    return with_efa_only_enis(node, spec)


def efa_only_enis(node_template: Mapping[str, Any] | None) -> int:
    """The `efa-only` interfaces of an EC2NodeClass's `networkInterfaces` on network card 0: v1.14.1's `numEFAOnly`
    (aws pkg/providers/instancetype/types.go:495-498), the ENIs of the default card the VPC CNI cannot use."""
    interfaces = (node_template or {}).get(NETWORK_INTERFACES)
    if not isinstance(interfaces, list):
        return 0
    return sum(
        1 for nic in interfaces
        if isinstance(nic, Mapping) and nic.get("networkCardIndex") == 0 and nic.get("interfaceType") == EFA_ONLY
    )


def with_efa_only_enis(node: NodeConfiguration, node_template: Mapping[str, Any] | None) -> NodeConfiguration:
    """`node` with its class's `efa-only` interfaces on card 0 (:func:`efa_only_enis`); `node` when it has none."""
    count = efa_only_enis(node_template)
    return dataclasses.replace(node, efa_only_enis=count) if count else node


# --- the arithmetic ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeResources:
    """A node's capacity, the overheads Karpenter subtracts, and the allocatable that remains (all in units)."""

    capacity: Units
    kube_reserved: Units
    system_reserved: Units
    eviction_threshold: Units

    @property
    def overhead(self) -> Units:
        """kube-reserved + system-reserved + eviction threshold, per resource of the capacity."""
        return {
            name: sum(part.get(name, 0) for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold))
            for name in self.capacity
        }

    @property
    def allocatable(self) -> Units:
        """What pods can use: the capacity less the overhead, resource by resource."""
        overhead = self.overhead
        return {name: value - overhead[name] for name, value in self.capacity.items()}


def _eni_limited_pods(instance_type: InstanceType, node: NodeConfiguration) -> int:
    """The ENI-limited pods, or the kubelet's default 110 when the type has no ENI data (Karpenter always has
    it from EC2; a hand-made or partial catalog may not, and 0 would make such a type unusable). The class's
    `efa-only` interfaces on card 0 are taken from the usable ENIs like the reserved ones (v1.14.1's
    `ENILimitedPods`: `networkInterfaces - reservedENIs - numEFAOnly`)."""
    pods = instance_type.eni_limited_pods(node.settings.reserved_enis + node.efa_only_enis)
    return DEFAULT_MAX_PODS if pods is None else pods


def max_pods(instance_type: InstanceType, node: NodeConfiguration = DEFAULT_NODE) -> int:
    """The pods a node of the type runs (Karpenter's ``pods``, also its ``instance-pods`` label): the kubelet's
    ``maxPods`` if set; else the ENI-limited density when the setting and the AMI family allow it (110 when
    the type has no ENI data); else 110; then at most ``podsPerCore`` x vCPUs where the family honours it."""
    kubelet, family = node.kubelet, node.ami_family
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif node.settings.enable_eni_limited_pod_density and family.supports_eni_limited_pod_density:
        count = _eni_limited_pods(instance_type, node)
    else:
        count = DEFAULT_MAX_PODS
    if kubelet.pods_per_core and family.pods_per_core_enabled:
        count = min(kubelet.pods_per_core * instance_type.vcpu, count)
    return count


def memory_capacity(instance_type: InstanceType, settings: GlobalSettings = DEFAULT_SETTINGS) -> int:
    """Memory in bytes: the type's MiB, less 64 MiB of CMA on arm64, less the VM overhead rounded up to a MiB."""
    memory = instance_type.memory_mib * MIB
    if instance_type.architectures[:1] == (wk.ARCH_ARM64,):
        memory -= ARM64_CMA_RESERVED
    overhead_mib = math.ceil(float(memory) * settings.vm_memory_overhead_percent / 1024 / 1024)
    return memory - overhead_mib * MIB


def kube_reserved_cpu(cpu_millis: int) -> int:
    """Karpenter's default kube-reserved cpu (millicores) for a node of ``cpu_millis``: 6 % of the first core,
    1 % of the second, 0.5 % of the next two, 0.25 % of the rest (each range truncated to a millicore)."""
    reserved = 0
    for start, end, share in KUBE_RESERVED_CPU_RANGES:
        if cpu_millis >= start:
            reserved += int(float(min(cpu_millis, end) - start) * share)
    return reserved


def capacity(instance_type: InstanceType, node: NodeConfiguration = DEFAULT_NODE) -> Units:
    """What a node of the type has (Karpenter's ``computeCapacity``), every resource of
    :data:`NODE_RESOURCES` (zeros included; the private IPv4 addresses on Windows only, `vpc.amazonaws.com/efa` on a
    v1 NodePool's node only)."""
    gpus = instance_type.gpu_count
    manufacturer = instance_type.gpu_manufacturer.lower()
    settings = node.settings
    out: Units = {
        CPU: instance_type.vcpu * 1000,
        MEMORY: memory_capacity(instance_type, settings),
        EPHEMERAL_STORAGE: node.ephemeral_storage_of(instance_type),
        PODS: max_pods(instance_type, node),
        wk.POD_ENI: instance_type.branch_enis if settings.enable_pod_eni else 0,
        wk.NVIDIA_GPU: gpus if manufacturer == "nvidia" else 0,
        wk.AMD_GPU: gpus if manufacturer == "amd" else 0,
        # v0.31 counts every inference accelerator as a Neuron device, and hard-codes Trainium.
        wk.AWS_NEURON: TRN1_NEURONS.get(instance_type.name, instance_type.accelerator_count),
        wk.HABANA_GAUDI: gpus if manufacturer == "habana" else 0,
    }
    if node.offers_efa:  # a v1 NodePool's node (Karpenter v1.14.1's `efas`); v0.31.1 has no such resource
        out[wk.EFA] = efas(instance_type, node.interfaces)
    if node.ami_family.is_windows:
        out[wk.PRIVATE_IPV4] = max(instance_type.ipv4_per_eni - 1, 0)
    return out


def kube_reserved(instance_type: InstanceType, node: NodeConfiguration = DEFAULT_NODE) -> Units:
    """Karpenter's default kube-reserved (cpu by range, memory 11 MiB per pod + 255 MiB, ephemeral-storage
    1Gi), each overridden by the kubelet's ``kubeReserved``. The pods counted are the ENI-limited ones where
    the AMI family says so (AL2, Ubuntu, Custom), else the node's pods."""
    if node.ami_family.uses_eni_limited_memory_overhead:
        pods = _eni_limited_pods(instance_type, node)
    else:
        pods = max_pods(instance_type, node)
    reserved: Units = {
        CPU: kube_reserved_cpu(instance_type.vcpu * 1000),
        MEMORY: (11 * pods + 255) * MIB,
        EPHEMERAL_STORAGE: DEFAULT_KUBE_RESERVED_EPHEMERAL_STORAGE,
    }
    reserved.update(node.kubelet.kube_reserved)
    return reserved


def eviction_threshold(memory: int, storage: int, node: NodeConfiguration = DEFAULT_NODE) -> Units:
    """Karpenter's ``evictionThreshold`` for a node of ``memory`` and ``storage`` bytes: 100Mi of memory and
    10 % of the storage, each replaced by the largest ``memory.available`` / ``nodefs.available`` threshold of
    ``evictionHard`` and (where the AMI family honours it) ``evictionSoft``."""
    default_storage = _go_float_quantity(math.ceil(float(storage) / 100 * DEFAULT_EVICTION_NODEFS_PERCENT))
    threshold: Units = {MEMORY: DEFAULT_EVICTION_MEMORY, EPHEMERAL_STORAGE: default_storage}
    signals = [node.kubelet.eviction_hard]
    if node.ami_family.eviction_soft_enabled:
        signals.append(node.kubelet.eviction_soft)
    for name, signal, base in ((MEMORY, MEMORY_AVAILABLE, memory), (EPHEMERAL_STORAGE, NODEFS_AVAILABLE, storage)):
        values = [s[signal].of(base) for s in signals if signal in s]
        if values:
            threshold[name] = max(values)
    return threshold


def node_resources(instance_type: InstanceType, node: NodeConfiguration = DEFAULT_NODE) -> NodeResources:
    """Capacity, overheads and allocatable of a node of the type under the configuration."""
    capacity_units = capacity(instance_type, node)
    return NodeResources(
        capacity=capacity_units,
        kube_reserved=kube_reserved(instance_type, node),
        system_reserved=dict(node.kubelet.system_reserved),
        eviction_threshold=eviction_threshold(capacity_units[MEMORY], capacity_units[EPHEMERAL_STORAGE], node),
    )


def allocatable(instance_type: InstanceType, node: NodeConfiguration = DEFAULT_NODE) -> Units:
    """What pods can request on a node of the type: capacity - kube-reserved - system-reserved - eviction."""
    return node_resources(instance_type, node).allocatable


def node_labels(instance_type: InstanceType, node: NodeConfiguration = DEFAULT_NODE) -> dict[str, str]:
    """The labels Karpenter v0.31 gives a node of the type under the configuration: the type's labels with the
    node's pods as ``instance-pods``, the family's OS (none for an arm64 type under Windows: it matches no
    ``kubernetes.io/os``) and, on Windows, ``node.kubernetes.io/windows-build``."""
    oses = instance_type_os(instance_type, node.ami_family)
    labels = instance_type.labels(oses[0] if oses else node.ami_family.os)
    if not oses:
        del labels[wk.OS]
    labels[wk.INSTANCE_PODS] = str(max_pods(instance_type, node))
    if node.ami_family.windows_build is not None:
        labels[wk.WINDOWS_BUILD] = node.ami_family.windows_build
    return dict(sorted(labels.items()))


# --- units ---------------------------------------------------------------------------------------------------


def to_units(name: str, quantity: Decimal) -> int:
    """A quantity in the integer unit of its resource (millicores for cpu), rounded up."""
    scaled = quantity.scaleb(3) if name == CPU else quantity
    return int(scaled.to_integral_value(rounding=ROUND_CEILING))


def _go_float_quantity(value: float | int) -> int:
    """``resource.MustParse(fmt.Sprint(value))`` for a whole float64: Go prints the shortest decimal that reads
    back as the same float (as Python's repr does), so above 2**53 the quantity is that decimal's value."""
    return int(Decimal(repr(float(value))))


def _units(name: str, value: Any, where: str) -> int:
    """A configured amount (reserved, threshold, volume size) in units; negative ones are refused."""
    try:
        quantity = parse_quantity(value)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if quantity < 0:
        raise ValueError(f"{where}: {value!r} cannot be negative")
    return to_units(name, quantity)


def _count(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: expected a whole number >= 0, got {value!r}")
    return value


def _reserved(spec: Any, where: str) -> dict[str, int]:
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: expected a mapping of resource names to quantities, got {type(spec).__name__}")
    return {str(name): _units(str(name), value, f"{where}.{name}") for name, value in spec.items()}


def _thresholds(spec: Any, where: str) -> dict[str, Threshold]:
    """The memory.available and nodefs.available thresholds (the only signals that change allocatable)."""
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: expected a mapping of eviction signals to thresholds, got {type(spec).__name__}")
    out: dict[str, Threshold] = {}
    for signal, resource in ((MEMORY_AVAILABLE, MEMORY), (NODEFS_AVAILABLE, EPHEMERAL_STORAGE)):
        if signal in spec:
            out[signal] = _threshold(resource, spec[signal], f"{where}.{signal}")
    return out


def _threshold(resource: str, value: Any, where: str) -> Threshold:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{where}: expected a quantity or a percentage, got {value!r}")
    text = str(value)
    if not text.endswith("%"):
        return Threshold(amount=_units(resource, text, where))
    number = text.strip("%")  # Go's strings.Trim(v, "%")
    if not _PERCENTAGE.fullmatch(number) or not 0 <= float(number) <= 100:
        raise ValueError(f"{where}: {text!r} is not a percentage between 0% and 100%")
    percent = float(number)
    # The kubelet reads 100% as "no threshold" (KubeletConfiguration docs); Karpenter does too.
    return Threshold(percent=0.0 if percent == 100 else percent)
