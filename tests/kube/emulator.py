"""A stateful Kubernetes API server for the adapter's tests and for kubectl: kmock's KubernetesEmulator,
extended with the semantics KubeCluster relies on and kmock 0.8 lacks, served over real HTTP from a background
thread — or on its own: ``python -m kube.emulator --port 8001 --kubeconfig kubeconfig`` from ``tests/`` (or
``python -m tests.kube.emulator …`` from the repository) serves until interrupted and writes a kubeconfig for
kubectl and for ``karpenter-policy reconcile --kubeconfig``.

What kmock gives: the aiohttp server on a loopback port, Status error replies and its versioned object store
(``objects``). What it lacks, and this subclass adds (taking over kmock's request parsing and its handling of
every API URL):

- resourceVersion: one counter for every write; optimistic concurrency on PUT and on patches that carry
  ``metadata.resourceVersion`` (409 Conflict); uid and creationTimestamp; ``generateName``.
- PUT (update) at all; JSON Patch and strategic merge besides merge patches; the /status split.
- watches from a resourceVersion, replayed from a bounded change log, with ``timeoutSeconds``, bookmarks,
  selectors (an object leaving a selector arrives as DELETED) and, for a version older than the log,
  the API server's ``ERROR`` event with a 410 Expired Status (``compact()`` forgets the log on demand).
- label and field selectors on lists and watches; list items without apiVersion/kind, as on the wire;
  pagination (``limit`` and ``continue``: pages of one snapshot, a token expired by ``compact()`` or
  ``expire_pages()`` is 410 Expired).
- finalizers and deletionTimestamp on DELETE, removal when an update or patch drops the last finalizer.
- the Binding subresource (409 if bound) and the policy/v1 Eviction subresource (429 when a
  PodDisruptionBudget forbids it).
- what kubectl needs (tests/kube/discovery.py, tests/kube/tables.py): discovery of /api and /apis with the
  right group versions and resource lists, /version, namespaces as a resource (``/api/v1/namespaces``,
  seeded with default, kube-system, kube-public and kube-node-lease when ``seed_namespaces``), field
  selectors per kind (events by involvedObject.name/kind/namespace, reason, type, …), ``dryRun=All``
  (validated and answered, nothing stored, no resourceVersion spent, no watch event), server-side apply
  (``application/apply-patch+yaml`` with a ``fieldManager``: creates the object, or merges the applied
  configuration into it as a strategic merge patch and records the manager in ``managedFields``; no
  conflict detection, and fields a manager stops applying are not removed), and Table answers to GETs
  that ask for them.
- what a cluster serves beyond storage (tests/kube/apiserver/, one module per job): the kinds kubectl users
  and the Helm chart's RBAC need (``kinds``: Deployments and ReplicaSets with ``metadata.generation`` and
  ``/scale``, ServiceAccounts with ``/token``, Secrets, RBAC), OpenAPI v2 and v3 with Kubernetes' schemas and
  ``fieldValidation=Strict`` (``openapi``), streaming lists (a watch with ``sendInitialEvents``), ``pods/log``'s
  honest 400, token authentication and RBAC authorization with SelfSubjectAccessReview when ``authorize``
  (``rbac``; then over HTTPS, ``tls``, and the SelfSubjectAccessReview kubectl sends in protobuf,
  ``protobuf``), and, with :class:`EmulatorThread`'s ``control_plane``, the workload controllers, a
  kube-scheduler stand-in and kubelets beside the server (``controlplane``).
- Karpenter's custom resources (``kinds.CRD_KINDS``: NodeClaims, NodePools, Machines, EC2NodeClasses) stored and
  listed as any kind (a Table GET answered with their CRD's printer columns: tests/kube/tables.py), but
  only those given in ``crds``: the others are 404 and absent from discovery, as on a cluster without their CRD.
- fault injection: ``fail_next(n)`` answers the next n requests with 503; ``watch_outage()`` cuts open
  watches and answers lists and watches with 503 while it lasts (writes still work, so a test can change
  what a watcher misses); ``drop_watches()`` cuts open watches mid-stream.

The pure helpers (selectors, patch application, PodDisruptionBudget arithmetic) are the package's own;
the server state, versions, watch replay and wire format are written here, independently of MemoryCluster.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import copy
import datetime
import json
import logging
import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml

from karpenter_policy.kube import disruption, objects, shape
from karpenter_policy.kube.errors import ClusterError, Malformed
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.patches import apply_patch, patch_type_of
from karpenter_policy.kube.selectors import label_selector_matches, parse_field_selector, parse_label_selector

from .apiserver import protobuf, rbac, subresources
from .apiserver.controlplane import ControlPlane, ControlPlaneOptions
from .apiserver.kinds import CRD_KINDS, GENERATIONS, REVIEWS, SCALABLE, SELF_SUBJECT_ACCESS_REVIEW, SERVICE_ACCOUNT
from .apiserver.openapi import openapi_v2, openapi_v3, unknown_fields
from .apiserver.tls import Certificate
from .discovery import SERVER_VERSION, ApiPath, discovery, parse_path
from .tables import table, wants_table

log = logging.getLogger(__name__)

APPLY_PATCH = "application/apply-patch+yaml"
SEEDED_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


@dataclass(slots=True)
class Change:
    """One stored change, as the change log keeps it for watches. ``object`` and ``previous`` are the log's own
    copies, never written to once logged, so every watcher reads them as they are and the object's JSON is
    encoded once (:meth:`line`), not once per watcher."""

    version: int
    kind: Kind
    type: str
    object: Obj
    previous: Obj | None
    _encoded: bytes | None = None

    def line(self, event_type: str) -> bytes:
        """The watch event line of this change as `event_type` (its own type, or ADDED / DELETED for an object
        entering or leaving a watcher's selector)."""
        if self._encoded is None:
            self._encoded = json.dumps(self.object).encode()
        return b'{"type": "' + event_type.encode() + b'", "object": ' + self._encoded + b"}\n"


def _status(code: int, reason: str, message: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


def _failure(code: int, reason: str, message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=code, reason=reason, message=message, details={})


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesEmulator):
    history_window: int = 1000
    seed_namespaces: bool = False
    #: Authenticate requests by token and authorize them with RBAC (tests/kube/apiserver/rbac.py); off, every
    #: request is allowed, whatever its token.
    authorize: bool = False
    #: The custom resources served (of ``kinds.CRD_KINDS``: Karpenter's NodeClaims, NodePools, …), as if their CRDs
    #: were installed; the others are 404, as on a cluster without them.
    crds: frozenset[Kind] = frozenset()
    _state: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _version: int = attrs.field(default=1, init=False)  # never "0", which a watch reads as "current state"
    #: The change log, oldest first (at most ``history_window`` changes), and the same changes by kind: a watch
    #: reads its kind's changes newer than its position from the end, never the whole log (which a benchmark
    #: keeps 200,000 changes long).
    _log: collections.deque[Change] = attrs.field(factory=collections.deque, init=False)
    _log_by_kind: dict[Kind, collections.deque[Change]] = attrs.field(factory=dict, init=False)
    _forgotten: int = attrs.field(default=0, init=False)
    #: The event each kind's open watches wait on (the server's loop alone reads and replaces them), and the kinds
    #: written since the last wake-up (any thread, under the lock): a write wakes its kind's watches only, not the
    #: watches of every kind (a pod written 400 times a second woke the Node, NodeClaim, … watches as often).
    _wakeups: dict[Kind, asyncio.Event] = attrs.field(factory=dict, init=False)
    _written_kinds: set[Kind] = attrs.field(factory=set, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _epoch: int = attrs.field(default=0, init=False)  # bumped to cut open watches
    _failures: int = attrs.field(default=0, init=False)
    _down: bool = attrs.field(default=False, init=False)
    watch_requests: int = attrs.field(default=0, init=False)
    list_requests: int = attrs.field(default=0, init=False)
    #: Paginated lists under way: a continue token → (the snapshot's version, the items not yet served).
    _pages: dict[str, tuple[int, list[Obj]]] = attrs.field(factory=dict, init=False)
    _tokens: int = attrs.field(default=0, init=False)
    _expire_after: int | None = attrs.field(default=None, init=False)
    _bearer_tokens: rbac.Tokens = attrs.field(factory=rbac.Tokens, init=False)
    #: Set on every stored change (any thread may wait on it: the control plane does).
    written: threading.Event = attrs.field(factory=threading.Event, init=False)

    # -- controls for tests (any thread) ----------------------------------------------------------------

    def compact(self) -> None:
        """Forget the change log: a watch from any earlier version now gets 410 Gone, and so does the next page
        of a paginated list begun before (its continue token expired, as etcd's compaction makes it)."""
        with self._state:
            self._forget_log()
            self._pages.clear()
        self._wake_threadsafe(every_kind=True)

    def expire_pages(self, after: int) -> None:
        """The continue tokens of paginated lists expire once `after` more pages are served (a compaction
        between two pages of a list)."""
        with self._state:
            self._expire_after = after

    def drop_watches(self) -> None:
        """Cut every open watch connection, as a restarting API server or a proxy would."""
        with self._state:
            self._epoch += 1
        self._wake_threadsafe(every_kind=True)

    def fail_next(self, count: int) -> None:
        with self._state:
            self._failures = count

    @contextlib.contextmanager
    def watch_outage(self) -> Iterator[None]:
        with self._state:
            self._down = True
            self._epoch += 1
        self._wake_threadsafe(every_kind=True)
        try:
            yield
        finally:
            with self._state:
                self._down = False

    def seed(self) -> None:
        """Create the namespaces every cluster has (once the server runs)."""
        with self._state:
            for name in SEEDED_NAMESPACES:
                if self._key(objects.NAMESPACE, None, name) not in self._objects:
                    self._create(objects.NAMESPACE, None, {"metadata": {"name": name}, "status": {"phase": "Active"}})

    def preload(self, kind: Kind, items: list[Obj]) -> int:
        """Store `items` at once, before anyone watches (benchmarks/scale_server.py seeds a fleet of thousands of
        objects this way instead of one HTTP request each): each is created as a POST would, but keeps the
        ``creationTimestamp`` it carries (an hour-old Node stays an hour old), and the change log is forgotten,
        so a watch starts from a list. The version reached."""
        with self._state:
            for item in items:
                meta = item.get("metadata") or {}
                created = self._create(kind, meta.get("namespace"), item)
                if meta.get("creationTimestamp"):
                    stored = self._current(kind, objects.namespace(created), objects.name(created))
                    stored["metadata"]["creationTimestamp"] = meta["creationTimestamp"]
            self._forget_log()
            return self._version

    # -- request dispatch (the server's loop) ------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """kmock's entry point, with the request parsed as an API server does (kmock 0.8 cannot parse
        ``/api/v1/namespaces`` nor YAML bodies) and every failure answered as a Status."""
        try:
            request = await _parse_request(raw_request, len(self._requests))
            self._requests.append(request)
            return await self._handle(request)
        except kmock.KubernetesError as error:
            return await self._render_error(error)
        except Exception as error:  # a bug of the emulator: a 500 the client sees, a traceback the test log shows
            log.exception("the API emulator failed on %s %s", raw_request.method, raw_request.path_qs)
            return await self._render_error(error)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        method = str(request.method.value)
        path = parse_path(request.url.path)
        user = self._authorized(request, method, path)
        if path is None or path.plural is None:
            if method == "GET" and request.url.path.rstrip("/") == "/version":
                return aiohttp.web.json_response(SERVER_VERSION)
            if method == "GET" and request.url.path.rstrip("/") == "/openapi/v2" and (v2 := openapi_v2()):
                return aiohttp.web.json_response(v2)
            if method == "GET" and (openapi := openapi_v3(request.url.path)) is not None:
                return aiohttp.web.json_response(openapi)
            if method == "GET" and path is not None:
                document = discovery(path, request.url.host or "127.0.0.1", self.crds)
                if document is not None:
                    return aiohttp.web.json_response(document)
            raise _failure(404, "NotFound", f"the server could not find the requested resource ({request.url.path})")
        kind = path.kind
        if kind in CRD_KINDS and kind not in self.crds:
            raise _failure(404, "NotFound", f"the server could not find the requested resource ({request.url.path})")
        if kind is None:
            raise _failure(404, "NotFound", f"the server could not find the requested resource ({request.url.path})")
        with self._state:
            if self._failures or (self._down and method == "GET" and request.name is None):
                self._failures = max(0, self._failures - 1)
                raise _failure(503, "ServiceUnavailable", "the emulated API server is unavailable")
        if method == "GET" and request.params.get("watch") in ("true", "1"):
            return await self._watch(request, kind)
        if method == "POST" and kind == SELF_SUBJECT_ACCESS_REVIEW:
            with self._state:
                review = rbac.access_review(user, _body(request), self._stored)
            return aiohttp.web.json_response(review, status=201)
        if kind in REVIEWS:
            raise _failure(405, "MethodNotAllowed", f"{kind.plural} are only created (answered, never stored)")
        if method in ("POST", "PUT") and not request.subresource:
            _check_fields(kind, request, _body(request))
        options = request.data if method == "DELETE" and isinstance(request.data, dict) else {}
        dry_run = request.params.get("dryRun") == "All" or options.get("dryRun") == ["All"]
        if request.params.get("dryRun") not in (None, "", "All"):
            raise _failure(400, "BadRequest", f"unsupported dryRun {request.params['dryRun']!r}")
        try:
            with self._state:
                status, body = self._dispatch(kind, method, request, dry_run)
        except ClusterError as error:  # the package's helpers (selectors, patches) raise these
            status = error.status or 400
            reason = {400: "BadRequest", 415: "UnsupportedMediaType", 422: "Invalid"}.get(status, type(error).__name__)
            raise _failure(status, reason, error.message) from error
        self._wake()
        if method == "GET" and wants_table(request.headers.get("Accept", "")):
            now = datetime.datetime.now(datetime.UTC)
            body = table(kind, body, request.params.get("includeObject", "Metadata"), now)
        return aiohttp.web.json_response(body, status=status)

    def _dispatch(self, kind: Kind, method: str, request: kmock.Request, dry_run: bool) -> tuple[int, Any]:
        name, sub, namespace = request.name, request.subresource, request.namespace
        if kind.namespaced and name is not None and namespace is None and method != "POST":
            raise _failure(404, "NotFound", f"{kind.plural} is namespaced: /namespaces/<namespace>/{kind.plural}/…")
        if method == "GET" and name is None:
            return 200, self._list(kind, namespace, request.params)
        if method == "GET" and sub == "scale" and kind in SCALABLE:
            return 200, subresources.scale_of(self._current(kind, namespace, name))
        if method == "GET" and sub == "log" and kind == objects.POD:
            pod = self._current(kind, namespace, name)
            raise _failure(400, "BadRequest", f'the test API server runs no containers: pod "{name}" has no logs '
                                              f'(phase {(pod.get("status") or {}).get("phase", "Pending")})')
        if method == "GET" and sub not in (None, "status"):
            raise _failure(404, "NotFound", f"{kind.plural}/{sub} is not served")
        if method == "GET":
            return 200, copy.deepcopy(self._current(kind, namespace, name))
        if method == "POST" and name is None:
            return 201, self._create(kind, namespace, _body(request), dry_run)
        if method == "POST" and name and sub == "token" and kind == SERVICE_ACCOUNT:
            return 201, self._token_request(namespace or "default", name, _body(request))
        if method in ("PUT", "PATCH") and name and sub == "scale" and kind in SCALABLE:
            return 200, self._scale(kind, namespace, name, request, dry_run)
        if method == "POST" and name and sub == "binding" and kind == objects.POD:
            return 201, self._bind(namespace, name, _body(request), dry_run)
        if method == "POST" and name and sub == "eviction" and kind == objects.POD:
            return 201, self._evict(namespace, name, dry_run)
        if method == "PUT" and name:
            return 200, self._update(kind, namespace, name, _body(request), sub, dry_run)
        if method == "PATCH" and name and _content_type(request) == APPLY_PATCH:
            return self._apply(kind, namespace, name, request, sub, dry_run)
        if method == "PATCH" and name:
            return 200, self._patch(kind, namespace, name, request, sub, dry_run)
        if method == "DELETE" and name:
            return 200, self._delete(kind, namespace, name, request.data or {}, dry_run)
        raise _failure(405, "MethodNotAllowed", f"{method} {request.url.path} is not served")

    def _authorized(self, request: kmock.Request, method: str, path: ApiPath | None) -> rbac.User:
        """The user a request acts as, once RBAC allowed it (401 or 403 otherwise); everyone is the admin when the
        server does not authorize."""
        if not self.authorize:
            return rbac.ADMIN
        try:
            with self._state:
                return rbac.authorize(self._bearer_tokens, method, request.url.path, path, request.headers,
                                      request.params, self._stored)
        except rbac.Refused as refused:
            raise _failure(refused.code, refused.reason, refused.message) from None

    # -- the operations (with the state lock held) ------------------------------------------------------

    def _token_request(self, namespace: str, name: str, body: Obj) -> Obj:
        """TokenRequest (``kubectl create token``): a bearer token of the ServiceAccount (it never expires here)."""
        self._current(SERVICE_ACCOUNT, namespace, name)
        return subresources.token_request(namespace, name, body, self._bearer_tokens.issue(namespace, name))

    def _scale(self, kind: Kind, namespace: str | None, name: str, request: kmock.Request, dry_run: bool) -> Obj:
        """The /scale subresource (``kubectl scale``): a PUT or patch of the Scale sets ``spec.replicas``."""
        current = self._current(kind, namespace, name)
        if str(request.method.value) == "PUT":
            proposed = _body(request)
        else:
            proposed = apply_patch(subresources.scale_of(current), request.data, patch_type_of(_content_type(request)))
        self._precondition(kind, current, objects.resource_version(proposed))
        replicas = subresources.replicas_of(proposed)
        if replicas is None:
            raise _failure(422, "Invalid", "spec.replicas: Invalid value: must be a number >= 0")
        updated = copy.deepcopy(current)
        updated.setdefault("spec", {})["replicas"] = replicas
        return subresources.scale_of(self._write(kind, current, updated, None, dry_run))


    def _key(self, kind: Kind, namespace: str | None, name: str) -> tuple[Any, str | None, str]:
        return (kmock.resource(kind.group, kind.version, kind.plural), namespace if kind.namespaced else None, name)

    def _stored(self, kind: Kind) -> list[Obj]:
        resource = kmock.resource(kind.group, kind.version, kind.plural)
        return [obj.raw for (res, _, _), obj in self._objects.items() if res == resource and not obj.deleted]

    def _current(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        key = self._key(kind, namespace, name)
        if key not in self._objects or self._objects[key].deleted:
            raise _failure(404, "NotFound", f'{kind.plural} "{name}" not found')
        return self._objects[key].raw

    def _list(self, kind: Kind, namespace: str | None, params: Any) -> Obj:
        """A list, or one page of it: with ``limit``, the first page is a snapshot of every match at this version
        and a ``continue`` token serves the rest of that snapshot page by page (410 Expired once compacted)."""
        self.list_requests += 1
        token = params.get("continue")
        if token:
            if token not in self._pages:
                raise _failure(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                               "list result. You can start a new list without the continue parameter.")
            version, items = self._pages.pop(token)
        else:
            matches = self._filter(kind, namespace, params)
            version, items = self._version, []
            for obj in self._stored(kind):
                if matches(obj):
                    item = copy.deepcopy(obj)
                    item.pop("apiVersion", None)  # list items come without them on the wire
                    item.pop("kind", None)
                    items.append(item)
            items.sort(key=lambda obj: (objects.namespace(obj) or "", objects.name(obj)))
        meta: Obj = {"resourceVersion": str(version)}
        limit = int(params.get("limit") or 0)
        if 0 < limit < len(items):
            self._tokens += 1
            following = f"page-{self._tokens}"
            self._pages[following] = (version, items[limit:])
            items = items[:limit]
            meta["continue"] = following
            meta["remainingItemCount"] = len(self._pages[following][1])
        if self._expire_after is not None:
            self._expire_after -= 1
            if self._expire_after <= 0:
                self._pages.clear()
                self._expire_after = None
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "metadata": meta, "items": items}

    def _filter(self, kind: Kind, namespace: str | None, params: Any) -> Callable[[Obj], bool]:
        labels = params.get("labelSelector")
        parse_label_selector(labels)
        fields = parse_field_selector(kind.kind, params.get("fieldSelector"))

        def matches(obj: Obj) -> bool:
            in_namespace = namespace is None or objects.namespace(obj) == namespace
            return in_namespace and label_selector_matches(labels, objects.labels(obj)) and fields(obj)

        return matches

    def _create(self, kind: Kind, namespace: str | None, body: Obj, dry_run: bool = False) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise _failure(422, "Invalid", "metadata: must be an object")
        if not kind.namespaced:
            meta.pop("namespace", None)
        if kind.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _failure(422, "Invalid", "metadata.name: Required value")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        _check_writable(kind, obj)
        key = self._key(kind, meta.get("namespace"), meta["name"])
        if key in self._objects and not self._objects[key].deleted:
            raise _failure(409, "AlreadyExists", f'{kind.plural} "{meta["name"]}" already exists')
        meta.pop("deletionTimestamp", None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now())
        if kind in GENERATIONS:
            meta["generation"] = 1
        obj.update(apiVersion=kind.api_version, kind=kind.kind)
        if dry_run:
            return obj
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        if key in self._objects:
            self._objects[key].create(obj)
        else:
            self._objects[key] = obj
        self._append(Change(self._version, kind, "ADDED", copy.deepcopy(obj), None))
        return copy.deepcopy(obj)

    def _update(
        self, kind: Kind, namespace: str | None, name: str, body: Obj, sub: str | None, dry_run: bool
    ) -> Obj:
        current = self._current(kind, namespace, name)
        self._precondition(kind, current, objects.resource_version(body))
        return self._write(kind, current, body, sub, dry_run)

    def _patch(
        self, kind: Kind, namespace: str | None, name: str, request: kmock.Request, sub: str | None, dry_run: bool
    ) -> Obj:
        current = self._current(kind, namespace, name)
        patched = apply_patch(current, request.data, patch_type_of(_content_type(request)))
        if sub is None:
            _check_fields(kind, request, patched)
        self._precondition(kind, current, objects.resource_version(patched))
        return self._write(kind, current, patched, sub, dry_run)

    def _apply(
        self, kind: Kind, namespace: str | None, name: str, request: kmock.Request, sub: str | None, dry_run: bool
    ) -> tuple[int, Obj]:
        """Server-side apply: create the object from the applied configuration, or merge it in."""
        applied = request.data
        manager = request.params.get("fieldManager")
        if not isinstance(applied, dict):
            raise _failure(400, "BadRequest", "the applied configuration is not an object")
        if not manager:
            raise _failure(422, "Invalid", "fieldManager: Required value: is required for apply patch")
        meta = applied.get("metadata") if isinstance(applied.get("metadata"), dict) else {}
        if meta.get("name") != name or (kind.namespaced and meta.get("namespace") not in (None, namespace)):
            raise _failure(400, "BadRequest", "the applied configuration names another object than the URL")
        if applied.get("apiVersion") != kind.api_version or applied.get("kind") != kind.kind:
            raise _failure(400, "BadRequest", f"the applied configuration is not a {kind}")
        config = copy.deepcopy(applied)
        config["metadata"] = {k: v for k, v in meta.items() if k not in ("managedFields", "resourceVersion")}
        entry = {"manager": manager, "operation": "Apply", "apiVersion": kind.api_version, "time": _now(),
                 "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(config)}
        key = self._key(kind, namespace, name)
        if key not in self._objects or self._objects[key].deleted:
            config["metadata"]["managedFields"] = [entry]
            return 201, self._create(kind, namespace, config, dry_run)
        current = self._current(kind, namespace, name)
        self._precondition(kind, current, str(meta.get("resourceVersion") or ""))
        merged = apply_patch(current, config, "strategic")
        managed = objects.metadata(current).get("managedFields") or []
        mine = [f for f in managed if (f.get("manager"), f.get("operation")) == (manager, "Apply")]
        others = [f for f in managed if f not in mine]
        previous = mine[0].get("fieldsV1") or {} if mine else {}
        _drop_unapplied(merged, previous, entry["fieldsV1"], [f.get("fieldsV1") or {} for f in others])
        merged["metadata"]["managedFields"] = [*others, entry]
        return 200, self._write(kind, current, merged, sub, dry_run)

    @staticmethod
    def _precondition(kind: Kind, current: Obj, expected: str) -> None:
        if expected and expected != objects.resource_version(current):
            message = f'Operation cannot be fulfilled on {kind.plural} "{objects.name(current)}": it has been modified'
            raise _failure(409, "Conflict", message)

    def _write(self, kind: Kind, current: Obj, proposed: Obj, sub: str | None, dry_run: bool = False) -> Obj:
        if sub not in (None, "status") or (sub == "status" and not kind.status_subresource):
            raise _failure(404, "NotFound", f"{kind.plural}/{sub} is not served")
        new = copy.deepcopy(objects.written_part(kind, sub, current, proposed))
        meta = new.setdefault("metadata", {})
        for kept in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if kept in current["metadata"]:
                meta[kept] = current["metadata"][kept]
            else:
                meta.pop(kept, None)
        if kind in GENERATIONS and new.get("spec") != current.get("spec"):
            meta["generation"] = int(meta.get("generation") or 0) + 1
        new.update(apiVersion=kind.api_version, kind=kind.kind)
        _check_writable(kind, new)
        if dry_run:
            return new
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        key = self._key(kind, objects.namespace(current), objects.name(current))
        if objects.is_deleting(new) and not objects.finalizers(new):
            self._objects[key].history.append(new)
            self._objects[key].delete()
            self._append(Change(self._version, kind, "DELETED", copy.deepcopy(new), None))
        else:
            self._objects[key].history.append(new)
            self._append(Change(self._version, kind, "MODIFIED", copy.deepcopy(new), copy.deepcopy(current)))
        return copy.deepcopy(new)

    def _delete(self, kind: Kind, namespace: str | None, name: str, options: Obj, dry_run: bool = False) -> Obj:
        current = self._current(kind, namespace, name)
        if dry_run:
            return copy.deepcopy(current)
        if objects.finalizers(current):
            if objects.is_deleting(current):
                return copy.deepcopy(current)
            marked = copy.deepcopy(current)
            marked["metadata"]["deletionTimestamp"] = _now()
            if options.get("gracePeriodSeconds") is not None:
                marked["metadata"]["deletionGracePeriodSeconds"] = options["gracePeriodSeconds"]
            self._version += 1
            marked["metadata"]["resourceVersion"] = str(self._version)
            self._objects[self._key(kind, namespace, name)].history.append(marked)
            self._append(Change(self._version, kind, "MODIFIED", copy.deepcopy(marked), copy.deepcopy(current)))
            return copy.deepcopy(marked)
        self._version += 1
        last = copy.deepcopy(current)
        last["metadata"]["resourceVersion"] = str(self._version)
        self._objects[self._key(kind, namespace, name)].delete()
        self._append(Change(self._version, kind, "DELETED", copy.deepcopy(last), None))
        return last

    def _bind(self, namespace: str | None, name: str, binding: Obj, dry_run: bool = False) -> Obj:
        pod = self._current(objects.POD, namespace, name)
        if (pod.get("spec") or {}).get("nodeName"):
            raise _failure(409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        if dry_run:
            return {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}
        bound = copy.deepcopy(pod)
        bound.setdefault("spec", {})["nodeName"] = (binding.get("target") or {}).get("name")
        status = bound.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}]
        self._write_as_server(objects.POD, pod, bound)
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}

    def _write_as_server(self, kind: Kind, current: Obj, new: Obj) -> None:
        """A write by the server itself (binding), which may touch both the spec and the status."""
        self._version += 1
        new["metadata"]["resourceVersion"] = str(self._version)
        self._objects[self._key(kind, objects.namespace(current), objects.name(current))].history.append(new)
        self._append(Change(self._version, kind, "MODIFIED", copy.deepcopy(new), copy.deepcopy(current)))

    def _evict(self, namespace: str | None, name: str, dry_run: bool = False) -> Obj:
        pod = self._current(objects.POD, namespace, name)
        in_namespace = [obj for obj in self._stored(objects.POD) if objects.namespace(obj) == namespace]
        budgets = [pdb for pdb in self._stored(objects.POD_DISRUPTION_BUDGET) if objects.namespace(pdb) == namespace]
        verdict = disruption.eviction_verdict(pod, budgets, in_namespace)
        if not verdict.allowed:
            reason = "TooManyRequests" if verdict.status == 429 else "InternalError"
            raise _failure(verdict.status, reason, verdict.message)
        self._delete(objects.POD, namespace, name, {}, dry_run)
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}

    def _append(self, change: Change) -> None:
        self.written.set()
        self._written_kinds.add(change.kind)
        self._log.append(change)
        self._log_by_kind.setdefault(change.kind, collections.deque()).append(change)
        if len(self._log) > self.history_window:
            oldest = self._log.popleft()
            self._log_by_kind[oldest.kind].popleft()  # the oldest of its kind too
            self._forgotten = oldest.version

    def _forget_log(self) -> None:
        self._log.clear()
        self._log_by_kind.clear()
        self._forgotten = self._version

    def _changes_since(self, kind: Kind, position: int) -> list[Change]:
        """The logged changes of `kind` newer than `position`, oldest first: read from the end of the kind's log,
        so the cost is the changes returned, not the log's length."""
        newer: list[Change] = []
        for change in reversed(self._log_by_kind.get(kind, ())):
            if change.version <= position:
                break
            newer.append(change)
        newer.reverse()
        return newer

    # -- watches -----------------------------------------------------------------------------------------

    def _wake(self, every_kind: bool = False) -> None:
        """Wake the open watches of every kind written since the last wake-up (on the server's loop); of every kind
        with `every_kind` (a watch to cut, a log forgotten)."""
        with self._state:
            written, self._written_kinds = self._written_kinds, set()
        woken = list(self._wakeups) if every_kind else written
        for kind in woken:
            wakeup = self._wakeups.pop(kind, None)
            if wakeup is not None:
                wakeup.set()

    def _wake_threadsafe(self, every_kind: bool = False) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake, every_kind)

    def _wakeup(self, kind: Kind) -> asyncio.Event:
        """What a watch of `kind` waits on until the next write of its kind (on the server's loop)."""
        wakeup = self._wakeups.get(kind)
        if wakeup is None:
            wakeup = self._wakeups[kind] = asyncio.Event()
        return wakeup

    async def _watch(self, request: kmock.Request, kind: Kind) -> aiohttp.web.StreamResponse:
        params = request.params
        try:
            matches = self._filter(kind, request.namespace, params)
        except ClusterError as error:
            raise _failure(400, "BadRequest", error.message) from error
        timeout = float(params.get("timeoutSeconds") or 1800)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        resource_version = params.get("resourceVersion") or ""
        initial_events = params.get("sendInitialEvents") == "true"  # a streaming list (client-go's WatchList)
        with self._state:
            self.watch_requests += 1
            epoch = self._epoch
            pending: list[bytes] = []
            if resource_version in ("", "0") or initial_events:
                # encoded under the lock: the stored objects are the server's, a write may replace them after
                pending = [_line("ADDED", obj) for obj in self._stored(kind) if matches(obj)]
                position = self._version
                if initial_events:  # the end of the initial state, as the API server marks it
                    end = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {
                        "resourceVersion": str(position), "annotations": {"k8s.io/initial-events-end": "true"}}}
                    pending.append(_line("BOOKMARK", end))
            else:
                position = int(resource_version)
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        assert request._raw_request is not None
        await response.prepare(request._raw_request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                wakeup = self._wakeup(kind)
                expired = False
                with self._state:
                    if self._epoch != epoch:  # cut the connection mid-stream, no clean end
                        if request._raw_request.transport is not None:  # None: the client is gone already
                            request._raw_request.transport.close()
                        return response
                    if position < self._forgotten:
                        gone = _status(410, "Expired", f"too old resource version: {position} ({self._forgotten})")
                        pending.append(_line("ERROR", gone))
                        changes: list[Change] = []
                        expired = True
                    else:
                        changes = self._changes_since(kind, position)
                        position = self._version
                for change in changes:
                    event_type = self._translate(change, matches)
                    if event_type is not None:
                        pending.append(change.line(event_type))
                if pending:  # every event of this wake-up in one chunk, not one write each
                    await response.write(b"".join(pending))
                if expired:
                    break
                pending = []
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if bookmarks:
                        bookmark = {"apiVersion": kind.api_version, "kind": kind.kind,
                                    "metadata": {"resourceVersion": str(position)}}
                        await response.write(_line("BOOKMARK", bookmark))
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), remaining)
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            pass  # the client went away
        return response

    @staticmethod
    def _translate(change: Change, matches: Callable[[Obj], bool]) -> str | None:
        """The type of the event a watcher whose selectors are `matches` gets for `change` (of its kind), or None:
        an object entering the selectors arrives as ADDED, one leaving them as DELETED."""
        now = matches(change.object)
        before = change.previous is not None and matches(change.previous)
        if change.type == "MODIFIED" and before != now:
            return "ADDED" if now else "DELETED"
        return change.type if now else None


def _line(event_type: str, obj: Obj) -> bytes:
    """A watch event line of an object no change log holds (the initial state, a bookmark, an error)."""
    return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"


def _check_fields(kind: Kind, request: kmock.Request, obj: Obj) -> None:
    """``fieldValidation=Strict`` (kubectl's default ``--validate=strict``): 400 for fields the schema lacks."""
    if request.params.get("fieldValidation") != "Strict":
        return
    unknown = unknown_fields(kind, obj)
    if unknown:
        fields = ", ".join(f'unknown field "{field}"' for field in unknown)
        raise _failure(400, "BadRequest", f"strict decoding error: {fields}")


def _check_writable(kind: Kind, obj: Obj) -> None:
    """422 for metadata the API server's validation refuses (labels that are not strings, …)."""
    try:
        shape.check_object(obj, kind.plural)
    except Malformed as error:
        raise _failure(422, "Invalid", error.message) from None


def _now() -> str:
    return objects.format_time(datetime.datetime.now(datetime.UTC))


def _content_type(request: kmock.Request) -> str:
    value = next((v for k, v in request.headers.items() if k.lower() == "content-type"), "")
    return value.split(";")[0].strip()


def _body(request: kmock.Request) -> Obj:
    if not isinstance(request.data, dict):
        raise _failure(400, "BadRequest", "the request body is not a JSON object")
    return request.data


def _fields_v1(config: Any) -> Any:
    """The FieldsV1 set of an applied configuration (maps field by field; a list counts as one field)."""
    if not isinstance(config, dict):
        return {}
    fields = {}
    for key, value in config.items():
        if key in ("apiVersion", "kind") or (key in ("name", "namespace") and not isinstance(value, dict)):
            continue
        fields[f"f:{key}"] = _fields_v1(value)
    return fields


def _drop_unapplied(obj: Any, previous: Obj, applied: Obj, others: list[Obj]) -> None:
    """Remove from ``obj`` the fields a manager applied before (``previous``) but no longer applies, unless
    another manager owns them — server-side apply's removal, for maps (a list is one field)."""
    if not isinstance(obj, dict):
        return
    for field, below in previous.items():
        key = field.removeprefix("f:")
        owned = [other[field] for other in others if field in other]
        if field not in applied and not owned:
            obj.pop(key, None)
        elif below and field in applied:
            _drop_unapplied(obj.get(key), below, applied[field], [o for o in owned if isinstance(o, dict)])


async def _parse_request(raw_request: aiohttp.web.BaseRequest, number: int) -> kmock.Request:
    """A kmock Request from an aiohttp one, its URL parsed as the API server does (tests/kube/discovery.py)
    and its body decoded as JSON, or YAML for server-side apply."""
    body = await raw_request.read()
    content_type = raw_request.headers.get("Content-Type", "").split(";")[0].strip()
    data: Any = None
    if body and content_type == protobuf.CONTENT_TYPE:
        try:
            data = protobuf.decode(body)
        except protobuf.ProtobufError as error:  # 415, as for any encoding the server does not read
            raise _failure(415, "UnsupportedMediaType", f"the body of type {content_type!r} is not supported: "
                                                        f"{error}") from None
        body = json.dumps(data).encode()
        content_type = "application/json"
    if body and content_type not in ("", "application/json", APPLY_PATCH) and not content_type.endswith("+json"):
        # other encodings (other protobuf bodies too: tests/kube/apiserver/protobuf.py): 415 Unsupported Media Type
        raise _failure(415, "UnsupportedMediaType", f"the body of type {content_type!r} is not supported")
    if body:
        try:
            data = yaml.safe_load(body) if content_type == APPLY_PATCH else json.loads(body)
        except (ValueError, yaml.YAMLError) as error:
            raise _failure(400, "BadRequest", f"the request body cannot be decoded: {error}") from None
    path = parse_path(raw_request.path)
    resource = kmock.resource(path.group, path.version or "", path.plural) if path and path.plural else None
    request = kmock.Request(
        id=number, raw_request=raw_request, url=raw_request.url, method=raw_request.method,
        params=dict(raw_request.query), headers=dict(raw_request.headers), cookies=dict(raw_request.cookies),
        body=body, text=body.decode("utf-8", "replace"), data=data, resource=resource,
        namespace=path.namespace if path else None, name=path.name if path else None,
        subresource=path.subresource if path else None,
    )
    return request


class EmulatorThread:
    """Serve an :class:`ApiEmulator` on a loopback port (``port=0``: any free one) from its own thread and
    event loop; other keyword arguments are the emulator's (``seed_namespaces=True``, ``history_window``,
    ``authorize=True``). With ``control_plane``, the Deployment and ReplicaSet controllers, the kube-scheduler
    stand-in and the kubelets run beside it (tests/kube/apiserver/controlplane.py)."""

    def __init__(self, port: int = 0, control_plane: ControlPlaneOptions | None = None, **options: Any) -> None:
        self._port = port
        self._options = options
        self._control_plane_options = control_plane
        self.control_plane: ControlPlane | None = None
        #: HTTPS when the server authenticates (kubectl sends a token over HTTPS only)
        self.certificate = Certificate() if options.get("authorize") else None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),), daemon=True)
        self.emulator: ApiEmulator
        self.url = ""

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server_options: dict[str, Any] = {"port": self._port} if self._port else {}
        if self.certificate is not None:
            server_options["server_cls"] = self.certificate.server_class()
        async with ApiEmulator(**self._options) as emulator, kmock.Server(emulator, **server_options) as server:
            emulator._loop = asyncio.get_running_loop()
            if emulator.seed_namespaces:
                emulator.seed()
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the API emulator did not start within 30 s")
        if self._control_plane_options is not None:
            ca_file = str(self.certificate.path) if self.certificate is not None else None
            self.control_plane = ControlPlane(self.url, self.emulator.written, self._control_plane_options, ca_file)
            self.control_plane.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.control_plane is not None:
            self.control_plane.stop()
        self.emulator.drop_watches()
        self._loop.call_soon_threadsafe(self._stop.set)
        # the server's shutdown waits for its handlers (a client's connection not closed yet): on a loaded machine
        # that can pass 30 s; a loop is never closed while its thread still runs it
        self._thread.join(150)
        if self._thread.is_alive():
            raise RuntimeError("the API emulator did not stop within 150 s")
        self._loop.close()
        if self.certificate is not None:
            self.certificate.close()

    def write_kubeconfig(self, path: Path, namespace: str = "default", token: str = rbac.ADMIN_TOKEN) -> Path:
        """A kubeconfig whose current context is this server (plain HTTP; the admin's token unless given a
        ServiceAccount's), for kubectl and for ``karpenter-policy reconcile --kubeconfig``."""
        ca = self.certificate.pem if self.certificate is not None else None
        return write_kubeconfig(path, self.url, namespace, token, ca)


def write_kubeconfig(
    path: Path, url: str, namespace: str = "default", token: str = rbac.ADMIN_TOKEN, ca: bytes | None = None
) -> Path:
    cluster: dict[str, str] = {"server": url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulated", "cluster": cluster}],
        "users": [{"name": "emulated", "user": {"token": token}}],
        "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "emulated",
                                                      "namespace": namespace}}],
        "current-context": "emulated",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def main(argv: list[str] | None = None) -> int:
    """Serve the emulator until SIGINT or SIGTERM; print its URL, write a kubeconfig if asked."""
    parser = argparse.ArgumentParser(prog="python -m kube.emulator", description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="loopback port to serve on (default: any free one)")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for this server here")
    parser.add_argument("--no-namespaces", action="store_true", help="do not create default, kube-system, …")
    parser.add_argument("--rbac", action="store_true",
                        help="authenticate by token and authorize with RBAC (the kubeconfig's token is the admin's)")
    parser.add_argument("--control-plane", action="store_true",
                        help="run Deployment and ReplicaSet controllers, a scheduler and kubelets beside the server")
    parser.add_argument("--join-after", type=float, default=1.0, help="seconds before a Node's kubelet joins")
    parser.add_argument("--never-join", action="append", default=[], metavar="INSTANCE_TYPE",
                        help="a type whose kubelet never joins (repeatable)")
    args = parser.parse_args(argv)
    control_plane = ControlPlaneOptions(args.join_after, frozenset(args.never_join)) if args.control_plane else None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with EmulatorThread(port=args.port, control_plane=control_plane, seed_namespaces=not args.no_namespaces,
                        authorize=args.rbac) as server:
        if args.kubeconfig:
            server.write_kubeconfig(args.kubeconfig)
        print(f"serving the Kubernetes API emulator on {server.url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
