"""The `limits` warning: a provisioner whose `limits.resources` are below the capacity of every instance type it
can launch, so Karpenter never launches a node for it — or a NodePool whose `spec.limits.nodes` is 0 (Karpenter
v1.14.1's scheduler then refuses every NodeClaim: "node limits have been exhausted for nodepool", `addToNewNodeClaim`
in core pkg/controllers/provisioning/scheduling/scheduler.go). Run by every `check` (and the webhook), with or
without workloads; capacities are the scheduler's node shapes (Karpenter v0.31's arithmetic, `model.allocatable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from karpenter_policy.api.kinds import PROVISIONER_KIND, object_ref
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.api.violations import LIMITS, WARNING
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model.allocatable import GlobalSettings
from karpenter_policy.model.pods import describe_quantity
from karpenter_policy.model.resources import MEMORY, NODES
from karpenter_policy.scheduling import InstanceTable
from karpenter_policy.scheduling.reasons import format_resource
from karpenter_policy.scheduling.templates import limited_amounts, node_configuration, node_shapes
from karpenter_policy.scheduling.vectors import RESOURCES, to_decimal


def limits_findings(
    doc: Document,
    provisioner: Provisioner,
    instance_types: Iterable[str],
    table: InstanceTable,
    node_template: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """`limits` (warning) for a provisioner and the instance types proven for it, at the limit that excludes its
    smallest type; nothing when some type fits within the limits (or there are no limits)."""
    names = [n for n in instance_types if n in table.position]
    if provisioner.limits.get(NODES) == 0:
        line, column = doc.position(("spec", "limits", "resources", NODES))
        message = "limits nodes: 0: Karpenter never launches a node for it (node limits are exhausted from the start)"
        ref = object_ref(provisioner.kind, provisioner.name)
        return [Finding(LIMITS, WARNING, message, doc.file, line, column, ref)]
    limits = limited_amounts(provisioner.limits)
    if not names or not limits:
        return []
    try:  # only the node shapes: the types are known (no template to build, no masks to compute)
        capacity = node_shapes(table, node_configuration(provisioner.kubelet, node_template)).capacity
    except ValueError:
        return []  # a malformed kubelet or node template: reported by validation
    types = [table.position[n] for n in names]
    if any(all(capacity[i][r] <= limits[r] for r in limits) for i in types):
        return []
    # The resource whose limit is below the smallest type (of that resource); else the first limited one.
    binding = next((r for r in sorted(limits) if min(capacity[i][r] for i in types) > limits[r]), min(limits))
    smallest = min(types, key=lambda i: (capacity[i][binding], capacity[i], table.names[i]))
    name = RESOURCES[binding]
    have = to_decimal(name, capacity[smallest][binding])
    size = describe_quantity(name, have)
    if name == MEMORY:
        overhead = Decimal(str(GlobalSettings().vm_memory_overhead_percent * 100)).normalize()
        size += f" after the {overhead} % VM overhead"
    v1 = provisioner.kind != PROVISIONER_KIND
    field_name, noun = ("limits", "NodePool") if v1 else ("limits.resources", "provisioner")
    message = (
        f"{field_name} {name}: {format_resource(name, provisioner.limits[name])} is smaller than the smallest "
        f"instance type the {noun} can launch ({table.names[smallest]}: {size}): Karpenter can never launch a "
        "node for it"
    )
    line, column = doc.position(("spec", "limits", "resources", name))
    return [Finding(LIMITS, WARNING, message, doc.file, line, column, object_ref(provisioner.kind, provisioner.name))]
