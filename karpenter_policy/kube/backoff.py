"""Exponential backoff with jitter, for retrying an unavailable API server without hammering it.

Each delay doubles up to a ceiling and is drawn from its upper half (equal jitter), so replicas that
failed together do not retry in lockstep, yet none retries in a tight loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    initial: float = 0.2
    maximum: float = 30.0
    factor: float = 2.0
    _failures: int = field(default=0, init=False)
    _random: random.Random = field(default_factory=random.Random, init=False, repr=False)

    def next_delay(self) -> float:
        """The delay before the next attempt; each call counts one more failure."""
        ceiling = min(self.maximum, self.initial * self.factor ** min(self._failures, 64))
        self._failures += 1
        return ceiling / 2 + self._random.uniform(0, ceiling / 2)

    def reset(self) -> None:
        """After a success: the next failure waits the initial delay again."""
        self._failures = 0
