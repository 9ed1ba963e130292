"""Dead values: the values of a satisfiable Provisioner's In requirement that exist in the catalog, yet no instance
type the Provisioner admits has — another requirement or one of Karpenter's defaults rules them out
(Karpenter's examples/provisioner/multiple-ebs.yaml: `instance-family In [c6g, c7g, ..., m6a, ...]` under the
defaulted `kubernetes.io/arch In [amd64]`: the Graviton families can never launch). The `dead-value` warning names
them; `provisioners` explains what excludes them with the solver's core.

Only written requirements on the labels of instance types count (family, type, size, category, generation, CPU,
GPU names, ...): zones and capacity types depend on the offering, and a value the catalog lacks altogether is an
`unknown-instance-type` or `unknown-label-value` finding already.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpenter_policy.catalog.table import CatalogTable
from karpenter_policy.checks.proof.solver import Origin, Term
from karpenter_policy.model.requirements import Operator, Requirement


@dataclass(frozen=True, slots=True)
class DeadValues:
    """An In requirement (`term`, the `index`-th of the Provisioner's terms) and its values no admitted type has."""

    index: int
    term: Term
    values: tuple[str, ...]

    def as_term(self) -> Term:
        """The requirement narrowed to its dead values (what the solver proves unsatisfiable with the others)."""
        return Term(Requirement.new(self.term.key, "In", list(self.values)), self.term.path, self.term.origin)


def dead_values(terms: Sequence[Term], admitted: Iterable[str], table: CatalogTable) -> list[DeadValues]:
    """Each written In requirement on an instance-type label whose catalog values include some that none of the
    `admitted` instance types (the Provisioner's, proven) has, with those values in the order written."""
    candidates = [
        (index, term)
        for index, term in enumerate(terms)
        if term.origin == Origin.REQUIREMENT
        and term.requirement.operator() == Operator.IN
        and len(term.requirement.values) > 1
        and table.is_catalog_key(term.key)
    ]
    if not candidates:
        return []
    position = table.catalog.derived("type-positions", lambda: _positions(table))
    rows = [position[name] for name in admitted if name in position]
    found: list[DeadValues] = []
    for index, term in candidates:
        domain = table.domains[term.key]
        column = table.value_index[term.key]
        carried = {domain[column[row]] for row in rows if column[row] < len(domain)}
        existing = set(domain)
        dead = tuple(sorted(v for v in term.requirement.values if v in existing and v not in carried))
        if dead:
            found.append(DeadValues(index, term, dead))
    return found


def _positions(table: CatalogTable) -> dict[str, int]:
    """Each type's row in `table` (the catalog's order: every table of one catalog has it)."""
    return {it.name: i for i, it in enumerate(table.types)}


__all__ = ["DeadValues", "dead_values"]
