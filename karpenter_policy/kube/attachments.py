"""The VolumeAttachments of each node, kept by a watch and indexed by node name: what node termination asks of every
node past its drain, answered from memory — O(1) per node per pass, where a LIST of every attachment of the cluster
per pass made the API server's work grow with the nodes being terminated times the attachments. Karpenter v1.14.1
indexes its cache the same way (core pkg/utils/node/node.go `GetVolumeAttachments`, a field index on
`spec.nodeName`).

Two ways to follow the cluster, one reading (:class:`AttachmentIndex`):

* :class:`InformedAttachments` — an :class:`~karpenter_policy.kube.informer.Informer` on VolumeAttachments (the
  threaded runner, any API server), started on demand: by the first :meth:`~AttachmentIndex.sync`, i.e. when a
  node first needs its attachments, so a controller that never terminates a NodePool's node never lists or watches
  them;
* :class:`DrainedAttachments` — the watch drained at each :meth:`~AttachmentIndex.sync` (a controller driven step
  by step on a cluster that answers a watch at once, the in-memory one): deterministic, listed once, then only the
  changes (listed again when the history is gone).

Never trusted to say "none" when it does not know (:meth:`AttachmentIndex.on` raises
:class:`~karpenter_policy.kube.errors.ClusterError` instead — the caller's "unknown"): before the first list, while
listing or watching fails (a 403 where the role lacks `list` or `watch`, an API server down; the informer's watch
counts again once it has worked), and while an attachment of another shape is held (`kube.volumes.attachment`:
:class:`~karpenter_policy.kube.errors.Malformed`) — for its node when its `spec.nodeName` is a name, for every node
when not. Each malformed attachment is counted once per version it is seen in (`count_malformed`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, Protocol

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, WatchEvent
from karpenter_policy.kube.errors import ClusterError, Gone, Malformed, Unavailable
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.objects import VOLUME_ATTACHMENT, Kind, Obj
from karpenter_policy.kube.volumes import Attachment, attachment

#: Seconds the first sync of an informer waits for its first list (later syncs never wait); a refused or failing
#: list ends the wait at once (`Informer.wait_answered`): nothing would come by waiting.
FIRST_LIST_WAIT: Final = 2.0

#: `count_malformed(kind, reason)`: count an object that could not be read.
CountMalformed = Callable[[Kind, str], None]


def _no_count(kind: Kind, reason: str) -> None:
    return None


class AttachmentIndex(Protocol):
    """The VolumeAttachments by node (see the module docstring)."""

    def sync(self) -> None:
        """Bring the index up to date now (step-driven), or start following the cluster (the informer: once)."""

    def on(self, node: str) -> list[Attachment]:
        """The attachments on `node`, sorted by name; raises ClusterError when they cannot be known now."""

    def stop(self) -> None:
        """Stop following the cluster for good (nothing to do for a step-driven index)."""


class _Index:
    """The index itself: attachments by node, and those of another shape (by name: their node, or None)."""

    def __init__(self, count_malformed: CountMalformed) -> None:
        self._count = count_malformed
        self._lock = threading.Lock()
        self._by_node: dict[str, dict[str, Attachment]] = {}
        self._node_of: dict[str, str] = {}  # attachment name → its node (read, or malformed with a readable node)
        #: name → (its node if readable, why, the resourceVersion counted)
        self._malformed: dict[str, tuple[str | None, Malformed, str]] = {}

    def apply(self, event: WatchEvent) -> None:
        obj = event.object
        name = objects.name(obj)
        if event.type == "BOOKMARK":
            return
        version = objects.resource_version(obj)
        with self._lock:
            before = self._malformed.get(name)
            self._forget(name)
            if event.type == "DELETED":
                return
            try:
                read = attachment(obj)
            except Malformed as error:
                spec = obj.get("spec")
                node = spec.get("nodeName") if isinstance(spec, dict) else None
                self._malformed[name] = (node if isinstance(node, str) and node else None, error, version)
                problem = "" if before is not None and before[2] == version else error.problem
            else:
                self._by_node.setdefault(read.node, {})[name] = read
                self._node_of[name] = read.node
                problem = ""
        if problem:
            self._count(VOLUME_ATTACHMENT, problem)

    def replace(self, items: list[Obj]) -> None:
        """A fresh list: what it lacks is gone (a malformed attachment listed again is not counted again)."""
        listed = {objects.name(obj) for obj in items}
        with self._lock:
            for name in [*self._node_of, *self._malformed]:
                if name not in listed:
                    self._forget(name)
        for obj in items:
            self.apply(WatchEvent("ADDED", obj))

    def _forget(self, name: str) -> None:
        node = self._node_of.pop(name, None)
        if node is not None:
            held = self._by_node.get(node)
            if held is not None:
                held.pop(name, None)
                if not held:
                    del self._by_node[node]
        self._malformed.pop(name, None)

    def on(self, node: str) -> list[Attachment]:
        with self._lock:
            for name, (where, error, _) in sorted(self._malformed.items()):
                if where is None or where == node:
                    raise Malformed(f"{error} (volumeattachment {name})", error.problem)
            held = self._by_node.get(node, {})
            return [held[name] for name in sorted(held)]


class InformedAttachments:
    """See the module docstring: an informer on every VolumeAttachment, started by the first :meth:`sync`."""

    def __init__(self, cluster: Cluster, count_malformed: CountMalformed = _no_count) -> None:
        self._index = _Index(count_malformed)
        self.informer = Informer(cluster, VOLUME_ATTACHMENT, on_event=self._index.apply)
        self._started = False
        self._stopped = False
        self._lock = threading.Lock()

    def sync(self) -> None:
        """Start the informer the first time, and wait a moment for its first list (or its failure); nothing after,
        nor once stopped (a pass still under way as its controller closes must not start a watch nobody stops)."""
        with self._lock:
            if self._started or self._stopped:
                return
            self._started = True
            self.informer.start()
        self.informer.wait_answered(FIRST_LIST_WAIT)

    def on(self, node: str) -> list[Attachment]:
        """See :meth:`AttachmentIndex.on`: unknown before the first list and while listing or watching fails."""
        health = self.informer.health()
        if not health.synced or not health.ok:
            error = self.informer.last_error
            what = "have not been listed yet" if not health.synced else "are not being watched"
            raise Unavailable(f"volumeattachments {what}: {error or health.last_error or 'no answer yet'}",
                              status=error.status if error is not None else None)
        return self._index.on(node)

    def stop(self) -> None:
        """Stop the informer if it runs (its thread ended when this returns); it never starts after this."""
        with self._lock:
            self._stopped = True
            started = self._started
        if started:
            self.informer.stop()


class DrainedAttachments:
    """See the module docstring: the changes since the last :meth:`sync`, drained from a watch that answers at once
    (the in-memory cluster's), listed the first time and whenever the history is gone."""

    def __init__(self, cluster: Cluster, count_malformed: CountMalformed = _no_count) -> None:
        self._cluster = cluster
        self._index = _Index(count_malformed)
        self._version: str | None = None
        self._error: ClusterError | None = None

    def sync(self) -> None:
        try:
            if self._version is not None:
                try:
                    with self._cluster.watch(VOLUME_ATTACHMENT, self._version, timeout_seconds=0) as stream:
                        for event in stream:
                            self._index.apply(event)
                            self._version = event.resource_version or self._version
                    self._error = None
                    return
                except Gone:
                    pass
            listed = self._cluster.list(VOLUME_ATTACHMENT)
            self._index.replace(listed.items)
            self._version = listed.resource_version
            self._error = None
        except ClusterError as error:
            self._error = error

    def on(self, node: str) -> list[Attachment]:
        if self._error is not None:
            raise self._error
        if self._version is None:
            raise Unavailable("volumeattachments have not been listed yet")
        return self._index.on(node)

    def stop(self) -> None:
        return None


def attachment_index(cluster: Cluster, threaded: bool, count_malformed: CountMalformed = _no_count) -> AttachmentIndex:
    """The index for a controller: drained step by step where the cluster answers a watch at once and the controller
    is not threaded, else an informer."""
    if not threaded and getattr(cluster, "drains_watches", False):
        return DrainedAttachments(cluster, count_malformed)
    return InformedAttachments(cluster, count_malformed)


__all__ = [
    "FIRST_LIST_WAIT", "AttachmentIndex", "CountMalformed", "DrainedAttachments", "InformedAttachments",
    "attachment_index",
]
