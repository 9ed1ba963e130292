"""Taints and tolerations with Kubernetes' ToleratesTaint semantics."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from karpenter_policy.model.labels import TAINT_NOT_READY, TAINT_UNINITIALIZED, TAINT_UNREACHABLE, TAINT_UNREGISTERED

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS: tuple[str, ...] = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint: pods must tolerate it to be scheduled (or, for PreferNoSchedule, should)."""

    key: str
    effect: str
    value: str = ""

    @classmethod
    def from_api(cls, data: Mapping[str, object]) -> Taint:
        """A taint from its API form (missing fields empty)."""
        return cls(key=str(data.get("key", "")), effect=str(data.get("effect", "")), value=str(data.get("value") or ""))

    def to_api(self) -> dict[str, str]:
        """The taint in its API form (no value when it has none)."""
        api = {"key": self.key, "effect": self.effect}
        if self.value:
            api["value"] = self.value
        return api

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration. Empty key with operator Exists tolerates every taint; empty effect matches all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_api(cls, data: Mapping[str, object]) -> Toleration:
        """A toleration from its API form (operator Equal when none is given)."""
        seconds = data.get("tolerationSeconds")
        return cls(
            key=str(data.get("key") or ""),
            operator=str(data.get("operator") or "Equal"),
            value=str(data.get("value") or ""),
            effect=str(data.get("effect") or ""),
            toleration_seconds=seconds if isinstance(seconds, int) else None,
        )

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' `Toleration.ToleratesTaint`."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


#: Karpenter v1's `UnregisteredNoExecuteTaint` (core pkg/apis/v1/taints.go at v1.14.1).
UNREGISTERED: Final = Taint(TAINT_UNREGISTERED, NO_EXECUTE)


#: Taints the kubelet and cloud controller put on a node that is starting (Karpenter's `KnownEphemeralTaints`), and
#: v1.14.1's `karpenter.sh/unregistered` among them (core pkg/scheduling/taints.go:43; only a NodePool's node has it):
#: a managed node's are not read until it is initialized (`StateNode.Taints`).
EPHEMERAL_TAINT_KEYS: Final = (TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNINITIALIZED, TAINT_UNREGISTERED)


def is_unregistered(taint: Taint) -> bool:
    """Whether the taint is `karpenter.sh/unregistered:NoExecute` (its value aside)."""
    return (taint.key, taint.effect) == (UNREGISTERED.key, UNREGISTERED.effect)


def with_unregistered(taints: Iterable[Taint]) -> tuple[Taint, ...]:
    """A Karpenter v1 node's registration taints: its NodeClaim's taints and startup taints, and
    `karpenter.sh/unregistered:NoExecute` unless one of them is it (aws v1.14.1 amifamily/resolver.go:288-296, the
    kubelet's `registerWithTaints`; the Node the controller writes at launch gets the same)."""
    listed = tuple(taints)
    if any(is_unregistered(t) for t in listed):
        return listed
    return (*listed, UNREGISTERED)


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> list[Taint]:
    """The taints that none of the tolerations tolerates, in the given order."""
    tolerations = tuple(tolerations)
    return [taint for taint in taints if not any(t.tolerates(taint) for t in tolerations)]
