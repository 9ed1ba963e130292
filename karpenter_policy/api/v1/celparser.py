"""cel-python's CEL parser, kept in the cache directory between runs.

celpy builds its parser (lark's LALR tables for the CEL grammar) once per process, which costs ≈ 0.25 s of CPU:
more than the rest of `validate` on a hundred NodePools. Built once, the parser is kept in the cache directory of
`api.validatorcache` (same place, same rules: the running user's own file, nobody else may write to it, written
atomically; an unusable directory or file means building it as before, never an error), keyed by lark's version,
celpy's grammar and the source of the celpy module that builds the parser from it (`celpy/celparser.py`: its
options to lark), and Python's byte-code version — read from the files, not from the distributions' metadata,
whose lookup (importlib.metadata and a search of sys.path) would cost more than loading the parser.
A later run loads it in milliseconds.

The parser is lark's own serialized form (`Lark.save`, a pickle), with one correction: lark's serialization turns
the rule names that celpy's parser holds as `Token('RULE', name)` into plain strings, and celpy puts a tree node's
name into some of its error texts (`found no matching overload for Token('RULE', 'relation_lt')`), so they are
restored — the loaded parser's trees are those of a fresh one, node for node, with the same positions
(`tests/api/v1/test_cel_parser_cache.py`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import pickle
from typing import Any

import celpy
import lark
from celpy import celparser as celparser_module
from celpy.celparser import CELParser
from lark import Lark, Token

from karpenter_policy.api.validatorcache import cache_directory, load_trusted, store

#: Bumped when what is stored changes shape.
_FORMAT = b"karpenter-policy cel parser 1"


def _grammar() -> bytes:
    """celpy's CEL grammar, the file its parser is built from."""
    with open(os.path.join(os.path.dirname(celpy.__file__), "cel.lark"), "rb") as handle:
        return handle.read()


def _builder() -> bytes:
    """The source of celpy's `celparser` module, which builds the parser from the grammar."""
    with open(celparser_module.__file__, "rb") as handle:
        return handle.read()


def cache_key(grammar: bytes) -> str:
    """What the stored parser depends on: lark's version, the grammar, the celpy code that builds the parser from
    it (celpy's `celparser.py`), Python's byte code."""
    digest = hashlib.sha256(_FORMAT)
    parts = (lark.__version__.encode(), _builder(), importlib.util.MAGIC_NUMBER, grammar)
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def install_parser() -> None:
    """Make celpy's parser (`CELParser.CEL_PARSER`) the cached one, building and storing it when the cache does
    not hold it; nothing when celpy's parser exists already in this process."""
    if CELParser.CEL_PARSER is not None:
        return
    directory = cache_directory()
    path = os.path.join(directory, f"cel-parser.{cache_key(_grammar())[:32]}.pickle") if directory else None
    if path is not None and (data := load_trusted(path)) is not None and (parser := _loaded(data)) is not None:
        CELParser.CEL_PARSER = parser
        return
    CELParser()  # builds celpy's parser, as celpy.Environment() would
    if path is not None and CELParser.CEL_PARSER is not None:
        store(path, serialized(CELParser.CEL_PARSER))


def serialized(parser: Lark) -> bytes:
    """`parser` as stored: lark's serialized form, each rule name that is a Token in `parser` kept a Token."""
    buffer = io.BytesIO()
    parser.save(buffer)
    saved: dict[str, Any] = pickle.loads(buffer.getvalue())  # noqa: S301 - our own bytes, just written
    token_names = {str(rule.origin.name) for rule in parser.rules if isinstance(rule.origin.name, Token)}
    for entry in saved["memo"].values():
        if isinstance(entry, dict) and entry.get("__type__") == "Rule":
            origin = entry["origin"]
            if origin.get("name") in token_names:
                origin["name"] = Token("RULE", str(origin["name"]))
    return pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL)


def _loaded(data: bytes) -> Lark | None:
    """The parser stored in `data`, None when it cannot be read (a corrupt or foreign file: built afresh)."""
    try:
        stored = pickle.loads(data)  # noqa: S301 - the user's own cache file (`load_trusted`)
        parser = Lark.load(stored)  # lark takes its serialized dict as it is
    except Exception:  # noqa: BLE001 - a cache: anything wrong with it means building the parser
        return None
    return parser if isinstance(parser, Lark) else None
