"""A static NodePool's new NodeClaim: v1.14.1's `scheduling.NewNodeClaimTemplate(np)` launched as it is (core
pkg/controllers/static/provisioning/controller.go, disruption/staticdrift.go) — the NodePool's requirements, every
instance type it admits with its cheapest allowed offering (cheapest first, as a launch from a scheduling run), no
pod; its DaemonSets' pods counted in its requests (the template's overhead)."""

from __future__ import annotations

from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling import ClaimPlan, NodeClaimTemplate
from karpenter_policy.scheduling.scheduler import launch_options
from karpenter_policy.scheduling.vectors import ZERO

__all__ = ["static_claim"]


def static_claim(template: NodeClaimTemplate, token: str) -> ClaimPlan:
    """The claim to launch for the static NodePool of `template`; `token` makes its launch's client token its own
    (two claims of one NodePool are otherwise identical)."""
    table = template.table
    options = launch_options(table, template.types, template.zone, template.capacity_type)
    requirements = Requirements(template.requirements[key] for key in template.requirements if key != wk.HOSTNAME)
    allocatable = template.shapes.allocatable[table.position[options[0].instance_type]] if options else ZERO
    return ClaimPlan(
        template=template.name,
        pods=(),
        requirements=requirements,
        options=options,
        requests=template.overhead,
        allocatable=allocatable,
        template_hash=f"{template.hash}/{token}",
        min_values=dict(template.min_values),
    )
