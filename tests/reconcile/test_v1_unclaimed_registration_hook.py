"""A partition placement group's node on a cluster that serves no NodeClaims (issue #26): the controller registers
the Node itself once the registration hook is ready (`claimstatus._sync_unclaimed`), and a hook whose call failed
says so in the log, as it does for a node with a claim — never a node held back in silence.

Karpenter v1.14.1: core lifecycle/registration.go returns the hook's error (logged by controller-runtime) and requeues
with backoff; aws placementgrouphook.go's errors name the DescribeInstances failure.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import NotFound
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import EPOCH, MotoCloud, Scene, VirtualClock, compile_policies

from .v1moto import DEFAULT_NODEPOOL, NODE_CLASS

POLICIES = DEFAULT_NODEPOOL + NODE_CLASS + "  placementGroupSelector:\n    name: hdfs\n"


class _NoNodeClaims(MemoryCluster):
    """A cluster without Karpenter v1's NodeClaim CRD: creating one is a 404, as the API server answers."""

    def create(self, kind: Kind, obj: Obj, *, timeout: float | None = None) -> Obj:
        if kind == objects.NODE_CLAIM:
            raise NotFound("the server could not find the requested resource", reason="NotFound")
        return super().create(kind, obj, timeout=timeout)


@pytest.mark.slow
def test_a_failed_hook_of_a_node_without_a_claim_is_logged_and_it_registers_once_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICIES)
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    clock = VirtualClock(EPOCH)
    loaded = Scene(compiled).loaded
    with MotoCloud(loaded.sets, load_catalog(), clock, region="us-east-1") as moto:
        scene = Scene(loaded, cloud=moto.provider, clock=clock, cluster=_NoNodeClaims(clock=clock.wall))
        stand_in = moto.server.front.placement_groups
        stand_in.withhold = True
        real_get = moto.provider.get

        def failing_get(instance_id: str) -> Any:
            raise CloudError(
                "ec2", f"Request limit exceeded ({instance_id})", "DescribeInstances", code="RequestLimitExceeded"
            )

        scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: bool(scene.nodes()))
        (node,) = scene.nodes().values()
        assert objects.labels(node)[wk.PLACEMENT_GROUP_PARTITION] == ""
        assert scene.nodeclaims() == {}

        monkeypatch.setattr(moto.provider, "get", failing_get)
        with caplog.at_level(logging.WARNING):
            scene.run(controller, 120)
        failed = [r.getMessage() for r in caplog.records if "registration hook" in r.getMessage()]
        assert failed and "Request limit exceeded" in failed[0] and "PlacementGroupRegistrationHook" in failed[0]
        assert scene.unbound() == ["default/web"]  # held back, not registered on a guess

        monkeypatch.setattr(moto.provider, "get", real_get)
        stand_in.withhold = False
        scene.run(controller, 180, until=lambda: not scene.unbound())
        (node,) = scene.nodes().values()
        assert objects.labels(node)[wk.PLACEMENT_GROUP_PARTITION] != ""
        assert not any(t.get("key") == wk.TAINT_UNREGISTERED for t in node.get("spec", {}).get("taints", []))
