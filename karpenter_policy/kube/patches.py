"""Apply a patch to an object the way the API server does: JSON merge, JSON Patch or strategic merge.

The in-memory cluster (and the test API emulator) apply patches here; the client adapter only sends them.
Strategic merge covers what the reconciler patches, not the full schema-driven algorithm: maps merge (a
null deletes a key); lists of objects merge by ``name`` (containers, volumes, env, ...) or by ``type``
(``status.conditions``); ``metadata.finalizers`` is a set union; the ``$patch: delete`` / ``$patch:
replace`` and ``$deleteFromPrimitiveList/<field>`` directives work; any other list is replaced.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import jsonpatch

from karpenter_policy.kube.errors import Invalid

PatchType = Literal["merge", "json", "strategic"]

CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}

_MERGE_KEYS = ("name", "type")
_UNION_LISTS = frozenset({"finalizers"})
_DELETE_FROM_PRIMITIVE = "$deleteFromPrimitiveList/"


def patch_type_of(content_type: str) -> PatchType:
    """The patch type named by a request's Content-Type; raises :class:`Invalid` for any other."""
    for patch_type, media_type in CONTENT_TYPES.items():
        if content_type.split(";")[0].strip() == media_type:
            return patch_type  # type: ignore[return-value]
    raise Invalid(f"unsupported patch content type {content_type!r}", 415)


def apply_patch(obj: dict[str, Any], patch: Any, patch_type: PatchType) -> dict[str, Any]:
    """A new object: ``obj`` with ``patch`` applied (``obj`` is left untouched)."""
    if patch_type == "json":
        if not isinstance(patch, list):
            raise Invalid("a JSON Patch is a list of operations")
        try:
            result = jsonpatch.JsonPatch(patch).apply(copy.deepcopy(obj))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise Invalid(f"JSON Patch failed: {error}") from error
        if not isinstance(result, dict):
            raise Invalid("a JSON Patch must leave an object")
        return result
    if not isinstance(patch, dict):
        raise Invalid(f"a {patch_type} patch is a JSON object")
    merged: dict[str, Any] = _merge(obj, patch) if patch_type == "merge" else _strategic(obj, patch)
    return merged


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON Merge Patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for field, value in patch.items():
        if value is None:
            result.pop(field, None)
        else:
            result[field] = _merge(result.get(field), value)
    return result


def _strategic(target: Any, patch: dict[str, Any]) -> Any:
    if patch.get("$patch") == "replace":
        return {field: copy.deepcopy(value) for field, value in patch.items() if field != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for field, value in patch.items():
        if field.startswith(_DELETE_FROM_PRIMITIVE):
            listed = field[len(_DELETE_FROM_PRIMITIVE) :]
            result[listed] = [item for item in result.get(listed) or [] if item not in value]
        elif field.startswith("$"):
            continue  # $setElementOrder, $retainKeys: ordering hints with no effect on the content
        elif value is None:
            result.pop(field, None)
        elif isinstance(value, dict):
            result[field] = _strategic(result.get(field), value)
        elif isinstance(value, list) and isinstance(result.get(field), list):
            result[field] = _merge_list(field, result[field], value)
        else:
            result[field] = copy.deepcopy(value)
    return result


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if field in _UNION_LISTS:
        return current + [item for item in patch if item not in current]
    merge_key = _merge_key(current + patch)
    if merge_key is None:
        return copy.deepcopy(patch)
    merged = copy.deepcopy(current)
    for item in patch:
        position = next((i for i, old in enumerate(merged) if old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if position is not None:
                del merged[position]
        elif position is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[position] = _strategic(merged[position], item)
    return merged


def _merge_key(items: list[Any]) -> str | None:
    """The key that identifies items of a list of objects, if every item carries it."""
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    return next((key for key in _MERGE_KEYS if all(key in item for item in items)), None)
