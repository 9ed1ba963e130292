"""Fixtures of the ports of Karpenter's deprovisioning tests (see support.py)."""

from __future__ import annotations

import pytest

from .support import Policies


@pytest.fixture(scope="session")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Policies:
    return Policies(tmp_path_factory.mktemp("karpenter-ports"))
