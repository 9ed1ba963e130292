"""Record core/v1 Events the way client-go's recorder does: a repeat bumps ``count`` instead of piling up.

An event is identified by its source, involved object, type, reason and message. Its name is derived from
that identity (``<object>.<hash>``), so a restarted process, or a second replica, bumps the same Event
rather than creating a twin. Events about cluster-scoped objects (nodes) go to the ``default`` namespace,
as client-go puts them. (client-go's spam filter, which folds 10 similar events into one message, is not
reproduced.)
"""

from __future__ import annotations

import datetime
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import AlreadyExists, NotFound

if TYPE_CHECKING:
    from karpenter_policy.kube.cluster import Cluster, EventSeverity

Obj = objects.Obj

CACHE_SIZE = 4096  # client-go's maxLruCacheEntries
_NAME_LIMIT = 253 - 17  # room for ".<16 hex>"


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class EventRecorder:
    """Creates and bumps Events through any cluster (it uses only create, get and patch)."""

    def __init__(self, cluster: Cluster, clock: Callable[[], datetime.datetime] = _utc_now) -> None:
        self._cluster = cluster
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()  # (namespace, name) → count

    def record(
        self, involved: Obj, reason: str, message: str, type: EventSeverity = "Normal", source: str = ""
    ) -> Obj:
        reference = objects.object_reference(involved)
        namespace = reference.get("namespace") or "default"
        identity = "\x00".join(
            (source, reference["apiVersion"], reference["kind"], namespace, reference["name"],
             reference.get("uid", ""), type, reason, message)
        )
        name = f"{reference['name'][:_NAME_LIMIT]}.{hashlib.sha256(identity.encode()).hexdigest()[:16]}"
        now = objects.format_time(self._clock())
        with self._lock:
            count = self._counts.get((namespace, name))
        if count is not None:
            try:
                return self._bump(namespace, name, count + 1, now)
            except NotFound:
                pass  # the event expired (the API server drops events after an hour): record it afresh
        event: Obj = {
            "apiVersion": objects.EVENT.api_version,
            "kind": objects.EVENT.kind,
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": reference,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": source},
            "reportingComponent": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            created = self._cluster.create(objects.EVENT, event)
        except AlreadyExists:
            existing = self._cluster.get(objects.EVENT, name, namespace)
            return self._bump(namespace, name, int((existing or {}).get("count") or 0) + 1, now)
        self._remember(namespace, name, 1)
        return created

    def _bump(self, namespace: str, name: str, count: int, now: str) -> Obj:
        bumped = self._cluster.patch(objects.EVENT, name, {"count": count, "lastTimestamp": now}, namespace)
        self._remember(namespace, name, count)
        return bumped

    def _remember(self, namespace: str, name: str, count: int) -> None:
        with self._lock:
            self._counts[(namespace, name)] = count
            self._counts.move_to_end((namespace, name))
            while len(self._counts) > CACHE_SIZE:
                self._counts.popitem(last=False)
