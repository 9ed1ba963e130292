"""celpy's parser kept in the cache directory (`api.v1.celparser`): the loaded parser is the one celpy builds — the
same trees, node names and positions for every rule of the shipped CRDs, the same evaluation error texts — and the
cache file is trusted as the validator cache's are (the user's own file, written by nobody else)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import lark
import pytest
from celpy.celparser import CELParser
from celpy.evaluation import CELEvalError

from karpenter_policy.api.v1 import celparser
from karpenter_policy.api.v1.cel import KUBERNETES_FUNCTIONS, _all_body
from karpenter_policy.api.v1.crds import CRD_FILES, crd_version
from tests.api.v1.test_cel_shortcuts import _all_validations


def _shipped_expressions() -> list[str]:
    """Every rule of the shipped CRDs, and the predicate of each `self.all(x, P)` rule (parsed on its own)."""
    found: dict[str, None] = {}
    for api_version, kind in CRD_FILES:
        crd = crd_version(api_version, kind)
        assert crd is not None, kind
        for entry in _all_validations(crd.schema):
            found.setdefault(entry["rule"])
            if (split := _all_body(entry["rule"])) is not None:
                found.setdefault(split[1])
    return list(found)


def _signature(tree: lark.Tree[Any]) -> list[Any]:
    """Everything of a parse tree that celpy or an error text could see: each node's name with its type (a Token
    in celpy's own parser) and position, each token with its type and position."""
    nodes = [(type(node.data).__name__, repr(node.data), *(getattr(node.meta, name, None) for name in (
        "line", "column", "end_line", "end_column", "start_pos", "end_pos"))) for node in tree.iter_subtrees()]
    tokens = [(type(token).__name__, token.type, str(token), token.line, token.column, token.end_line,
               token.end_column, token.start_pos, token.end_pos) for token in tree.scan_values(lambda _: True)]
    return [repr(tree), nodes, tokens]


@pytest.fixture
def fresh_parser() -> Iterator[lark.Lark]:
    """celpy's parser built as celpy builds it; the process's parser put back afterwards, and the recursion limit
    that `celpy.Environment()` raises (tests/api/v1/test_process_state.py holds the process to its own)."""
    kept, limit = CELParser.CEL_PARSER, sys.getrecursionlimit()
    CELParser.CEL_PARSER = None
    try:
        CELParser()
        assert CELParser.CEL_PARSER is not None
        yield CELParser.CEL_PARSER
    finally:
        CELParser.CEL_PARSER = kept
        sys.setrecursionlimit(limit)


def _install_from(cache: Path, monkeypatch: pytest.MonkeyPatch) -> lark.Lark:
    monkeypatch.setenv("KARPENTER_POLICY_CACHE_DIR", str(cache))
    CELParser.CEL_PARSER = None
    celparser.install_parser()
    parser = CELParser.CEL_PARSER
    assert parser is not None
    return parser


def test_the_stored_parser_reads_every_shipped_rule_as_celpys_own(fresh_parser: lark.Lark) -> None:
    loaded = celparser._loaded(celparser.serialized(fresh_parser))
    assert loaded is not None
    expressions = _shipped_expressions()
    assert len(expressions) > 80
    for expression in expressions:
        assert _signature(loaded.parse(expression)) == _signature(fresh_parser.parse(expression)), expression


def test_an_evaluation_error_reads_the_same_from_the_stored_parser(fresh_parser: lark.Lark) -> None:
    """celpy names the operator's tree node in an error (`found no matching overload for Token('RULE', ...)`):
    lark's serialization alone would print it as a plain string."""
    loaded = celparser._loaded(celparser.serialized(fresh_parser))
    assert loaded is not None
    rule = "self.a < 1 && self.b + 1 == 2"
    activation = {"self": celpy.json_to_cel({"a": "text", "b": "x"})}
    texts = []
    for parser in (fresh_parser, loaded):
        CELParser.CEL_PARSER = parser
        environment = celpy.Environment()
        with pytest.raises(CELEvalError) as raised:
            environment.program(environment.compile(rule), functions=KUBERNETES_FUNCTIONS).evaluate(activation)
        texts.append(repr(raised.value.args))
    assert "Token(" in texts[0] and "relation_lt" in texts[0]
    assert texts[1] == texts[0]


def test_the_parser_is_stored_once_and_loaded_afterwards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         fresh_parser: lark.Lark) -> None:
    cache = tmp_path / "cache"
    built = _install_from(cache, monkeypatch)
    (stored,) = cache.glob("cel-parser.*.pickle")
    assert stored.stat().st_mode & 0o077 == 0
    assert built.source_path != "<deserialized>"  # built: nothing was cached yet
    loaded = _install_from(cache, monkeypatch)
    assert loaded.source_path == "<deserialized>"
    assert [p.name for p in cache.iterdir()] == [stored.name]
    rule = "self.all(x, x.key != 'karpenter.sh/nodepool' || x.operator == 'In')"
    assert _signature(loaded.parse(rule)) == _signature(fresh_parser.parse(rule))


@pytest.mark.parametrize("damage", ["corrupt", "writable by others"])
def test_a_damaged_or_foreign_cache_file_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       fresh_parser: lark.Lark, damage: str) -> None:
    cache = tmp_path / "cache"
    _install_from(cache, monkeypatch)
    (stored,) = cache.glob("cel-parser.*.pickle")
    if damage == "corrupt":
        stored.write_bytes(stored.read_bytes()[:1000])
    else:
        stored.chmod(0o666)
    parser = _install_from(cache, monkeypatch)
    assert parser.source_path != "<deserialized>"  # built again
    assert _signature(parser.parse("self.a == 1")) == _signature(fresh_parser.parse("self.a == 1"))


def test_without_a_cache_directory_the_parser_is_built(monkeypatch: pytest.MonkeyPatch,
                                                       fresh_parser: lark.Lark) -> None:
    monkeypatch.setenv("KARPENTER_POLICY_CACHE_DIR", "")
    CELParser.CEL_PARSER = None
    celparser.install_parser()
    assert CELParser.CEL_PARSER is not None
    assert CELParser.CEL_PARSER.source_path != "<deserialized>"
