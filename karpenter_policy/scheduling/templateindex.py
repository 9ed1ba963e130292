"""An index of node claim templates by their taints and the custom labels they define: which templates may take a pod.

A pod that requires a custom label (`team In [payments]`) can only run on nodes of a template that defines that
label with one of those values (Karpenter's compatibility rule: a custom key the pod constrains must be defined by
the provisioner). Most pods of a real cluster select a team or a workload class this way, so most templates are
ruled out by one dictionary look-up per key instead of a requirements check per template. Templates with taints
the pod does not tolerate are ruled out too (GPU and dedicated pools). The scheduler then asks only the remaining
templates (and their claims) the exact question.

The answer is a superset of the templates that admit the pod (a necessary condition only; never a wrong "no"), as
a bit mask over the templates' order, and is cached per requirements and per tolerations (replicas share theirs).
"""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_policy.model.requirements import Operator, Requirements
from karpenter_policy.model.taints import Toleration, untolerated
from karpenter_policy.scheduling.templates import NodeClaimTemplate

_CACHE_LIMIT = 65536


class TemplateIndex:
    """The templates of a scheduling run (in its order), indexed by their custom label keys and values."""

    def __init__(self, templates: Sequence[NodeClaimTemplate], well_known: frozenset[str]) -> None:
        self.templates = tuple(templates)
        self.everything = (1 << len(self.templates)) - 1
        self.position = {id(template): p for p, template in enumerate(self.templates)}
        self._well_known = well_known
        self._open: dict[str, int] = {}  # key → the templates whose requirement on it is not a finite set
        self._by_value: dict[str, dict[str, int]] = {}  # key → value → the templates whose finite set holds it
        for p, template in enumerate(self.templates):
            bit = 1 << p
            for key, requirement in template.requirements.items():
                if key in well_known:
                    continue
                if requirement.complement:
                    self._open[key] = self._open.get(key, 0) | bit
                else:
                    values = self._by_value.setdefault(key, {})
                    for value in requirement.values:
                        values[value] = values.get(value, 0) | bit
        self._cache: dict[Requirements, int] = {}
        self._tolerated: dict[tuple[Toleration, ...], int] = {}

    def candidates(self, requirements: Requirements, tolerations: tuple[Toleration, ...]) -> int:
        """The templates that may take a pod with `requirements` and `tolerations` (bits of the run's order)."""
        tolerated = self._tolerated.get(tolerations)
        if tolerated is None:
            tolerated = self.everything
            for p, template in enumerate(self.templates):
                if template.taints and untolerated(template.taints, tolerations):
                    tolerated &= ~(1 << p)
            if len(self._tolerated) > _CACHE_LIMIT:
                self._tolerated.clear()
            self._tolerated[tolerations] = tolerated
        return tolerated & self._admitting(requirements)

    def _admitting(self, requirements: Requirements) -> int:
        cached = self._cache.get(requirements)
        if cached is None:
            cached = self.everything
            for key, requirement in requirements.items():
                if key in self._well_known or requirement.operator() != Operator.IN:
                    continue  # well-known keys may be left open; NotIn/DoesNotExist/Exists/bounds: checked exactly
                found = self._open.get(key, 0)
                values = self._by_value.get(key)
                if values:
                    for value in requirement.values:
                        found |= values.get(value, 0)
                cached &= found
                if not cached:
                    break
            if len(self._cache) > _CACHE_LIMIT:
                self._cache.clear()
            self._cache[requirements] = cached
        return cached

    def admits_maybe(self, template: NodeClaimTemplate, candidates: int) -> bool:
        """Whether `template` is among `candidates`."""
        return bool(candidates >> self.position[id(template)] & 1)
