"""The nearest spelling of a name among the names that exist: the hints of typo findings ("did you mean
on-demand?", "(typo of "topology.kubernetes.io/zone"?)"). Pure functions, no I/O.

A hint among the catalog's ~600 instance types takes difflib milliseconds — the slowest step of checking a
Provisioner that names an unknown type, which the webhook pays on every UPDATE of it (each carries a new
resourceVersion, so the whole check is never cached): the answers are kept (`_NEAREST_CACHED` of them, the most
recently asked), keyed by the value and the candidates.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence

__all__ = ["edit_distance", "nearest_name"]


#: Answers of `nearest_name` kept (value and candidates → hint): a few MB at most.
_NEAREST_CACHED = 4096


def nearest_name(value: str, candidates: Sequence[str]) -> str | None:
    """The one nearest candidate, or None when there is none or a tie: difflib's close matches that are at most
    two edits away (or contain the value, or are contained in it), ranked by edit distance with transpositions,
    then spelt with the same letters (`m5d.x2large` → `m5d.2xlarge`, not `m5d.xlarge`), then difflib's ratio."""
    return _nearest(value, candidates if isinstance(candidates, tuple) else tuple(candidates))


@functools.lru_cache(maxsize=_NEAREST_CACHED)
def _nearest(value: str, candidates: tuple[str, ...]) -> str | None:
    compared: Sequence[str] = candidates
    if len(candidates) > 200:  # difflib on every catalog type is slow: a typo keeps the first letter and length
        near = [c for c in candidates if c[:1] == value[:1] and abs(len(c) - len(value)) <= 2]
        compared = near or candidates
    close = [
        c
        for c in difflib.get_close_matches(value, compared, n=10, cutoff=0.6)
        if edit_distance(value, c) <= 2 or c in value or value in c
    ]
    if not close:
        return None

    def rank(candidate: str) -> tuple[int, bool, float]:
        ratio = difflib.SequenceMatcher(None, value, candidate).ratio()
        return (edit_distance(value, candidate), sorted(value) != sorted(candidate), -ratio)

    ranked = sorted(close, key=lambda c: (rank(c), c))
    if len(ranked) > 1 and rank(ranked[0]) == rank(ranked[1]):
        return None
    return ranked[0]


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """Optimal string alignment distance (Levenshtein with adjacent transpositions). With `limit`, a distance over
    it may be returned as `limit + 1`: only the cells within `limit` of the diagonal are computed (a cell farther
    away is over it already), and the computation stops as soon as two rows in a row are over it (no later cell
    can be smaller) — comparing a key with every well-known key then costs a few cells for most of them."""
    if limit is None:
        limit = max(len(a), len(b))
    over = limit + 1
    if abs(len(a) - len(b)) > limit:
        return over
    width = len(b)
    previous2: list[int] = []
    previous = [j if j <= limit else over for j in range(width + 1)]
    for i in range(1, len(a) + 1):
        current = [over] * (width + 1)
        if i <= limit:
            current[0] = i
        low, high = max(1, i - limit), min(width, i + limit)
        char = a[i - 1]
        for j in range(low, high + 1):  # min() unrolled: this loop is the hint's whole cost
            value = previous[j - 1] if char == b[j - 1] else previous[j - 1] + 1
            if previous[j] + 1 < value:
                value = previous[j] + 1
            if current[j - 1] + 1 < value:
                value = current[j - 1] + 1
            if i > 1 and j > 1 and char == b[j - 2] and a[i - 2] == b[j - 1] and previous2[j - 2] + 1 < value:
                value = previous2[j - 2] + 1
            current[j] = value if value < over else over
        if min(current) >= over and min(previous) >= over:
            return over
        previous2, previous = previous, current
    return previous[width]
