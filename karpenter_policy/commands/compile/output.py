"""`compile -o DIR`: write compile's files into DIR, replacing and removing only files compile wrote there.

DIR may hold other files — a `.git/`, a README: they are never touched. What compile owns is recorded in
DIR/.karpenter-policy-output (JSON: each file's relative path and SHA-256), DIR/kustomization.yaml (the list of
the manifests, for kustomize and Flux) among them. A run

* refuses DIR when it is a symbolic link or a file; when, symbolic links resolved, it is an input path, lies
  inside one (its files would be read back as policies) or contains one (`compile repo/policies -o repo`); when
  it is not empty and holds no record (whatever else it holds: a `constraintsets/index.json` does not make the
  files next to it compile's); when a file compile would write exists there without being compile's, or a
  directory on the way is a symbolic link (writes stay inside DIR);
* stages every new file next to its target first (`filestaging`): if one cannot be written, nothing changed;
* then records the ownership of old and new files, renames the new files into place (the constraint-set index
  last: a reader that sees the new index finds the sets it lists), removes compile's files that are no longer
  produced, and records the final list. A run killed half-way leaves every file whole, and owned, so the next
  run finishes the job.

Only a record names compile's files. An output written before the record existed (constraintsets/index.json, no
record) is refused like any other directory that is not empty: guessing its files from their names
(`constraintsets/*.json`, `manifests/*.yaml`) deleted files of the user's that happened to match.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpenter_policy.api.constraintset import INDEX_KEY
from karpenter_policy.commands.filestaging import (
    StagedFile,
    current_umask,
    discard_all,
    remove_leftovers,
    stage,
    sync_directory,
)

OWNERSHIP_FILE = ".karpenter-policy-output"
SETS_DIR = "constraintsets"
MANIFESTS_DIR = "manifests"
#: The kustomization listing the manifests (`kubectl apply -k DIR`, a resource of a Flux kustomization).
KUSTOMIZATION_FILE = "kustomization.yaml"
#: The file every output has (the constraint-set index): written last. A directory with it and without a record
#: may be an output of an earlier version: refused all the same, with a word on how to start again.
INDEX_FILE = f"{SETS_DIR}/{INDEX_KEY}"


class OutputError(Exception):
    """The output directory cannot be written or replaced (the tool could not run: exit 2)."""


def _digest(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


def _inside(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def _target(out_dir: str) -> str:
    """The absolute path of `out_dir`, which must be a directory or nothing yet (not a symbolic link)."""
    target = os.path.abspath(out_dir)
    if os.path.islink(target):
        raise OutputError(f"{out_dir} is a symbolic link; give the directory it points to")
    if os.path.lexists(target) and not os.path.isdir(target):
        raise OutputError(f"{out_dir} exists and is not a directory")
    return target


def check_output_dir(out_dir: str, paths: Iterable[str]) -> None:
    """Refuse (OutputError) an output directory compile must not write: see the module docstring."""
    target = _target(out_dir)
    real_target = os.path.realpath(target)
    for path in paths:
        if not os.path.exists(path):
            continue  # reported by the checks
        source = os.path.realpath(path)
        if source == real_target:
            raise OutputError(f"the output directory {out_dir} is the input path {path}; write it elsewhere")
        if os.path.isdir(source) and _inside(real_target, source):
            raise OutputError(
                f"the output directory {out_dir} is inside the input path {path}: its manifests would be read back "
                "as policies; write it elsewhere"
            )
        if _inside(source, real_target):
            raise OutputError(
                f"the output directory {out_dir} contains the input path {path}: compile would write among the "
                "policies; write it elsewhere"
            )
    if os.path.isdir(target):
        owned_files(target, out_dir)


def _valid_relative(path: object) -> bool:
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    return path != OWNERSHIP_FILE and all(part not in ("", ".", "..") for part in path.split("/"))


def owned_files(target: str, out_dir: str) -> dict[str, str | None]:
    """The files of `target` compile owns (relative path → SHA-256 when recorded). Raises OutputError for a
    directory that is not empty and is not an output, or an unreadable or malformed record."""
    record = os.path.join(target, OWNERSHIP_FILE)
    if os.path.lexists(record):
        try:
            with open(record, "rb") as handle:
                data = json.loads(handle.read(16 * 1024 * 1024))
        except (OSError, ValueError) as error:
            reason = error.strerror if isinstance(error, OSError) else f"not JSON ({error})"
            raise OutputError(f"cannot read {os.path.join(out_dir, OWNERSHIP_FILE)}: {reason}") from None
        files = data.get("files") if isinstance(data, dict) else None
        if not isinstance(files, dict) or not all(
            _valid_relative(k) and (v is None or isinstance(v, str)) for k, v in files.items()
        ):
            raise OutputError(
                f"{os.path.join(out_dir, OWNERSHIP_FILE)} is not a record of compile's files; restore it, or "
                "remove it together with the files compile wrote"
            )
        return dict(files)
    try:
        entries = os.listdir(target)
    except OSError as error:
        raise OutputError(f"cannot read {out_dir}: {error.strerror or error}") from None
    if not entries:
        return {}
    if os.path.isfile(os.path.join(target, *INDEX_FILE.split("/"))):
        raise OutputError(
            f"{out_dir} has {INDEX_FILE} but no {OWNERSHIP_FILE} (the record of compile's files): an output of an "
            "earlier version cannot be told from your files, so nothing is changed; remove the old output or give an "
            "empty or new directory"
        )
    raise OutputError(
        f"{out_dir} is not empty and holds no karpenter-policy output (no {OWNERSHIP_FILE}); refusing to write "
        "into it: give an empty or new directory"
    )


@dataclass(slots=True)
class OutputChanges:
    """What a write did, by relative path."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)  # replaced or removed although changed since compile wrote them

    def summary(self) -> str:
        """One line of counts, then the files replaced, removed, and edited by someone else before."""
        total = len(self.added) + len(self.replaced) + len(self.unchanged)
        counts = [f"{len(self.added)} added", f"{len(self.replaced)} replaced", f"{len(self.unchanged)} unchanged"]
        if self.removed:
            counts.append(f"{len(self.removed)} removed")
        lines = [f"{total} files: {', '.join(counts)}"]
        for label, names in (
            ("replaced", self.replaced),
            ("removed (no longer produced)", self.removed),
            ("overwritten or removed although edited since compile wrote them", self.edited),
        ):
            if names:
                lines.append(f"  {label}: {', '.join(sorted(names))}")
        return "\n".join(lines)


def _check_path(target: str, relative: str, out_dir: str) -> str:
    """The full path of `relative` in `target`, every directory on the way a real directory (or missing)."""
    current = target
    for part in relative.split("/")[:-1]:
        current = os.path.join(current, part)
        if os.path.islink(current) or (os.path.lexists(current) and not os.path.isdir(current)):
            shown = os.path.join(out_dir, os.path.relpath(current, target))
            what = "a symbolic link" if os.path.islink(current) else "not a directory"
            raise OutputError(f"{shown} is {what}; compile writes only real directories inside {out_dir}")
    return os.path.join(target, *relative.split("/"))


def _read(full: str) -> bytes | None:
    try:
        with open(full, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _record(files: Mapping[str, str | None]) -> bytes:
    document = {
        "generator": "karpenter-policy compile",
        "about": "The files compile wrote here and may replace or remove; every other file is left alone.",
        "files": dict(sorted(files.items())),
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")


@dataclass(slots=True)
class _Plan:
    writes: dict[str, bytes]  # relative path → content, in the order they are renamed into place
    stale: list[str]
    changes: OutputChanges
    modes: dict[str, int]


def _plan(files: Mapping[str, bytes], target: str, out_dir: str, owned: Mapping[str, str | None]) -> _Plan:
    changes = OutputChanges()
    writes: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    # the index last: a reader (the webhook) that sees the new index finds every set it lists in place
    for relative in sorted(files, key=lambda r: (r == INDEX_FILE, r)):
        if not _valid_relative(relative):
            raise OutputError(f"refusing to write {relative!r}: not a plain relative path")
        full = _check_path(target, relative, out_dir)
        content = files[relative]
        if not os.path.lexists(full):
            changes.added.append(relative)
            writes[relative] = content
            continue
        shown = os.path.join(out_dir, *relative.split("/"))
        if os.path.isdir(full) and not os.path.islink(full):
            raise OutputError(f"{shown} is a directory; compile writes a file there")
        if relative not in owned:
            if relative == KUSTOMIZATION_FILE:
                raise OutputError(
                    f"{shown} exists and was not written by compile, which now writes it with the list of its "
                    "manifests: move yours next to the output directory and list the directory under its "
                    "resources, then compile again"
                )
            raise OutputError(f"{shown} exists and was not written by compile; move it away, then compile again")
        current = _read(full) if not os.path.islink(full) else None
        if current == content:
            changes.unchanged.append(relative)
            continue
        recorded = owned[relative]
        if recorded is not None and current is not None and _digest(current) != recorded:
            changes.edited.append(relative)
        if not os.path.islink(full):
            modes[relative] = stat.S_IMODE(os.stat(full).st_mode)
        changes.replaced.append(relative)
        writes[relative] = content
    stale = []
    for relative in sorted(set(owned) - set(files)):
        full = _check_path(target, relative, out_dir)
        if not os.path.lexists(full) or (os.path.isdir(full) and not os.path.islink(full)):
            continue
        recorded = owned[relative]
        current = _read(full)
        if recorded is not None and current is not None and _digest(current) != recorded:
            changes.edited.append(relative)
        stale.append(relative)
    return _Plan(writes, stale, changes, modes)


def _make_directories(target: str, relatives: Iterable[str]) -> list[str]:
    """Create the directories the files need (DIR too); the ones created, parents first."""
    created: list[str] = []
    wanted = {target} | {os.path.dirname(os.path.join(target, *r.split("/"))) for r in relatives}
    for directory in sorted(wanted, key=len):
        missing: list[str] = []
        current = directory
        while not os.path.lexists(current):
            missing.append(current)
            current = os.path.dirname(current)
        for path in reversed(missing):
            os.mkdir(path)
            created.append(path)
    return created


def _remove_empty(directories: Iterable[str]) -> None:
    for directory in sorted(set(directories), key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def write_output(files: Mapping[str, bytes], out_dir: str) -> OutputChanges:
    """Write `files` (relative POSIX path → content) into `out_dir` as the module docstring says; what changed.
    Raises OutputError: before anything changed, or — should a rename fail — saying what was and was not
    replaced."""
    target = _target(out_dir)
    owned = owned_files(target, out_dir) if os.path.isdir(target) else {}
    plan = _plan(files, target, out_dir, owned)
    changes = plan.changes
    new_mode = 0o666 & ~current_umask()
    created: list[str] = []
    staged: dict[str, StagedFile] = {}
    record_path = os.path.join(target, OWNERSHIP_FILE)
    try:
        created = _make_directories(target, files)
        remove_leftovers(os.path.join(target, *r.split("/")) for r in [*files, *owned, OWNERSHIP_FILE])
        for relative, content in plan.writes.items():
            full = os.path.join(target, *relative.split("/"))
            staged[relative] = stage(full, content, plan.modes.get(relative, new_mode))
        # ownership first covers old and new files: a run stopped half-way leaves nothing compile cannot replace
        interim = {**owned, **{r: None if r in plan.writes else _digest(files[r]) for r in files}}
        record = stage(record_path, _record(interim), new_mode)
    except OSError as error:
        discard_all(staged.values())
        _remove_empty(created)
        raise OutputError(f"cannot write {out_dir}: {error.strerror or error}; nothing was changed") from None
    done: list[str] = []
    try:
        record.commit()
        for relative, item in staged.items():
            item.commit()
            done.append(relative)
        removed_dirs = []
        for relative in plan.stale:
            full = os.path.join(target, *relative.split("/"))
            os.unlink(full)
            changes.removed.append(relative)
            parent = os.path.dirname(full)
            while parent != target and _inside(parent, target):
                removed_dirs.append(parent)
                parent = os.path.dirname(parent)
        _remove_empty(removed_dirs)
        stage(record_path, _record({r: _digest(c) for r, c in files.items()}), new_mode).commit()
    except OSError as error:
        discard_all(item for relative, item in staged.items() if relative not in done)
        not_done = [r for r in plan.writes if r not in done]
        raise OutputError(
            f"cannot write {out_dir}: {error.strerror or error}; replaced: {', '.join(done) or 'nothing'}; "
            f"not replaced: {', '.join(not_done) or 'nothing'}; every file is whole: compile again to finish"
        ) from None
    for directory in {os.path.dirname(os.path.join(target, *r.split("/"))) for r in plan.writes} | {target}:
        sync_directory(directory)
    return changes
