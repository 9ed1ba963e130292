"""Fixtures of the scheduling tests."""

from __future__ import annotations

import pytest

from karpenter_policy.scheduling import COST, KARPENTER


@pytest.fixture(params=[KARPENTER, COST])
def strategy(request: pytest.FixtureRequest) -> str:
    """Both packing strategies: what Karpenter's tests assert of its semantics must hold under either."""
    return str(request.param)
