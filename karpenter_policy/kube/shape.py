"""What the API must answer, checked before anything trusts it.

An answer of the wrong shape is :class:`~karpenter_policy.kube.errors.Malformed` — a kind of *unavailable*,
never "no objects": an empty or non-JSON body, a ``Status`` where an object or a list belongs, a list whose
``items`` is not a list of objects, an object without a name or with metadata that is not a map, a watch
line that is not an event. Only a well-formed list with no items is empty. The client adapter checks every
answer here at the edge; the informer checks again what any :class:`~karpenter_policy.kube.cluster.Cluster`
hands it, so a fake or a future adapter cannot feed it something it would trip on.

The checks look at the envelope a consumer relies on (metadata's name, namespace, resourceVersion, labels,
annotations, finalizers, deletionTimestamp), not at the spec: reading a spec stays the consumer's job.
"""

from __future__ import annotations

import json
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import EventType, ObjectList, WatchEvent
from karpenter_policy.kube.errors import Malformed, error_for_status
from karpenter_policy.kube.objects import Kind, Obj

EMPTY = "empty"
NOT_JSON = "not-json"
NOT_AN_OBJECT = "not-an-object"
STATUS = "status"
ITEMS_NOT_A_LIST = "items-not-a-list"
ITEM_NOT_AN_OBJECT = "item-not-an-object"
BAD_METADATA = "bad-metadata"
NO_NAME = "no-name"
NO_RESOURCE_VERSION = "no-resource-version"
UNKNOWN_EVENT_TYPE = "unknown-event-type"
EVENT_OBJECT_NOT_AN_OBJECT = "event-object-not-an-object"

PROBLEMS = (
    EMPTY, NOT_JSON, NOT_AN_OBJECT, STATUS, ITEMS_NOT_A_LIST, ITEM_NOT_AN_OBJECT, BAD_METADATA, NO_NAME,
    NO_RESOURCE_VERSION, UNKNOWN_EVENT_TYPE, EVENT_OBJECT_NOT_AN_OBJECT,
)
"""Every :attr:`Malformed.problem <karpenter_policy.kube.errors.Malformed.problem>` this module raises."""

EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})

_SNIPPET = 200  # characters of a bad answer quoted in an error message


def decode(data: bytes, what: str) -> Any:
    """The JSON value of a body or a watch line; an empty or non-JSON one is Malformed."""
    if not data.strip():
        raise Malformed(f"{what}: empty answer", EMPTY)
    try:
        return json.loads(data)
    except ValueError:
        raise Malformed(f"{what}: not JSON: {data[:_SNIPPET]!r}", NOT_JSON) from None


def checked_object(kind: Kind, value: Any, what: str) -> Obj:
    """``value`` as an object of ``kind`` (apiVersion and kind filled in), or Malformed."""
    check_object(value, what)
    return objects.with_kind(kind, value)


def check_object(value: Any, what: str) -> None:
    """Raise Malformed unless ``value`` is an object with a name and well-typed metadata."""
    if not isinstance(value, dict):
        raise Malformed(f"{what}: not an object: {_quote(value)}", NOT_AN_OBJECT)
    if value.get("kind") == "Status":
        raise Malformed(f"{what}: a Status where an object belongs: {_status_text(value)}", STATUS)
    _check_metadata(value.get("metadata"), what)


def checked_list(kind: Kind, value: Any, what: str) -> ObjectList:
    """``value`` as a list of ``kind`` (items sorted by namespace and name, each with apiVersion and kind),
    or Malformed. ``items: null`` is an empty list only under a well-formed list header."""
    if not isinstance(value, dict):
        raise Malformed(f"{what}: not an object: {_quote(value)}", NOT_AN_OBJECT)
    if value.get("kind") == "Status":
        raise Malformed(f"{what}: a Status where a list belongs: {_status_text(value)}", STATUS)
    meta = value.get("metadata")
    if not isinstance(meta, dict):
        raise Malformed(f"{what}: list metadata is not an object: {_quote(meta)}", BAD_METADATA)
    version = meta.get("resourceVersion")
    if not isinstance(version, str) or not version:
        raise Malformed(f"{what}: the list has no resourceVersion: {_quote(version)}", NO_RESOURCE_VERSION)
    items = value.get("items")
    if items is None and str(value.get("kind") or "").endswith("List"):
        items = []
    if not isinstance(items, list):
        raise Malformed(f"{what}: items is not a list: {_quote(items)}", ITEMS_NOT_A_LIST)
    for item in items:
        if not isinstance(item, dict):
            raise Malformed(f"{what}: an item is not an object: {_quote(item)}", ITEM_NOT_AN_OBJECT)
        _check_metadata(item.get("metadata"), what)
        objects.with_kind(kind, item)
    items.sort(key=lambda obj: (objects.namespace(obj) or "", objects.name(obj)))
    return ObjectList(items, version)


def continue_token(value: Any, what: str) -> str | None:
    """The ``metadata.continue`` of a list page already checked by :func:`checked_list`: the token of the next
    page, or None for the last one. Anything but a string there is Malformed."""
    token = value["metadata"].get("continue")
    if token is None or token == "":
        return None
    if not isinstance(token, str) or len(token) > 10_000:
        raise Malformed(f"{what}: the list's continue token is not a string of the usual size: {_quote(token)}",
                        BAD_METADATA)
    return token


def checked_event(kind: Kind, value: Any, what: str) -> WatchEvent:
    """A decoded watch line as an event of ``kind``. An ``ERROR`` line raises the error its Status carries
    (410: :class:`~karpenter_policy.kube.errors.Gone`); anything else not an event is Malformed."""
    if not isinstance(value, dict):
        raise Malformed(f"{what}: a watch line that is not an object: {_quote(value)}", NOT_AN_OBJECT)
    event_type, obj = value.get("type"), value.get("object")
    if event_type not in EVENT_TYPES and event_type != "ERROR":
        raise Malformed(f"{what}: unknown watch event type {_quote(event_type)}", UNKNOWN_EVENT_TYPE)
    if not isinstance(obj, dict):
        raise Malformed(f"{what}: a {event_type} event whose object is {_quote(obj)}", EVENT_OBJECT_NOT_AN_OBJECT)
    if event_type == "ERROR":
        code = obj.get("code")
        status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 500
        raise error_for_status(status, f"{what}: {_status_text(obj)}", str(obj.get("reason") or ""))
    event = WatchEvent(event_type, obj)
    check_event(event, what)
    objects.with_kind(kind, obj)
    return event


def check_event(event: WatchEvent, what: str) -> None:
    """Raise Malformed unless ``event`` is a known type carrying a well-formed object (a BOOKMARK: a map
    with a resourceVersion)."""
    event_type: EventType | str = event.type
    if event_type not in EVENT_TYPES:
        raise Malformed(f"{what}: unknown watch event type {_quote(event_type)}", UNKNOWN_EVENT_TYPE)
    if not isinstance(event.object, dict):
        raise Malformed(f"{what}: a {event_type} event whose object is {_quote(event.object)}",
                        EVENT_OBJECT_NOT_AN_OBJECT)
    if event_type != "BOOKMARK":
        check_object(event.object, what)
        return
    meta = event.object.get("metadata")
    if not isinstance(meta, dict):
        raise Malformed(f"{what}: a BOOKMARK whose metadata is {_quote(meta)}", BAD_METADATA)
    if not isinstance(meta.get("resourceVersion"), str) or not meta["resourceVersion"]:
        raise Malformed(f"{what}: a BOOKMARK without a resourceVersion", NO_RESOURCE_VERSION)


def _check_metadata(meta: Any, what: str) -> None:
    if not isinstance(meta, dict):
        raise Malformed(f"{what}: metadata is not an object: {_quote(meta)}", BAD_METADATA)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise Malformed(f"{what}: an object without a name: {_quote(name)}", NO_NAME)
    for field in ("namespace", "resourceVersion", "uid", "creationTimestamp", "deletionTimestamp"):
        if meta.get(field) is not None and not isinstance(meta[field], str):
            raise Malformed(f"{what}: {name}: metadata.{field} is {_quote(meta[field])}", BAD_METADATA)
    for field in ("labels", "annotations"):
        mapping = meta.get(field)
        if mapping is not None and not (
            isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values())
        ):
            raise Malformed(f"{what}: {name}: metadata.{field} is not a map of strings", BAD_METADATA)
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)):
        raise Malformed(f"{what}: {name}: metadata.finalizers is not a list of strings", BAD_METADATA)


def _status_text(status: Obj) -> str:
    return f"{status.get('code', '')} {status.get('reason', '')}: {status.get('message', '')}".strip()


def _quote(value: Any) -> str:
    return repr(value)[:_SNIPPET]
