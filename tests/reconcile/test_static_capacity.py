"""Static NodePools (`spec.replicas`) with Karpenter v1.14.1's `StaticCapacity` feature gate on, and static drift
(gate on and off), through `karpenter_policy.testing`'s Scene: the static provisioning controller launches NodeClaims
up to `replicas` within `limits.nodes` (core pkg/controllers/static/provisioning/controller.go), the static
deprovisioning controller deletes the excess in v1.14.1's order (pkg/controllers/static/deprovisioning/
controller.go), and static drift replaces a drifted static node one for one (pkg/controllers/disruption/
staticdrift.go, registered whatever the gate). Each test names the Go test it ports (kubernetes-sigs/karpenter
v1.14.1) and its line; docs/reconcile.md says which cannot apply and why."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from karpenter_policy.api.v1.featuregates import FeatureGateError, read_feature_gates, read_policy_feature_gates
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.testing import Scene, compile_policies

TYPE = "m5.large"
NODE_CLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
"""


def _nodepool(replicas: int, *, limit: int | None = None, budget: str = "100%", label: str = "web",
              name: str = "static") -> str:
    limits = f"  limits:\n    nodes: {limit}\n" if limit is not None else ""
    return f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  replicas: {replicas}
{limits}  disruption:
    consolidateAfter: 0s
    budgets:
      - nodes: "{budget}"
  template:
    metadata:
      labels:
        team: {label}
    spec:
      taints:
        - key: dedicated
          value: static
          effect: NoSchedule
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["{TYPE}"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
---
"""


class Policies:
    """A policy directory of static NodePools, compiled again after each change (the controller reads the new
    version at its next pass)."""

    def __init__(self, root: Path, *nodepools: str) -> None:
        self.dir = root / "policies"
        self.dir.mkdir()
        self.build = root / "build"
        self.write(*nodepools)

    def write(self, *nodepools: str) -> Path:
        (self.dir / "nodepools.yaml").write_text("".join(nodepools) + NODE_CLASS)
        return compile_policies(self.dir, self.build)


def _static_nodes(scene: Scene, nodepool: str = "static") -> list[str]:
    return sorted(n for n, node in scene.nodes().items() if objects.labels(node).get(wk.NODEPOOL) == nodepool)


def _claims(scene: Scene, nodepool: str = "static") -> list[str]:
    return sorted(n for n, c in scene.nodeclaims().items() if objects.labels(c).get(wk.NODEPOOL) == nodepool)


def _fields(record: logging.LogRecord) -> object:
    return getattr(record, "fields", None)


def _gated(scene: Scene) -> Controller:
    return scene.controller(static_capacity=True)


def _settle(scene: Scene, controller: Controller, count: int, seconds: float = 300) -> None:
    scene.run(controller, seconds, until=lambda: len(_static_nodes(scene)) == count and len(_claims(scene)) == count
              and all(objects.labels(n).get(wk.INITIALIZED) == "true" for n in scene.nodes().values()))


# --- the gate ---------------------------------------------------------------------------------------------------


def test_the_controller_accepts_the_gate_and_check_still_refuses_it() -> None:
    assert read_feature_gates("StaticCapacity=true") == "StaticCapacity=true"
    with pytest.raises(FeatureGateError, match="StaticCapacity=true: .*not by check and test"):
        read_policy_feature_gates("StaticCapacity=true")
    with pytest.raises(FeatureGateError, match="NodeRepair=true"):
        read_feature_gates("StaticCapacity=true,NodeRepair=true")


# --- static provisioning (pkg/controllers/static/provisioning/suite_test.go) ------------------------------------


def test_should_create_nodeclaims_when_current_node_count_is_less_than_desired_replicas(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """should create nodeclaims when current node count is less than desired replicas —
    static/provisioning/suite_test.go:250: no pod at all, yet `replicas` claims and nodes, counted as created for
    `provisioned`, with v1.14.1's log line; the gate off (the default) launches none (suite_test.go:2848)."""
    build = Policies(tmp_path, _nodepool(3)).build
    off = Scene(build, types=[TYPE])
    off.run(off.controller(), 120)
    assert off.nodes() == {} and off.nodeclaims() == {}
    scene = Scene(build, types=[TYPE])
    controller = _gated(scene)
    with caplog.at_level(logging.INFO):
        _settle(scene, controller, 3)
    assert len(_static_nodes(scene)) == 3 and len(_claims(scene)) == 3
    assert scene.metric(controller, "karpenter_nodeclaims_created_total", reason="provisioned",
                        nodepool="static", min_values_relaxed="false") == 3
    lines = [r for r in caplog.records if r.getMessage() == "provisioning nodeclaims to satisfy replica count"]
    assert len(lines) == 1
    assert _fields(lines[0]) == {"NodePool": "static", "current": 0, "desired": 3, "provision-count": 3}
    scene.run(controller, 600)  # a minute's requeues and more: no more claims
    assert len(_claims(scene)) == 3


def test_should_respect_nodepool_template_specifications(tmp_path: Path) -> None:
    """should respect nodepool template specifications — static/provisioning/suite_test.go:456: the claims and nodes
    carry the NodePool's labels, taints and requirements (`NewNodeClaimTemplate`)."""
    scene = Scene(Policies(tmp_path, _nodepool(2, label="shop")).build, types=[TYPE])
    _settle(scene, _gated(scene), 2)
    for name in _static_nodes(scene):
        node = scene.nodes()[name]
        assert objects.labels(node)["team"] == "shop" and objects.labels(node)[wk.INSTANCE_TYPE] == TYPE
        assert {"key": "dedicated", "value": "static", "effect": "NoSchedule"} in node["spec"]["taints"]
    for claim in scene.nodeclaims().values():
        assert {"key": "dedicated", "value": "static", "effect": "NoSchedule"} in claim["spec"]["taints"]


def test_should_create_additional_nodeclaims_to_reach_desired_replicas(tmp_path: Path) -> None:
    """should create additional nodeclaims to reach desired replicas — static/provisioning/suite_test.go:270: 2
    running, replicas raised to 4: 2 more, the first two kept."""
    policies = Policies(tmp_path, _nodepool(2))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 2)
    first = _static_nodes(scene)
    policies.write(_nodepool(4))
    _settle(scene, controller, 4)
    assert len(_static_nodes(scene)) == 4 and set(first) <= set(_static_nodes(scene))


def test_should_not_create_additional_nodeclaims_when_node_limits_are_reached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """should not create additional nodeclaims when node limits are reached — static/provisioning/suite_test.go:356:
    replicas 5 under `limits.nodes: 3` launches 3, then logs `nodepool node limit reached`."""
    scene = Scene(Policies(tmp_path, _nodepool(5, limit=3)).build, types=[TYPE])
    controller = _gated(scene)
    with caplog.at_level(logging.INFO):
        _settle(scene, controller, 3)
        scene.run(controller, 120)
    assert len(_claims(scene)) == 3
    assert "nodepool node limit reached" in [r.getMessage() for r in caplog.records]


def test_should_handle_zero_replicas(tmp_path: Path) -> None:
    """should handle zero replicas — static/provisioning/suite_test.go:441: no claim."""
    scene = Scene(Policies(tmp_path, _nodepool(0)).build, types=[TYPE])
    scene.run(_gated(scene), 120)
    assert scene.nodeclaims() == {} and scene.nodes() == {}


def test_should_handle_create_nodeclaims_errors_gracefully(tmp_path: Path) -> None:
    """should handle CreateNodeClaims errors gracefully — static/provisioning/suite_test.go:124: a launch that fails
    is an error of the pass, and the replicas are reached at a later one."""
    scene = Scene(Policies(tmp_path, _nodepool(1)).build, types=[TYPE])
    controller = _gated(scene)
    scene.fail_next_launch()
    first = scene.step(controller)
    assert any("static provisioning of NodePool static" in e for e in first.errors), first.errors
    _settle(scene, controller, 1)
    assert len(_static_nodes(scene)) == 1


def test_pods_are_never_provisioned_onto_a_static_nodepool_with_the_gate_on(tmp_path: Path) -> None:
    """Provisioning > StaticNodePool > should not create NodeClaims for StaticNodePool —
    provisioning/suite_test.go:2848, the gate on: its nodes come from replicas alone; a pending pod that tolerates
    them is not given a node of it (`NewScheduler` leaves static NodePools out whatever the gate)."""
    scene = Scene(Policies(tmp_path, _nodepool(1)).build, types=[TYPE])
    controller = _gated(scene)
    scene.add_pod("web", cpu="1", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    _settle(scene, controller, 1)
    scene.run(controller, 120)
    assert len(_claims(scene)) == 1  # the pod's node is the one of replicas, never an extra


# --- static deprovisioning (pkg/controllers/static/deprovisioning/suite_test.go) ------------------------------


def test_should_terminate_excess_nodeclaims_when_current_count_exceeds_desired_replicas(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """should terminate excess nodeclaims when current count exceeds desired replicas —
    static/deprovisioning/suite_test.go:284: 4 running, replicas lowered to 2: 2 claims deleted, with v1.14.1's log
    line; provisioning launches none meanwhile (suite_test.go:201 "should return early if current node count exceeds
    desired replicas")."""
    policies = Policies(tmp_path, _nodepool(4))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 4)
    before = set(_claims(scene))
    policies.write(_nodepool(2))
    with caplog.at_level(logging.INFO):
        _settle(scene, controller, 2)
    assert len(_claims(scene)) == 2 and set(_claims(scene)) <= before
    (line,) = [r for r in caplog.records if r.getMessage() == "deprovisioning nodeclaims to satisfy replica count"]
    assert _fields(line) == {"NodePool": "static", "current": 4, "desired": 2, "deprovision-count": 2}
    assert [i for i in scene.instances() if i.tags.get(wk.NODEPOOL) == "static"].__len__() == 2


def test_should_handle_zero_replicas_by_terminating_all_nodeclaims(tmp_path: Path) -> None:
    """should handle zero replicas by terminating all nodeclaims — static/deprovisioning/suite_test.go:323."""
    policies = Policies(tmp_path, _nodepool(2))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 2)
    policies.write(_nodepool(0))
    _settle(scene, controller, 0)
    assert scene.nodeclaims() == {} and scene.nodes() == {}


def _three_with_pods(tmp_path: Path) -> tuple[Policies, Scene, Controller, list[str]]:
    policies = Policies(tmp_path, _nodepool(3))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 3)
    return policies, scene, controller, _static_nodes(scene)


def test_should_prioritize_empty_nodes_with_only_daemonset_pods_for_termination(tmp_path: Path) -> None:
    """should prioritize empty nodes (with only daemonset pods) for termination —
    static/deprovisioning/suite_test.go:513: of three nodes, the one running a DaemonSet's pod alone goes first
    though it sorts last by name; the two running an application's pod stay."""
    policies, scene, controller, (a, b, c) = _three_with_pods(tmp_path)
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    scene.add_pod("app-a", node=a, tolerations=tolerate)
    scene.add_pod("app-b", node=b, tolerations=tolerate)
    scene.add_pod("agent-c", node=c, namespace="kube-system", owner=("DaemonSet", "agent"), tolerations=tolerate)
    policies.write(_nodepool(2))
    _settle(scene, controller, 2)
    assert _static_nodes(scene) == [a, b]


def test_should_terminate_non_empty_nodes_when_empty_nodes_are_insufficient(tmp_path: Path) -> None:
    """should terminate non-empty nodes when empty nodes are insufficient — static/deprovisioning/suite_test.go:579,
    with the disruption cost ordering (:629): replicas 3 → 1 takes the empty node and then the node whose pods cost
    least to move; a pod with `karpenter.sh/do-not-disrupt` keeps its node to the last."""
    policies, scene, controller, (a, b, c) = _three_with_pods(tmp_path)
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    scene.add_pod("held", node=a, tolerations=tolerate, annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("cheap", node=b, tolerations=tolerate)
    policies.write(_nodepool(1))
    _settle(scene, controller, 1)
    assert _static_nodes(scene) == [a]  # c (empty) and b (cheaper than a, held) went


# --- static drift (pkg/controllers/disruption/staticdrift_test.go) -------------------------------------------


def _drift(policies: Policies, replicas: int, **kwargs: object) -> None:
    policies.write(_nodepool(replicas, label="shop", **kwargs))  # type: ignore[arg-type]


def test_static_drift_replaces_each_drifted_node_one_for_one_within_the_budget(tmp_path: Path) -> None:
    """should respect disruption budgets (Nodes Count) for static drift — disruption/staticdrift_test.go:84: 5 drifted
    nodes under a budget of 2 are replaced two at a time (never more than replicas + 2 nodes), each by a node of the
    template (no simulation), counted as `drifted` decisions."""
    policies = Policies(tmp_path, _nodepool(5, budget="2"))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 5)
    old = set(_static_nodes(scene))
    _drift(policies, 5, budget="2")
    most = 0

    def replaced() -> bool:
        nonlocal most
        most = max(most, len(_static_nodes(scene)))
        return not old & set(_static_nodes(scene)) and len(_static_nodes(scene)) == 5

    scene.run(controller, 3600, until=replaced)
    assert replaced()
    assert most == 7
    assert all(objects.labels(scene.nodes()[n])["team"] == "shop" for n in _static_nodes(scene))
    assert scene.metric(controller, "karpenter_nodeclaims_created_total", reason="drifted", nodepool="static",
                        min_values_relaxed="false") == 5


def test_should_not_drift_nodes_when_we_cannot_acquire_limits(tmp_path: Path) -> None:
    """should not drift nodes when we cannot acquire limits — disruption/staticdrift_test.go:367: replicas 5 at
    `limits.nodes: 5` leaves no room for a replacement: the drifted nodes stay."""
    policies = Policies(tmp_path, _nodepool(5, limit=5))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 5)
    old = _static_nodes(scene)
    _drift(policies, 5, limit=5)
    scene.run(controller, 900)
    assert _static_nodes(scene) == old


def test_should_drift_partially_when_we_can_acquire_some_limits(tmp_path: Path) -> None:
    """should drift partially when we can acquire some limits — disruption/staticdrift_test.go:463 (and :521, "keep
    drifting … for each reconcile"): replicas 3 under `limits.nodes: 4` replace one node at a time, never past the
    limit, until every node is the new template's."""
    policies = Policies(tmp_path, _nodepool(3, limit=4))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 3)
    old = set(_static_nodes(scene))
    _drift(policies, 3, limit=4)
    most = 0

    def replaced() -> bool:
        nonlocal most
        most = max(most, len(scene.nodeclaims()))
        return not old & set(_static_nodes(scene)) and len(_static_nodes(scene)) == 3

    scene.run(controller, 3600, until=replaced)
    assert replaced() and most == 4


def test_static_drift_runs_with_the_gate_off_and_waits_while_over_replicas(tmp_path: Path) -> None:
    """Static drift is registered whatever the gate (disruption/controller.go `NewMethods`): a controller started
    with the gate off over a static NodePool's nodes replaces them when they drift — but not while the NodePool has
    more nodes than its replicas: should wait until nodes are deprovisioned when we are overscaled —
    disruption/staticdrift_test.go:578 (with the gate off nothing deprovisions them)."""
    policies = Policies(tmp_path, _nodepool(2))
    scene = Scene(policies.build, types=[TYPE])
    _settle(scene, _gated(scene), 2)
    old = set(_static_nodes(scene))
    _drift(policies, 1)  # drifted, and over replicas
    off = scene.controller()
    scene.run(off, 900)
    assert set(_static_nodes(scene)) == old
    _drift(policies, 2)
    scene.run(off, 3600, until=lambda: not old & set(_static_nodes(scene)) and len(_static_nodes(scene)) == 2)
    assert not old & set(_static_nodes(scene)) and len(_static_nodes(scene)) == 2


def test_should_ignore_nodes_with_the_do_not_disrupt_annotation(tmp_path: Path) -> None:
    """should ignore nodes with the karpenter.sh/do-not-disrupt annotation — disruption/staticdrift_test.go:908."""
    policies = Policies(tmp_path, _nodepool(1))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 1)
    (node,) = _static_nodes(scene)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    _drift(policies, 1)
    scene.run(controller, 900)
    assert _static_nodes(scene) == [node]


def test_should_prioritize_nodeclaims_that_have_unresolved_provider_id(tmp_path: Path) -> None:
    """should prioritize nodeclaims that have unresolved providerID — static/deprovisioning/suite_test.go:438: beside
    two launched nodes, a NodeClaim of the NodePool not launched yet (no `status.providerID`) is the excess that goes,
    though the nodes are empty; the nodes stay."""
    policies = Policies(tmp_path, _nodepool(2))
    scene = Scene(policies.build, types=[TYPE])
    controller = _gated(scene)
    _settle(scene, controller, 2)
    nodes = _static_nodes(scene)
    scene.cluster.create(objects.NODE_CLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "static-unresolved", "labels": {wk.NODEPOOL: "static"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
    })
    scene.run(controller, 300, until=lambda: "static-unresolved" not in scene.nodeclaims())
    assert "static-unresolved" not in scene.nodeclaims()
    scene.run(controller, 120)
    assert _static_nodes(scene) == nodes and len(_claims(scene)) == 2


def test_simulate_takes_the_gate(tmp_path: Path) -> None:
    """`simulate --feature-gates StaticCapacity=true` (on moto's EC2): the static NodePool's 2 replicas are launched
    beside the dynamic NodePool's nodes for the pods, and none without the gate."""
    from click.testing import CliRunner

    from karpenter_policy.cli import main

    root = Path(__file__).resolve().parents[2]
    build = compile_policies(root / "tests" / "data" / "static-nodepools", tmp_path / "build")
    apps = root / "examples" / "workloads" / "apps" / "inflate.yaml"
    for gates, static in (("StaticCapacity=true", 2), ("", 0)):
        result = CliRunner().invoke(main, ["simulate", "--constraints", str(build), "--workloads", str(apps),
                                           "--scale", "deployment/inflate=2", "--feature-gates", gates])
        assert result.exit_code == 0, result.output
        rows = [line.split() for line in result.stdout.splitlines() if line.startswith("ip-")]
        assert sum(1 for row in rows if row[1] == "NodePool/a-reserved") == static, result.stdout
        assert any(row[1] == "NodePool/dynamic" for row in rows)


def test_the_threaded_runner_launches_the_replicas_once_and_scales_down(tmp_path: Path) -> None:
    """In real time, each controller on its thread: the replicas are launched once (a launch the state has not
    shown yet counts: no second launch for one shortfall — v1.14.1's reservation, suite_test.go:394 and :527), and a
    lower replicas is carried out by the static deprovisioning thread."""
    policies = Policies(tmp_path, _nodepool(3))
    scene = Scene(policies.build, types=[TYPE], real_time=True)
    with scene.runner(static_capacity=True):
        assert scene.wait(lambda: len(_claims(scene)) == 3 and len(_static_nodes(scene)) == 3, 60)
        # every claim filled with its instance: the state shows all three launches (nothing more is due)
        assert scene.wait(lambda: all(c.get("status", {}).get("providerID") for c in scene.nodeclaims().values()), 60)
        assert len(scene.instances()) == 3  # never more launched
        policies.write(_nodepool(1))
        assert scene.wait(lambda: len(_claims(scene)) == 1 and len(_static_nodes(scene)) == 1, 60)
    assert len([i for i in scene.instances() if i.state == "running"]) == 1


def test_replicas_of_int64s_largest_launch_in_bounded_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid but enormous `replicas` (2^63 - 1, no `limits.nodes`): v1.14.1 makes every NodeClaim in one slice and
    panics; here a step launches at most `MAX_LAUNCHES_PER_STEP` (lowered to 4 for the test) and the next step,
    a second later, the next ones — the controller keeps running, its other controllers too (the pod is placed)."""
    from karpenter_policy.reconcile.static import provisioning

    monkeypatch.setattr(provisioning, "MAX_LAUNCHES_PER_STEP", 4)
    scene = Scene(Policies(tmp_path, _nodepool(2**63 - 1)).build, types=[TYPE])
    controller = _gated(scene)
    scene.run(controller, 1.5)
    first = len(_claims(scene))
    assert first in (4, 8)  # one or two steps in 1.5 s, each of 4
    scene.run(controller, 3)
    later = len(_claims(scene))
    assert first < later <= first + 4 * 4 and later % 4 == 0  # a step a second at most, 4 claims each
