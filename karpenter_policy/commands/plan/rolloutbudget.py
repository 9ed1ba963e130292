"""The planning's budget (`--rollout-timeout`): how long working out the waves may take — one budget for the whole
plan, shared by Karpenter v0.31's waves (`waves`) and v1's (`nodepoolwaves`). What a rollout cut short says is
`waves.cut_short`'s."""

from __future__ import annotations

import time

__all__ = ["BY", "OutOfTime", "RolloutClock"]

#: What blocks a node the planning did not reach (`blocked[].by`).
BY = "--rollout-timeout"


class OutOfTime(Exception):
    """The rollout's planning took longer than its budget."""


class RolloutClock:
    """The planning's budget: :meth:`check` raises :class:`OutOfTime` once `seconds` (None: no limit) have passed
    since it was made (monotonic time: what the user waits)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise OutOfTime
