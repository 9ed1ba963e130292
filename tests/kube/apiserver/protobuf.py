"""The few protobuf bodies kubectl's typed clients send and the test API server reads: client-go encodes
built-in kinds as protobuf (``application/vnd.kubernetes.protobuf``) and does not fall back to JSON on a 415, so
``kubectl auth can-i``'s SelfSubjectAccessReview is decoded here — the ``k8s\\x00`` envelope
(runtime.Unknown: typeMeta, raw) and the fields of k8s.io/api authorization/v1 generated.proto it carries.
Other protobuf bodies stay 415 (``kubectl create namespace`` and ``create token``: use ``apply -f`` and
``create --raw``)."""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

Fields = dict[int, list[Any]]

#: field number → (JSON name, the message's own field table, or None for a string)
_RESOURCE_ATTRIBUTES = {1: ("namespace", None), 2: ("verb", None), 3: ("group", None), 4: ("version", None),
                        5: ("resource", None), 6: ("subresource", None), 7: ("name", None)}
_NON_RESOURCE_ATTRIBUTES = {1: ("path", None), 2: ("verb", None)}
_SPEC = {1: ("resourceAttributes", _RESOURCE_ATTRIBUTES), 2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES)}
_REVIEW = {2: ("spec", _SPEC)}
MESSAGES: dict[tuple[str, str], dict[int, Any]] = {("authorization.k8s.io/v1", "SelfSubjectAccessReview"): _REVIEW}


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtobufError("a varint runs past the end")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> Fields:
    fields: Fields = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            fields.setdefault(number, []).append(value)
        elif wire == 2:
            size, at = _varint(data, at)
            fields.setdefault(number, []).append(data[at:at + size])
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ProtobufError(f"wire type {wire} is not read")
    return fields


def _message(data: bytes, table: dict[int, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, values in _fields(data).items():
        if number not in table or not values or not isinstance(values[-1], bytes):
            continue
        name, nested = table[number]
        out[name] = _message(values[-1], nested) if nested is not None else values[-1].decode()
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of an enveloped protobuf body of a kind in :data:`MESSAGES` (ProtobufError otherwise)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf envelope")
    envelope = _fields(body[len(MAGIC):])
    type_meta = _fields(envelope.get(1, [b""])[-1])
    api_version = type_meta.get(1, [b""])[-1].decode()
    kind = type_meta.get(2, [b""])[-1].decode()
    table = MESSAGES.get((api_version, kind))
    if table is None:
        raise ProtobufError(f"{kind}.{api_version} in protobuf is not supported")
    return {"apiVersion": api_version, "kind": kind, **_message(envelope.get(2, [b""])[-1], table)}
