"""The policy files of a git revision, read from the object database only, and whether the work tree still holds
them.

* `policy_files`: `git ls-tree -r -l` of a revision under some paths — each blob's path, id and size — keeping what
  `loader.discover` would read in a directory (`*.yaml`, `*.yml`, `*.yaml.j2`, nothing hidden; no symbolic link,
  no submodule).
* `write_files`: those files below a directory, each blob streamed from `git cat-file --batch` one at a time
  (`Repository.blobs`). A blob larger than the loader's bound is never read (not by Python, not by git): a sparse
  stand-in of `MAX_FILE_BYTES + 1` bytes takes its place, which the loader refuses as it refuses the file itself
  (`file is larger than ...`). `diff` read every blob whole into memory before that bound applied (a 300 MB file
  took 661 MB).
* `differs_from_head`: the `-dirty` of compile's version, decided here rather than by `git describe --dirty`,
  which refreshes the index and so runs whatever filter driver the tree's `.gitattributes` selects. A work tree
  differs when a file compile read is not in HEAD or holds other bytes (line endings aside: a CRLF checkout of LF
  blobs is the same policy), or when a policy file HEAD has under the PATHS is gone (and not excluded). Files
  outside the PATHS (a README, the CI workflow) do not make the policies dirty.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpenter_policy.checks.source.exclusion import excluded
from karpenter_policy.checks.source.gitrepo import DEFAULT_TIMEOUT_SECONDS, GitError, Repository, missing_object
from karpenter_policy.checks.source.loader import MAX_FILE_BYTES, STDIN, is_policy_path

_LINK_MODE, _SUBMODULE_MODE = "120000", "160000"


@dataclass(frozen=True, slots=True)
class RevisionFile:
    """One blob of a revision: its path from the repository's root (forward slashes), object id and size."""

    path: str
    object_id: str
    size: int


def _listing(repository: Repository, revision: str, pathspecs: Sequence[str], timeout: float) -> list[RevisionFile]:
    """Every blob of `revision` under `pathspecs` (paths from the root; "." for all), links and submodules left
    out."""
    output = repository.git(
        ["ls-tree", "-r", "-z", "-l", "--full-name", "--end-of-options", revision, "--", *pathspecs], timeout=timeout
    )
    files: list[RevisionFile] = []
    for entry in output.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        fields = meta.decode("ascii", "replace").split()
        if len(fields) != 4 or fields[1] != "blob" or fields[0] in (_LINK_MODE, _SUBMODULE_MODE):
            continue
        path = raw_path.decode("utf-8", "surrogateescape")
        if fields[3] == "BAD":  # ls-tree's size of an object it does not have
            raise GitError(missing_object(fields[2], path))
        if not fields[3].isdigit():
            raise GitError(f"git ls-tree: unexpected entry {entry[:120]!r}")
        files.append(RevisionFile(path, fields[2], int(fields[3])))
    return files


def policy_files(
    repository: Repository, revision: str, pathspecs: Sequence[str], timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> list[RevisionFile]:
    """The policy files of `revision` under `pathspecs`, as `loader.discover` would find them there."""
    return [f for f in _listing(repository, revision, pathspecs, timeout) if is_policy_path(f.path)]


def write_files(
    repository: Repository,
    files: Sequence[RevisionFile],
    dest: str,
    max_bytes: int = MAX_FILE_BYTES,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> None:
    """Write `files` below `dest` (at their paths from the root), streamed one blob at a time; a blob over
    `max_bytes` is not read: its stand-in is refused by the loader as too large. Raises GitError, OSError."""
    small = [f for f in files if f.size <= max_bytes]
    for file in files:
        target = os.path.join(dest, *file.path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if file.size > max_bytes:
            with open(target, "wb") as handle:
                handle.truncate(max_bytes + 1)  # sparse: no disk, no memory
    for file, content in zip(small, repository.blobs([f.object_id for f in small], timeout), strict=True):
        with open(os.path.join(dest, *file.path.split("/")), "wb") as handle:
            handle.write(content)


def _same_policy(work: bytes, blob: bytes) -> bool:
    return work == blob or work.replace(b"\r\n", b"\n") == blob.replace(b"\r\n", b"\n")


def differs_from_head(
    repository: Repository,
    files_read: Iterable[str],
    paths: Sequence[str],
    exclude: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> bool:
    """True when the policies read are not HEAD's (the module docstring says how); raises GitError."""
    read: dict[str, str] = {}
    for file in files_read:
        relative = repository.prefix_of(file) if file != STDIN else None
        if not relative:
            return True  # standard input, or a file outside the work tree: not versioned here
        read[relative] = file
    pathspecs = [p for p in (repository.prefix_of(path) for path in paths if path != "-") if p is not None]
    pathspecs = [p or "." for p in pathspecs]
    head = {f.path: f for f in _listing(repository, "HEAD", [*pathspecs, *sorted(read)], timeout)}
    if any(relative not in head or head[relative].size > MAX_FILE_BYTES for relative in read):
        return True
    under_paths = policy_files(repository, "HEAD", pathspecs, timeout) if pathspecs else []
    for entry in under_paths:
        full = os.path.join(repository.root, *entry.path.split("/"))
        if entry.path not in read and not os.path.lexists(full) and not excluded(full, exclude):
            return True  # deleted from the work tree
    wanted = sorted(read)
    for relative, blob in zip(wanted, repository.blobs([head[r].object_id for r in wanted], timeout), strict=True):
        try:
            with open(read[relative], "rb") as handle:
                work = handle.read(MAX_FILE_BYTES + 1)
        except OSError:
            return True
        if not _same_policy(work, blob):
            return True
    return False
