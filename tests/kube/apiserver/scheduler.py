"""A kube-scheduler stand-in for the test API server's control plane: binds each pending pod to a Ready node it
fits, else marks it ``PodScheduled=False`` with reason ``Unschedulable`` — the mark `karpenter-policy reconcile`
waits for in its production mode (``--provision-unschedulable-only``).

Whether a pod fits a node is decided by the package's own scheduling filters (``karpenter_policy.scheduling``:
:class:`ExistingNode.try_add` — taints and tolerations, host ports, resources against the node's allocatable
minus what its pods request, node selector and required node affinity, topology spread and pod (anti-)affinity
over the pods already bound), with a pod's required terms only, as kube-scheduler filters (preferences score,
they never exclude). Nodes that are not Ready, cordoned or being deleted take no pod. Pods are taken oldest first
and a pass places them one after the other, so two pods never take the same room; the first node in name order
that fits wins (kube-scheduler scores nodes; this one does not). A bound pod gets a ``Scheduled`` Event from
``default-scheduler``; the Unschedulable message is kube-scheduler's shape (``0/3 nodes are available: 1 node(s)
were not ready, 2 exceeds node resources.``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from collections import Counter
from collections.abc import Mapping

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.pods import PodSpecError
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.scheduling import ClusterPod, ExistingNode, Pod, shape_of
from karpenter_policy.scheduling.topology import Topology
from karpenter_policy.scheduling.vectors import ZERO, add

SCHEDULER_NAME = "default-scheduler"


def _pod(obj: Obj) -> Pod | None:
    try:
        shape = shape_of(obj.get("spec") or {}, objects.namespace(obj) or "default", objects.labels(obj))
    except PodSpecError:
        return None
    return Pod(objects.name(obj), shape, uid=str(objects.metadata(obj).get("uid") or ""))


def _schedulable(node: Obj) -> bool:
    return (node_info.is_ready(node) and not (node.get("spec") or {}).get("unschedulable")
            and not objects.is_deleting(node))


def _pending(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    return (not pod_info.node_name(pod) and not objects.is_deleting(pod) and not pod_info.is_terminal(pod)
            and spec.get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME)


class SchedulerStandIn:
    """The scheduler of the module docstring, over one cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def sync(self) -> None:
        nodes = self.cluster.list(objects.NODE).items
        pods = self.cluster.list(objects.POD).items
        pending = sorted((pod for pod in pods if _pending(pod)),
                         key=lambda pod: (objects.creation_timestamp(pod) or "", objects.name(pod)))
        if not pending:
            return
        candidates, topology = self._nodes(nodes, pods)
        for obj in pending:
            pod = _pod(obj)
            if pod is None:
                self._unschedulable(obj, f"0/{len(nodes)} nodes are available: the pod spec cannot be read.")
                continue
            attempt = pod.shape.attempts(False)[-1]
            attempt = dataclasses.replace(attempt, requirements=attempt.strict)  # filters: required terms only
            if attempt.has_topology:
                topology.update(pod, attempt)
            reasons: Counter[str] = Counter({"node(s) were not ready": len(nodes) - len(candidates)})
            for node in candidates:
                refused = node.try_add(pod, attempt, topology)
                if refused is None:
                    self._bind(obj, node.name)
                    break
                reasons[refused] += 1
            else:
                listed = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()) if count)
                self._unschedulable(obj, f"0/{len(nodes)} nodes are available: {listed}.")

    @staticmethod
    def _nodes(nodes: list[Obj], pods: list[Obj]) -> tuple[list[ExistingNode], Topology]:
        """The nodes that take pods, with what their pods request, and the topology of the bound pods."""
        by_name = {objects.name(node): node for node in nodes}
        requested: dict[str, list[Pod]] = {}
        running: list[ClusterPod] = []
        for obj in pods:
            name = pod_info.node_name(obj)
            if not name or pod_info.is_terminal(obj) or (pod := _pod(obj)) is None:
                continue
            requested.setdefault(name, []).append(pod)
            if name in by_name:
                running.append(ClusterPod(pod, name, objects.labels(by_name[name])))
        candidates = []
        domains: dict[str, set[str]] = {}
        for node in sorted(nodes, key=objects.name):
            for key, value in objects.labels(node).items():
                domains.setdefault(key, set()).add(value)
            if not _schedulable(node):
                continue
            allocatable, extended = node_info.resource_vector((node.get("status") or {}).get("allocatable"))
            on_node = requested.get(objects.name(node), [])
            total = ZERO
            for pod in on_node:
                total = add(total, pod.requests)
            used: dict[str, int] = {}
            for pod in on_node:
                for name, count in pod.shape.extended.items():
                    used[name] = used.get(name, 0) + count
            candidates.append(ExistingNode(
                name=objects.name(node), labels=objects.labels(node), taints=node_info.node_taints(node),
                allocatable=allocatable, requested=total, extended_allocatable=extended, extended_requested=used,
                host_ports=[port for pod in on_node for port in pod.shape.host_ports],
            ))
        frozen: Mapping[str, set[str]] = domains
        return candidates, Topology(frozen, running)

    def _bind(self, pod: Obj, node: str) -> None:
        namespace, name = objects.namespace(pod) or "default", objects.name(pod)
        try:
            self.cluster.bind(namespace, name, node)
        except ClusterError:
            return  # bound meanwhile (the controller binds the pods it launched for), or gone
        self._event(pod, "Scheduled", f"Successfully assigned {namespace}/{name} to {node}")

    def _unschedulable(self, pod: Obj, message: str) -> None:
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        previous = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
        if (previous.get("status"), previous.get("reason"), previous.get("message")) == ("False", "Unschedulable",
                                                                                          message):
            return
        mark = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": objects.format_time(datetime.datetime.now(datetime.UTC))}
        patch = {"metadata": {"resourceVersion": objects.resource_version(pod)},
                 "status": {"conditions": [*(c for c in conditions if c.get("type") != "PodScheduled"), mark]}}
        try:
            self.cluster.patch(objects.POD, objects.name(pod), patch, objects.namespace(pod), subresource="status")
        except ClusterError:
            return  # changed meanwhile: the next pass sees it again
        self._event(pod, "FailedScheduling", message, "Warning")

    def _event(self, pod: Obj, reason: str, message: str, severity: str = "Normal") -> None:
        with contextlib.suppress(ClusterError):
            self.cluster.record_event(pod, reason, message, "Warning" if severity == "Warning" else "Normal",
                                      source=SCHEDULER_NAME)
