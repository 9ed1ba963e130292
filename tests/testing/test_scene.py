"""The public testing API (karpenter_policy.testing): a scene builds what it is told, as the API would hold it, and
the real controllers run on it in virtual time (a batch window, a TTL, a disruption budget pass without waiting)
and in real time (the threaded runner)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "workloads" / "policies"


@pytest.fixture(scope="module")
def compiled() -> Path:
    return compile_policies(POLICIES)


def test_compile_policies_refuses_a_directory_that_does_not_compile(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x}\n"
                                      "spec:\n  requirements:\n    - {key: karpenter.sh/capacity-type, operator: Eq}\n")
    with pytest.raises(ValueError, match="does not compile"):
        compile_policies(tmp_path)


def test_a_node_is_built_as_the_controller_registers_one(compiled: Path) -> None:
    scene = Scene(compiled)
    name = scene.add_node("default", "m5.xlarge", zone="us-east-1b", capacity_type="spot", age=3600,
                          labels={"team": "web"}, annotations={"karpenter.sh/do-not-consolidate": "true"})
    node = scene.node(name)
    assert node is not None
    labels, annotations = node["metadata"]["labels"], node["metadata"]["annotations"]
    assert labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert labels["karpenter.sh/capacity-type"] == "spot"
    assert labels["karpenter.sh/provisioner-name"] == "default" and labels["team"] == "web"
    assert labels["karpenter.sh/initialized"] == "true"
    assert annotations["karpenter.sh/do-not-consolidate"] == "true"
    assert "karpenter.sh/termination" in node["metadata"]["finalizers"]
    created = objects.parse_time(node["metadata"]["creationTimestamp"])
    assert (scene.clock.wall() - created).total_seconds() == pytest.approx(3600, abs=1)
    (instance,) = scene.instances()
    assert node["spec"]["providerID"] == instance.provider_id and instance.zone == "us-east-1b"


def test_pods_pdbs_daemon_sets_and_deployments(compiled: Path) -> None:
    scene = Scene(compiled)
    node = scene.add_node("default", "m5.2xlarge")
    scene.add_pods("web", 3, cpu="500m", memory="1Gi", node=node, priority=1000,
                   annotations={"controller.kubernetes.io/pod-deletion-cost": "5"})
    scene.add_pdb("web", {"app": "web"}, min_available=2)
    scene.add_daemon_set("node-agent", cpu="50m")
    api = scene.add_deployment("api", 2, cpu="1")
    assert scene.pods_on(node) == ["web-0", "web-1", "web-2"]
    assert all(p["status"]["phase"] == "Running" for p in scene.pods() if p["spec"].get("nodeName"))
    assert sorted(scene.unbound()) == ["default/api-0", "default/api-1"]
    scene.cluster.delete(objects.POD, "api-0", "default")
    api.restore()
    assert sorted(scene.unbound()) == ["default/api-1", "default/api-2"], "an evicted replica is replaced"
    (pdb,) = scene.cluster.list(objects.POD_DISRUPTION_BUDGET).items
    assert pdb["spec"] == {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2}


def test_the_controllers_run_in_virtual_time(compiled: Path) -> None:
    scene = Scene(compiled, node_startup=45)
    scene.add_deployment("inflate", 4, cpu="1")
    controller = scene.controller()
    started = time.monotonic()
    scene.run(controller, 600, until=lambda: not scene.unbound() and all(
        n["metadata"]["labels"].get("karpenter.sh/initialized") == "true" for n in scene.nodes().values()))
    assert scene.unbound() == [] and scene.nodes()
    assert scene.clock.now >= 45, "the node took its virtual start-up time"
    assert time.monotonic() - started < 60, "virtual seconds, not real ones"
    # The deployment scales to zero: the empty node goes after `default`'s ttlSecondsAfterEmpty (30 s).
    scene.deployments[0].scale(0)
    scene.run(controller, 120, until=lambda: not scene.nodes())
    assert scene.nodes() == {} and scene.instances() == []


def test_the_controllers_run_in_real_time(compiled: Path) -> None:
    scene = Scene(compiled, real_time=True)
    with scene.runner(batch_idle=0.2):
        scene.add_pods("inflate", 3, cpu="1")
        assert scene.wait(lambda: not scene.unbound(), 30), "the pods did not bind"
    assert scene.unbound() == [] and len(scene.nodes()) == 1


def test_a_lingering_pod_stays_terminating_until_finished(compiled: Path) -> None:
    scene = Scene(compiled)
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("slow", node=node, lingers=True)
    scene.add_pod("quick", node=node)
    scene.cluster.evict("default", "slow")
    scene.cluster.evict("default", "quick")
    slow = scene.cluster.get(objects.POD, "slow", "default")
    assert slow is not None and objects.is_deleting(slow) and slow["spec"]["nodeName"] == node
    assert scene.cluster.get(objects.POD, "quick", "default") is None, "the in-memory default: gone at once"
    scene.advance(3600)
    assert scene.pods_on(node) == ["slow"], "never finished: terminating for ever"
    scene.finish_pod("slow")
    assert scene.pods_on(node) == []
    scene.add_pod("running", node=node, lingers=True)
    scene.finish_pod("running")  # not deleted yet: a force deletion
    assert scene.pods_on(node) == []


@pytest.mark.slow
def test_a_static_pod_is_a_mirror_owned_by_its_node(compiled: Path) -> None:
    scene = Scene(compiled)
    node = scene.add_node("default", "m5.xlarge")
    mirror = scene.add_static_pod("kube-proxy", node)
    (reference,) = mirror["metadata"]["ownerReferences"]
    assert reference == {"apiVersion": "v1", "kind": "Node", "name": node, "uid": objects.uid(scene.node(node) or {}),
                         "controller": True}
    assert "kubernetes.io/config.mirror" in mirror["metadata"]["annotations"]
    assert objects.namespace(mirror) == "kube-system" and mirror["spec"]["nodeName"] == node
    job = scene.add_pod("job", owner=("Job", "nightly"))
    assert job["metadata"]["ownerReferences"][0]["apiVersion"] == "batch/v1"
    with pytest.raises(ValueError, match="no node"):
        scene.add_static_pod("orphan", "ip-nowhere")


def test_wait_looks_until_a_condition_holds_in_real_time(compiled: Path) -> None:
    scene = Scene(compiled, real_time=True)
    later = time.monotonic() + 0.2
    assert scene.wait(lambda: time.monotonic() >= later, 5)
    assert not scene.wait(lambda: False, 0.05)
    virtual = Scene(compiled)
    assert virtual.wait(lambda: True) and not virtual.wait(lambda: False, 3600), "virtual time: only now"


def test_instances_of_a_never_join_type_launch_but_their_kubelet_never_joins(compiled: Path) -> None:
    scene = Scene(compiled, types=["m5.large", "m5.xlarge"], never_join=["m5.large"])
    bad = scene.add_node("default", "m5.large", ready=False)
    slow = scene.add_node("default", "m5.xlarge", ready=False)
    assert "conditions" not in scene.nodes()[bad]["status"], "never joined: no status posted"
    assert scene.nodes()[slow]["status"]["conditions"][0]["status"] == "False", "joined, NotReady"
    scene.kubelet.sync()
    scene.advance(45)
    scene.kubelet.sync()
    (ready,) = scene.nodes()[bad]["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusNeverUpdated"), "the node controller's mark"
    assert scene.nodes()[slow]["status"]["conditions"][0]["status"] == "True"
