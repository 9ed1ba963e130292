"""Node shapes: capacity and allocatable of an instance type under a node template's kubelet settings, as vectors.

The arithmetic (VM overhead, kube-reserved, system-reserved, eviction thresholds, max pods, ephemeral storage) is
`model.allocatable`'s, the one copy every part of the tool uses; this module only turns its resource lists into
the scheduler's vectors and keys the configurations so that each is computed once per instance table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.resources import parse_quantity
from karpenter_policy.scheduling.instances import ShapeFunction
from karpenter_policy.scheduling.vectors import CPU_I, INDEX, MEMORY_I, PODS_I, RESOURCES, STORAGE_I, Vector, amount

VM_MEMORY_OVERHEAD_PERCENT = Decimal("0.075")
DEFAULT_EVICTION_MEMORY = 100 * 2**20
DEFAULT_MAX_PODS = 110
DEFAULT_ROOT_VOLUME = 20 * 2**30
_MIB = 2**20
_CPU_RESERVED_RANGES = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))


def configuration_key(
    kubelet: Mapping[str, Any] | None, ami_family: str | None = None, root_volume: int | None = None
) -> str:
    """A stable key for one node configuration (what a shape depends on)."""
    return json.dumps([kubelet or {}, ami_family or "", root_volume], sort_keys=True, default=str)


def shape_function(
    kubelet: Mapping[str, Any] | None, ami_family: str | None = None, root_volume: int | None = None
) -> ShapeFunction:
    """Capacity and allocatable vectors of a type under this configuration."""
    settings = dict(kubelet or {})

    def shape(it: InstanceType) -> tuple[Vector, Vector]:
        capacity = _capacity(it, settings, root_volume)
        return capacity, _allocatable(it, capacity, settings)

    return shape


def _quantity(value: object) -> Decimal | None:
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _eni_limited_pods(it: InstanceType) -> int:
    return it.max_pods if it.max_pods > 0 else DEFAULT_MAX_PODS


def _capacity(it: InstanceType, kubelet: Mapping[str, Any], root_volume: int | None) -> Vector:
    memory = it.memory_mib - math.ceil(it.memory_mib * VM_MEMORY_OVERHEAD_PERCENT)
    max_pods = kubelet.get("maxPods")
    pods = max_pods if isinstance(max_pods, int) and not isinstance(max_pods, bool) else _eni_limited_pods(it)
    per_core = kubelet.get("podsPerCore")
    if isinstance(per_core, int) and not isinstance(per_core, bool) and per_core > 0:
        pods = min(pods, per_core * it.vcpu)
    gpu = it.gpu_manufacturer.lower()
    out = [0] * len(RESOURCES)
    out[CPU_I] = it.vcpu * 1000
    out[MEMORY_I] = memory * _MIB
    out[PODS_I] = pods
    out[STORAGE_I] = root_volume if root_volume is not None else DEFAULT_ROOT_VOLUME
    out[INDEX["nvidia.com/gpu"]] = it.gpu_count if gpu == "nvidia" else 0
    out[INDEX["amd.com/gpu"]] = it.gpu_count if gpu == "amd" else 0
    out[INDEX["aws.amazon.com/neuron"]] = it.accelerator_count if it.accelerator_manufacturer.lower() == "aws" else 0
    out[INDEX["habana.ai/gaudi"]] = it.gpu_count if gpu == "habana" else 0
    return tuple(out)


def _kube_reserved_cpu_millis(vcpu: int) -> int:
    cpu = vcpu * 1000
    reserved = 0
    for start, end, share in _CPU_RESERVED_RANGES:
        if cpu >= start:
            reserved += int((min(cpu, end) - start) * share)
    return reserved


def _signal(threshold: object, capacity: int) -> int | None:
    if isinstance(threshold, str) and threshold.endswith("%"):
        share = _quantity(threshold[:-1])
        return None if share is None else amount("memory", Decimal(capacity) * share / 100)
    quantity = _quantity(threshold)
    return None if quantity is None else amount("memory", quantity)


def _allocatable(it: InstanceType, capacity: Vector, kubelet: Mapping[str, Any]) -> Vector:
    reserved = {"cpu": _kube_reserved_cpu_millis(it.vcpu), "memory": (11 * _eni_limited_pods(it) + 255) * _MIB}
    for source, override in (("kubeReserved", True), ("systemReserved", False)):
        configured = kubelet.get(source)
        if not isinstance(configured, Mapping):
            continue
        for name in ("cpu", "memory"):
            quantity = _quantity(configured.get(name)) if name in configured else None
            if quantity is None:
                continue
            value = amount(name, quantity)
            reserved[name] = value if override else reserved[name] + value
    eviction = DEFAULT_EVICTION_MEMORY
    signals = [
        _signal(s.get("memory.available"), capacity[MEMORY_I])
        for s in (kubelet.get("evictionHard"), kubelet.get("evictionSoft"))
        if isinstance(s, Mapping) and "memory.available" in s
    ]
    found = [s for s in signals if s is not None]
    if found:
        eviction = max(found)
    out = list(capacity)
    out[CPU_I] = capacity[CPU_I] - reserved["cpu"]
    out[MEMORY_I] = capacity[MEMORY_I] - reserved["memory"] - eviction
    out[STORAGE_I] = capacity[STORAGE_I] - 2**30 - capacity[STORAGE_I] // 10
    return tuple(out)
