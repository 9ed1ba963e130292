"""Node shapes: capacity and allocatable of an instance type under a node template's configuration, as vectors.

The arithmetic (VM overhead, kube-reserved, system-reserved, eviction thresholds, max pods, ephemeral storage) is
`model.allocatable`'s — Karpenter v0.31's, the one copy every part of the tool uses; this module only turns its
units into the scheduler's vectors and keys the configurations so that each is computed once per instance table.
"""

from __future__ import annotations

from karpenter_policy.model.allocatable import NodeConfiguration, node_resources
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.scheduling.instances import ShapeFunction
from karpenter_policy.scheduling.vectors import RESOURCES, Vector


def configuration_key(node: NodeConfiguration) -> str:
    """A stable key for one node configuration (what a shape depends on)."""
    return repr(node)


def shape_function(node: NodeConfiguration) -> ShapeFunction:
    """Capacity and allocatable vectors of a type under this configuration."""

    def shape(it: InstanceType) -> tuple[Vector, Vector]:
        resources = node_resources(it, node)
        allocatable = resources.allocatable
        capacity = tuple(resources.capacity.get(name, 0) for name in RESOURCES)
        return capacity, tuple(allocatable.get(name, 0) for name in RESOURCES)

    return shape
