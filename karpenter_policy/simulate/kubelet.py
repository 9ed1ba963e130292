"""The kubelets of a cluster that has none: for the in-memory cluster in tests and simulations.

On a real cluster the kubelet of a launched instance joins the Node the controller registered (it posts its
status, NotReady at first), reports it Ready, the daemons that own the startup taints remove them, and the
kubelet runs the pods bound to the node. :meth:`FakeKubelet.sync` does the same: a Node it sees for the first
time is joined (Ready `False`, `KubeletNotReady`); once the cluster has shown it for `ready_after` seconds (by the
injected clock) it is made Ready and loses the startup taints the controller registered it with; and every pod
bound to a Ready node turns Running and Ready.

The kubelet of an instance of a type in `never_join` never joins (a bad AMI or user data): its Node stays as the
controller registered it, its pods never start, and `node_monitor_grace` seconds after it appeared the node
lifecycle controller's mark is set on it as a real cluster does — Ready `Unknown`, `NodeStatusNeverUpdated`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info


@dataclass(slots=True)
class KubeletSync:
    """What one sync changed: nodes made Ready, pods started (keys)."""

    ready: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)


#: kube-controller-manager's `--node-monitor-grace-period` default: a Node whose kubelet never posted is marked Unknown
#: this long after it was created.
NODE_MONITOR_GRACE = 40.0


class FakeKubelet:
    def __init__(
        self,
        cluster: Cluster,
        clock: Callable[[], float] = time.monotonic,
        ready_after: float = 0.0,
        never_join: Collection[str] = (),
        node_monitor_grace: float = NODE_MONITOR_GRACE,
    ):
        self.cluster = cluster
        self.clock = clock
        self.ready_after = ready_after
        self.never_join = frozenset(never_join)
        self.node_monitor_grace = node_monitor_grace
        self._first_seen: dict[str, float] = {}

    def sync(self) -> KubeletSync:
        done = KubeletSync()
        now = self.clock()
        ready: set[str] = set()
        for node in self.cluster.list(objects.NODE).items:
            name = objects.name(node)
            if node_info.is_ready(node):
                ready.add(name)
                continue
            age = now - self._first_seen.setdefault(name, now)
            if objects.labels(node).get(wk.INSTANCE_TYPE) in self.never_join:
                if age >= self.node_monitor_grace and not node_info.kubelet_joined(node):
                    self._mark_unknown(node)
                continue
            if age < self.ready_after:
                if not node_info.kubelet_joined(node):
                    self._post(node, "False", "KubeletNotReady", "container runtime network not ready")
                continue
            try:
                self._make_ready(node)
            except ClusterError:
                continue  # gone meanwhile, or changed: the next sync tries again
            ready.add(name)
            done.ready.append(name)
        for pod in self.cluster.list(objects.POD).items:
            if pod_info.node_name(pod) not in ready or pod_info.phase(pod) in ("Running", *wk.TERMINAL_PHASES):
                continue
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            try:
                self.cluster.patch(
                    objects.POD, objects.name(pod), {"status": status}, objects.namespace(pod), subresource="status"
                )
            except ClusterError:
                continue
            done.running.append(pod_info.pod_key(pod))
        return done

    def _make_ready(self, node: objects.Obj) -> None:
        name = objects.name(node)
        startup = {(t.key, t.effect) for t in node_info.startup_taints(node)}
        if startup:
            taints = [t.to_api() for t in node_info.node_taints(node) if (t.key, t.effect) not in startup]
            self.cluster.patch(objects.NODE, name, {"spec": {"taints": taints or None}})
        conditions = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        self.cluster.patch(objects.NODE, name, {"status": {"conditions": conditions}}, subresource="status")

    def _mark_unknown(self, node: objects.Obj) -> None:
        """The node lifecycle controller's mark on a Node whose kubelet never posted its status (once)."""
        conditions = (node.get("status") or {}).get("conditions") or []
        if not any(isinstance(c, dict) and c.get("type") == "Ready" for c in conditions):
            self._post(node, "Unknown", node_info.NEVER_UPDATED, "Kubelet never posted node status.")

    def _post(self, node: objects.Obj, status: str, reason: str, message: str) -> None:
        """Set the Node's Ready condition (a Node gone or changed meanwhile: the next sync looks again)."""
        ready = [{"type": "Ready", "status": status, "reason": reason, "message": message}]
        with contextlib.suppress(ClusterError):
            self.cluster.patch(
                objects.NODE, objects.name(node), {"status": {"conditions": ready}}, subresource="status"
            )


__all__ = ["NODE_MONITOR_GRACE", "FakeKubelet", "KubeletSync"]
