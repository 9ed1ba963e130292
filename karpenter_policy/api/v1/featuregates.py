"""Karpenter v1.14.1's `--feature-gates` (`FEATURE_GATES`), read as its operator reads it, and what this tool
models of them: Karpenter's defaults only.

Karpenter parses the flag with Kubernetes' `cliflag.MapStringBool` (comma-separated `Name=bool` pairs, each trimmed;
a bool as Go's `strconv.ParseBool`) over its defaults, and ignores a name it does not know (core
pkg/operator/options/options.go `ParseFeatureGates`). This project models each gate at its default
(`DEFAULTS`): a value that differs is refused by name (`unmodelled`), never run as if it were the default — with
two exceptions: `ReservedCapacity=false`, which the controller models (no reserved offering:
`reserved_capacity`, docs/reconcile.md) and which changes nothing elsewhere, and `StaticCapacity=true`, which the
controller models (`reconcile` and `simulate` start v1.14.1's static provisioning and deprovisioning controllers:
`reconcile.static`, read with `static_capacity`), as `plan` does (`commands.plan.staticnodepools`: the nodes a change
of `replicas` adds and removes). `check` and `test` read the flag with `read_policy_feature_gates`, which still
refuses `StaticCapacity=true`: their placement does not depend on it, but their reports say what the gate off does.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = [
    "DEFAULTS", "FEATURE_GATES_HELP", "FeatureGateError", "PLAN_FEATURE_GATES_HELP", "POLICY_FEATURE_GATES_HELP",
    "STATIC_CAPACITY",
    "parse_feature_gates", "read_feature_gates", "read_policy_feature_gates", "reserved_capacity", "static_capacity",
    "unmodelled",
]

#: Karpenter's name of the static NodePools' gate.
STATIC_CAPACITY: Final = "StaticCapacity"

#: v1.14.1's defaults (options.go:134, `FEATURE_GATES`), in its order.
DEFAULTS: Final[Mapping[str, bool]] = MappingProxyType({
    "NodeRepair": False,
    "ReservedCapacity": True,
    "SpotToSpotConsolidation": False,
    "NodeOverlay": False,
    "StaticCapacity": False,
    "CapacityBuffer": False,
})

#: What each gate turned away from its default would need, that this tool does not do.
_NOT_MODELLED: Final[Mapping[str, str]] = MappingProxyType({
    "NodeRepair": "node repair (pkg/controllers/node/health) is not modelled",
    "SpotToSpotConsolidation": "spot-to-spot consolidation is not modelled",
    "NodeOverlay": "NodeOverlays (pkg/controllers/nodeoverlay) are not modelled",
    "StaticCapacity": (
        "static NodePools' provisioning and deprovisioning (pkg/controllers/static/) are modelled by reconcile, "
        "simulate and plan, not by check and test"
    ),
    "CapacityBuffer": "CapacityBuffers (pkg/controllers/capacitybuffer) are not modelled",
})

#: The gates a value of which other than the default changes nothing this tool models.
_INDIFFERENT: Final = frozenset({"ReservedCapacity"})
#: The gates the controller models away from their default too (`reconcile`, `simulate`, and `plan`).
_CONTROLLER_MODELS: Final = frozenset({STATIC_CAPACITY})

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class FeatureGateError(ValueError):
    """A `--feature-gates` value Karpenter would refuse, or one this tool does not model; the message says which."""


def parse_feature_gates(text: str) -> dict[str, bool]:
    """The gates `text` sets over the defaults, as Karpenter's `ParseFeatureGates` reads it: every gate it knows,
    by name (an unknown name is ignored, as Karpenter ignores it). FeatureGateError with Karpenter's reason for a
    malformed pair or bool."""
    gates = dict(DEFAULTS)
    for pair in text.split(",") if text else ():
        if not pair.strip():
            continue  # MapStringBool skips an empty item
        name, equals, value = pair.partition("=")
        if not equals:
            raise FeatureGateError(f"malformed pair, expect string=bool: {pair!r}")
        name, value = name.strip(), value.strip()
        if value in _TRUE or value in _FALSE:
            if name in gates:
                gates[name] = value in _TRUE
            continue
        raise FeatureGateError(f'invalid value of {name}: {value}, err: strconv.ParseBool: parsing "{value}": '
                               "invalid syntax")
    return gates


def unmodelled(text: str, controller: bool = True) -> str | None:
    """Why this tool cannot run as Karpenter v1.14.1 with `--feature-gates text` (None: it can — every gate at its
    default, `ReservedCapacity=false`, and with `controller` — `reconcile`, `simulate` and `plan` —
    `StaticCapacity=true`). Raises FeatureGateError for a value Karpenter refuses."""
    gates = parse_feature_gates(text)
    modelled = _INDIFFERENT | _CONTROLLER_MODELS if controller else _INDIFFERENT
    changed = [name for name, on in gates.items() if on != DEFAULTS[name] and name not in modelled]
    if not changed:
        return None
    said = "; ".join(f"{name}={str(gates[name]).lower()}: {_NOT_MODELLED[name]}" for name in changed)
    return f"{said} (this tool models Karpenter v1.14.1's defaults: docs/v1.md, \"Feature gates\")"


def static_capacity(text: str) -> bool:
    """Whether `--feature-gates text` turns `StaticCapacity` on (Karpenter's reading; its default: off)."""
    return parse_feature_gates(text)[STATIC_CAPACITY]


def reserved_capacity(text: str) -> bool:
    """Whether `--feature-gates text` leaves `ReservedCapacity` on (Karpenter's reading; its default: on)."""
    return parse_feature_gates(text)["ReservedCapacity"]


#: The controller's `--feature-gates` help (`reconcile`, `simulate`).
FEATURE_GATES_HELP: Final = (
    "Karpenter's --feature-gates (Name=bool,…): its defaults are modelled, and StaticCapacity=true (static "
    "NodePools' replicas kept) and ReservedCapacity=false; another gate turned away from its default "
    "(NodeRepair=true …) is refused by name."
)

#: `plan`'s `--feature-gates` help.
PLAN_FEATURE_GATES_HELP: Final = (
    "Karpenter's --feature-gates (Name=bool,…): its defaults are modelled, and StaticCapacity=true (a static "
    "NodePool's replicas change planned: nodes added and removed) and ReservedCapacity=false; another gate turned "
    "away from its default (NodeRepair=true …) is refused by name."
)

#: `check`'s and `test`'s `--feature-gates` help.
POLICY_FEATURE_GATES_HELP: Final = (
    "Karpenter's --feature-gates (Name=bool,…): only its defaults are modelled, so a gate turned away from its "
    "default (StaticCapacity=true …) is refused by name; ReservedCapacity=false is accepted."
)


def read_feature_gates(text: str) -> str:
    """The controller's reading (`reconcile`, `simulate`, and `plan`'s): the flag's value as given when the
    controller can run as Karpenter with it; ValueError (after the flag's name: `optionspec`) naming the gate it
    cannot model, or Karpenter's reason for a malformed value."""
    why = unmodelled(text)
    if why is not None:
        raise FeatureGateError(why)
    return text


def read_policy_feature_gates(text: str) -> str:
    """`check`'s and `test`'s reading: as `read_feature_gates`, but `StaticCapacity=true` is refused too."""
    why = unmodelled(text, controller=False)
    if why is not None:
        raise FeatureGateError(why)
    return text
