"""Whether an instance type can launch with an EC2NodeClass's `networkInterfaces`, `cpuOptions` and placement group,
as Karpenter v1.14.1 decides it from DescribeInstanceTypes (aws pkg/providers/instancetype/compatibility/
compatibility.go `IsCompatibleWithNodeClass`: `networkInterfaceCompatibility`, `nestedVirtualizationCompatibility`,
`placementGroupCompatibility`). Pure: an answer's `InstanceTypes` entry in, a verdict out. The family and connection
tracking checks of the same function are not here.

- **networkInterfaces** (any list, an empty one too: Go's nil check): the type has network cards and ENA is not
  `unsupported`; each interface's card index is below the number of cards, and the card of that index takes more
  interfaces than its device index; the `efa-only` interfaces are no more than `EfaInfo.MaximumEfaInterfaces` (none
  without EFA). v1.14.1's secondary-IP check has nothing to read: the class's interfaces carry no IP counts.
- **cpuOptions.nestedVirtualization `enabled`**: `nested-virtualization` among `ProcessorInfo.SupportedFeatures`.
- **a placement group**: its strategy among `PlacementGroupInfo.SupportedStrategies`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.model import nodeclassfit
from karpenter_policy.model.instancetypes import NESTED_VIRTUALIZATION
from karpenter_policy.model.nodeclassfit import NETWORK_INTERFACES

#: The fields of a DescribeInstanceTypes entry the checks read (the rest need not be kept).
READ: Final = ("NetworkInfo", "ProcessorInfo", "PlacementGroupInfo")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def interfaces_fit(info: Mapping[str, Any], interfaces: Sequence[Mapping[str, Any]]) -> bool:
    """v1.14.1's `networkInterfaceCheck.compatibleCheck` (see the module docstring): EC2's facts read here, the
    verdict `model.nodeclassfit.interfaces_fit`'s (what `check` and `plan` ask of the catalog's facts)."""
    network = info.get("NetworkInfo")
    cards = network.get("NetworkCards") if isinstance(network, Mapping) else None
    if not isinstance(network, Mapping) or not isinstance(cards, list) or not cards:
        return False
    by_index = {
        _count(c.get("NetworkCardIndex")): _count(c.get("MaximumNetworkInterfaces"))
        for c in cards if isinstance(c, Mapping)
    }  # fmt: skip
    efa = network.get("EfaInfo")
    most = _count(efa.get("MaximumEfaInterfaces")) if isinstance(efa, Mapping) else 0
    wanted = nodeclassfit.interfaces_of({NETWORK_INTERFACES: list(interfaces)}) or ()
    return nodeclassfit.interfaces_fit(
        tuple(by_index.get(i, 0) for i in range(len(cards))), most, network.get("EnaSupport") == "unsupported", wanted
    )


def nested_virtualization_fits(info: Mapping[str, Any], cpu_options: Any) -> bool:
    """v1.14.1's `nestedVirtualizationCheck.compatibleCheck`: only `enabled` asks anything of the type."""
    if not nodeclassfit.nested_virtualization_of({nodeclassfit.CPU_OPTIONS: cpu_options}):
        return True
    processor = info.get("ProcessorInfo")
    features = processor.get("SupportedFeatures") if isinstance(processor, Mapping) else None
    return isinstance(features, list) and NESTED_VIRTUALIZATION in features


def strategy_fits(info: Mapping[str, Any], strategy: str | None) -> bool:
    """v1.14.1's `placementGroupCheck.compatibleCheck`: no group (None) asks nothing."""
    if strategy is None:
        return True
    placement = info.get("PlacementGroupInfo")
    strategies = placement.get("SupportedStrategies") if isinstance(placement, Mapping) else None
    return isinstance(strategies, list) and strategy in strategies


def compatible(
    info: Mapping[str, Any], interfaces: Sequence[Mapping[str, Any]] | None, cpu_options: Any, strategy: str | None
) -> bool:
    """Whether the type `info` describes passes the three checks (`interfaces` None: the class sets none)."""
    return (
        (interfaces is None or interfaces_fit(info, interfaces))
        and nested_virtualization_fits(info, cpu_options)
        and strategy_fits(info, strategy)
    )


__all__ = ["READ", "compatible", "interfaces_fit", "nested_virtualization_fits", "strategy_fits"]
