"""Termination: a Node of ours being deleted (`kubectl delete node`, emptiness) goes through the
``karpenter.sh/termination`` finalizer, as Karpenter v0.31's termination controller does:

1. **cordon** (``spec.unschedulable``), logged once ("Cordoned node");
2. **drain**: every pod on it that is not finished and not a DaemonSet's is evicted through the Eviction API, so
   PodDisruptionBudgets hold (a 429 leaves the pod for the next pass); a pod annotated
   ``karpenter.sh/do-not-evict: "true"`` is never evicted: the node waits until it finishes;
3. once no such pod is left: **terminate** the instance, then **remove the finalizer** ("Deleted node").

Each pass takes every such Node one step further; every step is idempotent, so a controller that died half-way
resumes where the cluster shows it stopped. Nodes without the finalizer, or not ours, are left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.errors import NotFound as InstanceNotFound
from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound, TooManyRequests
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.termination.nodedeletion import remove_finalizer

TERMINATION = logs.logger("termination")
DO_NOT_EVICT = "karpenter.sh/do-not-evict"


@dataclass(slots=True)
class Terminated:
    """What a pass of termination did, per node name."""

    cordoned: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)  # pod keys
    blocked: dict[str, str] = field(default_factory=dict)  # pod key → why it stays (a PDB, do-not-evict)
    deleted: list[str] = field(default_factory=list)  # nodes whose instance was terminated and finalizer removed
    errors: list[str] = field(default_factory=list)


def _terminating(node: Obj) -> bool:
    return (
        node_info.is_ours(node)
        and objects.is_deleting(node)
        and node_info.TERMINATION_FINALIZER in objects.finalizers(node)
    )


class Terminator:
    """See the module docstring. `fields` makes a log line's structured fields (the controller's clock)."""

    def __init__(self, cluster: Cluster, cloud: CloudProvider, fields: Callable[..., dict[str, object]]) -> None:
        self.cluster = cluster
        self.cloud = cloud
        self.fields = fields
        self._told: set[tuple[str, str]] = set()  # (what, whom) already logged

    def _once(self, what: str, whom: str, message: str, *args: object, **extra: object) -> None:
        if (what, whom) not in self._told:
            self._told.add((what, whom))
            TERMINATION.info(message, *args, extra=self.fields(**extra))

    def reconcile(self, nodes: list[Obj], pods: list[Obj]) -> Terminated:
        done = Terminated()
        on_node: dict[str, list[Obj]] = {}
        for pod in pods:
            if pod_info.node_name(pod) and not pod_info.is_terminal(pod) and not pod_info.is_daemon_pod(pod):
                on_node.setdefault(pod_info.node_name(pod), []).append(pod)
        for node in nodes:
            if not _terminating(node):
                continue
            try:
                self._step(node, on_node.get(objects.name(node), []), done)
            except (ClusterError, CloudError) as error:
                done.errors.append(f"terminating node {objects.name(node)}: {error}")
        return done

    def _step(self, node: Obj, pods: list[Obj], done: Terminated) -> None:
        name = objects.name(node)
        if not (node.get("spec") or {}).get("unschedulable"):
            self.cluster.patch(objects.NODE, name, {"spec": {"unschedulable": True}})
            done.cordoned.append(name)
            self._once("cordon", name, "Cordoned node", node=name)
        remaining = 0
        for pod in pods:
            key = pod_info.pod_key(pod)
            if objects.is_deleting(pod):
                remaining += 1  # evicted, still shutting down
                continue
            if objects.annotations(pod).get(DO_NOT_EVICT) == "true":
                remaining += 1
                done.blocked[key] = f"{DO_NOT_EVICT} is set"
                self._once("do-not-evict", key, "waiting on pod %s: it is annotated %s", key, DO_NOT_EVICT, node=name)
                continue
            try:
                self.cluster.evict(objects.namespace(pod) or "default", objects.name(pod))
            except NotFound:
                continue
            except TooManyRequests as error:
                remaining += 1
                done.blocked[key] = f"eviction refused: {error}"
                self._once("pdb", key, "eviction of pod %s refused (a PodDisruptionBudget): retrying", key, node=name)
                continue
            done.evicted.append(key)
            remaining += 1  # gone from the next snapshot, not this one
        if remaining:
            return
        instance = node_info.instance_id(node)
        if instance:
            with contextlib.suppress(InstanceNotFound):
                self.cloud.delete(instance)
        remove_finalizer(self.cluster, name)
        done.deleted.append(name)
        TERMINATION.info("Deleted node", extra=self.fields(node=name, instance=instance))


__all__ = ["DO_NOT_EVICT", "Terminated", "Terminator"]
