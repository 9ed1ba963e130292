"""The NodeClaim (`karpenter.sh/v1`) the controller creates for each instance it launches for a NodePool, as
Karpenter v1.14.1 makes it: `NodeClaimTemplate.ToNodeClaim` (core pkg/controllers/provisioning/scheduling/
nodeclaimtemplate.go) for the spec and labels, `PopulateNodeClaimDetails` (pkg/controllers/nodeclaim/lifecycle/
launch.go) for what the launch resolved.

- **name**: `<nodepool>-<5 characters>` as the API server's `generateName` makes it from Karpenter's
  `<nodepool>-` prefix; ours are derived from the launch's client token (Kubernetes' random-string alphabet), so a
  retried pass names the same claim — an instance adopted after a restart without a claim, from its instance id;
- **annotations**: the static-drift hashes its Node is stamped with (`api.v1.statichash`: `karpenter.sh/nodepool-hash`
  as `NodeClaimTemplate` writes it, `karpenter.k8s.aws/ec2nodeclass-hash` as the aws `Create` does, each with its
  version), re-stamped after a hash-version bump (`hashes`);
- **labels**: written before the launch (`planned_claim`), the template's labels, the custom labels its
  requirements pin to one value and `karpenter.sh/nodepool`; once launched, the Node's too (`karpenter.k8s.aws/
  ec2nodeclass`, the instance's type, zone, capacity type, …), less the hostname;
- **finalizer** `karpenter.sh/termination`; an **ownerReference** to the NodePool when the cluster serves it
  (`ownerReferences` need the NodePool's uid; without it the claim has none, as `writer` logs);
- **spec**: the claim's requirements (the pods' and topology's, as scheduled; the launch's instance types, at most
  60, as `node.kubernetes.io/instance-type`; never a key that only steers the scheduler; `minValues` as the launch
  keeps them, on the instance types too, as `ToNodeClaim` writes them), its
  resource requests, the template's taints and startup taints, `nodeClassRef`, `expireAfter` and
  `terminationGracePeriod` — an object Karpenter v1.14.1's CRD admits (schema and CEL rules);
- **status** once launched: `providerID`, `imageID`, capacity and allocatable; `nodeName` once registered.

The Node names its claim by an ownerReference (`UpdateNodeOwnerReferences` in pkg/utils/nodeclaim): `claim_of_node`
reads it back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.api.constraintset import NODE_CLASS_LABEL, ConstraintSet
from karpenter_policy.api.v1.crds import EC2NODECLASS_GROUP, EC2NODECLASS_KIND
from karpenter_policy.api.v1.statichash import static_hash_annotations
from karpenter_policy.cloud.provider import Instance
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import NODE_CLAIM, NODE_POOL, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import pool_name
from karpenter_policy.model.requirements import Operator, Requirements

#: `k8s.io/apimachinery/pkg/util/rand`'s alphabet, which generateName's suffix is drawn from.
NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH: Final = 5
#: Requirement keys that only steer the scheduler (a NodePool's view refuses v0.31's owner label; Karpenter's
#: `schedulingSimulationKeys`; the placeholder hostname): never in a NodeClaim's requirements, which the CRD's CEL
#: rules would refuse.
SCHEDULING_ONLY: Final = frozenset({wk.HOSTNAME, wk.PROVISIONER_NAME, wk.INITIALIZED, wk.REGISTERED})
#: Karpenter passes at most 60 instance types (`MaxInstanceTypes`).
MAX_INSTANCE_TYPES: Final = 60


def claim_name(nodepool: str, seed: str) -> str:
    """`<nodepool>-<suffix>`, the suffix drawn from `seed` (a launch's client token; an adopted instance's id)."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    suffix = []
    for _ in range(SUFFIX_LENGTH):
        number, index = divmod(number, len(NAME_ALPHABET))
        suffix.append(NAME_ALPHABET[index])
    return f"{nodepool}-{''.join(suffix)}"


def _optional(settings: Mapping[str, Any], key: str) -> dict[str, str]:
    value = settings.get(key)
    return {key: value} if isinstance(value, str) and value else {}


def nodeclaim_object(
    constraint_set: ConstraintSet,
    instance: Instance,
    node: Obj,
    requirements: Requirements,
    requests: dict[str, str],
    instance_types: Sequence[str] = (),
) -> Obj:
    """The NodeClaim of an instance found without one (adopted after a restart: see the module docstring), named
    from its instance id, labelled as its Node; its status is written after it is created. `instance_types`: the
    launch's options, cheapest first (`ToNodeClaim` puts the first 60 in the requirements)."""
    nodepool = pool_name(constraint_set.pool)
    return _claim(constraint_set, claim_name(nodepool, instance.id), node_labels(node), requirements, requests,
                  instance_types)


def planned_claim(
    constraint_set: ConstraintSet,
    seed: str,
    requirements: Requirements,
    requests: dict[str, str],
    instance_types: Sequence[str] = (),
    min_values: Mapping[str, int] | None = None,
) -> Obj:
    """The NodeClaim written before its launch, as v1.14.1's provisioner `Create` writes it from `ToNodeClaim`:
    named from `seed` (the launch's client token: a retried pass names the same claim); labelled with the template's
    labels, the custom labels its requirements pin to one value (`resolveCustomLabelsFromRequirements`) and
    `karpenter.sh/nodepool` — the instance's labels come with the launch (`launched_labels`); its requirements carry
    `min_values` (`minValues`) as the launch keeps them."""
    nodepool = pool_name(constraint_set.pool)
    labels = dict(constraint_set.labels)
    for key in requirements:
        requirement = requirements[key]
        values = requirement.values if requirement.operator() == Operator.IN else ()
        if len(values) == 1 and key not in wk.WELL_KNOWN_LABELS and key not in SCHEDULING_ONLY:
            labels[key] = next(iter(values))
    labels[wk.NODEPOOL] = nodepool
    return _claim(constraint_set, claim_name(nodepool, seed), labels, requirements, requests, instance_types,
                  min_values or {})


def node_labels(node: Obj) -> dict[str, str]:
    """The labels a NodeClaim takes from its Node (the instance's resolved labels; `PopulateNodeClaimDetails`): all
    but the hostname."""
    return {key: value for key, value in objects.labels(node).items() if key != wk.HOSTNAME}


def _claim(
    constraint_set: ConstraintSet,
    name: str,
    labels: Mapping[str, str],
    requirements: Requirements,
    requests: dict[str, str],
    instance_types: Sequence[str],
    min_values: Mapping[str, int] | None = None,
) -> Obj:
    settings = constraint_set.nodepool or {}
    terms = [term for term in requirements.to_node_selector() if term.get("key") not in SCHEDULING_ONLY]
    if instance_types:
        chosen = list(dict.fromkeys(instance_types))[:MAX_INSTANCE_TYPES]
        terms = [t for t in terms if t.get("key") != wk.INSTANCE_TYPE]
        terms.append({"key": wk.INSTANCE_TYPE, "operator": "In", "values": sorted(chosen)})
    for term in terms:
        wanted = (min_values or {}).get(str(term.get("key")))
        if wanted and term.get("operator") == "In":
            term["minValues"] = wanted
    spec: dict[str, Any] = {
        "requirements": sorted(terms, key=lambda term: str(term.get("key"))),
        "resources": {"requests": dict(sorted(requests.items()))},
        "nodeClassRef": {
            "group": EC2NODECLASS_GROUP,
            "kind": EC2NODECLASS_KIND,
            "name": labels.get(NODE_CLASS_LABEL, constraint_set.provider.name if constraint_set.provider else "") or "",
        },
        **_optional(settings, "expireAfter"),
        **_optional(settings, "terminationGracePeriod"),
    }
    if constraint_set.taints:
        spec["taints"] = [t.to_api() for t in constraint_set.taints]
    if constraint_set.startup_taints:
        spec["startupTaints"] = [t.to_api() for t in constraint_set.startup_taints]
    return {
        "apiVersion": NODE_CLAIM.api_version,
        "kind": NODE_CLAIM.kind,
        "metadata": {
            "name": name,
            "labels": dict(sorted(labels.items())),
            "annotations": static_hash_annotations(constraint_set),
            "finalizers": [wk.TERMINATION_FINALIZER],
        },
        "spec": spec,
    }


def launched_status(node: Obj, instance: Instance) -> dict[str, Any]:
    """What the launch resolved (`PopulateNodeClaimDetails`): provider id, image, capacity and allocatable."""
    status = node.get("status") or {}
    resolved: dict[str, Any] = {
        "providerID": instance.provider_id,
        "capacity": dict(status.get("capacity") or {}),
        "allocatable": dict(status.get("allocatable") or {}),
    }
    if instance.image_id:
        resolved["imageID"] = instance.image_id
    return resolved


def owner_reference(owner: Obj, kind: str, api_version: str, block: bool) -> dict[str, Any]:
    """An ownerReference to `owner` (its name and uid)."""
    reference: dict[str, Any] = {
        "apiVersion": api_version, "kind": kind, "name": objects.name(owner), "uid": objects.uid(owner),
    }
    if block:
        reference["blockOwnerDeletion"] = True
    return reference


def nodepool_reference(nodepool: Obj) -> dict[str, Any]:
    """A NodeClaim's ownerReference to its NodePool (`NodeClaimTemplate.ToNodeClaim`: blockOwnerDeletion)."""
    return owner_reference(nodepool, NODE_POOL.kind, NODE_POOL.api_version, block=True)


def node_reference(claim: Obj) -> dict[str, Any]:
    """A Node's ownerReference to its NodeClaim (`UpdateNodeOwnerReferences`: blockOwnerDeletion)."""
    return owner_reference(claim, NODE_CLAIM.kind, NODE_CLAIM.api_version, block=True)


def claim_of_node(node: Obj) -> str | None:
    """The name of the NodeClaim a Node names as its owner (None when it names none)."""
    references = objects.metadata(node).get("ownerReferences")
    if not isinstance(references, list):
        return None
    for reference in references:
        if (
            isinstance(reference, dict)
            and reference.get("kind") == NODE_CLAIM.kind
            and reference.get("apiVersion") == NODE_CLAIM.api_version
            and isinstance(reference.get("name"), str)
            and reference["name"]
        ):
            return str(reference["name"])
    return None


__all__ = [
    "NAME_ALPHABET", "claim_name", "claim_of_node", "launched_status", "node_labels", "node_reference",
    "nodeclaim_object", "nodepool_reference", "planned_claim",
]
