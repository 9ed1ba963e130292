"""Snapshot objects as `kubectl get nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json` prints
them, and the small policy repositories the plan tests compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HASH = {"karpenter.sh/provisioner-hash": "4412951235461528301"}
#: A pod that fills an m5.large (its 1,930m of allocatable cpu hold no second pod of the plan's tests beside it): a
#: plan whose each command must launch a replacement, as no other node has room for its pods.
FULL = "1500m"


def node(name: str, provisioner: str | None = "default", instance_type: str = "m5.large", zone: str = "us-east-1a",
         capacity_type: str = "on-demand", created: str = "2026-11-20T08:00:00Z",
         annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    all_labels = {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": instance_type,
                  "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": capacity_type,
                  "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                  "karpenter.k8s.aws/instance-family": instance_type.split(".")[0]}
    if provisioner is not None:
        all_labels["karpenter.sh/provisioner-name"] = provisioner
    all_labels.update(labels or {})
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": all_labels,
                         "annotations": HASH if annotations is None else annotations,
                         "creationTimestamp": created},
            "spec": {"providerID": provider_id(name, zone)}, "status": {}}


def provider_id(name: str, zone: str = "us-east-1a") -> str:
    """The `spec.providerID` of the test node `name` (and its NodeClaim's `status.providerID`): an instance id
    derived from the name."""
    return f"aws:///{zone}/i-{name}"


def pod(name: str, node_name: str | None, app: str, *, cpu: str = "500m", memory: str = "512Mi",
        owner: tuple[str, str] | None = ("ReplicaSet", ""), namespace: str = "default",
        annotations: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, str]] | None = None, ready: bool = True) -> dict[str, Any]:
    labels = {"app": app}
    references = []
    if owner is not None:
        kind, owner_name = owner
        if kind == "ReplicaSet":
            labels["pod-template-hash"] = "5d9c7b"
            owner_name = f"{app}-5d9c7b"
        references = [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "controller": True, "uid": "u"}]
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "app:1",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": references,
                         "annotations": annotations or {}, "uid": f"uid-{namespace}-{name}"},
            "spec": spec,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(name: str, app: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {**spec, "selector": {"matchLabels": {"app": app}}}}


def daemon_set(name: str, namespace: str = "kube-system", cpu: str = "100m") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"tolerations": [{"operator": "Exists"}],
                                           "containers": [{"name": "d", "image": "d:1",
                                                           "resources": {"requests": {"cpu": cpu}}}]}}}}


EBS_ZONE = "topology.ebs.csi.aws.com/zone"


def with_claim(item: dict[str, Any], claim_name: str, volume: str = "data") -> dict[str, Any]:
    """The pod with a volume through the claim `claim_name`."""
    item["spec"]["volumes"] = [{"name": volume, "persistentVolumeClaim": {"claimName": claim_name}},
                               {"name": "cache", "emptyDir": {}}]
    return item


def pvc(name: str, *, volume: str = "", storage_class: str | None = "gp3", namespace: str = "default",
        deleting: bool = False) -> dict[str, Any]:
    """A claim as the cluster holds it: bound to `volume` (annotated bind-completed) or pending."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "annotations": {"pv.kubernetes.io/bind-completed": "yes"} if volume else {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-30T08:00:00Z"
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec,
            "status": {"phase": "Bound" if volume else "Pending"}}


def pv(name: str, zone: str, key: str = EBS_ZONE) -> dict[str, Any]:
    """An EBS volume in `zone` (the CSI driver's zone key: read as the zone)."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "10Gi"}, "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0abc"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}]}}},
            "status": {"phase": "Bound"}}


def storage_class(name: str, zones: list[str] | None = None, mode: str = "WaitForFirstConsumer") -> dict[str, Any]:
    made: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
                            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": mode}
    if zones is not None:
        made["allowedTopologies"] = [{"matchLabelExpressions": [{"key": EBS_ZONE, "values": zones}]}]
    return made


def listing(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {"resourceVersion": ""}}


def write(path: Path, *items: dict[str, Any]) -> str:
    path.write_text(json.dumps(listing(*items)))
    return str(path)


NODE_TEMPLATE = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector: {karpenter.sh/discovery: prod}
  securityGroupSelector: {karpenter.sh/discovery: prod}
"""


def provisioner(name: str = "default", *, labels: str = "team: web", zones: str = "[us-east-1a, us-east-1b]",
                family: str = "[m5]", extra: str = "") -> str:
    return f"""\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {name}
spec:
  labels: {{{labels}}}
  requirements:
    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
    - {{key: karpenter.k8s.aws/instance-family, operator: In, values: {family}}}
    - {{key: topology.kubernetes.io/zone, operator: In, values: {zones}}}
  providerRef: {{name: default}}
{extra}"""


def policies(directory: Path, *documents: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policies.yaml").write_text("---\n".join([*documents, NODE_TEMPLATE]))
    return str(directory)
