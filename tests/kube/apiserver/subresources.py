"""The shapes of the subresources the test API server answers with an object of another kind: the
autoscaling/v1 Scale of a Deployment or ReplicaSet (``/scale``, what ``kubectl scale`` reads and writes) and the
authentication.k8s.io/v1 TokenRequest of a ServiceAccount (``/token``)."""

from __future__ import annotations

import datetime

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj


def scale_of(obj: Obj) -> Obj:
    """The Scale of a Deployment or ReplicaSet: its desired and current replicas and its selector."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    meta = {key: value for key, value in objects.metadata(obj).items()
            if key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")}
    selector = ",".join(f"{key}={value}" for key, value in sorted(match.items()))
    return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta,
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0), "selector": selector}}


def replicas_of(scale: Obj) -> int | None:
    """The replicas a written Scale asks for, or None when they are not a number >= 0."""
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return None
    return replicas


def token_request(namespace: str, name: str, body: Obj, token: str) -> Obj:
    """The answer to a TokenRequest: the token, and when it would expire (``spec.expirationSeconds``, 1 h)."""
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    seconds = int(spec.get("expirationSeconds") or 3600)
    expires = objects.format_time(datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds))
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": spec, "status": {"token": token, "expirationTimestamp": expires}}
