"""Helpers of the webhook tests: an HTTPS client that verifies the server against the generated CA, AdmissionReview
bodies, the shared table of cases (every policy document of examples/), and the CLI's verdict on one object."""

from __future__ import annotations

import base64
import http.client
import json
import select
import socket
import ssl
import tempfile
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from karpenter_policy.api.violations import ERROR, UNRESOLVED_REFERENCE
from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.source.files import load_file
from karpenter_policy.checks.source.loader import LoadError
from karpenter_policy.checks.validation.policies import validate_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DIRS = (
    "examples/positive",
    "examples/negative",
    "examples/check/positive",
    "examples/check/negative",
    "examples/pinning/policies",
    "examples/workloads/policies",
    *(
        f"examples/workloads/scenarios/{name}"
        for name in ("daemonset-overhead", "limits", "overlap", "preferred-relaxation", "shadowed")
    ),
)
#: Kinds the provisioner endpoints never see from the API server and the CLI checks with other rules.
OTHER_POLICY_KINDS = ("AWSNodeTemplate", "PinningPolicy")


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """HTTPS to the server on localhost, the certificate verified against `ca_file` (one keep-alive connection,
    re-opened when the server closed it)."""

    def __init__(self, port: int, ca_file: str | Path, timeout: float = 30.0) -> None:
        self.port = port
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self.timeout = timeout
        self.connection: http.client.HTTPSConnection | None = None

    def _connection(self) -> http.client.HTTPSConnection:
        sock = self.connection.sock if self.connection is not None else None
        if sock is not None and select.select([sock], [], [], 0)[0]:  # closed by the server while idle (as Go's
            self.close()  # transport notices, reading its idle connections): a new one, not a failed request
        if self.connection is None:
            self.connection = http.client.HTTPSConnection(
                "localhost", self.port, context=self.context, timeout=self.timeout
            )
        return self.connection

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Response:
        for attempt in (1, 2):
            connection = self._connection()
            try:
                connection.request(method, path, body, headers or {})
                answer = connection.getresponse()
                data = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
                continue
            result = Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)
            if result.headers.get("connection", "").lower() == "close":
                self.close()
            return result
        raise AssertionError("unreachable")

    def post(self, path: str, body: bytes) -> Response:
        return self.request("POST", path, body, {"Content-Type": "application/json"})

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def review(self, path: str, obj: Any, **request: Any) -> dict[str, Any]:
        """POST an AdmissionReview of `obj`; the `response` of the answer (HTTP 200 and the uid checked)."""
        uid = request.pop("uid", str(uuid.uuid4()))
        answer = self.post(path, review_body(obj, uid=uid, **request))
        assert answer.status == 200, (answer.status, answer.body)
        assert answer.headers["content-type"] == "application/json"
        review = answer.json()
        assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
        response: dict[str, Any] = review["response"]
        assert response["uid"] == uid
        return response


def review_body(obj: Any, uid: str = "0000-1111", operation: Any = "CREATE", **extra: Any) -> bytes:
    request = {"uid": uid, "operation": operation, "object": obj, **extra}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The decoded JSONPatch of a response ([] when there is none)."""
    if "patch" not in response:
        assert "patchType" not in response
        return []
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


def raw_tls(port: int, ca_file: str | Path, timeout: float = 10.0) -> ssl.SSLSocket:
    """A verified TLS socket to the server, for requests http.client will not send."""
    context = ssl.create_default_context(cafile=str(ca_file))
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return context.wrap_socket(sock, server_hostname="localhost")


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of one HTTP answer read off a raw socket (up to EOF or Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        None,
    )
    while length is not None and len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, body


# --- the shared table ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    data: Any


@cache
def cases() -> tuple[Case, ...]:
    """Every document of the example files (parse errors left out: there is no object to admit), except the
    node templates and pinning policies, which are not sent to the provisioner endpoints."""
    found: list[Case] = []
    for directory in EXAMPLE_DIRS:
        for file in sorted((ROOT / directory).glob("*.yaml")):
            try:
                documents = load_file(str(file))
            except LoadError:
                continue
            for index, doc in enumerate(documents):
                if isinstance(doc.data, dict) and doc.data.get("kind") in OTHER_POLICY_KINDS:
                    continue
                found.append(Case(f"{directory.removeprefix('examples/')}/{file.name}#{index}", doc.data))
    return tuple(found)


@dataclass(frozen=True)
class CliVerdict:
    """What the CLI reports on one object alone in a file: its errors and warnings as (message, rule)."""

    errors: tuple[tuple[str, str], ...]
    warnings: tuple[tuple[str, str], ...]
    is_provisioner: bool


def _single_file(data: Any) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as handle:
        yaml.safe_dump(data, handle, sort_keys=False, allow_unicode=True)
    return handle.name


def cli_verdict(data: Any, solve: bool = True) -> CliVerdict:
    """`karpenter-policy check` (or `validate`), in-process, on a file holding only `data`; the cross-file rule
    `unresolved-reference` left out (it is about the repository, not the object)."""
    file = _single_file(data)
    try:
        report = check_paths([file], load_catalog())[0] if solve else validate_paths([file])
    finally:
        Path(file).unlink()
    findings = [f for f in report.sorted_findings() if f.rule != UNRESOLVED_REFERENCE]
    is_provisioner = (
        isinstance(data, dict)
        and data.get("kind") == "Provisioner"
        and data.get("apiVersion") == "karpenter.sh/v1alpha5"
    )
    return CliVerdict(
        tuple((f.message, f.rule) for f in findings if f.severity == ERROR),
        # A warning crosses to the API server as one line: a multi-line finding's first line.
        tuple((f.message.split("\n", 1)[0], f.rule) for f in findings if f.severity != ERROR),
        is_provisioner,
    )
