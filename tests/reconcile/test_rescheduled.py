"""Which pods of a node being deleted a simulation places again (`reconcile/state/rescheduled.py`): v1.14.1's
`IsCurrentlyReschedulable` on a NodePool's node — the cases of pkg/controllers/provisioning/scheduling/suite_test.go
(v1.14.1) :4061, :4087, :4114, :4171, :4215 and pkg/utils/pdb/pdb.go's fully blocking budgets —, v0.31.1's
`GetNodePods` (pkg/utils/node/node.go:30) on a Provisioner's."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state.records import node_record, pod_record
from karpenter_policy.reconcile.state.rescheduled import rescheduled

NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


def _pod(name: str, owner: str | None = "ReplicaSet", phase: str = "Running", deleting: bool = False,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": name},
                            "annotations": annotations or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1" if owner == "Node" else "apps/v1", "kind": owner,
                                    "name": "owner", "uid": "owner-uid", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T11:59:00Z"
    return {"metadata": meta, "spec": {"nodeName": "node", "containers": [{"name": "c"}]},
            "status": {"phase": phase, "startTime": "2026-11-30T11:00:00Z"}}


def _node(nodepool: bool) -> Any:
    labels = {wk.NODEPOOL: "default"} if nodepool else {wk.PROVISIONER_NAME: "default"}
    return node_record({"metadata": {"name": "node", "uid": "node-uid", "labels": labels,
                                     "deletionTimestamp": "2026-11-30T11:59:00Z"},
                        "spec": {}, "status": {}})


#: (pod, placed again on a NodePool's node, on a Provisioner's)
CASES = [
    (_pod("active"), True, True),  # :4061 re-schedule pods from a deleting node when pods are active
    (_pod("finished", phase="Succeeded"), False, False),  # :4087 not when not active
    (_pod("daemon", owner="DaemonSet"), False, False),  # :4114 not a DaemonSet's
    (_pod("mirror", owner="Node"), False, False),  # a static pod's mirror
    (_pod("stopping", deleting=True), False, False),  # :4171 terminating, a ReplicaSet's: its successor is pending
    (_pod("stateful", owner="StatefulSet", deleting=True), True, False),  # :4215 a StatefulSet's, terminating
    (_pod("held", annotations={wk.DO_NOT_DISRUPT: "true"}), False, True),  # IsDisruptable (v1 only)
    (_pod("guarded"), False, True),  # a fully blocking budget covers it (v1 only)
]


@pytest.mark.parametrize(("pod", "on_nodepool", "on_provisioner"), CASES, ids=[c[0]["metadata"]["name"] for c in CASES])
def test_the_pods_placed_again(pod: dict[str, Any], on_nodepool: bool, on_provisioner: bool) -> None:
    budget = {"metadata": {"name": "guard", "namespace": "default"},
              "spec": {"selector": {"matchLabels": {"app": "guarded"}}, "maxUnavailable": 0},
              "status": {"disruptionsAllowed": 0}}
    record = pod_record(pod)
    assert bool(rescheduled(_node(True), [record], [budget], NOW)) is on_nodepool
    assert bool(rescheduled(_node(False), [record], [budget], NOW)) is on_provisioner
