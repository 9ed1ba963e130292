"""A fault-injecting HTTP proxy between boto3 and moto's server: real HTTP, nothing patched in-process.

Every request is logged (service, operation, parameters) and forwarded to the upstream server unless a rule
answers it first. Rules emulate what AWS does and moto does not:

- :meth:`FaultProxy.throttle` / :meth:`FaultProxy.fail`: answer the next calls of an operation with a
  throttling or server error in the service's wire format (EC2 XML or JSON), before or after forwarding (the
  latter loses a response the server did act on);
- :meth:`FaultProxy.insufficient_capacity`: EC2 CreateFleet pools (instance type x subnet) that have no capacity:
  they are removed from the request that goes upstream and reported in the answer's ``errorSet``, as EC2
  reports the pools an instant fleet could not use; with no pool left nothing is forwarded;
- CreateFleet ``ClientToken`` idempotency: a request repeating a token gets the first answer again; a capacity
  block's or an interruptible reservation's target capacity type (`capacity-block`, `reserved-capacity`), which
  moto does not fulfil, forwarded as `on-demand`;
- :meth:`FaultProxy.serve`: stub answers for APIs moto lacks (the Price List API, public SSM parameters);
- :meth:`FaultProxy.observe`: a callback seeing each call of an operation with the answer it got (the capacity
  reservations' stand-in counts the instances CreateFleet launched into a reservation so).
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/aws4_request")
_OVERRIDE_KEY = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.(.+)$")
_CONFIG_KEY = re.compile(r"^LaunchTemplateConfigs\.(\d+)\.(.+)$")
_EKS_CLUSTER = re.compile(r"^/clusters/([^/?]+)$")
_TARGET_TYPE = "TargetCapacitySpecification.DefaultTargetCapacityType"
_RESERVED_TARGETS = ("capacity-block", "reserved-capacity")
_HOP_HEADERS = {"connection", "transfer-encoding", "content-length", "keep-alive", "server", "date"}


@dataclass
class Call:
    """One request the proxy received."""

    service: str
    operation: str
    params: dict[str, Any]
    headers: dict[str, str]

    def overrides(self) -> list[tuple[str, str]]:
        """CreateFleet: (instance type, subnet id) of every override, in request order."""
        found: dict[tuple[int, int], dict[str, str]] = {}
        for key, value in self.params.items():
            match = _OVERRIDE_KEY.match(key)
            if match:
                found.setdefault((int(match[1]), int(match[2])), {})[match[3]] = value
        return [(o.get("InstanceType", ""), o.get("SubnetId", "")) for _, o in sorted(found.items())]


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Rule:
    operation: str
    respond: Callable[[Call], Answer | None]
    times: int | None
    after_forwarding: bool = False


def _ec2_error(status: int, code: str, message: str) -> Answer:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{message}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    )
    return Answer(status, body.encode(), {"Content-Type": "text/xml;charset=UTF-8"})


def json_answer(document: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(document).encode(), {"Content-Type": "application/x-amz-json-1.1"})


def error_answer(call: Call, status: int, code: str, message: str) -> Answer:
    """An error in the wire format of the call's service."""
    if call.service == "ec2":
        return _ec2_error(status, code, message)
    return json_answer({"__type": code, "message": message}, status)


class FaultProxy:
    """Listens on 127.0.0.1 (a free port) and forwards to ``upstream`` (``http://host:port``)."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlparse(upstream)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._no_capacity: dict[tuple[str, str, str], str] = {}
        self._fleet_answers: dict[str, Answer] = {}
        self._observers: list[tuple[str, Callable[[Call, Answer], None]]] = []
        self.calls: list[Call] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                proxy._handle(self)

            do_GET = do_POST  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # --- configuration --------------------------------------------------------------------------------------

    def reset(self) -> None:
        """No rules, no capacity errors, no remembered fleets, an empty log."""
        with self._lock:
            self._rules.clear()
            self._no_capacity.clear()
            self._fleet_answers.clear()
            self._observers.clear()
            self.calls.clear()

    def serve(self, operation: str, respond: Callable[[Call], Answer | None], times: int | None = None) -> None:
        """Answer calls of ``operation`` with ``respond(call)`` (every call, or the next ``times``; None: the call
        goes on to moto); the rule added last wins."""
        with self._lock:
            self._rules.append(_Rule(operation, respond, times))

    def forward(self, call: Call) -> Answer:
        """Send a query-protocol call (its parameters) on to the upstream server as it is: a rule that changes what
        moto answers."""
        body = urllib.parse.urlencode(call.params).encode()
        return self._forward("POST", "/", call.headers, body)

    def observe(self, operation: str, callback: Callable[[Call, Answer], None]) -> None:
        """Call ``callback(call, answer)`` after each call of ``operation`` was answered (by a rule or upstream),
        before the answer is sent back."""
        with self._lock:
            self._observers.append((operation, callback))

    def throttle(self, operation: str, times: int | None = 1, code: str = "RequestLimitExceeded") -> None:
        """The next ``times`` calls (every call: None) of ``operation`` are throttled (HTTP 503)."""
        self.serve(operation, lambda call: error_answer(call, 503, code, "Request limit exceeded."), times)

    def fail(
        self,
        operation: str,
        times: int | None = 1,
        status: int = 500,
        code: str = "InternalError",
        after_forwarding: bool = False,
    ) -> None:
        """The next ``times`` calls fail with ``status``; with ``after_forwarding`` the server still acts on
        the request and only its answer is lost."""
        with self._lock:
            self._rules.append(
                _Rule(
                    operation,
                    lambda call: error_answer(call, status, code, "An internal error has occurred"),
                    times,
                    after_forwarding,
                )
            )

    def insufficient_capacity(
        self,
        instance_type: str,
        subnet_id: str,
        capacity_type: str | None = None,
        code: str = "InsufficientInstanceCapacity",
    ) -> None:
        """CreateFleet cannot launch ``instance_type`` in ``subnet_id`` (as ``capacity_type``, or as any) until
        :meth:`reset`."""
        with self._lock:
            for lifecycle in (capacity_type,) if capacity_type else ("spot", "on-demand"):
                self._no_capacity[(instance_type, subnet_id, lifecycle)] = code

    def calls_to(self, operation: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.operation == operation]

    # --- request handling -----------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items()}
        call = _parse(headers, body, handler.command, handler.path)
        with self._lock:
            self.calls.append(call)
            rule = next((r for r in reversed(self._rules) if r.operation == call.operation), None)
            if rule is not None and rule.times is not None:
                rule.times -= 1
                if rule.times <= 0:
                    self._rules.remove(rule)
        answer = rule.respond(call) if rule is not None and not rule.after_forwarding else None
        if answer is None:  # no rule, a rule after forwarding, or a rule that lets this call through
            if call.operation == "CreateFleet":
                answer = self._create_fleet(handler, call, body, headers)
            else:
                answer = self._forward(handler.command, handler.path, headers, body)
        if rule is not None and rule.after_forwarding:
            answer = rule.respond(call) or answer
        with self._lock:
            observers = [callback for operation, callback in self._observers if operation == call.operation]
        for callback in observers:
            callback(call, answer)
        handler.send_response(answer.status)
        for key, value in answer.headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(answer.body)))
        handler.end_headers()
        handler.wfile.write(answer.body)

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        connection = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
            sent["Content-Length"] = str(len(body))
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            data = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_HEADERS}
            return Answer(response.status, data, kept)
        finally:
            connection.close()

    def _create_fleet(
        self, handler: BaseHTTPRequestHandler, call: Call, body: bytes, headers: dict[str, str]
    ) -> Answer:
        token = call.params.get("ClientToken")
        with self._lock:
            if token and token in self._fleet_answers:
                return self._fleet_answers[token]
            no_capacity = dict(self._no_capacity)
        lifecycle = call.params.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
        kept, refused = _split_overrides(call.params, no_capacity, lifecycle)
        errors = "".join(
            "<item><launchTemplateAndOverrides><launchTemplateSpecification>"
            f"<launchTemplateName>{template}</launchTemplateName><version>1</version>"
            f"</launchTemplateSpecification><overrides><instanceType>{instance_type}</instanceType>"
            f"<subnetId>{subnet}</subnetId></overrides></launchTemplateAndOverrides>"
            f"<lifecycle>{lifecycle}</lifecycle><errorCode>{code}</errorCode>"
            f"<errorMessage>There is no {instance_type} capacity in the subnet's zone.</errorMessage></item>"
            for template, instance_type, subnet, code in refused
        )
        if kept is None:
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?>\n<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/'
                f'2016-11-15/"><requestId>{uuid.uuid4()}</requestId><fleetId>fleet-{uuid.uuid4()}</fleetId>'
                f"<errorSet>{errors}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
            )
            answer = Answer(200, xml.encode(), {"Content-Type": "text/xml;charset=UTF-8"})
        else:
            # moto fulfils spot and on-demand targets only: a reserved launch's (a capacity block's, an interruptible
            # reservation's) goes on as on-demand, the instance EC2 would launch into the reservation
            kept = [(k, "on-demand" if k == _TARGET_TYPE and v in _RESERVED_TARGETS else v) for k, v in kept]
            answer = self._forward(handler.command, handler.path, headers, urllib.parse.urlencode(kept).encode())
            if errors and answer.status == 200:
                text = answer.body.decode()
                text = text.replace("</CreateFleetResponse>", f"<errorSet>{errors}</errorSet></CreateFleetResponse>")
                answer = Answer(answer.status, text.encode(), answer.headers)
        if token and answer.status == 200:
            with self._lock:
                self._fleet_answers[token] = answer
        return answer


def _parse(headers: dict[str, str], body: bytes, method: str = "POST", path: str = "/") -> Call:
    lowered = {k.lower(): v for k, v in headers.items()}
    match = _CREDENTIAL_SCOPE.search(lowered.get("authorization", ""))
    service = match[1] if match else ""
    cluster = _EKS_CLUSTER.match(path)
    if service == "eks" and method == "GET" and cluster:  # EKS is REST: the operation is the method and path
        return Call(service, "DescribeCluster", {"name": urllib.parse.unquote(cluster[1])}, headers)
    target = lowered.get("x-amz-target")
    if target:
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            params = {}
        return Call(service, target.rsplit(".", 1)[-1], params, headers)
    params = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return Call(service or "ec2", params.get("Action", ""), params, headers)


def _split_overrides(
    params: dict[str, str], no_capacity: dict[tuple[str, str, str], str], lifecycle: str
) -> tuple[list[tuple[str, str]] | None, list[tuple[str, str, str, str]]]:
    """The CreateFleet parameters without the refused overrides (renumbered; None when none is left), and the
    refused ones as (launch template, instance type, subnet, error code)."""
    configs: dict[int, dict[str, str]] = {}
    overrides: dict[int, dict[int, dict[str, str]]] = {}
    other: list[tuple[str, str]] = []
    for key, value in params.items():
        override = _OVERRIDE_KEY.match(key)
        config = _CONFIG_KEY.match(key)
        if override:
            overrides.setdefault(int(override[1]), {}).setdefault(int(override[2]), {})[override[3]] = value
        elif config:
            configs.setdefault(int(config[1]), {})[config[2]] = value
        else:
            other.append((key, value))
    refused: list[tuple[str, str, str, str]] = []
    kept = list(other)
    config_number = 0
    for index in sorted(configs):
        template = configs[index].get("LaunchTemplateSpecification.LaunchTemplateName", "")
        remaining = []
        for _, fields in sorted(overrides.get(index, {}).items()):
            code = no_capacity.get((fields.get("InstanceType", ""), fields.get("SubnetId", ""), lifecycle))
            if code:
                refused.append((template, fields.get("InstanceType", ""), fields.get("SubnetId", ""), code))
            else:
                remaining.append(fields)
        if not remaining:
            continue
        config_number += 1
        kept += [(f"LaunchTemplateConfigs.{config_number}.{k}", v) for k, v in configs[index].items()]
        for number, fields in enumerate(remaining, start=1):
            kept += [(f"LaunchTemplateConfigs.{config_number}.Overrides.{number}.{k}", v) for k, v in fields.items()]
    return (kept if config_number else None), refused
