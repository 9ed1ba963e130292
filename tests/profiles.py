"""How many examples a property runs: all of them under the `ci` Hypothesis profile, a few in the inner loop.

tests/conftest.py registers the profiles and loads the one `HYPOTHESIS_PROFILE` names (`dev` when unset; .ci/run
sets `ci`). A property that asks for more examples than Hypothesis's default says so with `examples(n)`:

    @settings(FUZZ, max_examples=examples(2000))

n under `ci`; under any other profile no more than that profile's `max_examples` (`dev`: 100), so
`pytest -m "not slow" -n 2` stays quick while CI keeps every example.
"""

from __future__ import annotations

from hypothesis import settings

CI = "ci"


def examples(n: int) -> int:
    """`n` under the `ci` profile; otherwise at most the current profile's `max_examples`."""
    if settings.get_current_profile_name() == CI:
        return n
    return min(n, settings().max_examples)
