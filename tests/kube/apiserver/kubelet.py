"""The kubelets of the test API server's control plane: a Node's kubelet joins ``join_after`` seconds after the
Node first shows up (the controller registers Nodes itself, as Karpenter v0.31 does) — or never, for the instance
types in ``never_join`` (the word the in-memory Scene uses too) — and then runs the pods bound to it.

Joining reports the Node Ready (``KubeletReady``, the kubelet's version in ``nodeInfo``) and removes the startup
taints the controller registered it with (on a real node their daemons do); a pod bound to a Ready node turns
Running with Ready, ContainersReady and ready container statuses (``kubectl wait --for=condition=Ready``); a pod
bound to a Node that no longer exists is deleted (kube-controller-manager's pod garbage collector).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info

KUBELET_VERSION = "v1.28.0"


def _now() -> str:
    return objects.format_time(datetime.datetime.now(datetime.UTC))


class Kubelets:
    """The kubelets of every Node (see the module docstring)."""

    def __init__(self, cluster: Cluster, join_after: float = 1.0, never_join: frozenset[str] = frozenset(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.join_after = join_after
        self.never_join = never_join
        self.clock = clock
        self._first_seen: dict[str, float] = {}  # node uid → when it was first seen

    def sync(self) -> float | None:
        """One pass; the seconds until a kubelet is due to join (None: none is waiting)."""
        now = self.clock()
        due: float | None = None
        nodes = self.cluster.list(objects.NODE).items
        ready: set[str] = set()
        for node in nodes:
            if node_info.is_ready(node):
                ready.add(objects.name(node))
                continue
            if objects.labels(node).get(wk.INSTANCE_TYPE) in self.never_join or objects.is_deleting(node):
                continue
            waited = now - self._first_seen.setdefault(str(objects.metadata(node).get("uid")), now)
            if waited < self.join_after:
                due = min(due if due is not None else self.join_after, self.join_after - waited)
                continue
            if self._join(node):
                ready.add(objects.name(node))
        names = {objects.name(node) for node in nodes}
        for pod in self.cluster.list(objects.POD).items:
            bound = pod_info.node_name(pod)
            try:
                if bound and bound not in names and not objects.is_deleting(pod):
                    self.cluster.delete(objects.POD, objects.name(pod), objects.namespace(pod))
                elif bound in ready and pod_info.phase(pod) not in ("Running", *wk.TERMINAL_PHASES) \
                        and not objects.is_deleting(pod):
                    self._start(pod)
            except ClusterError:
                continue  # gone or changed meanwhile: the next pass looks again
        return due

    def _join(self, node: Obj) -> bool:
        name = objects.name(node)
        startup = {(t.key, t.effect) for t in node_info.startup_taints(node)}
        try:
            if startup:
                taints = [t.to_api() for t in node_info.node_taints(node) if (t.key, t.effect) not in startup]
                self.cluster.patch(objects.NODE, name, {"spec": {"taints": taints or None}})
            conditions = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status", "lastHeartbeatTime": _now(),
                           "lastTransitionTime": _now()}]
            status = {"conditions": conditions, "nodeInfo": {"kubeletVersion": KUBELET_VERSION}}
            self.cluster.patch(objects.NODE, name, {"status": status}, subresource="status")
        except ClusterError:
            return False
        return True

    def _start(self, pod: Obj) -> None:
        containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
        started = _now()
        conditions = [{"type": kind, "status": "True", "lastTransitionTime": started}
                      for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
        statuses = [{"name": c.get("name", ""), "image": c.get("image", ""), "ready": True, "started": True,
                     "restartCount": 0, "state": {"running": {"startedAt": started}}} for c in containers]
        status = {"phase": "Running", "conditions": conditions, "containerStatuses": statuses,
                  "startTime": started, "podIP": "10.0.0.1", "hostIP": "10.0.0.1"}
        patch = {"metadata": {"resourceVersion": objects.resource_version(pod)}, "status": status}
        self.cluster.patch(objects.POD, objects.name(pod), patch, objects.namespace(pod), subresource="status")
