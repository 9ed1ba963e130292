"""The Deployment and ReplicaSet controllers of the test API server's control plane, and the garbage collector
of what they own — the parts of kube-controller-manager that `kubectl apply`, `scale` and `rollout status` need.

- **Deployment** (k8s.io/kubernetes pkg/controller/deployment): one ReplicaSet per pod template, named
  ``<deployment>-<pod-template-hash>`` and labelled with the hash, owns the Deployment's replicas; the
  ReplicaSets of older templates are scaled to 0 at once (the ``Recreate`` strategy, whatever the spec says: no
  rolling update with surge). The status counts the pods of its ReplicaSets (replicas, updated, ready,
  available) and carries ``observedGeneration`` and the Available and Progressing conditions that
  ``kubectl rollout status`` and ``kubectl wait --for=condition=Available`` read.
- **ReplicaSet** (pkg/controller/replicaset): creates pods from its template (``generateName``, an owner
  reference) until it owns ``spec.replicas``, deletes the surplus — unscheduled first, then not ready, then the
  newest — and reports its counts.
- **Garbage collection** (pkg/controller/garbagecollector, background propagation): a ReplicaSet or pod whose
  controller owner is gone is deleted.

Each :meth:`Workloads.sync` reads the cluster and writes only what differs, so repeated passes converge.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Kind, Obj

from .kinds import DEPLOYMENT, REPLICA_SET

TEMPLATE_HASH = "pod-template-hash"


def template_hash(template: Any) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def controller_uid(obj: Obj) -> str | None:
    for ref in objects.metadata(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return None


def owner_reference(owner: Obj, kind: Kind) -> Obj:
    return {"apiVersion": kind.api_version, "kind": kind.kind, "name": objects.name(owner),
            "uid": objects.metadata(owner).get("uid"), "controller": True, "blockOwnerDeletion": True}


def pod_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 1


def _alive(obj: Obj) -> bool:
    return not objects.is_deleting(obj) and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class Workloads:
    """The controllers of the module docstring, over one cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def sync(self) -> None:
        # Read the owned before their owners: an owner of anything read exists in the later lists.
        pods = self.cluster.list(objects.POD).items
        sets = self.cluster.list(REPLICA_SET).items
        deployments = self.cluster.list(DEPLOYMENT).items
        self._collect_garbage(pods, sets, deployments)
        for deployment in deployments:
            if not objects.is_deleting(deployment):
                self._deployment(deployment, [rs for rs in sets if controller_uid(rs) == _uid(deployment)])
        for replica_set in sets:
            if not objects.is_deleting(replica_set):
                owned = [pod for pod in pods if controller_uid(pod) == _uid(replica_set) and _alive(pod)]
                self._replica_set(replica_set, owned)

    def _collect_garbage(self, pods: list[Obj], sets: list[Obj], deployments: list[Obj]) -> None:
        owners = {_uid(obj) for obj in (*sets, *deployments)}
        for kind, items in ((objects.POD, pods), (REPLICA_SET, sets)):
            for obj in items:
                uid = controller_uid(obj)
                if uid and uid not in owners and not objects.is_deleting(obj):
                    self._quietly(lambda obj=obj, kind=kind: self.cluster.delete(kind, objects.name(obj),
                                                                                 objects.namespace(obj)))

    def _deployment(self, deployment: Obj, sets: list[Obj]) -> None:
        name, namespace = objects.name(deployment), objects.namespace(deployment)
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        wanted = template_hash(template)
        replicas = _replicas(deployment)
        current = next((rs for rs in sets if objects.labels(rs).get(TEMPLATE_HASH) == wanted), None)
        if current is None:
            labels = {**((template.get("metadata") or {}).get("labels") or {}), TEMPLATE_HASH: wanted}
            selector = {"matchLabels": {**((spec.get("selector") or {}).get("matchLabels") or {}),
                                        TEMPLATE_HASH: wanted}}
            pod_template = {**template, "metadata": {**(template.get("metadata") or {}), "labels": labels}}
            replica_set = {"metadata": {"name": f"{name}-{wanted}", "namespace": namespace, "labels": labels,
                                        "ownerReferences": [owner_reference(deployment, DEPLOYMENT)]},
                           "spec": {"replicas": replicas, "selector": selector, "template": pod_template}}
            self._quietly(lambda: self.cluster.create(REPLICA_SET, replica_set))
        elif _replicas(current) != replicas:
            self._scale(current, replicas)
        for old in sets:
            if old is not current and _replicas(old) != 0:
                self._scale(old, 0)
        self._write_status(DEPLOYMENT, deployment, self._deployment_status(deployment, current, sets))

    def _deployment_status(self, deployment: Obj, current: Obj | None, sets: list[Obj]) -> Obj:
        def total(field: str, items: Iterable[Obj]) -> int:
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in items)

        replicas = total("replicas", sets)
        updated = total("replicas", [current] if current is not None else [])
        available = total("availableReplicas", sets)
        desired = _replicas(deployment)
        complete = current is not None and updated == desired == replicas == available
        previous = {c.get("type"): c for c in (deployment.get("status") or {}).get("conditions") or []
                    if isinstance(c, dict)}
        conditions = [
            _condition(previous, "Available", available >= desired,
                       "MinimumReplicasAvailable" if available >= desired else "MinimumReplicasUnavailable",
                       "Deployment has minimum availability." if available >= desired
                       else "Deployment does not have minimum availability."),
            _condition(previous, "Progressing", True,
                       "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                       f'ReplicaSet "{objects.name(current) if current else ""}" '
                       + ("has successfully progressed." if complete else "is progressing.")),
        ]
        status: Obj = {"observedGeneration": objects.metadata(deployment).get("generation", 1),
                       "replicas": replicas, "updatedReplicas": updated, "readyReplicas": total("readyReplicas", sets),
                       "availableReplicas": available, "conditions": conditions}
        if replicas - available > 0:
            status["unavailableReplicas"] = replicas - available
        return status

    def _replica_set(self, replica_set: Obj, pods: list[Obj]) -> None:
        wanted = _replicas(replica_set)
        template = (replica_set.get("spec") or {}).get("template") or {}
        name, namespace = objects.name(replica_set), objects.namespace(replica_set)
        for _ in range(wanted - len(pods)):
            pod = {"metadata": {"generateName": f"{name}-", "namespace": namespace,
                                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                                "ownerReferences": [owner_reference(replica_set, REPLICA_SET)]},
                   "spec": template.get("spec") or {}}
            self._quietly(lambda pod=pod: self.cluster.create(objects.POD, pod))
        newest_first = sorted(pods, key=lambda pod: objects.creation_timestamp(pod) or "", reverse=True)
        surplus = sorted(newest_first, key=lambda pod: (bool((pod.get("spec") or {}).get("nodeName")), pod_ready(pod)))
        for pod in surplus[:max(0, len(pods) - wanted)]:
            self._quietly(lambda pod=pod: self.cluster.delete(objects.POD, objects.name(pod), namespace))
        ready = sum(1 for pod in pods if pod_ready(pod))
        status = {"observedGeneration": objects.metadata(replica_set).get("generation", 1), "replicas": len(pods),
                  "fullyLabeledReplicas": len(pods), "readyReplicas": ready, "availableReplicas": ready}
        self._write_status(REPLICA_SET, replica_set, status)

    def _scale(self, obj: Obj, replicas: int) -> None:
        self._quietly(lambda: self.cluster.patch(REPLICA_SET, objects.name(obj), {"spec": {"replicas": replicas}},
                                                 objects.namespace(obj)))

    def _write_status(self, kind: Kind, obj: Obj, status: Obj) -> None:
        if (obj.get("status") or {}) == status:
            return
        patch = {"metadata": {"resourceVersion": objects.resource_version(obj)}, "status": status}
        self._quietly(lambda: self.cluster.patch(kind, objects.name(obj), patch, objects.namespace(obj),
                                                 subresource="status"))

    @staticmethod
    def _quietly(write: Any) -> None:
        """A write that may lose a race (gone, changed meanwhile): the next pass reads again and retries."""
        with contextlib.suppress(ClusterError):
            write()


def _uid(obj: Obj) -> str:
    return str(objects.metadata(obj).get("uid") or "")


def _condition(previous: dict[Any, Obj], kind: str, status: bool, reason: str, message: str) -> Obj:
    """A condition, keeping its transition time while its status holds."""
    value = "True" if status else "False"
    before = previous.get(kind) or {}
    since = before.get("lastTransitionTime") if before.get("status") == value else objects.format_time(
        datetime.datetime.now(datetime.UTC))
    return {"type": kind, "status": value, "reason": reason, "message": message,
            "lastUpdateTime": since, "lastTransitionTime": since}
