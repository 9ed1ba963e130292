"""The fastjsonschema validators of the schemas, compiled once and kept in a cache directory; and the cache
directory itself (`cache_directory`, `load_trusted`, `store`), which `api.v1.celparser` keeps CEL's parser in too.

Compiling a schema into a validator (fastjsonschema generates Python source, then Python compiles it) takes
~60 ms for the three schemas — more than the rest of `validate` on one file. The compiled code object is therefore
kept on disk, keyed by the schema's bytes, the fastjsonschema version and the Python byte-code version: a later
run loads it in well under a millisecond, and any change to one of the three compiles afresh.

Where: `$KARPENTER_POLICY_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/karpenter-policy`, else
`~/.cache/karpenter-policy`. The cache is only an optimisation: a directory that cannot be created or written
(a read-only file system, as in the Argo CD sidecar), a file that cannot be read or is corrupt, all mean compiling
in memory as before, never an error. A file is loaded only if it belongs to the user running the tool and nobody
else may write to it (it holds code that is run), and files are replaced atomically (write, then rename), so
concurrent runs — pre-commit's parallel hooks — never see half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import marshal
import os
import stat
from collections.abc import Callable
from types import CodeType
from typing import Any

import fastjsonschema
from fastjsonschema.ref_resolver import RefResolver

CACHE_DIR_ENV = "KARPENTER_POLICY_CACHE_DIR"
#: Bumped when what is stored changes shape.
_FORMAT = b"karpenter-policy validator cache 1"

Validator = Callable[[Any], Any]


def cache_directory() -> str | None:
    """Where compiled validators are kept; None when the cache is turned off (`KARPENTER_POLICY_CACHE_DIR=`)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "karpenter-policy")


def cache_key(schema_bytes: bytes) -> str:
    digest = hashlib.sha256(_FORMAT)
    for part in (fastjsonschema.VERSION.encode(), importlib.util.MAGIC_NUMBER, schema_bytes):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def compiled_validator(name: str, schema_bytes: bytes, schema: Callable[[], dict[str, Any]]) -> Validator:
    """The validator of the schema `name` (whose file holds `schema_bytes`; `schema()` parses it), from the cache
    when it holds it, else compiled (and stored for the next run)."""
    directory = cache_directory()
    path = os.path.join(directory, f"{name}.{cache_key(schema_bytes)[:32]}.code") if directory else None
    if path is not None and (cached := _load_code(path)) is not None:
        return _instantiate(*cached)
    definition = schema()
    source = fastjsonschema.compile_to_code(definition)
    entry = RefResolver.from_schema(definition, handlers={}, store={}).get_scope_name()
    code = compile(source, f"<validator of {name}>", "exec")
    if path is not None:
        store(path, marshal.dumps((entry, code)))
    return _instantiate(entry, code)


def _instantiate(entry: str, code: CodeType) -> Validator:
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the code fastjsonschema generated for our own schema (`load_trusted`: the file's trust)
    validate: Validator = namespace[entry]
    return validate


def _load_code(path: str) -> tuple[str, CodeType] | None:
    """The cached (entry point, code) at `path`, or None: absent, unreadable, corrupt, or writable by others."""
    data = load_trusted(path)
    if data is None:
        return None
    try:
        entry, code = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(entry, str) or not isinstance(code, CodeType):
        return None
    return entry, code


def load_trusted(path: str) -> bytes | None:
    """The bytes of the cache file at `path`, or None: absent, unreadable, or not the running user's own file that
    nobody else may write to (a cache file holds what is run: code, a pickled parser)."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None
            return handle.read()
    except OSError:
        return None


def store(path: str, data: bytes) -> None:
    """Write `data` to `path` atomically; any failure leaves no file behind and is ignored (a cache)."""
    import tempfile  # only when a validator was compiled: tempfile's imports cost more than loading one

    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
