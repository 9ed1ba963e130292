"""The Z3 encoding of a Provisioner against the instance-type catalog (the only module that imports z3).

What is proven: some instance type of the catalog, in some zone, with some capacity type (an available
offering), carries label values that every requirement term of the provisioner accepts — its requirements as
written, its labels (each `key In [value]`) and the requirements Karpenter's webhook adds by default — with
Karpenter v0.31's matching rule per key: a type that lacks a label satisfies only NotIn / DoesNotExist, and a
custom label (one the catalog does not define) only has to agree with the provisioner's other terms. Which labels
the catalog defines depends on the API version (`Solver(v1=...)`, `catalog.table.catalog_keys`): a v1 NodePool's
types carry the labels Karpenter v1.14.1 added (`model.labels.V1_INSTANCE_LABELS`), a v1alpha5 Provisioner's do
not (there they are custom labels, as in v0.31).

Encoding (one small Z3 problem per provisioner, over a catalog table built once per catalog):

* `t` (Int) indexes the provisioner's *projection* of the catalog: the catalog's types grouped into rows of
  types that no term of this provisioner can tell apart (same class of value for every label a term mentions,
  same offerings). The quotient is exact — a term accepts a value iff it accepts every value of its class —
  and keeps the problem to tens of rows instead of 1,400 types; the witness maps the row back to a type.
* `z` and `c` (Int) are the class of the zone and of the capacity type (the zones, resp. capacity types, that
  the terms cannot tell apart); each row allows exactly the (zone, capacity type) pairs its types are offered in.
* `v<k>` (Int) is the class of label `k`'s value on the chosen type (the table: `t = r -> v<k> = class`);
  `u<k>` (Int) is the class of a custom label's value (no table: one representative value per class), or of a
  launch label's (a v1 NodePool's tenancy: every type offers each of its values, `CatalogTable.launch_values`).
* every term is a tracked assertion `p -> constraint on v<k> / z / c / u<k>`, checked under the assumptions
  `p...` — what `assert_and_track` does, except that a subset can be re-checked in the same scope, which is how
  unsat cores are minimised (deletion: drop a member, re-check) and further, disjoint cores found.

Only what the bit masks of `satisfying` cannot satisfy reaches Z3 (`Solver.solve`): a satisfiable provisioner
is decided, listed and given its witness there, without Z3; Z3 proves the rest unsatisfiable and explains it
with minimal cores. One Z3 solver serves every problem that reaches it, each in a push/pop scope with its own
name prefix, in a Z3 context the solver replaces every `PROBLEMS_PER_CONTEXT` problems (what Z3 accumulates
stays bounded). Every check runs with a timeout (the solver's `timeout` parameter); a timeout is a verdict of its
own (`UNKNOWN`), never a hang. When Z3 finds a model (with the fast path off), the satisfying types, their zones
and capacity types and the witness (the cheapest offering) are computed from the encoding's classes in Python:
the same outputs `satisfying` gives, by an independent route.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from os import environ
from typing import Any

import z3

from karpenter_policy.api.defaults import default_requirements
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.catalog import Catalog
from karpenter_policy.catalog.table import (
    OFFERING_KEYS,
    CatalogTable,
    KeyClasses,
    custom_representatives,
    table_for,
)
from karpenter_policy.checks.proof.satisfying import satisfying
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType, known_price
from karpenter_policy.model.requirements import GTE, LTE, Operator, Requirement
from karpenter_policy.scheduling import InstanceTable

DEFAULT_TIMEOUT_MS = 5000
#: Declarations outlive `pop`: a fresh Z3 context after this many problems keeps what accumulates bounded.
PROBLEMS_PER_CONTEXT = 256
#: Set (to anything non-empty) in the environment, every `Solver` behaves as before issue #12: Z3 decides every
#: verdict, in z3's global context. For side-by-side benchmarks only.
BASELINE_ENV = "KARPENTER_POLICY_SOLVER_BASELINE"
#: How many independent conflicts one provisioner reports at most (each core is minimal and disjoint).
MAX_CORES = 8

#: The labels Karpenter v0.31 (AWS) derives from the instance type (`computeRequirements`): a type that has no
#: value for one of them (no GPU, no local NVMe) satisfies only NotIn / DoesNotExist on it.
_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)


# --- terms --------------------------------------------------------------------------------------------------


class Origin(StrEnum):
    """Where a term comes from (and so where a finding about it points)."""

    REQUIREMENT = "requirement"  # spec.requirements[i]
    LABEL = "label"  # spec.labels[key]
    DEFAULT = "default"  # added by Karpenter's defaulting webhook


@dataclass(frozen=True, slots=True)
class Term:
    """One tracked assertion: a requirement on one label key and the node of the policy it comes from."""

    requirement: Requirement
    path: FieldPath
    origin: Origin
    #: The term as written when the model's form reads otherwise (a NodePool's `Gte 7` is the model's `Gt 6`).
    written: str | None = None

    @property
    def key(self) -> str:
        return self.requirement.key

    def accepts(self, value: str | None) -> bool:
        """Karpenter's per-key match against a type's value (`None`: the type does not have the label)."""
        if value is None:
            return self.requirement.operator() in _NEGATIVE
        return self.requirement.has(value)

    def __str__(self) -> str:
        if self.origin == Origin.LABEL:
            return f"label {self.key}={next(iter(self.requirement.values), '')}"
        text = self.written or str(self.requirement)
        return f"{text} (Karpenter default)" if self.origin == Origin.DEFAULT else text


def terms_of(document: Mapping[str, Any]) -> list[Term]:
    """The tracked terms of a (valid) Provisioner document: its requirements as written, the requirements
    Karpenter adds by default, and its labels. Keys Karpenter ignores when scheduling (the region) are left out.
    A NodePool's view (`api.v1.objects.provisioner_document`, kind NodePool) has no default requirements: Karpenter
    v1 adds none."""
    spec = document.get("spec") or {}
    written: list[Mapping[str, Any]] = [r for r in spec.get("requirements") or [] if isinstance(r, Mapping)]
    terms: list[Term] = []
    for index, raw in enumerate(written):
        term = _term(raw, ("spec", "requirements", index), Origin.REQUIREMENT)
        if term is not None:
            terms.append(term)
    for raw in default_requirements(written) if document.get("kind") != NODEPOOL_KIND else ():
        term = _term(raw, ("spec", "requirements"), Origin.DEFAULT)
        if term is not None:
            terms.append(term)
    for key, value in (spec.get("labels") or {}).items():
        term = _term({"key": key, "operator": "In", "values": [value]}, ("spec", "labels", key), Origin.LABEL)
        if term is not None:
            terms.append(term)
    return terms


def _term(raw: Mapping[str, Any], path: FieldPath, origin: Origin) -> Term | None:
    values = raw.get("values") or []
    try:
        requirement = Requirement.new(str(raw.get("key", "")), str(raw.get("operator", "")), [str(v) for v in values])
    except ValueError:  # validation reports it; the solver only sees valid requirements
        return None
    if requirement.key in wk.IGNORED_LABELS:
        return None
    operator = str(raw.get("operator", ""))
    written = f"{requirement.key} {operator} {values[0]}" if operator in (GTE, LTE) else None
    return Term(requirement, path, origin, written)


# --- the catalog table (built once per catalog) -------------------------------------------------------------


class Verdict(StrEnum):
    SAT = "sat"
    UNSAT = "unsat"
    UNKNOWN = "unknown"  # the solver timed out (or gave up)


#: An instance type, zone and capacity type that satisfy every term (from the Z3 model).
Witness = ChosenOffering


@dataclass(frozen=True, slots=True)
class SolverResult:
    """What the solver found for one provisioner.

    SAT: `witness`, and every satisfying type (`instance_types`, sorted), the zones and capacity types that
    some satisfying type is offered in. UNSAT: `cores`, each a minimal set of terms that cannot hold together
    (disjoint; at most MAX_CORES). UNKNOWN: `reason` (a timeout).
    """

    verdict: Verdict
    cores: tuple[tuple[Term, ...], ...] = ()
    witness: Witness | None = None
    instance_types: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    capacity_types: tuple[str, ...] = ()
    reason: str = ""
    checks: int = 0
    seconds: float = 0.0
    rows: int = 0


# --- the encoding -------------------------------------------------------------------------------------------


class _Problem:
    """One provisioner's encoding: the classes of every key its terms mention, the projected catalog (rows),
    the SMT-LIB text."""

    def __init__(self, table: CatalogTable, terms: Sequence[Term]) -> None:
        self.table, self.terms = table, list(terms)
        by_key: dict[str, list[int]] = {}
        for index, term in enumerate(self.terms):
            by_key.setdefault(term.key, []).append(index)
        self.by_key = by_key
        self.catalog_keys = sorted(k for k in by_key if table.is_catalog_key(k))
        self.custom_keys = sorted(k for k in by_key if k not in OFFERING_KEYS and not table.is_catalog_key(k))
        self.classes: dict[str, KeyClasses] = {k: self._classes(k) for k in self.catalog_keys}
        for k in self.custom_keys:
            requirements = self._requirements(k)
            launched = table.launch_values.get(k)  # a launch label's values; a custom label's are any
            values = custom_representatives(requirements) if launched is None else launched
            self.classes[k] = KeyClasses.of(values, requirements)
        self.zone = KeyClasses.of(table.zones, self._requirements(wk.ZONE))
        self.capacity = KeyClasses.of(table.capacity_types, self._requirements(wk.CAPACITY_TYPE))
        # The catalog's offering sets as sets of (zone class, capacity-type class) pairs.
        offers: dict[frozenset[tuple[int, int]], int] = {}
        self.offers_of_set = [
            offers.setdefault(
                frozenset((self.zone.class_by_index[z], self.capacity.class_by_index[c]) for z, c in pairs),
                len(offers),
            )
            for pairs in table.offer_sets
        ]
        self.offers = list(offers)
        # Each type's signature: its class of every catalog key mentioned, then its offers (index into
        # self.offers). A row of the projected catalog is a distinct signature.
        columns = [table.class_column(k, self.classes[k]) for k in self.catalog_keys]
        offers_column = table.offers_column(self.offers_of_set)
        self.signatures: list[tuple[int, ...]] = list(zip(*columns, offers_column, strict=True))
        self.rows: list[tuple[int, ...]] = list(dict.fromkeys(self.signatures))

    def _requirements(self, key: str) -> tuple[Requirement, ...]:
        return tuple(self.terms[j].requirement for j in self.by_key.get(key, ()))

    def _classes(self, key: str) -> KeyClasses:
        return self.table.key_classes(key, self._requirements(key))

    def smtlib(self, prefix: str = "") -> str:
        """The rows (the catalog, projected) and one implication `p<j> => constraint` per term; every name
        starts with `prefix` (one solver serves many provisioners, and declarations outlive `pop`)."""
        q = prefix
        out = [f"(declare-const {q}t Int)(declare-const {q}z Int)(declare-const {q}c Int)"]
        out += [f"(declare-const {q}v{i} Int)" for i in range(len(self.catalog_keys))]
        out += [f"(declare-const {q}u{i} Int)" for i in range(len(self.custom_keys))]
        out += [f"(declare-const {q}p{j} Bool)" for j in range(len(self.terms))]
        out.append(f"(assert (and (<= 0 {q}t) (< {q}t {len(self.rows)})))")
        for i, k in enumerate(self.custom_keys):
            out.append(f"(assert (and (<= 0 {q}u{i}) (< {q}u{i} {len(self.classes[k].representative)})))")
        used = sorted({row[-1] for row in self.rows})
        out += [f"(define-fun {q}o{o} () Bool {_offer_text(self.offers[o], q)})" for o in used]
        for r, row in enumerate(self.rows):
            values = "".join(f" (= {q}v{i} {cls})" for i, cls in enumerate(row[:-1]))
            out.append(f"(assert (=> (= {q}t {r}) (and{values} {q}o{row[-1]})))")
        out += [f"(assert (=> {q}p{j} {self.constraint(j, q)}))" for j in range(len(self.terms))]
        return "\n".join(out)

    def constraint(self, j: int, prefix: str) -> str:
        """Term `j`'s constraint on the variables (named with `prefix`)."""
        key = self.terms[j].key
        position = self.by_key[key].index(j)
        if key == wk.ZONE:
            return _member(f"{prefix}z", self.zone.allowed[position])
        if key == wk.CAPACITY_TYPE:
            return _member(f"{prefix}c", self.capacity.allowed[position])
        if key in self.catalog_keys:
            return _member(f"{prefix}v{self.catalog_keys.index(key)}", self.classes[key].allowed[position])
        return _member(f"{prefix}u{self.custom_keys.index(key)}", self.classes[key].allowed[position])

    def satisfying(self) -> tuple[list[int], list[str], list[str]]:
        """Indices of the satisfying types, and the zones and capacity types they can be bought in (sorted)."""
        table = self.table
        allowed = [self.classes[k].accepted_by_all() for k in self.catalog_keys]
        zone_ok, capacity_ok = self.zone.accepted_by_all(), self.capacity.accepted_by_all()
        good_offers = {
            o for o, pairs in enumerate(self.offers) if any(z in zone_ok and c in capacity_ok for z, c in pairs)
        }
        good_rows = {
            row
            for row in self.rows
            if row[-1] in good_offers and all(cls in ok for cls, ok in zip(row, allowed, strict=False))
        }
        types = [i for i, signature in enumerate(self.signatures) if signature in good_rows]
        zones: set[int] = set()
        capacities: set[int] = set()
        for offer_set in {table.offer_set_of[i] for i in types}:
            for z, c in table.offer_sets[offer_set]:
                if self.zone.class_by_index[z] in zone_ok and self.capacity.class_by_index[c] in capacity_ok:
                    zones.add(z)
                    capacities.add(c)
        return (
            types,
            [table.zones[z] for z in sorted(zones)],
            [table.capacity_types[c] for c in sorted(capacities)],
        )


def _offer_text(pairs: frozenset[tuple[int, int]], prefix: str) -> str:
    """The (zone class, capacity-type class) pairs a row is offered in, as a constraint on z and c."""
    if not pairs:
        return "false"
    z, c = f"{prefix}z", f"{prefix}c"
    zones = sorted({zone for zone, _ in pairs})
    capacities = sorted({capacity for _, capacity in pairs})
    if len(pairs) == len(zones) * len(capacities):  # a product: zones x capacity types
        return f"(and {_member(z, zones)} {_member(c, capacities)})"
    return "(or " + " ".join(f"(and (= {z} {zone}) (= {c} {cap}))" for zone, cap in sorted(pairs)) + ")"


def _member(variable: str, allowed: Iterable[int]) -> str:
    values = sorted(allowed)
    if not values:
        return "false"
    if len(values) == 1:
        return f"(= {variable} {values[0]})"
    return "(or " + " ".join(f"(= {variable} {v})" for v in values) + ")"


# --- solving ------------------------------------------------------------------------------------------------


class Solver:
    """Proves provisioners against one catalog: satisfiable ones by bit masks (`satisfying`), the others with Z3
    (each minimal core, found on the masks, proven unsatisfiable by Z3 on its own terms).

    The catalog tables are built once per catalog. One Z3 solver serves every provisioner that reaches Z3, each
    in a push/pop scope of its own, its names prefixed; solver and declarations live in a Z3 context of the
    solver's own, replaced after `PROBLEMS_PER_CONTEXT` problems. Declarations outlive `pop`: in one context
    (z3's global one, as before issue #12) they pile up for as long as the process runs, and every check and
    model read slows with them (a webhook's `Z3_solver_get_model` went from 0.4 ms to 14.6 ms per call after
    ~5,000 objects). Dropping the context frees them.

    `fast_path=False` decides every verdict with Z3, and `own_context=False` keeps everything in z3's global
    context: the behaviour before issue #12, for comparison (tests, benchmarks; `BASELINE_ENV` sets both).
    """

    def __init__(
        self,
        catalog: Catalog,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        os: str = "linux",
        *,
        v1: bool = False,
        fast_path: bool | None = None,
        own_context: bool | None = None,
    ) -> None:
        if timeout_ms < 1:
            raise ValueError("timeout_ms must be at least 1")
        baseline = bool(environ.get(BASELINE_ENV))
        self.catalog = catalog
        self.os = os
        self.v1 = v1
        self.table = table_for(catalog, os, v1)
        self.instances = InstanceTable.of_catalog(catalog)
        self.timeout_ms = timeout_ms
        self.fast_path = not baseline if fast_path is None else fast_path
        self.own_context = not baseline if own_context is None else own_context
        self._context: z3.Context | None = None
        self._z3: z3.Solver | None = None
        self._problems = 0

    def solve(self, terms: Sequence[Term]) -> SolverResult:
        """Prove `terms` (see `terms_of`) satisfiable against the catalog, or find why not."""
        start = time.perf_counter()
        if self.fast_path:
            found = satisfying(self.instances, [term.requirement for term in terms], self.os, self.v1)
            if found is not None:
                return SolverResult(
                    Verdict.SAT,
                    witness=found.witness,
                    instance_types=found.instance_types,
                    zones=found.zones,
                    capacity_types=found.capacity_types,
                    seconds=time.perf_counter() - start,
                )
            explained = self._explain(terms, start)
            if explained is not None:
                return explained
        problem = _Problem(self.table, terms)
        solver, prefix = self._next_solver()
        solver.push()
        try:
            solver.from_string(problem.smtlib(prefix))
            return self._solve(solver, problem, prefix, start)
        finally:
            solver.pop()

    def _explain(self, terms: Sequence[Term], start: float) -> SolverResult | None:
        """Unsatisfiable by the masks: the minimal cores, found on the masks (QuickXplain's many subset checks,
        each a few bit operations), each then proven unsatisfiable by Z3 on its own terms (one check on a small
        encoding) — the same cores as Z3 alone finds, since the verdicts are the same (a property test keeps
        them so). None when Z3 does not confirm a core (it timed out, or disagrees): Z3 then decides alone."""
        requirements = [term.requirement for term in terms]

        def unsatisfiable(subset: Sequence[int]) -> bool:
            return satisfying(self.instances, [requirements[j] for j in subset], self.os, self.v1) is None

        cores: list[list[int]] = []
        if unsatisfiable([]):  # the catalog alone admits nothing
            cores.append([])
        else:
            remaining = list(range(len(terms)))
            first = True  # every term together: `solve` just found it unsatisfiable
            while remaining and len(cores) < MAX_CORES and (first or unsatisfiable(remaining)):
                first = False
                found = _minimal_core(unsatisfiable, remaining)
                cores.append(found)
                remaining = [j for j in remaining if j not in found]
        rows = 0
        for core in cores:
            problem = _Problem(self.table, [terms[j] for j in core])
            rows = max(rows, len(problem.rows))
            solver, prefix = self._next_solver()
            solver.push()
            try:
                solver.from_string(problem.smtlib(prefix))
                literals = [z3.Bool(f"{prefix}p{j}", solver.ctx) for j in range(len(problem.terms))]
                if solver.check(*literals) != z3.unsat:
                    return None
            finally:
                solver.pop()
        return SolverResult(
            Verdict.UNSAT,
            cores=tuple(tuple(terms[j] for j in core) for core in cores),
            checks=len(cores),
            seconds=time.perf_counter() - start,
            rows=rows,
        )

    def _next_solver(self) -> tuple[z3.Solver, str]:
        """The Z3 solver for the next problem, and the prefix of the problem's names (declarations outlive `pop`:
        problems that share a solver are named apart). Every `PROBLEMS_PER_CONTEXT` problems a new solver, in a
        new context of its own (`own_context`) — the old one, and all it declared, is freed — or, before issue
        #12, in z3's global context, where everything declared stays."""
        count = self._problems
        self._problems += 1
        solver = self._z3
        if solver is None or count % PROBLEMS_PER_CONTEXT == 0:
            solver = self._z3 = z3.SimpleSolver(ctx=z3.Context() if self.own_context else None)
            solver.set("timeout", self.timeout_ms)
        return solver, f"k{count % PROBLEMS_PER_CONTEXT if self.own_context else count}_"

    def _solve(self, solver: z3.Solver, problem: _Problem, prefix: str, start: float) -> SolverResult:
        literals = [z3.Bool(f"{prefix}p{j}", solver.ctx) for j in range(len(problem.terms))]
        checks = 0

        def check(subset: Sequence[int]) -> z3.CheckSatResult:
            nonlocal checks
            checks += 1
            return solver.check(*[literals[j] for j in subset])

        def done(verdict: Verdict, **kwargs: Any) -> SolverResult:
            return SolverResult(
                verdict, checks=checks, seconds=time.perf_counter() - start, rows=len(problem.rows), **kwargs
            )

        everything = list(range(len(problem.terms)))
        result = check(everything)
        if result == z3.sat:
            return done(Verdict.SAT, **self._sat(problem, solver.model(), prefix))
        if result != z3.unsat:
            return done(Verdict.UNKNOWN, reason=solver.reason_unknown())
        if not solver.unsat_core():  # the catalog alone admits nothing
            return done(Verdict.UNSAT, cores=((),))
        cores: list[tuple[Term, ...]] = []
        remaining = everything
        while result == z3.unsat and remaining and len(cores) < MAX_CORES:
            found = _minimal_core(lambda subset: check(subset) == z3.unsat, remaining)
            cores.append(tuple(problem.terms[j] for j in found))
            remaining = [j for j in remaining if j not in found]
            result = check(remaining) if remaining else result
        return done(Verdict.UNSAT, cores=tuple(cores))

    def _sat(self, problem: _Problem, model: z3.ModelRef, prefix: str) -> dict[str, Any]:
        """Every satisfying type (from the encoding's rows, in Python), the zones and capacity types they are
        offered in, and the witness: the cheapest of their offerings in those (ties: type name, zone, capacity
        type; among types without a price, the smaller first) — what `satisfying` gives, computed independently
        of it. The model only has to agree."""
        table = self.table
        row = problem.rows[model.eval(z3.Int(f"{prefix}t", model.ctx), model_completion=True).as_long()]
        types, zones, capacities = problem.satisfying()
        if not any(problem.signatures[i] == row for i in types):  # a bug in the encoding, not a user error
            raise AssertionError(f"the model picked row {row}, which the table does not satisfy")
        zone_ok, capacity_ok = problem.zone.accepted_by_all(), problem.capacity.accepted_by_all()
        zone_of, capacity_of = problem.zone.class_by_index, problem.capacity.class_by_index
        best = min(
            next(
                # offerings are sorted by price, then zone and capacity type; the unpriced (inf) smaller types first,
                # as the scheduler's table ranks them (`InstanceTable.cheapest`: a node no larger than needed)
                (price, _size(table.types[i]) if math.isinf(price) else (0, 0), table.types[i].name, z, c)
                for price, z, c in table.offerings[i]
                if zone_of[z] in zone_ok and capacity_of[c] in capacity_ok
            )
            for i in types
        )
        return {
            "witness": Witness(best[2], table.zones[best[3]], table.capacity_types[best[4]], known_price(best[0])),
            "instance_types": tuple(table.types[i].name for i in types),
            "zones": tuple(zones),
            "capacity_types": tuple(capacities),
        }


# --- equivalence --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Difference:
    """An offering (instance type, zone, capacity type) with the custom (and launch) label values of the node that
    exactly one of two term sets admits; `first` says which (True: the first set admits it, the second does not)."""

    first: bool
    instance_type: str
    zone: str
    capacity_type: str
    labels: tuple[tuple[str, str | None], ...] = ()  # custom label → value (None: the node lacks it)


@dataclass(frozen=True, slots=True)
class EquivalenceResult:
    """UNSAT: no offering tells the two term sets apart (they are equivalent); SAT: `difference` is one that does;
    UNKNOWN: the solver gave up (`reason`)."""

    verdict: Verdict
    difference: Difference | None = None
    reason: str = ""
    seconds: float = 0.0


def equivalence(solver: Solver, first: Sequence[Term], second: Sequence[Term]) -> EquivalenceResult:
    """Prove with Z3 that `first` and `second` admit exactly the same offerings of `solver`'s catalog — every
    (instance type, zone, capacity type) an available offering has, with every value of the custom labels either
    mentions — or find one that exactly one of them admits. One problem over both sets' terms: its classes tell
    apart every value either set can, so the rows and classes are exact for both; the assertion is
    `admits(first) != admits(second)`, and unsat is the proof."""
    start = time.perf_counter()
    problem = _Problem(solver.table, [*first, *second])
    z3_solver, prefix = solver._next_solver()
    split = len(first)

    def conjunction(indices: range) -> str:
        parts = [problem.constraint(j, prefix) for j in indices]
        return "true" if not parts else parts[0] if len(parts) == 1 else "(and " + " ".join(parts) + ")"

    text = problem.smtlib(prefix)
    text += f"\n(declare-const {prefix}A Bool)(declare-const {prefix}B Bool)"
    text += f"\n(assert (= {prefix}A {conjunction(range(split))}))"
    text += f"\n(assert (= {prefix}B {conjunction(range(split, len(problem.terms)))}))"
    text += f"\n(assert (not (= {prefix}A {prefix}B)))"
    z3_solver.push()
    try:
        z3_solver.from_string(text)
        result = z3_solver.check()  # every p<j> is free: the implications constrain nothing
        seconds = time.perf_counter() - start
        if result == z3.unsat:
            return EquivalenceResult(Verdict.UNSAT, seconds=seconds)
        if result != z3.sat:
            return EquivalenceResult(Verdict.UNKNOWN, reason=z3_solver.reason_unknown(), seconds=seconds)
        difference = _difference(problem, z3_solver.model(), prefix)
        return EquivalenceResult(Verdict.SAT, difference, seconds=time.perf_counter() - start)
    finally:
        z3_solver.pop()


def _difference(problem: _Problem, model: z3.ModelRef, prefix: str) -> Difference:
    """The model as an offering of the catalog: the first type (by name) of the chosen row, a zone and capacity
    type of the chosen classes it is offered in, and the custom labels' representative values."""
    table = problem.table

    def value(name: str) -> int:
        return int(model.eval(z3.Int(f"{prefix}{name}", model.ctx), model_completion=True).as_long())

    row = problem.rows[value("t")]
    zone_class, capacity_class = value("z"), value("c")
    candidates = sorted(
        (table.types[i].name, z, c)
        for i, signature in enumerate(problem.signatures)
        if signature == row
        for z, c in table.offer_sets[table.offer_set_of[i]]
        if problem.zone.class_by_index[z] == zone_class and problem.capacity.class_by_index[c] == capacity_class
    )
    if not candidates:  # a bug in the encoding, not a user error
        raise AssertionError(f"the model picked row {row}, which has no offering in its zone and capacity classes")
    name, zone, capacity = candidates[0]
    labels = tuple((k, problem.classes[k].representative[value(f"u{i}")]) for i, k in enumerate(problem.custom_keys))
    first = z3.is_true(model.eval(z3.Bool(f"{prefix}A", model.ctx), model_completion=True))
    return Difference(first, name, table.zones[zone], table.capacity_types[capacity], labels)


def _minimal_core(unsatisfiable: Callable[[Sequence[int]], bool], candidates: Sequence[int]) -> list[int]:
    """A minimal unsatisfiable subset of `candidates` (unsatisfiable together), sorted: QuickXplain (Junker,
    2004) on verdicts alone (Z3's, or the masks'), over the candidates in their order. Z3's own unsat cores depend
    on what its solver did before (other problems, in the same context); verdicts do not, so the same terms get
    the same core whatever was solved before. A check that times out counts as satisfiable: the core can then be
    larger than minimal, never wrong."""

    def explain(background: list[int], added: bool, members: Sequence[int]) -> list[int]:
        if added and unsatisfiable(background):
            return []
        if len(members) == 1:
            return list(members)
        half = len(members) // 2
        first, second = members[:half], members[half:]
        in_second = explain([*background, *first], True, second)
        in_first = explain([*background, *in_second], bool(in_second), first)
        return in_first + in_second

    return sorted(explain([], False, candidates))


def _size(instance_type: InstanceType) -> tuple[int, int]:
    """How the unpriced types rank in a witness: vCPUs, then memory (`InstanceTable`'s size rank)."""
    return instance_type.vcpu, instance_type.memory_mib
