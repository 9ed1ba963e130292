"""A batch that puts some pods on existing nodes and launches nodes for the rest calls CreateFleet first: binding
hundreds of pods to existing nodes (an API call each) must not hold the launches back (issue #23)."""

from __future__ import annotations

from typing import Any

from karpenter_policy.kube import objects

from .conftest import MakeHarness
from .support import container, create_all, inflate, replicas


def test_the_launches_of_a_batch_come_before_its_bindings_to_existing_nodes(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    (first,) = h.batch().launched  # a node with room left for small pods
    launched_when_bound: list[int] = []
    original = h.cluster.bind

    def bind(namespace: str, pod_name: str, node_name: str, *args: Any) -> None:
        if node_name == first.node:
            launched_when_bound.append(len(h.cloud.requests))  # type: ignore[attr-defined]
        original(namespace, pod_name, node_name, *args)

    h.cluster.bind = bind  # type: ignore[method-assign]
    requests_before = len(h.cloud.requests)  # type: ignore[attr-defined]
    create_all(h.cluster, objects.POD, [*replicas("small", 0, 2, containers=[container("200m")]),
                                        *replicas("big", 0, 4, containers=[container("2")])])
    result = h.batch()
    assert result.launched and launched_when_bound, "the batch both launched and bound pods to the existing node"
    assert min(launched_when_bound) > requests_before, "CreateFleet was called before the first binding"
    assert [n for n in h.unbound() if n.startswith(("small", "big"))] == []
