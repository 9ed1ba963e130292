"""`--exclude GLOB`: which paths a run leaves out.

A pattern without a `/` is matched against every name along a path, as in `.gitignore`: `values*.yaml` leaves out
such files anywhere, `charts` every directory (or file) of that name and all below it. A pattern with a `/` is
matched against the path from the current directory (`deploy/charts`, `envs/*/values.yaml`); `**` stands for any
number of directories (`**/values.yaml`). `*`, `?` and `[...]` match within one name, as in the shell. A path is
left out when it, or a directory it lies in, matches — a path named on the command line too (the commands say so:
`loader.exclusion_notes`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import PurePath


def _parts(path: str) -> list[str]:
    """`path` as names from the current directory (an absolute path inside it made relative first)."""
    if os.path.isabs(path):
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    return [part for part in PurePath(path).as_posix().split("/") if part not in ("", ".")]


def _matches(pattern: Sequence[str], names: Sequence[str]) -> bool:
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, names[i:]) for i in range(len(names) + 1))
    return bool(names) and fnmatchcase(names[0], head) and _matches(rest, names[1:])


def excluded_by(path: str, patterns: Sequence[str]) -> str | None:
    """The first of `patterns` that leaves out `path` (a file or directory as discovered), None when none does."""
    if not patterns:
        return None
    names = _parts(path)
    for raw in patterns:
        pattern = raw.strip().removeprefix("./").rstrip("/")
        if not pattern:
            continue
        if "/" not in pattern:
            if any(fnmatchcase(name, pattern) for name in names):
                return raw
            continue
        segments = [s for s in pattern.lstrip("/").split("/") if s]
        if any(_matches(segments, names[:end]) for end in range(1, len(names) + 1)):
            return raw
    return None


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """True when `path` (a file or directory as discovered) is left out by one of `patterns`."""
    return excluded_by(path, patterns) is not None
