"""The AdmissionReview wire format (`admission.k8s.io/v1`): parse a request body, write a response body.

Only what a handler needs is kept of a request. A body that is not a well-formed v1 AdmissionReview (not JSON,
another apiVersion or kind, no `request.uid`, an object that is not a mapping) raises `BadReview`, which the
server answers with HTTP 400: without a uid there is no review to answer. Numbers are read strictly, before any
conversion can cost anything: a number token longer than `MAX_NUMBER_CHARS` (Python would otherwise refuse a
5,000-digit integer with a ValueError, or spend time converting it), a float out of float64's range (`1e999`)
and the non-JSON tokens `NaN` / `Infinity` are a `BadReview` too, and so is a body nesting deeper than the
CLI's loader reads (`MAX_DEPTH`): the checks walk objects recursively, and no Kubernetes object comes near.
Everything else — an object of the wrong kind, an invalid Provisioner — is answered inside a well-formed review
(`allowed: false` and a reason).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.checks.source.loader import MAX_DEPTH

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
#: Kubernetes shows a warning of at most this many characters (longer ones may be cut by clients).
MAX_WARNING_CHARS = 120
#: Warnings beyond this many are summarised in one last warning.
MAX_WARNINGS = 20
#: `status.code` of a denial (what the API server itself uses for a webhook denial without a code).
DENIED_CODE = 403
#: The longest JSON number token accepted. What the API server sends decodes from Go's int64 (19 digits) or
#: float64 (17 significant digits and an exponent): 100 characters is far beyond both.
MAX_NUMBER_CHARS = 100


class BadReview(ValueError):
    """The body is not a well-formed `admission.k8s.io/v1` AdmissionReview request (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The parts of `AdmissionReview.request` the handlers use."""

    uid: str
    operation: str
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None = None
    namespace: str = ""
    name: str = ""
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class AdmissionResponse:
    """A handler's answer: allowed or not, why, warnings, and a JSONPatch (a list of operations) to apply."""

    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    code: int | None = None

    @property
    def verdict(self) -> str:
        """`patched`, `allowed` or `denied` (the metrics label)."""
        if not self.allowed:
            return "denied"
        return "patched" if self.patch else "allowed"


def _object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BadReview(f"request.{key} must be a JSON object, not {type(value).__name__}")
    return value


def _string(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadReview(f"request.{key} must be a string, not {type(value).__name__}")
    return value


def _number_token(text: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise BadReview(f"a number of {len(text)} characters is over the limit of {MAX_NUMBER_CHARS}")
    return text


def _parse_int(text: str) -> int:
    return int(_number_token(text))


def _parse_float(text: str) -> float:
    value = float(_number_token(text))
    if not math.isfinite(value):
        raise BadReview(f"the number {text} is out of range (JSON numbers here must fit a float64)")
    return value


def _parse_constant(name: str) -> float:
    raise BadReview(f"{name} is not a JSON value")


_TOO_DEEP = f"the body nests too deeply: deeper than {MAX_DEPTH} levels, which no Kubernetes object does"


def parse_json(body: bytes) -> Any:
    """`json.loads` with the strict numbers and the depth cap of the module doc; raises `BadReview`."""
    try:
        value = json.loads(body, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except UnicodeDecodeError as error:
        raise BadReview(f"the body is not UTF-8: {error.reason} at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise BadReview(f"the body is not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise BadReview(_TOO_DEEP) from None
    except BadReview:
        raise
    except ValueError:  # an integer of more digits than Python converts (4,300): a quantity or count no API holds
        raise BadReview("the body is not JSON Kubernetes reads: it has a number of more than 4,300 digits") from None
    if _nests_deeper_than(value, MAX_DEPTH):
        raise BadReview(_TOO_DEEP)
    return value


def _nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` has a list or mapping `limit` levels below the top (an explicit stack: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview body; raises `BadReview` with a message fit for the HTTP 400."""
    review = parse_json(body)
    if not isinstance(review, dict):
        raise BadReview(f"expected an AdmissionReview object, not a JSON {type(review).__name__}")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if kind != KIND:
        raise BadReview(f"expected kind {KIND}, not {kind!r}")
    if api_version != API_VERSION:
        raise BadReview(
            f"expected apiVersion {API_VERSION}, not {api_version!r}: set admissionReviewVersions: [v1] "
            "in the webhook configuration"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or empty: there is nothing to answer to")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise BadReview(f"request.operation must be one of {', '.join(sorted(OPERATIONS))}, not {operation!r}")
    dry_run = request.get("dryRun", False)
    obj = _object(request, "object")
    if obj is None and operation in ("CREATE", "UPDATE"):
        raise BadReview(f"request.object is missing: a {operation} review carries the object")
    return AdmissionRequest(
        uid=uid,
        operation=str(operation),
        object=obj,
        old_object=_object(request, "oldObject"),
        namespace=_string(request, "namespace"),
        name=_string(request, "name"),
        dry_run=dry_run is True,
    )


def shorten(text: str, limit: int = MAX_WARNING_CHARS) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def bounded_warnings(warnings: Sequence[str]) -> list[str]:
    """Warnings as Kubernetes shows them: each at most 120 characters, at most `MAX_WARNINGS` of them."""
    shown = [shorten(w) for w in warnings[:MAX_WARNINGS]]
    if len(warnings) > MAX_WARNINGS:
        shown[-1] = f"... and {len(warnings) - MAX_WARNINGS + 1} more warnings"
    return shown


def response_body(uid: str, response: AdmissionResponse) -> bytes:
    """The AdmissionReview JSON that answers request `uid`."""
    answer: dict[str, Any] = {"uid": uid, "allowed": response.allowed}
    if not response.allowed:
        answer["status"] = {"code": response.code or DENIED_CODE, "message": response.message}
    elif response.message:
        answer["status"] = {"code": response.code or 200, "message": response.message}
    if response.warnings:
        answer["warnings"] = bounded_warnings(response.warnings)
    if response.patch:
        answer["patchType"] = "JSONPatch"
        patch = json.dumps(list(response.patch), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        answer["patch"] = base64.b64encode(patch).decode("ascii")
    review = {"apiVersion": API_VERSION, "kind": KIND, "response": answer}
    return json.dumps(review, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
