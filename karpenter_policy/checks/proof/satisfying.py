"""Which instance types satisfy a provisioner's requirements, decided with bit masks: no solver.

The question the solver proves (`solver`'s module docstring) — some type of the catalog, in a zone and capacity
type it is offered in, carries values every requirement accepts, under Karpenter v0.31's per-key match — is one
the scheduler's instance table answers with a few integer ANDs:

* a requirement on a label the types carry: the mask of the types whose value it accepts (a type without the
  label: only NotIn / DoesNotExist), `InstanceTable.requirement_mask`, cached per requirement;
* the OS: the node template decides it for every type (`os`);
* a launch label (a v1 NodePool's tenancy, `catalog.table.launch_labels`): every type offers each of its values,
  so some value must be accepted by every requirement on it;
* zone and capacity type: the types offered in a zone and a capacity type that every requirement on them
  accepts (`InstanceTable.offering_mask`);
* a custom label (one no type of the API version carries: `v1` reads v1.14.1's labels, else v0.31's): the node
  gets whatever value the provisioner's labels give it, so it only has to exist — some value (or absence) that all
  its requirements accept; the classes `catalog.table.custom_representatives` lists cover every value they can tell
  apart.

`Solver.solve` asks this first: a satisfiable provisioner is answered here in microseconds, with every satisfying
type, the zones and capacity types they are offered in and the cheapest offering among them; only an
unsatisfiable one goes to Z3, which explains it with minimal cores. tests/checks/proof/test_solver.py (and
test_v1_label_solver.py, on v1's labels) holds the two to the same verdicts and outputs on random requirements.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from karpenter_policy.catalog.table import KeyClasses, custom_representatives, launch_labels
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.requirements import Requirement
from karpenter_policy.scheduling import InstanceTable
from karpenter_policy.scheduling.instances import TYPE_KEYS, V1_TYPE_KEYS


@dataclass(frozen=True, slots=True)
class Satisfying:
    """The types that satisfy every requirement (sorted by name), the zones and capacity types some of them are
    offered in under the requirements (sorted), and the cheapest such offering (ties: type name, zone, capacity
    type)."""

    instance_types: tuple[str, ...]
    zones: tuple[str, ...]
    capacity_types: tuple[str, ...]
    witness: ChosenOffering


def satisfying(
    table: InstanceTable, requirements: Iterable[Requirement], os: str = "linux", v1: bool = False
) -> Satisfying | None:
    """What satisfies `requirements` on nodes running `os`, with the labels of one API version (`v1`: a Karpenter
    v1 NodePool's); None when nothing does."""
    by_key: dict[str, list[Requirement]] = {}
    for requirement in requirements:
        by_key.setdefault(requirement.key, []).append(requirement)
    type_keys, launch = V1_TYPE_KEYS if v1 else TYPE_KEYS, launch_labels(v1)
    mask = table.offered
    for key, group in by_key.items():
        if key in (wk.ZONE, wk.CAPACITY_TYPE):
            continue
        if key in launch:
            if not any(all(requirement.has(value) for requirement in group) for value in launch[key]):
                return None
        elif table.is_type_key(key, type_keys):
            for requirement in group:
                mask &= table.requirement_mask(requirement)
        elif key == wk.OS:
            if not all(requirement.has(os) for requirement in group):
                return None
        elif not _some_value(group):
            return None
        if not mask:
            return None
    zone = _allowed(wk.ZONE, table.zones, by_key.get(wk.ZONE, ()))
    capacity = _allowed(wk.CAPACITY_TYPE, table.capacity_types, by_key.get(wk.CAPACITY_TYPE, ()))
    mask &= table.offering_mask(zone, capacity)
    witness = table.cheapest(mask, zone, capacity) if mask else None
    if witness is None:
        return None
    zones = tuple(z for z in sorted(zone.values) if mask & table.offering_mask(_only(wk.ZONE, z), capacity))
    capacities = tuple(
        c for c in sorted(capacity.values) if mask & table.offering_mask(zone, _only(wk.CAPACITY_TYPE, c))
    )
    return Satisfying(table.names_of(mask), zones, capacities, witness)


def _some_value(group: Sequence[Requirement]) -> bool:
    """Some value of a custom label, or its absence, satisfies every requirement of `group` (all on one key)."""
    listed = next((r for r in group if not r.complement and r.values), None)
    if listed is not None:  # an `In` (a node label `key: value` is one): only its values can satisfy it
        return any(all(r.has(value) for r in group) for value in listed.values)
    requirements = tuple(group)
    return bool(KeyClasses.of(custom_representatives(requirements), requirements).accepted_by_all())


def _allowed(key: str, domain: Sequence[str], group: Sequence[Requirement]) -> Requirement:
    """`key In [...]`: the values of `domain` (every type's offerings have one) that each of `group` accepts."""
    return Requirement(key, False, frozenset(v for v in domain if all(r.has(v) for r in group)))


def _only(key: str, value: str) -> Requirement:
    return Requirement(key, False, frozenset((value,)))
