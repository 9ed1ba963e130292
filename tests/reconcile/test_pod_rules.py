"""What termination asks of a pod, with Karpenter v0.31's rules (`pkg/utils/pod`, `terminator.go`): a static pod's
mirror, a critical pod, a pod content to stay on a cordoned node, a pod stuck terminating — and a mirror pod is
never provisioned for."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.state.records import pod_record

NOW = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


def pod(spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u-p", **meta}, "spec": dict(spec or {})}


def owner(api_version: str, kind: str, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "u-owner", "controller": controller}


@pytest.mark.parametrize(("reference", "static"), [
    (owner("v1", "Node"), True),
    (owner("v1", "Node", controller=False), True),  # Karpenter's IsOwnedBy looks at every reference
    (owner("apps/v1", "Node"), False),  # not the core group's Node
    (owner("apps/v1", "ReplicaSet"), False),
])
def test_a_mirror_pod_is_owned_by_its_node_and_never_provisioned_for(reference: dict[str, Any], static: bool) -> None:
    obj = pod(ownerReferences=[reference])
    assert pod_info.is_owned_by_node(obj) is static
    assert pod_record(obj).static is static
    assert pod_record(obj).provisionable(unschedulable_only=False) is not static


@pytest.mark.parametrize(("priority_class", "critical"), [
    ("system-node-critical", True), ("system-cluster-critical", True), ("high", False), (None, False),
])
def test_critical_pods_are_those_of_the_two_system_priority_classes(priority_class: str | None, critical: bool) -> None:
    obj = pod({"priorityClassName": priority_class} if priority_class else {})
    assert pod_record(obj).critical is critical


@pytest.mark.parametrize(("tolerations", "tolerates"), [
    ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}], True),
    ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], True),  # every effect
    ([{"operator": "Exists"}], True),  # every taint
    ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}], False),
    ([{"key": "node.kubernetes.io/unschedulable", "value": "true", "effect": "NoSchedule"}], False),  # Equal: ""
    ([{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}], False),
    ("not a list", False),
    (["not a map"], False),
])
def test_a_pod_that_tolerates_a_cordoned_nodes_taint(tolerations: Any, tolerates: bool) -> None:
    assert pod_record(pod({"tolerations": tolerations})).tolerates_unschedulable is tolerates


@pytest.mark.parametrize(("deleted", "stuck"), [
    (None, False),
    ("2026-11-01T11:58:59Z", True),
    ("2026-11-01T11:59:00Z", False),  # exactly a minute: not yet (Go's After)
    ("2026-11-01T11:59:30Z", False),
    ("2026-11-01T11:58:00", True),  # no zone: UTC
    ("yesterday", False),
])
def test_a_pod_deleted_more_than_a_minute_ago_is_stuck_terminating(deleted: str | None, stuck: bool) -> None:
    meta = {"deletionTimestamp": deleted} if deleted is not None else {}
    assert pod_record(pod(**meta)).stuck_terminating(NOW) is stuck
