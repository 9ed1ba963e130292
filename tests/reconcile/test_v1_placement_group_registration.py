"""A partition placement group's node registers once EC2 says its partition (issue #26): the controller over the
production AWS adapter and moto's EC2 over HTTP, the simulated account's placement-group stand-in in front of it
(`simulate/placementgroups.py`, `withhold`: DescribeInstances says no partition yet).

Karpenter v1.14.1: cloudprovider.go:476-488 labels the claim of a node no pod pinned to a partition with an empty
`karpenter.k8s.aws/placement-group-partition`; core lifecycle/registration.go asks the registration hooks before
completing registration, and aws placementgrouphook.go answers `Requeue` until DescribeInstances says
`Placement.PartitionNumber`, which becomes the label. Meanwhile the claim's Registered is Unknown,
`RegistrationHookPending`, its message the hook's name (registration.go:171).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import compile_policies

from .v1moto import DEFAULT_NODEPOOL, NODE_CLASS, moto_scene

POLICIES = DEFAULT_NODEPOOL + NODE_CLASS + "  placementGroupSelector:\n    name: hdfs\n"


def _registered(claim: dict[str, Any]) -> dict[str, Any]:
    found = [c for c in claim.get("status", {}).get("conditions", []) if c.get("type") == "Registered"]
    return found[0] if found else {}


@pytest.mark.slow
def test_the_claim_registers_once_ec2_says_its_partition(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICIES)
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    with moto_scene(compiled) as (scene, moto):
        stand_in = moto.server.front.placement_groups
        stand_in.withhold = True
        scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: bool(scene.nodeclaims()))  # the pod waits for the registration
        ((name, claim),) = scene.nodeclaims().items()
        scene.run(controller, 120, until=lambda: _registered(scene.nodeclaims()[name]).get("status") == "Unknown"
                  and _registered(scene.nodeclaims()[name]).get("reason") == "RegistrationHookPending")
        claim = scene.nodeclaims()[name]
        registered = _registered(claim)
        assert (registered.get("status"), registered.get("reason"), registered.get("message")) == (
            "Unknown", "RegistrationHookPending", "PlacementGroupRegistrationHook")
        (node,) = scene.nodes().values()
        assert objects.labels(node)[wk.PLACEMENT_GROUP_PARTITION] == ""
        assert objects.labels(node)[wk.PLACEMENT_GROUP_ID].startswith("pg-")
        scene.run(controller, 300)  # EC2 still silent: the hook keeps it back, its backoff at most a minute
        assert _registered(scene.nodeclaims()[name]).get("status") == "Unknown"

        assert scene.unbound() == ["default/web"]  # karpenter.sh/unregistered keeps it off the node meanwhile

        stand_in.withhold = False
        scene.run(controller, 120, until=lambda: _registered(scene.nodeclaims()[name]).get("status") == "True"
                  and not scene.unbound())
        assert _registered(scene.nodeclaims()[name]).get("status") == "True"
        (node,) = scene.nodes().values()
        assert objects.labels(node)[wk.PLACEMENT_GROUP_PARTITION] == "1"
        assert objects.labels(scene.nodeclaims()[name])[wk.PLACEMENT_GROUP_PARTITION] == "1"
