"""The CRDs' `x-kubernetes-validations` rules, evaluated as the API server evaluates them (apiextensions-apiserver
`pkg/apiserver/schema/cel`), with cel-python (`celpy`) as the CEL interpreter.

Where the rules run: at every node of the (pruned, defaulted) object whose schema carries rules, `self` bound to
that node's value — each list item, each map value, each present property; never at an absent field. A rule that
names `oldSelf` is a transition rule: it runs only on an update, where the old object has a value at the same
place (object properties and map values by key, `x-kubernetes-list-type: map` items by their keys; items of an
atomic list have no old value), as Kubernetes correlates them.

What a rule says: false is a refusal with the rule's `message` (Kubernetes' "failed rule: <rule>" when it has
none). An evaluation error (a missing key, `int("abc")`, an index out of range) refuses the object too, as the
API server does, with the rule's message and the error.

Kubernetes' CEL libraries the Karpenter rules use beyond standard CEL, implemented here:
`<string>.find(<regex>)` (the regex library: the first match, or "" for none; RE2 as Go's `regexp`) and
`<string>.split(<separator>)` (the strings extension: Go's `strings.Split`, an empty separator splitting into
characters). `int(<string>)` is replaced by cel-go's (Go's `strconv.ParseInt`, base 10): celpy reads " 5",
"5_0" and "٣" as integers, which Kubernetes refuses. Standard CEL (`has`, `all`, `exists`, `filter`, `size`,
`matches` (RE2), `startsWith`, `endsWith`, `in`, ternaries, error absorption by `&&` / `||`) is celpy's. Every
rule of the shipped CRDs compiles and is exercised by Karpenter's own CEL tests (`tests/api/v1/`).

celpy's tree-walking interpreter costs milliseconds a rule: each rule is also compiled to Python closures
(`api.v1.celcompile`, celpy's semantics), which give the verdict wherever they model celpy's behaviour; celpy
evaluates the rest, and gives an evaluation error its text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
import re2  # type: ignore[import-untyped]
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from karpenter_policy.api.v1.celcompile import GO_DECIMAL, CelError, Closure, Unsure, compile_rule, fits_int64
from karpenter_policy.api.v1.celparser import install_parser
from karpenter_policy.api.violations import CEL_RULE, Path, Violation

Schema = Mapping[str, Any]

_OLD_SELF = re.compile(r"\boldSelf\b")


@dataclass(frozen=True, slots=True, eq=False)
class CelRule:
    """One `x-kubernetes-validations` entry, compiled; with what makes its verdicts reusable across objects
    (`_evaluate`): the fields of `self` it reads when it reads nothing else (`fields`), or, for a rule
    `self.all(x, P)` whose P does not name `self`, P compiled on its own (`item_program`, `item_variable`); and
    the rule (and P) compiled to Python closures (`api.v1.celcompile`: `closure`, `item_closure`; None where the
    rule uses a construct not compiled there, then celpy alone evaluates it)."""

    rule: str
    message: str
    transition: bool
    program: Any
    fields: frozenset[str] | None = None
    item_variable: str | None = None
    item_program: Any = None
    closure: Closure | None = None
    item_closure: Closure | None = None


def _find(text: Any, pattern: Any) -> Any:
    match = re2.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _int(value: Any) -> Any:
    """cel-go's `int()`: a string is read as Go's `strconv.ParseInt(s, 10, 64)` (a sign and ASCII digits only;
    celpy would take Python's `int`: " 5", "5_0", "٣"); anything else as celpy converts it."""
    if isinstance(value, str):
        if not GO_DECIMAL.fullmatch(value):
            return CELEvalError("no such overload", ValueError, (f"cannot parse {str(value)!r} as an integer",))
        return celtypes.IntType(int(value))  # IntType raises overflow past int64, as ParseInt does
    return celtypes.IntType(value)


def _split(text: Any, separator: Any) -> Any:
    value, sep = str(text), str(separator)
    parts = list(value) if sep == "" else value.split(sep)
    return celtypes.ListType([celtypes.StringType(part) for part in parts])


#: The Kubernetes CEL library functions the rules call, and cel-go's `int`, by name (celpy passes a receiver as the
#: first argument).
KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {"find": _find, "split": _split, "int": _int}


@cache
def _environment() -> Any:
    """celpy's interpreter (its CompiledRunner mis-evaluates macros such as all()).

    celpy.Environment() raises the whole process's recursion limit to 2,500; the limit is put back, so that
    checking a v1 object never changes how the rest of the process behaves (the YAML loader's refusal of a
    document nested too deeply, which must not depend on whether a NodePool was read before it). Karpenter's
    rules nest a few levels, far inside the default limit. Its parser comes from the cache directory when an
    earlier run built it (`celparser`)."""
    limit = sys.getrecursionlimit()
    try:
        install_parser()
        return celpy.Environment()
    finally:
        sys.setrecursionlimit(limit)


_SELF = re.compile(r"\bself\b")
#: `self.<field>` not followed by a call: a field read (`self.all(` is a macro over self, not a field).
_SELF_FIELD = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_ALL_MACRO = re.compile(r"\s*self\.all\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,(.*)\)\s*", re.DOTALL)


def _fields_read(rule: str) -> frozenset[str] | None:
    """The fields of `self` a rule reads, when `self.<field>` is the only way it uses `self` (string literals
    aside); None when it uses `self` otherwise (a macro over it, `size(self)`, an index)."""
    code = _STRING.sub("''", rule)
    if _OLD_SELF.search(code):
        return None
    uses = len(_SELF.findall(code))
    fields = _SELF_FIELD.findall(code)
    return frozenset(fields) if uses and len(fields) == uses else None


def _balanced(code: str) -> bool:
    depth = 0
    for char in _STRING.sub("''", code):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _all_body(rule: str) -> tuple[str, str] | None:
    """(variable, predicate) of a rule that is exactly `self.all(variable, predicate)` with a predicate that does
    not name `self` or `oldSelf`; None for any other rule."""
    match = _ALL_MACRO.fullmatch(rule)
    if match is None:
        return None
    variable, body = match.group(1), match.group(2)
    code = _STRING.sub("''", body)
    if _SELF.search(code) or _OLD_SELF.search(code) or not _balanced(body):
        return None
    return variable, body


@cache
def compiled_rule(rule: str, message: str) -> CelRule:
    """`rule` compiled once per process (celpy's parser is slow to build: about a second, once)."""
    environment = _environment()
    tree = environment.compile(rule)
    program = environment.program(tree, functions=KUBERNETES_FUNCTIONS)
    transition = bool(_OLD_SELF.search(rule))
    item_variable = item_program = item_closure = None
    if not transition and (split := _all_body(rule)) is not None:
        try:
            item_tree = environment.compile(split[1])
            item_program = environment.program(item_tree, functions=KUBERNETES_FUNCTIONS)
            item_variable = split[0]
            item_closure = compile_rule(item_tree, frozenset({item_variable}))
        except Exception:  # noqa: BLE001 - not a predicate on its own: the rule is evaluated whole
            item_program = None
    fields = None if transition else _fields_read(rule)
    return CelRule(
        rule, message or f"failed rule: {rule}", transition, program, fields, item_variable, item_program,
        compile_rule(tree), item_closure,
    )


def _evaluate(compiled: CelRule, value: Any, old: Any, kept: dict[int, Any] | None = None) -> tuple[bool, str | None]:
    """(passed, evaluation error): a rule that evaluates to anything but true fails. A rule's verdict depends on
    its inputs only, and objects repeat the same keys and terms: verdicts are remembered by their inputs
    (`_frozen`; celpy interprets its syntax tree: some milliseconds a rule). The inputs are made as small as the
    rule allows, so that they repeat: only the fields a rule reads of `self` (`CelRule.fields`: the rest cannot
    change its verdict), and a rule `self.all(x, P)` is P on each item (each map key, as CEL's `all` iterates a
    map), remembered per item — false if P is false on any item, else an error if P fails on one, else true, as
    CEL's `all` absorbs errors. `kept` (one walk's) holds the `_frozen` key of the walked object's lists and
    mappings by their id, so that the rules on one node, and the `all` rules over one list, make it once."""
    kind = type(value)
    if compiled.item_program is not None and (kind is list or kind is dict or isinstance(value, Mapping | list)):
        return _all_items(compiled, list(value), kept)
    mapping = kind is dict or (kind is not list and kind is not str and isinstance(value, Mapping))
    if compiled.fields is not None and mapping:
        value = {key: item for key, item in value.items() if key in compiled.fields}
        kept = None  # a mapping of this call's own: its id may be another's after it
    try:
        inputs = (_frozen(value), _frozen(old)) if compiled.transition else _frozen_kept(value, kept)
    except _NotJson:
        return _run(compiled, value, old)
    key = (compiled, inputs)
    verdict = _VERDICTS.get(key)
    if verdict is None:
        verdict = _run(compiled, value, old)
        _remember(_VERDICTS, key, verdict)
    return verdict


def _all_items(compiled: CelRule, items: list[Any], kept: dict[int, Any] | None = None) -> tuple[bool, str | None]:
    error: str | None = None
    for item in items:
        try:
            key = (compiled, item if type(item) is str else _frozen_kept(item, kept))
        except _NotJson:
            return _run(compiled, items, None)
        verdict = _ITEM_VERDICTS.get(key)
        if verdict is None:
            verdict = _run_item(compiled, item)
            _remember(_ITEM_VERDICTS, key, verdict)
        passed, failure = verdict
        if not passed and failure is None:
            return False, None
        if failure is not None and error is None:
            error = failure
    return (False, error) if error is not None else (True, None)


def _frozen_kept(value: Any, kept: dict[int, Any] | None) -> Any:
    """`_frozen(value)`, taken from `kept` (by the id of a list or mapping that lives as long as `kept`) when made
    before, and kept there."""
    if kept is None or (type(value) is not dict and type(value) is not list):
        return _frozen(value)
    frozen = kept.get(id(value))
    if frozen is None:
        frozen = kept[id(value)] = _frozen(value)
    return frozen


class _NotJson(Exception):
    """A value with something JSON does not carry: its verdict is not remembered."""


def _frozen(value: Any) -> Any:
    """`value` (JSON data: what the API server decodes) as a hashable key that tells apart exactly what JSON tells
    apart: a string is itself; any other value is tagged with its type (1, 1.0 and true are three keys, as
    `1`, `1.0` and `true` are three JSON texts; a float by its repr, so 0.0 and -0.0 differ too), an object's
    members sorted by key. Raises `_NotJson` for anything else (a non-string key, a tuple, a date)."""
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:
        members = []
        for key, item in value.items():
            if type(key) is not str:
                raise _NotJson
            members.append((key, _frozen(item)))
        members.sort()  # by key alone: the keys differ, so no member's value is ever compared
        return (dict, tuple(members))
    if kind is list:
        return (list, tuple(_frozen(item) for item in value))
    if kind is float:
        return (float, repr(value))
    if value is None or kind is bool or kind is int:
        return (kind, value)
    raise _NotJson


#: Bound of each table of verdicts (cleared when full: a hostile stream of distinct values cannot grow it).
_VERDICTS_MAX = 16_384
#: Verdicts of whole rules (`_evaluate`) and of `self.all` predicates on one item (`_all_items`), by the compiled
#: rule and its inputs' `_frozen` key.
_VERDICTS: dict[tuple[CelRule, Any], tuple[bool, str | None]] = {}
_ITEM_VERDICTS: dict[tuple[CelRule, Any], tuple[bool, str | None]] = {}


def _remember(table: dict[tuple[CelRule, Any], tuple[bool, str | None]], key: tuple[CelRule, Any],
              verdict: tuple[bool, str | None]) -> None:
    if len(table) >= _VERDICTS_MAX:
        table.clear()
    table[key] = verdict


def _run_item(compiled: CelRule, item: Any) -> tuple[bool, str | None]:
    """The `self.all` predicate of `compiled` on one item: the closure's verdict where it is sure, else celpy's."""
    if compiled.item_closure is not None and compiled.item_variable is not None:
        verdict = _closure_verdict(compiled.item_closure, {compiled.item_variable: item})
        if verdict is not None:
            return verdict
    try:
        result = compiled.item_program.evaluate({compiled.item_variable: json_to_cel(item)})
    except CELEvalError as error:
        return False, _error_text(error)
    except Exception as error:  # noqa: BLE001 - as `_run`: refused, never a crash
        return False, str(error) or type(error).__name__
    return _verdict(result)


def _closure_verdict(closure: Closure, activation: dict[str, Any]) -> tuple[bool, None] | None:
    """The compiled rule's verdict when it is sure to be celpy's: None for an evaluation error (celpy says which),
    for what the closure does not model, and for inputs celpy would refuse while converting them."""
    if not all(fits_int64(value) for value in activation.values()):
        return None
    try:
        result = closure(activation)
    except (CelError, Unsure):
        return None
    return (result, None) if result is True or result is False else None


def _run(compiled: CelRule, value: Any, old: Any) -> tuple[bool, str | None]:
    if compiled.closure is not None:
        verdict = _closure_verdict(compiled.closure, {"self": value, "oldSelf": old} if compiled.transition
                                   else {"self": value})
        if verdict is not None:
            return verdict
    return _run_celpy(compiled, value, old)


def _run_celpy(compiled: CelRule, value: Any, old: Any) -> tuple[bool, str | None]:
    try:  # celpy refuses what CEL cannot hold (an integer beyond int64: "overflow") while converting
        activation = {"self": json_to_cel(value)}
        if compiled.transition:
            activation["oldSelf"] = json_to_cel(old)
        result = compiled.program.evaluate(activation)
    except CELEvalError as error:
        return False, _error_text(error)
    except Exception as error:  # noqa: BLE001 - an object from a file never crashes the checker: it is refused
        return False, str(error) or type(error).__name__
    return _verdict(result)


def _verdict(result: Any) -> tuple[bool, str | None]:
    if isinstance(result, CELEvalError):
        return False, _error_text(result)
    if isinstance(result, celtypes.BoolType):
        return bool(result), None
    return False, f"the rule evaluated to {type(result).__name__}, not a boolean"


def _error_text(error: Exception) -> str:
    if len(error.args) >= 3 and error.args[2]:
        detail = error.args[2]
        return str(detail[0] if isinstance(detail, tuple) and detail else detail)
    return str(error.args[0]) if error.args else type(error).__name__


_ABSENT = object()


def cel_violations(value: Any, schema: Schema, old: Any = _ABSENT, path: Path = ()) -> list[Violation]:
    """Every rule of `schema` and its sub-schemas that `value` fails, at the path of the node the rule is on.
    `old` is the object before an update (omit it for a create: transition rules are not run)."""
    found: list[Violation] = []
    _walk(value, schema, old, path, found, {})
    return found


#: Whether a schema or any schema below it carries a rule, by the schema's id (the schema kept with it, so that
#: its id is never reused for another while remembered); the CRDs' schemas live as long as the process.
_RULED: dict[int, tuple[Schema, bool]] = {}


def _has_rules(schema: Schema) -> bool:
    """Whether `schema` or a sub-schema of it (property, additional property, item) carries a rule: a value
    under a schema without any has no rule to run, so the walk does not descend into it."""
    known = _RULED.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    subs: list[Any] = [*(schema.get("properties") or {}).values(), schema.get("additionalProperties"),
                       schema.get("items")]
    ruled = bool(schema.get("x-kubernetes-validations")) or any(
        _has_rules(sub) for sub in subs if isinstance(sub, Mapping))
    _RULED[id(schema)] = (schema, ruled)
    return ruled


class _Plan:
    """What the walk needs of one schema that carries a rule at or under it, looked up once per schema: its rules
    (`compiled_rule`'s, compiled when first run), the plan of each property (None: no rule at or under it, the
    walk does not descend; a property the schema names never falls to `additionalProperties`), of its additional
    properties and of its items (None likewise). Made by `_plan`; the schema is kept for `_correlated_items`."""

    __slots__ = ("schema", "entries", "rules", "properties", "extra", "items")

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.entries: tuple[Mapping[str, Any], ...] = tuple(schema.get("x-kubernetes-validations") or ())
        self.rules: tuple[CelRule, ...] | None = None if self.entries else ()
        self.properties: dict[str, _Plan | None] = {}
        self.extra: _Plan | None = None
        self.items: _Plan | None = None

    def compiled(self) -> tuple[CelRule, ...]:
        rules = self.rules
        if rules is None:
            rules = self.rules = tuple(compiled_rule(entry["rule"], entry.get("message", ""))
                                       for entry in self.entries)
        return rules


#: The plan of each schema with a rule at or under it (None: no rule there), by the schema's id (the schema kept
#: in the plan or beside None, so that its id is never reused for another while remembered), as `_RULED`.
_PLANS: dict[int, tuple[Schema, _Plan | None]] = {}


def _plan(schema: Schema) -> _Plan | None:
    """`schema`'s plan, None when no rule is at or under it (`_has_rules`): the walk does not descend there."""
    known = _PLANS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    plan: _Plan | None = None
    if _has_rules(schema):
        plan = _Plan(schema)
        _PLANS[id(schema)] = (schema, plan)  # before the sub-schemas: a schema that holds itself ends here
        properties = schema.get("properties") or {}
        plan.properties = {key: _plan(sub) if isinstance(sub, Mapping) else None for key, sub in properties.items()}
        extra, items = schema.get("additionalProperties"), schema.get("items")
        plan.extra = _plan(extra) if isinstance(extra, Mapping) else None
        plan.items = _plan(items) if isinstance(items, Mapping) else None
    _PLANS[id(schema)] = (schema, plan)
    return plan


def _walk(value: Any, schema: Schema, old: Any, path: Path, found: list[Violation], kept: dict[int, Any]) -> None:
    """The rules at `value` (its schema's), then the walk below it; `kept`: `_evaluate`'s keys of this walk (the
    object walked lives as long as the walk, so an id stands for one list or mapping)."""
    plan = _plan(schema)
    if plan is not None:
        _walk_plan(value, plan, old, path, found, kept)


#: The types a value of a JSON object has that are no Mapping (asked before the ABC's check).
_NOT_MAPPINGS = frozenset({list, str, int, float, bool, type(None)})


def _walk_plan(value: Any, plan: _Plan, old: Any, path: Path, found: list[Violation], kept: dict[int, Any]) -> None:
    """`_walk` on a schema's plan: only the sub-schemas with a rule at or under them are descended into."""
    if plan.entries:
        for compiled in plan.compiled():
            if compiled.transition and old is _ABSENT:
                continue
            passed, error = _evaluate(compiled, value, None if old is _ABSENT else old, kept)
            if not passed:
                message = compiled.message if error is None else f"{compiled.message} (evaluation error: {error})"
                found.append(Violation(CEL_RULE, path, message))
    kind = type(value)
    if kind is dict or (kind not in _NOT_MAPPINGS and isinstance(value, Mapping)):
        properties, extra = plan.properties, plan.extra
        # on a create (`old` absent, most walks) nothing is asked of it: the ABC's check costs a call a node
        old_map = old if type(old) is dict or (old is not _ABSENT and isinstance(old, Mapping)) else {}
        for key, item in value.items():
            sub = properties.get(key, extra)  # a named property never falls to additionalProperties
            if sub is not None:  # asked here: no call, no path for a rule-less subtree
                _walk_plan(item, sub, old_map.get(key, _ABSENT), (*path, key), found, kept)
    elif (items := plan.items) is not None and isinstance(value, list):
        old_items = _correlated_items(value, plan.schema, old)
        for index, item in enumerate(value):
            _walk_plan(item, items, old_items[index], (*path, index), found, kept)


def _correlated_items(value: list[Any], schema: Schema, old: Any) -> list[Any]:
    """The old value of each item: by the map keys of a `map` list, none for any other list."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return [_ABSENT] * len(value)
    keys = schema.get("x-kubernetes-list-map-keys") or []

    def key_of(item: Any) -> str | None:
        return repr([item.get(key) for key in keys]) if isinstance(item, Mapping) else None

    old_by_key = {key_of(item): item for item in old if key_of(item) is not None}
    return [old_by_key.get(key_of(item), _ABSENT) for item in value]
