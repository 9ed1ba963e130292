"""A plan made ahead (`provisioning/ahead.py`) survives churn of bound pods — a cluster whose pods are replaced all
the time would otherwise never keep one — but not a change that could alter it: pending pods that spread over
topology, or a node it places pods on filled meanwhile."""

from __future__ import annotations

from karpenter_policy.kube import objects

from .conftest import MakeHarness
from .support import Harness, container, create_all, inflate, pod, replicas


def plans_ahead(h: Harness, used: str) -> float:
    value = h.controller.metrics.registry.get_sample_value("karpenter_policy_plans_ahead_total", {"used": used})
    return value or 0.0


def churn(h: Harness, node: str, first: int, count: int = 5, cpu: str = "10m") -> None:
    """Bound pods created on `node`, one updated and one deleted: what a busy cluster sends between two batches."""
    bound = [pod(f"churn-{i}", containers=[container(cpu)], nodeName=node,
                 owner=("ReplicaSet", "churn-7f9c")) for i in range(first, first + count)]
    create_all(h.cluster, objects.POD, bound)
    h.cluster.patch(objects.POD, f"churn-{first}", {"metadata": {"annotations": {"tick": "1"}}}, namespace="default")
    h.cluster.delete(objects.POD, f"churn-{first + 1}", namespace="default")


def plan_ahead_then(h: Harness) -> tuple[float, float]:
    """Open a window and let it plan ahead; the plans-ahead counts (used, not used) before its close."""
    before = (plans_ahead(h, "true"), plans_ahead(h, "false"))
    h.step()
    h.clock.advance(0.25)
    h.step()  # planned ahead
    h.clock.advance(0.25)
    return before


def used_since(h: Harness, before: tuple[float, float]) -> tuple[float, float]:
    return plans_ahead(h, "true") - before[0], plans_ahead(h, "false") - before[1]


def test_a_plan_made_ahead_is_used_though_bound_pods_came_and_went(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    before = plan_ahead_then(h)
    churn(h, "ip-10-9-9-9.ec2.internal", 0)
    h.step()
    h.clock.advance(0.5)
    closed = h.step()
    assert closed.scheduled and len(closed.launched) == 1 and not [n for n in h.unbound() if n.startswith("inf")]
    assert used_since(h, before) == (1.0, 0.0)


def test_a_plan_for_pods_spread_over_zones_is_made_again_after_churn(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    create_all(h.cluster, objects.POD, replicas("web", 0, 3, containers=[container("1")],
                                                topologySpreadConstraints=spread))
    before = plan_ahead_then(h)
    churn(h, "ip-10-9-9-9.ec2.internal", 0)
    h.step()
    h.clock.advance(0.5)
    closed = h.step()
    assert closed.scheduled and not [n for n in h.unbound() if n.startswith("web")]
    assert used_since(h, before) == (0.0, 1.0)


def test_a_plan_onto_a_node_that_churn_filled_is_made_again(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    (launched,) = h.batch().launched  # a c6a.xlarge with three 1-vCPU pods: room for half a vCPU more
    create_all(h.cluster, objects.POD, replicas("small", 0, 1, containers=[container("500m")]))
    before = plan_ahead_then(h)  # planned onto the existing node
    churn(h, launched.node, 10, count=3, cpu="300m")  # two 300m pods stay: the node's room is gone
    h.step()
    h.clock.advance(0.5)
    closed = h.step()
    assert closed.scheduled and len(closed.launched) == 1, "the pod needs a node of its own now"
    assert used_since(h, before) == (0.0, 1.0)


def test_a_plan_made_ahead_is_used_though_a_node_sent_a_status_heartbeat(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    (launched,) = h.batch().launched
    create_all(h.cluster, objects.POD, inflate(3, 3))
    before = plan_ahead_then(h)
    node = h.cluster.get(objects.NODE, launched.node)
    conditions = [{**c, "lastHeartbeatTime": "2030-01-01T00:00:00Z"} for c in node["status"]["conditions"]]
    h.cluster.patch(objects.NODE, launched.node, {"status": {"conditions": conditions}})
    h.step()
    h.clock.advance(0.5)
    closed = h.step()
    assert closed.scheduled and len(closed.launched) == 1
    assert used_since(h, before) == (1.0, 0.0)
