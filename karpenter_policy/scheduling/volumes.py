"""A pod's shape with its volumes applied, as Karpenter applies them before it schedules the pod: the one function
`check --workloads` and the controller use (`model/volumes.py` reads the volumes).

The volumes' requirements are ANDed into every required node-selector term of the pod (one is made when it has
none), so relaxation never drops them (Karpenter v0.31.1's `VolumeTopology.Inject`); a reason Karpenter v1.14.1
ignores the pod for (`model.volumes.ignored_v1`) is added to the NodePools' refusal (`PodShape.refused_v1`).
"""

from __future__ import annotations

from dataclasses import replace

from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling.pods import PodShape


def with_volumes(shape: PodShape, requirements: Requirements, ignored_v1: str | None = None) -> PodShape:
    """`shape` with the volumes' `requirements` in each required term and `ignored_v1` in its v1 refusal."""
    if ignored_v1 is not None:
        refused_v1 = f"{shape.refused_v1}; {ignored_v1}" if shape.refused_v1 else ignored_v1
        shape = replace(shape, refused_v1=refused_v1)
    if not requirements:
        return shape
    scheduling = shape.scheduling
    terms = scheduling.required_terms or (Requirements(),)
    required = tuple(term.intersection(requirements) for term in terms)
    return replace(shape, scheduling=replace(scheduling, required_terms=required))


__all__ = ["with_volumes"]
