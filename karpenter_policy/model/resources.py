"""Resource quantities (`cpu: 500m`, `memory: 1.5Gi`) and resource lists, exact with `Decimal`.

Parsing is :mod:`karpenter_policy.model.quantity` (Kubernetes' grammar and bounds): every value here is within
±(2^63-1), so arithmetic on resource lists stays cheap whatever a file says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from karpenter_policy.model.quantity import MAX_QUANTITY, Quantity, QuantityError, read_quantity

ResourceList = dict[str, Decimal]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
#: Not a resource of a node but a count of nodes: a Karpenter v1 NodePool's `spec.limits.nodes` (`resources.Node` in
#: core pkg/utils/resources/resources.go at v1.14.1; every node counts 1 against it: `StateNode.Capacity`).
NODES = "nodes"


def parse_quantity(value: object) -> Decimal:
    """The value of a Kubernetes quantity (`"2k"` → 2000, `"500m"` → 0.5), capped at ±(2^63-1) as
    :func:`read_quantity` caps it; QuantityError (a ValueError) if Kubernetes cannot read it."""
    return read_quantity(value).value


def parse_resource_list(data: Mapping[str, object]) -> ResourceList:
    """Parse a `{name: quantity}` map."""
    return {name: parse_quantity(value) for name, value in data.items()}


def add(*lists: Mapping[str, Decimal]) -> ResourceList:
    """The element-wise sum."""
    total: ResourceList = {}
    for resources in lists:
        for name, value in resources.items():
            total[name] = total.get(name, Decimal(0)) + value
    return total


def maximum(*lists: Mapping[str, Decimal]) -> ResourceList:
    """The element-wise maximum (how init containers combine with the sum of app containers)."""
    result: ResourceList = {}
    for resources in lists:
        for name, value in resources.items():
            result[name] = max(result.get(name, value), value)
    return result


def exceeding(requests: Mapping[str, Decimal], capacity: Mapping[str, Decimal]) -> list[str]:
    """The resource names whose request exceeds the capacity (a missing capacity counts as zero)."""
    return sorted(name for name, value in requests.items() if value > capacity.get(name, Decimal(0)))


def fits(requests: Mapping[str, Decimal], capacity: Mapping[str, Decimal]) -> bool:
    """Whether every request is within the capacity of its resource."""
    return not exceeding(requests, capacity)


def format_quantity(value: Decimal) -> str:
    """A short canonical spelling: integers plainly, fractions of a core in milli-units."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")


def abbreviated(text: str, limit: int = 40) -> str:
    """`text` as a message shows a value: whole up to `limit` characters, else its start and `...` (a 4,000-digit
    quantity is not echoed whole)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def out_of_range_message(field: str, raw: object) -> str:
    """What a `quantity-out-of-range` finding says about `field: raw`."""
    shown = abbreviated(repr(raw))
    return (
        f"{field}: {shown} is beyond the largest value a Kubernetes quantity holds as an integer "
        f"(±{MAX_QUANTITY}, about 8Ei); it is read as that bound"
    )


def names(lists: Iterable[Mapping[str, Decimal]]) -> list[str]:
    """The resource names of the lists, sorted."""
    return sorted({name for resources in lists for name in resources})


__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MAX_QUANTITY",
    "MEMORY",
    "PODS",
    "Quantity",
    "QuantityError",
    "ResourceList",
    "add",
    "exceeding",
    "fits",
    "format_quantity",
    "maximum",
    "names",
    "out_of_range_message",
    "parse_quantity",
    "read_quantity",
    "parse_resource_list",
]
