"""Snapshot objects of Karpenter v1 NodePools' nodes — a Node labelled `karpenter.sh/nodepool` and its NodeClaim
(karpenter.sh/v1) with the hash annotations Karpenter v1.14.1 writes — and the NodePool and EC2NodeClass documents
the v1 plan tests compare (beside `snapshots`, the v1alpha5 ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.plan.snapshots import node, provider_id

#: What a NodeClaim launched by Karpenter v1.14.1 carries (the hash values are opaque to the plan).
HASHES = {
    "karpenter.sh/nodepool-hash": "6821555240504101312",
    "karpenter.sh/nodepool-hash-version": "v3",
    "karpenter.k8s.aws/ec2nodeclass-hash": "5765838963932374543",
    "karpenter.k8s.aws/ec2nodeclass-hash-version": "v5",
}


def pool_node(name: str, nodepool: str = "default", *, instance_type: str = "m5.large", zone: str = "us-east-1a",
              capacity_type: str = "on-demand", created: str = "2026-11-20T08:00:00Z",
              annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
              ready: bool = True) -> dict[str, Any]:
    """A Node of a NodePool (the annotations are the Node's own: Karpenter v1 reads the NodeClaim's), its
    `spec.providerID` the one `claim` gives its NodeClaim (`provider_id`)."""
    made = node(name, provisioner=None, instance_type=instance_type, zone=zone, capacity_type=capacity_type,
                created=created, annotations=annotations or {},
                labels={"karpenter.sh/nodepool": nodepool, "karpenter.k8s.aws/instance-category":
                        instance_type[0], **(labels or {})})
    if not ready:
        made["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    return made


def claim(node_name: str, nodepool: str = "default", *, name: str | None = None,
          annotations: dict[str, str] | None = None, created: str = "2026-11-20T08:00:00Z",
          expire_after: str | None = "720h", grace: str | None = None, node_class: str = "default",
          labels: dict[str, str] | None = None, instance_type: str = "m5.large", zone: str = "us-east-1a",
          capacity_type: str = "on-demand", drifted: bool | str = False) -> dict[str, Any]:
    """The NodeClaim of `node_name` (its `status.providerID` the node's, `provider_id`, in `zone`), labelled as
    Karpenter labels one (its requirements' single values);
    `drifted`: its Drifted condition true (since that time, when a string)."""
    spec: dict[str, Any] = {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                             "name": node_class},
                            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In",
                                              "values": [nodepool]}]}
    if expire_after is not None:
        spec["expireAfter"] = expire_after
    if grace is not None:
        spec["terminationGracePeriod"] = grace
    conditions = [{"type": "Launched", "status": "True"}, {"type": "Initialized", "status": "True"}]
    if drifted:
        conditions.append({"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                           "lastTransitionTime": drifted if isinstance(drifted, str) else "2026-11-29T00:00:00Z"})
    all_labels = {"karpenter.sh/nodepool": nodepool, "node.kubernetes.io/instance-type": instance_type,
                  "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": capacity_type,
                  "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                  "karpenter.k8s.aws/instance-family": instance_type.split(".")[0],
                  "karpenter.k8s.aws/instance-category": instance_type[0], **(labels or {})}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name or f"{nodepool}-{node_name}", "labels": all_labels,
                         "annotations": HASHES if annotations is None else annotations,
                         "creationTimestamp": created},
            "spec": spec,
            "status": {"nodeName": node_name, "providerID": provider_id(node_name, zone),
                       "conditions": conditions}}


def nodepool(name: str = "default", *, labels: str = "team: web", zones: str = "[us-east-1a, us-east-1b]",
             category: str = "[m]", budgets: str | None = None, extra: str = "", template_extra: str = "",
             node_class: str = "default") -> str:
    """A NodePool document; `budgets` a YAML list for `spec.disruption.budgets` (None: the default 10 %)."""
    disruption = (f"  disruption:\n    consolidateAfter: 0s\n    budgets: {budgets}\n" if budgets is not None
                  else "")
    return f"""\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    metadata:
      labels: {{{labels}}}
    spec:
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: {category}}}
        - {{key: topology.kubernetes.io/zone, operator: In, values: {zones}}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {node_class}}}
{template_extra}{disruption}{extra}"""


def node_class(name: str = "default", *, alias: str = "al2023@latest", extra: str = "") -> str:
    return f"""\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
spec:
  role: KarpenterNodeRole-prod
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: prod}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: prod}}}}]
  amiSelectorTerms: [{{alias: "{alias}"}}]
{extra}"""


def v1_policies(directory: Path, *documents: str, node_classes: tuple[str, ...] = ()) -> str:
    """A policy directory of `documents` and the EC2NodeClasses (the default one when none is given)."""
    directory.mkdir(parents=True, exist_ok=True)
    classes = node_classes or (node_class(),)
    (directory / "nodepools.yaml").write_text("---\n".join([*documents, *classes]))
    return str(directory)
