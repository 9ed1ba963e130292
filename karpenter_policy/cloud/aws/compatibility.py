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

from karpenter_policy.model.allocatable import EFA_ONLY
from karpenter_policy.model.instancetypes import NESTED_VIRTUALIZATION

#: The fields of a DescribeInstanceTypes entry the checks read (the rest need not be kept).
READ: Final = ("NetworkInfo", "ProcessorInfo", "PlacementGroupInfo")


def interfaces_fit(info: Mapping[str, Any], interfaces: Sequence[Mapping[str, Any]]) -> bool:
    """v1.14.1's `networkInterfaceCheck.compatibleCheck` (see the module docstring)."""
    network = info.get("NetworkInfo")
    cards = network.get("NetworkCards") if isinstance(network, Mapping) else None
    if not isinstance(network, Mapping) or not isinstance(cards, list) or not cards:
        return False
    if network.get("EnaSupport") == "unsupported":
        return False
    for interface in interfaces:
        card_index = int(interface.get("networkCardIndex") or 0)
        if len(cards) <= card_index:
            return False
        card = next((c for c in cards if isinstance(c, Mapping) and c.get("NetworkCardIndex") == card_index), None)
        if card is None or int(card.get("MaximumNetworkInterfaces") or 0) <= int(interface.get("deviceIndex") or 0):
            return False
    efa_only = sum(1 for i in interfaces if i.get("interfaceType") == EFA_ONLY)
    if efa_only:
        efa = network.get("EfaInfo")
        most = efa.get("MaximumEfaInterfaces") if isinstance(efa, Mapping) else None
        if not isinstance(most, int) or efa_only > most:
            return False
    return True


def nested_virtualization_fits(info: Mapping[str, Any], cpu_options: Any) -> bool:
    """v1.14.1's `nestedVirtualizationCheck.compatibleCheck`: only `enabled` asks anything of the type."""
    if not isinstance(cpu_options, Mapping) or cpu_options.get("nestedVirtualization") != "enabled":
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


__all__ = ["EFA_ONLY", "NESTED_VIRTUALIZATION", "READ", "compatible", "interfaces_fit", "nested_virtualization_fits",
           "strategy_fits"]
