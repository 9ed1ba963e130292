"""Resource lists as integer vectors: what the scheduler adds and compares millions of times.

A vector holds, in the order of :data:`RESOURCES`, cpu in millicores and every other resource in its unit (bytes,
counts), each rounded up, as Kubernetes' `Quantity.MilliValue()` / `Value()` do. A quantity beyond
:data:`CAP` (more than any node holds) is held at CAP, so arithmetic on hostile input stays cheap. Resources
outside RESOURCES (other extended resources) travel next to the vector as a name → amount mapping: no instance
type offers them, only an existing node whose allocatable lists them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal

from karpenter_policy.model import labels as wk
from karpenter_policy.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

#: The resources instance types offer, in vector order.
RESOURCES: tuple[str, ...] = (
    CPU,
    MEMORY,
    PODS,
    EPHEMERAL_STORAGE,
    wk.NVIDIA_GPU,
    wk.AMD_GPU,
    wk.AWS_NEURON,
    wk.HABANA_GAUDI,
    wk.POD_ENI,
    wk.EFA,
)
INDEX: dict[str, int] = {name: i for i, name in enumerate(RESOURCES)}
CPU_I, MEMORY_I, PODS_I, STORAGE_I = (INDEX[CPU], INDEX[MEMORY], INDEX[PODS], INDEX[EPHEMERAL_STORAGE])
#: `vpc.amazonaws.com/efa`: a v1 NodePool's nodes offer it (Karpenter v1.14.1), a v0.31 Provisioner's none.
EFA_I = INDEX[wk.EFA]
#: What a Kubernetes quantity holds (2^63-1): a request this large fits nowhere; sums stay exact Python ints.
CAP = (1 << 63) - 1
_DECIMAL_CAP = Decimal(CAP)

Vector = tuple[int, ...]
ZERO: Vector = (0,) * len(RESOURCES)
ONE_POD: Vector = tuple(1 if name == PODS else 0 for name in RESOURCES)


def amount(name: str, value: Decimal) -> int:
    """One quantity as an integer amount: millicores for cpu, else the value, rounded up; negative → 0."""
    scaled = value * 1000 if name == CPU else value
    if scaled.is_nan() or scaled <= 0:
        return 0
    if scaled >= _DECIMAL_CAP:  # compared before any conversion: never expands a huge exponent
        return CAP
    return int(scaled.to_integral_value(rounding=ROUND_CEILING))


def to_vector(resources: Mapping[str, Decimal]) -> tuple[Vector, dict[str, int]]:
    """A resource list as (vector, the other resources as amounts)."""
    vector = [0] * len(RESOURCES)
    extras: dict[str, int] = {}
    for name, value in resources.items():
        index = INDEX.get(name)
        if index is None:
            if (count := amount(name, value)) > 0:
                extras[name] = count
        else:
            vector[index] = amount(name, value)
    return tuple(vector), extras


def add(a: Vector, b: Vector) -> Vector:
    """The element-wise sum (amounts are at most CAP each: sums of any realistic count stay exact and small)."""
    return tuple(map(operator.add, a, b))


def subtract(a: Vector, b: Vector) -> Vector:
    """The element-wise difference (of two vectors: of equal length)."""
    return tuple(map(operator.sub, a, b))


def fits(requests: Vector, available: Vector) -> bool:
    return all(r <= a for r, a in zip(requests, available, strict=True))


def maximum(a: Vector, b: Vector) -> Vector:
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def to_decimal(name: str, value: int) -> Decimal:
    return Decimal(value) / 1000 if name == CPU else Decimal(value)


def as_resources(vector: Vector, keep_zero: bool = False) -> dict[str, Decimal]:
    """A vector back as a resource list (zero entries left out unless `keep_zero`)."""
    return {name: to_decimal(name, v) for name, v in zip(RESOURCES, vector, strict=True) if v or keep_zero}


def quotient(numerator: int, denominator: int) -> float:
    """numerator / denominator as a float; ±inf where the quotient is beyond a float (amounts near the bounds of
    a Kubernetes quantity, e.g. a DaemonSet asking for exabytes)."""
    try:
        return numerator / denominator
    except OverflowError:
        return math.inf if (numerator > 0) == (denominator > 0) else -math.inf


def utilisation(used: Vector, total: Vector, index: int) -> float:
    """`used / total` on one resource (0 when the node has none of it)."""
    return quotient(used[index], total[index]) if total[index] > 0 else 0.0


def scale(vector: Vector, count: int) -> Vector:
    return tuple(min(v * count, CAP) for v in vector)

