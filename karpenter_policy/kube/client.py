"""``KubeCluster``: the :class:`~karpenter_policy.kube.cluster.Cluster` of a real API server, through the
official ``kubernetes`` client — the only module of the project that imports it.

The client is used for what it does well and is stable across its versions: reading a kubeconfig or the
in-cluster service account (TLS, tokens, exec plugins and their refresh) and its urllib3 connection pool.
Requests are plain JSON over that pool — no generated models, whose (de)serialisation is slow and whose
call signatures change between client releases — so every object is the API's own dict.

Failures are mapped onto :mod:`karpenter_policy.kube.errors` (404, 409, 410, 422, 429, 5xx and connection
errors), and every answer is checked for shape (:mod:`karpenter_policy.kube.shape`) before it is returned: an
empty, non-JSON, Status or otherwise malformed body is ``Malformed`` (unavailable), never "no objects". Reads
(get, list, opening a watch) are retried on ``Unavailable`` (but not on ``Malformed``) with exponential backoff
and jitter; writes are not (a lost reply to a create would turn a retry into AlreadyExists), the caller's
reconcile loop retries them. A `timeout` given to get, list, served, create or update bounds the whole call,
retries, pages and pauses included (each request's connect and read timeouts are cut to what is left): the Lease's
renewals must end before their deadline, and `plan --kubeconfig` within its `--request-timeout`, however the API
server behaves.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import kubernetes.client
import urllib3
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import load_incluster_config
from kubernetes.config.kube_config import load_kube_config

from karpenter_policy.kube import objects, shape
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.cluster import (
    DEFAULT_EVENT_SOURCE,
    DEFAULT_WATCH_TIMEOUT,
    EventSeverity,
    ObjectList,
    WatchEvent,
    WatchStream,
)
from karpenter_policy.kube.errors import ClusterError, Gone, Malformed, Unavailable, error_for_status
from karpenter_policy.kube.events import EventRecorder
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.patches import CONTENT_TYPES, PatchType

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_WATCH_SLACK = 30.0
#: Objects per page of a list (client-go's pager reads 500 at a time).
LIST_PAGE_SIZE = 500
"""Seconds a watch's read timeout exceeds its server-side timeout: a server silent for longer is dead."""


class KubeCluster:
    """A cluster behind an API server. Build it with :meth:`from_kubeconfig`, :meth:`in_cluster` or
    :meth:`from_url`; ``retries`` is how many times a read is retried when the server is unavailable (not when
    it answered something malformed: the caller decides how to back off then)."""

    def __init__(
        self,
        configuration: kubernetes.client.Configuration,
        retries: int = 3,
        backoff: Backoff | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        watch_slack: float = DEFAULT_WATCH_SLACK,
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        configuration.retries = False  # retries are ours: only for reads, with backoff and jitter
        self._configuration = configuration
        self._api: Any = kubernetes.client.ApiClient(configuration)  # Any: typed in some client releases only
        self._pool = self._api.rest_client.pool_manager
        self._retries = retries
        self._backoff_template = backoff or Backoff()
        self._timeout = urllib3.Timeout(connect=connect_timeout, read=read_timeout)
        self._connect_timeout = connect_timeout
        self._watch_slack = watch_slack
        self._page_size = page_size
        self._recorder = EventRecorder(self)

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None, **options: Any) -> KubeCluster:
        """From a kubeconfig file (default: $KUBECONFIG, then ~/.kube/config) and context (default: current)."""
        configuration = kubernetes.client.Configuration()
        load: Any = load_kube_config  # untyped in some client releases
        try:
            load(config_file=path, context=context, client_configuration=configuration, persist_config=False)
        except (ConfigException, OSError, ValueError, TypeError) as error:
            raise ClusterError(f"kubeconfig {path or '(default)'}: {error}") from error
        return cls(configuration, **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeCluster:
        """From the pod's service account (token, CA and the KUBERNETES_SERVICE_* environment)."""
        configuration = kubernetes.client.Configuration()
        load: Any = load_incluster_config  # untyped in some client releases
        try:
            load(client_configuration=configuration)
        except (ConfigException, OSError) as error:
            raise ClusterError(f"in-cluster configuration: {error}") from error
        return cls(configuration, **options)

    @classmethod
    def from_url(
        cls, url: str, token: str | None = None, ca_file: str | None = None, verify: bool = True, **options: Any
    ) -> KubeCluster:
        configuration = kubernetes.client.Configuration()
        configuration.host = url.rstrip("/")
        configuration.verify_ssl = verify
        configuration.ssl_ca_cert = ca_file
        if token:
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        return cls(configuration, **options)

    @property
    def host(self) -> str:
        return str(self._configuration.host)

    def close(self) -> None:
        self._api.close()

    # -- reading -------------------------------------------------------------------------------------

    def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        timeout: float | None = None,
    ) -> ObjectList:
        """Every matching object, read in pages of `page_size` (one consistent snapshot: the pages share its
        resourceVersion), as client-go's pager reads — a list of 100,000 pods is never one 400 MB answer. When
        the snapshot expires between pages (410), the whole list is read again in one answer, as the pager
        falls back. ``timeout`` bounds the whole list, every page and retry included, as for :meth:`get`."""
        path, what = _path(kind, namespace), f"GET {_path(kind, namespace)}"
        deadline = _deadline(timeout)
        selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
        items: list[Obj] = []
        version = ""
        token: str | None = None
        seen: set[str] = set()
        while True:
            query = _query(**selectors, limit=str(self._page_size) if self._page_size > 0 else None,
                           **{"continue": token})
            try:
                page = self._retrying(functools.partial(self._json, "GET", path, query, deadline=deadline), deadline)
            except Gone:
                if token is None:
                    raise
                log.info("%s: the list's snapshot expired between pages; reading it whole", what)
                return self._retrying(lambda: shape.checked_list(
                    kind, self._json("GET", path, _query(**selectors), deadline=deadline), what), deadline)
            checked = shape.checked_list(kind, page, what)
            items.extend(checked.items)
            version = version or checked.resource_version
            token = shape.continue_token(page, what)
            if token is None:
                break
            if token in seen:
                raise Malformed(f"{what}: the continue token {token[:40]!r} came back: the pages would never end",
                                shape.BAD_METADATA)
            seen.add(token)
        if len(seen) > 0:
            items.sort(key=lambda obj: (objects.namespace(obj) or "", objects.name(obj)))
        return ObjectList(items, version)

    def served(self, kind: Kind, *, timeout: float | None = None) -> bool:
        """Whether the API server serves `kind` (its group version's discovery document lists its plural), as
        kubectl tells a resource the cluster lacks — discovery is open to every authenticated user, where a list
        of an unserved resource is refused (403) before it is found missing (404). A discovery document of another
        shape is Malformed. ``timeout`` as for :meth:`get`."""
        path = f"/apis/{kind.api_version}" if kind.group else "/api/v1"
        deadline = _deadline(timeout)
        try:
            document = self._retrying(functools.partial(self._json, "GET", path, deadline=deadline), deadline)
        except ClusterError as error:
            if error.status == 404:
                return False
            raise
        resources = document.get("resources") if isinstance(document, dict) else None
        if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
            raise Malformed(f"GET {path}: not an API resource list: {str(document)[:80]}", shape.NOT_AN_OBJECT)
        return any(r.get("name") == kind.plural for r in resources)

    def get(self, kind: Kind, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Obj | None:
        path = _path(kind, _ns(kind, namespace), name)
        deadline = _deadline(timeout)
        try:
            return self._retrying(
                lambda: shape.checked_object(kind, self._json("GET", path, deadline=deadline), f"GET {path}"),
                deadline,
            )
        except ClusterError as error:
            if error.status == 404:
                return None
            raise

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: float = DEFAULT_WATCH_TIMEOUT,
        bookmarks: bool = False,
    ) -> WatchStream:
        query = _query(
            watch="true",
            resourceVersion=resource_version or None,
            timeoutSeconds=str(max(1, int(timeout_seconds))),
            allowWatchBookmarks="true" if bookmarks else None,
            labelSelector=label_selector,
            fieldSelector=field_selector,
        )
        timeout = urllib3.Timeout(connect=self._connect_timeout, read=timeout_seconds + self._watch_slack)
        response = self._retrying(lambda: self._request("GET", _path(kind, namespace), query, timeout=timeout))
        return _HttpWatch(response, kind, bookmarks)

    # -- writing -------------------------------------------------------------------------------------

    def create(self, kind: Kind, obj: Obj, *, timeout: float | None = None) -> Obj:
        body = objects.with_kind(kind, dict(obj))
        namespace = objects.namespace(body) or ("default" if kind.namespaced else None)
        return self._object(kind, "POST", _path(kind, namespace), body, deadline=_deadline(timeout))

    def update(self, kind: Kind, obj: Obj, subresource: str | None = None, *, timeout: float | None = None) -> Obj:
        body = objects.with_kind(kind, dict(obj))
        path = _path(kind, _ns(kind, objects.namespace(body)), objects.name(body), subresource)
        return self._object(kind, "PUT", path, body, deadline=_deadline(timeout))

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        path = _path(kind, _ns(kind, namespace), name, subresource)
        return self._object(kind, "PATCH", path, patch, CONTENT_TYPES[patch_type])

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        self._send("DELETE", _path(kind, _ns(kind, namespace), name), options)

    def bind(self, namespace: str, pod_name: str, node_name: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod_name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self._send("POST", _path(objects.POD, namespace, pod_name, "binding"), binding)

    def evict(self, namespace: str, pod_name: str) -> None:
        meta = {"name": pod_name, "namespace": namespace}
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta}
        self._send("POST", _path(objects.POD, namespace, pod_name, "eviction"), eviction)

    def record_event(
        self,
        involved: Obj,
        reason: str,
        message: str,
        type: EventSeverity = "Normal",
        source: str = DEFAULT_EVENT_SOURCE,
    ) -> Obj:
        return self._recorder.record(involved, reason, message, type, source)

    # -- HTTP ----------------------------------------------------------------------------------------

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {str(k): str(v) for k, v in self._api.default_headers.items()}
        headers.update({"Accept": "application/json", "Content-Type": content_type})
        settings: dict[str, Any] = dict(self._configuration.auth_settings())
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    def _request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: urllib3.Timeout | None = None,
    ) -> urllib3.BaseHTTPResponse:
        url = f"{self._configuration.host}{path}" + (f"?{urlencode(query)}" if query else "")
        payload = json.dumps(body).encode() if body is not None else None
        try:
            response = self._pool.request(
                method, url, body=payload, headers=self._headers(content_type),
                timeout=timeout or self._timeout, preload_content=False, retries=False,
            )
        except urllib3.exceptions.HTTPError as error:
            raise Unavailable(f"{method} {url}: {error}") from error
        if response.status >= 400:
            try:
                data = response.read()
            except urllib3.exceptions.HTTPError:
                data = b""
            finally:
                response.release_conn()
            raise _status_error(method, path, response.status, data)
        return response

    def _timeout_until(self, deadline: float | None) -> urllib3.Timeout | None:
        """The timeout of one request that must end by `deadline` (monotonic; None: the configured timeouts)."""
        if deadline is None:
            return None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Unavailable("the call's timeout ran out")
        return urllib3.Timeout(connect=min(self._connect_timeout, remaining), read=remaining, total=remaining)

    def _read(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None,
        body: Any,
        content_type: str,
        deadline: float | None = None,
    ) -> bytes:
        response = self._request(method, path, query, body, content_type, self._timeout_until(deadline))
        try:
            return bytes(response.read())
        except urllib3.exceptions.HTTPError as error:
            raise Unavailable(f"{method} {path}: reading the reply: {error}") from error
        finally:
            response.release_conn()

    def _json(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        deadline: float | None = None,
    ) -> Any:
        """The decoded JSON of a reply (any shape: the caller checks it); empty or non-JSON is Malformed."""
        return shape.decode(self._read(method, path, query, body, content_type, deadline), f"{method} {path}")

    def _object(
        self,
        kind: Kind,
        method: str,
        path: str,
        body: Any,
        content_type: str = "application/json",
        deadline: float | None = None,
    ) -> Obj:
        """A write whose reply is the object written, checked for shape."""
        reply = self._json(method, path, body=body, content_type=content_type, deadline=deadline)
        return shape.checked_object(kind, reply, f"{method} {path}")

    def _send(self, method: str, path: str, body: Any) -> None:
        """A write whose reply (a Status or the object) the caller does not need: only its HTTP status counts."""
        self._read(method, path, None, body, "application/json")

    def _retrying(self, call: Callable[[], T], deadline: float | None = None) -> T:
        """`call`, retried while the server is unavailable — and, with a `deadline` (monotonic), only while the
        pause before the next try ends before it."""
        backoff = Backoff(self._backoff_template.initial, self._backoff_template.maximum, self._backoff_template.factor)
        for attempt in range(self._retries + 1):
            try:
                return call()
            except Malformed:
                raise  # the server answered: asking again at once would only get the same, the caller backs off
            except Unavailable as error:
                if attempt == self._retries:
                    raise
                delay = backoff.next_delay()
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise
                log.debug("%s; retrying in %.2f s", error, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")


def _deadline(timeout: float | None) -> float | None:
    """When a call given `timeout` seconds must be over (monotonic), or None."""
    return None if timeout is None else time.monotonic() + timeout


def _ns(kind: Kind, namespace: str | None) -> str | None:
    """The namespace of a single object: "default" when a namespaced kind is given none (as kubectl)."""
    return (namespace or "default") if kind.namespaced else None


def _path(kind: Kind, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
    path = "/api/v1" if not kind.group else f"/apis/{kind.api_version}"
    if kind.namespaced and namespace:
        path += f"/namespaces/{quote(namespace, safe='')}"
    path += f"/{kind.plural}"
    if name:
        path += f"/{quote(name, safe='')}"
        if subresource:
            path += f"/{subresource}"
    return path


def _query(**params: str | None) -> dict[str, str]:
    return {key: value for key, value in params.items() if value}


def _status_error(method: str, path: str, status: int, data: bytes) -> ClusterError:
    """The error for a failed reply, from its Status body when it has one."""
    message, reason = data.decode("utf-8", "replace").strip()[:500], ""
    try:
        decoded = json.loads(data)
        if isinstance(decoded, dict):
            message = str(decoded.get("message") or message)
            reason = str(decoded.get("reason") or "")
    except ValueError:
        pass
    return error_for_status(status, f"{method} {path}: {status} {reason}: {message}".replace(" : ", ": "), reason)


class _HttpWatch(Iterator[WatchEvent]):
    """The event lines of a streamed watch response; ``close()`` from another thread ends it at once.

    An ERROR event raises its status's error (410: Gone), a line that is not a well-formed event raises
    Malformed (and closes the stream); a broken stream just ends the iteration."""

    def __init__(self, response: urllib3.BaseHTTPResponse, kind: Kind, bookmarks: bool) -> None:
        self._response = response
        self._kind = kind
        self._bookmarks = bookmarks
        self._lines = self._read_lines()
        self._closed = threading.Event()

    def __iter__(self) -> _HttpWatch:
        return self

    def __enter__(self) -> _HttpWatch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        shutdown = getattr(self._response, "shutdown", None)  # urllib3 >= 2.3: unblocks a reading thread
        if shutdown is not None:
            with contextlib.suppress(RuntimeError):  # the stream was read to its end: no read to unblock
                shutdown()
        self._response.close()

    def __next__(self) -> WatchEvent:
        while True:
            try:
                line = next(self._lines)
            except StopIteration:
                self._finish()
                raise
            except Exception as error:
                # A stream cut short (server restart, proxy timeout, our close()) ends like a timeout does:
                # the caller watches again from its last version, and an unreachable server then fails there.
                # Closed by us from another thread, the read may fail in any way (http.client is not
                # thread-safe): that too is just the end.
                if not self._closed.is_set():
                    if not isinstance(error, urllib3.exceptions.HTTPError | OSError):
                        raise
                    log.debug("watch %s ended: %s", self._kind.plural, error)
                self._finish()
                raise StopIteration from None
            event = self._decode(line)
            if event is not None:
                return event

    def _read_lines(self) -> Iterator[bytes]:
        pending = b""
        for chunk in self._response.stream(amt=None, decode_content=True):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            yield from (line for line in lines if line.strip())
        if pending.strip():
            yield pending

    def _decode(self, line: bytes) -> WatchEvent | None:
        what = f"watch {self._kind.plural}"
        try:
            event = shape.checked_event(self._kind, shape.decode(line, what), what)
        except ClusterError:
            self.close()
            raise
        if event.type == "BOOKMARK" and not self._bookmarks:
            return None
        return event

    def _finish(self) -> None:
        self._closed.set()
        with contextlib.suppress(Exception):  # the connection is already gone: nothing to give back to the pool
            self._response.release_conn()
