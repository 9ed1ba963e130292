"""The controller launches for a pod requesting `vpc.amazonaws.com/efa` (issue #26) — the production AWS adapter
against moto's EC2 over HTTP. As Karpenter v1.14.1: the pod goes to a type with EFA (instancetype types.go:472
`efas`), the launch template carries one EFA interface per network card, card 0's at device index 0 and the others'
at 1 (launchtemplate.go:334-353 `generateNetworkInterfaces`, from the type's EFA: amifamily resolver.go:192), and the
node offers the EFA it was launched with; a node launched for a pod without EFA offers none
(cloudprovider.go:440-446)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import moto
import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.simulate.scene import Scene
from karpenter_policy.testing import compile_policies

from .support import nodes_refused
from .v1moto import DEFAULT_NODEPOOL, NODE_CLASS, moto_scene

POLICY = DEFAULT_NODEPOOL + NODE_CLASS


def _described(name: str) -> dict[str, Any]:
    resources = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    types: dict[str, dict[str, Any]] = json.loads(gzip.decompress(resources.read_bytes()))
    return types[name]


def _all_template_data(cloud: Any) -> list[dict[str, Any]]:
    """The latest data of every launch template in moto's EC2 (what the controller wrote)."""
    found = []
    for template in cloud.api.call("ec2", "describe_launch_templates")["LaunchTemplates"]:
        name = template["LaunchTemplateName"]
        versions = cloud.api.call("ec2", "describe_launch_template_versions", LaunchTemplateName=name,
                                  Versions=["$Latest"])  # fmt: skip
        found.append(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])
    return found


def _pod(scene: Scene, name: str, efa: str | None) -> None:
    requests = {"cpu": "1", **({wk.EFA: efa} if efa else {})}
    limits = {wk.EFA: efa} if efa else {}
    scene.add_pod(name, nodeSelector={wk.NODEPOOL: "default"},
                  containers=[{"name": "app", "image": "registry.example/app:1",
                               "resources": {"requests": requests, "limits": limits}}])  # fmt: skip


@pytest.mark.slow
def test_a_pod_requesting_efa_is_launched_with_one_efa_interface_per_card_and_bound(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICY)
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    with moto_scene(compiled) as (scene, cloud):
        _pod(scene, "mpi-worker", "1")
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: not scene.unbound())
        assert not scene.unbound()
        (launched,) = cloud.provider.list(scene.options().cluster_name)
        most = _described(launched.instance_type)["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"]
        assert most >= 1
        shapes = []  # one template per EFA count among the types tried (resolver.go:166-205 groups by it)
        for data in _all_template_data(cloud):
            nics = data["NetworkInterfaces"]
            interfaces = [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in nics]
            assert interfaces == [(card, 0 if card == 0 else 1, "efa") for card in range(len(interfaces))]
            assert all(i["Groups"] for i in nics) and "SecurityGroupIds" not in data
            shapes.append(len(interfaces))
        assert most in shapes and all(count >= 1 for count in shapes)
        (node,) = scene.nodes().values()
        assert node["status"]["allocatable"][wk.EFA] == str(most)
        assert node["metadata"]["labels"][wk.INSTANCE_TYPE] == launched.instance_type


@pytest.mark.slow
def test_a_node_launched_without_efa_offers_none(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICY)
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    with moto_scene(compiled) as (scene, cloud):
        _pod(scene, "web", None)
        controller = scene.controller()
        scene.run(controller, 300, until=lambda: not scene.unbound())
        (launched,) = cloud.provider.list(scene.options().cluster_name)
        (data,) = _all_template_data(cloud)
        assert "efa" not in json.dumps(data.get("NetworkInterfaces", []))
        (node,) = scene.nodes().values()
        assert wk.EFA not in node["status"]["allocatable"]


def test_the_simulated_cluster_places_launches_and_binds_a_pod_requesting_efa(tmp_path: Path) -> None:
    """The same through `simulate`'s scene on the fake cloud (the embedded catalog's types): the EFA pod lands on a
    type with EFA and its node offers that type's EFA; the plain pod's node offers none."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICY)
    scene = Scene(compile_policies(tmp_path / "policies", tmp_path / "build"))
    _pod(scene, "mpi-worker", "2")
    _pod(scene, "web", None)
    scene.run(scene.controller(), 300, until=lambda: not scene.unbound())
    assert not scene.unbound()
    by_pod = {objects.name(pod): pod["spec"]["nodeName"] for pod in scene.cluster.list(objects.POD, "default").items}
    nodes = scene.nodes()
    efa_node, web_node = nodes[by_pod["mpi-worker"]], nodes[by_pod["web"]]
    efa_type = load_catalog().get(efa_node["metadata"]["labels"][wk.INSTANCE_TYPE])
    assert efa_type is not None and efa_type.efa_interfaces >= 2
    assert efa_node["status"]["allocatable"][wk.EFA] == str(efa_type.efa_interfaces)
    if web_node is not efa_node:
        assert wk.EFA not in web_node["status"]["allocatable"]


def _adopted_after_a_restart(tmp_path: Path, efa: str | None) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """A pod (requesting `efa` or not) launched for by a controller that stopped before its Node was written (the
    API server refused it); a new controller lists the instance (DescribeInstances) and registers it. The Node and
    NodeClaim the new one writes, and the instance as launched."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(POLICY)
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    with moto_scene(compiled) as (scene, cloud):
        _pod(scene, "mpi-worker", efa)
        with nodes_refused(scene):
            first = scene.controller()
            launched_claim = lambda: any(c.get("status", {}).get("providerID") for c in scene.nodeclaims().values())  # noqa: E731
            scene.run(first, 60, until=launched_claim)
            (launched,) = cloud.provider.list(scene.options().cluster_name)
            ((name, before),) = scene.nodeclaims().items()
            assert scene.nodes() == {}
        scene.source = DirectorySource(compiled)  # a new process reads the constraint sets afresh
        restarted = scene.controller()
        scene.run(restarted, 120, until=lambda: bool(scene.nodes()) and not scene.unbound())
        (node,) = scene.nodes().values()
        assert claim_of_node(node) == name and node["spec"]["providerID"] == before["status"]["providerID"]
        return node, before, launched


@pytest.mark.slow
def test_an_efa_node_adopted_after_a_restart_still_offers_its_efa(tmp_path: Path) -> None:
    """#26: the controller read a node's EFA only from the launch it made; an instance it lists after a restart
    (DescribeInstances) said none, so its Node offered no `vpc.amazonaws.com/efa` and the EFA pod stayed pending.
    v1.14.1 counts the instance's EFA interfaces (aws instance/types.go:90, `EFACount`) and its node then offers the
    type's EFA (cloudprovider.go:440-446): the Node agrees with the claim the launch filled."""
    node, claim, launched = _adopted_after_a_restart(tmp_path, "1")
    most = _described(launched.instance_type)["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"]
    assert node["status"]["allocatable"][wk.EFA] == str(most) == claim["status"]["allocatable"][wk.EFA]
    assert node["status"]["capacity"][wk.EFA] == str(most)


@pytest.mark.slow
def test_a_node_without_efa_adopted_after_a_restart_offers_none(tmp_path: Path) -> None:
    node, claim, _ = _adopted_after_a_restart(tmp_path, None)
    assert wk.EFA not in node["status"]["allocatable"] and wk.EFA not in claim["status"]["allocatable"]
    assert wk.EFA not in node["status"]["capacity"]
