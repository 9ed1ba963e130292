"""Replace files without ever leaving one half-written: stage, then rename into place.

Each new content is first written in full to a hidden temporary file next to its target (same directory, hence
same file system), flushed to disk, given the mode (and owner) it must have; only then is it renamed over the
target, which is atomic: a reader sees the old file or the new one, never a mix. A writer that stages every file
of a change before renaming any finds out that one cannot be written while nothing has changed yet (`compile -o`,
`pin --write`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

TEMPORARY_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class StagedFile:
    """New content for `target`, complete on disk in `temporary` (next to it) until `commit` renames it over."""

    target: str
    temporary: str

    def commit(self) -> None:
        os.replace(self.temporary, self.target)

    def discard(self) -> None:
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
    for item in staged:
        item.discard()


def is_leftover_of(name: str, target_name: str) -> bool:
    """True when `name` is the temporary file `stage` makes for a target called `target_name` (left behind by a
    run that was killed between staging and renaming)."""
    pattern = rf"\.{re.escape(target_name)}\.[a-z0-9_]{{8}}{re.escape(TEMPORARY_SUFFIX)}"
    return re.fullmatch(pattern, name) is not None


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
    mask = os.umask(0)
    os.umask(mask)
    return mask
