"""The Table form of a GET (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), which ``kubectl get``
asks for and prints as is: the test API server's columns for the kinds kubectl users look at (pods, nodes,
namespaces, events, deployments, replicasets; every other kind gets Name and Age), close to a real server's;
a custom resource whose CRD the package ships (``karpenter_policy/schemas/crds``: NodeClaims, NodePools) gets the
CRD's ``additionalPrinterColumns``, as the API server serves them — their JSONPath read by :func:`_json_path`, which
knows the forms those CRDs use (fields with escaped dots, ``[?(@.type=="Ready")]`` filters).

Each row carries the object's metadata (``PartialObjectMetadata``), or the whole object with
``includeObject=Object``, so kubectl can add its NAMESPACE column and print labels.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Kind, Obj

Column = tuple[str, int, Callable[[Obj, datetime.datetime], Any]]  # name, priority (1: -o wide only), cell


def wants_table(accept: str) -> bool:
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def table(kind: Kind, body: Obj, include_object: str, now: datetime.datetime) -> Obj:
    """The Table of a list answer (``items``) or of a single object."""
    items = body.get("items", [body])
    columns = _COLUMNS.get(kind.kind) or _crd_columns(kind) or _DEFAULT
    rows = []
    for item in items:
        obj = objects.with_kind(kind, dict(item))
        if include_object == "Object":
            shown: Obj = obj
        elif include_object == "None":
            shown = {}
        else:
            shown = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata")}
        rows.append({"cells": [cell(obj, now) for _, _, cell in columns],
                     "object": shown})
    definitions = [{"name": name, "type": "date" if name == "Age" else "string",
                    "format": "name" if name == "Name" else "", "description": "", "priority": priority}
                   for name, priority, _ in columns]
    metadata = {"resourceVersion": objects.resource_version(body) or str(body.get("metadata", {}).get(
        "resourceVersion", ""))}
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": definitions,
            "rows": rows}


def _since(stamp: Any, now: datetime.datetime) -> str:
    """How long ago a timestamp was, as kubectl prints it (``5s``, ``3m``, ``2h``, ``4d``)."""
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    seconds = max(0, int((now - objects.parse_time(stamp)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _status(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _condition(obj: Obj, kind: str) -> str | None:
    for condition in _status(obj).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def _pod_ready(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = sum(1 for status in _status(pod).get("containerStatuses") or [] if status.get("ready"))
    if not _status(pod).get("containerStatuses") and _condition(pod, "Ready") == "True":
        ready = len(containers)
    return f"{ready}/{len(containers)}"


def _node_status(node: Obj) -> str:
    status = {"True": "Ready", "False": "NotReady"}.get(_condition(node, "Ready") or "", "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _node_roles(node: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(key[len(prefix):] for key in objects.labels(node) if key.startswith(prefix))
    return ",".join(roles) or "<none>"


def _involved(event: Obj) -> str:
    involved = event.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _cell(read: Callable[[Obj], Any]) -> Callable[[Obj, datetime.datetime], Any]:
    return lambda obj, _now: read(obj)


_NAME = ("Name", 0, _cell(objects.name))
_AGE = ("Age", 0, lambda obj, now: _since(objects.creation_timestamp(obj), now))
_DEFAULT: list[Column] = [_NAME, _AGE]
_COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        _NAME,
        ("Ready", 0, _cell(_pod_ready)),
        ("Status", 0, _cell(lambda pod: "Terminating" if objects.is_deleting(pod)
                            else _status(pod).get("phase", "Pending"))),
        ("Restarts", 0, _cell(lambda pod: sum(int(s.get("restartCount") or 0)
                                              for s in _status(pod).get("containerStatuses") or []))),
        _AGE,
        ("IP", 1, _cell(lambda pod: _status(pod).get("podIP") or "<none>")),
        ("Node", 1, _cell(lambda pod: (pod.get("spec") or {}).get("nodeName") or "<none>")),
    ],
    "Node": [
        _NAME,
        ("Status", 0, _cell(_node_status)),
        ("Roles", 0, _cell(_node_roles)),
        _AGE,
        ("Version", 0, _cell(lambda node: (_status(node).get("nodeInfo") or {}).get("kubeletVersion", ""))),
    ],
    "Namespace": [
        _NAME,
        ("Status", 0, _cell(lambda ns: _status(ns).get("phase")
                            or ("Terminating" if objects.is_deleting(ns) else "Active"))),
        _AGE,
    ],
    "Deployment": [
        _NAME,
        ("Ready", 0, _cell(lambda d: f"{_status(d).get('readyReplicas', 0)}/{(d.get('spec') or {}).get('replicas')}")),
        ("Up-to-date", 0, _cell(lambda d: _status(d).get("updatedReplicas", 0))),
        ("Available", 0, _cell(lambda d: _status(d).get("availableReplicas", 0))),
        _AGE,
    ],
    "ReplicaSet": [
        _NAME,
        ("Desired", 0, _cell(lambda rs: (rs.get("spec") or {}).get("replicas", 1))),
        ("Current", 0, _cell(lambda rs: _status(rs).get("replicas", 0))),
        ("Ready", 0, _cell(lambda rs: _status(rs).get("readyReplicas", 0))),
        _AGE,
    ],
    "Event": [
        ("Last Seen", 0, lambda event, now: _since(event.get("lastTimestamp"), now)),
        ("Type", 0, _cell(lambda event: event.get("type", ""))),
        ("Reason", 0, _cell(lambda event: event.get("reason", ""))),
        ("Object", 0, _cell(_involved)),
        ("Message", 0, _cell(lambda event: event.get("message", ""))),
    ],
}


CRDS = Path(objects.__file__).resolve().parents[1] / "schemas" / "crds"
_FILTER = re.compile(r'\[\?\(@\.(\w+)=="([^"]*)"\)\]')


def _json_path(path: str, obj: Any) -> Any:
    """The value at a CRD printer column's JSONPath (None when absent): `.a.b\\.c` fields, `[?(@.k=="v")]`
    filters."""
    parts = re.findall(r'\.((?:\\\.|[^.\[])+)|(\[\?\(@\.\w+=="[^"]*"\)\])', path)
    value = obj
    for field, selector in parts:
        if field:
            value = value.get(field.replace("\\.", ".")) if isinstance(value, dict) else None
        else:
            key, wanted = _FILTER.fullmatch(selector).groups()  # type: ignore[union-attr]
            matched = [item for item in value if isinstance(item, dict) and str(item.get(key)) == wanted] \
                if isinstance(value, list) else []
            value = matched[0] if matched else None
    return value


@functools.cache
def _crd_columns(kind: Kind) -> list[Column] | None:
    """Name, then the CRD's additionalPrinterColumns (an Age column by creationTimestamp as kubectl shows one)."""
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        spec = crd.get("spec") or {}
        if spec.get("group") != kind.group or (spec.get("names") or {}).get("kind") != kind.kind:
            continue
        version = next((v for v in spec.get("versions") or [] if v.get("name") == kind.version), None)
        if version is None:
            return None
        columns: list[Column] = [_NAME]
        for column in version.get("additionalPrinterColumns") or []:
            json_path, priority = str(column["jsonPath"]), int(column.get("priority", 0))
            if column.get("type") == "date":
                columns.append((column["name"], priority,
                                lambda obj, now, p=json_path: _since(_json_path(p, obj), now)))
            else:
                columns.append((column["name"], priority,
                                lambda obj, _now, p=json_path: None if (v := _json_path(p, obj)) is None else str(v)))
        return columns
    return None
