"""OpenAPI of the test API server, as kubectl 1.3x reads it: ``/openapi/v3`` (the index of group versions, then
one document per group version) for ``kubectl explain``, client-side apply's strategic-merge patch and the check
that a kind's PATCH takes ``fieldValidation``; ``/openapi/v2`` (one JSON document; protobuf is not offered: the
server answers JSON whatever the Accept header asks, which kubectl parses) when a v3 document lacks a kind.

The schemas are Kubernetes' own: the definitions ``kubernetes-validate`` ships for Kubernetes 1.28 (JSON Schema
converted from the API server's OpenAPI, patch strategies and merge keys kept), converted back — ``$ref`` to
``#/definitions/…`` (v2) or ``#/components/schemas/…`` (v3), ``type: [string, "null"]`` to ``type: string``,
IntOrString to ``format: int-or-string``. Each document holds the served kinds' schemas and everything they
reference. :func:`unknown_fields` is the server's side of ``fieldValidation=Strict``: the paths of fields the
kind's schema does not know (``spec.replicaz``), which kubectl's default ``--validate=strict`` relies on.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from karpenter_policy.kube.objects import Kind

from .kinds import ALL_KINDS

SCHEMA_VERSION = "v1.28.0-local"
_V2_REF = "#/definitions/"
_V3_REF = "#/components/schemas/"
_QUERY = ("dryRun", "fieldManager", "fieldValidation", "force")


@functools.cache
def _source() -> dict[str, Any]:
    """Kubernetes' definitions by name, as kubernetes-validate ships them ({} without it)."""
    try:
        import kubernetes_validate  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return {}
    path = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / SCHEMA_VERSION / "_definitions.json"
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    definitions = document.get("$defs") or document.get("definitions") or {}
    return definitions if isinstance(definitions, dict) else {}


def _name_of(kind: Kind) -> str | None:
    """The definition of a kind: the one whose x-kubernetes-group-version-kind names it."""
    for name, schema in _source().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group"), gvk.get("version"), gvk.get("kind")) == (kind.group, kind.version, kind.kind):
                return name
    return None


def _refs(schema: Any) -> Iterable[str]:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref.rpartition("/")[2]
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def _closure(kinds: Iterable[Kind]) -> list[str]:
    """The definitions of the kinds and of everything they reference."""
    source = _source()
    todo = [name for kind in kinds if (name := _name_of(kind)) is not None]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in source:
            continue
        seen.add(name)
        todo.extend(_refs(source[name]))
    return sorted(seen)


def _convert(schema: Any, prefix: str) -> Any:
    """A JSON Schema of kubernetes-validate as an OpenAPI schema object (see the module docstring)."""
    if not isinstance(schema, dict):
        return schema
    one_of = schema.get("oneOf")
    if isinstance(one_of, list):
        types = {_first_type(option.get("type")) for option in one_of if isinstance(option, dict)}
        out: dict[str, Any] = {"type": "string"}
        if types == {"string", "integer"}:
            out["format"] = "int-or-string"
        if "description" in schema:
            out["description"] = schema["description"]
        return out
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("$schema", "$id"):
            continue
        if key == "$ref" and isinstance(value, str):
            converted[key] = prefix + value.rpartition("/")[2]
        elif key == "type":
            converted[key] = _first_type(value)
        elif key == "properties" and isinstance(value, dict):
            converted[key] = {name: _convert(item, prefix) for name, item in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            converted[key] = _convert(value, prefix)
        elif key == "enum" and isinstance(value, list):
            converted[key] = [item for item in value if item is not None]
        else:
            converted[key] = value
    if prefix == _V3_REF and "$ref" in converted and len(converted) > 1:  # v3 wraps a described $ref, as the
        ref = converted.pop("$ref")                                        # API server's documents do
        converted["allOf"] = [{"$ref": ref}]
    return converted


def _first_type(value: Any) -> str | None:
    if isinstance(value, list):
        return next((str(item) for item in value if item != "null"), None)
    return str(value) if value is not None else None


def _url(group_version: str) -> str:
    return ("apis/" if "/" in group_version else "api/") + group_version


def _paths(kinds: Iterable[Kind], ref: str) -> dict[str, Any]:
    """The PATCH operation of each kind, with the query parameters kubectl checks (``fieldValidation``)."""
    paths: dict[str, Any] = {}
    for kind in kinds:
        name = _name_of(kind)
        scope = "/namespaces/{namespace}" if kind.namespaced else ""
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        parameters = [{"name": query, "in": "query", "schema": {"type": "string"}} for query in _QUERY]
        response: dict[str, Any] = {"description": "OK"}
        if name is not None:
            response["content"] = {"application/json": {"schema": {"$ref": ref + name}}}
        paths[f"/{_url(kind.api_version)}{scope}/{kind.plural}/{{name}}"] = {
            "patch": {"operationId": f"patch{kind.kind}", "x-kubernetes-group-version-kind": gvk,
                      "x-kubernetes-action": "patch", "parameters": parameters, "responses": {"200": response}},
        }
    return paths


def _info() -> dict[str, str]:
    return {"title": "Kubernetes", "version": "v1.28.0"}


def openapi_v2() -> dict[str, Any] | None:
    """``/openapi/v2``: every served kind's definition and what it references (None without the schemas)."""
    source = _source()
    if not source:
        return None
    definitions = {name: _convert(source[name], _V2_REF) for name in _closure(ALL_KINDS)}
    return {"swagger": "2.0", "info": _info(), "paths": {}, "definitions": definitions}


def openapi_v3(path: str) -> dict[str, Any] | None:
    """``/openapi/v3`` (the index) or ``/openapi/v3/<api|apis>/<group version>``, else None."""
    group_versions = sorted({kind.api_version for kind in ALL_KINDS})
    if path.rstrip("/") == "/openapi/v3":
        return {"paths": {_url(gv): {"serverRelativeURL": f"/openapi/v3/{_url(gv)}?hash=emulated"}
                          for gv in group_versions}}
    wanted = next((gv for gv in group_versions if path.rstrip("/") == f"/openapi/v3/{_url(gv)}"), None)
    if wanted is None:
        return None
    kinds = [kind for kind in ALL_KINDS if kind.api_version == wanted]
    source = _source()
    schemas = {name: _convert(source[name], _V3_REF) for name in _closure(kinds)}
    return {"openapi": "3.0.0", "info": _info(), "paths": _paths(kinds, _V3_REF),
            "components": {"schemas": schemas}}


def unknown_fields(kind: Kind, obj: Any) -> list[str]:
    """The paths of the fields of ``obj`` that ``kind``'s schema does not declare ([] without the schemas)."""
    name = _name_of(kind)
    if name is None:
        return []
    found: list[str] = []
    _walk(_source()[name], obj, "", found)
    return found


def _resolve(schema: Any) -> Any:
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        schema = _source().get(schema["$ref"].rpartition("/")[2], {})
    return schema


def _walk(schema: Any, value: Any, path: str, found: list[str]) -> None:
    schema = _resolve(schema)
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(properties, dict) and key in properties:
                _walk(properties[key], item, where, found)
            elif isinstance(extra, dict):
                _walk(extra, item, where, found)
            elif isinstance(properties, dict) and extra is None:
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", found)
