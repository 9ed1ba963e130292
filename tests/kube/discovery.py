"""What the test API server (tests/kube/emulator.py) tells clients about itself, as a real API server does, so
that kubectl can use it: the URL layout of resources, discovery (/api, /apis and the resource lists of each
group version) and /version (OpenAPI is tests/kube/apiserver/openapi.py).

The resources are the package's kinds (``karpenter_policy.kube.objects.KINDS``) and the server's own
(tests/kube/apiserver/kinds.py) with the names, short names and subresources of Kubernetes 1.28; discovery is the
legacy, unaggregated form (kubectl asks for the aggregated one first and falls back to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Kind

from .apiserver import kinds
from .apiserver.kinds import ALL_KINDS, CRD_KINDS, REVIEWS

SERVER_VERSION = {
    "major": "1", "minor": "28", "gitVersion": "v1.28.0", "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean", "buildDate": "2023-08-15T00:00:00Z", "goVersion": "go1.20.7", "compiler": "gc",
    "platform": "linux/amd64",
}

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
#: Subresources that are not the object itself: their kind, verbs, and group and version when not the parent's.
_SUBRESOURCES: dict[str, tuple[str, list[str], str, str]] = {
    "binding": ("Binding", ["create"], "", ""),
    "eviction": ("Eviction", ["create"], "policy", "v1"),
    "scale": ("Scale", ["get", "patch", "update"], "autoscaling", "v1"),
    "token": ("TokenRequest", ["create"], "authentication.k8s.io", "v1"),
    "log": ("Pod", ["get"], "", ""),
}


@dataclass(frozen=True)
class Resource:
    kind: Kind
    singular: str
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()


RESOURCES = {
    resource.kind.plural: resource
    for resource in (
        Resource(objects.POD, "pod", ("po",), ("status", "binding", "eviction", "log")),
        Resource(objects.NODE, "node", ("no",), ("status",)),
        Resource(objects.NAMESPACE, "namespace", ("ns",), ("status",)),
        Resource(objects.CONFIG_MAP, "configmap", ("cm",)),
        Resource(objects.EVENT, "event", ("ev",)),
        Resource(objects.LEASE, "lease"),
        Resource(objects.POD_DISRUPTION_BUDGET, "poddisruptionbudget", ("pdb",), ("status",)),
        Resource(objects.DAEMON_SET, "daemonset", ("ds",), ("status",)),
        Resource(kinds.DEPLOYMENT, "deployment", ("deploy",), ("status", "scale")),
        Resource(kinds.REPLICA_SET, "replicaset", ("rs",), ("status", "scale")),
        Resource(kinds.SERVICE_ACCOUNT, "serviceaccount", ("sa",), ("token",)),
        Resource(kinds.SECRET, "secret"),
        Resource(kinds.ROLE, "role"),
        Resource(kinds.ROLE_BINDING, "rolebinding"),
        Resource(kinds.CLUSTER_ROLE, "clusterrole"),
        Resource(kinds.CLUSTER_ROLE_BINDING, "clusterrolebinding"),
        Resource(kinds.SELF_SUBJECT_ACCESS_REVIEW, "selfsubjectaccessreview"),
        Resource(objects.VOLUME_ATTACHMENT, "volumeattachment", (), ("status",)),
        Resource(objects.PERSISTENT_VOLUME_CLAIM, "persistentvolumeclaim", ("pvc",), ("status",)),
        Resource(objects.PERSISTENT_VOLUME, "persistentvolume", ("pv",), ("status",)),
        Resource(objects.STORAGE_CLASS, "storageclass", ("sc",)),
        Resource(objects.NODE_CLAIM, "nodeclaim", (), ("status",)),
        Resource(objects.NODE_POOL, "nodepool", (), ("status",)),
        Resource(objects.MACHINE, "machine", (), ("status",)),
        Resource(objects.EC2_NODE_CLASS, "ec2nodeclass", (), ("status",)),
    )
}
KINDS_BY_PATH = {(kind.group, kind.version, kind.plural): kind for kind in (*ALL_KINDS, *CRD_KINDS)}


@dataclass(frozen=True)
class ApiPath:
    """A parsed API URL: a resource (``kind`` set) or a discovery document (``plural`` None); ``legacy`` is the
    core group's /api (the others are under /apis)."""

    legacy: bool
    group: str
    version: str | None
    kind: Kind | None = None
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_path(path: str) -> ApiPath | None:
    """The API path of a URL (/api/v1/namespaces/ns/pods/name/status, /apis/group/version/…), or None.

    ``/api/v1/namespaces/x`` is the namespace x itself, ``/api/v1/namespaces/x/pods`` the pods in it."""
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"]:
        group, version, rest = "", (parts[1] if len(parts) > 1 else None), parts[2:]
    elif parts[:1] == ["apis"]:
        group = parts[1] if len(parts) > 1 else ""
        version, rest = (parts[2] if len(parts) > 2 else None), parts[3:]
    else:
        return None
    if not rest:
        return ApiPath(parts[0] == "api", group, version)
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and (group, version, rest[2]) in KINDS_BY_PATH:
        namespace, rest = rest[1], rest[2:]
    kind = KINDS_BY_PATH.get((group, version or "", rest[0]))
    return ApiPath(parts[0] == "api", group, version, kind, rest[0], namespace, rest[1] if len(rest) > 1 else None,
                   "/".join(rest[2:]) or None)


def discovery(path: ApiPath, host: str, crds: frozenset[Kind] = frozenset()) -> dict[str, Any] | None:
    """The discovery document at ``path`` (one without a resource), or None if there is none; of the custom
    resources (``CRD_KINDS``), only those in ``crds`` are served."""
    if path.legacy:
        if path.version is None:
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}
        return _resource_list("v1", crds) if path.version == "v1" else None
    groups = _groups(crds)
    if not path.group:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}
    if path.group not in groups:
        return None
    if path.version is None:
        return {"kind": "APIGroup", "apiVersion": "v1", **groups[path.group]}
    if path.version in (v["version"] for v in groups[path.group]["versions"]):
        return _resource_list(f"{path.group}/{path.version}", crds)
    return None


def _groups(crds: frozenset[Kind]) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for kind in (*ALL_KINDS, *(kind for kind in CRD_KINDS if kind in crds)):
        if kind.group:
            entry = {"groupVersion": kind.api_version, "version": kind.version}
            group = groups.setdefault(kind.group, {"name": kind.group, "versions": [], "preferredVersion": entry})
            if entry not in group["versions"]:
                group["versions"].append(entry)
    return dict(sorted(groups.items()))


def _resource_list(group_version: str, crds: frozenset[Kind]) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for resource in RESOURCES.values():
        kind = resource.kind
        if kind.api_version != group_version or (kind in CRD_KINDS and kind not in crds):
            continue
        verbs = ["create"] if kind in REVIEWS else VERBS
        resources.append({"name": kind.plural, "singularName": resource.singular, "namespaced": kind.namespaced,
                          "kind": kind.kind, "verbs": verbs, "shortNames": list(resource.short_names)})
        for sub in resource.subresources:
            sub_kind, verbs, group, version = _SUBRESOURCES.get(sub, (kind.kind, ["get", "patch", "update"], "", ""))
            entry = {"name": f"{kind.plural}/{sub}", "singularName": "", "namespaced": kind.namespaced,
                     "kind": sub_kind, "verbs": verbs}
            if group:
                entry.update(group=group, version=version)
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
