"""Compiled constraint sets edited by hand *with their hashes fixed* — what a careless edit that also reran the
hash, or a hostile one, leaves in a directory or a ConfigMap — so that a reader's checks of the content, not its
hash check, are what stands between the edit and the controller.

`tamper_directory` edits a `compile -o` directory (file form) in place; `tamper_wire` edits the ConfigMap data
`compile` writes (compact wire form). Each takes `edit` (the set's document, changed in place) and optionally
`edit_index` (the index document). A content JSON cannot spell (`inf`, `nan`) keeps the hash it had and is written
as Python's json writes it (`Infinity`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from karpenter_policy.api.constraintset import content_hash

Edit = Callable[[dict[str, Any]], None]
#: Fields of a document its hash does not cover.
_UNHASHED = ("hash", "instanceTypes", "types", "nodeTemplates", "admittedBits")


def rehash(document: dict[str, Any], hashed: dict[str, Any] | None = None) -> str:
    """`document` with its hash recomputed over `hashed` (default: the document itself) less what no hash covers;
    the new hash (the old one when the content has no canonical JSON: inf, nan, keys of several types)."""
    content = {k: v for k, v in (document if hashed is None else hashed).items() if k not in _UNHASHED}
    with contextlib.suppress(ValueError, TypeError):  # TypeError: keys of several types cannot be sorted
        document["hash"] = content_hash(content)
    return str(document.get("hash"))


def _dump(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False)


def _fix_index(index: dict[str, Any], name: str, digest: str, edit_index: Edit | None) -> None:
    entries = index.get("sets")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            entry["hash"] = digest
    if edit_index is not None:
        edit_index(index)
    rehash(index)


def tamper_directory(
    build: Path, name: str, edit: Edit | None = None, edit_index: Edit | None = None, *, copy_to: Path | None = None
) -> Path:
    """Edit the set `name` (and the index) of `compile -o` output `build` (or of a copy of it at `copy_to`),
    fixing both hashes; the directory."""
    if copy_to is not None:
        shutil.copytree(build, copy_to)
        build = copy_to
    folder = build / "constraintsets"
    path = folder / f"{name}.json"
    document = json.loads(path.read_text())
    if edit is not None:
        edit(document)
    digest = rehash(document)
    path.write_text(_dump(document))
    index = json.loads((folder / "index.json").read_text())
    _fix_index(index, name, digest, edit_index)
    (folder / "index.json").write_text(_dump(index))
    return build


def tamper_wire(data: dict[str, str], build: Path, name: str, edit: Edit) -> dict[str, str]:
    """The constraint-set ConfigMap's `data` with the set `name` edited the same way in its wire form and in its
    file form under `build` (whose content the wire hash covers), both hashes fixed."""
    document = json.loads((build / "constraintsets" / f"{name}.json").read_text())
    edit(document)
    wire = json.loads(data[f"{name}.json"])
    edit(wire)
    digest = rehash(wire, document)
    index = json.loads(data["index.json"])
    _fix_index(index, name, digest, None)
    return {**data, f"{name}.json": _dump(wire), "index.json": _dump(index)}
