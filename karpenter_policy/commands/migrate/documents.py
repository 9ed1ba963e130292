"""One policy file rewritten by `migrate`: each migrated v1alpha5 document replaced by its v1 documents, every other
document kept byte for byte, and the comments of the migrated one kept where the v1 form has a place for them.

The file is cut into its YAML documents at `---` lines (`fmt`'s `split_documents`). A document whose object was
migrated keeps its header — the `---` line, blank lines and comments above its first key — and gets the v1
objects as `compile --api v1` writes them (`manifests.dump_yaml`: sorted keys, LF), separated by `---` lines.
The other comments of the document move to the v1 line of the same field (`ttlSecondsUntilExpired: 604800 #
7 days` → `expireAfter: 168h # 7 days`; a comment line above a key goes above that key's v1 line); the renamed
fields are `KEY_RENAMES`, the others keep their name. A comment with no such line is kept in the header, under
a line naming the field it was on. Text inside block scalars (`userData: |`) is data, never a comment. The new
text is parsed again and must hold exactly the v1 objects, or the comments are all kept in the header instead.
A document whose lines end in CRLF is written back with CRLF.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from karpenter_policy.checks.source.loader import LoadError, parse
from karpenter_policy.commands.compile.manifests import dump_yaml
from karpenter_policy.commands.fmt.fmt import split_documents

__all__ = ["KEY_RENAMES", "MigratedFile", "rewrite_text", "writable_identities"]

#: v1alpha5 field → the v1 field that carries it (the others keep their name).
KEY_RENAMES = {
    "ttlSecondsUntilExpired": "expireAfter",
    "ttlSecondsAfterEmpty": "consolidateAfter",
    "consolidation": "consolidationPolicy",
    "providerRef": "nodeClassRef",
    "provider": "nodeClassRef",
    "kubeletConfiguration": "kubelet",
    "subnetSelector": "subnetSelectorTerms",
    "securityGroupSelector": "securityGroupSelectorTerms",
    "amiSelector": "amiSelectorTerms",
    "amiFamily": "amiSelectorTerms",
}
_KEY = re.compile(r"^(\s*)(?:-\s+)*(\"[^\"]*\"|'[^']*'|[^\s#'\"\-][^#]*?|-[^\s#][^#]*?)\s*:(?:\s|$)")


@dataclass(slots=True)
class MigratedFile:
    """A file's text before and after, the objects it now holds by (kind, name) and the comments that found no
    v1 line (kept in a header)."""

    file: str
    original: str
    updated: str
    migrated: list[tuple[str, str]] = field(default_factory=list)
    relocated_comments: int = 0

    @property
    def changed(self) -> bool:
        return self.updated != self.original


@dataclass(slots=True)
class _Comment:
    path: tuple[str, ...]  # the keys from the document's top to the line's key (empty: no key)
    above: list[str]
    trailing: str | None

    @property
    def key(self) -> str | None:
        return self.path[-1] if self.path else None


class _Paths:
    """The key path of each line, read line by line from the indentation (each key's column)."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []

    def of(self, line: str) -> tuple[str, ...]:
        match = _KEY.match(line)
        if match is None:
            return ()
        column = match.start(2)
        while self.stack and self.stack[-1][0] >= column:
            self.stack.pop()
        self.stack.append((column, match.group(2).strip("\"'")))
        return tuple(key for _, key in self.stack)


def _renamed(path: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(KEY_RENAMES.get(key, key) for key in path)


def _within(wanted: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether `wanted` is a subsequence of `path` ending with its last key (v1 adds levels: `- tags:`)."""
    if not wanted or not path or wanted[-1] != path[-1]:
        return False
    remaining = iter(path)
    return all(any(key == step for step in remaining) for key in wanted)


def _data_lines(text: str) -> set[int]:
    """The 0-based lines of `text` inside multi-line scalars (block or quoted): data, not comments or keys."""
    lines: set[int] = set()

    def visit(node: Node) -> None:
        if isinstance(node, ScalarNode):
            first, last = node.start_mark.line, node.end_mark.line
            if node.end_mark.column == 0:  # a block scalar ends at the start of the line after it
                last -= 1
            lines.update(range(first + 1, last + 1))
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                visit(key)
                visit(value)
        elif isinstance(node, SequenceNode):
            for item in node.value:
                visit(item)

    for document in yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if document is not None:
            visit(document)
    return lines


def _trailing_comment(line: str) -> tuple[str, str | None]:
    """`line` without its end-of-line comment, and the comment (None when it has none)."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'" and (index == 0 or line[index - 1] in " \t:-[{,"):
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip(), line[index:].rstrip()
    return line, None


def _header_length(lines: Sequence[str]) -> int:
    """How many lines open the document before its first content line (`---`, blanks, comments)."""
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped != "---":
            return index
    return len(lines)


def _comments(body: Sequence[str], data: set[int], offset: int) -> list[_Comment]:
    """The comments of a document's body, each with the key of the line it belongs to."""
    found: list[_Comment] = []
    above: list[str] = []
    paths = _Paths()
    for index, line in enumerate(body):
        if index + offset in data:
            continue
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped)
            continue
        if not stripped:
            continue
        content, trailing = _trailing_comment(line)
        path = paths.of(content)
        if above or trailing:
            found.append(_Comment(path, above, trailing))
            above = []
    if above:
        found.append(_Comment((), above, None))
    return found


def _place(text: str, comments: Sequence[_Comment]) -> tuple[str, list[_Comment]]:
    """`text` (v1 YAML) with each comment on the line of its v1 field; the comments that have none."""
    lines = text.splitlines()
    data = _data_lines(text)
    walker = _Paths()
    paths = [() if i in data else walker.of(line) for i, line in enumerate(lines)]
    used: set[int] = set()
    before: dict[int, list[str]] = {}
    after: dict[int, str] = {}
    left: list[_Comment] = []
    for comment in comments:
        wanted = _renamed(comment.path)
        free = [i for i, path in enumerate(paths) if i not in used and path]
        # the same field under the same parents first, else the first line of the same (renamed) key
        target = next((i for i in free if _within(wanted, paths[i])), None)
        if target is None:
            target = next((i for i in free if wanted and paths[i][-1] == wanted[-1]), None)
        if target is None:
            left.append(comment)
            continue
        used.add(target)
        before.setdefault(target, []).extend(comment.above)
        if comment.trailing:
            after[target] = comment.trailing
    out: list[str] = []
    for index, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip())]
        out += [indent + c for c in before.get(index, [])]
        out.append(f"{line} {after[index]}" if index in after else line)
    return "".join(line + "\n" for line in out), left


def _kept_in_header(comments: Sequence[_Comment], what: str) -> str:
    if not comments:
        return ""
    lines = [f"# Comments of the v1alpha5 {what} with no v1 field to stay on:"]
    for comment in comments:
        where = f"{comment.key}: " if comment.key else ""
        lines += [f"#   {where}{c}" for c in comment.above]
        if comment.trailing:
            lines.append(f"#   {where}{comment.trailing}")
    return "".join(line + "\n" for line in lines)


def _holds(file: str, text: str, objects: Sequence[Mapping[str, Any]]) -> bool:
    try:
        documents = parse(file, text, expand_lists=False)
    except LoadError:
        return False
    return [d.data for d in documents] == list(objects)


def _migrate_chunk(file: str, chunk: str, objects: Sequence[Mapping[str, Any]], what: str) -> tuple[str, int]:
    """The v1 text of one document (its header kept, its comments placed); how many comments went to the header."""
    lines = chunk.splitlines(keepends=True)
    start = _header_length(lines)
    header = "".join(lines[:start])
    body_end = len(chunk.rstrip("\n \t"))
    ending = chunk[body_end:]
    ending = ending[ending.find("\n") + 1 :] if "\n" in ending else ""  # blank lines after the document kept
    body = [line.rstrip("\r\n") for line in lines[start:]]
    comments = _comments(body, _data_lines(chunk), start)
    v1 = "---\n".join(dump_yaml(obj) for obj in objects)
    placed, left = _place(v1, comments)
    if not _holds(file, placed, objects):
        placed, left = v1, list(comments)
    return header + _kept_in_header(left, what) + placed + ending, len(left)


def rewrite_text(
    file: str,
    text: str,
    replacements: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
) -> MigratedFile:
    """`text` with each document whose (kind, name) `replacements` has replaced by those v1 objects (module doc).
    Raises LoadError when the file is not YAML the loader reads."""
    parse(file, text, expand_lists=False)
    result = MigratedFile(file, text, text)
    pieces: list[str] = []
    for chunk in split_documents(text):
        documents = parse(file, chunk, expand_lists=False)
        data = documents[0].data if len(documents) == 1 else None
        key = _identity(data)
        if key is None or key not in replacements:
            pieces.append(chunk)
            continue
        crlf = chunk.count("\r\n") * 2 >= chunk.count("\n") > 0  # most lines end in CRLF: keep it so
        piece, relocated = _migrate_chunk(file, chunk.replace("\r\n", "\n"), replacements[key], f"{key[0]} {key[1]}")
        pieces.append(piece.replace("\n", "\r\n") if crlf else piece)
        result.migrated.append(key)
        result.relocated_comments += relocated
    result.updated = "".join(pieces)
    return result


def _identity(data: Any) -> tuple[str, str] | None:
    if not isinstance(data, Mapping) or not isinstance(data.get("metadata"), Mapping):
        return None
    return str(data.get("kind")), str(data["metadata"].get("name"))


def writable_identities(file: str, text: str) -> set[tuple[str, str]]:
    """The (kind, name) of each object that is a document of its own in `text` (what `rewrite_text` can replace);
    raises LoadError when the file is not YAML the loader reads."""
    parse(file, text, expand_lists=False)
    found: set[tuple[str, str]] = set()
    for chunk in split_documents(text):
        documents = parse(file, chunk, expand_lists=False)
        identity = _identity(documents[0].data) if len(documents) == 1 else None
        if identity is not None:
            found.add(identity)
    return found
