"""Amounts near the bounds of a Kubernetes quantity (the fuzz suite found a DaemonSet of exabytes) never raise
OverflowError in the scheduler's arithmetic: a quotient beyond a float is ±inf."""

from __future__ import annotations

import math

from karpenter_policy.scheduling.vectors import quotient, utilisation

HUGE = 10**400  # beyond any float


def test_quotients_beyond_a_float_are_infinite_not_an_error() -> None:
    assert quotient(HUGE, 3) == math.inf
    assert quotient(-HUGE, 3) == -math.inf
    assert quotient(6, 3) == 2.0
    assert utilisation((HUGE,), (1,), 0) == math.inf
