"""JSON Schema validation of policy objects against `schemas/` (shipped in the package as `karpenter_policy/schemas/`).

`jsonschema` (draft 2020-12) is the reference and writes every message. Valid documents — nearly all of
them — are recognised first by the same schema compiled with `fastjsonschema`, ~20× faster; only a document
it rejects goes through `jsonschema` to collect each error with its path. A test holds both to the same
verdicts. The compiled validators are kept between runs (`validatorcache`).

It lives in `api` so that what compile checks a Provisioner with is also what the controller and the webhook check
a compiled constraint set with when they load one: one schema, one validator.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import fastjsonschema

if TYPE_CHECKING:
    import jsonschema

from karpenter_policy.api.kinds import SCHEMA_FILES
from karpenter_policy.api.validatorcache import compiled_validator
from karpenter_policy.api.violations import SCHEMA, Path, Violation, render_path

SCHEMA_DIRECTORY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")


@cache
def schema_bytes(file_name: str) -> bytes:
    """The bytes of a schema file of the package's `schemas/` (read as a file: importlib.resources would cost
    more to import than validating a file does)."""
    with open(os.path.join(SCHEMA_DIRECTORY, file_name), "rb") as handle:
        return handle.read()


@cache
def load_schema(file_name: str) -> dict[str, Any]:
    """A schema document from the package's `schemas/`."""
    schema: dict[str, Any] = json.loads(schema_bytes(file_name).decode("utf-8"))
    return schema


@cache
def _fast_validator(file_name: str) -> Callable[[Any], Any]:
    return compiled_validator(file_name, schema_bytes(file_name), lambda: load_schema(file_name))


@cache
def _reference_validator(file_name: str) -> jsonschema.protocols.Validator:
    import jsonschema  # only documents the fast validator rejects need it: keep it off the start-up path

    return jsonschema.Draft202012Validator(load_schema(file_name))


def schema_file_for(api_version: str, kind: str) -> str | None:
    return SCHEMA_FILES.get((api_version, kind))


def schema_violations(
    doc: Mapping[str, Any], file_name: str, name_of: Callable[[Path], str] = render_path
) -> list[Violation]:
    """Every schema error of `doc`, each at the path of the offending field (empty when valid). Messages name a
    field by `name_of` its path (`spec.requirements[0].key`; a constraint set's reader names its own fields)."""
    try:
        _fast_validator(file_name)(doc)
        return []
    except fastjsonschema.JsonSchemaException:
        pass
    found: dict[tuple[Path, str], Violation] = {}
    for error in _reference_validator(file_name).iter_errors(doc):
        for violation in _explain(error, name_of):
            found.setdefault((violation.path, violation.message), violation)
    if not found:  # the two validators disagree: trust neither silently
        return [Violation(SCHEMA, (), "the document does not match its schema")]
    return sorted(found.values(), key=lambda v: ([str(p) for p in v.path], v.message))


_METADATA_FIELDS = frozenset({"name", "namespace", "labels", "annotations", "generateName"})


def type_name(value: Any) -> str:
    """How a message names the JSON type of `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "mapping"


def show_value(value: Any) -> str:
    """`value` as a message shows it: JSON, escaped (no line breaks, no bidirectional controls), at most 60
    characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def nearest_field(name: str, candidates: list[str]) -> str | None:
    """The candidate closest to a misspelt `name`, if any is close."""
    lowered = {c.lower(): c for c in candidates}
    if name.lower() in lowered:
        return lowered[name.lower()]
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


def _explain(error: jsonschema.ValidationError, name_of: Callable[[Path], str]) -> list[Violation]:
    path: Path = tuple(error.absolute_path)
    where = name_of(path) or "document"
    validator, schema, instance = error.validator, error.schema, error.instance
    if validator == "additionalProperties" and isinstance(instance, Mapping):
        known = sorted(schema.get("properties", {}))
        violations = []
        for key in sorted(k for k in instance if k not in schema.get("properties", {})):
            hint = nearest_field(str(key), known)
            if not path and key in _METADATA_FIELDS:
                hint = f"metadata.{key} (indented under metadata:)"
            field = name_of((*path, key))
            message = f"unknown field {field}" + (
                f"; did you mean {hint}?" if hint else f"; known fields: {', '.join(known)}"
            )
            violations.append(Violation(SCHEMA, (*path, key), message, at_key=True))
        return violations
    if validator == "required":
        absent = [name for name in error.validator_value if not (isinstance(instance, Mapping) and name in instance)]
        return [Violation(SCHEMA, path, f"{where}: missing required field {name!r}") for name in absent]
    if validator == "type":
        expected = schema.get("type")
        expected_text = " or ".join(expected) if isinstance(expected, list) else str(expected)
        article = "an" if expected_text[:1] in "aeiou" else "a"
        expected_text = {"object": "a mapping", "array": "a list"}.get(expected_text, f"{article} {expected_text}")
        actual = "null" if instance is None else f"{type_name(instance)} {show_value(instance)}"
        return [
            Violation(SCHEMA, path, f"{where} must be {expected_text}, not {actual}")
        ]
    if validator == "const":
        return [Violation(SCHEMA, path, f"{where} must be {show_value(schema['const'])}, not {show_value(instance)}")]
    if validator == "enum":
        allowed = ", ".join(str(v) for v in schema["enum"])
        return [Violation(SCHEMA, path, f"{where} {show_value(instance)} is not one of {allowed}")]
    if validator in ("minimum", "maximum"):
        low, high = schema.get("minimum"), schema.get("maximum")
        bounds = (
            f"between {low} and {high}"
            if low is not None and high is not None
            else (f"at least {low}" if low is not None else f"at most {high}")
        )
        return [Violation(SCHEMA, path, f"{where} {show_value(instance)} is out of range: it must be {bounds}")]
    if validator == "pattern" and "ns|us" in str(schema.get("pattern")):
        return [Violation(SCHEMA, path, f"{where}: {show_value(instance)} is not a duration (e.g. 30s, 1m30s, 2h)")]
    if validator == "anyOf" and any("pattern" in branch for branch in schema.get("anyOf", [])):
        return [
            Violation(
                SCHEMA, path, f"{where}: {show_value(instance)} is not a Kubernetes quantity (e.g. 2, 500m, 1.5Gi, 2k)"
            )
        ]
    if validator in ("minLength", "minItems", "minProperties"):
        return [Violation(SCHEMA, path, f"{where} must not be empty")]
    return [Violation(SCHEMA, path, f"{where}: {error.message}")]
