"""The constraint-set versions a scene reads from a compiled directory, parsed once per process for the same bytes.

A scene reads its directory for its own builders (`Scene.loaded`), and each controller on it reads it again through
its source; a test suite builds hundreds of scenes over a few compiled directories. :func:`read_version` keeps the
last versions read, keyed by the directory and the exact bytes of every file in it and in its `constraintsets/`:
the same bytes give the same sets (frozen; no reader writes to them), so they are handed out again rather than
parsed and checked again. A directory that changed in any byte is read anew, and one that does not load is never
kept (each read raises again). The controller in production reads each version once and does not use this.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path

from karpenter_policy.reconcile.constraints import DirectorySource, Loaded

#: How many versions are kept (the most recently read).
KEPT = 8

_VERSIONS: OrderedDict[tuple[str, bytes], Loaded] = OrderedDict()
_LOCK = threading.Lock()


def _content(directory: Path) -> bytes:
    """A digest of the names and bytes of every file the readers may read (OSError: one cannot be read now)."""
    digest = hashlib.sha256()
    for folder in (directory, directory / "constraintsets"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file():
                data = path.read_bytes()
                name = path.name.encode("utf-8", "surrogateescape")
                digest.update(f"{folder == directory}:{len(name)}:{len(data)}:".encode())
                digest.update(name)
                digest.update(data)
    return digest.digest()


def read_version(directory: str | os.PathLike[str]) -> Loaded:
    """The version `directory` holds, as `DirectorySource.read` reads it (ConstraintSetError: it does not load),
    parsed once for the same bytes (see the module docstring)."""
    source = DirectorySource(directory)
    try:
        key = (str(source.directory), _content(source.directory))
    except OSError:
        return source.read()  # a file that cannot be read now: the reader says which, nothing kept
    with _LOCK:
        found = _VERSIONS.get(key)
        if found is not None:
            _VERSIONS.move_to_end(key)
            return found
    found = source.read()
    with _LOCK:
        _VERSIONS[key] = found
        while len(_VERSIONS) > KEPT:
            _VERSIONS.popitem(last=False)
    return found


class SceneSource(DirectorySource):
    """A scene's directory source: a new version when the files' identity changed (`DirectorySource.poll`), read by
    :func:`read_version`."""

    def read(self) -> Loaded:
        return read_version(self.directory)


__all__ = ["KEPT", "SceneSource", "read_version"]
