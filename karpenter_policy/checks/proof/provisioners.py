"""Proving provisioners: each one a policy repository holds (`checks.repository`) against the instance-type catalog,
with the solver.

Rules (rule ids of `api.violations`, each explained in docs/rules/<id>.md):

* `unknown-instance-type` — a value of instance-type, instance-family, instance-size or zone that the catalog
  (its region) does not have, with the nearest existing name ("did you mean m5d.2xlarge?"). An error when the
  term names nothing that exists (`In` with only unknown values: no node can ever launch), a warning when the
  unknown value is dead weight next to known ones, or excluded by NotIn (the exclusion does nothing).
* `unknown-label-value` (warning) — a value of another well-known key with a closed domain (capacity type, arch,
  os, region, instance category, generation, hypervisor, GPU and accelerator names) that nothing in the catalog
  carries, with the nearest valid value ("did you mean on-demand?"), even when the other values still work; when
  no value of an `In` exists, the `no-instance-type` error says so, with the same hint.
* `zone-outside-region` — a zone value of another region of the catalog (`us-west-2a` checked in us-east-1), with
  the `--region` to check it in; an error or a warning as `unknown-instance-type` would be.
* `dead-value` (warning) — values of an In requirement of a satisfiable Provisioner that no admitted instance
  type has (another requirement or a default excludes them), with the solver's explanation (`deadvalues`).
* `requirements-conflict` — a minimal set (≥ 2) of requirements, labels and Karpenter defaults that no
  instance type satisfies together, explained in domain words, at the first member's line with the others as
  related locations.
* `no-instance-type` — one requirement that no instance type of the catalog satisfies on its own (`instance-cpu
  Gt 500`, `capacity-type In [spot-ish]`).
* `solver-timeout` (warning) — the solver gave up within `--timeout-ms`; nothing was proven.
* `previous-generation` (warning) — an instance-type or instance-family In value names a previous-generation type
  (proven with it, as Karpenter v0.31 launches it) unless `--allow-previous-generation` acknowledges them.

Satisfiable provisioners are listed with their instance types and a witness (type, zone, capacity type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from karpenter_policy.api.kinds import PROVISIONER_KIND, object_ref
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.v1.objects import is_static
from karpenter_policy.api.violations import (
    DEAD_VALUE,
    ERROR,
    NO_INSTANCE_TYPE,
    PREVIOUS_GENERATION,
    REQUIREMENTS_CONFLICT,
    SOLVER_TIMEOUT,
    UNKNOWN_INSTANCE_TYPE,
    UNKNOWN_LABEL_VALUE,
    WARNING,
    ZONE_OUTSIDE_REGION,
)
from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.table import CatalogTable
from karpenter_policy.checks.findings import Finding, Location
from karpenter_policy.checks.proof.absence import KnownName, known_name, previous_generation_text
from karpenter_policy.checks.proof.deadvalues import dead_values
from karpenter_policy.checks.proof.domains import (
    DOMAIN_KEYS,
    NAMED_KEYS,
    known_values,
    listing,
    unknown_value_message,
    zone_elsewhere,
)
from karpenter_policy.checks.proof.limits import limits_findings
from karpenter_policy.checks.proof.nodepools import launch_findings, min_values_findings
from karpenter_policy.checks.proof.solver import (
    DEFAULT_TIMEOUT_MS,
    Origin,
    Solver,
    SolverResult,
    Term,
    Verdict,
    Witness,
    terms_of,
)
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model import labels as wk
from karpenter_policy.model.amifamily import ami_family, node_os
from karpenter_policy.model.instancetypes import price_text
from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.model.requirements import Operator, Requirement
from karpenter_policy.model.spelling import nearest_name
from karpenter_policy.scheduling import InstanceTable

__all__ = ["DEFAULT_TIMEOUT_MS", "CheckedProvisioner", "check_provisioner", "prove_provisioners", "provisioner_ref"]


def provisioner_ref(key: str) -> str:
    """How findings name what a scheduler key (`CheckedProvisioner.key`) stands for: `Provisioner/default`,
    `NodePool/general`."""
    return key if "/" in key else object_ref(PROVISIONER_KIND, key)


@dataclass(frozen=True, slots=True)
class CheckedProvisioner:
    """One Provisioner the solver looked at, and what it proved."""

    name: str
    file: str
    line: int
    column: int
    verdict: Verdict
    document: Mapping[str, Any] = field(repr=False, compare=False)
    instance_types: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    capacity_types: tuple[str, ...] = ()
    witness: Witness | None = None
    seconds: float = 0.0
    #: The spec of the AWSNodeTemplate it references (or its inline provider): AMI family, block devices.
    node_template: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    region: str = ""  # the catalog's
    #: `Provisioner`, or `NodePool` for a v1 NodePool proven through its scheduling view (`proof.nodepools`).
    kind: str = PROVISIONER_KIND
    #: A NodePool's: the witness's values of the labels of Karpenter v1.14.1 that its requirements name
    #: (`model.labels.V1_INSTANCE_LABELS`), by key (`witness_labels`); a Provisioner's are always empty.
    witness_labels: tuple[tuple[str, str], ...] = ()

    @property
    def object_ref(self) -> str:
        return object_ref(self.kind, self.name)

    @property
    def key(self) -> str:
        """Its name to the scheduler and in placements: a Provisioner's name, `NodePool/<name>` for a NodePool
        (an object name has no `/`: a NodePool and a Provisioner of one name side by side stay apart)."""
        return self.name if self.kind == PROVISIONER_KIND else self.object_ref

    @property
    def static(self) -> bool:
        """A static NodePool (its view has `spec.replicas`: `api.v1.objects.is_static`), which Karpenter v1.14.1
        leaves out of scheduling with the StaticCapacity gate off (`api.v1.static`)."""
        spec = self.document.get("spec")
        return self.kind == NODEPOOL_KIND and isinstance(spec, Mapping) and is_static(spec)

    @property
    def provisioner(self) -> Provisioner:
        """The typed Provisioner (defaulted; a NodePool's view as Karpenter v1 reads it), built on each access."""
        return Provisioner.from_document(self.document, defaulted=self.kind == PROVISIONER_KIND, kind=self.kind)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "object": self.object_ref,
            "file": self.file,
            "line": self.line,
            "verdict": self.verdict.value,
            "count": len(self.instance_types),
            "instance_types": list(self.instance_types),
            "zones": list(self.zones),
            "capacity_types": list(self.capacity_types),
        }
        if self.witness is not None:
            witness = self.witness.to_json()
            if self.witness_labels:
                witness["labels"] = dict(self.witness_labels)
            data["witness"] = witness
        return data

    def summary(self) -> str:
        """`Provisioner/default: 123 instance types, e.g. c5.large (us-east-1a, spot)`; a NodePool's witness with
        its values of the v1 labels its requirements name (`NodePool/amd: 58 instance types, e.g. c5a.large
        (us-east-1a, spot; karpenter.k8s.aws/instance-cpu-manufacturer=amd)`)."""
        count = len(self.instance_types)
        text = f"{self.object_ref}: {count} instance type{'s' if count != 1 else ''}"
        if self.witness is not None:
            w = self.witness
            text += f", e.g. {w.instance_type} ({w.zone}, {w.capacity_type}"
            notes = [price_text(None, self.region)] if w.price is None else []
            notes += [f"{key}={value}" for key, value in self.witness_labels]
            text += f"; {', '.join(notes)})" if notes else ")"
        return text


# --- proving ------------------------------------------------------------------------------------------------


def prove_provisioners(
    documents: Sequence[Document],
    node_templates: Mapping[str, Mapping[str, Any]],
    catalog: Catalog | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    min_values_policy: str = STRICT,
) -> tuple[list[Finding], list[CheckedProvisioner]]:
    """The solver's findings on each Provisioner document of `documents` (and its `limits` findings when it is
    satisfiable), and what it proved of each, in file and line order. `node_templates`: the spec of each
    AWSNodeTemplate by name (its AMI family says which OS the solver proves against). `documents` are those
    `checks.repository` gathers: every Provisioner whose errors (if any) leave its scheduling untouched.
    `min_values_policy`: Karpenter's `--min-values-policy`, which decides what an unmet NodePool minValues is."""
    if not documents:
        return [], []
    catalog = catalog if catalog is not None else load_catalog()
    table = InstanceTable.of_catalog(catalog)
    solvers: dict[tuple[str, bool], Solver] = {}
    findings: list[Finding] = []
    checked: list[CheckedProvisioner] = []
    for doc in documents:
        template = node_template_of(doc.data, node_templates)
        os = provisioner_os(doc.data, node_templates)
        v1 = doc.data.get("kind") == NODEPOOL_KIND
        solver = solvers.get((os, v1)) or solvers.setdefault((os, v1), Solver(catalog, timeout_ms, os, v1=v1))
        found, result = check_provisioner(doc, solver)
        result = replace(result, node_template=template)
        findings.extend(found)
        if result.verdict == Verdict.SAT:
            findings.extend(limits_findings(doc, result.provisioner, result.instance_types, table, template))
            findings.extend(min_values_findings(doc, result.instance_types, table, min_values_policy))
            findings.extend(launch_findings(doc, result.instance_types, table, template))
        checked.append(result)
    checked.sort(key=lambda c: (c.file, c.line, c.column))
    return findings, checked


def provisioner_os(provisioner: Mapping[str, Any], node_templates: Mapping[str, Mapping[str, Any]]) -> str:
    """The OS of the nodes a provisioner launches (`windows` for the Windows AMI families of its node template)."""
    template = node_template_of(provisioner, node_templates) or {}
    return node_os(ami_family(str(template.get("amiFamily") or "") or None))


def node_template_of(
    provisioner: Mapping[str, Any], node_templates: Mapping[str, Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The node template spec a provisioner launches with: its inline `provider`, or the AWSNodeTemplate its
    `providerRef` names (None when that is not among the policies)."""
    spec = provisioner.get("spec") or {}
    provider = spec.get("provider")
    if isinstance(provider, Mapping):
        return dict(provider)
    reference = spec.get("providerRef")
    if isinstance(reference, Mapping):
        return node_templates.get(str(reference.get("name")))
    return None


def check_provisioner(doc: Document, solver: Solver) -> tuple[list[Finding], CheckedProvisioner]:
    """The solver's findings for one valid Provisioner document (or NodePool view), and what it proved. The
    solver reads the document's API version's labels (`Solver(v1=True)` for a NodePool: ValueError otherwise)."""
    terms = terms_of(doc.data)
    table = solver.table
    name = str((doc.data.get("metadata") or {}).get("name"))
    kind = NODEPOOL_KIND if doc.data.get("kind") == NODEPOOL_KIND else PROVISIONER_KIND
    if solver.v1 != (kind == NODEPOOL_KIND):
        raise ValueError(f"a {kind} is proven with the labels of its own API version: Solver(v1={not solver.v1})")
    ref = object_ref(kind, name)
    line, column = doc.position(("metadata", "name"))
    findings, dead = _unknown_names(doc, terms, table, ref)
    findings += _previous_generation_names(doc, terms, table, ref)
    outcome = solver.solve(terms)
    findings += _outcome_findings(doc, terms, outcome, dead, table, ref, (line, column), solver.timeout_ms)
    if outcome.verdict == Verdict.SAT:
        findings += _dead_value_findings(doc, terms, outcome.instance_types, solver, ref)
    result = CheckedProvisioner(
        name=name,
        file=doc.file,
        line=line,
        column=column,
        verdict=outcome.verdict,
        document=doc.data,
        instance_types=outcome.instance_types,
        zones=outcome.zones,
        capacity_types=outcome.capacity_types,
        witness=outcome.witness,
        seconds=outcome.seconds,
        region=table.region,
        kind=kind,
        witness_labels=witness_labels(terms, outcome.witness, table),
    )
    return findings, result


def witness_labels(terms: Sequence[Term], witness: Witness | None, table: CatalogTable) -> tuple[tuple[str, str], ...]:
    """The witness's values of the labels of Karpenter v1.14.1 (`model.labels.V1_INSTANCE_LABELS`) that `terms`
    name, by key, when `table` reads them (a v1 NodePool's): its type's value, or for a launch label (the tenancy)
    the first value every term on it accepts. Empty for a v1alpha5 Provisioner, whose nodes carry none of them."""
    if witness is None or not table.v1:
        return ()
    instance_type = table.catalog.get(witness.instance_type)
    found: list[tuple[str, str]] = []
    for key in sorted({t.key for t in terms} & wk.V1_INSTANCE_LABELS):
        if key in table.launch_values:
            on_key = [t.requirement for t in terms if t.key == key]
            value = next((v for v in table.launch_values[key] if all(r.has(v) for r in on_key)), None)
        else:
            value = instance_type.v1_labels.get(key) if instance_type is not None else None
        if value is not None:
            found.append((key, value))
    return tuple(found)


# --- findings -----------------------------------------------------------------------------------------------

#: Unknown values of one Provisioner that get a "did you mean" hint; the others are named without one (a hint
#: costs ~15 ms among the catalog's instance types: 300 unknown values took 5 s of the webhook's checks).
MAX_SPELLING_HINTS = 20


def _unknown_names(
    doc: Document, terms: Sequence[Term], table: CatalogTable, ref: str
) -> tuple[list[Finding], set[int]]:
    """`unknown-instance-type` findings, and the indices of the terms that name nothing existing (their
    solver verdict is then already explained)."""
    findings: list[Finding] = []
    dead: set[int] = set()
    hints = 0
    spec = doc.data.get("spec") or {}
    written = spec.get("requirements") or []
    v1 = doc.data.get("kind") == NODEPOOL_KIND
    for index, term in [*enumerate(terms), *((-1, t) for t in _ignored_terms(written))]:
        operator = term.requirement.operator()
        named = term.key in NAMED_KEYS
        if term.origin == Origin.DEFAULT or operator not in (Operator.IN, Operator.NOT_IN):
            continue
        if not named and term.key not in DOMAIN_KEYS:
            continue
        known_set = frozenset(known_values(term.key, table) or ())
        if v1 and term.key == wk.CAPACITY_TYPE:
            known_set |= {wk.CAPACITY_RESERVED}
        raw_values = _written_values(term, written)
        unknown = [(v, path) for v, path in raw_values if v not in known_set]
        if not unknown:
            continue
        names = {v: _known_name(term.key, v, table) for v, _ in unknown}
        # A previous-generation value is not dead weight: the flag admits it (the solver says what remains).
        previous = {v for v, name in names.items() if name is not None and name.previous_generation}
        all_unknown = operator == Operator.IN and all(v not in known_set and v not in previous for v, _ in raw_values)
        if all_unknown and not named:
            if term.key not in wk.IGNORED_LABELS:
                continue  # nothing can launch: the solver's no-instance-type error says so, with the hint
        elif all_unknown:
            dead.add(index)
        seen: set[str] = set()
        for value, path in unknown:
            if value in seen:
                continue
            seen.add(value)
            name = names[value]
            if name is not None:
                message = f"{term.key} {value}: {name.text}."
            else:
                message = unknown_value_message(term.key, value, table, hint=hints < MAX_SPELLING_HINTS)
                hints += 1
            if operator == Operator.NOT_IN:
                message += " This NotIn excludes nothing."
                severity = WARNING
            elif name is not None and name.previous_generation:
                severity = WARNING
            elif all_unknown:
                severity = ERROR if named else WARNING  # region: Karpenter ignores it when it schedules
            else:
                message += " Only the other values can ever apply."
                severity = WARNING
            line, column = doc.position(path, at_key=term.origin == Origin.LABEL)
            rule = UNKNOWN_INSTANCE_TYPE if named else UNKNOWN_LABEL_VALUE
            if zone_elsewhere(term.key, value, table) is not None:
                rule = ZONE_OUTSIDE_REGION
            findings.append(Finding(rule, severity, message, doc.file, line, column, ref))
    return findings, dead


def _written_values(term: Term, written: Sequence[Any]) -> list[tuple[str, Any]]:
    """The values of a label or written requirement term as written, each with its path (for its line)."""
    if term.origin == Origin.LABEL:
        return [(str(v), term.path) for v in term.requirement.values]
    values = written[int(term.path[2])].get("values") or []
    return [(str(v), (*term.path, "values", i)) for i, v in enumerate(values)]


def _previous_generation_names(doc: Document, terms: Sequence[Term], table: CatalogTable, ref: str) -> list[Finding]:
    """`previous-generation` warnings: In values of instance-type or instance-family that name one."""
    findings: list[Finding] = []
    written = (doc.data.get("spec") or {}).get("requirements") or []
    for term in terms:
        if term.origin == Origin.DEFAULT or term.key not in (wk.INSTANCE_TYPE, wk.INSTANCE_FAMILY):
            continue
        if term.requirement.operator() != Operator.IN:
            continue
        for value, path in dict(_written_values(term, written)).items():
            text = previous_generation_text(table.catalog, value, family=term.key == wk.INSTANCE_FAMILY)
            if text is not None:
                line, column = doc.position(path, at_key=term.origin == Origin.LABEL)
                message = f"{term.key} {value}: {text}."
                findings.append(Finding(PREVIOUS_GENERATION, WARNING, message, doc.file, line, column, ref))
    return findings


def _dead_value_findings(
    doc: Document, terms: Sequence[Term], admitted: Sequence[str], solver: Solver, ref: str
) -> list[Finding]:
    """`dead-value` warnings: In values of a satisfiable Provisioner that no admitted type has, with what excludes
    them (the solver's core of the requirement narrowed to them)."""
    findings: list[Finding] = []
    written = (doc.data.get("spec") or {}).get("requirements") or []
    for found in dead_values(terms, admitted, solver.table):
        narrowed = list(terms)
        narrowed[found.index] = found.as_term()
        outcome = solver.solve(narrowed)
        core = next((c for c in outcome.cores if any(t is narrowed[found.index] for t in c)), ())
        members = sorted(core, key=lambda t: (t.origin == Origin.DEFAULT, _location(doc, t)))
        values = ", ".join(found.values)
        noun = "NodePool" if doc.data.get("kind") == NODEPOOL_KIND else "provisioner"
        message = f"{found.term.key} {values}: no instance type the {noun} admits has them"
        if len(members) > 1:
            message += f" ({explain_conflict(members, solver.table)})"
        message += "; only the other values can ever apply."
        written_paths = [path for value, path in _written_values(found.term, written) if value in found.values]
        line, column = doc.position(written_paths[0] if written_paths else found.term.path)
        findings.append(Finding(DEAD_VALUE, WARNING, message, doc.file, line, column, ref))
    return findings


def _ignored_terms(written: Sequence[Any]) -> list[Term]:
    """The requirements the solver leaves out (the region: Karpenter ignores it when it schedules), whose values
    can still be typos."""
    terms = []
    for index, raw in enumerate(written):
        if not isinstance(raw, Mapping) or wk.normalize_key(str(raw.get("key", ""))) not in wk.IGNORED_LABELS:
            continue
        values = [str(v) for v in raw.get("values") or []]
        try:
            requirement = Requirement.new(wk.normalize_key(str(raw["key"])), str(raw.get("operator", "")), values)
        except ValueError:
            continue
        terms.append(Term(requirement, ("spec", "requirements", index), Origin.REQUIREMENT))
    return terms


def _known_name(key: str, value: str, table: CatalogTable) -> KnownName | None:
    """What to say of an instance type or family the region's catalog lacks but knows (None: an unknown name)."""
    if key not in (wk.INSTANCE_TYPE, wk.INSTANCE_FAMILY):
        return None
    return known_name(table.catalog, value, family=key == wk.INSTANCE_FAMILY)


def _outcome_findings(
    doc: Document,
    terms: Sequence[Term],
    outcome: SolverResult,
    dead: set[int],
    table: CatalogTable,
    ref: str,
    at: tuple[int, int],
    timeout_ms: int,
) -> list[Finding]:
    if outcome.verdict == Verdict.UNKNOWN:
        reason = f" ({outcome.reason})" if outcome.reason and outcome.reason != "timeout" else ""
        message = (
            f"the requirements could not be checked within {timeout_ms} ms{reason}: whether an instance type "
            "satisfies them is unknown; raise --timeout-ms"
        )
        return [Finding(SOLVER_TIMEOUT, WARNING, message, doc.file, *at, ref)]
    if outcome.verdict == Verdict.SAT:
        return []
    index_of = {id(t): i for i, t in enumerate(terms)}  # the solver hands back the very terms it was given
    findings: list[Finding] = []
    for core in outcome.cores:
        if not core:
            message = f"the {table.region} catalog has no instance type with an available offering"
            findings.append(Finding(NO_INSTANCE_TYPE, ERROR, message, doc.file, *at, ref))
            continue
        if all(index_of.get(id(t), -1) in dead for t in core):
            continue  # already reported as unknown-instance-type
        members = sorted(core, key=lambda t: (t.origin == Origin.DEFAULT, _location(doc, t)))
        primary, *others = members
        line, column = _location(doc, primary)
        related = tuple(Location(doc.file, *_location(doc, t)) for t in others)
        if others:
            rule, message = REQUIREMENTS_CONFLICT, explain_conflict(members, table)
        else:
            rule, message = NO_INSTANCE_TYPE, explain_no_instance_type(primary, table)
        findings.append(Finding(rule, ERROR, message, doc.file, line, column, ref, related))
    return findings


def _location(doc: Document, term: Term) -> tuple[int, int]:
    if term.origin == Origin.DEFAULT:
        spec = doc.data.get("spec") or {}
        path = term.path if "requirements" in spec else ("spec",)
        return doc.position(path, at_key=True)
    return doc.position(term.path, at_key=term.origin == Origin.LABEL)


# --- explanations in domain words ---------------------------------------------------------------------------

_UNITS: dict[str, str] = {
    wk.INSTANCE_CPU: "vCPUs",
    wk.INSTANCE_MEMORY: "MiB of memory",
    wk.INSTANCE_PODS: "pods",
    wk.INSTANCE_NETWORK_BANDWIDTH: "Mbps of network bandwidth",
    wk.INSTANCE_LOCAL_NVME: "GiB of local NVMe storage",
    wk.INSTANCE_GPU_COUNT: "GPUs",
    wk.INSTANCE_GPU_MEMORY: "MiB of GPU memory",
    wk.INSTANCE_ACCELERATOR_COUNT: "accelerators",
    wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: "MHz of sustained CPU clock speed",
    wk.INSTANCE_EBS_BANDWIDTH: "Mbps of EBS bandwidth",
}
_GPU_KEYS = {wk.INSTANCE_GPU_NAME, wk.INSTANCE_GPU_MANUFACTURER, wk.INSTANCE_GPU_COUNT, wk.INSTANCE_GPU_MEMORY}
_ACCELERATOR_KEYS = {wk.INSTANCE_ACCELERATOR_NAME, wk.INSTANCE_ACCELERATOR_MANUFACTURER, wk.INSTANCE_ACCELERATOR_COUNT}
_SHOWN = 5


def _one_of(values: Iterable[str], conjunction: str = "or") -> str:
    ordered = sorted(values)
    if len(ordered) > _SHOWN:
        return ", ".join(ordered[:_SHOWN]) + f" {conjunction} {len(ordered) - _SHOWN} others"
    if len(ordered) <= 1:
        return "".join(ordered)
    return ", ".join(ordered[:-1]) + f" {conjunction} {ordered[-1]}"


def _bounds(r: Requirement, unit: str) -> str:
    if r.greater_than is not None and r.less_than is not None:
        return f"more than {r.greater_than} and fewer than {r.less_than} {unit}"
    if r.greater_than is not None:
        return f"more than {r.greater_than} {unit}"
    return f"fewer than {r.less_than} {unit}"


def predicate(term: Term) -> str:
    """What the term asks of an instance type, as a verb phrase: `is arm64`, `has more than 500 vCPUs`."""
    r = term.requirement
    key, op = r.key, r.operator()
    values = sorted(r.values)
    bounded = r.greater_than is not None or r.less_than is not None
    listed = op in (Operator.IN, Operator.NOT_IN) and not bounded
    negated = op == Operator.NOT_IN
    gpu = key in _GPU_KEYS
    accelerator = key in _ACCELERATOR_KEYS
    thing = "a GPU" if gpu else "an accelerator" if accelerator else None
    if op == Operator.DOES_NOT_EXIST:
        return f"has no {thing.split()[-1]}" if thing else f"lacks the label {key}"
    counts = (wk.INSTANCE_GPU_COUNT, wk.INSTANCE_ACCELERATOR_COUNT)
    if key in counts and r.greater_than == 0 and r.less_than is None and not values:
        return f"has {thing}"
    if op == Operator.EXISTS and not bounded:
        return f"has {thing}" if thing else f"has the label {key}"
    if listed:
        not_ = "not " if negated else ""
        simple = {
            wk.ARCH: f"is {not_}{_one_of(values)}",
            wk.OS: f"does {not_}run {_one_of(values)}" if negated else f"runs {_one_of(values)}",
            wk.INSTANCE_TYPE: f"is {not_}{_one_of(values)}",
            wk.INSTANCE_FAMILY: f"is {not_}of family {_one_of(values)}",
            wk.INSTANCE_CATEGORY: f"is {not_}of category {_one_of(values)}",
            wk.INSTANCE_SIZE: f"is {not_}of size {_one_of(values)}",
            wk.INSTANCE_GENERATION: f"is {not_}of generation {_one_of(values)}",
            wk.INSTANCE_CPU_MANUFACTURER: f"{'has no' if negated else 'has a'} CPU by {_one_of(values)}",
            wk.INSTANCE_HYPERVISOR: f"does {not_}run on hypervisor {_one_of(values)}"
            if negated
            else f"runs on hypervisor {_one_of(values)}",
            wk.ZONE: f"is offered outside {_one_of(values, 'and')}" if negated else f"is offered in {_one_of(values)}",
            wk.CAPACITY_TYPE: f"is not offered as {_one_of(values)}" if negated else f"is offered as {_one_of(values)}",
        }
        if key in simple:
            return simple[key]
        if key in _UNITS:
            return f"{'does not have' if negated else 'has'} {_one_of(values)} {_UNITS[key]}"
        if thing and key in (wk.INSTANCE_GPU_NAME, wk.INSTANCE_ACCELERATOR_NAME):
            return f"{'has no' if negated else 'has'} {_one_of(values)} {thing.split()[-1]}"
        if thing:
            return f"{'has no' if negated else 'has'} {thing.split()[-1]} by {_one_of(values)}"
        return f"{'does not have' if negated else 'has'} {key}={_one_of(values)}"
    if key == wk.INSTANCE_GENERATION and bounded:
        if r.greater_than is not None and r.less_than is not None:
            return f"is of a generation above {r.greater_than} and below {r.less_than}"
        if r.greater_than is not None:
            return f"is of a generation above {r.greater_than}"
        return f"is of a generation below {r.less_than}"
    if key in _UNITS and bounded:
        text = f"has {_bounds(r, _UNITS[key])}"
        return text + (f" (but not {_one_of(values)})" if values else "")
    return f"has {key} {r.describe_values()}"


def _noun(term: Term) -> str | None:
    """The term as a kind of instance type (`c5`, `c5 or m5`), when it names families."""
    r = term.requirement
    if r.key == wk.INSTANCE_FAMILY and r.operator() == Operator.IN and len(r.values) <= _SHOWN:
        return _one_of(r.values)
    return None


def _why_same_key(a: Term, b: Term) -> str | None:
    """Why two terms on one key contradict each other outright (None: they only conflict through the catalog)."""
    ra, rb = a.requirement, b.requirement
    if not ra.intersection(rb).is_empty():
        return None
    ops = {ra.operator(), rb.operator()}
    labels = [t for t in (a, b) if t.origin == Origin.LABEL]
    if labels:
        label, other = (a, b) if a.origin == Origin.LABEL else (b, a)
        value = next(iter(label.requirement.values), "")
        return f"the label sets {label.key} to {value}, which {other} does not allow"
    if Operator.DOES_NOT_EXIST in ops:
        return f"{a.key} cannot be both absent and present"
    lows = [x for x in (ra.greater_than, rb.greater_than) if x is not None]
    highs = [x for x in (ra.less_than, rb.less_than) if x is not None]
    if lows and highs:
        return f"no integer is greater than {max(lows)} and less than {min(highs)}"
    if ops == {Operator.IN}:
        return "the two lists have no value in common"
    if Operator.IN in ops and Operator.NOT_IN in ops:
        listed = ra if ra.operator() == Operator.IN else rb
        return f"NotIn excludes every value In allows ({_one_of(listed.values, 'and')})"
    return f"no value of {a.key} satisfies both"


def _default_hint(members: Sequence[Term]) -> str:
    defaults = [t for t in members if t.origin == Origin.DEFAULT]
    if not defaults:
        return ""
    shape = {wk.INSTANCE_CATEGORY, wk.INSTANCE_GENERATION}
    parts = []
    for term in defaults:
        if term.key in shape:
            parts.append(
                f"Karpenter adds {term.requirement} when none of instance-type, instance-family, "
                "instance-category, instance-generation is required"
            )
        else:
            parts.append(f"Karpenter adds {term.requirement} when the requirements do not mention {term.key}")
    return "; " + "; ".join(parts) + ": require the key explicitly"


def explain_conflict(members: Sequence[Term], table: CatalogTable) -> str:
    """`kubernetes.io/arch In [arm64] conflicts with karpenter.k8s.aws/instance-family In [c5]: no c5
    instance type is arm64` — members in line order, the first is the finding's location."""
    names = [str(t) for t in members]
    head = (
        f"{names[0]} conflicts with {names[1]}"
        if len(members) == 2
        else f"{', '.join(names[:-1])} and {names[-1]} conflict"
    )
    keys = {t.key for t in members}
    if len(keys) == 1:
        why = _why_same_key(members[0], members[1]) if len(members) == 2 else None
        if why is None:
            key = members[0].key
            if table.is_catalog_key(key) or key in (wk.ZONE, wk.CAPACITY_TYPE):
                why = "no instance type " + " and ".join(predicate(t) for t in members)
            else:
                why = f"no value of {key} satisfies {'both' if len(members) == 2 else 'all of them'}"
    elif len(members) == 2:
        a, b = members
        noun_a, noun_b = _noun(a), _noun(b)
        if noun_b is not None and noun_a is None:
            why = f"no {noun_b} instance type {predicate(a)}"
        elif noun_a is not None:
            why = f"no {noun_a} instance type {predicate(b)}"
        else:
            why = f"no instance type {predicate(a)} and {predicate(b)}"
    else:
        phrases = [predicate(t) for t in members]
        why = "no instance type " + ", ".join(phrases[:-1]) + f" and {phrases[-1]}"
    return f"{head}: {why}{_default_hint(members)}"


def explain_no_instance_type(term: Term, table: CatalogTable) -> str:
    """`karpenter.k8s.aws/instance-cpu Gt 500: no instance type in us-east-1 has more than 500 vCPUs (the
    most is 448)`."""
    r = term.requirement
    key = r.key
    text = f"{term}: no instance type in {table.region} {predicate(term)}"
    hints: list[str] = []
    if key == wk.ZONE:
        domain: Sequence[str] = table.zones
    elif key == wk.CAPACITY_TYPE:
        domain = table.capacity_types
    else:
        domain = table.domains.get(key, ())
    numbers = sorted(int(v) for v in domain if v.isdigit())
    if key in wk.INTEGER_LABELS and numbers:
        if r.greater_than is not None and r.greater_than >= numbers[-1]:
            hints.append(f"the most is {numbers[-1]}")
        if r.less_than is not None and r.less_than <= numbers[0]:
            hints.append(f"the least is {numbers[0]}")
    if r.operator() == Operator.IN and domain and not any(v in domain for v in r.values):
        if key == wk.CAPACITY_TYPE:
            hints.append(f"capacity types are {_one_of(domain, 'and')}")
            if wk.CAPACITY_RESERVED in r.values:
                hints.append(
                    f"{wk.CAPACITY_RESERVED} offerings are the EC2NodeClass's capacity reservations "
                    "(capacityReservationSelectorTerms), which the catalog does not hold"
                )
        elif len(domain) <= 12:
            hints.append(f"{key} is one of {listing(domain)}")
        names = [n for n in (_known_name(key, v, table) for v in sorted(r.values)) if n is not None]
        hints += [n.text for n in names]
        unknown = [v for v in sorted(r.values) if _known_name(key, v, table) is None]
        guesses = [g for g in (nearest_name(v, domain) for v in unknown) if g is not None]
        if guesses:
            hints.append(f"did you mean {_one_of(guesses)}?")
    elif r.operator() == Operator.IN and key == wk.INSTANCE_TYPE:
        hints.append("it has no available offering")
    if r.operator() == Operator.DOES_NOT_EXIST and domain and key not in _GPU_KEYS | _ACCELERATOR_KEYS:
        hints.append(f"every instance type has {key}")
    if hints:
        text += f" ({'; '.join(hints)})"
    return text + _default_hint([term])
