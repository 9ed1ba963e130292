"""What a run looks at: which files (`--exclude GLOB`) and which rules (`--disable RULE`); the flags validate,
check and compile share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Selection:
    #: Patterns of paths to leave out (`source.exclusion`).
    exclude: tuple[str, ...] = ()
    #: Rule ids whose findings are not reported (`suppression`).
    disabled: frozenset[str] = frozenset()


EVERYTHING = Selection()
