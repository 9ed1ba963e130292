"""Replace files without ever leaving one half-written: stage, then rename into place.

Each new content is first written in full to a hidden temporary file next to its target (same directory, hence
same file system), flushed to disk, given the mode (and owner) it must have; only then is it renamed over the
target, which is atomic: a reader sees the old file or the new one, never a mix. A writer that stages every file
of a change before renaming any finds out that one cannot be written while nothing has changed yet (`compile -o`,
`pin --write`, `fmt --write`: `rewrite_all`).
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

TEMPORARY_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class StagedFile:
    """New content for `target`, complete on disk in `temporary` (next to it) until `commit` renames it over."""

    target: str
    temporary: str

    def commit(self) -> None:
        """Put the staged content in place of the target (an atomic rename)."""
        os.replace(self.temporary, self.target)

    def discard(self) -> None:
        """Remove the staged temporary file (nothing when it is gone already)."""
        with contextlib.suppress(OSError):
            os.unlink(self.temporary)


def stage(target: str, content: bytes, mode: int, owner: tuple[int, int] | None = None) -> StagedFile:
    """Write `content` to a temporary file next to `target` with `mode` (and `owner` (uid, gid) when given);
    raises OSError (nothing is left behind then)."""
    directory = os.path.dirname(target) or os.curdir
    fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=TEMPORARY_SUFFIX, dir=directory)
    staged = StagedFile(target, temporary)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if owner is not None:
            os.chown(temporary, *owner)
        os.chmod(temporary, mode)  # after chown, which clears set-id bits
    except BaseException:
        staged.discard()
        raise
    return staged


def discard_all(staged: Iterable[StagedFile]) -> None:
    """Discard every staged file."""
    for item in staged:
        item.discard()


def is_leftover_of(name: str, target_name: str) -> bool:
    """True when `name` is the temporary file `stage` makes for a target called `target_name` (left behind by a
    run that was killed between staging and renaming)."""
    pattern = rf"\.{re.escape(target_name)}\.[a-z0-9_]{{8}}{re.escape(TEMPORARY_SUFFIX)}"
    return re.fullmatch(pattern, name) is not None


#: What a writer says of each temporary file `remove_leftovers` removed.
LEFTOVER_NOTE = "a temporary file an earlier run left when it was killed before renaming it into place"
_LEFTOVER_AFFIXES = 1 + 1 + 8 + len(TEMPORARY_SUFFIX)  # "." NAME "." 8 random characters ".tmp"


def remove_leftovers(files: Iterable[str]) -> list[str]:
    """Remove the temporary files that `stage` made for any of `files` (full paths) and a killed run left next
    to them; only names of `stage`'s own pattern (`.NAME.xxxxxxxx.tmp`) for one of these names are touched. The
    paths removed. Linear in the entries of the directories: each entry's target name is read off the entry."""
    by_directory: dict[str, set[str]] = {}
    for file in files:
        by_directory.setdefault(os.path.dirname(file) or os.curdir, set()).add(os.path.basename(file))
    removed: list[str] = []
    for directory, names in sorted(by_directory.items()):
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        for entry in sorted(entries):
            name = entry[1 : len(entry) - _LEFTOVER_AFFIXES + 1]
            if name in names and is_leftover_of(entry, name):
                path = os.path.join(directory, entry)
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    removed.append(path)
    return removed


def sync_directory(directory: str) -> None:
    """Flush a directory's entries (the renames in it) to disk; best effort (not every system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- rewriting files in place (pin --write, fmt --write) -----------------------------------------------------


class Rewrite(Protocol):
    """A file to replace: its text as it was read, and its new text."""

    @property
    def file(self) -> str:
        """The file rewritten."""

    @property
    def original(self) -> str:
        """Its text before."""

    @property
    def updated(self) -> str:
        """Its text after."""


def unified_diff(file: str, original: str, updated: str) -> str:
    """What rewriting `file` changes, as `diff -u` shows it (a/FILE, b/FILE)."""
    return "".join(difflib.unified_diff(_diff_lines(original), _diff_lines(updated), f"a/{file}", f"b/{file}"))


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


class NotWritable(Exception):
    """Why one file cannot be rewritten (the message completes "not written: ...")."""


def _as_read(raw: bytes) -> str | None:
    """The text `loader.read_text` makes of these bytes (a BOM dropped), None if they are not UTF-8."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _current(target: str) -> bytes:
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)  # a file swapped for a link meanwhile is not read
        with os.fdopen(fd, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise NotWritable(f"cannot read it again: {error.strerror or error}") from None


def _refuse_link(file: str, command: str) -> None:
    if os.path.islink(file):
        raise NotWritable(
            f"it is a symbolic link: {command} never writes through one (it could lead out of the repository); "
            "run it on the file the link points to, or --exclude the link"
        )


def _stage_rewrite(file: str, original: str, updated: str, command: str) -> StagedFile:
    """Stage `updated` as the new content of `file` after checking that it is not a symbolic link, is still
    `original` and can be replaced keeping its mode, owner and group; raises NotWritable."""
    _refuse_link(file, command)
    target = file
    raw = _current(target)
    if _as_read(raw) != original:
        raise NotWritable(f"it changed since it was read; run {command} again")
    info = os.stat(target)
    directory = os.path.dirname(target) or os.curdir
    if not os.access(target, os.W_OK):
        raise NotWritable("the file is read-only for you")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise NotWritable(f"you cannot create files in its directory {directory}")
    owner: tuple[int, int] | None = (info.st_uid, info.st_gid)
    if owner == (os.geteuid(), os.getegid()):
        owner = None  # a new file is ours already
    elif os.geteuid() != 0 and (info.st_uid != os.geteuid() or info.st_gid not in {os.getegid(), *os.getgroups()}):
        raise NotWritable(f"it belongs to uid {info.st_uid} gid {info.st_gid}: rewriting it would change its owner")
    content = (codecs.BOM_UTF8 if raw.startswith(codecs.BOM_UTF8) else b"") + updated.encode("utf-8")
    try:
        return stage(target, content, stat.S_IMODE(info.st_mode), owner)
    except OSError as error:
        raise NotWritable(f"cannot write next to it: {error.strerror or error}") from None


@dataclass(slots=True)
class WriteOutcome:
    """What `rewrite_all` did: the files written, the ones that failed (with why) and the ones left untouched
    because another failed."""

    written: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)


def rewrite_all(rewrites: Sequence[Rewrite], command: str) -> WriteOutcome:
    """Replace the files of `rewrites`, all or nothing: every file is checked — still as it was read, writable, its
    owner keepable — and its new content staged next to it before any is renamed into place, each keeping its mode,
    owner and group. A symbolic link is refused (nothing is written through one), and a file edited meanwhile is not
    overwritten. `command` names what to run again then."""
    staged: list[tuple[Rewrite, StagedFile]] = []
    failed: list[tuple[str, str]] = []
    for item in rewrites:
        try:
            staged.append((item, _stage_rewrite(item.file, item.original, item.updated, command)))
        except NotWritable as error:
            failed.append((item.file, str(error)))
    if not failed:  # a last look just before replacing: an edit made meanwhile is kept, not overwritten
        for item, _ in staged:
            try:
                if os.path.islink(item.file) or _as_read(_current(item.file)) != item.original:
                    failed.append((item.file, f"it changed since it was read; run {command} again"))
            except NotWritable as error:
                failed.append((item.file, str(error)))
    if failed:
        discard_all(staged_file for _, staged_file in staged)
        failed_files = {file for file, _ in failed}
        return WriteOutcome([], failed, [r.file for r in rewrites if r.file not in failed_files])
    outcome = WriteOutcome()
    for index, (item, staged_file) in enumerate(staged):
        try:
            staged_file.commit()
        except OSError as error:
            discard_all(rest for _, rest in staged[index:])
            outcome.failed.append((item.file, f"cannot replace it: {error.strerror or error}"))
            outcome.untouched = [r.file for r, _ in staged[index + 1 :]]
            return outcome
        outcome.written.append(item.file)
    return outcome


@dataclass(frozen=True, slots=True)
class _Replacement:
    file: str
    original: str
    updated: str


def rewrite_one(file: str, text: str, command: str) -> None:
    """Replace `file`'s content by `text` (UTF-8, keeping a BOM it had), as `rewrite_all` does; raises
    NotWritable."""
    _refuse_link(file, command)
    original = _as_read(_current(file))
    if original is None:
        raise NotWritable("it is not UTF-8 text")
    outcome = rewrite_all([_Replacement(file, original, text)], command)
    if outcome.failed:
        raise NotWritable(outcome.failed[0][1])
