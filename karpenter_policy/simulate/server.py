"""moto's server on a loopback port, in this process, with what moto does not serve answered in front of it.

moto emulates EC2 (VPCs, subnets, security groups, images, launch templates, CreateFleet, instances) but not
two things the AWS provider reads:

* the **public SSM parameters** naming the default EKS, Bottlerocket, Ubuntu and Windows images
  (`/aws/service/...`): answered with one of moto's own images of the parameter's architecture (arm64 when the
  path names it, x86-64 otherwise), so that CreateFleet finds the image it is given;
* the **spot price history**: moto answers $0.00001 for every type, which would make every spot type equally
  cheap. The front answers with the prices it is given (``spot_prices``: the latest price per type and zone of
  a DescribeSpotPriceHistory output), and with an empty history otherwise — the provider then prices spot at the
  on-demand price, as `check --workloads` does without `--spot-prices`;
* the **security groups of a fleet's instances**: moto's CreateFleet gives them the VPC's default group, not the
  launch template's `SecurityGroupIds` (it reads a `GroupSet` no template has), or its primary network
  interface's `Groups` (where a template saying `associatePublicIPAddress` has them). The front gives each instance the
  template's groups once moto answered, as EC2 does — security-group drift compares them with the node class's;
* the **interface types of a fleet's instances**: moto's network interfaces are all of type `interface`, whatever
  the launch template's `NetworkInterfaces` say. The front gives each interface the template's `InterfaceType` at
  its device index (`efa`, `efa-only`), so DescribeInstances says an EFA instance is one — what the AWS provider
  reads of an instance it lists after a restart (v1.14.1's `EFACount`). moto keeps one interface per device index,
  so an instance with EFA on several network cards says fewer EFA interfaces than EC2 would: more than none, which
  is all a node's EFA depends on;
* **placement groups** (CreatePlacementGroup, DescribePlacementGroups, and a fleet's instances placed in the group
  and partition their template's `Placement` names, which DescribeInstances then says): the stand-in
  `simulate/placementgroups.py`.

Everything else goes to moto unchanged. The server listens on 127.0.0.1 only; :func:`require_loopback` is how
callers make sure an endpoint is that server and not AWS. moto's random ids are seeded (``seed``) so the same
calls in the same order give the same instance ids and addresses: a simulation's output is reproducible.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import json
import logging
import re
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from karpenter_policy.simulate.placementgroups import PlacementGroups

PUBLIC_PARAMETERS = "/aws/service/"
#: The images the default-AMI parameters name, by Kubernetes architecture (set once the account exists).
ARCHITECTURES = ("amd64", "arm64")
LOOPBACK = "127.0.0.1"
#: When every spot price of the history was observed (a fixed moment: the answer is reproducible).
SPOT_PRICE_TIMESTAMP = "2024-01-01T00:00:00.000Z"

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def _template_groups(data: Mapping[str, Any]) -> list[str]:
    """The security groups a launch template's data gives its instances: `SecurityGroupIds`, else the primary
    network interface's `Groups`."""
    groups = data.get("SecurityGroupIds")
    if not groups:
        interfaces = data.get("NetworkInterfaces") or []
        primary = [i for i in interfaces if isinstance(i, Mapping) and i.get("DeviceIndex", 0) == 0]
        groups = primary[0].get("Groups") if primary else None
    return [str(group) for group in groups or []]


def _interface_types(data: Mapping[str, Any]) -> dict[int, str]:
    """Device index → the `InterfaceType` a launch template's data gives the interface there (`efa`, `efa-only`;
    the lowest network card's when several cards have an interface at that index)."""
    kinds: dict[int, str] = {}
    interfaces = data.get("NetworkInterfaces") or []
    for interface in interfaces if isinstance(interfaces, list) else []:
        if not isinstance(interface, Mapping) or not interface.get("InterfaceType"):
            continue
        index = str(interface.get("DeviceIndex", 0))
        if index.isdigit():
            kinds.setdefault(int(index), str(interface["InterfaceType"]))
    return kinds


class SimulationUnavailable(RuntimeError):
    """The simulation cannot run here (moto is not installed, or an endpoint is not the loopback server)."""


def require_loopback(url: str) -> str:
    """`url` when it is an http endpoint on a loopback address; raises SimulationUnavailable otherwise (a
    simulation never talks to a real endpoint, whatever the environment configures)."""
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parsed.scheme != "http" or not loopback:
        raise SimulationUnavailable(f"refusing to simulate against {url}: not the local moto server")
    return url


def _answer(start_response: StartResponse, status: str, body: bytes, content_type: str) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def spot_price_history_xml(
    prices: Mapping[tuple[str, str], float], instance_types: Iterable[str] | None
) -> bytes:
    """A DescribeSpotPriceHistory answer in EC2's XML: the price of each asked type (all when None) per zone."""
    asked = None if instance_types is None else set(instance_types)
    items = "".join(
        f"<item><instanceType>{escape(name)}</instanceType><productDescription>Linux/UNIX</productDescription>"
        f"<spotPrice>{price:.6f}</spotPrice><timestamp>{SPOT_PRICE_TIMESTAMP}</timestamp>"
        f"<availabilityZone>{escape(zone)}</availabilityZone></item>"
        for (name, zone), price in sorted(prices.items())
        if asked is None or name in asked
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse '
        f'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>{uuid.uuid4()}</requestId>'
        f"<spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>"
    ).encode()


class Front:
    """The WSGI application in front of moto's (see the module docstring)."""

    def __init__(self, moto: WsgiApp, spot_prices: Mapping[tuple[str, str], float] | None = None) -> None:
        self.moto = moto
        self.spot_prices = dict(spot_prices or {})
        #: architecture → the image the default-AMI parameters name (see `account`).
        self.images: dict[str, str] = {}
        #: the account's placement groups and the instances in them (moto has none)
        self.placement_groups = PlacementGroups()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        body = self._body(environ)
        target = str(environ.get("HTTP_X_AMZ_TARGET") or "")
        if target == "AmazonSSM.GetParameter":
            answered = self._parameter(body, start_response)
            if answered is not None:
                return answered
        elif str(environ.get("CONTENT_TYPE") or "").startswith("application/x-www-form-urlencoded"):
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            action = (form.get("Action") or [""])[0]
            if action == "CreateFleet":
                return self._fleet(environ, body, form, start_response)
            if action in ("CreatePlacementGroup", "DescribePlacementGroups"):
                groups = self.placement_groups
                status, xml = groups.create(form) if action == "CreatePlacementGroup" else groups.describe(form)
                return _answer(start_response, _STATUS[status], xml, "text/xml;charset=UTF-8")
            if action == "DescribeInstances":
                return self._instances(environ, body, start_response)
            if form.get("Action") == ["DescribeSpotPriceHistory"]:
                types = [v[0] for k, v in sorted(form.items()) if k.startswith("InstanceType.")]
                xml = spot_price_history_xml(self.spot_prices, types or None)
                return _answer(start_response, "200 OK", xml, "text/xml;charset=UTF-8")
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.moto(environ, start_response)

    def _fleet(
        self, environ: Environ, body: bytes, form: Mapping[str, list[str]], start_response: StartResponse
    ) -> Iterable[bytes]:
        """CreateFleet through moto, then its instances given their launch template's security groups."""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        answer = b"".join(self.moto(environ, start_response))
        template = (form.get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName") or [""])[0]
        scope = _REGION.search(str(environ.get("HTTP_AUTHORIZATION") or ""))
        if template and scope is not None:
            from moto.core.models import DEFAULT_ACCOUNT_ID
            from moto.ec2.models import ec2_backends

            backend = ec2_backends[DEFAULT_ACCOUNT_ID][scope.group(1)]
            try:
                data = backend.get_launch_template_by_name(template).latest_version().data
                groups = _template_groups(data)
                launched = sorted(set(_INSTANCE_ID.findall(answer.decode("utf-8", "replace"))))
                kinds = _interface_types(data)
                for instance_id in launched:
                    if groups:
                        backend.modify_instance_security_groups(instance_id, list(groups))
                    for index, nic in backend.get_instance(instance_id).nics.items():
                        if index in kinds:
                            nic.interface_type = kinds[index]
                self.placement_groups.place(launched, data)
            except Exception:  # noqa: BLE001 (moto's own answer stands: the groups stay moto's)
                logging.getLogger(__name__).debug("fleet security groups left as moto made them", exc_info=True)
        return [answer]

    def _instances(self, environ: Environ, body: bytes, start_response: StartResponse) -> Iterable[bytes]:
        """DescribeInstances through moto, its answer saying each placed instance's group and partition."""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        said: list[Any] = []

        def keep(status: str, headers: list[tuple[str, str]], *rest: Any) -> Callable[[bytes], object]:
            said.extend((status, headers))
            return lambda _data: None

        answer = b"".join(self.moto(environ, keep))
        status, headers = said if said else ("500 Internal Server Error", [])
        if status.startswith("200"):
            answer = self.placement_groups.describe_instances(answer)
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(answer)))])
        return [answer]

    @staticmethod
    def _body(environ: Environ) -> bytes:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        stream = environ.get("wsgi.input")
        return stream.read(length) if stream is not None and length > 0 else b""

    def _parameter(self, body: bytes, start_response: StartResponse) -> list[bytes] | None:
        try:
            name = str(json.loads(body or b"{}").get("Name") or "")
        except ValueError:
            return None
        if not name.startswith(PUBLIC_PARAMETERS) or not self.images:
            return None  # moto's own parameters
        image = self.images.get("arm64" if "arm64" in name else "amd64")
        if image is None:
            document: dict[str, Any] = {"__type": "ParameterNotFound", "message": f"Parameter {name} not found."}
            return _answer(start_response, "400 Bad Request", json.dumps(document).encode(), _JSON)
        document = {"Parameter": {"Name": name, "Type": "String", "Value": image, "Version": 1, "DataType": "text"}}
        return _answer(start_response, "200 OK", json.dumps(document).encode(), _JSON)


_JSON = "application/x-amz-json-1.1"
_STATUS = {200: "200 OK", 400: "400 Bad Request"}
#: The region of a SigV4 request (its credential scope) and the instance ids of a CreateFleet answer.
_REGION = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
_INSTANCE_ID = re.compile(r">(i-[0-9a-f]+)<")


class MotoServer:
    """moto's server behind :class:`Front` on 127.0.0.1 (a free port), in a thread of this process."""

    def __init__(self, spot_prices: Mapping[tuple[str, str], float] | None = None, seed: int = 42) -> None:
        try:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
            from werkzeug.serving import make_server
        except ImportError as error:
            raise SimulationUnavailable(
                f"simulate needs moto's server ({error.name} is missing): pip install 'karpenter-policy[simulate]'"
            ) from None
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
        self.front = Front(DomainDispatcherApplication(create_backend_app), spot_prices)
        self._server = make_server(LOOPBACK, 0, self.front, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        self.url = require_loopback(f"http://{host}:{port}")
        self._control("/moto-api/reset")  # moto's state is the process's: start from an empty account
        self.seed = seed
        self.reseed()

    def reseed(self) -> None:
        """Seed moto's random ids again. moto draws from its generator on work it caches for the process (an
        earlier simulation in the same process may have drawn for it already), so the driver seeds again once the
        account is built: from there on, the same scenario gets the same ids."""
        self._control(f"/moto-api/seed?a={int(self.seed)}")

    def _control(self, path: str) -> None:
        parsed = urllib.parse.urlsplit(self.url)
        connection = http.client.HTTPConnection(parsed.hostname or LOOPBACK, parsed.port, timeout=30)
        try:
            connection.request("POST", path)
            answer = connection.getresponse()
            answer.read()
            if answer.status >= 300:
                raise SimulationUnavailable(f"moto's server answered {answer.status} to {path}")
        finally:
            connection.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = [
    "ARCHITECTURES",
    "Front",
    "MotoServer",
    "SimulationUnavailable",
    "require_loopback",
    "spot_price_history_xml",
]
