"""How many examples a property runs: all of them under the `ci` Hypothesis profile, a few in the inner loop.

tests/conftest.py registers the profiles and loads the one `HYPOTHESIS_PROFILE` names (`dev` when unset; .ci/run
sets `ci`). A property that asks for more examples than Hypothesis's default says so with `examples(n)`:

    @settings(FUZZ, max_examples=examples(2000))

n under `ci`; under any other profile no more than that profile's `max_examples` (`dev`: 100), so
`pytest -m "not slow" -n 2` stays quick while CI keeps every example.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

CI = "ci"


def examples(n: int) -> int:
    """`n` under the `ci` profile; otherwise at most the current profile's `max_examples`."""
    if settings.get_current_profile_name() == CI:
        return n
    return min(n, settings().max_examples)


def deterministic(n: int, *also_suppressed: HealthCheck) -> settings:
    """The settings of the project's properties: `examples(n)` examples, the same on every run (derandomized, no
    example database), no deadline (CI machines are shared), too-slow and too-large data tolerated, and the
    health checks in `also_suppressed`."""
    return settings(
        max_examples=examples(n),
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, *also_suppressed],
    )


def fast_first(cases: Iterable[Any], *, unpack: bool = False, fast: int = 1) -> list[Any]:
    """A parametrization whose first `fast` cases stay in the fast loop (`pytest -m "not slow"`) and the others are
    marked `slow`: the behaviour keeps a fast test, CI runs every case. `unpack`: each case is a tuple of the
    arguments (`@pytest.mark.parametrize("a,b", ...)`)."""
    return [
        case if k < fast else pytest.param(*(case if unpack else (case,)), marks=pytest.mark.slow)
        for k, case in enumerate(cases)
    ]
