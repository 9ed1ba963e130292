"""Resource quantities (`cpu: 500m`, `memory: 1.5Gi`) and resource lists, exact with `Decimal`.

Parsing is Kubernetes' own `kubernetes.utils.quantity.parse_quantity`. That module needs only the standard
library, so it is loaded on its own: importing the `kubernetes` package would pull in its whole API client
(≈0.5 s at start-up) and the client belongs to the cluster adapter alone.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from functools import cache
from pathlib import Path
from types import ModuleType

Quantity = Decimal
ResourceList = dict[str, Decimal]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
AWS_NEURON = "aws.amazon.com/neuron"


@cache
def _kubernetes_quantity_module() -> ModuleType:
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the kubernetes package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "quantity.py"
    module_spec = importlib.util.spec_from_file_location("karpenter_policy._kubernetes_quantity", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _parser() -> Callable[[object], Decimal]:
    parse: Callable[[object], Decimal] = _kubernetes_quantity_module().parse_quantity
    return parse


def parse_quantity(value: object) -> Decimal:
    """The exact value of a Kubernetes quantity (`"2k"` → 2000, `"500m"` → 0.5); ValueError if malformed."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, float):
        value = repr(value)  # Decimal(0.1) would carry binary noise
    if not isinstance(value, (int, str, Decimal)):
        raise ValueError(f"{value!r} is not a quantity")
    try:
        return _parser()(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a quantity (examples: 2, 500m, 1.5Gi, 2k)") from None


def is_quantity(value: object) -> bool:
    try:
        parse_quantity(value)
    except ValueError:
        return False
    return True


def resource_list(data: Mapping[str, object]) -> ResourceList:
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
    return not exceeding(requests, capacity)


def format_quantity(value: Decimal) -> str:
    """A short canonical spelling: integers plainly, fractions of a core in milli-units."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")


def names(lists: Iterable[Mapping[str, Decimal]]) -> list[str]:
    return sorted({name for resources in lists for name in resources})
