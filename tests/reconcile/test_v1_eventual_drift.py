"""Karpenter v1.14.1's eventual disruption class in the controller: a drifted NodePool node that a pod blocks — its
`karpenter.sh/do-not-disrupt`, or a PodDisruptionBudget allowing no eviction — is replaced all the same when its
NodeClaim has a `terminationGracePeriod` (which bounds the drain), and stays when it has none; consolidation and
expiry (the graceful class) never take it. No replacement is launched for a pod Karpenter cannot tell when it will
go (do-not-disrupt, a fully blocking budget: `IsCurrentlyReschedulable`). Each test names the Go test it follows
(kubernetes-sigs/karpenter v1.14.1, pkg/controllers/disruption/) and its line. The nodes are launched by the
controller from tests/reconcile/data/v1termination (`graceful`: terminationGracePeriod 300s; `patient`: none); the
drift is a template label added to both NodePools and compiled again."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.simulate.scene import Scene
from karpenter_policy.testing import compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1termination"
TEMPLATE = "  template:\n    spec:\n"
RELABELLED = '  template:\n    metadata:\n      labels: {rollout: "2"}\n    spec:\n'


class Rollout:
    """A node of `pool` launched by the controller for a seed pod (the seed then gone), and `drift()` that changes
    its NodePool so that the node drifts."""

    def __init__(self, tmp_path: Path, pool: str) -> None:
        self.policies = tmp_path / "policies"
        shutil.copytree(POLICIES, self.policies)
        self.build = compile_policies(self.policies, tmp_path / "build")
        self.scene = Scene(self.build, types=["m5.large"])
        self.pool = pool
        self.scene.add_pod("seed", cpu="100m", nodeSelector={wk.NODEPOOL: pool})
        self.controller = self.scene.controller()
        self.scene.run(self.controller, 120, until=lambda: not self.scene.unbound())
        (self.node,) = self.scene.nodes()
        self.scene.cluster.delete(objects.POD, "seed", "default")
        self.scene.run(self.controller, 5)

    def pod(self, name: str, **options: object) -> None:
        self.scene.add_pod(name, node=self.node, nodeSelector={wk.NODEPOOL: self.pool},
                           terminationGracePeriodSeconds=30, **options)  # type: ignore[arg-type]

    def drift(self) -> None:
        manifest = self.policies / "nodepools.yaml"
        text = manifest.read_text()
        assert text.count(TEMPLATE) == 2
        manifest.write_text(text.replace(TEMPLATE, RELABELLED))
        compile_policies(self.policies, self.build)

    def deleting(self) -> bool:
        node = self.scene.node(self.node)
        return node is None or objects.is_deleting(node)

    def others(self) -> list[str]:
        return sorted(name for name in self.scene.nodes() if name != self.node)

    def pod_deleting(self, name: str) -> bool:
        pod = next((p for p in self.scene.pods() if objects.name(p) == name), None)
        return pod is None or objects.is_deleting(pod)


def test_a_drifted_node_held_by_a_do_not_disrupt_pod_goes_within_its_termination_grace_period(tmp_path: Path) -> None:
    """suite_test.go:1045 "should consider candidates that have do-not-disrupt pods scheduled with a
    terminationGracePeriod set for eventual disruption" and drift_test.go:521 "should not create replacements for
    drifted nodes that have pods with the karpenter.sh/do-not-disrupt annotation…": the node is taken for drift, no
    node is launched for the held pod, the pod is never evicted and is deleted when the 300 s run out."""
    rollout = Rollout(tmp_path, "graceful")
    rollout.pod("held", annotations={wk.DO_NOT_DISRUPT: "true"})
    evictions = rollout.scene.record_evictions()
    rollout.drift()
    rollout.scene.run(rollout.controller, 120, until=rollout.deleting)
    assert rollout.deleting(), "drift takes the node although a do-not-disrupt pod runs on it"
    assert rollout.others() == [], "no replacement for a pod Karpenter cannot tell when it will go"
    assert not rollout.pod_deleting("held")
    rollout.scene.run(rollout.controller, 400, until=lambda: rollout.scene.node(rollout.node) is None)
    assert rollout.pod_deleting("held"), "the drain deletes the pod once the terminationGracePeriod runs out"
    assert evictions == []


def test_without_a_termination_grace_period_the_do_not_disrupt_pod_keeps_the_drifted_node(tmp_path: Path) -> None:
    """suite_test.go "should not consider candidates that have do-not-disrupt pods scheduled without a
    terminationGracePeriod set for eventual disruption": the node stays, and so does the pod."""
    rollout = Rollout(tmp_path, "patient")
    rollout.pod("held", annotations={wk.DO_NOT_DISRUPT: "true"})
    rollout.drift()
    rollout.scene.run(rollout.controller, 600, until=rollout.deleting)
    assert not rollout.deleting()
    assert not rollout.pod_deleting("held")
    assert rollout.others() == []


def test_a_fully_blocking_budget_lets_drift_take_the_node_without_a_replacement(tmp_path: Path) -> None:
    """suite_test.go:1074 "should consider candidates that have PDB-blocked pods scheduled with a
    terminationGracePeriod set for eventual disruption" and drift_test.go:543 "should not create replacements for
    drifted nodes that have pods with the blocking PDBs when the NodePool's TerminationGracePeriod is not nil":
    `maxUnavailable: 0` never lets the pod go, so nothing is launched for it; the drain deletes it at the end."""
    rollout = Rollout(tmp_path, "graceful")
    rollout.pod("db", labels={"app": "db"})
    rollout.scene.add_pdb("db", {"app": "db"}, max_unavailable=0)
    rollout.drift()
    rollout.scene.run(rollout.controller, 120, until=rollout.deleting)
    assert rollout.deleting()
    assert rollout.others() == []
    rollout.scene.run(rollout.controller, 400, until=lambda: rollout.scene.node(rollout.node) is None)
    assert rollout.pod_deleting("db")


def test_a_budget_that_allows_no_eviction_now_gets_its_pod_a_replacement_first(tmp_path: Path) -> None:
    """A budget that allows no eviction *now* (`minAvailable: 1` over its one pod) is not fully blocking: drift
    takes the node (eventual class) and, as for any drift, launches the pod's replacement node before the node
    drains (`IsCurrentlyReschedulable` keeps the pod in the simulation)."""
    rollout = Rollout(tmp_path, "graceful")
    rollout.pod("web", labels={"app": "web"})
    rollout.scene.add_pdb("web", {"app": "web"}, min_available=1)
    rollout.drift()
    rollout.scene.run(rollout.controller, 300, until=rollout.deleting)
    assert rollout.deleting()
    (replacement,) = rollout.others()
    assert objects.labels(rollout.scene.nodes()[replacement]).get("rollout") == "2"


def test_consolidation_never_takes_a_node_only_drift_may(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """suite_test.go "should not consider candidates that have do-not-disrupt pods scheduled with a
    terminationGracePeriod set for graceful disruption": with nothing drifted and consolidation on, a node of a
    NodePool with a terminationGracePeriod whose one pod is held stays, though another node has room for the pod —
    not even proposed (and then abandoned at validation) as a consolidation."""
    caplog.set_level(logging.INFO, "karpenter_policy.reconcile.controller.deprovisioning")
    rollout = Rollout(tmp_path, "graceful")
    manifest = rollout.policies / "nodepools.yaml"
    manifest.write_text(manifest.read_text().replace("consolidateAfter: Never", "consolidateAfter: 0s"))
    compile_policies(rollout.policies, rollout.build)  # `disruption` is not hashed: no drift
    rollout.scene.add_node("NodePool/graceful", "m5.large", annotations={wk.DO_NOT_DISRUPT: "true"})  # room
    rollout.pod("held", annotations={wk.DO_NOT_DISRUPT: "true"})
    rollout.scene.run(rollout.controller, 600, until=rollout.deleting)
    assert not rollout.deleting()
    assert not rollout.pod_deleting("held")
    proposed = [r.getMessage() for r in caplog.records if "consolidation" in r.getMessage()]
    assert not [m for m in proposed if rollout.node in m], proposed[:2]


def test_a_claim_whose_grace_period_cannot_be_read_keeps_its_blocked_node(tmp_path: Path) -> None:
    """A hostile write: the NodeClaim's `terminationGracePeriod` is no Go duration (`1e99999999h`; v1.14.1's CRD
    refuses it). Termination could never force the drain, so drift must not take the blocked node: it stays, as a
    node without the field does (was: taken, then held in its drain for ever)."""
    rollout = Rollout(tmp_path, "graceful")
    name = claim_of_node(rollout.scene.node(rollout.node) or {})
    assert name is not None
    claim = rollout.scene.cluster.get(objects.NODE_CLAIM, name)
    assert claim is not None
    rollout.scene.cluster.update(objects.NODE_CLAIM, {**claim, "spec": {**claim["spec"],
                                                                        "terminationGracePeriod": "1e99999999h"}})
    rollout.pod("held", annotations={wk.DO_NOT_DISRUPT: "true"})
    rollout.drift()
    rollout.scene.run(rollout.controller, 300, until=rollout.deleting)
    assert not rollout.deleting()
    assert not rollout.pod_deleting("held")
