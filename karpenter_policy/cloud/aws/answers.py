"""Answers of bounded size and time from an endpoint that is not trusted (`catalog refresh --endpoint-url`).

botocore reads a whole answer into memory before parsing it, and parses it whole: a 200 MB DescribeInstanceTypes
answer took `catalog refresh` to 1.3 GB, and an answer that trickles in a byte at a time never ends. The
:class:`AnswerLimits` of a refresh take over botocore's send (its `before-send` event, through the client's own
HTTP session, so proxies, TLS verification and timeouts stay as configured) and read each answer themselves:

* in chunks, refusing it as soon as it is over `max_answer_bytes` (or says so in its Content-Length) and when all
  answers together are over `max_total_bytes`;
* checking the refresh's deadline between chunks (each read waits at most the client's read timeout);
* refusing a compressed answer nobody asked for (it could expand a thousandfold past the bound).

Refusals are :class:`~karpenter_policy.cloud.CloudError`\\ s naming the endpoint and the operation; botocore does
not retry them. The last answer is kept for the message of one botocore could not parse (`describe_bad_value`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSResponse

from karpenter_policy.cloud.errors import CloudError

MiB = 1024 * 1024
#: The largest single answer read (a page of 100 instance types is about 400 KB).
MAX_ANSWER_BYTES = 8 * MiB
#: All answers of one refresh together (a region's catalog is about 15 MB of answers).
MAX_TOTAL_BYTES = 96 * MiB
_CHUNK = 64 * 1024


class _Read:
    """An answer body already read, in the shape botocore reads it from (`raw.stream()`)."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self._content

    def close(self) -> None:
        pass


class AnswerLimits:
    """Bounds on every answer of the clients they are installed on (see the module docstring)."""

    def __init__(
        self,
        deadline: float | None = None,
        *,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
        timeout_seconds: float | None = None,
    ) -> None:
        self.deadline = deadline  # time.monotonic() by which every answer must be in
        self.timeout_seconds = timeout_seconds
        self.max_answer_bytes = max_answer_bytes
        self.max_total_bytes = max_total_bytes
        self.total_bytes = 0
        self.last_answer = b""
        self._lock = threading.Lock()

    def install(self, client: Any) -> None:
        """Read every answer of `client` (a boto3 client) within these bounds."""
        session = client._endpoint.http_session  # botocore's own sender: proxies, TLS and timeouts as configured
        endpoint = str(client.meta.endpoint_url)

        def send(request: Any, event_name: str = "", **_: Any) -> AWSResponse:
            return self._send(session, request, endpoint, event_name.rsplit(".", 1)[-1])

        client.meta.events.register("before-send", send)

    def _late(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def _timeout_reason(self) -> str:
        # The same words as the refresh's own deadline: whichever notices first, the user reads one message.
        within = f"within {self.timeout_seconds:g} s (--timeout)" if self.timeout_seconds is not None else "in time"
        return f"no complete answer {within}: the endpoint is too slow or silent"

    def _send(self, session: Any, request: Any, endpoint: str, operation: str) -> AWSResponse:
        if self._late():
            raise CloudError(endpoint, self._timeout_reason(), operation)
        streaming = request.stream_output
        request.stream_output = True  # botocore's send then leaves the body to us (else it reads all of it)
        try:
            response = session.send(request)
        finally:
            request.stream_output = streaming
        raw = response.raw
        try:
            encoding = str(response.headers.get("content-encoding", "identity")).strip().lower()
            if encoding not in ("", "identity"):
                raise CloudError(endpoint, f"the answer is compressed ({encoding}) though nobody asked", operation)
            declared = str(response.headers.get("content-length", "")).strip()
            if declared.isdigit() and int(declared) > self.max_answer_bytes:
                raise CloudError(endpoint, self._too_large(int(declared)), operation)
            chunks: list[bytes] = []
            size = 0
            while chunk := raw.read1(_CHUNK, decode_content=False):  # what has come: a trickle is seen trickling
                size += len(chunk)
                if size > self.max_answer_bytes:
                    raise CloudError(endpoint, self._too_large(None), operation)
                if self._late():
                    raise CloudError(endpoint, self._timeout_reason(), operation)
                chunks.append(chunk)
        finally:
            raw.close()
        content = b"".join(chunks)
        with self._lock:
            self.total_bytes += len(content)
            if self.total_bytes > self.max_total_bytes:
                raise CloudError(
                    endpoint,
                    f"the answers add up to more than {self.max_total_bytes // MiB} MiB: not what EC2 answers",
                    operation,
                )
            self.last_answer = content
        return AWSResponse(response.url, response.status_code, response.headers, _Read(content))

    def _too_large(self, declared: int | None) -> str:
        size = f" ({declared:,} bytes)" if declared is not None else ""
        return f"an answer larger than {self.max_answer_bytes // MiB} MiB{size}: not what EC2 answers; refused"

    def describe_bad_value(self, error: Exception) -> str:
        """What a ValueError of botocore's parser was about: the element of the last answer holding the value it
        could not read (`<sizeInMiB>NaN</sizeInMiB>`), and the instance type around it when there is one."""
        match = re.search(r"'(.{0,64})'$", str(error))
        value = match.group(1) if match else ""
        found = re.search(rb"<(\w{1,64})>" + re.escape(value.encode()) + rb"</\1>", self.last_answer) if value else None
        if found is None:
            return f"the answer is not EC2's: {error}"
        owner = re.findall(rb"<instanceType>([\w.-]{1,64})</instanceType>", self.last_answer[: found.start()])
        about = f" (instance type {owner[-1].decode()})" if owner else ""
        element = found.group(1).decode()
        return f"the answer is not EC2's: <{element}> holds {value!r}{about}, not a number"
