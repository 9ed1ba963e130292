"""Reorder the keys of a ruamel.yaml mapping and keep each key's comments with it.

ruamel.yaml keeps the comment lines *above* a key at the end of the entry before it — on the last scalar of that
entry, however deep, or at the end of one of the block lists or mappings that end with it (`ca.end`) — and those
above the first key on the mapping itself. Moving keys as they are would carry a
key's comments off with its former neighbour. So, before moving anything, the lines above each key are taken from
where ruamel put them and attached to the key itself (ruamel's "before" comments); the lines after the last entry
stay at the end of the mapping, whichever entry ends it now.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

_EOL = 2  # a mapping entry's comment after its value (ruamel's ca.items[key][2])
_SEQ_EOL = 0  # a list item's comment after it (ca.items[index][0])


def _is_block(value: Any) -> bool:
    return isinstance(value, (CommentedMap, CommentedSeq)) and len(value) > 0 and not value.fa.flow_style()


def _tail(container: CommentedMap | CommentedSeq, key: Hashable) -> tuple[list[Any], int, list[Any]]:
    """The comment slot (ruamel's list, index) after the entry `key` of `container` — that of its last scalar —
    and the block collections it ends, innermost first."""
    value = container[key]
    enclosing: list[Any] = []
    while _is_block(value):
        enclosing.insert(0, value)
        container = value
        key = next(reversed(value)) if isinstance(value, CommentedMap) else len(value) - 1
        value = container[key]
    slot = _EOL if isinstance(container, CommentedMap) else _SEQ_EOL
    return container.ca.items.setdefault(key, [None, None, None, None]), slot, enclosing


def _take_lines_after(entry: list[Any], slot: int, enclosing: list[Any]) -> str:
    """Split the comment at `entry[slot]`: keep its end-of-line part; return the whole lines after it and those at
    the end of the `enclosing` collections (taken off them)."""
    ends = ""
    for collection in enclosing:
        tokens = getattr(collection.ca, "end", None) or []
        ends += "".join(" " * (getattr(t, "column", 0) or 0) + str(t.value) for t in tokens)
        if tokens:
            collection.ca.end = []
    token = entry[slot]
    if token is None:
        return ends
    first, newline, rest = str(token.value).partition("\n")
    if first.strip() or not rest:
        token.value = first + newline
    else:  # no end-of-line comment: the token is only the lines below
        token.value, rest = "\n", rest
        entry[slot] = None if not first else token
    return rest + ends


def _set_before(mapping: CommentedMap, key: Hashable, text: str, column: int) -> None:
    if not text:
        return
    tokens = [
        CommentToken((line.strip() + "\n") if line.strip() else "\n", CommentMark(column))
        for line in text.split("\n")[: -1 if text.endswith("\n") else None]
    ]
    entry = mapping.ca.items.setdefault(key, [None, None, None, None])
    entry[1] = [*(entry[1] or []), *tokens]


def _append_after(tail: tuple[list[Any], int, list[Any]], text: str) -> None:
    entry, slot, _ = tail
    if not text:
        return
    token = entry[slot]
    if token is None:
        entry[slot] = CommentToken("\n" + text, CommentMark(0))
    else:
        token.value = str(token.value) + text


def take_trailing_lines(container: CommentedMap, key: Hashable) -> str:
    """The whole comment lines after the entry `key` (they are about what follows it), taken off it."""
    return _take_lines_after(*_tail(container, key))


def put_trailing_lines(container: CommentedMap, key: Hashable, text: str) -> None:
    """Put comment lines taken with `take_trailing_lines` after the entry `key` (as it is now)."""
    _append_after(_tail(container, key), text)


def canonical_keys(keys: Sequence[Hashable], order: Sequence[str]) -> list[Hashable]:
    """`keys` in `order` (the keys it does not list after, as they were)."""
    rank = {key: index for index, key in enumerate(order)}
    position = {key: index for index, key in enumerate(keys)}
    return sorted(keys, key=lambda k: (rank.get(str(k), len(order)), position[k]))


def reorder(
    mapping: CommentedMap,
    order: Sequence[str],
    column: int,
    owner: tuple[CommentedMap, Hashable] | None = None,
) -> bool:
    """Put the keys of `mapping` (whose keys sit at `column`) in `order` (others after, as they were); True when
    anything moved. `owner` is the mapping and key holding `mapping` (ruamel keeps the lines above its first key
    there too); without one — a document — the lines above the first key stay on top, as the file's header."""
    keys = list(mapping)
    wanted = canonical_keys(keys, order)
    if wanted == keys:
        return False
    before: dict[Hashable, str] = {}
    header = mapping.ca.comment[1] if mapping.ca.comment and len(mapping.ca.comment) > 1 else None
    if header and owner is not None:
        before[keys[0]] = "".join(str(t.value) for t in header if t is not None)
        mapping.ca.comment[1] = []
        parent, key = owner
        entry = parent.ca.items.get(key)
        if entry is not None and len(entry) > 3:
            entry[3] = None
    for previous, key in zip(keys, keys[1:], strict=False):
        before[key] = _take_lines_after(*_tail(mapping, previous))
    after = _take_lines_after(*_tail(mapping, keys[-1]))
    for key in wanted:
        mapping.move_to_end(key)
    for key, text in before.items():
        _set_before(mapping, key, text, column)
    _append_after(_tail(mapping, wanted[-1]), after)
    return True
