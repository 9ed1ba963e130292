"""Read policy files into documents that remember where every node came from.

Parsing is libyaml (PyYAML's C composer) with YAML 1.1 scalars — what kubectl's YAML reader accepts — and a
lean node-to-data conversion of our own, so that one pass yields both the data and the node tree that maps
a field path back to its line and column. Round-trip rewriting (fmt, pin) uses ruamel.yaml elsewhere.

Hostile input is refused with a `LoadError` (reported as `parse-error`), never a traceback: files over a size
bound, binary or non-UTF-8 bytes, YAML errors, aliases that expand beyond a node budget (YAML bombs),
duplicate keys, keys that are not scalars, and a symbolic link that leads out of its repository (`confinement`).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from karpenter_policy.api.violations import PARSE_ERROR
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.checks.source.confinement import escaping_link
from karpenter_policy.checks.source.exclusion import excluded, excluded_by

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_NODES_PER_FILE = 200_000
MAX_DEPTH = 500
POLICY_SUFFIXES = (".yaml", ".yml")
TEMPLATE_SUFFIX = ".yaml.j2"
#: The PATHS argument that means standard input (`helm template … | karpenter-policy check -`), and the name its
#: findings carry.
STDIN_ARGUMENT = "-"
STDIN = "<stdin>"

_STR = "tag:yaml.org,2002:str"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_BINARY = "tag:yaml.org,2002:binary"
_MERGE = "tag:yaml.org,2002:merge"
_TEXT_TAGS = frozenset({_STR, _TIMESTAMP, _BINARY})
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
_SCALARS = yaml.constructor.SafeConstructor()
_SCALAR_CONSTRUCTORS = _SCALARS.yaml_constructors
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SEQ: str = _BaseLoader.DEFAULT_SEQUENCE_TAG
_MAP: str = _BaseLoader.DEFAULT_MAPPING_TAG
#: Bound of the remembered tags of plain scalars (cleared when full: distinct scalars cannot grow it).
_PLAIN_TAGS_MAX = 16_384
_plain_tags: dict[str, str] = {}
#: The values of scalars that are not text (int, float, bool, null), by their tag and text: a function of the two
#: (`SafeConstructor`'s), immutable, and files repeat them (`cpu: 1000`, `true`); bounded as `_plain_tags`.
_scalar_values: dict[tuple[str, str], Any] = {}
_VALUE_TAGS = frozenset({f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null")})
_UNKNOWN = object()


class _Loader(_BaseLoader):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's when built with it) with its tag resolution as it is for a safe loader,
    which has no path resolvers, but cheaper: the composer asks it for every node (`resolve`, and
    `descend_resolver` / `ascend_resolver` around each), and files repeat the same keys and values. A plain
    scalar's tag is a function of its text alone (YAML 1.1's implicit resolvers: int, float, bool, null,
    timestamp, ...), so it is remembered by its text; any other scalar is a string, a sequence or mapping the
    default collection tag, as `BaseResolver.resolve` answers without path resolvers."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if not implicit[0]:
                return _STR
            tag = _plain_tags.get(value)
            if tag is None:
                tag = str(_BaseLoader.resolve(self, kind, value, implicit))
                if len(_plain_tags) >= _PLAIN_TAGS_MAX:
                    _plain_tags.clear()
                _plain_tags[value] = tag
            return tag
        return _SEQ if kind is SequenceNode else _MAP

    # A safe loader has no path resolvers: nothing to do around each node. The composer calls these twice a node,
    # so they are no-ops of C (`slice(parent, index)`, `tuple()`: an object made and dropped), not Python
    # functions: a Python call costs more than the node's own scalar (docs/architecture.md, "Design notes").
    descend_resolver = slice
    ascend_resolver = tuple


class LoadError(Exception):
    """A file that cannot be read as YAML; `line`/`column` are 1-based (0 when unknown)."""

    rule: str = PARSE_ERROR  # the finding's rule id (templating.TemplateError: template-error)

    def __init__(self, file: str, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.file, self.message, self.line, self.column = file, message, line, column


class UnreadableFile(LoadError):
    """The file could not be opened at all (missing, a permission problem): the tool cannot run on it."""


@dataclass(slots=True)
class Document:
    """One YAML document (or one item of a `kind: List`) with its node tree for positions."""

    file: str
    index: int
    data: Any
    node: Node = field(repr=False)
    _keys: dict[int, dict[str, tuple[Node, Node]]] = field(default_factory=dict, init=False, repr=False)

    def _entry(self, mapping: MappingNode, key: str) -> tuple[Node, Node] | None:
        """The (key, value) nodes of `key` in `mapping`; large mappings get an index, so that placing many
        findings in one mapping stays linear."""
        if len(mapping.value) <= 16:
            for entry in mapping.value:
                if entry[0].value == key:
                    return entry  # type: ignore[no-any-return]
            return None
        index = self._keys.get(id(mapping))
        if index is None:
            index = self._keys[id(mapping)] = {}
            for k, v in mapping.value:
                index.setdefault(k.value, (k, v))
        return index.get(key)

    def text_position(self, path: FieldPath, line: int, column: int) -> tuple[int, int]:
        """The file's line and column of (`line`, `column`, 1-based) in the text of the string at `path`: exact in a
        literal block scalar (`userData: |`), whose lines are the file's; else the string's own position."""
        node = self._node(path)
        if not isinstance(node, ScalarNode) or node.style != "|" or line < 1:
            return self.position(path)
        file_line = node.start_mark.line + 1 + line
        return file_line, self._indentation(file_line, node.start_mark.column) + column

    def _indentation(self, line: int, fallback: int) -> int:
        """The indentation of the file's 1-based `line` (re-read: the node tree keeps no text), else `fallback`."""
        if self.file == STDIN:
            return fallback
        try:
            with open(self.file, encoding="utf-8", errors="replace") as handle:
                for number, text in enumerate(handle, start=1):
                    if number == line:
                        return len(text) - len(text.lstrip(" "))
        except OSError:
            pass
        return fallback

    def _node(self, path: FieldPath) -> Node | None:
        """The node at `path`, None when the document has no such node."""
        node: Node | None = self.node
        for part in path:
            if isinstance(node, MappingNode):
                entry = self._entry(node, str(part))
                node = entry[1] if entry is not None else None
            elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
            else:
                return None
        return node

    def position(self, path: FieldPath, at_key: bool = False) -> tuple[int, int]:
        """1-based line and column of the node at `path` (its key with `at_key`); the nearest existing
        ancestor when the path runs past what the document has (a missing field).

        A block mapping or list that is the value of a key is placed at its key (`spec:`, `values:`), the line a
        reader looks at, not at its first child's line.
        """
        node = self.node
        key_node: Node | None = None
        complete = True
        for part in path:
            child: Node | None = None
            if isinstance(node, MappingNode):
                entry = self._entry(node, str(part))
                if entry is not None:
                    key_node, child = entry
            elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                key_node, child = None, node.value[part]
            if child is None:
                complete = False
                break
            node = child
        if key_node is not None and (
            (at_key and complete) or (isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style)
        ):
            node = key_node
        mark = node.start_mark
        return mark.line + 1, mark.column + 1


def is_policy_path(path: str) -> bool:
    """`path` (forward slashes, from where a search starts) is one `discover` reads when it finds it in a directory:
    a policy name (`*.yaml`, `*.yml`, `*.yaml.j2`), nothing hidden along it."""
    parts = path.split("/")
    return parts[-1].endswith((*POLICY_SUFFIXES, TEMPLATE_SUFFIX)) and not any(p.startswith(".") for p in parts)


def discover(paths: Iterable[str], exclude: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The policy files under `paths` (directories searched recursively, hidden ones skipped), sorted and
    de-duplicated, and the paths that do not exist. `-` is standard input, named `STDIN`; paths matching an
    `exclude` pattern (`exclusion`) are left out, files named explicitly too.

    Nothing unreadable is skipped silently: a directory that cannot be listed and a policy-named entry that is not
    a readable file (a dangling or looping symbolic link, a FIFO) are returned with the files, and reading them
    raises `UnreadableFile` — the run cannot pass on a tree it could not read."""
    found: set[str] = set()
    missing: list[str] = []
    for raw in paths:
        if raw == STDIN_ARGUMENT:
            found.add(STDIN)
            continue
        path = Path(raw)
        if excluded(raw, exclude):
            continue
        if path.is_dir():
            for root, dirs, files in os.walk(path, onerror=lambda error: found.add(os.path.normpath(error.filename))):
                dirs[:] = sorted(
                    d for d in dirs if not d.startswith(".") and not excluded(os.path.join(root, d), exclude)
                )
                for name in files:
                    if is_policy_path(name):
                        file = os.path.normpath(os.path.join(root, name))
                        if not excluded(file, exclude):
                            found.add(file)
        elif path.exists():
            normal = os.path.normpath(raw)
            found.add(normal if normal not in (STDIN, STDIN_ARGUMENT) else os.path.join(os.curdir, normal))
        else:
            missing.append(raw)
    return sorted(found), missing


def exclusion_notes(paths: Sequence[str], exclude: Sequence[str], verb: str) -> tuple[list[str], str | None]:
    """What `--exclude` does to `paths` that a user must be told: a note for each path named on the command line
    that a pattern leaves out, and an error (the run must not pass on nothing) when no policy file is left to
    `verb` although the paths exist — all of them excluded, or none there at all."""
    notes = [
        f"note: {path} is named on the command line but --exclude {pattern} leaves it out: it is not read"
        for path in paths
        if path != STDIN_ARGUMENT and (pattern := excluded_by(path, exclude)) is not None
    ]
    files, missing = discover(paths, exclude)
    if files or missing:
        return notes, None
    shown = ", ".join(paths)
    everything, _ = discover(paths)
    if everything:
        return notes, f"nothing to {verb}: --exclude leaves out every policy file under {shown} ({len(everything)})"
    suffixes = ", ".join(f"*{s}" for s in (*POLICY_SUFFIXES, TEMPLATE_SUFFIX))
    return notes, f"nothing to {verb}: no policy files ({suffixes}) under {shown}"


_stdin: list[bytes] = []  # standard input, once read: it cannot be read twice


def _read_stdin(max_bytes: int) -> bytes:
    if not _stdin:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise UnreadableFile(STDIN, "cannot read standard input: there is none", 0, 0)
        try:
            _stdin.append(stream.read(max_bytes + 1))
        except (OSError, ValueError) as error:
            raise UnreadableFile(STDIN, f"cannot read standard input: {error}", 0, 0) from None
    return _stdin[0]


def read_text(file: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, refusing what is too large, binary or not UTF-8, and a symbolic link that leads out of its
    repository (`confinement`). `STDIN` is standard input."""
    if file == STDIN:
        return _decode(file, _read_stdin(max_bytes), max_bytes)
    try:
        status = os.lstat(file)  # the file itself: whether it is a link, and otherwise its type and size
        linked = stat.S_ISLNK(status.st_mode)
        if linked:
            if (root := escaping_link(file)) is not None:  # never opened: nothing of it is parsed or printed
                raise UnreadableFile(
                    file,
                    f"not read: a symbolic link to a file outside the repository {root} (docs/hardening-inputs.md)",
                    0,
                    0,
                )
            status = os.stat(file)
        mode = status.st_mode
        if stat.S_ISDIR(mode):  # a directory `discover` could not list: say why
            os.scandir(file).close()
            raise UnreadableFile(file, "cannot read directory", 0, 0)
        if not stat.S_ISREG(mode):  # a FIFO or a device would block or never end
            raise UnreadableFile(file, "not a regular file", 0, 0)
        raw = _read_bounded(file, status.st_size, max_bytes, follow=linked)
    except OSError as error:
        what = "directory" if os.path.isdir(file) else "file"
        raise UnreadableFile(file, f"cannot read {what}: {error.strerror or error}", 0, 0) from None
    return _decode(file, raw, max_bytes)


def _read_bounded(file: str, size: int, max_bytes: int, *, follow: bool = False) -> bytes:
    """The first `max_bytes + 1` bytes of `file` (all of it when shorter), asked for in a buffer of the `size` it
    was seen to have: a read of `max_bytes + 1` allocates that much (4 MiB, each file; mapped and unmapped), which
    cost more than the reading. A file that grew since is read on to the bound, so the bytes are those of one read
    of `max_bytes + 1`. `follow` False: the file was no link when looked at, and one put in its place since is not
    followed (O_NOFOLLOW: an error, never a file outside the repository read)."""
    limit = max_bytes + 1
    descriptor = os.open(file, os.O_RDONLY | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    try:
        parts: list[bytes] = []
        total = 0
        request = min(size, max_bytes) + 1  # one more than seen: a file that grew since shows in it
        while total < limit:
            part = os.read(descriptor, min(request, limit - total))
            if not part:
                break
            parts.append(part)
            total += len(part)
            request *= 2  # the end (an empty read), or more than was seen: in growing steps
    finally:
        os.close(descriptor)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _decode(file: str, raw: bytes, max_bytes: int) -> str:
    if len(raw) > max_bytes:
        raise LoadError(file, f"file is larger than {max_bytes} bytes; policy files are small, is this the right file?")
    if b"\x00" in raw:
        raise LoadError(file, "binary file (it contains NUL bytes), not YAML")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise LoadError(
            file, f"not UTF-8 text: byte 0x{raw[error.start]:02x} cannot be decoded", line, column
        ) from None


def _short(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


class _OverBudget(Exception):
    """The node budget ran out while converting (the location is worked out afterwards)."""


def _bomb_site(root: Node) -> tuple[int, int]:
    """Where a document's expansion explodes: follow the heaviest branch from the root down to the key whose
    value reuses anchored nodes (an alias carries its anchor's position, so the key is the useful place)."""
    sizes: dict[int, int] = {}
    parents: dict[int, int] = {}

    def size(node: Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = 1  # guards recursive aliases
        children = _children(node)
        for _, child in children:
            parents[id(child)] = parents.get(id(child), 0) + 1
        sizes[id(node)] = 1 + sum(size(child) for _, child in children)
        return sizes[id(node)]

    size(root)
    node, site = root, root.start_mark
    while children := _children(node):
        key, heaviest = max(children, key=lambda pair: sizes[id(pair[1])])
        if key is not None:
            site = key.start_mark
        if parents.get(id(heaviest), 0) > 1:
            break
        node = heaviest
    return site.line + 1, site.column + 1


def _children(node: Node) -> list[tuple[Node | None, Node]]:
    if isinstance(node, MappingNode):
        return [(k, v) for k, v in node.value]
    if isinstance(node, SequenceNode):
        return [(None, item) for item in node.value]
    return []


class _Converter:
    """Node tree → plain data (dict/list/str/int/float/bool/None), within a node budget."""

    __slots__ = ("file", "budget")

    def __init__(self, file: str, budget: int) -> None:
        self.file, self.budget = file, budget

    def convert(self, node: Node) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _OverBudget
        cls = node.__class__
        if cls is ScalarNode:
            tag = node.tag
            if tag in _TEXT_TAGS:  # timestamps and binary stay text, as in JSON
                return node.value
            known = _scalar_values.get((tag, node.value), _UNKNOWN)
            if known is not _UNKNOWN:
                return known
            constructor = _SCALAR_CONSTRUCTORS.get(tag)
            if constructor is None:
                raise self._error(node, f"unsupported YAML tag {tag}: Kubernetes manifests use plain YAML")
            try:
                value = constructor(_SCALARS, node)
            except (ValueError, KeyError, IndexError, TypeError, ArithmeticError):
                what = tag.rsplit(":", 1)[-1]
                raise self._error(node, f"{_short(node.value)} is not a valid YAML {what}") from None
            if tag in _VALUE_TAGS:
                if len(_scalar_values) >= _PLAIN_TAGS_MAX:
                    _scalar_values.clear()
                _scalar_values[(tag, node.value)] = value
            return value
        if node.tag not in _COLLECTION_TAGS:
            raise self._error(node, f"unsupported YAML tag {node.tag}: Kubernetes manifests use plain YAML")
        if cls is MappingNode:
            result: dict[str, Any] = {}
            merged: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    merged = self._merge(value_node) | merged
                    continue
                if key_node.__class__ is not ScalarNode:
                    raise self._error(key_node, "a mapping key must be a plain scalar, not a list or mapping")
                key = key_node.value
                if key in result:
                    first = next(k for k, _ in node.value if k.value == key)
                    raise self._error(key_node, f"duplicate key {key!r} (first at line {first.start_mark.line + 1})")
                if value_node.__class__ is ScalarNode and value_node.tag in _TEXT_TAGS:  # `convert`'s first case,
                    self.budget -= 1  # without a call: most values are text
                    if self.budget < 0:
                        raise _OverBudget
                    result[key] = value_node.value
                else:
                    result[key] = self.convert(value_node)
            return {**merged, **result} if merged else result
        return [self.convert(item) for item in node.value]

    def _merge(self, node: Node) -> dict[str, Any]:
        """A merge key's value (`<<: *defaults`, `<<: [*a, *b]`): the keys it brings, the first source winning."""
        sources = node.value if isinstance(node, SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in reversed(sources):
            data = self.convert(source)
            if not isinstance(data, dict):
                raise self._error(source, "a merge key (<<) needs a mapping or a list of mappings")
            merged.update(data)
        return merged

    def _error(self, node: Node, message: str) -> LoadError:
        return LoadError(self.file, message, node.start_mark.line + 1, node.start_mark.column + 1)


# Contexts whose start (an opening quote or bracket) is where the mistake is, not where the parser gave up.
_OPENING_CONTEXTS = ("while scanning a quoted scalar", "while parsing a flow", "while scanning a block scalar")


def _yaml_error(file: str, text: str, error: yaml.YAMLError) -> LoadError:
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if context and context.startswith(_OPENING_CONTEXTS) and getattr(error, "context_mark", None) is not None:
        mark = error.context_mark  # type: ignore[attr-defined]
    message = f"{context}: {problem}" if context else str(problem)
    if mark is not None:
        lines = text.splitlines()
        line = lines[mark.line] if mark.line < len(lines) else ""
        if "\t" in line[: mark.column + 1]:
            message += " (YAML does not allow tabs for indentation: use spaces)"
    if mark is None:
        return LoadError(file, f"invalid YAML: {message}")
    last_line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    if mark.line + 1 > last_line:
        return LoadError(file, f"invalid YAML: {message}", last_line, 1)
    return LoadError(file, f"invalid YAML: {message}", mark.line + 1, mark.column + 1)


def _too_deep(text: str) -> tuple[int, int] | None:
    """Where `text` nests deeper than MAX_DEPTH, if it does.

    libyaml's composer recurses on the C stack without a limit (tens of thousands of levels crash the process),
    so a file that *could* nest that deep — it needs one indicator character per level — is first walked as an
    event stream, which is not recursive. Ordinary files have far fewer indicators and skip the walk.
    """
    if len(text) < 4 * MAX_DEPTH or sum(text.count(c) for c in "[{-:?") < 4 * MAX_DEPTH:
        return None  # a text shorter than that has fewer indicators: not counted
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    return None


def parse(file: str, text: str, *, expand_lists: bool = True) -> list[Document]:
    """Every non-empty document of `text`; items of a `kind: List` become documents of their own (unless not
    `expand_lists`: a values file is data, not manifests)."""
    converter = _Converter(file, MAX_NODES_PER_FILE)
    documents: list[Document] = []
    try:
        if (where := _too_deep(text)) is not None:
            raise LoadError(file, f"the document nests deeper than {MAX_DEPTH} levels", *where)
        for index, node in enumerate(yaml.compose_all(text, Loader=_Loader)):
            if node is None:
                continue
            try:
                data = converter.convert(node)
            except _OverBudget:
                raise LoadError(
                    file,
                    f"the document expands to more than {MAX_NODES_PER_FILE} nodes: aliases that multiply "
                    "(a 'YAML bomb') are refused",
                    *_bomb_site(node),
                ) from None
            if data is None:  # an empty document (`---` followed by nothing): kubectl skips it too
                continue
            if expand_lists:
                documents.extend(_expand_list(file, index, data, node))
            else:
                documents.append(Document(file, index, data, node))
    except yaml.YAMLError as error:
        raise _yaml_error(file, text, error) from None
    except RecursionError:
        raise LoadError(file, "the document nests too deeply") from None
    return documents


def _expand_list(file: str, index: int, data: Any, node: Node) -> Iterator[Document]:
    items = data.get("items") if isinstance(data, dict) and data.get("kind") == "List" else None
    items_node = _value_node(node, "items") if isinstance(items, list) else None
    if isinstance(items, list) and isinstance(items_node, SequenceNode):
        for item, item_node in zip(items, items_node.value, strict=True):
            yield Document(file, index, item, item_node)
    else:
        yield Document(file, index, data, node)


def _value_node(node: Node, key: str) -> Node | None:
    """The node of `key`'s value in a mapping node, found as the converter finds it: the mapping's own key
    first, then the merge keys (`<<: *defaults`, `<<: [*a, *b]`) in order, each source in order."""
    if not isinstance(node, MappingNode):
        return None
    merges: list[Node] = []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            merges += value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        elif key_node.value == key:
            found: Node = value_node
            return found
    for source in merges:
        merged = _value_node(source, key)
        if merged is not None:
            return merged
    return None

