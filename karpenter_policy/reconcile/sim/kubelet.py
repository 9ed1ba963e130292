"""The kubelets of a cluster that has none: for the in-memory cluster in tests and simulations.

On a real cluster the kubelet of a launched instance joins the Node the controller registered, reports it Ready,
the daemons that own the startup taints remove them, and the kubelet runs the pods bound to the node.
:meth:`FakeKubelet.sync` does the same in one step: every Node the cluster shows for at least `ready_after`
seconds (by the injected clock) is made Ready and loses the startup taints the controller registered it with,
and every pod bound to a Ready node turns Running and Ready.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


class FakeKubelet:
    def __init__(self, cluster: Cluster, clock: Callable[[], float] = time.monotonic, ready_after: float = 0.0):
        self.cluster = cluster
        self.clock = clock
        self.ready_after = ready_after
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
            if now - self._first_seen.setdefault(name, now) < self.ready_after:
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


__all__ = ["FakeKubelet", "KubeletSync"]
