"""What the Kubernetes API server does with a custom resource against its CRD's structural schema before any CEL
rule: prune, default, validate (apiextensions-apiserver's `structuraldefaulting.Default`, `pruning.Prune` and the
OpenAPI schema validator of kube-openapi).

- **Defaulting**: a property with `default:` that is absent (or null without `nullable`) gets a deep copy of its
  default, and defaulting goes on inside it, so `disruption: {}` and an absent `disruption` both end up with
  `consolidationPolicy`, `consolidateAfter` and `budgets` filled in. Nulls of non-nullable fields without a default
  are pruned.
- **Unknown fields**: the API server prunes them; `kubectl apply` (strict field validation, the default since
  Kubernetes 1.27) refuses them. They are reported, at the key, and left out of the defaulted object.
- **Validation**: type, `enum`, `pattern` (RE2, as Go's `regexp`: `$` is the end of the text), `minLength` /
  `maxLength` (characters), `minimum` / `maximum`, `minItems` / `maxItems`, `maxProperties`, `required`,
  `x-kubernetes-int-or-string`, `x-kubernetes-list-type: set` / `map` (duplicates), `format: date-time`.

Each problem is a `Violation` of the `schema` rule at the field's path, worded as the API server words it
(`Unsupported value: "Sometimes": supported values: "WhenEmpty", ...`). `blocking` says whether the API server
would skip the CEL rules for it (apiextensions-apiserver's `hasBlockingErr`: a wrong type, a value outside an
enum, a missing required field, a string over `maxLength`, a list or map over `maxItems` / `maxProperties`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeGuard

import re2  # type: ignore[import-untyped]  # RE2, the engine of Go's regexp and of the CRD patterns

from karpenter_policy.api.violations import SCHEMA, Path, Violation, render_path

Schema = Mapping[str, Any]

_DATE_TIME = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One schema violation, and whether it is of the kinds that make the API server skip the CEL rules."""

    violation: Violation
    blocking: bool


@cache
def _pattern(text: str) -> Any:
    return re2.compile(text)


@lru_cache(maxsize=16384)
def _matches(pattern: str, value: str) -> bool:
    """Whether RE2 finds `pattern` in `value`, remembered: the binding costs ~0.1 ms a call, and objects repeat
    the same keys and values (zones, label keys, durations) from one file to the next."""
    return _pattern(pattern).search(value) is not None


def _quoted(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


#: The integers JSON carries to the API server as integers: apimachinery decodes a number as int64 when it fits and
#: as float64 otherwise, so a larger integer is a "number" to the schema (and to CEL, which has no larger int).
INT64 = range(-(2**63), 2**63)


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value in INT64


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if value in INT64 else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if type(value) is dict or isinstance(value, Mapping):
        return "object"
    return type(value).__name__


#: The Python type whose values are exactly of a schema type (a bool is an int to Python, hence "integer" and
#: "number" are left to `_has_type`'s checks).
_EXACT_TYPES: dict[str, type] = {"string": str, "boolean": bool, "object": dict, "array": list}


@dataclass(slots=True, eq=False)
class _Node:
    """What the walks need of one schema node, looked up once per schema (`_node`) instead of once per value:
    each field as the schema gives it (None where absent), and the node of each sub-schema."""

    schema: Schema
    nullable: bool
    int_or_string: bool
    wanted: str | None
    exact: type | None
    enum: Any
    max_length: Any
    min_length: Any
    pattern: str | None
    date_time: bool
    maximum: Any
    minimum: Any
    max_items: Any
    min_items: Any
    list_type: Any
    list_map_keys: Any
    max_properties: Any
    min_properties: Any
    required: Any
    properties: dict[str, _Node]
    #: `additionalProperties` as given (True, False, a schema or None) and, when a schema, its node.
    extra: Any
    extra_node: _Node | None
    #: Whether a field neither in `properties` nor under an `additionalProperties` schema is kept by pruning.
    keep_unknown: bool
    items: _Node | None
    #: (key, default, node) of each property with a `default`, in the order of `properties`.
    defaults: tuple[tuple[str, Any, _Node], ...]
    #: Whether a string here has a length, pattern or date-time to check (`_check_string`).
    string_checks: bool
    #: Whether a string here is right as it is, whatever it says: a string is the type wanted (not int-or-string),
    #: without enum and without `string_checks`. The walks take such a string without a call.
    plain_string: bool


#: id(schema) → (schema, its node): the schema is kept so that its id is not reused by another.
_NODES: dict[int, tuple[Schema, _Node]] = {}


def _is_mapping(value: object) -> TypeGuard[Schema]:
    return type(value) is dict or isinstance(value, Mapping)


def _node(schema: Schema) -> _Node:
    """`schema`'s node, made once."""
    known = _NODES.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    properties: Mapping[str, Schema] = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    items = schema.get("items")
    wanted = schema.get("type")
    node = _Node(
        schema=schema,
        nullable=bool(schema.get("nullable")),
        int_or_string=bool(schema.get("x-kubernetes-int-or-string")),
        wanted=wanted,
        exact=_EXACT_TYPES.get(wanted) if isinstance(wanted, str) else None,
        enum=schema.get("enum"),
        max_length=schema.get("maxLength"),
        min_length=schema.get("minLength"),
        pattern=schema.get("pattern"),
        date_time=schema.get("format") == "date-time",
        maximum=schema.get("maximum"),
        minimum=schema.get("minimum"),
        max_items=schema.get("maxItems"),
        min_items=schema.get("minItems"),
        list_type=schema.get("x-kubernetes-list-type"),
        list_map_keys=schema.get("x-kubernetes-list-map-keys") or [],
        max_properties=schema.get("maxProperties"),
        min_properties=schema.get("minProperties"),
        required=schema.get("required") or (),
        properties={},
        extra=extra,
        extra_node=None,
        keep_unknown=extra is True or bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        or (not properties and "additionalProperties" not in schema),
        items=None,
        defaults=(),
        string_checks=False,
        plain_string=False,
    )
    node.string_checks = (node.max_length is not None or node.min_length is not None or node.pattern is not None
                          or node.date_time)
    node.plain_string = (node.exact is str and not node.int_or_string and node.enum is None
                         and not node.string_checks)
    _NODES[id(schema)] = (schema, node)  # before the sub-schemas: a schema that holds itself ends
    node.properties = {key: _node(sub) for key, sub in properties.items()}
    node.extra_node = _node(extra) if _is_mapping(extra) else None
    node.items = _node(items) if _is_mapping(items) else None
    node.defaults = tuple((key, sub["default"], node.properties[key]) for key, sub in properties.items()
                          if "default" in sub)
    return node


def _has_type(value: object, node: _Node) -> bool:
    if node.int_or_string:
        return isinstance(value, str) or _is_integer(value)
    wanted = node.wanted
    if wanted is None:
        return True
    if type(value) is node.exact:
        return True  # the common case, without the checks below
    if wanted == "integer":
        return _is_integer(value)
    if wanted == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return bool(_type_name(value) == wanted)


#: The types a scalar from YAML or JSON has exactly: immutable, so a deep copy of one is itself.
_SCALARS = frozenset({str, int, float, bool})


def defaulted(value: Any, schema: Schema) -> Any:
    """A deep copy of `value` with the schema's defaults applied and non-nullable nulls pruned, as the API server
    stores it. Unknown fields are left out (the API server prunes them); values of the wrong type are kept as
    they are (validation reports them)."""
    return _walk(value, _node(schema), (), None, None)


def unknown_fields(value: Any, schema: Schema, path: Path = ()) -> list[SchemaProblem]:
    """A problem at each field of `value` its schema does not know (what the API server prunes and
    `kubectl apply`'s strict field validation refuses), looked for before pruning."""
    found: list[SchemaProblem] = []
    _walk(value, _node(schema), path, found, None)
    return found


def defaulted_and_unknown(value: Any, schema: Schema) -> tuple[Any, list[SchemaProblem]]:
    """`defaulted(value, schema)` and `unknown_fields(value, schema)` in one walk of `value`."""
    found: list[SchemaProblem] = []
    return _walk(value, _node(schema), (), found, None), found


def defaulted_and_problems(value: Any, schema: Schema) -> tuple[Any, list[SchemaProblem]]:
    """`defaulted(value, schema)`, and `unknown_fields(value, schema)` followed by the `schema_problems` of the
    defaulted value — the same problems in the same order — in one walk of `value` (admission's steps)."""
    unknown: list[SchemaProblem] = []
    problems: list[SchemaProblem] = []
    stored = _walk(value, _node(schema), (), unknown, problems)
    unknown.extend(problems)
    return stored, unknown


def _walk(value: Any, node: _Node, path: Path, unknown: list[SchemaProblem] | None,
          problems: list[SchemaProblem] | None) -> Any:
    """`defaulted`'s copy of `value`; each unknown field a problem in `unknown`, and the problems `_check` finds
    in the copy in `problems`, in `_check`'s order (either list None: not looked for)."""
    kind = type(value)
    if value is None or kind in _SCALARS:  # immutable: its own copy
        if problems is not None and not (kind is str and node.plain_string):
            _check(value, node, path, problems)
        return value
    if kind is list:
        return _walk_list(value, node, path, unknown, problems)
    if kind is dict or isinstance(value, Mapping):
        return _walk_object(value, node, path, unknown, problems)
    out = copy.deepcopy(value)
    if problems is not None:
        _check(out, node, path, problems)
    return out


def _walk_object(value: Mapping[str, Any], node: _Node, path: Path, unknown: list[SchemaProblem] | None,
                 problems: list[SchemaProblem] | None) -> dict[str, Any]:
    checks = problems if problems is not None and _has_type(value, node) else None  # `_check` descends
    mark = len(problems) if problems is not None else 0
    tracked = unknown is not None or checks is not None
    properties = node.properties
    extra_node = node.extra_node
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = properties.get(key)
        if sub is not None:
            if item is None and not sub.nullable:
                continue  # a default below fills it, as for an absent field
            if type(item) is str and sub.plain_string:
                out[key] = item
            else:
                out[key] = _walk(item, sub, (*path, key) if tracked else path, unknown, checks)
        elif extra_node is not None:
            out[key] = _walk(item, extra_node, (*path, key) if tracked else path, unknown, checks)
        elif node.keep_unknown:
            out[key] = copy.deepcopy(item)
        elif unknown is not None and properties:
            _problem(unknown, (*path, key), f"unknown field {_quoted(_where((*path, key)))}", at_key=True)
    for key, default, sub in node.defaults:
        if key not in out:  # the default walked as it is: the walk copies it
            out[key] = _walk(default, sub, (*path, key), None, checks) if checks is not None else \
                _walk(default, sub, path, None, None)
    if problems is not None:  # this object's own problems come before its fields'
        own: list[SchemaProblem] = []
        if _check_head(out, node, path, own):
            _check_object_own(out, node, path, own)
        if own:
            problems[mark:mark] = own
    return out


def _walk_list(value: list[Any], node: _Node, path: Path, unknown: list[SchemaProblem] | None,
               problems: list[SchemaProblem] | None) -> list[Any]:
    checks = problems if problems is not None and _has_type(value, node) else None  # `_check` descends
    mark = len(problems) if problems is not None else 0
    items = node.items
    out: list[Any]
    if items is None:
        out = [copy.deepcopy(item) for item in value]
    elif unknown is None and checks is None:
        out = [_walk(item, items, path, None, None) for item in value]
    elif items.plain_string:
        out = [item if type(item) is str else _walk(item, items, (*path, index), unknown, checks)
               for index, item in enumerate(value)]
    else:
        out = [_walk(item, items, (*path, index), unknown, checks) for index, item in enumerate(value)]
    if problems is not None:  # this list's own problems come before its items', its duplicates after them
        own: list[SchemaProblem] = []
        if _check_head(out, node, path, own):
            _check_list_own(out, node, path, own)
            if own:
                problems[mark:mark] = own
            _check_list_duplicates(out, node, path, problems)
        elif own:
            problems[mark:mark] = own
    return out


def schema_problems(value: Any, schema: Schema, path: Path = ()) -> list[SchemaProblem]:
    """Every violation of `schema` by `value` (already defaulted), each at its field's path."""
    found: list[SchemaProblem] = []
    _check(value, _node(schema), path, found)
    return found


def _problem(found: list[SchemaProblem], path: Path, message: str, *, blocking: bool = False,
             at_key: bool = False) -> None:
    found.append(SchemaProblem(Violation(SCHEMA, path, message, at_key=at_key), blocking))


def _check(value: Any, node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    if not _check_head(value, node, path, found):
        return
    kind = type(value)
    if kind is str or isinstance(value, str):
        _check_string(value, node, path, found)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(value, node, path, found)
    elif isinstance(value, list):
        _check_list(value, node, path, found)
    elif kind is dict or isinstance(value, Mapping):
        _check_object(value, node, path, found)


def _check_head(value: Any, node: _Node, path: Path, found: list[SchemaProblem]) -> bool:
    """The null, type and enum problems of `value`; whether the checks of its type apply (not after a null or a
    wrong type)."""
    if value is None:
        if not node.nullable:
            _problem(found, path, f"Invalid value: \"null\": {_where(path)} in body must be of type "
                     f"{_wanted(node)}", blocking=True)
        return False
    if not _has_type(value, node):
        _problem(found, path, f"Invalid value: \"{_type_name(value)}\": {_where(path)} in body must be of type "
                 f"{_wanted(node)}: \"{_type_name(value)}\"", blocking=True)
        return False
    enum = node.enum
    if enum is not None and value not in enum:
        supported = ", ".join(_quoted(option) for option in enum)
        _problem(found, path, f"Unsupported value: {_quoted(value)}: supported values: {supported}", blocking=True)
    return True


def _where(path: Path) -> str:
    return render_path(path) or "<root>"


def _wanted(node: _Node) -> str:
    if node.int_or_string:
        return "integer or string"
    return str(node.schema.get("type", "any"))


def _check_string(value: str, node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    if not node.string_checks:
        return
    if node.max_length is not None and len(value) > node.max_length:
        _problem(found, path, f"Too long: may not be more than {node.max_length} bytes", blocking=True)
    if node.min_length is not None and len(value) < node.min_length:
        _problem(found, path, f"Invalid value: {_quoted(value)}: {_where(path)} in body should be at least "
                 f"{node.min_length} chars long")
    pattern = node.pattern
    if pattern is not None and not _matches(pattern, value):
        _problem(found, path, f"Invalid value: {_quoted(value)}: {_where(path)} in body should match '{pattern}'")
    if node.date_time and not _matches(_DATE_TIME, value):
        _problem(found, path, f"Invalid value: {_quoted(value)}: {_where(path)} in body must be of type "
                 "date-time")


def _check_number(value: float, node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    if node.maximum is not None and value > node.maximum:
        _problem(found, path, f"Invalid value: {value}: {_where(path)} in body should be less than or equal to "
                 f"{node.maximum}")
    if node.minimum is not None and value < node.minimum:
        _problem(found, path, f"Invalid value: {value}: {_where(path)} in body should be greater than or equal "
                 f"to {node.minimum}")


def _check_list(value: list[Any], node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    _check_list_own(value, node, path, found)
    items = node.items
    if items is not None:
        for index, item in enumerate(value):
            _check(item, items, (*path, index), found)
    _check_list_duplicates(value, node, path, found)


def _check_list_own(value: list[Any], node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    """A list's size against its bounds (before its items' problems)."""
    if node.max_items is not None and len(value) > node.max_items:
        _problem(found, path, f"Too many: {len(value)}: must have at most {node.max_items} items", blocking=True)
    if node.min_items is not None and len(value) < node.min_items:
        _problem(found, path, f"Invalid value: {len(value)}: {_where(path)} in body should have at least "
                 f"{node.min_items} items")


def _check_list_duplicates(value: list[Any], node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    """The duplicates of a `set` or `map` list (after its items' problems)."""
    list_type = node.list_type
    if list_type == "set":
        seen: set[str] = set()
        for index, item in enumerate(value):
            marker = json.dumps(item, sort_keys=True, default=str)
            if marker in seen:
                _problem(found, (*path, index), f"Duplicate value: {_quoted(item)}")
            seen.add(marker)
    elif list_type == "map":
        keys = node.list_map_keys
        seen_keys: set[str] = set()
        for index, item in enumerate(value):
            if not (type(item) is dict or isinstance(item, Mapping)):
                continue
            marker = json.dumps([item.get(key) for key in keys], default=str)
            if marker in seen_keys:
                _problem(found, (*path, index), f"Duplicate value: {_quoted({k: item.get(k) for k in keys})}")
            seen_keys.add(marker)


def _check_object(value: Mapping[str, Any], node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    _check_object_own(value, node, path, found)
    properties = node.properties
    extra = node.extra_node
    for key, item in value.items():
        sub = properties.get(key)
        if sub is not None:
            _check(item, sub, (*path, key), found)
        elif extra is not None:
            _check(item, extra, (*path, key), found)


def _check_object_own(value: Mapping[str, Any], node: _Node, path: Path, found: list[SchemaProblem]) -> None:
    """An object's size against its bounds and its required fields (before its fields' problems)."""
    if node.max_properties is not None and len(value) > node.max_properties:
        _problem(found, path, f"Too many: {len(value)}: must have at most {node.max_properties} items",
                 blocking=True)
    if node.min_properties is not None and len(value) < node.min_properties:
        _problem(found, path, f"Invalid value: {len(value)}: {_where(path)} in body should have at least "
                 f"{node.min_properties} properties")
    for key in node.required:
        if key not in value:
            _problem(found, (*path, key), "Required value", blocking=True)
