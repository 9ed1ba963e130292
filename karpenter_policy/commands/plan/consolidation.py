"""What consolidation would do now, when BASE = HEAD: the shape of the answer (`plan`'s `consolidation` block) and
the protocol of what computes it.

The answer is computed by this project's controller's own disruption decisions (`reconcile/disruption/decider.py`,
Karpenter v0.31's deprovisioners for Provisioners' nodes, v1.14.1's for NodePools') run on the snapshot's fleet —
a Provisioner's command alone, NodePools' side by side as the controller's queue runs them — not by a second model
of consolidation. The controller may not be imported by a command (docs/architecture.md), so `plan` is handed the
computation (:class:`Consolidate`) by its caller: the CLI gives it `simulate/consolidation.py`'s.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from karpenter_policy.catalog import Catalog
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import Fleet
from karpenter_policy.commands.plan.snapshot import Snapshot
from karpenter_policy.commands.plan.waves import Timing

__all__ = ["Consolidate", "Consolidation", "Move", "NotCandidate"]


@dataclass(frozen=True, slots=True)
class Move:
    """One consolidation command, in the order the controller takes them: `stage` (empty, multi-node, single-node),
    `action` (delete, replace), the nodes `removed` and the instance types `launched` in their place, the $/month
    it saves (None: no price data), and the pods it evicts per workload. A NodePool's command runs beside others
    (Karpenter v1.14.1's orchestration queue): `wave` numbers the moves started while the same commands were under
    way — a move of wave 1 starts once a command of wave 0 has finished —, and `start` is when it starts; both None
    for a Provisioner's (v0.31.1: one command at a time, each carried out before the next is decided)."""

    stage: str
    action: str
    removed: tuple[str, ...]
    launched: tuple[str, ...]
    saved_monthly: float | None
    evicted: Mapping[str, int]
    why: str
    wave: int | None = None
    start: dt.datetime | None = None

    @property
    def evicted_pods(self) -> int:
        return sum(self.evicted.values())

    def to_json(self, index: int) -> dict[str, object]:
        found: dict[str, object] = {
            "index": index, "stage": self.stage, "action": self.action, "removed": list(self.removed),
            "launched": list(self.launched), "saved_monthly": self.saved_monthly, "evicted_pods": self.evicted_pods,
            "evicted": dict(sorted(self.evicted.items())), "why": self.why}
        if self.wave is not None:  # a NodePool's move (a Provisioner's JSON is v0.31's, unchanged)
            found["wave"] = self.wave
        if self.start is not None:
            found["start"] = self.start.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # as waves[]
        return found


@dataclass(frozen=True, slots=True)
class NotCandidate:
    """A Karpenter node consolidation does not take now, and why, in the controller's (Karpenter's) words."""

    node: str
    reason: str


@dataclass(slots=True)
class Consolidation:
    """The moves in order, the nodes that are not candidates, and notes (what is not modelled); after the moves,
    every placed pod's node (`namespace/name` → node) and the nodes left."""

    moves: list[Move] = field(default_factory=list)
    not_candidates: list[NotCandidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    placement: dict[str, str] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)

    @property
    def saved_monthly(self) -> float:
        return sum(m.saved_monthly or 0.0 for m in self.moves)

    @property
    def evicted_pods(self) -> int:
        return sum(m.evicted_pods for m in self.moves)

    def to_json(self) -> dict[str, object]:
        return {
            "moves": [m.to_json(i) for i, m in enumerate(self.moves)],
            "saved_monthly": round(self.saved_monthly, 2),
            "evicted_pods": self.evicted_pods,
            "not_candidates": [{"node": n.node, "reason": n.reason} for n in self.not_candidates],
            "notes": list(self.notes),
        }


class Consolidate(Protocol):
    """What consolidation would do now on `fleet` (of `snapshot`) under `head`'s policies, priced by `catalog`,
    worked out within about `budget` seconds (past them: the moves found so far, with a note); `timing`: how long
    a new node takes to be initialized and an evicted pod to be Ready again (`plan --node-startup`, `--pod-startup`),
    which times NodePools' commands side by side."""

    def __call__(self, snapshot: Snapshot, fleet: Fleet, head: PolicySide, catalog: Catalog, now: dt.datetime,
                 budget: float, timing: Timing = ...) -> Consolidation: ...
