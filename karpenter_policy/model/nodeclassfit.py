"""Whether an instance type can launch with an EC2NodeClass's `networkInterfaces` and `cpuOptions`, from the type's
network facts (Karpenter v1.14.1 aws pkg/providers/instancetype/compatibility/compatibility.go
`IsCompatibleWithNodeClass`: `networkInterfaceCompatibility`, `nestedVirtualizationCompatibility`), and the
`vpc.amazonaws.com/efa` a node of the type offers (pkg/providers/instancetype/types.go `efas`). Pure: the catalog's
facts in (:class:`~karpenter_policy.model.instancetypes.InstanceType`), a verdict out. The AWS adapter reads the same
facts from DescribeInstanceTypes and asks these functions, so the controller, `check` and `plan` decide alike.

- **networkInterfaces** (a list, even empty: Go's nil check): the type has network cards and ENA is not
  `unsupported`; each interface's card index is below the number of cards and its device index below that card's
  interfaces; the `efa-only` interfaces are no more than the type's EFA interfaces (none without EFA).
- **cpuOptions.nestedVirtualization `enabled`**: the type's processor supports `nested-virtualization`.
- **EFA offered** (v1 NodePools only): the class's `efa-only` interfaces when it sets `networkInterfaces`, else the
  type's EFA interfaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.model.instancetypes import InstanceType

#: An EC2NodeClass's field of network interfaces, and the interface type that carries EFA traffic only (no IP
#: networking): the one definition.
NETWORK_INTERFACES, EFA_ONLY = "networkInterfaces", "efa-only"
#: An EC2NodeClass's CPU options field, and the value of `nestedVirtualization` that asks the processor for it.
CPU_OPTIONS, ENABLED = "cpuOptions", "enabled"


@dataclass(frozen=True, slots=True, order=True)
class Interface:
    """One of the class's `networkInterfaces`: its network card, device index and type (`interface`/`efa-only`)."""

    card: int
    device: int
    kind: str


def interfaces_of(spec: Mapping[str, Any] | None) -> tuple[Interface, ...] | None:
    """The class's `networkInterfaces` (None: it sets none). Admission has checked their shape; a value of the wrong
    kind reads as 0 / "", never an exception."""
    raw = (spec or {}).get(NETWORK_INTERFACES)
    if not isinstance(raw, list):
        return None
    return tuple(
        Interface(_index(nic.get("networkCardIndex")), _index(nic.get("deviceIndex")), str(nic.get("interfaceType")))
        for nic in raw
        if isinstance(nic, Mapping)
    )


def nested_virtualization_of(spec: Mapping[str, Any] | None) -> bool:
    """Whether the class's `cpuOptions.nestedVirtualization` is `enabled`."""
    options = (spec or {}).get(CPU_OPTIONS)
    return isinstance(options, Mapping) and options.get("nestedVirtualization") == ENABLED


def _index(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def interfaces_fit(
    cards: Sequence[int], efa_interfaces: int, ena_unsupported: bool, interfaces: Sequence[Interface]
) -> bool:
    """v1.14.1's `networkInterfaceCheck.compatibleCheck` on a type of `cards` (interfaces per card, by index)."""
    if not cards or ena_unsupported:
        return False
    for interface in interfaces:
        if interface.card >= len(cards) or cards[interface.card] <= interface.device:
            return False
    return sum(1 for i in interfaces if i.kind == EFA_ONLY) <= efa_interfaces


def launchable(
    instance_type: InstanceType, interfaces: Sequence[Interface] | None, nested_virtualization: bool
) -> bool:
    """Whether the type passes the class's checks (`interfaces` None: the class sets none)."""
    if nested_virtualization and not instance_type.nested_virtualization:
        return False
    return interfaces is None or interfaces_fit(
        instance_type.network_cards, instance_type.efa_interfaces, instance_type.ena_unsupported, interfaces
    )


def efas(instance_type: InstanceType, interfaces: Sequence[Interface] | None) -> int:
    """v1.14.1's `efas`: the class's `efa-only` interfaces when it sets `networkInterfaces`, else the type's EFA."""
    if interfaces is not None:
        return sum(1 for i in interfaces if i.kind == EFA_ONLY)
    return instance_type.efa_interfaces


def launched_efas(instance_type: InstanceType, spec: Mapping[str, Any] | None, efa_requested: bool) -> int:
    """The EFA an instance of the type is launched with, and so its node offers: v1.14.1's `getEFACountForInstance`
    (aws pkg/providers/instance/instance.go:699-720) — none unless the claim's pods request `vpc.amazonaws.com/efa`
    or the class sets `networkInterfaces`; then the type's `efas`. A node launched without EFA interfaces does not
    advertise the resource (cloudprovider.go:440-446)."""
    interfaces = interfaces_of(spec)
    if not efa_requested and interfaces is None:
        return 0
    return efas(instance_type, interfaces)


__all__ = [
    "CPU_OPTIONS",
    "EFA_ONLY",
    "ENABLED",
    "NETWORK_INTERFACES",
    "Interface",
    "efas",
    "interfaces_fit",
    "interfaces_of",
    "launchable",
    "launched_efas",
    "nested_virtualization_of",
]
