"""A request's object as a loader `Document`, and the field path behind a finding's position.

The CLI's checks take a `policy.loader.Document`: data plus a `position(path)` that places a finding at a line and
column, which the checks use to order findings and point at them. An admitted object arrives as one line of
JSON, already parsed, so a position here is the object's JSON read as one line: line 1, and as column the rank of
the node (or of its key) in document order — the order of their columns in the JSON text, without building a
YAML node tree for it (the loader's `parse` on the JSON text costs more than every check of a valid object).
A path that runs past the object is placed at its nearest existing ancestor, as the loader does. `field_path`
maps a position back to the field (`spec.requirements[2].operator`), which is what a `kubectl apply` user can
look for.

A position is counted along its path (the ranks of the subtrees before it), so placing the few findings of a
valid object costs little; the full index of every node is built only for `field_path` (denials, warnings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yaml.error import Mark
from yaml.nodes import ScalarNode

from karpenter_policy.api.violations import Path, render_path
from karpenter_policy.checks.source.loader import Document

#: The file name findings about an admitted object carry (never shown: messages carry field paths instead).
OBJECT_FILE = "<admission>"
#: Positions counted along their path before the whole object is indexed (`JsonDocument.position`).
_WALKS = 16
_NOWHERE = ScalarNode("tag:yaml.org,2002:null", "", Mark(OBJECT_FILE, 0, 0, 0, "", 0))


class JsonDocument(Document):
    """A Document over already-parsed JSON data; positions are ranks in document order (see the module doc)."""

    __slots__ = ("_ranks", "_paths", "_walks")

    def __init__(self, data: Mapping[str, Any], file: str = OBJECT_FILE) -> None:
        super().__init__(file, 0, data, _NOWHERE)
        self._ranks: dict[Path, tuple[int, int]] | None = None
        self._paths: dict[int, Path] | None = None
        self._walks = 0

    def _index(self) -> dict[Path, tuple[int, int]]:
        """Path → (rank of its key, rank of its value), depth first in document order; the root is rank 1."""
        if self._ranks is None:
            ranks: dict[Path, tuple[int, int]] = {}
            rank = 0
            stack: list[tuple[Path, Any]] = [((), self.data)]
            while stack:
                path, value = stack.pop()
                if path and isinstance(path[-1], str):  # a mapping entry: its key comes first
                    ranks[path] = (rank + 1, rank + 2)
                    rank += 2
                else:
                    ranks[path] = (rank + 1, rank + 1)
                    rank += 1
                if isinstance(value, Mapping):
                    stack.extend(reversed([((*path, str(key)), child) for key, child in value.items()]))
                elif isinstance(value, list):
                    stack.extend(reversed([((*path, index), child) for index, child in enumerate(value)]))
            self._ranks = ranks
        return self._ranks

    def position(self, path: Path, at_key: bool = False) -> tuple[int, int]:
        """Line 1, and the rank `_index` gives the node at `path` (its key's with `at_key`), or its nearest
        existing ancestor's: counted along the path for the first few, without indexing the whole object; from
        the first `_WALKS` on, read from the index (a walk costs the size of what precedes the node: thousands
        of findings on one list's values would cost its length squared)."""
        self._walks += 1
        if self._ranks is not None or self._walks > _WALKS:
            return self._indexed_position(path, at_key)
        node: Any = self.data
        key_rank = rank = 1
        for raw in path:
            part = raw if isinstance(raw, int) else str(raw)
            following = rank + 1  # the rank of the first key (mapping) or item (list)
            if isinstance(node, Mapping) and isinstance(part, str):
                for key, child in node.items():
                    if str(key) == part:
                        key_rank, rank, node = following, following + 1, child
                        break
                    following += 1 + _ranks(child)
                else:
                    return 1, rank
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                following += sum(_ranks(child) for child in node[:part])
                key_rank = rank = following
                node = node[part]
            else:
                return 1, rank
        return 1, key_rank if at_key else rank

    def _indexed_position(self, path: Path, at_key: bool) -> tuple[int, int]:
        index = self._index()
        parts: Path = tuple(raw if isinstance(raw, int) else str(raw) for raw in path)
        for end in range(len(parts), -1, -1):
            ranks = index.get(parts[:end])
            if ranks is not None:
                return 1, ranks[0] if at_key and end == len(parts) else ranks[1]
        return 1, 1

    def field_path(self, line: int, column: int) -> str:
        """The field at a position this document gave out (`spec.requirements[0].values[1]`); "" for the root
        or a position it does not know."""
        if self._paths is None:
            self._paths = {}
            for path, (key_rank, value_rank) in self._index().items():
                self._paths[key_rank] = path
                self._paths[value_rank] = path
        return render_path(self._paths.get(column, ())) if line == 1 else ""


def _ranks(value: Any) -> int:
    """How many ranks a node and everything under it take in `_index`: one per node, one more per mapping key."""
    if isinstance(value, Mapping):
        return 1 + sum(1 + _ranks(child) for child in value.values())
    if isinstance(value, list):
        return 1 + sum(_ranks(child) for child in value)
    return 1
