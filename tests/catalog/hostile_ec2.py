"""A local HTTP endpoint that answers EC2 and the Price List API the way a broken or hostile one would, for
`catalog refresh --endpoint-url`.

Modes (`HostileEc2(mode)`, or `python hostile_ec2.py MODE [MB]` printing its URL and serving until stdin closes):

* `empty` — every describe answers an empty set, GetProducts an empty price list;
* `nan` — one instance type whose `<sizeInMiB>` is `NaN`, offered in one zone;
* `cards` — one instance type whose network cards are numbered 0 and 2 (no card 1), offered in one zone;
* `huge` — DescribeInstanceTypes answers `HUGE_BYTES` (200 MB, or MB) of well-formed instance types, generated as
  it is sent;
* `silent` — reads the request and never answers (until the server stops);
* `trickle` — answers headers, then one byte of the body every 0.2 s.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

HUGE_BYTES = 200 * 1024 * 1024
MODES = ("empty", "nan", "cards", "huge", "silent", "trickle")
_NS = 'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"'


def _instance_type(name: str, memory: str, cards: str = "") -> str:
    return (
        f"<item><instanceType>{name}</instanceType><supportedUsageClasses><item>on-demand</item>"
        "<item>spot</item></supportedUsageClasses><bareMetal>false</bareMetal><hypervisor>nitro</hypervisor>"
        "<processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo>"
        f"<vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>{memory}</sizeInMiB>"
        "</memoryInfo><networkInfo><maximumNetworkInterfaces>3</maximumNetworkInterfaces>"
        f"<ipv4AddressesPerInterface>10</ipv4AddressesPerInterface>{cards}</networkInfo></item>"
    )


#: Two network cards numbered 0 and 2: no EC2 type has a gap in its card indexes.
_GAPPED_CARDS = (
    "<networkCards><item><networkCardIndex>0</networkCardIndex><maximumNetworkInterfaces>2</maximumNetworkInterfaces>"
    "</item><item><networkCardIndex>2</networkCardIndex><maximumNetworkInterfaces>2</maximumNetworkInterfaces></item>"
    "</networkCards>"
)


def _answer(action: str, items: str) -> bytes:
    sets = {
        "DescribeInstanceTypes": "instanceTypeSet",
        "DescribeInstanceTypeOfferings": "instanceTypeOfferingSet",
        "DescribeSpotPriceHistory": "spotPriceHistorySet",
    }
    key = sets.get(action, "itemSet")
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><{action}Response {_NS}><requestId>hostile</requestId>'
        f"<{key}>{items}</{key}></{action}Response>"
    ).encode()


def _huge(size: int) -> Iterator[bytes]:
    """`size` bytes of a DescribeInstanceTypes answer, made as it is sent."""
    head = _answer("DescribeInstanceTypes", "\0").split(b"\0")
    yield head[0]
    sent = len(head[0]) + len(head[1])
    index = 0
    while sent < size:
        chunk = "".join(_instance_type(f"x{index + i}.large", "8192") for i in range(200)).encode()
        index += 200
        sent += len(chunk)
        yield chunk
    yield head[1]


class HostileEc2:
    """The endpoint, on a free loopback port, serving in threads until `stop()`."""

    def __init__(self, mode: str, huge_bytes: int = HUGE_BYTES) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        self.mode = mode
        self.huge_bytes = huge_bytes
        self.requests: list[str] = []
        self.stopping = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get("X-Amz-Target") or ""
                action = target.rsplit(".", 1)[-1] if target else parse_qs(body.decode()).get("Action", [""])[0]
                endpoint.requests.append(action)
                endpoint.answer(self, action)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, handler: BaseHTTPRequestHandler, action: str) -> None:
        if self.mode == "silent":
            self.stopping.wait()
            return
        if action == "GetProducts":  # the Price List API (JSON)
            self._send(handler, json.dumps({"FormatVersion": "aws_v1", "PriceList": []}).encode(), "json")
            return
        if self.mode == "trickle":
            handler.send_response(200)
            handler.send_header("Content-Type", "text/xml")
            handler.send_header("Content-Length", "100000")
            handler.end_headers()
            while not self.stopping.wait(0.2):
                handler.wfile.write(b" ")
                handler.wfile.flush()
            return
        if self.mode == "huge" and action == "DescribeInstanceTypes":
            handler.send_response(200)
            handler.send_header("Content-Type", "text/xml")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            try:
                for chunk in _huge(self.huge_bytes):
                    handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client stopped reading: what it should do
                pass
            return
        items = ""
        if self.mode == "nan" and action == "DescribeInstanceTypes":
            items = _instance_type("m5.large", "NaN")
        elif self.mode == "cards" and action == "DescribeInstanceTypes":
            items = _instance_type("m5.large", "8192", _GAPPED_CARDS)
        elif self.mode in ("nan", "cards") and action == "DescribeInstanceTypeOfferings":
            items = (
                "<item><instanceType>m5.large</instanceType><locationType>availability-zone</locationType>"
                "<location>us-east-1a</location></item>"
            )
        self._send(handler, _answer(action, items), "xml")

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, body: bytes, kind: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-amz-json-1.1" if kind == "json" else "text/xml")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


if __name__ == "__main__":
    hostile = HostileEc2(sys.argv[1], int(sys.argv[2]) * 1024 * 1024 if len(sys.argv) > 2 else HUGE_BYTES)
    print(hostile.url, flush=True)
    try:
        sys.stdin.read()  # serve until the caller closes our stdin
    finally:
        hostile.stop()
