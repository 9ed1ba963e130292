"""CEL rules compiled to Python closures, for the constructs the shipped CRDs' rules use, with celpy's semantics
(`api.v1.cel` evaluates with celpy's tree-walking interpreter: milliseconds a rule; a closure takes microseconds).

`compile_rule(rule)` turns celpy's parsed syntax tree (a lark Tree: expr, conditionalor, conditionaland, relation,
member_dot, member_dot_arg, member_index, ident_arg, literal, list_lit, ...) into a function of the activation
(`{"self": <JSON value>, "oldSelf": ...}`, plain JSON values as `json.loads` makes them), or None when the rule uses
a construct not compiled here (it is then evaluated by celpy alone).

What a closure does on a value:
- returns the rule's value when it is sure to be what celpy computes;
- raises `CelError` where celpy's value is an evaluation error (a missing key, an index out of range, `int("x")`,
  a field of a non-map): `&&` and `||` absorb it as celpy does (`false && error` is false, `error || true` is
  true; both operands are evaluated), `all` / `exists` reduce it the same way;
- raises `Unsure` where celpy's behaviour is not modelled (heterogeneous comparisons, doubles, nulls, a
  non-boolean or erring condition, an erring `filter` / `exists_one` predicate, an integer beyond int64): never
  absorbed, it sends the whole rule to celpy.

So a compiled verdict is either celpy's or not given; `api.v1.cel` asks celpy for an error's text, so that
messages stay celpy's word for word. `tests/api/v1/test_cel_compile.py` holds every compiled rule to celpy's
verdict on Karpenter's ported CEL cases and on generated values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import lark
import re2  # type: ignore[import-untyped]

Activation = dict[str, Any]
Closure = Callable[[Activation], Any]


class CelError(Exception):
    """An evaluation error, as celpy returns one: absorbed by `&&`, `||` and the macros as CEL does."""


class Unsure(Exception):
    """celpy's result here is not modelled: the rule is evaluated by celpy."""


class Unsupported(Exception):
    """A construct the compiler does not handle (at compile time)."""


#: Go's `strconv.ParseInt(s, 10, 64)` syntax: a sign and ASCII digits only (cel-go's `int(<string>)`).
GO_DECIMAL = re.compile(r"[+-]?[0-9]+", re.ASCII)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_MACROS = frozenset({"all", "exists", "exists_one", "filter"})


def compile_rule(tree: lark.Tree[Any], variables: frozenset[str] = frozenset({"self", "oldSelf"})) -> Closure | None:
    """The closure for celpy's syntax tree of a rule, or None if it uses a construct not compiled here."""
    try:
        return _compile(tree, variables)
    except Unsupported:
        return None


def _is_int(value: Any) -> bool:
    return type(value) is int


def _compile(node: Any, scope: frozenset[str]) -> Closure:  # noqa: C901, PLR0911, PLR0912 - one branch a node kind
    if not isinstance(node, lark.Tree):
        raise Unsupported(repr(node))
    kind, children = str(node.data), node.children
    if kind in {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                "member", "primary", "paren_expr"} and len(children) == 1:
        return _compile(children[0], scope)
    if kind == "expr" and len(children) == 3:
        return _ternary(*(_compile(child, scope) for child in children))
    if kind == "conditionalor" and len(children) == 2:
        return _or(_compile(children[0], scope), _compile(children[1], scope))
    if kind == "conditionaland" and len(children) == 2:
        return _and(_compile(children[0], scope), _compile(children[1], scope))
    if kind == "relation" and len(children) == 2:
        operator = children[0]
        if not isinstance(operator, lark.Tree) or len(operator.children) != 1:
            raise Unsupported(kind)
        return _relation(str(operator.data), _compile(operator.children[0], scope), _compile(children[1], scope))
    if kind == "unary" and len(children) == 2 and isinstance(children[0], lark.Tree):
        if children[0].data == "unary_not":
            return _not(_compile(children[1], scope))
        raise Unsupported(str(children[0].data))
    if kind == "ident":
        name = str(children[0])
        if name not in scope:
            raise Unsupported(name)
        return lambda activation: activation[name]
    if kind == "literal":
        return _literal(children[0])
    if kind == "list_lit":
        items = [_compile(child, scope) for child in _exprlist(children)]
        return lambda activation: [item(activation) for item in items]
    if kind == "member_dot":
        return _field(_compile(children[0], scope), str(children[1]))
    if kind == "member_index":
        return _index(_compile(children[0], scope), _compile(children[1], scope))
    if kind == "member_dot_arg":
        return _method(children, scope)
    if kind == "ident_arg":
        return _function(str(children[0]), _exprlist(children[1:]), scope)
    raise Unsupported(kind)


def _exprlist(children: list[Any]) -> list[Any]:
    if not children or children[0] is None:
        return []
    if len(children) != 1 or not isinstance(children[0], lark.Tree) or children[0].data != "exprlist":
        raise Unsupported("arguments")
    return list(children[0].children)


def _literal(token: Any) -> Closure:
    text, kind = str(token), getattr(token, "type", "")
    if kind == "STRING_LIT" and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and "\\" not in text:
        if text.startswith(("'''", '"""')):
            raise Unsupported(text)
        value: Any = text[1:-1]
    elif kind == "INT_LIT" and text.lstrip("-").isdigit():
        value = int(text)
    elif kind == "BOOL_LIT":
        value = text == "true"
    else:
        raise Unsupported(text)
    return lambda activation: value


_ERROR = object()


def _outcome(closure: Closure, activation: Activation) -> Any:
    """A boolean operand: True, False or `_ERROR` (absorbable); anything else is not modelled."""
    try:
        value = closure(activation)
    except CelError:
        return _ERROR
    if value is True or value is False:
        return value
    raise Unsure("a non-boolean operand")


def _and(left: Closure, right: Closure) -> Closure:
    def conjunction(activation: Activation) -> bool:
        first, second = _outcome(left, activation), _outcome(right, activation)
        if first is False or second is False:
            return False
        if first is _ERROR or second is _ERROR:
            raise CelError("&&")
        return True

    return conjunction


def _or(left: Closure, right: Closure) -> Closure:
    def disjunction(activation: Activation) -> bool:
        first, second = _outcome(left, activation), _outcome(right, activation)
        if first is True or second is True:
            return True
        if first is _ERROR or second is _ERROR:
            raise CelError("||")
        return False

    return disjunction


def _not(operand: Closure) -> Closure:
    def negation(activation: Activation) -> bool:
        value = operand(activation)
        if value is True or value is False:
            return not value
        raise Unsure("! of a non-boolean")

    return negation


def _ternary(condition: Closure, then: Closure, otherwise: Closure) -> Closure:
    def choice(activation: Activation) -> Any:
        try:
            chosen = condition(activation)
        except CelError as error:
            raise Unsure("an erring condition") from error
        if chosen is True:
            return then(activation)
        if chosen is False:
            return otherwise(activation)
        raise Unsure("a non-boolean condition")

    return choice


def _comparable(first: Any, second: Any) -> bool:
    return (type(first) is str and type(second) is str) or (_is_int(first) and _is_int(second))


def _relation(operator: str, left: Closure, right: Closure) -> Closure:  # noqa: C901 - one case an operator
    def compare(activation: Activation) -> bool:
        first, second = left(activation), right(activation)
        if operator == "relation_in":
            return _contains(first, second)
        if operator in {"relation_eq", "relation_ne"}:
            if not (_comparable(first, second) or (type(first) is bool and type(second) is bool)):
                raise Unsure("a heterogeneous equality")
            return (first == second) is (operator == "relation_eq")
        if not _comparable(first, second):
            raise Unsure("an ordering of other types")
        if operator == "relation_lt":
            return bool(first < second)
        if operator == "relation_le":
            return bool(first <= second)
        if operator == "relation_gt":
            return bool(first > second)
        return bool(first >= second)

    if operator not in {"relation_in", "relation_eq", "relation_ne", "relation_lt", "relation_le", "relation_gt",
                        "relation_ge"}:
        raise Unsupported(operator)
    return compare


def _contains(item: Any, container: Any) -> bool:
    if type(item) is not str:
        raise Unsure("in with a non-string")
    if isinstance(container, dict):
        return item in container
    if isinstance(container, list) and all(type(element) is str for element in container):
        return item in container
    raise Unsure("in over other values")


def _field(target: Closure, name: str) -> Closure:
    def select(activation: Activation) -> Any:
        value = target(activation)
        if not isinstance(value, dict) or name not in value:
            raise CelError(f"no such member {name!r}")
        return value[name]

    return select


def _index(target: Closure, key: Closure) -> Closure:
    def item(activation: Activation) -> Any:
        value, index = target(activation), key(activation)
        if isinstance(value, dict) and type(index) is str:
            if index not in value:
                raise CelError("no such key")
            return value[index]
        if isinstance(value, list) and _is_int(index) and index >= 0:
            if index >= len(value):
                raise CelError("invalid_argument")
            return value[index]
        raise Unsure("an index of another kind")

    return item


def _strings(*values: Any) -> bool:
    return all(type(value) is str for value in values)


def _size(value: Any) -> int:
    if isinstance(value, dict | list | str):
        return len(value)
    raise Unsure("size of another value")


def _find(text: Any, pattern: Any) -> str:
    if not _strings(text, pattern):
        raise Unsure("find on another value")
    return _first_match(pattern, text)


@lru_cache(maxsize=16384)
def _first_match(pattern: str, text: str) -> str:
    """RE2's first match of `pattern` in `text` ("" for none), remembered: the binding costs ~0.1 ms a call and
    objects repeat the same keys and values."""
    match = re2.search(pattern, text)
    return str(match.group(0)) if match else ""


def _matches(text: Any, pattern: Any) -> bool:
    if not _strings(text, pattern):
        raise Unsure("matches on another value")
    try:
        return _found(pattern, text)
    except re2.error as error:
        raise CelError("match error") from error


@lru_cache(maxsize=16384)
def _found(pattern: str, text: str) -> bool:
    """Whether RE2 finds `pattern` in `text`, remembered as `_first_match` is (an invalid pattern raises each
    time: raising calls are not remembered)."""
    return re2.search(pattern, text) is not None


def _split(text: Any, separator: Any) -> list[str]:
    if not _strings(text, separator):
        raise Unsure("split on another value")
    return list(text) if separator == "" else text.split(separator)


def _starts(text: Any, prefix: Any) -> bool:
    if not _strings(text, prefix):
        raise Unsure("startsWith on another value")
    return bool(text.startswith(prefix))


def _ends(text: Any, suffix: Any) -> bool:
    if not _strings(text, suffix):
        raise Unsure("endsWith on another value")
    return bool(text.endswith(suffix))


def _int(value: Any) -> int:
    """cel-go's `int()` of a string (`cel.KUBERNETES_FUNCTIONS`'s): Go's `strconv.ParseInt(s, 10, 64)`."""
    if type(value) is not str:
        raise Unsure("int of another value")
    if not GO_DECIMAL.fullmatch(value):
        raise CelError("cannot parse as an integer")
    number = int(value)
    if not INT64_MIN <= number <= INT64_MAX:
        raise Unsure("int overflow")
    return number


#: The functions and methods compiled, by name and number of arguments (a method's receiver is its first).
_CALLS: dict[tuple[str, int], Callable[..., Any]] = {
    ("size", 1): _size, ("find", 2): _find, ("matches", 2): _matches, ("split", 2): _split,
    ("startsWith", 2): _starts, ("endsWith", 2): _ends, ("int", 1): _int,
}


def _call(function: Callable[..., Any], arguments: list[Closure]) -> Closure:
    def call(activation: Activation) -> Any:
        return function(*(argument(activation) for argument in arguments))

    return call


def _function(name: str, arguments: list[Any], scope: frozenset[str]) -> Closure:
    if name == "has":
        if len(arguments) != 1:
            raise Unsupported("has")
        return _has(arguments[0], scope)
    function = _CALLS.get((name, len(arguments)))
    if function is None:
        raise Unsupported(name)
    return _call(function, [_compile(argument, scope) for argument in arguments])


def _has(argument: Any, scope: frozenset[str]) -> Closure:
    node = argument
    while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
        node = node.children[0]
    if not isinstance(node, lark.Tree) or node.data != "member_dot":
        raise Unsupported("has of a non-field")
    target, name = _compile(node.children[0], scope), str(node.children[1])

    def present(activation: Activation) -> bool:
        try:
            value = target(activation)
        except CelError as error:
            raise Unsure("has of an error") from error
        if not isinstance(value, dict):
            raise Unsure("has on a non-map")
        return name in value

    return present


def _method(children: list[Any], scope: frozenset[str]) -> Closure:
    receiver, name = _compile(children[0], scope), str(children[1])
    arguments = _exprlist(children[2:])
    if name in _MACROS:
        if len(arguments) != 2:
            raise Unsupported(name)
        variable = _variable(arguments[0])
        return _macro(name, receiver, variable, _compile(arguments[1], scope | {variable}))
    function = _CALLS.get((name, len(arguments) + 1))
    if function is None:
        raise Unsupported(name)
    return _call(function, [receiver, *(_compile(argument, scope) for argument in arguments)])


def _variable(node: Any) -> str:
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if not isinstance(node, lark.Tree) or node.data != "ident":
        raise Unsupported("a macro variable")
    return str(node.children[0])


def _macro(name: str, receiver: Closure, variable: str, predicate: Closure) -> Closure:  # noqa: C901 - one a macro
    def outcomes(activation: Activation) -> tuple[list[Any], list[Any]]:
        container = receiver(activation)
        if not isinstance(container, dict | list):
            raise Unsure("a macro over another value")
        items = list(container)
        scope = dict(activation)
        results = []
        for item in items:
            scope[variable] = item
            results.append(_outcome(predicate, scope))
        return items, results

    def every(activation: Activation) -> bool:
        _, results = outcomes(activation)
        if False in results:
            return False
        if _ERROR in results:
            raise CelError("all")
        return True

    def some(activation: Activation) -> bool:
        _, results = outcomes(activation)
        if True in results:
            return True
        if _ERROR in results:
            raise CelError("exists")
        return False

    def kept(activation: Activation) -> list[Any]:
        items, results = outcomes(activation)
        if _ERROR in results:
            raise Unsure("an erring filter predicate")
        return [item for item, result in zip(items, results, strict=True) if result is not False]

    def one(activation: Activation) -> bool:
        _, results = outcomes(activation)
        if _ERROR in results:
            raise Unsure("an erring exists_one predicate")
        return sum(1 for result in results if result is not False) == 1

    return {"all": every, "exists": some, "filter": kept, "exists_one": one}[name]


def fits_int64(value: Any) -> bool:
    """Whether every integer in a JSON value is an int64 and nothing in it is a float or null (celpy refuses larger
    integers while converting; doubles and nulls are not modelled here)."""
    if isinstance(value, dict):
        return all(fits_int64(item) for item in value.values())
    if isinstance(value, list):
        return all(fits_int64(item) for item in value)
    if _is_int(value):
        return bool(INT64_MIN <= value <= INT64_MAX)
    return isinstance(value, str | bool)
