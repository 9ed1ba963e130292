"""Object builders and waiting helpers for the kube tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import WatchEvent, WatchStream

Obj = dict[str, Any]

GENEROUS = 15.0  # seconds: a bound no loaded CI machine should reach, never a speed claim


def pod(
    name: str,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    node: str | None = None,
    phase: str | None = None,
    ready: bool = False,
    finalizers: Iterable[str] = (),
) -> Obj:
    obj: Obj = {
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }
    if finalizers:
        obj["metadata"]["finalizers"] = list(finalizers)
    if node:
        obj["spec"]["nodeName"] = node
    if phase:
        conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
        obj["status"] = {"phase": phase, "conditions": conditions}
    return obj


def running_pods(count: int, app: str, ready: bool = True, namespace: str = "default") -> list[Obj]:
    return [
        pod(f"{app}-{i}", namespace, {"app": app}, node="node-1", phase="Running", ready=ready) for i in range(count)
    ]


def node(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": {}}


def pdb(name: str, app: str, namespace: str = "default", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def names(items: Iterable[Obj]) -> list[str]:
    return [objects.name(obj) for obj in items]


def take(stream: WatchStream, count: int) -> list[WatchEvent]:
    """The next ``count`` events of a watch (the watch's own timeout bounds the wait)."""
    events = []
    for event in stream:
        events.append(event)
        if len(events) == count:
            break
    return events


def eventually(condition: Callable[[], bool], timeout: float = GENEROUS, what: str = "condition") -> None:
    """Poll a condition that no callback or event can signal (e.g. an informer's retry counter)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.01)
