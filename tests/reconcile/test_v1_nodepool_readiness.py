"""A NodePool's Ready, ValidationSucceeded and NodeClassReady conditions as Karpenter v1.14.1 writes them
(`reconcile/claims/readiness.py`, written by `nodepoolstatus`): ported Its of core pkg/controllers/nodepool/readiness/
suite_test.go and validation/suite_test.go, the root condition as operatorpkg computes it, provisioning that leaves a
NodePool that is not Ready out (provisioner.go: `StatusConditions().IsTrue(Ready)`), and the state's watch of
NodePools and EC2NodeClasses (a change seen at the next step, a malformed one counted and skipped); and
`status.resources` / `status.nodes` as counter/suite_test.go checks them (`reconcile/claims/counter.py`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.cloud.provider import Network, NodeClassResolution
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import EC2_NODE_CLASS, NODE_POOL, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.resources import parse_quantity
from karpenter_policy.reconcile.claims import counter, readiness
from karpenter_policy.reconcile.claims.nodepoolstatus import RegistrationHealth
from karpenter_policy.reconcile.claims.readiness import Verdict
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.scheduling.vectors import ZERO
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller" / "policies"
TYPE = "m6i.large"
READY_CLASS = Verdict("True", "Ready")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE, tmp_path_factory.mktemp("v1readiness") / "build")


def _documents() -> dict[str, Obj]:
    return {f"{d['kind']}/{d['metadata']['name']}": d
            for d in yaml.safe_load_all((EXAMPLE / "nodepools.yaml").read_text())}


def _apply(cluster: MemoryCluster, *, node_class: bool = True, **nodepool: Any) -> None:
    """The example's NodePool `default` (with `nodepool` merged into its template's spec) and, with `node_class`,
    its EC2NodeClass, created as GitOps applies them."""
    documents = _documents()
    pool = documents["NodePool/default"]
    pool["spec"]["template"]["spec"].update(nodepool)
    cluster.create(NODE_POOL, pool)
    if node_class:
        cluster.create(EC2_NODE_CLASS, documents["EC2NodeClass/default"])


def _observe(cluster: MemoryCluster, class_ready: Verdict = READY_CLASS) -> RegistrationHealth:
    health = RegistrationHealth(cluster, lambda: dt.datetime.now(dt.UTC), lambda **values: dict(values), Metrics(),
                                lambda _: class_ready)
    health.observe("default")
    return health


def _conditions(cluster: MemoryCluster) -> dict[str, tuple[str, str, str]]:
    nodepool = cluster.get(NODE_POOL, "default") or {}
    return {c["type"]: (c["status"], c["reason"], c["message"])
            for c in (nodepool.get("status") or {}).get("conditions") or []}


# --- readiness/suite_test.go -------------------------------------------------------------------------------------


def test_a_nodepool_of_an_unmanaged_node_class_gets_no_readiness() -> None:
    """readiness/suite_test.go:77 "should ignore NodePools which aren't managed by this instance of Karpenter"."""
    cluster = MemoryCluster()
    _apply(cluster, nodeClassRef={"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "default"})
    health = _observe(cluster)
    assert "Ready" not in _conditions(cluster)
    assert health.not_ready() == {}


def test_a_nodepool_without_its_node_class_is_not_ready() -> None:
    """readiness/suite_test.go:88 "should have status condition on nodePool as not ready when nodeClass does not
    exist"."""
    cluster = MemoryCluster()
    _apply(cluster, node_class=False)
    health = _observe(cluster)
    found = _conditions(cluster)
    assert found["NodeClassReady"] == ("False", "NodeClassNotFound", "NodeClass not found on cluster")
    assert found["Ready"] == ("False", "UnhealthyDependents", "NodeClassReady=False")
    assert health.not_ready()["default"].status == "False"


def test_a_nodepool_whose_node_class_is_ready_is_ready() -> None:
    """readiness/suite_test.go:94 "should have status condition on nodePool as ready if nodeClass is ready" (here
    ValidationSucceeded is written by the same pass, as v1.14.1's validation controller would)."""
    cluster = MemoryCluster()
    _apply(cluster)
    health = _observe(cluster)
    found = _conditions(cluster)
    assert found["NodeClassReady"] == ("True", "NodeClassReady", "")
    assert found["ValidationSucceeded"] == ("True", "ValidationSucceeded", "")
    assert found["Ready"] == ("True", "Ready", "")
    assert health.not_ready() == {}


def test_a_nodepool_whose_node_class_is_not_ready_is_not_ready_with_its_reason() -> None:
    """readiness/suite_test.go:101 "should have status condition on nodePool as not ready if nodeClass is not ready":
    the class's Ready False (here: its subnet selector matches none) is NodeClassReady False with its reason and
    message."""
    cluster = MemoryCluster()
    _apply(cluster)
    _observe(cluster, readiness.class_ready(0, 2))
    found = _conditions(cluster)
    assert found["NodeClassReady"] == ("False", "UnhealthyDependents", "SubnetsReady=False")
    assert found["Ready"][0] == "False"


def test_a_nodepool_whose_node_class_readiness_is_unknown_is_not_ready() -> None:
    """readiness/suite_test.go:118 "should have status condition on nodePool as not ready if nodeClass does not have
    status conditions": here a class whose selectors the cloud could not resolve yet."""
    cluster = MemoryCluster()
    _apply(cluster)
    _observe(cluster, readiness.class_ready(None, None))
    found = _conditions(cluster)
    assert found["NodeClassReady"] == ("False", "NodeClassReadinessUnknown", "Node Class Readiness Unknown")
    assert found["Ready"][0] == "False"


def test_a_nodepool_whose_node_class_is_terminating_is_not_ready() -> None:
    """readiness/suite_test.go:127 "should mark NodeClassReady status condition on nodePool as NotReady if nodeClass
    is terminating"."""
    cluster = MemoryCluster()
    _apply(cluster)
    node_class = cluster.get(EC2_NODE_CLASS, "default") or {}
    node_class["metadata"]["finalizers"] = ["karpenter.k8s.aws/termination"]
    cluster.update(EC2_NODE_CLASS, node_class)
    cluster.delete(EC2_NODE_CLASS, "default")
    _observe(cluster)
    found = _conditions(cluster)
    assert found["NodeClassReady"] == ("False", "NodeClassTerminating", "NodeClass is Terminating")
    assert found["Ready"][0] == "False"


# --- validation/suite_test.go ------------------------------------------------------------------------------------


def _capacity_types(*values: str) -> list[dict[str, Any]]:
    return [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(values)}]


def test_only_invalid_capacity_types_fail_validation() -> None:
    """validation/suite_test.go:71 "should fail validation with only invalid capacity types"."""
    cluster = MemoryCluster()
    _apply(cluster, requirements=_capacity_types("xspot"))
    _observe(cluster)
    found = _conditions(cluster)
    assert found["ValidationSucceeded"][:2] == ("False", "NodePoolValidationFailed")
    assert "xspot" in found["ValidationSucceeded"][2]
    assert found["Ready"][0] == "False"


@pytest.mark.parametrize("values", [("on-demand",), ("on-demand", "xspot")])
def test_valid_capacity_types_pass_validation_and_fail_open_with_an_invalid_one(values: tuple[str, ...]) -> None:
    """validation/suite_test.go:84 "should pass validation with valid capacity types" and :98 "should fail open if
    invalid and valid capacity types are present"."""
    cluster = MemoryCluster()
    _apply(cluster, requirements=_capacity_types(*values))
    _observe(cluster)
    found = _conditions(cluster)
    assert found["ValidationSucceeded"] == ("True", "ValidationSucceeded", "")
    assert found["Ready"] == ("True", "Ready", "")


def test_a_valid_nodepool_passes_validation() -> None:
    """validation/suite_test.go:123 "should set the NodePoolValidationSucceeded status condition to true if nodePool
    healthy checks succeed" (:112, an unmanaged NodePool left alone: test_a_nodepool_of_an_unmanaged_node_class…)."""
    cluster = MemoryCluster()
    _apply(cluster)
    _observe(cluster)
    assert _conditions(cluster)["ValidationSucceeded"] == ("True", "ValidationSucceeded", "")


def test_a_taint_key_too_long_fails_validation() -> None:
    """validation/suite_test.go:131 "should set the NodePoolValidationSucceeded status condition to false if nodePool
    validation failed" (a taint whose key is 250 characters and more)."""
    cluster = MemoryCluster()
    _apply(cluster, taints=[{"key": f"test.com.test.{'a' * 250}/test", "effect": "NoSchedule"}])
    health = _observe(cluster)
    found = _conditions(cluster)
    assert found["ValidationSucceeded"][:2] == ("False", "NodePoolValidationFailed")
    assert found["Ready"][:2] == ("False", "UnhealthyDependents")
    assert health.not_ready()["default"].message == "ValidationSucceeded=False"


# --- the root (operatorpkg status/condition_set.go recomputeRootCondition) ---------------------------------------


@given(st.lists(st.fixed_dictionaries({
    "type": st.sampled_from(readiness.DEPENDENTS), "status": st.sampled_from(["True", "False", "Unknown"]),
    "observedGeneration": st.integers(1, 3), "lastTransitionTime": st.sampled_from(["2026-01-01T00:00:00Z"]),
}), max_size=3, unique_by=lambda c: c["type"]), st.integers(1, 3))
def test_ready_is_true_only_when_every_dependent_is_true_at_the_generation(found: list[dict[str, Any]],
                                                                           generation: int) -> None:
    verdict = readiness.root(found, generation)
    healthy = {c["type"] for c in found if c["status"] == "True" and c["observedGeneration"] == generation}
    assert verdict.true == (healthy == set(readiness.DEPENDENTS))
    false_now = any(c["status"] == "False" and c["observedGeneration"] == generation for c in found)
    if not verdict.true:
        assert (verdict.status, verdict.reason) == (("False", "UnhealthyDependents") if false_now
                                                    else ("Unknown", "ReconcilingDependents"))
        assert all(f"{kind}=" in verdict.message for kind in set(readiness.DEPENDENTS) - healthy)


# --- provisioning honours Ready (provisioner.go) -----------------------------------------------------------------


def _pod(scene: Scene, name: str) -> None:
    scene.add_pod(name, cpu="1500m", nodeSelector={wk.NODEPOOL: "default"})


def test_a_nodepool_whose_subnets_resolve_to_none_is_not_provisioned_from_until_they_do(compiled: Path) -> None:
    """A NodePool whose EC2NodeClass's subnet selector matches no subnet is not Ready (SubnetsReady=False): its pods
    stay pending with the reason; once the subnets resolve, the class's change — here the cloud's answer, seen when
    the class is next written — makes it Ready and the pod is provisioned."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    scene.cloud.resolved = Network(frozenset(), frozenset({"sg-1"}))  # type: ignore[attr-defined]
    controller = scene.controller()
    _pod(scene, "web")
    scene.run(controller, 30)
    assert scene.unbound() == ["default/web"]
    assert _conditions(scene.cluster)["NodeClassReady"] == ("False", "UnhealthyDependents", "SubnetsReady=False")
    assert controller.context.template_sets().left_out["NodePool/default"] == (
        "NodePool default is not ready (UnhealthyDependents: NodeClassReady=False)")
    scene.cloud.resolved = None  # type: ignore[attr-defined]
    node_class = scene.cluster.get(EC2_NODE_CLASS, "default") or {}
    node_class["metadata"].setdefault("labels", {})["touched"] = "yes"
    scene.cluster.update(EC2_NODE_CLASS, node_class)
    scene.run(controller, 60, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    assert _conditions(scene.cluster)["Ready"] == ("True", "Ready", "")


def test_a_nodepool_edited_to_fail_validation_stops_being_provisioned_from_at_the_next_step(compiled: Path) -> None:
    """The watch: a NodePool edited in the cluster (a restricted label in its template) is seen at the controller's
    next step, not at the next constraint-set version: ValidationSucceeded False, Ready False, its pods pending."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    controller = scene.controller()
    _pod(scene, "first")
    scene.run(controller, 60, until=lambda: not scene.unbound())
    assert _conditions(scene.cluster)["Ready"] == ("True", "Ready", "")
    nodepool = scene.cluster.get(NODE_POOL, "default") or {}
    nodepool["spec"]["template"]["metadata"]["labels"]["karpenter.sh/nodepool"] = "other"
    scene.cluster.update(NODE_POOL, nodepool)
    scene.step(controller)
    found = _conditions(scene.cluster)
    assert found["ValidationSucceeded"][:2] == ("False", "NodePoolValidationFailed")
    assert found["Ready"][0] == "False"
    _pod(scene, "second")
    scene.run(controller, 60)
    assert scene.unbound() == ["default/second"]


def test_a_malformed_nodepool_is_counted_and_skipped() -> None:
    """A NodePool or EC2NodeClass whose spec is not an object is malformed: counted by kind and reason, listeners not
    told, the next good one read."""
    state = ClusterState()
    seen: list[str] = []
    state.subscribe(lambda change: seen.append(f"{change.kind}/{change.name}"))
    state.apply(NODE_POOL, "ADDED", {"metadata": {"name": "p", "resourceVersion": "1"}, "spec": "x"})
    state.apply(EC2_NODE_CLASS, "ADDED", {"metadata": {"resourceVersion": "2"}, "spec": {}})
    assert seen == []
    assert state.malformed[("nodepools", "spec is not an object")] == 1
    assert state.malformed[("ec2nodeclasses", "metadata.name is missing")] == 1
    state.apply(NODE_POOL, "ADDED", {"metadata": {"name": "p", "resourceVersion": "3"}, "spec": {}})
    state.apply(NODE_POOL, "MODIFIED", {"metadata": {"name": "p", "resourceVersion": "3"}, "spec": {}})  # a relist
    assert seen == ["nodepool/p"]


# --- counter/suite_test.go ---------------------------------------------------------------------------------------


def _counts(scene: Scene) -> tuple[dict[str, str], int]:
    status = (scene.cluster.get(NODE_POOL, "default") or {}).get("status") or {}
    return status.get("resources") or {}, status.get("nodes")


def test_the_counter_follows_the_nodepools_nodes(compiled: Path) -> None:
    """counter/suite_test.go:149 "should set well-known resource to zero when no nodes exist in the cluster", :267
    "should set Status.Nodes to zero when no nodes exist", :191 "should increase the counter when new nodes are
    created" (the node's capacity), :284 "should update Status.Nodes when nodes are added and removed", :207 "should
    decrease the counter when an existing node is deleted" and :240 "should zero out the counter when all nodes are
    deleted"."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    controller = scene.controller()
    scene.step(controller)
    zero = {"cpu": "0", "ephemeral-storage": "0", "memory": "0", "nodes": "0", "pods": "0"}
    assert _counts(scene) == (zero, 0)
    _pod(scene, "web")
    _pod(scene, "api")
    scene.run(controller, 60, until=lambda: _counts(scene)[1] == 2)
    resources, nodes = _counts(scene)
    capacities = [node["status"]["capacity"] for node in scene.nodes().values()]
    assert nodes == 2 and resources["nodes"] == "2"
    for name in ("cpu", "memory", "pods"):
        assert parse_quantity(resources[name]) == sum(parse_quantity(c[name]) for c in capacities), name
    first, second = sorted(scene.nodes())
    scene.cluster.delete(objects.NODE, first)
    scene.run(controller, 60, until=lambda: _counts(scene)[1] == 1)
    resources, nodes = _counts(scene)
    assert parse_quantity(resources["cpu"]) == parse_quantity(scene.nodes()[second]["status"]["capacity"]["cpu"])
    scene.cluster.delete(objects.NODE, second)
    scene.run(controller, 60, until=lambda: _counts(scene)[1] == 0)
    assert _counts(scene) == (zero, 0)


@pytest.mark.parametrize(("used", "nodes", "expected"), [
    ((600, 6 << 30, 1256, 0), 2, {"cpu": "600m", "memory": "6Gi", "pods": "1256", "ephemeral-storage": "0",
                                  "nodes": "2"}),
    ((2000, 7934464 << 10, 110, 20 << 30), 2, {"cpu": "2", "memory": "7934464Ki", "pods": "110",
                                               "ephemeral-storage": "20Gi", "nodes": "2"}),
    # a thousand cores, pods or nodes: Go's DecimalSI canonical form is `1k` (what `kubectl get nodepool -o yaml`
    # shows under Karpenter), 1500 cores `1500`, 1000 bytes `1k` below 1Ki even in binary form
    ((1_000_000, 1000, 1000, 0), 1000, {"cpu": "1k", "memory": "1k", "pods": "1k", "ephemeral-storage": "0",
                                        "nodes": "1k"}),
    ((1_500_000, 1 << 30, 2000, 0), 1500, {"cpu": "1500", "memory": "1Gi", "pods": "2k", "ephemeral-storage": "0",
                                           "nodes": "1500"}),
])
def test_the_counts_are_spelled_as_go_prints_the_sums(
    used: tuple[int, ...], nodes: int, expected: dict[str, str],
) -> None:
    """counter.go's `BaseResources` always present; the quantities as Go's `resource.Quantity` prints them, and
    `status.nodes` the count as a number whatever its spelling."""
    vector = tuple(used) + ZERO[len(used):]
    counted = counter.resources(vector, nodes)
    assert counted == dict(sorted(expected.items()))
    nodepool: dict[str, Any] = {}
    assert counter.set_counts(nodepool, counted)
    assert nodepool["status"]["nodes"] == nodes


# --- hash/suite_test.go ------------------------------------------------------------------------------------------


def _annotations(scene: Scene) -> dict[str, str]:
    return dict(objects.metadata(scene.cluster.get(NODE_POOL, "default") or {}).get("annotations") or {})


def test_a_nodepool_without_its_hash_annotation_gets_the_one_its_nodes_are_stamped_with(compiled: Path) -> None:
    """hash/controller.go: the NodePool carries `karpenter.sh/nodepool-hash` and its version (`v3`), the value its
    nodes are stamped with (this project's hash of the NodePool as its constraint set runs it); a value already there
    is left (Karpenter's own, Go's FNV, is not this project's to overwrite)."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    controller = scene.controller()
    _pod(scene, "web")
    scene.run(controller, 60, until=lambda: not scene.unbound())
    (node,) = scene.nodes().values()
    stamped = objects.metadata(node)["annotations"]
    found = _annotations(scene)
    assert found["karpenter.sh/nodepool-hash"] == stamped["karpenter.sh/nodepool-hash"]
    assert found["karpenter.sh/nodepool-hash-version"] == "v3"
    nodepool = scene.cluster.get(NODE_POOL, "default") or {}
    nodepool["metadata"]["annotations"]["karpenter.sh/nodepool-hash"] = "1234567890"
    scene.cluster.update(NODE_POOL, nodepool)
    scene.step(controller)
    assert _annotations(scene)["karpenter.sh/nodepool-hash"] == "1234567890"


def test_a_nodepool_of_an_unmanaged_node_class_gets_no_hash_annotation(compiled: Path) -> None:
    """hash/suite_test.go:96 "should ignore NodePools which aren't managed by this instance of Karpenter"."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster, nodeClassRef={"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass",
                                        "name": "default"})
    scene.step(scene.controller())
    assert "karpenter.sh/nodepool-hash" not in _annotations(scene)


# --- the EC2NodeClass's AMIsReady and InstanceProfileReady (aws pkg/controllers/nodeclass/ami.go, instanceprofile.go)


def _touch_class(scene: Scene) -> None:
    """An edit of the EC2NodeClass (a label): its event makes provisioning write its NodePools' status again."""
    node_class = scene.cluster.get(EC2_NODE_CLASS, "default") or {}
    labels = node_class["metadata"].setdefault("labels", {})
    labels["touched"] = str(int(labels.get("touched", "0")) + 1)
    scene.cluster.update(EC2_NODE_CLASS, node_class)


def test_a_nodepool_whose_amis_resolve_to_none_is_not_provisioned_from_until_they_do(compiled: Path) -> None:
    """ami.go: an `amiSelectorTerms` that matches no AMI is AMIsReady False (`AMINotFound`), the class's Ready False
    `UnhealthyDependents` "AMIsReady=False", which the NodePool's NodeClassReady repeats: its pods stay pending. A
    cloud that then cannot tell keeps that answer; once images resolve, the NodePool is Ready and the pod placed."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    scene.cloud.node_class_resolution = NodeClassResolution(frozenset(), "default", True)  # type: ignore[attr-defined]
    controller = scene.controller()
    _pod(scene, "web")
    scene.run(controller, 30)
    assert scene.unbound() == ["default/web"]
    assert _conditions(scene.cluster)["NodeClassReady"] == ("False", "UnhealthyDependents", "AMIsReady=False")
    scene.cloud.node_class_resolution = NodeClassResolution(None, "default", None)  # type: ignore[attr-defined]
    _touch_class(scene)
    scene.run(controller, 30)
    assert scene.unbound() == ["default/web"]
    assert _conditions(scene.cluster)["NodeClassReady"] == ("False", "UnhealthyDependents", "AMIsReady=False")
    scene.cloud.node_class_resolution = None  # type: ignore[attr-defined]
    _touch_class(scene)
    scene.run(controller, 60, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    assert _conditions(scene.cluster)["Ready"] == ("True", "Ready", "")


def test_a_nodepool_whose_instance_profile_is_missing_is_not_ready(compiled: Path) -> None:
    """instanceprofile.go's InstanceProfileReady, False here when IAM has no profile of the name the class's nodes
    launch with (this controller creates none: docs/reconcile.md): NodeClassReady False "InstanceProfileReady=False",
    its pods pending, until the profile exists."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    scene.cloud.node_class_resolution = NodeClassResolution(  # type: ignore[attr-defined]
        frozenset({"ami-1"}), "KarpenterNodeInstanceProfile", False)
    controller = scene.controller()
    _pod(scene, "web")
    scene.run(controller, 30)
    assert scene.unbound() == ["default/web"]
    assert _conditions(scene.cluster)["NodeClassReady"] == (
        "False", "UnhealthyDependents", "InstanceProfileReady=False")
    scene.cloud.node_class_resolution = NodeClassResolution(  # type: ignore[attr-defined]
        frozenset({"ami-1"}), "KarpenterNodeInstanceProfile", True)
    _touch_class(scene)
    scene.run(controller, 60, until=lambda: not scene.unbound())
    assert scene.unbound() == []


@given(st.lists(st.sampled_from([None, 0, 1, 2]), min_size=3, max_size=3), st.sampled_from([None, False, True]),
       st.sampled_from([None, False, True]))
def test_the_class_is_ready_only_when_every_dependent_is(
    counts: list[int | None], profile: bool | None, placement_group: bool | None
) -> None:
    """operatorpkg's root over v1.14.1's dependents in their order (AMIsReady, SubnetsReady, SecurityGroupsReady,
    InstanceProfileReady, PlacementGroupReady — aws pkg/apis/v1/ec2nodeclass_status.go `StatusConditions`): True
    when all are; False `UnhealthyDependents` when one is False (none resolved, the profile or the placement group
    missing); else Unknown `ReconcilingDependents`; the message names every dependent not True."""
    images, subnets, groups = counts
    verdict = readiness.class_ready(subnets, groups, images, profile, placement_group)
    states = {"AMIsReady": images, "SubnetsReady": subnets, "SecurityGroupsReady": groups}
    named = [f"{k}={'Unknown' if v is None else 'False'}" for k, v in states.items() if not v]
    for kind, found in (("InstanceProfileReady", profile), ("PlacementGroupReady", placement_group)):
        if found is not True:
            named.append(f"{kind}={'Unknown' if found is None else 'False'}")
    if not named:
        assert verdict == Verdict("True", "Ready")
    elif any(v == 0 for v in states.values()) or profile is False or placement_group is False:
        assert verdict == Verdict("False", "UnhealthyDependents", ", ".join(named))
    else:
        assert verdict == Verdict("Unknown", "ReconcilingDependents", ", ".join(named))
