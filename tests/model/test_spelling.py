"""`edit_distance` with a limit (the label-key hints' bound) agrees with the plain distance: exact up to the
limit, over it beyond."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model.spelling import edit_distance


def _reference(a: str, b: str) -> int:
    """Optimal string alignment distance, the textbook table (no band, no early stop)."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        table[i][0] = i
    for j in range(len(b) + 1):
        table[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
    return table[len(a)][len(b)]


WORDS = st.text(alphabet="abk8s./-", max_size=16)


@deterministic(2000)
@given(WORDS, WORDS, st.integers(min_value=0, max_value=8))
def test_a_limited_distance_is_exact_within_the_limit(a: str, b: str, limit: int) -> None:
    exact = _reference(a, b)
    assert edit_distance(a, b) == exact
    limited = edit_distance(a, b, limit)
    assert limited == exact if exact <= limit else limited > limit


def test_known_distances() -> None:
    assert edit_distance("karpenter.sh/capacity-type", "karpenter.sh/capacity-typ") == 1
    assert edit_distance("m5d.x2large", "m5d.2xlarge") == 1  # a transposition
    assert edit_distance("example.com/k1234", "kubernetes.io/arch", 3) == 4
