"""Karpenter v0.31's fake instance types (`pkg/cloudprovider/fake`), for tests and benchmarks that replay its
scheduling tests and its scheduling benchmark on our scheduler.

:func:`fake_types` are `fake.NewCloudProvider().GetInstanceTypes`: default-instance-type (4 cpu, 4Gi, 5 pods),
small-instance-type (2 cpu, 2Gi), gpu-vendor-instance-type and gpu-vendor-b-instance-type (2 GPUs each: Go's
`fake.com/vendor-a` and `vendor-b` resources are `nvidia.com/gpu` and `amd.com/gpu` here), arm-instance-type (16 cpu,
128Gi, arm64), single-pod-instance-type (1 pod); offerings spot in test-zone-1/2 and on-demand in test-zone-1/2/3,
priced from their resources (0.1 per cpu, 0.1 per GB, 1 per GPU). :func:`benchmark_types` are
`fake.InstanceTypes(n)`: type i has i+1 cpu, 2(i+1) GiB and 10(i+1) pods. :data:`SHAPE` gives their capacity and
allocatable (capacity less the fake kube-reserved 100m cpu and 10Mi), to pass to `NodeClaimTemplate.build(shape=SHAPE)`.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.scheduling.instances import ShapeFunction
from karpenter_policy.scheduling.vectors import CPU_I, INDEX, MEMORY_I, PODS_I, RESOURCES, Vector

GI = 2**30
MI = 2**20
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
OFFERINGS = (
    ("test-zone-1", "spot"),
    ("test-zone-2", "spot"),
    ("test-zone-1", "on-demand"),
    ("test-zone-2", "on-demand"),
    ("test-zone-3", "on-demand"),
)
_POD_SLOTS: dict[str, int] = {}


def price(cpu: int, memory_gib: float, gpus: int = 0) -> float:
    return 0.1 * cpu + 0.1 * memory_gib * GI / 1e9 + gpus


def fake_type(
    name: str,
    cpu: int = 4,
    memory_gib: float = 4,
    pods: int = 5,
    arch: str = "amd64",
    gpus: int = 0,
    gpu_vendor: str = "nvidia",
    offerings: Sequence[tuple[str, str]] = OFFERINGS,
) -> InstanceType:
    """One fake type (its pod slots are remembered by name for :func:`shape`)."""
    cost = price(cpu, memory_gib, gpus)
    _POD_SLOTS[name] = pods
    return InstanceType(
        name,
        cpu,
        int(memory_gib * 1024),
        (arch,),
        gpu_count=gpus,
        gpu_manufacturer=gpu_vendor if gpus else "",
        offerings=tuple(Offering(zone, capacity_type, cost) for zone, capacity_type in offerings),
    )


def fake_types() -> list[InstanceType]:
    return [
        fake_type("default-instance-type"),
        fake_type("small-instance-type", cpu=2, memory_gib=2),
        fake_type("gpu-vendor-instance-type", gpus=2),
        fake_type("gpu-vendor-b-instance-type", gpus=2, gpu_vendor="amd"),
        fake_type("arm-instance-type", cpu=16, memory_gib=128, arch="arm64"),
        fake_type("single-pod-instance-type", pods=1),
    ]


def assorted_types() -> list[InstanceType]:
    """`fake.InstanceTypesAssorted()`, Linux types only (our node OS is decided per template): every cpu (1-64) x
    memory (1-128 GiB) x zone x capacity type x architecture, one offering each."""
    return [
        fake_type(
            f"{cpu}-cpu-{memory}-mem-{arch}-linux-{zone}-{capacity}",
            cpu=cpu,
            memory_gib=memory,
            arch=arch,
            offerings=((zone, capacity),),
        )
        for cpu in (1, 2, 4, 8, 16, 32, 64)
        for memory in (1, 2, 4, 8, 16, 32, 64, 128)
        for zone in ZONES
        for capacity in ("spot", "on-demand")
        for arch in ("amd64", "arm64")
    ]


def benchmark_types(count: int) -> list[InstanceType]:
    return [fake_type(f"fake-it-{i}", cpu=i + 1, memory_gib=2 * (i + 1), pods=10 * (i + 1)) for i in range(count)]


def _shape(it: InstanceType) -> tuple[Vector, Vector]:
    capacity = [0] * len(RESOURCES)
    capacity[CPU_I] = it.vcpu * 1000
    capacity[MEMORY_I] = it.memory_mib * MI
    capacity[PODS_I] = _POD_SLOTS.get(it.name, 5)
    if it.gpu_count:
        capacity[INDEX[f"{it.gpu_manufacturer}.com/gpu"]] = it.gpu_count
    allocatable = list(capacity)
    allocatable[CPU_I] -= 100
    allocatable[MEMORY_I] -= 10 * MI
    return tuple(capacity), tuple(allocatable)


#: The `shape` argument of `NodeClaimTemplate.build` for fake types.
SHAPE: tuple[str, ShapeFunction] = ("karpenter-fake", _shape)
