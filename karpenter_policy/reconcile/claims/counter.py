"""A NodePool's `status.resources` and `status.nodes`, as Karpenter v1.14.1's counter controller writes them (core
pkg/controllers/nodepool/counter/controller.go; the sums from pkg/controllers/state/cluster.go
`updateNodePoolResources`): the capacity of the NodePool's nodes not being deleted, summed per resource, with
`cpu`, `memory`, `pods`, `ephemeral-storage` and `nodes` always present (`BaseResources`, zero when no node runs)
and `nodes` their count; `status.nodes` is that count as a number.

Quantities are spelled as Go's `resource.Quantity` prints a sum (`model.quantity.canonical`): cpu, pods and the node
count in the largest decimal suffix whose mantissa is whole (`600m`, `2`, `1k` for a thousand), memory and ephemeral
storage — binary from the node's capacity — in the largest binary suffix that divides them exactly (`6Gi`,
`7934464Ki`; bytes otherwise, decimal below 1Ki). Here the counts come from the controller's cluster state
(`ClusterState.used`, `node_counts`: the same numbers as `karpenter_nodepools_usage` and the limits); a node counts
with its Node (the controller writes it at launch), so a claim not launched yet does not. Pure: `nodepoolstatus`
writes what `resources` returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from karpenter_policy.model.quantity import canonical
from karpenter_policy.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, parse_quantity
from karpenter_policy.scheduling.vectors import RESOURCES, Vector, to_decimal

NODES: Final = "nodes"
#: `counter.BaseResources`: always written, zero when nothing runs.
BASE: Final = (CPU, MEMORY, PODS, EPHEMERAL_STORAGE, NODES)


def resources(used: Vector | None, nodes: int) -> dict[str, str]:
    """`status.resources` for a NodePool whose nodes (not being deleted) have `used` capacity and number `nodes`."""
    out = {name: "0" for name in BASE}
    for name, value in zip(RESOURCES, used or (), strict=False):
        if not value and name not in BASE:
            continue
        out[name] = canonical(to_decimal(name, value), binary=name in (MEMORY, EPHEMERAL_STORAGE))
    out[NODES] = canonical(Decimal(nodes), binary=False)
    return dict(sorted(out.items()))


def set_counts(nodepool: dict[str, Any], counted: Mapping[str, str]) -> bool:
    """Write `counted` (`resources`) as the NodePool's `status.resources` and its `nodes` as `status.nodes`, in
    place; whether anything changed."""
    status = nodepool.get("status")
    if not isinstance(status, dict):
        status = nodepool["status"] = {}
    nodes = int(parse_quantity(counted.get(NODES, "0")))
    if status.get("resources") == dict(counted) and status.get("nodes") == nodes:
        return False
    status["resources"] = dict(counted)
    status["nodes"] = nodes
    return True


__all__ = ["BASE", "NODES", "resources", "set_counts"]
