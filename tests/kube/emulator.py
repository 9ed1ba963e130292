"""A stateful Kubernetes API server for the adapter's tests: kmock's KubernetesEmulator, extended with the
semantics KubeCluster relies on and kmock 0.8 lacks, served over real HTTP from a background thread.

What kmock gives: the aiohttp server on a loopback port, request parsing (resource, namespace, name,
subresource, action), Status error replies, discovery, and its versioned object store (``objects``).
What it lacks, and this subclass adds (taking over kmock's handling of the resource URLs it serves):

- resourceVersion: one counter for every write; optimistic concurrency on PUT and on patches that carry
  ``metadata.resourceVersion`` (409 Conflict); uid and creationTimestamp; ``generateName``.
- PUT (update) at all; JSON Patch and strategic merge besides merge patches; the /status split.
- watches from a resourceVersion, replayed from a bounded change log, with ``timeoutSeconds``, bookmarks,
  selectors (an object leaving a selector arrives as DELETED) and, for a version older than the log,
  the API server's ``ERROR`` event with a 410 Expired Status (``compact()`` forgets the log on demand).
- label and field selectors on lists and watches; list items without apiVersion/kind, as on the wire.
- finalizers and deletionTimestamp on DELETE, removal when an update or patch drops the last finalizer.
- the Binding subresource (409 if bound) and the policy/v1 Eviction subresource (429 when a
  PodDisruptionBudget forbids it).
- fault injection: ``fail_next(n)`` answers the next n requests with 503; ``watch_outage()`` cuts open
  watches and answers lists and watches with 503 while it lasts (writes still work, so a test can change
  what a watcher misses); ``drop_watches()`` cuts open watches mid-stream.

The pure helpers (selectors, patch application, PodDisruptionBudget arithmetic) are the package's own;
the server state, versions, watch replay and wire format are written here, independently of MemoryCluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock

from karpenter_policy.kube import disruption, objects, shape
from karpenter_policy.kube.errors import ClusterError, Malformed
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.patches import apply_patch, patch_type_of
from karpenter_policy.kube.selectors import label_selector_matches, parse_field_selector, parse_label_selector

KINDS_BY_PATH = {(kind.group, kind.version, kind.plural): kind for kind in objects.KINDS}


@dataclass(frozen=True)
class Change:
    version: int
    kind: Kind
    type: str
    object: Obj
    previous: Obj | None


def _status(code: int, reason: str, message: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


def _failure(code: int, reason: str, message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=code, reason=reason, message=message, details={})


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesEmulator):
    history_window: int = 1000
    _state: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _version: int = attrs.field(default=1, init=False)  # never "0", which a watch reads as "current state"
    _log: list[Change] = attrs.field(factory=list, init=False)
    _forgotten: int = attrs.field(default=0, init=False)
    _wakeup: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _epoch: int = attrs.field(default=0, init=False)  # bumped to cut open watches
    _failures: int = attrs.field(default=0, init=False)
    _down: bool = attrs.field(default=False, init=False)
    watch_requests: int = attrs.field(default=0, init=False)
    list_requests: int = attrs.field(default=0, init=False)

    # -- controls for tests (any thread) ----------------------------------------------------------------

    def compact(self) -> None:
        """Forget the change log: a watch from any earlier version now gets 410 Gone."""
        with self._state:
            self._log.clear()
            self._forgotten = self._version
        self._wake_threadsafe()

    def drop_watches(self) -> None:
        """Cut every open watch connection, as a restarting API server or a proxy would."""
        with self._state:
            self._epoch += 1
        self._wake_threadsafe()

    def fail_next(self, count: int) -> None:
        with self._state:
            self._failures = count

    @contextlib.contextmanager
    def watch_outage(self) -> Iterator[None]:
        with self._state:
            self._down = True
            self._epoch += 1
        self._wake_threadsafe()
        try:
            yield
        finally:
            with self._state:
                self._down = False

    # -- request dispatch (the server's loop) ------------------------------------------------------------

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        resource = request.resource
        if resource is None or not resource.plural:
            return await super()._handle(request)
        kind = KINDS_BY_PATH.get((resource.group, resource.version, resource.plural))
        if kind is None:
            raise kmock.KubernetesResourceNotFoundError()
        method = str(request.method.value)
        with self._state:
            if self._failures or (self._down and method == "GET" and request.name is None):
                self._failures = max(0, self._failures - 1)
                raise _failure(503, "ServiceUnavailable", "the emulated API server is unavailable")
        if method == "GET" and request.params.get("watch") in ("true", "1"):
            return await self._watch(request, kind)
        try:
            with self._state:
                status, body = self._dispatch(kind, method, request)
        except ClusterError as error:  # the package's helpers (selectors, patches) raise these
            status = error.status or 400
            reason = {400: "BadRequest", 422: "Invalid"}.get(status, type(error).__name__)
            raise _failure(status, reason, error.message) from error
        self._wake()
        return aiohttp.web.json_response(body, status=status)

    def _dispatch(self, kind: Kind, method: str, request: kmock.Request) -> tuple[int, Any]:
        name, sub, namespace = request.name, request.subresource, request.namespace
        if method == "GET" and name is None:
            return 200, self._list(kind, namespace, request.params)
        if method == "GET":
            return 200, copy.deepcopy(self._current(kind, namespace, name))
        if method == "POST" and name is None:
            return 201, self._create(kind, namespace, request.data or {})
        if method == "POST" and name and sub == "binding" and kind == objects.POD:
            return 201, self._bind(namespace, name, request.data or {})
        if method == "POST" and name and sub == "eviction" and kind == objects.POD:
            return 201, self._evict(namespace, name)
        if method == "PUT" and name:
            return 200, self._update(kind, namespace, name, request.data or {}, sub)
        if method == "PATCH" and name:
            return 200, self._patch(kind, namespace, name, request, sub)
        if method == "DELETE" and name:
            return 200, self._delete(kind, namespace, name, request.data or {})
        raise _failure(405, "MethodNotAllowed", f"{method} {request.url.path} is not served")

    # -- the operations (with the state lock held) ------------------------------------------------------

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
        self.list_requests += 1
        matches = self._filter(namespace, params)
        items = []
        for obj in self._stored(kind):
            if matches(obj):
                item = copy.deepcopy(obj)
                item.pop("apiVersion", None)  # list items come without them on the wire
                item.pop("kind", None)
                items.append(item)
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List",
                "metadata": {"resourceVersion": str(self._version)}, "items": items}

    def _filter(self, namespace: str | None, params: Any) -> Callable[[Obj], bool]:
        labels = params.get("labelSelector")
        parse_label_selector(labels)
        fields = parse_field_selector(params.get("fieldSelector"))

        def matches(obj: Obj) -> bool:
            in_namespace = namespace is None or objects.namespace(obj) == namespace
            return in_namespace and label_selector_matches(labels, objects.labels(obj)) and fields(obj)

        return matches

    def _create(self, kind: Kind, namespace: str | None, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
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
        self._version += 1
        meta.pop("deletionTimestamp", None)
        meta.update(uid=str(uuid.uuid4()), resourceVersion=str(self._version), creationTimestamp=_now())
        obj.update(apiVersion=kind.api_version, kind=kind.kind)
        if key in self._objects:
            self._objects[key].create(obj)
        else:
            self._objects[key] = obj
        self._append(Change(self._version, kind, "ADDED", copy.deepcopy(obj), None))
        return copy.deepcopy(obj)

    def _update(self, kind: Kind, namespace: str | None, name: str, body: Obj, sub: str | None) -> Obj:
        current = self._current(kind, namespace, name)
        self._precondition(kind, current, objects.resource_version(body))
        return self._write(kind, current, body, sub)

    def _patch(self, kind: Kind, namespace: str | None, name: str, request: kmock.Request, sub: str | None) -> Obj:
        current = self._current(kind, namespace, name)
        content_type = next((v for k, v in request.headers.items() if k.lower() == "content-type"), "")
        patched = apply_patch(current, request.data, patch_type_of(content_type))
        self._precondition(kind, current, objects.resource_version(patched))
        return self._write(kind, current, patched, sub)

    @staticmethod
    def _precondition(kind: Kind, current: Obj, expected: str) -> None:
        if expected and expected != objects.resource_version(current):
            message = f'Operation cannot be fulfilled on {kind.plural} "{objects.name(current)}": it has been modified'
            raise _failure(409, "Conflict", message)

    def _write(self, kind: Kind, current: Obj, proposed: Obj, sub: str | None) -> Obj:
        if sub not in (None, "status") or (sub == "status" and not kind.status_subresource):
            raise _failure(404, "NotFound", f"{kind.plural}/{sub} is not served")
        new = copy.deepcopy(objects.written_part(kind, sub, current, proposed))
        meta = new.setdefault("metadata", {})
        for kept in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if kept in current["metadata"]:
                meta[kept] = current["metadata"][kept]
            else:
                meta.pop(kept, None)
        new.update(apiVersion=kind.api_version, kind=kind.kind)
        _check_writable(kind, new)
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

    def _delete(self, kind: Kind, namespace: str | None, name: str, options: Obj) -> Obj:
        current = self._current(kind, namespace, name)
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

    def _bind(self, namespace: str | None, name: str, binding: Obj) -> Obj:
        pod = self._current(objects.POD, namespace, name)
        if (pod.get("spec") or {}).get("nodeName"):
            raise _failure(409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
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

    def _evict(self, namespace: str | None, name: str) -> Obj:
        pod = self._current(objects.POD, namespace, name)
        in_namespace = [obj for obj in self._stored(objects.POD) if objects.namespace(obj) == namespace]
        budgets = [pdb for pdb in self._stored(objects.POD_DISRUPTION_BUDGET) if objects.namespace(pdb) == namespace]
        verdict = disruption.eviction_verdict(pod, budgets, in_namespace)
        if not verdict.allowed:
            reason = "TooManyRequests" if verdict.status == 429 else "InternalError"
            raise _failure(verdict.status, reason, verdict.message)
        self._delete(objects.POD, namespace, name, {})
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}

    def _append(self, change: Change) -> None:
        self._log.append(change)
        if len(self._log) > self.history_window:
            self._forgotten = self._log[0].version
            del self._log[0]

    # -- watches -----------------------------------------------------------------------------------------

    def _wake(self) -> None:
        wakeup, self._wakeup = self._wakeup, asyncio.Event()
        wakeup.set()

    def _wake_threadsafe(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake)

    async def _watch(self, request: kmock.Request, kind: Kind) -> aiohttp.web.StreamResponse:
        params = request.params
        try:
            matches = self._filter(request.namespace, params)
        except ClusterError as error:
            raise _failure(400, "BadRequest", error.message) from error
        timeout = float(params.get("timeoutSeconds") or 1800)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        resource_version = params.get("resourceVersion") or ""
        with self._state:
            self.watch_requests += 1
            epoch = self._epoch
            if resource_version in ("", "0"):
                current = [obj for obj in self._stored(kind) if matches(obj)]
                pending = [{"type": "ADDED", "object": copy.deepcopy(obj)} for obj in current]
                position = self._version
            else:
                pending, position = [], int(resource_version)
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        assert request._raw_request is not None
        await response.prepare(request._raw_request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                wakeup = self._wakeup
                with self._state:
                    if self._epoch != epoch:  # cut the connection mid-stream, no clean end
                        assert request._raw_request.transport is not None
                        request._raw_request.transport.close()
                        return response
                    if position < self._forgotten:
                        gone = _status(410, "Expired", f"too old resource version: {position} ({self._forgotten})")
                        pending.append({"type": "ERROR", "object": gone})
                        changes: list[Change] = []
                    else:
                        changes = [change for change in self._log if change.version > position]
                        position = self._version
                for change in changes:
                    event = self._translate(change, kind, matches)
                    if event is not None:
                        pending.append(event)
                for event in pending:
                    await response.write(json.dumps(event).encode() + b"\n")
                if any(event["type"] == "ERROR" for event in pending):
                    break
                pending = []
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if bookmarks:
                        bookmark = {"apiVersion": kind.api_version, "kind": kind.kind,
                                    "metadata": {"resourceVersion": str(position)}}
                        await response.write(json.dumps({"type": "BOOKMARK", "object": bookmark}).encode() + b"\n")
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), remaining)
            await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            pass  # the client went away
        return response

    @staticmethod
    def _translate(change: Change, kind: Kind, matches: Callable[[Obj], bool]) -> Obj | None:
        if change.kind != kind:
            return None
        now = matches(change.object)
        before = change.previous is not None and matches(change.previous)
        if change.type == "MODIFIED" and before != now:
            return {"type": "ADDED" if now else "DELETED", "object": copy.deepcopy(change.object)}
        return {"type": change.type, "object": copy.deepcopy(change.object)} if now else None


def _check_writable(kind: Kind, obj: Obj) -> None:
    """422 for metadata the API server's validation refuses (labels that are not strings, …)."""
    try:
        shape.check_object(obj, kind.plural)
    except Malformed as error:
        raise _failure(422, "Invalid", error.message) from None


def _now() -> str:
    return objects.format_time(datetime.datetime.now(datetime.UTC))


class EmulatorThread:
    """Serve an :class:`ApiEmulator` on a loopback port from its own thread and event loop."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),), daemon=True)
        self.emulator: ApiEmulator
        self.url = ""

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with ApiEmulator(**self._options) as emulator, kmock.Server(emulator) as server:
            emulator._loop = asyncio.get_running_loop()
            emulator._wakeup = asyncio.Event()
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the API emulator did not start within 30 s")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.emulator.drop_watches()
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._loop.close()
