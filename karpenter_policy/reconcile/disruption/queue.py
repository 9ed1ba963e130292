"""The disruption commands under way, as Karpenter v1.14.1's orchestration queue holds them (core
pkg/controllers/disruption/queue.go): each command with its replacements, when it started and when its nodes were
deleted. NodePools' commands run side by side; a Provisioner's runs alone (v0.31.1's one command at a time). The
nodes the commands disrupt are no candidates nor room for the next decision, which places their pods again; their
replacements are no candidates but room (a candidate's pods may not count on one not initialized yet)
(:mod:`~karpenter_policy.reconcile.disruption.deprovisioner` carries the commands out)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from karpenter_policy.model.pools import is_nodepool
from karpenter_policy.reconcile.disruption.decider import Command


@dataclass(slots=True)
class Underway:
    """A command carried out: its replacements launched (their Node names), when it started, and when its nodes were
    deleted (then it waits for them to be gone)."""

    command: Command
    replacements: list[str] = field(default_factory=list)
    started: float = 0.0
    deleted: float | None = None

    @property
    def nodepools(self) -> bool:
        """Every candidate is a NodePool's (such commands run side by side)."""
        return runs_side_by_side(self.command)


def runs_side_by_side(command: Command) -> bool:
    """Whether the command may run beside others: every candidate is a NodePool's."""
    return all(is_nodepool(candidate.provisioner) for candidate in command.candidates)


class Commands:
    """The commands under way, in the order they started (read by other threads: each question copies the list
    first)."""

    def __init__(self) -> None:
        self._underway: list[Underway] = []

    def __iter__(self) -> Iterator[Underway]:
        return iter(list(self._underway))

    def __len__(self) -> int:
        return len(self._underway)

    def start(self, underway: Underway) -> None:
        self._underway.append(underway)

    def finish(self, underway: Underway) -> None:
        """It is done, or abandoned."""
        self._underway.remove(underway)

    def protected(self) -> frozenset[str]:
        """The replacements of the commands under way."""
        return frozenset(name for underway in list(self._underway) for name in underway.replacements)

    def disrupting(self) -> frozenset[str]:
        """The nodes the commands under way disrupt (not candidates; they use up their NodePool's budget)."""
        return frozenset(name for underway in list(self._underway) for name in underway.command.names)

    def side_by_side(self) -> bool:
        """Whether another command may start now: none is under way, or only NodePools'."""
        return all(underway.nodepools for underway in self._underway)


__all__ = ["Commands", "Underway", "runs_side_by_side"]
