"""Karpenter v1's `karpenter.sh/unregistered:NoExecute` taint (issue #26): a NodePool's node is written with it (aws
v1.14.1 amifamily/resolver.go:292-296 gives it to the kubelet's `registerWithTaints`), no pod is bound there while
its NodeClaim has not registered — the kubelet not joined, or a registration hook not ready — and registration
removes it and labels the node `karpenter.sh/registered=true` (core v1.14.1
pkg/controllers/nodeclaim/lifecycle/registration.go:93-103). Ported Its of core v1.14.1
pkg/controllers/nodeclaim/lifecycle/registration_test.go, each naming its line; over real HTTP against the test API
server (tests/kube/emulator.py) where the claims' conditions are, with moto's EC2 and the placement-group stand-in for
the registration hook. A Provisioner's node (v1alpha5, Karpenter v0.31.1: no such taint) is bound at launch as
before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kube.conftest import Kubectl

from karpenter_policy.catalog import load_catalog
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import NODE, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.simulate.aws import MotoCloud
from karpenter_policy.simulate.clock import VirtualClock
from karpenter_policy.testing import Scene, compile_policies

from .support import WEB_POD, Closing
from .v1moto import DEFAULT_NODEPOOL, EPOCH, NODE_CLASS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
GO = "core v1.14.1 pkg/controllers/nodeclaim/lifecycle/registration_test.go"
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def _node(kubectl: Kubectl) -> Obj:
    (node,) = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return dict(node)


def _taints(node: Obj) -> list[dict[str, Any]]:
    return list(node.get("spec", {}).get("taints") or [])


def _registered(kubectl: Kubectl) -> dict[str, Any]:
    items = json.loads(kubectl("get", "nodeclaims", "-o", "json").stdout)["items"]
    if not items:
        return {}
    found = [c for c in items[0].get("status", {}).get("conditions", []) if c.get("type") == "Registered"]
    return dict(found[0]) if found else {}


def _pod_node(kubectl: Kubectl) -> str:
    pod = json.loads(kubectl("get", "pod", "web", "-o", "json").stdout)
    return str(pod["spec"].get("nodeName") or "")


def test_the_node_is_written_with_the_taint_and_loses_it_when_its_claim_registers_no_pod_bound_before(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """:197 "should sync the karpenter.sh/registered label to the Node and remove the karpenter.sh/unregistered
    taint when the Node comes online": the Node the controller writes at launch carries the taint, and at every step
    until the claim registers the pod is not bound; then the taint is gone, the node labelled registered, the claim
    Registered True with its nodeName, and the pod bound there."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    kubectl.cluster.create(objects.NODE_POOL, {"metadata": {"name": "default"}, "spec": {}})
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    controller = scene.controller()
    seen_tainted = False
    for _ in range(120):
        scene.step(controller)
        scene.advance(1.0)
        nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        if not nodes:
            continue
        tainted = UNREGISTERED in _taints(nodes[0])
        seen_tainted |= tainted
        if _pod_node(kubectl):
            assert not tainted, "a pod was bound to a node still carrying karpenter.sh/unregistered"
            break
    assert seen_tainted, "the NodePool's node was never written with karpenter.sh/unregistered"
    node = _node(kubectl)
    assert _pod_node(kubectl) == objects.name(node)
    assert UNREGISTERED not in _taints(node)
    assert objects.labels(node)[wk.REGISTERED] == "true"
    assert _registered(kubectl)["status"] == "True"
    (claim,) = json.loads(kubectl("get", "nodeclaims", "-o", "json").stdout)["items"]
    assert claim["status"]["nodeName"] == objects.name(node)
    assert not scene.events("UnregisteredTaintMissing")


def test_a_node_registering_without_the_taint_registers_all_the_same_with_an_event(tmp_path: Path) -> None:
    """:216 "should succeed registration if the karpenter.sh/unregistered taint is not present and emit an event":
    the taint removed from the Node before its kubelet joined — the claim registers, the node is labelled
    registered, and one Warning `UnregisteredTaintMissing` names the claim (registration.go:82-88)."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    scene = Scene(compiled)
    scene.on_call("create", lambda call: scene.cluster.patch(NODE, call.name, {"spec": {"taints": None}}),
                  kind=NODE, once=True)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    assert not scene.unbound()
    ((name, claim),) = scene.nodeclaims().items()
    assert [c["status"] for c in claim["status"]["conditions"] if c["type"] == "Registered"] == ["True"]
    (node,) = scene.nodes().values()
    assert objects.labels(node)[wk.REGISTERED] == "true"
    (event,) = scene.events("UnregisteredTaintMissing")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == name
    assert event["message"] == (
        "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on "
        "Karpenter-managed nodes")


def test_a_scene_node_added_registered_keeps_an_unregistered_key_of_another_effect(tmp_path: Path) -> None:
    """`Scene.add_node` registers a NodePool's node as registration does (registration.go:99 `MatchTaint`: key and
    effect): the `karpenter.sh/unregistered:NoExecute` taint goes, a taint of that key with another effect (the
    user's own) stays, and the node is labelled registered."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    scene = Scene(compiled)
    own = {"key": "karpenter.sh/unregistered", "value": "mine", "effect": "NoSchedule"}
    name = scene.add_node("NodePool/batch", "m6i.large", taints=[own, UNREGISTERED])
    node = scene.nodes()[name]
    assert own in _taints(node)
    assert not [t for t in _taints(node) if t.get("effect") == "NoExecute" and t["key"] == UNREGISTERED["key"]]
    assert objects.labels(node)[wk.REGISTERED] == "true"


@pytest.mark.slow
def test_a_pending_registration_hook_keeps_the_taint_and_the_pod_off_the_node_until_it_is_ready(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """:697 "should defer registration when a hook returns false" (the node still has the unregistered taint), :876
    "should complete registration after a hook transitions from not ready to ready" and :957 "should propagate
    labels added by a registration hook to both the node and the nodeclaim", with the AWS provider's one hook
    (placementgrouphook.go) over moto's EC2 and the test API server: while DescribeInstances says no partition, the
    claim is Registered Unknown `RegistrationHookPending`, its Node keeps `karpenter.sh/unregistered` and the pod
    is not bound — where before it was bound at launch; once EC2 says partition 1, the node and the claim are
    labelled with it, the taint goes and the pod is bound."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "nodepools.yaml").write_text(
        DEFAULT_NODEPOOL + NODE_CLASS + "  placementGroupSelector:\n    name: hdfs\n")
    compiled = compile_policies(tmp_path / "policies", tmp_path / "build")
    kubectl.cluster.create(objects.NODE_POOL, {"metadata": {"name": "default"}, "spec": {}})
    clock = VirtualClock(EPOCH)
    loaded = Scene(compiled).loaded
    with MotoCloud(loaded.sets, load_catalog(), clock, region="us-east-1") as moto:
        stand_in = moto.server.front.placement_groups
        stand_in.withhold = True
        scene = closing(Scene(loaded, cloud=moto.provider, clock=clock, cluster=kubectl.cluster))  # type: ignore[arg-type]
        kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
        controller = scene.controller()
        scene.run(controller, 180, until=lambda: _registered(kubectl).get("reason") == "RegistrationHookPending")
        assert (_registered(kubectl).get("status"), _registered(kubectl).get("message")) == (
            "Unknown", "PlacementGroupRegistrationHook")
        scene.run(controller, 120)  # EC2 still silent: the hook, the taint and the pod stay as they are
        node = _node(kubectl)
        assert UNREGISTERED in _taints(node)
        assert objects.labels(node)[wk.PLACEMENT_GROUP_PARTITION] == ""
        assert wk.REGISTERED not in objects.labels(node)
        assert _pod_node(kubectl) == ""

        stand_in.withhold = False
        scene.run(controller, 120, until=lambda: bool(_pod_node(kubectl)))
        node = _node(kubectl)
        assert _pod_node(kubectl) == objects.name(node)
        assert _registered(kubectl)["status"] == "True"
        assert UNREGISTERED not in _taints(node)
        assert objects.labels(node)[wk.REGISTERED] == "true"
        assert objects.labels(node)[wk.PLACEMENT_GROUP_PARTITION] == "1"
        (claim,) = json.loads(kubectl("get", "nodeclaims", "-o", "json").stdout)["items"]
        assert objects.labels(claim)[wk.PLACEMENT_GROUP_PARTITION] == "1"


def test_a_provisioners_node_has_no_such_taint_and_its_pods_are_bound_at_launch(tmp_path: Path) -> None:
    """v1alpha5 keeps Karpenter v0.31.1's behaviour (no `karpenter.sh/unregistered` there): a Provisioner's node is
    written without the taint or the registered label, and its pods are bound in the step that launched it, before
    its kubelet joins."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    scene = Scene(compiled, never_join=[t.name for t in load_catalog().instance_types])  # no kubelet ever joins
    scene.add_pod("web", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: bool(scene.nodes()))
    assert not scene.unbound()
    (node,) = scene.nodes().values()
    assert UNREGISTERED not in _taints(node) and "karpenter.sh/registered" not in objects.labels(node)


_TAINT = st.fixed_dictionaries(
    {"key": st.sampled_from(["karpenter.sh/unregistered", "karpenter.sh/disrupted", "example.com/gpu", ""]),
     "effect": st.sampled_from(["NoExecute", "NoSchedule", "PreferNoSchedule", ""])},
    optional={"value": st.text(max_size=3)},
)
_ENTRY = st.one_of(_TAINT, st.none(), st.integers(), st.text(max_size=3))


@given(st.one_of(st.lists(_ENTRY, max_size=6), st.none(), st.text(max_size=3)), st.booleans())
def test_registration_removes_only_the_unregistered_taint_and_labels_the_node(taints: Any, labelled: bool) -> None:
    """registration.go:96-103 on any Node shape: the patch drops exactly the `karpenter.sh/unregistered:NoExecute`
    entries (another effect under that key stays, as `MatchTaint` matches key and effect), keeps the others in
    order, labels the node registered, names its resourceVersion — and there is none once the node is so; a
    malformed taints field never raises."""
    node: Obj = {"metadata": {"name": "n", "resourceVersion": "7",
                              "labels": {wk.REGISTERED: "true"} if labelled else {}},
                 "spec": {"taints": taints}}
    awaiting = node_info.awaiting_registration(node)
    listed = taints if isinstance(taints, list) else []
    assert awaiting == any(isinstance(t, dict) and (t.get("key"), t.get("effect")) ==
                           ("karpenter.sh/unregistered", "NoExecute") for t in listed)
    patch = node_info.registered_patch(node)
    if patch is None:
        assert labelled and not awaiting
        return
    assert patch["metadata"]["resourceVersion"] == "7"
    kept = [t for t in listed if isinstance(t, dict)
            and (t.get("key"), t.get("effect")) != ("karpenter.sh/unregistered", "NoExecute")]
    if awaiting:
        assert (patch["spec"]["taints"] or []) == kept
    registered = {**node, "metadata": {**node["metadata"], "labels": {wk.REGISTERED: "true"}},
                  "spec": {"taints": patch.get("spec", node["spec"])["taints"]}}
    assert not node_info.awaiting_registration(registered)
    assert node_info.registered_patch(registered) is None


def test_a_controller_killed_before_registration_registers_the_node_after_its_restart_and_launches_nothing_more(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """A kill in the middle: the controller stops once its node is written with karpenter.sh/unregistered and before
    the claim registers (the pod unbound, held for that node). The next process adopts the node and its claim,
    registers it (taint gone, label set) and binds the pod there — one node, one instance: nothing launched twice,
    the pod never bound to a tainted node."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    kubectl.cluster.create(objects.NODE_POOL, {"metadata": {"name": "default"}, "spec": {}})
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    first = scene.controller()
    for _ in range(120):
        scene.step(first)
        nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        if nodes and UNREGISTERED in _taints(nodes[0]):
            break
        scene.advance(1.0)
    else:
        pytest.fail("the NodePool's node was never written with karpenter.sh/unregistered")
    assert not _pod_node(kubectl), "the pod was bound before its node registered"
    second = scene.controller()  # the restart: a new process, nothing of the first one's memory
    for _ in range(120):
        scene.advance(1.0)
        scene.step(second)
        node = _node(kubectl)
        if _pod_node(kubectl):
            assert UNREGISTERED not in _taints(node), "a pod was bound to a node still carrying the taint"
            break
    else:
        pytest.fail("the restarted controller never bound the pod")
    node = _node(kubectl)
    assert _pod_node(kubectl) == objects.name(node)
    assert objects.labels(node)[wk.REGISTERED] == "true"
    assert len(json.loads(kubectl("get", "nodeclaims", "-o", "json").stdout)["items"]) == 1
    assert len(scene.instances()) == 1
