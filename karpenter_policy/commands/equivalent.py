"""`diff --equivalent BASE HEAD [PATHS] --workloads APPS`: prove that a refactor changes no workload's landing set.

A refactor — twelve pools merged into four, files moved, Helm output replaced by Kustomize's, pools renamed, or
v1alpha5 Provisioners migrated to v1 NodePools after the fact — is safe when every workload may land on exactly the
same nodes as before. Both sides are read and checked as `diff` reads them (`diff.load_side`: a git revision or a
directory, PATHS and the workloads as of each side); each workload's landing set is worked out on each side
(`checks.proof.landingset`: every instance type × zone × capacity-type offering, with the node's labels and taints,
over every pool that could take its pod — in terms of nodes, not pool names, so renames do not count) and the two
compared. Workloads are matched by object (kind, namespace, name), so moving a workload's file does not count
either.

For each workload whose set changes, a counter-example: the cheapest node one side admits and the other does not,
with the admitting pool at file:line, and Z3's verdict that the pool's requirements admit that offering
(`diff`'s prover, `checks.proof.solver`); when the other side's NodePools name labels only Karpenter v1.14.1 sets
(both sides are read as `check` reads them: a NodePool with v1.14.1's labels, operators and `minValues`), the
node's values of them (`landingset.named_v1_labels`).

A workload whose pod spec cannot be read or the Kubernetes API server refuses (`invalid-workload`, the API server's
words at the field: `model.podadmission`) is left out of the comparison, as `diff --workloads` leaves it out: in
HEAD it is an error finding of HEAD, shown at file:line:column; in BASE only, the workload that HEAD has is "only in
HEAD", saying that BASE refuses it. Exit 0 with a one-line summary when every workload is unchanged; 1 when one
changes, a workload is on one side only, or HEAD has error findings (a refused workload among them); 2 when it
cannot run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.findings import CommandOutput, Finding
from karpenter_policy.checks.proof.landingset import (
    LandingSet,
    NodeDifference,
    compare_landings,
    landing_sets,
    named_v1_labels,
)
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.commands.diff import DiffError, Offering, Side, _Prover, load_side, side_workloads
from karpenter_policy.commands.flags import DiffFlags
from karpenter_policy.model.instancetypes import price_key

__all__ = ["Equivalence", "WorkloadVerdict", "equivalent_command", "prove_equivalent", "render"]

_PROGRAM = "karpenter-policy diff --equivalent"


@dataclass(frozen=True, slots=True)
class WorkloadVerdict:
    """One workload that changes: where it is (as of HEAD, else BASE), and why."""

    workload: str
    file: str
    line: int
    column: int
    message: str
    node: str = ""  # the counter-example node
    admitted_by: str = ""  # "BASE" or "HEAD"
    pool: str = ""  # the admitting pool and its file:line
    proven: bool | None = None  # Z3: the pool's requirements admit the offering

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "node": self.node or None,
            "admitted_by": self.admitted_by or None,
            "pool": self.pool or None,
            "proven": self.proven,
        }


@dataclass(slots=True)
class Equivalence:
    """The verdict on two sides: how many workloads were compared, the ones that change, HEAD's error count."""

    base: str
    head: str
    compared: int = 0
    changed: list[WorkloadVerdict] = field(default_factory=list)
    head_errors: int = 0  # the policies' error findings and `refused`
    refused: list[Finding] = field(default_factory=list)  # HEAD's `invalid-workload` errors, paths as in `changed`

    @property
    def equivalent(self) -> bool:
        return not self.changed and not self.head_errors

    def summary(self) -> str:
        if self.equivalent:
            workloads = "1 workload" if self.compared == 1 else f"{self.compared} workloads"
            return f"equivalent: {workloads} land on the same nodes in {self.head} as in {self.base}"
        parts = []
        if self.changed:
            parts.append(f"{len(self.changed)} of {self.compared} workloads land elsewhere in {self.head}")
        if self.head_errors:
            parts.append(f"{self.head} has {self.head_errors} error finding{'s' if self.head_errors != 1 else ''}")
        return "NOT equivalent: " + "; ".join(parts)


def _where(pool: CheckedProvisioner) -> str:
    return f"{pool.object_ref} ({pool.file}:{pool.line})"


def _relative(file: str, side: Side) -> str:
    root = side.workload_root
    return os.path.relpath(file, root) if root is not None else file


def _by_object(sets: Sequence[LandingSet], side: Side) -> dict[str, LandingSet]:
    """Each workload's set by its object; an object defined twice on a side is told apart by its file."""
    refs = [s.workload.ref for s in sets]
    keyed: dict[str, LandingSet] = {}
    for found in sets:
        ref = found.workload.ref
        keyed[ref if refs.count(ref) == 1 else f"{ref} ({_relative(found.workload.file, side)})"] = found
    return keyed


def _verdict(
    ref: str,
    base: LandingSet,
    head: LandingSet,
    difference: NodeDifference,
    sides: tuple[Side, Side],
    prover: _Prover,
    catalog: Catalog,
) -> WorkloadVerdict:
    side = sides[0] if difference.first else sides[1]
    other = sides[1] if difference.first else sides[0]
    node = difference.node
    offering = Offering(price_key(None), node.instance_type, node.zone, node.capacity_type)
    document = side.documents.get(difference.pool.key)
    proven = None
    if document is not None:
        verdict = prover.admits(document, side.os_of.get(difference.pool.key, "linux"), offering)
        proven = verdict == Verdict.SAT
    located, at = head.workload, sides[1]  # where the workload is now
    theirs = (head if difference.first else base).nodes
    offering_of = (node.instance_type, node.zone, node.capacity_type)
    same_offering = sorted(n for n in theirs if (n.instance_type, n.zone, n.capacity_type) == offering_of)
    named = named_v1_labels(node, other.checked, catalog)
    because = f" ({node.instance_type}: {', '.join(named)}, v1.14.1's labels its NodePools name)" if named else ""
    refusal = f"{other.label} does not{because}" if not same_offering else (
        f"{other.label}'s node there is {same_offering[0].describe()}"
    )
    message = f"{side.label} lets it land on {node.describe()} (through {_where(difference.pool)}); {refusal}"
    return WorkloadVerdict(
        ref,
        _relative(located.file, at),
        located.line,
        located.column,
        message,
        node.describe(),
        side.label,
        _where(difference.pool),
        proven,
    )


def prove_equivalent(
    base: Side, head: Side, workload_paths: Sequence[str], catalog: Catalog, timeout_ms: int
) -> Equivalence:
    """Compare every workload's landing set on both sides (module doc)."""
    result = Equivalence(base.label, head.label, head_errors=head.report.errors)
    sets = []
    refused: list[list[Finding]] = []
    for side in (base, head):
        workloads, invalid = side_workloads(side, workload_paths)
        refused.append([replace(f, file=_relative(f.file, side)) for f in invalid])
        sets.append(_by_object(landing_sets(side.checked, workloads, catalog), side))
    before, after = sets
    result.refused = refused[1]
    result.head_errors += len(result.refused)
    refused_in = [{f.object_ref for f in side_refused} for side_refused in refused]
    prover = _Prover(catalog, timeout_ms)
    result.compared = len(set(before) | set(after))
    for ref in sorted(set(before) | set(after)):
        if ref not in before or ref not in after:
            present = after.get(ref) or before[ref]
            side = head if ref in after else base
            w = present.workload
            other = base if side is head else head
            why = (
                f" ({other.label} cannot read it or the API server refuses it: invalid-workload)"
                if present.workload.ref in refused_in[0 if side is head else 1]
                else ""
            )
            message = f"only in {side.label}{why}: a workload on one side cannot be compared"
            result.changed.append(WorkloadVerdict(ref, _relative(w.file, side), w.line, w.column, message))
            continue
        difference = compare_landings(before[ref], after[ref], catalog)
        if difference is not None:
            result.changed.append(_verdict(ref, before[ref], after[ref], difference, (base, head), prover, catalog))
    return result


def _refusal_json(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "workload": finding.object_ref,
        "file": finding.file,
        "line": finding.line,
        "column": finding.column,
        "message": finding.message,
    }


def render(result: Equivalence, output: str) -> str:
    """The verdict as text, json or markdown (diff's formats)."""
    if output == "json":
        data = {
            "equivalent": result.equivalent,
            "base": result.base,
            "head": result.head,
            "workloads": result.compared,
            "changed": [v.to_json() for v in result.changed],
            "head_errors": result.head_errors,
            "refused": [_refusal_json(f) for f in result.refused],
            "summary": result.summary(),
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    if output == "markdown":
        lines = [f"**{result.summary()}**", ""]
        if result.changed:
            lines += ["| workload | where | counter-example |", "|---|---|---|"]
            lines += [f"| `{v.workload}` | `{v.file}:{v.line}` | {v.message} |" for v in result.changed]
            lines.append("")
        if result.refused:
            lines += [f"{result.head} cannot place these workloads:", ""]
            lines += [f"- `{f.object_ref}` at `{f.file}:{f.line}`: {f.message} [{f.rule}]" for f in result.refused]
            lines.append("")
        return "\n".join(lines)
    lines = [f"{f.file}:{f.line}:{f.column}: error: {f.object_ref}: {f.message} [{f.rule}]" for f in result.refused]
    lines += [f"{v.file}:{v.line}:{v.column}: {v.workload}: {v.message}" for v in result.changed]
    lines += [
        f"  proven: {v.pool} admits {v.node.split(' (')[0]} (Z3)" for v in result.changed if v.proven
    ]
    return "".join(line + "\n" for line in [*lines, result.summary()])


def equivalent_command(
    flags: DiffFlags, catalog: Catalog, *, values: Mapping[str, Any] | None = None
) -> CommandOutput:
    """Run `diff --equivalent` with diff's flags (module doc)."""
    if not flags.workload_paths:
        why = "needs --workloads APPS: the workloads whose landing sets to compare"
        return CommandOutput(2, "", f"{_PROGRAM}: {why}\n")
    scratch = tempfile.mkdtemp(prefix="karpenter-policy-equivalent-")
    today = datetime.now(UTC).date()
    try:
        try:
            sides = [
                load_side(
                    spec,
                    flags.paths or None,
                    catalog,
                    scratch=os.path.join(scratch, label),
                    timeout_ms=flags.timeout_ms,
                    values=values,
                    workload_paths=flags.workload_paths,
                    today=today,
                )
                for label, spec in (("base", flags.base), ("head", flags.head))
            ]
        except DiffError as error:
            return CommandOutput(2, "", f"{_PROGRAM}: {error}\n")
        base, head = sides
        nowhere = [p for p in flags.paths if p not in base.present and p not in head.present]
        if nowhere:
            return CommandOutput(2, "", f"{_PROGRAM}: {', '.join(nowhere)}: not on either side\n")
        result = prove_equivalent(base, head, flags.workload_paths, catalog, flags.timeout_ms)
        return CommandOutput(0 if result.equivalent else 1, render(result, flags.output), "")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
