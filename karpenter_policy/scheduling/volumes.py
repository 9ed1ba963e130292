"""A pod's shape with its volumes applied, as Karpenter applies them before it schedules the pod: the one function
`check --workloads` and the controller use (`model/volumes.py` reads the volumes).

v0.31.1's requirements (the first term of each volume) are ANDed into every required node-selector term of the pod
(one is made when it has none), so relaxation never drops them (Karpenter v0.31.1's `VolumeTopology.Inject`): a
Provisioner reads those. When v1.14.1's alternatives say something else (a volume with several terms, a local or
hostPath volume's hostname), the shape keeps them and the pod as written (`PodShape.volume_alternatives`,
`unvolumed`): a NodePool's node or claim tries them in turn (`PodShape.attempts_v1`). A reason Karpenter v0.31.1
leaves the pod out for (`model.volumes.ignored_v031`) is added to the Provisioners' refusal (`PodShape.refused`),
one v1.14.1 ignores it for (`model.volumes.ignored_v1`) to the NodePools' (`PodShape.refused_v1`).
"""

from __future__ import annotations

from dataclasses import replace

from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling.pods import PodShape


def with_volumes(
    shape: PodShape,
    requirements: Requirements,
    ignored_v1: str | None = None,
    alternatives: tuple[Requirements, ...] | None = None,
    ignored_v031: str | None = None,
) -> PodShape:
    """`shape` with the volumes' `requirements` (v0.31.1's) in each required term, v1.14.1's `alternatives` kept
    when given (None: v1.14.1 reads the same requirements), `ignored_v1` in its v1 refusal and `ignored_v031` in
    its v0.31 one."""
    if ignored_v1 is not None:
        refused_v1 = f"{shape.refused_v1}; {ignored_v1}" if shape.refused_v1 else ignored_v1
        shape = replace(shape, refused_v1=refused_v1)
    if ignored_v031 is not None:
        refused = f"{shape.refused}; {ignored_v031}" if shape.refused else ignored_v031
        shape = replace(shape, refused=refused)
    if alternatives is not None:
        shape = replace(shape, volume_alternatives=alternatives, unvolumed=shape.scheduling)
    if not requirements:
        return shape
    scheduling = shape.scheduling
    terms = scheduling.required_terms or (Requirements(),)
    required = tuple(term.intersection(requirements) for term in terms)
    return replace(shape, scheduling=replace(scheduling, required_terms=required))


__all__ = ["with_volumes"]
