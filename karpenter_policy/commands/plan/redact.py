"""`plan --redact`: the snapshot is private, so every output names its objects by a stable hash and carries nothing
of it beyond what the plan needs.

The snapshot is rewritten in memory before the plan reads it (it is never written anywhere, redacted or not):

* node, pod, namespace, workload (the owner a pod or DaemonSet names), PodDisruptionBudget, NodeClaim,
  PersistentVolumeClaim, PersistentVolume, StorageClass and pod-volume names become `node-…`, `pod-…`, `ns-…`,
  `wl-…`, `pdb-…`, `claim-…`, `pvc-…`, `pv-…`, `sc-…`, `vol-…`: the first 10 hex digits of the name's SHA-256, so two
  runs (and two snapshots) name the same object alike — and a reader who guesses a name (`default`, `kube-system`)
  can check the guess: the hash hides names, not that two objects share one. References follow their object: a
  pod's `spec.nodeName`, a NodeClaim's `status.nodeName`, the `kubernetes.io/hostname` label and node selector, a
  pod-affinity term's `namespaces`, a ReplicaSet owner (hashed as its Deployment, its `pod-template-hash` kept so
  the workload is still the Deployment), a pod's claim (`claimName`) and a claim's `spec.volumeName` and
  `storageClassName`, a PersistentVolume's node affinity on `kubernetes.io/hostname`; a generic ephemeral volume's
  claim (`<pod>-<volume>`, owned by its pod) as `<pod's hash>-<volume's hash>`, the name the pod's redacted volume
  makes;
* annotations: only Karpenter's and this project's (`karpenter.sh/…`, `karpenter.k8s.aws/…`, `karpenter-policy/…`)
  are kept, the ones drift, expiry and do-not-disrupt read;
* a pod spec keeps what the scheduler reads (`nodeName`, `nodeSelector`, `affinity`, `tolerations`,
  `topologySpreadConstraints`, `overhead`, `resources`, `priority`, `hostNetwork`) and of each container its name,
  resources, ports and restart policy, and of its volumes only those through a claim (their names hashed, an
  ephemeral one's template's `storageClassName`): no image, env, command, args or other volume; of a
  PersistentVolumeClaim its volume, class, deletion and phase (and the `pv.kubernetes.io/bind-completed`
  annotation), of a PersistentVolume its node affinity (the zones kept) and deletion, of a StorageClass its
  `allowedTopologies`, `volumeBindingMode`, creation time and default-class annotation — what a pod's volume topology
  and Karpenter v1.14.1's validation read; a Node's status keeps its conditions
  (type and status), capacity and allocatable — not its images, addresses or node info; a pod's its phase,
  conditions and `startTime` (a do-not-disrupt duration runs from it); a NodeClaim's status keeps all but its
  `imageID` (the plan reads the AMI before redacting, `command._claim_images`);
* a Node's `spec.providerID` and a NodeClaim's or Machine's `status.providerID` become `provider-…`, the same hash
  of the same id on both, so a node and its claim still pair (`pairing`) and no instance id is shown (the plan
  reads the nodes' instance ids before redacting, `command._instance_ids`);
* an EC2NodeClass keeps its name (the repository's, as a NodePool's), its selector terms and what they resolved
  (`status.amis`, `status.subnets`, `status.securityGroups`): nothing else — the reasons name no AMI id, and subnet
  and security-group ids by a stable hash (`subnet-…`, `sg-…`);
* labels and everything else the plan computes with stay (a PodDisruptionBudget selects pods by label).

The snapshot problems (`Problem`) are reported with their names hashed the same way and quoted values withheld.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from karpenter_policy.commands.plan.snapshot import Problem, Snapshot
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.volumes import BIND_COMPLETED, DEFAULT_CLASS_ANNOTATION

__all__ = ["hashed", "redact_snapshot"]

#: The annotation prefixes a redacted snapshot keeps (what Karpenter and this project's controller read).
KEPT_ANNOTATIONS = ("karpenter.sh/", "karpenter.k8s.aws/", "karpenter-policy/")
_POD_SPEC = ("nodeName", "nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "overhead",
             "resources", "priority", "hostNetwork")
_CONTAINER = ("name", "resources", "ports", "restartPolicy")
_HOSTNAME = "kubernetes.io/hostname"
_TEMPLATE_HASH = "pod-template-hash"
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def hashed(kind: str, name: str) -> str:
    """`kind-` and the first 10 hex digits of `name`'s SHA-256 (stable across runs)."""
    return f"{kind}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def _map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


class _Names:
    """The hashes given out, raw name → hashed name, to redact the problems' messages too."""

    def __init__(self) -> None:
        self.given: dict[str, str] = {}

    def __call__(self, kind: str, name: Any) -> Any:
        if not isinstance(name, str) or not name:
            return name  # a malformed name stays as the shape checks will report it (without its value)
        out = hashed(kind, name)
        self.given.setdefault(name, out)
        return out


def _metadata(obj: Obj, names: _Names, kind: str, *, namespaced: bool, kept: tuple[str, ...] = (),
              name: Any = None) -> dict[str, Any]:
    """The kept metadata, `name` (when given) or the name hashed as `kind`; `kept`: annotations kept besides
    Karpenter's and this project's."""
    meta = _map(obj.get("metadata"))
    out: dict[str, Any] = {k: meta[k] for k in ("labels", "creationTimestamp", "deletionTimestamp", "uid") if k in meta}
    out["name"] = name if name is not None else names(kind, meta.get("name"))
    if namespaced and "namespace" in meta:
        out["namespace"] = names("ns", meta.get("namespace"))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        out["annotations"] = {k: v for k, v in annotations.items()
                              if isinstance(k, str) and (k.startswith(KEPT_ANNOTATIONS) or k in kept)}
    elif annotations is not None:
        out["annotations"] = annotations  # malformed: the shape checks refuse it
    labels = out.get("labels")
    if isinstance(labels, Mapping) and isinstance(labels.get(_HOSTNAME), str):
        out["labels"] = {**labels, _HOSTNAME: names("node", labels[_HOSTNAME])}
    owners = meta.get("ownerReferences")
    if isinstance(owners, list):
        template = labels.get(_TEMPLATE_HASH) if isinstance(labels, Mapping) else None
        out["ownerReferences"] = [_owner(o, names, template) for o in owners]
    elif owners is not None:
        out["ownerReferences"] = owners
    return out


def _owner(reference: Any, names: _Names, template: Any) -> Any:
    if not isinstance(reference, Mapping):
        return reference
    out = {k: reference[k] for k in ("apiVersion", "kind", "controller") if k in reference}
    name = reference.get("name")
    if reference.get("kind") == "ReplicaSet" and isinstance(name, str) and isinstance(template, str) and template \
            and name.endswith("-" + template):
        out["name"] = f"{names('wl', name[: -len(template) - 1])}-{template}"
    else:
        out["name"] = names("wl", name)
    return out


def _pod_spec(spec: Any, names: _Names) -> Any:
    if not isinstance(spec, Mapping):
        return spec
    out = {k: spec[k] for k in _POD_SPEC if k in spec}
    if "nodeName" in out:
        out["nodeName"] = names("node", out["nodeName"])
    selector = out.get("nodeSelector")
    if isinstance(selector, Mapping) and isinstance(selector.get(_HOSTNAME), str):
        out["nodeSelector"] = {**selector, _HOSTNAME: names("node", selector[_HOSTNAME])}
    if "affinity" in out:
        out["affinity"] = _affinity(out["affinity"], names)
    for part in ("containers", "initContainers"):
        containers = spec.get(part)
        if isinstance(containers, list):
            out[part] = [{k: c[k] for k in _CONTAINER if k in c} if isinstance(c, Mapping) else c for c in containers]
        elif part in spec:
            out[part] = containers
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        out["volumes"] = [kept for v in volumes if (kept := _volume(v, names)) is not None]
    return out


def _volume(volume: Any, names: _Names) -> dict[str, Any] | None:
    """A pod's volume through a claim, its names hashed (None: another kind of volume, which the plan never reads)."""
    if not isinstance(volume, Mapping):
        return None
    claim, ephemeral = volume.get("persistentVolumeClaim"), volume.get("ephemeral")
    if isinstance(claim, Mapping) and isinstance(claim.get("claimName"), str) and claim["claimName"]:
        return {"name": names("vol", volume.get("name")),
                "persistentVolumeClaim": {"claimName": names("pvc", claim["claimName"])}}
    if isinstance(ephemeral, Mapping):
        template = _map(ephemeral.get("volumeClaimTemplate"))
        spec = _map(template.get("spec"))
        kept = {"storageClassName": _class_name(spec["storageClassName"], names)} if "storageClassName" in spec else {}
        return {"name": names("vol", volume.get("name")), "ephemeral": {"volumeClaimTemplate": {"spec": kept}}}
    return None


def _class_name(value: Any, names: _Names) -> Any:
    """A storageClassName hashed ("" — no class — and a malformed one stay)."""
    return names("sc", value)


def _persistent_volume_claim(obj: Obj, names: _Names) -> Obj:
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    owner = next((o.get("name") for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)
                  and o.get("kind") == "Pod" and isinstance(o.get("name"), str)), None)
    if isinstance(name, str) and isinstance(owner, str) and owner and name.startswith(owner + "-"):
        hashed_name: Any = f"{names('pod', owner)}-{names('vol', name[len(owner) + 1:])}"  # a generic ephemeral claim
    else:
        hashed_name = names("pvc", name)
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        kept = {k: spec[k] for k in ("volumeName", "storageClassName") if k in spec}
        if isinstance(kept.get("volumeName"), str):
            kept["volumeName"] = names("pv", kept["volumeName"])
        if "storageClassName" in kept:
            kept["storageClassName"] = _class_name(kept["storageClassName"], names)
        spec = kept
    status = obj.get("status")
    if isinstance(status, Mapping):
        status = {k: status[k] for k in ("phase",) if k in status}
    out = {**_top(obj), "metadata": _metadata({"metadata": {k: v for k, v in meta.items() if k != "ownerReferences"}},
                                              names, "pvc", namespaced=True, kept=(BIND_COMPLETED,),
                                              name=hashed_name)}
    return {**out, **({"spec": spec} if "spec" in obj else {}), **({"status": status} if "status" in obj else {})}


def _persistent_volume(obj: Obj, names: _Names) -> Obj:
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        spec = {"nodeAffinity": _hostnames(spec["nodeAffinity"], names)} if "nodeAffinity" in spec else {}
    return {**_top(obj), "metadata": _metadata(obj, names, "pv", namespaced=False),
            **({"spec": spec} if "spec" in obj else {})}


def _hostnames(value: Any, names: _Names) -> Any:
    """A node-affinity's `kubernetes.io/hostname` values hashed as the nodes' names are."""
    if isinstance(value, Mapping):
        if value.get("key") == _HOSTNAME and isinstance(value.get("values"), list):
            return {**value, "values": [names("node", v) for v in value["values"]]}
        return {k: _hostnames(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostnames(v, names) for v in value]
    return value


def _storage_class(obj: Obj, names: _Names) -> Obj:
    kept: dict[str, Any] = {k: obj[k] for k in ("allowedTopologies", "volumeBindingMode") if k in obj}
    if "allowedTopologies" in kept:
        kept["allowedTopologies"] = _hostnames(kept["allowedTopologies"], names)
    return {**_top(obj), "metadata": _metadata(obj, names, "sc", namespaced=False,
                                               kept=(DEFAULT_CLASS_ANNOTATION,)), **kept}


#: What the plan reads of a cluster EC2NodeClass (`amidrift`, `networkdrift`, `reservationdrift`): its selector terms,
#: what they resolved.
_CLASS_SPEC = ("amiSelectorTerms", "subnetSelectorTerms", "securityGroupSelectorTerms",
               "capacityReservationSelectorTerms")
_CLASS_STATUS = ("amis", "subnets", "securityGroups", "capacityReservations")


def _node_class(obj: Obj, _names: _Names) -> Obj:
    """A cluster EC2NodeClass: its name (the repository's, as a NodePool's), selector terms and their resolution."""
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    return {**_top(obj), "metadata": {"name": _map(obj.get("metadata")).get("name")},
            "spec": {k: spec[k] for k in _CLASS_SPEC if k in spec},
            "status": {k: status[k] for k in _CLASS_STATUS if k in status}}


def _affinity(value: Any, names: _Names) -> Any:
    """Pod (anti-)affinity terms' `namespaces` hashed as the pods' namespaces are."""
    if isinstance(value, Mapping):
        return {k: ([names("ns", n) for n in v] if k == "namespaces" and isinstance(v, list) else _affinity(v, names))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_affinity(v, names) for v in value]
    return value


def _provider_id(value: Any, names: _Names) -> Any:
    """A providerID hashed alike on a Node and its NodeClaim (`provider-…`), so that they still pair."""
    return names("provider", value)


def _node(obj: Obj, names: _Names) -> Obj:
    spec = {k: v for k, v in _map(obj.get("spec")).items() if k in ("taints", "unschedulable", "providerID")}
    if "providerID" in spec:
        spec["providerID"] = _provider_id(spec["providerID"], names)
    status = _map(obj.get("status"))
    kept: dict[str, Any] = {k: status[k] for k in ("capacity", "allocatable") if k in status}
    if isinstance(status.get("conditions"), list):
        kept["conditions"] = [{k: c[k] for k in ("type", "status") if k in c} if isinstance(c, Mapping) else c
                              for c in status["conditions"]]
    return {**_top(obj), "metadata": _metadata(obj, names, "node", namespaced=False), "spec": spec, "status": kept}


def _pod(obj: Obj, names: _Names) -> Obj:
    status = _map(obj.get("status"))
    kept: dict[str, Any] = {k: status[k] for k in ("phase", "startTime") if k in status}
    if isinstance(status.get("conditions"), list):
        kept["conditions"] = [{k: c[k] for k in ("type", "status") if k in c} if isinstance(c, Mapping) else c
                              for c in status["conditions"]]
    return {**_top(obj), "metadata": _metadata(obj, names, "pod", namespaced=True),
            "spec": _pod_spec(obj.get("spec"), names), "status": kept}


def _pdb(obj: Obj, names: _Names) -> Obj:
    return {**obj, "metadata": _metadata(obj, names, "pdb", namespaced=True)}


def _daemon_set(obj: Obj, names: _Names) -> Obj:
    spec = _map(obj.get("spec"))
    template = spec.get("template")
    if isinstance(template, Mapping):
        template = {**template, "spec": _pod_spec(template.get("spec"), names)}
        meta = template.get("metadata")
        if isinstance(meta, Mapping):
            template["metadata"] = {k: meta[k] for k in ("labels",) if k in meta}
        spec = {**spec, "template": template}
    return {**_top(obj), "metadata": _metadata(obj, names, "wl", namespaced=True), "spec": spec}


def _claim(obj: Obj, names: _Names) -> Obj:
    status = {k: v for k, v in _map(obj.get("status")).items() if k != "imageID"}
    if "nodeName" in status:
        status["nodeName"] = names("node", status["nodeName"])
    if "providerID" in status:
        status["providerID"] = _provider_id(status["providerID"], names)
    return {**_top(obj), "metadata": _metadata(obj, names, "claim", namespaced=False),
            "spec": obj.get("spec"), "status": status}


def _top(obj: Obj) -> dict[str, Any]:
    return {k: obj[k] for k in ("apiVersion", "kind") if k in obj}


#: The hash prefix of an object's name by its kind (other kinds: `obj`).
_PREFIX = {"Node": "node", "Pod": "pod", "PodDisruptionBudget": "pdb", "DaemonSet": "wl", "NodeClaim": "claim",
           "Machine": "claim", "PersistentVolumeClaim": "pvc", "PersistentVolume": "pv", "StorageClass": "sc"}


def _problem(problem: Problem, names: _Names, pattern: re.Pattern[str] | None) -> Problem:
    """The problem's message with its item's names (and every name given out) hashed, quoted values withheld."""
    message = _QUOTED.sub("'…'", problem.message)
    if problem.subject is not None:
        kind, namespace, name = problem.subject
        pairs = [(name, names(_PREFIX.get(kind, "obj"), name)), (namespace, names("ns", namespace))]
        for raw, out in sorted((p for p in pairs if p[0]), key=lambda p: -len(p[0])):
            message = re.sub(rf"(?<![\w.-]){re.escape(raw)}(?![\w.-])", out, message)
    if pattern is not None:
        message = pattern.sub(lambda m: names.given[m.group(0)], message)
    return Problem(problem.file, problem.index, problem.severity, message)


def redact_snapshot(snapshot: Snapshot) -> Snapshot:
    """The snapshot as the module docstring says, a new object (the given one is left as it is)."""
    names = _Names()
    kinds: list[tuple[list[Obj], Callable[[Obj, _Names], Obj]]] = [
        (snapshot.nodes, _node), (snapshot.pods, _pod), (snapshot.pdbs, _pdb), (snapshot.daemon_sets, _daemon_set),
        (snapshot.node_claims, _claim), (snapshot.persistent_volume_claims, _persistent_volume_claim),
        (snapshot.persistent_volumes, _persistent_volume), (snapshot.storage_classes, _storage_class),
        (snapshot.node_classes, _node_class)]
    nodes, pods, pdbs, daemon_sets, claims, pvcs, pvs, classes, node_classes = (
        [rewrite(o, names) for o in objects] for objects, rewrite in kinds)
    raw = sorted(names.given, key=len, reverse=True) if snapshot.problems else []
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(n) for n in raw) + r")(?![\w.-])") if raw else None
    problems = [_problem(p, names, pattern) for p in snapshot.problems]
    return Snapshot(nodes, pods, pdbs, daemon_sets, claims, persistent_volume_claims=pvcs, persistent_volumes=pvs,
                    storage_classes=classes, node_classes=node_classes, volumes_listed=snapshot.volumes_listed,
                    problems=problems,
                    files=list(snapshot.files))
