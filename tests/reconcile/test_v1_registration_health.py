"""A NodePool's `NodeRegistrationHealthy` status condition, as Karpenter v1.14.1 keeps it (`reconcile/claims/health`,
`nodepoolstatus`): the recent results per NodePool (core pkg/state/nodepoolhealth/tracker.go), Unknown on a new or
changed NodePool or class (pkg/controllers/nodepool/registrationhealth/controller.go), False after failures to
launch or register (nodeclaim/lifecycle/liveness.go), True after a registration (registration.go) — ported Its of
their suites, on `Scene` (the in-memory cluster and cloud, virtual time) with the NodePools and EC2NodeClass of
examples/v1/controller applied as GitOps applies them."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from karpenter_policy.cloud.errors import ConfigurationError
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import error_for_status
from karpenter_policy.kube.objects import EC2_NODE_CLASS, NODE_CLAIM, NODE_POOL, Kind, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.health import BUFFER_SIZE, HealthState, Status
from karpenter_policy.reconcile.claims.nodepoolstatus import RegistrationHealth, condition_of
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller" / "policies"
TYPE = "m6i.large"  # 2 vCPU: a pod of 1.5 CPU is a node of its own
FAILED = ("RegistrationFailed", "Failed to register node")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE, tmp_path_factory.mktemp("v1reghealth") / "build")


def _apply(cluster: MemoryCluster, **replace: Any) -> dict[str, Obj]:
    """The example's NodePools and EC2NodeClass, created as GitOps applies them (`replace`: a NodePool's status)."""
    created = {}
    for document in yaml.safe_load_all((EXAMPLE / "nodepools.yaml").read_text()):
        kind = NODE_POOL if document["kind"] == "NodePool" else EC2_NODE_CLASS
        document.update(replace.get(document["metadata"]["name"], {}) if kind == NODE_POOL else {})
        created[f"{document['kind']}/{document['metadata']['name']}"] = cluster.create(kind, document)
    return created


def _health(scene: Scene, name: str = "default") -> dict[str, Any] | None:
    nodepool = scene.cluster.get(NODE_POOL, name)
    assert nodepool is not None
    return condition_of(nodepool)


def _status(condition: dict[str, Any] | None) -> tuple[str, str, str] | None:
    return None if condition is None else (condition["status"], condition["reason"], condition["message"])


def _pod(scene: Scene, name: str) -> None:
    scene.add_pod(name, cpu="1500m", nodeSelector={wk.NODEPOOL: "default"})


def _orphan_claim(scene: Scene, name: str, owner: Obj, launched: tuple[str, str] | None = None) -> None:
    """A claim of `owner` as a controller that stopped before its launch left it (`launched`: the Launched
    condition's reason and message a failed launch wrote)."""
    scene.cluster.create(NODE_CLAIM, {
        "metadata": {"name": name, "labels": {wk.NODEPOOL: objects.name(owner)},
                     "finalizers": [wk.TERMINATION_FINALIZER],
                     "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                          "name": objects.name(owner), "uid": objects.uid(owner),
                                          "blockOwnerDeletion": True}]},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                      "name": "default"}},
    })
    if launched is not None:
        claim = scene.cluster.get(NODE_CLAIM, name)
        assert claim is not None
        claim["status"] = {"conditions": [{"type": "Launched", "status": "Unknown", "reason": launched[0],
                                           "message": launched[1], "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        scene.cluster.update(NODE_CLAIM, claim, subresource="status")


def _disrupted(scene: Scene, controller: Any, reason: str, capacity_type: str = "on-demand") -> float:
    return scene.metric(controller, "karpenter_nodeclaims_disrupted_total", reason=reason, nodepool="default",
                        capacity_type=capacity_type) or 0.0


# --- the results (pkg/state/nodepoolhealth/suite_test.go) ---------------------------------------------------------


def test_concurrent_updates_are_all_recorded() -> None:
    """suite_test.go:50 "should record all concurrent updates correctly"."""
    state = HealthState()
    start = threading.Barrier(4)

    def update(success: bool) -> None:
        start.wait()
        state.update("test", success)

    threads = [threading.Thread(target=update, args=(success,)) for success in (False, False, True, True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert state.status("test") is Status.UNHEALTHY


def test_the_status_of_few_results() -> None:
    """suite_test.go:75, :78, :82, :87, :92 (unknown when empty, healthy with one success, unhealthy with two
    failures, unhealthy refilled then one success, each NodePool its own)."""
    state = HealthState()
    assert state.status("a") is Status.UNKNOWN
    state.update("a", True)
    assert state.status("a") is Status.HEALTHY
    state.update("b", False)
    state.update("b", False)
    assert state.status("b") is Status.UNHEALTHY
    assert state.status("a") is Status.HEALTHY
    state.set_status("b", Status.UNKNOWN)
    assert state.status("b") is Status.UNKNOWN
    state.set_status("c", Status.UNHEALTHY)
    state.update("c", True)
    assert state.status("c") is Status.UNHEALTHY


def test_a_dry_run_leaves_the_results_and_setting_a_status_resets_them() -> None:
    """suite_test.go:102 "should create a copy of the tracker … in case of Dry Run" and :110 "should reset the buffer
    first when setting status"."""
    state = HealthState()
    state.set_status("a", Status.HEALTHY)
    state.update("a", False)
    assert state.status("a") is Status.HEALTHY
    assert state.dry_run("a", False) is Status.UNHEALTHY
    assert state.status("a") is Status.HEALTHY
    state.update("b", False)
    state.update("b", False)
    state.set_status("b", Status.HEALTHY)
    assert state.status("b") is Status.HEALTHY


@given(st.lists(st.booleans(), max_size=20), st.booleans())
def test_the_status_is_that_of_the_last_four_results(results: list[bool], more: bool) -> None:
    """The ring buffer: two failures among the last BUFFER_SIZE results are unhealthy, fewer healthy, none held
    unknown; a dry run never records, and says what recording would say until the buffer is full."""
    state = HealthState()
    for result in results:
        state.update("p", result)
    last = results[-BUFFER_SIZE:]
    expected = Status.UNKNOWN if not last else Status.UNHEALTHY if last.count(False) >= 2 else Status.HEALTHY
    assert state.status("p") is expected
    guess = state.dry_run("p", more)
    assert state.status("p") is expected
    if len(results) < BUFFER_SIZE:
        state.update("p", more)
        assert state.status("p") is guess


# --- Unknown (pkg/controllers/nodepool/registrationhealth/suite_test.go) -----------------------------------------


def _observed(cluster: MemoryCluster, **replace: Any) -> tuple[RegistrationHealth, Obj]:
    created = _apply(cluster, **replace)
    health = RegistrationHealth(cluster, lambda: dt.datetime.now(dt.UTC), lambda **values: dict(values), Metrics())
    return health, created["NodePool/default"]


def _with(status: str, reason: str = "unhealthy") -> dict[str, Any]:
    condition = {"type": "NodeRegistrationHealthy", "status": status, "reason": reason, "message": reason,
                 "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}
    return {"default": {"status": {"conditions": [condition], "nodeClassObservedGeneration": 1}}}


def test_a_nodepool_of_an_unmanaged_node_class_gets_no_condition() -> None:
    """suite_test.go:79 "should ignore setting NodeRegistrationHealthy … on NodePools which aren't managed"."""
    cluster = MemoryCluster()
    health, nodepool = _observed(cluster)
    nodepool["spec"]["template"]["spec"]["nodeClassRef"] = {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass",
                                                            "name": "default"}
    cluster.update(NODE_POOL, nodepool)
    health.observe("default")
    assert condition_of(cluster.get(NODE_POOL, "default") or {}) is None


def test_a_nodepool_without_its_node_class_gets_no_condition() -> None:
    """suite_test.go:90 "should not set NodeRegistrationHealthy … when nodeClass does not exist"."""
    cluster = MemoryCluster()
    health, _ = _observed(cluster)
    cluster.delete(EC2_NODE_CLASS, "default")
    health.observe("default")
    assert condition_of(cluster.get(NODE_POOL, "default") or {}) is None


def test_a_new_nodepool_is_unknown_with_its_class_generation() -> None:
    """registrationhealth/controller.go: a NodePool without the condition gets it Unknown."""
    cluster = MemoryCluster()
    health, _ = _observed(cluster)
    health.observe("default")
    nodepool = cluster.get(NODE_POOL, "default") or {}
    assert _status(condition_of(nodepool)) == ("Unknown", "AwaitingReconciliation", "object is awaiting reconciliation")
    assert (condition_of(nodepool) or {})["observedGeneration"] == 1
    assert nodepool["status"]["nodeClassObservedGeneration"] == 1


def test_a_changed_node_class_resets_the_condition_to_unknown() -> None:
    """suite_test.go:96 "should set NodeRegistrationHealthy … as Unknown and reset the NodeRegistrationHealthBuffer
    if the nodeClass observed generation doesn't match"."""
    cluster = MemoryCluster()
    health, nodepool = _observed(cluster, **_with("False"))
    node_class = cluster.get(EC2_NODE_CLASS, "default") or {}
    node_class["spec"]["tags"] = {"keyTag-1": "valueTag-1"}
    cluster.update(EC2_NODE_CLASS, node_class)
    health.observe("default")
    found = cluster.get(NODE_POOL, "default") or {}
    assert (condition_of(found) or {})["status"] == "Unknown"
    assert found["status"]["nodeClassObservedGeneration"] == 2
    assert health.state.status(objects.uid(nodepool)) is Status.UNKNOWN


def test_a_changed_nodepool_resets_the_condition_to_unknown() -> None:
    """suite_test.go:111 "should set NodeRegistrationHealthy … as Unknown if the nodePool is updated"."""
    cluster = MemoryCluster()
    health, nodepool = _observed(cluster, **_with("False"))
    nodepool["spec"]["limits"] = {"cpu": "14"}
    cluster.update(NODE_POOL, nodepool)
    health.observe("default")
    found = cluster.get(NODE_POOL, "default") or {}
    assert (condition_of(found) or {})["status"] == "Unknown"
    assert (condition_of(found) or {})["observedGeneration"] == 2
    assert health.state.status(objects.uid(nodepool)) is Status.UNKNOWN


@settings(deadline=None)  # each example also runs the NodePool's RuntimeValidate: slow at first on a loaded machine
@given(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.sampled_from(["conditions", "nodeClassObservedGeneration"]),
                                 st.one_of(st.none(), st.integers(), st.text(max_size=3),
                                           st.lists(st.one_of(st.integers(), st.dictionaries(
                                               st.sampled_from(["type", "status", "observedGeneration"]),
                                               st.sampled_from(["NodeRegistrationHealthy", "True", 1, None]))),
                                               max_size=3)), max_size=2)))
def test_a_nodepool_status_of_any_shape_is_replaced_never_raised_on(status: Any) -> None:
    """What the API answers is not trusted: a NodePool whose status is of another shape gets a readable one."""
    cluster = MemoryCluster()
    health, nodepool = _observed(cluster)
    cluster.update(NODE_POOL, {**nodepool, "status": status}, subresource="status")
    health.observe("default")
    found = cluster.get(NODE_POOL, "default") or {}
    assert found["status"]["nodeClassObservedGeneration"] == 1
    assert (condition_of(found) or {}).get("status") in ("Unknown", "True", "False")


@pytest.mark.parametrize(("status", "expected"), [("True", Status.HEALTHY), ("False", Status.UNHEALTHY)])
def test_an_unchanged_nodepool_keeps_its_condition_and_it_stands_for_the_results(status: str, expected: Status) -> None:
    """suite_test.go:124 and :133 "should not set NodeRegistrationHealthy … as Unknown if it is already set to
    true / false" — after a restart, the condition read back stands for the results."""
    cluster = MemoryCluster()
    health, nodepool = _observed(cluster, **_with(status))
    health.observe("default")
    assert (condition_of(cluster.get(NODE_POOL, "default") or {}) or {})["status"] == status
    assert health.state.status(objects.uid(nodepool)) is expected


# --- True and False, the controller on a Scene (nodeclaim/lifecycle/registration_test.go, liveness_test.go) --------


def test_a_registration_makes_the_nodepool_healthy(compiled: Path) -> None:
    """registration_test.go:139 "should match the nodeClaim to the Node when the Node comes online" (managed): the
    NodePool is Unknown from the controller's first step, True once its claim registered."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    controller = scene.controller()
    scene.step(controller)
    assert _status(_health(scene))[0] == "Unknown"  # type: ignore[index]
    _pod(scene, "web")
    scene.run(controller, 180, until=lambda: (_health(scene) or {}).get("status") == "True")
    assert _status(_health(scene)) == ("True", "NodeRegistrationHealthy", "")
    assert _health(scene)["observedGeneration"] == 1  # type: ignore[index]
    assert _status(_health(scene, "batch"))[0] == "Unknown"  # type: ignore[index]


def test_a_registration_turns_a_false_nodepool_true_when_nothing_failed_since_the_start() -> None:
    """registration_test.go:495 "should add NodeRegistrationHealthy=true on the nodePool if registration succeeds and
    if it was previously false": no results are recorded (the Go test's NodePool has no class for the
    registrationhealth controller to read the condition back from), so one registration is healthy. The claim
    registers as the Go test's does, without a launch: a NodePool without its class is not Ready, and the controller
    does not provision from it (`test_v1_nodepool_readiness.py`)."""
    cluster = MemoryCluster()
    health, nodepool = _observed(cluster, **_with("False"))
    cluster.delete(EC2_NODE_CLASS, "default")
    health.observe("default")
    claim = {"metadata": {"name": "default-abcde", "labels": {wk.NODEPOOL: "default"},
                          "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default",
                                               "uid": objects.uid(nodepool)}]}}
    health.registered(claim)
    assert _status(condition_of(cluster.get(NODE_POOL, "default") or {})) == ("True", "NodeRegistrationHealthy", "")


def test_one_registration_timeout_leaves_the_nodepool_unknown(compiled: Path) -> None:
    """liveness_test.go:97 "should delete the nodeClaim when the Node hasn't registered past the registration
    timeout": one failure among the results is not unhealthy."""
    scene = Scene(compiled, types=[TYPE], never_join=[TYPE])
    _apply(scene.cluster)
    _pod(scene, "web")
    controller = scene.controller(registration_ttl=300)
    scene.run(controller, 600, until=lambda: _disrupted(scene, controller, "registration_timeout") >= 1)
    assert _disrupted(scene, controller, "registration_timeout") == 1
    assert _status(_health(scene))[0] == "Unknown"  # type: ignore[index]


def test_two_registration_timeouts_make_the_nodepool_unhealthy(compiled: Path) -> None:
    """liveness_test.go:304 and :354 "should update NodeRegistrationHealthy status condition to False … there are >=2
    registration failures" (from True and from Unknown) — here two kubelets that never join: the claims had
    launched, so reason RegistrationFailed."""
    scene = Scene(compiled, types=[TYPE], never_join=[TYPE])
    _apply(scene.cluster, **_with("True", "NodeRegistrationHealthy"))
    _pod(scene, "web-0")
    _pod(scene, "web-1")
    controller = scene.controller(registration_ttl=300)
    scene.run(controller, 600, until=lambda: _disrupted(scene, controller, "registration_timeout") >= 2)
    assert _status(_health(scene)) == ("False", *FAILED)
    for name in ("karpenter_machines_terminated", "karpenter_machines_terminated_total"):
        assert scene.metric(controller, name, reason="liveness", provisioner="NodePool/default") is None


def test_launch_timeouts_are_failures_with_the_launch_condition_as_reason(compiled: Path) -> None:
    """liveness_test.go:354 with v1.14.1's launch failures: two claims not launched within the launch timeout,
    whose Launched condition says LaunchFailed — False with that reason and message."""
    scene = Scene(compiled, types=[TYPE])
    created = _apply(scene.cluster)
    failure = ("LaunchFailed", "creating instance, no subnet matches")
    _orphan_claim(scene, "default-bbbbb", created["NodePool/default"], failure)
    _orphan_claim(scene, "default-ccccc", created["NodePool/default"], failure)
    controller = scene.controller()
    scene.run(controller, 420, until=lambda: not scene.nodeclaims())
    assert _status(_health(scene)) == ("False", *failure)
    assert _disrupted(scene, controller, "launch_timeout", "") == 2


def test_launches_failing_for_the_launch_timeout_make_the_nodepool_unhealthy(compiled: Path) -> None:
    """liveness_test.go:354 as v1.14.1 gets there: two claims whose launches keep failing (not for capacity) are
    deleted at the launch timeout — here the same pods' claims failing for 5 minutes since their first failure —,
    False with the LaunchFailed reason and the launch's error; nothing before."""
    scene = Scene(compiled, types=[TYPE])
    _apply(scene.cluster)
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": wk.HOSTNAME}]}}
    for name in ("web-0", "web-1"):
        scene.add_pod(name, cpu="1", labels={"app": "web"}, affinity=apart, nodeSelector={wk.NODEPOOL: "default"})
    cloud = scene.cloud
    cloud.create = lambda request: (_ for _ in ()).throw(  # type: ignore[method-assign]
        ConfigurationError("fake", "no subnet matches"))
    controller = scene.controller()
    scene.run(controller, 240)
    assert _status(_health(scene))[0] == "Unknown"  # type: ignore[index]
    scene.run(controller, 300, until=lambda: (_health(scene) or {}).get("status") == "False")
    found = _health(scene) or {}
    assert (found["status"], found["reason"]) == ("False", "LaunchFailed")
    assert "no subnet matches" in found["message"]
    assert _disrupted(scene, controller, "launch_timeout", "") == 2


def test_one_registration_after_two_failures_leaves_the_nodepool_unhealthy(compiled: Path) -> None:
    """registration_test.go:531 "should not add NodeRegistrationHealthy=true on the nodePool if registration succeeds
    once and if it had previously failed twice"."""
    scene = Scene(compiled, types=[TYPE])
    created = _apply(scene.cluster)
    _orphan_claim(scene, "default-bbbbb", created["NodePool/default"])
    _orphan_claim(scene, "default-ccccc", created["NodePool/default"])
    controller = scene.controller()
    scene.run(controller, 420, until=lambda: not scene.nodeclaims())
    assert _status(_health(scene)) == ("False", "AwaitingReconciliation", "object is awaiting reconciliation")
    _pod(scene, "web")
    scene.run(controller, 180, until=lambda: any(
        c.get("type") == "Registered" and c.get("status") == "True"
        for claim in scene.nodeclaims().values() for c in claim.get("status", {}).get("conditions", [])))
    scene.run(controller, 5)
    assert _status(_health(scene))[0] == "False"  # type: ignore[index]


def test_a_claim_of_a_deleted_nodepool_does_not_count_for_its_namesake(compiled: Path) -> None:
    """liveness_test.go:403 and registration_test.go:616 "should not update NodeRegistrationHealthy status condition
    if nodePool owning the nodeClaim is deleted": the NodePool recreated has another uid."""
    scene = Scene(compiled, types=[TYPE])
    created = _apply(scene.cluster)
    _orphan_claim(scene, "default-bbbbb", created["NodePool/default"])
    _orphan_claim(scene, "default-ccccc", created["NodePool/default"])
    scene.cluster.delete(NODE_POOL, "default")
    scene.cluster.create(NODE_POOL, {k: v for k, v in created["NodePool/default"].items() if k != "status"}
                         | {"metadata": {"name": "default"}})
    controller = scene.controller()
    scene.run(controller, 420, until=lambda: not scene.nodeclaims())
    assert not scene.nodeclaims()
    assert _status(_health(scene))[0] == "Unknown"  # type: ignore[index]


# --- writes that do not take --------------------------------------------------------------------------------------


class _Refusing(MemoryCluster):
    """An API server that refuses NodePool status writes (RBAC without nodepools/status), or (`prune`) stores them
    without the condition (a NodePool CRD without the field)."""

    def __init__(self, prune: bool = False, **options: Any) -> None:
        super().__init__(**options)
        self.prune = prune

    def update(self, kind: Kind, obj: Obj, subresource: str | None = None, *, timeout: float | None = None) -> Obj:
        if kind == NODE_POOL and subresource == "status":
            if not self.prune:
                raise error_for_status(403, 'nodepools.karpenter.sh "default" is forbidden', "Forbidden")
            obj = {**obj, "status": {k: v for k, v in obj["status"].items() if k != "conditions"}}
        return super().update(kind, obj, subresource, timeout=timeout)


@pytest.mark.parametrize("prune", [False, True])
def test_a_refused_or_pruned_write_is_counted_and_the_node_still_launches(compiled: Path, prune: bool) -> None:
    scene = Scene(compiled, types=[TYPE], cluster=_Refusing(prune))
    _apply(scene.cluster)
    _pod(scene, "web")
    controller = scene.controller()
    scene.run(controller, 180, until=lambda: not scene.unbound())
    scene.run(controller, 10)
    assert scene.unbound() == []
    assert _health(scene) is None
    reason = "pruned" if prune else "refused"
    assert (scene.metric(controller, "karpenter_policy_nodepool_status_failures_total", reason=reason) or 0) >= 2
