"""`plan --redact`: the snapshot is private, so every output names its objects by a stable hash and carries nothing
of it beyond what the plan needs.

The snapshot is rewritten in memory before the plan reads it (it is never written anywhere, redacted or not):

* node, pod, namespace, workload (the owner a pod or DaemonSet names), PodDisruptionBudget and NodeClaim names
  become `node-…`, `pod-…`, `ns-…`, `wl-…`, `pdb-…`, `claim-…`: the first 10 hex digits of the name's SHA-256, so two
  runs (and two snapshots) name the same object alike — and a reader who guesses a name (`default`, `kube-system`)
  can check the guess: the hash hides names, not that two objects share one. References follow their object: a
  pod's `spec.nodeName`, a NodeClaim's `status.nodeName`, the `kubernetes.io/hostname` label and node selector, a
  pod-affinity term's `namespaces`, a ReplicaSet owner (hashed as its Deployment, its `pod-template-hash` kept so
  the workload is still the Deployment);
* annotations: only Karpenter's and this project's (`karpenter.sh/…`, `karpenter.k8s.aws/…`, `karpenter-policy/…`)
  are kept, the ones drift, expiry and do-not-disrupt read;
* a pod spec keeps what the scheduler reads (`nodeName`, `nodeSelector`, `affinity`, `tolerations`,
  `topologySpreadConstraints`, `overhead`, `resources`, `priority`, `hostNetwork`) and of each container its name,
  resources, ports and restart policy: no image, env, command, args or volume; a Node's status keeps its conditions
  (type and status), capacity and allocatable — not its images, addresses or node info, nor its `providerID`; a
  pod's its phase, conditions and `startTime` (a do-not-disrupt duration runs from it);
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


def _metadata(obj: Obj, names: _Names, kind: str, *, namespaced: bool) -> dict[str, Any]:
    meta = _map(obj.get("metadata"))
    out: dict[str, Any] = {k: meta[k] for k in ("labels", "creationTimestamp", "deletionTimestamp", "uid") if k in meta}
    out["name"] = names(kind, meta.get("name"))
    if namespaced and "namespace" in meta:
        out["namespace"] = names("ns", meta.get("namespace"))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        out["annotations"] = {k: v for k, v in annotations.items()
                              if isinstance(k, str) and k.startswith(KEPT_ANNOTATIONS)}
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
    return out


def _affinity(value: Any, names: _Names) -> Any:
    """Pod (anti-)affinity terms' `namespaces` hashed as the pods' namespaces are."""
    if isinstance(value, Mapping):
        return {k: ([names("ns", n) for n in v] if k == "namespaces" and isinstance(v, list) else _affinity(v, names))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_affinity(v, names) for v in value]
    return value


def _node(obj: Obj, names: _Names) -> Obj:
    spec = {k: v for k, v in _map(obj.get("spec")).items() if k in ("taints", "unschedulable")}
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
    status = {k: v for k, v in _map(obj.get("status")).items() if k not in ("providerID", "imageID")}
    if "nodeName" in status:
        status["nodeName"] = names("node", status["nodeName"])
    return {**_top(obj), "metadata": _metadata(obj, names, "claim", namespaced=False),
            "spec": obj.get("spec"), "status": status}


def _top(obj: Obj) -> dict[str, Any]:
    return {k: obj[k] for k in ("apiVersion", "kind") if k in obj}


#: The hash prefix of an object's name by its kind (other kinds: `obj`).
_PREFIX = {"Node": "node", "Pod": "pod", "PodDisruptionBudget": "pdb", "DaemonSet": "wl", "NodeClaim": "claim",
           "Machine": "claim"}


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
        (snapshot.node_claims, _claim)]
    nodes, pods, pdbs, daemon_sets, claims = ([rewrite(o, names) for o in objects] for objects, rewrite in kinds)
    raw = sorted(names.given, key=len, reverse=True) if snapshot.problems else []
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(n) for n in raw) + r")(?![\w.-])") if raw else None
    problems = [_problem(p, names, pattern) for p in snapshot.problems]
    return Snapshot(nodes, pods, pdbs, daemon_sets, claims, problems=problems, files=list(snapshot.files))
