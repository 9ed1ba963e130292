"""`diff BASE HEAD [PATHS]`: what the policies of HEAD admit that those of BASE did not, and the reverse.

BASE and HEAD are each a git revision (the files are read from the object database with `git ls-tree` and
`git cat-file`, as `revision` does: no checkout, the working tree is not touched, a file over the loader's size
bound is never read; git runs on the repository holding the current directory only, as `gitrepo` says) or a
directory. PATHS (default `policies/`; for a
directory side, relative to it, default the whole directory) are checked on both sides as `check` does, then
compared per Provisioner name (and per Karpenter v1 NodePool name, through the scheduling view `check` proves:
`NodePool/<name>`, so a Provisioner and a NodePool of one name, as while migrating, stay apart), Zelkova-style — by
what they admit, not by how they are written:

* offerings — the (instance type, zone, capacity type) triples a node may be launched as: the solver's exact set
  of satisfying instance types, each with its available offerings that the zone and capacity-type requirements
  allow. Broken down into instance types, zones, capacity types and architectures;
* taints (which pods are let on) and startup taints, limits, custom node labels (labels and requirements on keys
  the catalog does not define: what pod nodeSelectors can ask for), and the weight (the order they are tried).

Every offering difference comes with a concrete witness (the cheapest such offering) that the solver proves on
both sides: Z3 finds HEAD's requirements plus `instance-type In [t], zone In [z], capacity-type In [c]`
satisfiable and BASE's unsatisfiable (or the reverse). Provisioners added and removed are listed with what they
admit. With `--workloads`, every replica of the workloads is packed on each side's provisioners (`placement.schedule`,
as `check --workloads` does): which workloads change provisioner, and how many of each one's replicas each side
cannot place. Replicas HEAD strands that BASE placed (and new workloads HEAD cannot place) are what broke: each is a
`workload-unschedulable` error of HEAD's report and leads every output, above the cost. The cost compares like with
like: the pods one side places and the other cannot (`Stranded`) are left out of the change and said apart.

Output: text (a table per provisioner), json, or markdown (a summary fit for a pull-request comment).
Exit codes: 0; 1 when HEAD has error findings or strands replicas BASE placed (with `--exit-code`: also when
anything differs); 2 when it cannot run (an unknown revision, a path on neither side, no git).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from karpenter_policy.api.kinds import PROVISIONER_KIND
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.violations import ERROR, INVALID_WORKLOAD, WORKLOAD_UNSCHEDULABLE
from karpenter_policy.catalog import Catalog
from karpenter_policy.catalog.table import CatalogTable, launch_labels, table_for
from karpenter_policy.checks.findings import CommandOutput, Finding, Report
from karpenter_policy.checks.options import BudgetView, OptionError
from karpenter_policy.checks.proof.placement import (
    HOURS_PER_MONTH,
    Capacity,
    Placement,
    Schedule,
    capacity_of,
    money,
    schedule,
    unknown_scale_targets,
)
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner, provisioner_os
from karpenter_policy.checks.proof.solver import DEFAULT_TIMEOUT_MS, Origin, Solver, Term, Verdict, terms_of
from karpenter_policy.checks.reporters import json_text
from karpenter_policy.checks.repository import PolicyRepository, load_repository
from karpenter_policy.checks.source.gitrepo import GitError, Repository, find_repository
from karpenter_policy.checks.source.revision import policy_files, write_files
from karpenter_policy.checks.source.workloads import LocatedWorkload, read_workloads
from karpenter_policy.checks.validation.budgets import NodePoolTimeline, check_budgets
from karpenter_policy.commands.budgetcomment import BudgetChange, budget_change_lines, budget_changes
from karpenter_policy.commands.costcomment import cost_headline, diff_cost_lines, markdown_text, ratio_text
from karpenter_policy.commands.flags import DiffFlags
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import known_price, price_key, price_text
from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.model.pools import pool_ref, pools_noun
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.resources import format_quantity

__all__ = ["DiffError", "DiffResult", "Offering", "ProvisionerDiff", "Side", "diff_sides", "load_side", "render_diff"]

FORMATS = ("text", "json", "markdown")
#: Witnesses proven with the solver per provisioner (each costs two small solver calls).
MAX_PROVEN_WITNESSES = 16
_SHOWN = 4


class DiffError(Exception):
    """The diff cannot run: an unknown revision, no git, a path that exists on neither side."""


# --- reading a side -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Side:
    """One side of the diff, checked: its label (the revision or directory as given), the report, the proven
    provisioners (files relative to the side's root), and what the witness proofs need."""

    label: str
    kind: str  # "git" | "directory"
    report: Report
    checked: list[CheckedProvisioner]
    #: `CheckedProvisioner.key` (a Provisioner's name, `NodePool/<name>`) → the document proven (a NodePool's view)
    documents: dict[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    os_of: dict[str, str] = field(default_factory=dict)
    present: list[str] = field(default_factory=list)  # the PATHS that exist on this side
    workload_root: str | None = None  # where --workloads paths are read from on this side (git: a temporary tree)
    budgets: list[NodePoolTimeline] = field(default_factory=list)  # the valid v1 NodePools' weeks

    def provisioner(self, key: str) -> CheckedProvisioner | None:
        """The proven Provisioner, or NodePool, of this `CheckedProvisioner.key`."""
        return next((c for c in self.checked if c.key == key), None)


#: Reading a revision's files (cat-file over many blobs) may take a while on a large repository.
GIT_TIMEOUT_SECONDS = 300.0


def _git(repository: Repository, args: Sequence[str], stdin: bytes | None = None) -> bytes:
    try:
        return repository.git(args, stdin, timeout=GIT_TIMEOUT_SECONDS)
    except GitError as error:
        raise DiffError(str(error)) from None


def is_revision(ref: str, repository: Repository) -> bool:
    """True when `ref` names a commit of `repository`."""
    if ref.startswith("-"):
        return False
    try:
        _git(repository, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"])
    except DiffError:
        return False
    return True


def _pathspec(prefix: str, path: str) -> str:
    """`path`, given relative to the directory `prefix` of the work tree, relative to the work tree's root."""
    joined = posixpath.normpath(posixpath.join(prefix, path.replace(os.sep, "/")))
    return "." if joined in ("", ".") else joined


def materialise(
    repository: Repository, ref: str, paths: Sequence[str], dest: str, cwd: str = "."
) -> tuple[str, list[str]]:
    """Write the policy files under `paths` (relative to `cwd`) as of revision `ref` below `dest`, from git's
    object database (`revision.write_files`: one blob at a time, none over the loader's bound read); returns the
    directory that stands for `cwd` in `dest` and the paths that exist at `ref`."""
    prefix = repository.prefix_of(cwd)
    if prefix is None:
        raise DiffError(f"{cwd} is not inside the git work tree {repository.root}")
    pathspecs = [_pathspec(prefix, p) for p in paths]
    try:
        files = policy_files(repository, ref, pathspecs, GIT_TIMEOUT_SECONDS)
        write_files(repository, files, dest, timeout=GIT_TIMEOUT_SECONDS)
    except GitError as error:
        raise DiffError(str(error)) from None
    root = os.path.normpath(os.path.join(dest, *[p for p in prefix.split("/") if p]))
    present = [p for p in paths if os.path.exists(os.path.join(root, p))]
    return root, present


def load_side(
    spec: str,
    paths: Sequence[str] | None,
    catalog: Catalog,
    *,
    scratch: str,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    values: Mapping[str, Any] | None = None,
    workload_paths: Sequence[str] = (),
    today: date | None = None,
    min_values_policy: str = STRICT,
) -> Side:
    """Check one side: a directory (PATHS relative to it) or a git revision (PATHS relative to the current
    directory, read as of that revision into `scratch`). The v1 NodePools' budgets are looked at over the week
    holding `today` (the current day when None), in UTC; their unmet minValues judged under `min_values_policy`
    (the `min-values` rule: an error under Strict, a warning under BestEffort, as `check`)."""
    repository = None if os.path.isdir(spec) else find_repository(os.curdir)
    if os.path.isdir(spec):
        root, kind = spec, "directory"
        wanted = list(paths) if paths else ["."]
        present = [p for p in wanted if os.path.exists(os.path.join(root, p))]
        workload_root = None
    elif repository is not None and is_revision(spec, repository):
        kind = "git"
        wanted = list(paths) if paths else ["policies/"]
        root, present = materialise(repository, spec, wanted, scratch)
        workload_root = None
        if workload_paths:
            workload_root, _ = materialise(repository, spec, list(workload_paths), os.path.join(scratch, ".workloads"))
    else:
        raise DiffError(f"{spec!r} is neither a directory nor a git revision{shallow_hint(repository)}")
    targets = [os.path.normpath(os.path.join(root, p)) for p in present]
    policies = (
        load_repository(targets, values, prove=True, catalog=catalog, timeout_ms=timeout_ms,
                        min_values_policy=min_values_policy)
        if targets
        else PolicyRepository(Report())
    )
    report = policies.report
    documents: dict[str, Mapping[str, Any]] = {name: doc.data for name, doc in policies.provisioners.items()}
    documents.update(
        {c.key: c.document for c in policies.checked if c.kind == NODEPOOL_KIND and c.name in policies.nodepools}
    )
    node_templates = policies.node_template_specs()
    report.findings = [replace(f, file=_relative(f.file, root)) for f in report.findings]
    # a diff compares valid provisioners and NodePools only (one with an error is "invalid in BASE/HEAD", whatever
    # its proof)
    checked = [replace(c, file=_relative(c.file, root)) for c in policies.checked if c.key in documents]
    os_of = {name: provisioner_os(doc, node_templates) for name, doc in documents.items()}
    weeks = check_budgets(policies.nodepools.values(), BudgetView(), today or datetime.now(UTC).date()).timelines
    budgets = [replace(timeline, file=_relative(timeline.file, root)) for timeline in weeks]
    return Side(spec, kind, report, checked, documents, os_of, present, workload_root, budgets)


def shallow_hint(repository: Repository | None) -> str:
    """Why a revision may be unknown in a shallow clone, and what to do (actions/checkout fetches one commit)."""
    if repository is None or not repository.is_shallow():
        return ""
    return ("; this clone is shallow, so BASE's commits may not have been fetched: set fetch-depth: 0 on "
            "actions/checkout (or run git fetch --unshallow)")


def _relative(file: str, root: str) -> str:
    if not file:
        return file
    relative = os.path.relpath(file, root)
    return file if relative.startswith("..") else relative


# --- comparing ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Offering:
    """One way a node may be launched: an instance type in a zone as a capacity type, at a price (USD/h; None: no
    price data for `region`). Ordered cheapest first, unpriced last."""

    rank: float = field(repr=False)  # price_key(price)
    instance_type: str
    zone: str
    capacity_type: str
    proven: bool | None = field(default=None, compare=False)
    region: str = field(default="", compare=False)
    #: The label (key, value) the node has, for a v1 NodePool's change in one of v1.14.1's labels: proven with it.
    label: tuple[str, str] | None = field(default=None, compare=False)

    @property
    def price(self) -> float | None:
        return known_price(self.rank)

    def __str__(self) -> str:
        """`c6g.medium (us-east-1a, spot, $0.0340/h)`, with its `label` when it has one (`…, $0.0770/h;
        karpenter.k8s.aws/instance-cpu-manufacturer=amd)`); an example the solver could not confirm on both sides
        says so (it may be wrong)."""
        label = f"; {self.label[0]}={self.label[1]}" if self.label is not None else ""
        text = f"{self.instance_type} ({self.zone}, {self.capacity_type}, {price_text(self.price, self.region)}{label})"
        return text + (" (unconfirmed)" if self.proven is False else "")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "instance_type": self.instance_type,
            "zone": self.zone,
            "capacity_type": self.capacity_type,
            "price": self.price,
        }
        if self.label is not None:
            data["labels"] = {self.label[0]: self.label[1]}
        if self.proven is not None:
            data["proven"] = self.proven
        return data


@dataclass(slots=True)
class Delta:
    """One dimension of a provisioner's change: what HEAD admits that BASE did not (`added`) and the reverse,
    each with a witness when the dimension is about offerings."""

    dimension: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    added_witness: Offering | None = None
    removed_witness: Offering | None = None
    note: str = ""

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"dimension": self.dimension, "added": self.added, "removed": self.removed}
        if self.added_witness is not None:
            data["added_witness"] = self.added_witness.to_json()
        if self.removed_witness is not None:
            data["removed_witness"] = self.removed_witness.to_json()
        if self.note:
            data["note"] = self.note
        return data


@dataclass(slots=True)
class ProvisionerDiff:
    name: str
    status: str  # added | removed | changed | unchanged | undecided
    base: CheckedProvisioner | None
    head: CheckedProvisioner | None
    deltas: list[Delta] = field(default_factory=list)
    note: str = ""

    @property
    def kind(self) -> str:
        """Provisioner, or NodePool (its `name` is then `NodePool/<name>`: `CheckedProvisioner.key`)."""
        return NODEPOOL_KIND if self.name.startswith(f"{NODEPOOL_KIND}/") else PROVISIONER_KIND

    @property
    def title(self) -> str:
        """`Provisioner default`, `NodePool default`: how the text output heads its table."""
        return f"{self.kind} {self.name.removeprefix(f'{NODEPOOL_KIND}/')}"

    def to_json(self) -> dict[str, object]:
        def side(c: CheckedProvisioner | None) -> object:
            if c is None:
                return None
            data: dict[str, object] = {"file": c.file, "line": c.line, "verdict": c.verdict.value}
            data["instance_types"] = len(c.instance_types)
            if c.witness is not None:
                data["witness"] = c.witness.to_json()
            return data

        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "base": side(self.base),
            "head": side(self.head),
            "changes": [d.to_json() for d in self.deltas],
            "note": self.note,
        }


@dataclass(slots=True)
class WorkloadChange:
    """A workload whose placement differs: `base` / `head` are the provisioners whose nodes take its replicas on
    each side (None: none is placed there); `base_stranded` / `head_stranded` how many of its replicas each side
    cannot place (of `replicas`, HEAD's count). `reason`: why HEAD places it otherwise (for a workload HEAD strands,
    the refusal of the provisioner BASE placed it with)."""

    workload: str
    file: str
    base: str | None
    head: str | None
    reason: str = ""
    present: str = "both"  # "added": the workload is new in HEAD
    replicas: int = 1
    base_stranded: int = 0
    head_stranded: int = 0

    @property
    def newly_stranded(self) -> int:
        """The replicas BASE placed (or, for a new workload, would have to) that HEAD cannot place."""
        if self.present == "added":
            return self.head_stranded
        return max(0, self.head_stranded - self.base_stranded)

    @property
    def breaks(self) -> bool:
        """HEAD strands replicas BASE placed (or a new workload it cannot place): an error of the diff."""
        return self.newly_stranded > 0

    @property
    def status(self) -> str:
        if self.present == "added":
            return "new, unschedulable"
        if self.head_stranded > self.base_stranded:
            return "becomes unschedulable" if self.head_stranded >= self.replicas else "becomes partly unschedulable"
        if self.head_stranded < self.base_stranded:
            return "becomes schedulable" if self.head_stranded == 0 else "becomes partly schedulable"
        return "changes provisioner"

    def lead(self) -> str:
        """`Job/model-training — provisioner gpu: …`, with `(1 of its 2 replicas)` when HEAD strands only some: the
        line that leads a report when the workload `breaks`."""
        text = self.workload
        if self.newly_stranded < self.replicas:
            text += f" ({self.newly_stranded} of its {self.replicas} replicas)"
        elif self.present == "added":
            text += " (new)"
        return f"{text} — {self.reason}" if self.reason else text

    def to_json(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "file": self.file,
            "status": self.status,
            "present": self.present,
            "base": self.base,
            "head": self.head,
            "reason": self.reason,
            "replicas": self.replicas,
            "base_unscheduled": self.base_stranded,
            "head_unscheduled": self.head_stranded,
            "newly_unscheduled": self.newly_stranded,
            "error": self.breaks,
        }


@dataclass(frozen=True, slots=True)
class Stranded:
    """Pods of a workload that one side places and the other cannot: `side` "base" (BASE places them, HEAD cannot)
    or "head" (the reverse), and what their share of that side's nodes costs a month (None: unknown). Their cost is
    left out of the comparison of the bills: a pod HEAD cannot place is no saving."""

    workload: str
    pods: int
    side: str
    monthly: float | None

    def to_json(self) -> dict[str, object]:
        return {"workload": self.workload, "pods": self.pods, "side": self.side, "monthly": self.monthly}


def stranded_pods(base: Capacity, head: Capacity) -> tuple[Stranded, ...]:
    """The pods each side places and the other leaves pending, per workload: fewer pods placed on one side *and* as
    many pending there (fewer replicas in HEAD's manifest is a real saving, not a stranded pod)."""
    bills = [{b.workload: b for b in capacity.bills()} for capacity in (base, head)]
    found: list[Stranded] = []
    for workload in sorted(set(bills[0]) | set(bills[1])):
        before, after = bills[0].get(workload), bills[1].get(workload)
        placed_before = before.pods if before is not None else 0
        placed_after = after.pods if after is not None else 0
        lost = min(max(0, placed_before - placed_after), head.unscheduled.get(workload, 0))
        gained = min(max(0, placed_after - placed_before), base.unscheduled.get(workload, 0))
        for count, side, bill in ((lost, "base", before), (gained, "head", after)):
            if count and bill is not None:
                monthly = bill.monthly
                share = None if monthly is None or not bill.pods else monthly * count / bill.pods
                found.append(Stranded(workload, count, side, share))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class CostChange:
    """What the policy change does to the bill of the workloads' nodes (every replica packed by the scheduler, on
    each side's provisioners), and for each workload whose nodes change, the instance type and capacity type most
    of its pods run on, before and after. Like is compared with like: the pods one side places and the other
    cannot (`stranded`) are left out of the change (their cost on the side that places them is `left_out`)."""

    base: Capacity
    head: Capacity
    workloads: tuple[tuple[str, str, str], ...] = ()  # (workload, BASE "m5.2xlarge on-demand", HEAD ...)
    stranded: tuple[Stranded, ...] = ()

    def left_out(self) -> tuple[float | None, float | None]:
        """$/month of the stranded pods on BASE's side and on HEAD's (None: unknown)."""
        totals: list[float | None] = []
        for side in ("base", "head"):
            amounts = [s.monthly for s in self.stranded if s.side == side]
            totals.append(None if any(a is None for a in amounts) else sum(a for a in amounts if a is not None))
        return totals[0], totals[1]

    def compared(self) -> tuple[float | None, float | None]:
        """$/month of each side without the stranded pods (None: unknown)."""
        base_out, head_out = self.left_out()
        before, after = self.base.monthly, self.head.monthly
        return (
            None if before is None or base_out is None else before - base_out,
            None if after is None or head_out is None else after - head_out,
        )

    @property
    def ratio(self) -> float | None:
        before, after = self.compared()
        return None if before is None or after is None or before == 0 else after / before - 1

    def stranded_text(self, side: str) -> str:
        """`$1,931.87 a month at BASE for 2 pods of Job/model-training that HEAD cannot place` ("" when none)."""
        found = [s for s in self.stranded if s.side == side]
        if not found:
            return ""
        pods = sum(s.pods for s in found)
        amounts = [s.monthly for s in found]
        cost = "an unknown amount" if any(a is None for a in amounts) else money(sum(a or 0.0 for a in amounts))
        names = ", ".join(s.workload for s in found[:_SHOWN]) + (" …" if len(found) > _SHOWN else "")
        if side == "base":
            return f"{cost} a month at BASE for {_pods(pods)} of {names} that HEAD cannot place"
        return f"{cost} a month at HEAD for {_pods(pods)} of {names} that BASE could not place"

    def summary(self) -> str:
        """`$3,007.60 → $2,226.50 a month ($4.12/h → $3.05/h, −26%), 5 → 4 nodes`; `unknown` for a side with a
        node without price data; with stranded pods, the change like for like and what was left out."""
        before, after = self.base.cost, self.head.cost
        if before is None or after is None:
            text = " → ".join("unknown" if cost is None else f"{money(cost)}/h" for cost in (before, after))
            text += f" (no price data for {self.head.region or self.base.region or 'the region'})"
        else:
            text = f"{money(before * HOURS_PER_MONTH)} → {money(after * HOURS_PER_MONTH)} a month"
            text += f" ({money(before)}/h → {money(after)}/h"
            text += f", {self.ratio:+.0%})".replace("-", "−") if self.ratio is not None and not self.stranded else ")"
        text += f", {len(self.base.nodes)} → {len(self.head.nodes)} nodes"
        if (self.base.estimated or self.head.estimated) and before is not None and after is not None:
            text += " (spot estimated at on-demand prices)"
        if self.stranded:
            was, now = self.compared()
            if was is not None and now is not None:
                text += f"; like for like {money(was)} → {money(now)} a month"
                text += f" ({ratio_text(was, now)})" if was else ""
            left = "; ".join(t for t in (self.stranded_text("base"), self.stranded_text("head")) if t)
            text += f"; not counted: {left}"
        return text

    def monthly_changes(self) -> dict[str, str]:
        """Workload → `, $1,124.20 → $890.60 a month`: its share of the bill on each side (empty when unknown)."""
        sides = [{b.workload: b.monthly for b in capacity.bills()} for capacity in (self.base, self.head)]
        changes = {}
        for workload in set(sides[0]) | set(sides[1]):
            before, after = (side.get(workload, 0.0) for side in sides)
            known = before is not None and after is not None
            changes[workload] = f", {money(before or 0.0)} → {money(after or 0.0)} a month" if known else ""
        return changes

    def to_json(self) -> dict[str, object]:
        before, after = self.compared()
        return {
            "base": self.base.to_json(),
            "head": self.head.to_json(),
            "change": None if self.ratio is None else round(self.ratio, 6),
            "compared": {
                "base_monthly": None if before is None else round(before, 2),
                "head_monthly": None if after is None else round(after, 2),
            },
            "stranded": [s.to_json() for s in self.stranded],
            "workloads": [{"workload": w, "base": b, "head": h} for w, b, h in self.workloads],
        }


def _pods(count: int) -> str:
    return f"{count} pod{'s' if count != 1 else ''}"


@dataclass(slots=True)
class DiffResult:
    base: Side
    head: Side
    paths: list[str]
    provisioners: list[ProvisionerDiff]
    workloads: list[WorkloadChange] = field(default_factory=list)
    workloads_checked: int | None = None  # None: not compared
    notes: list[str] = field(default_factory=list)
    cost: CostChange | None = None
    region: str = ""  # the catalog's
    budget_changes: list[BudgetChange] = field(default_factory=list)  # v1 NodePools whose budgets changed

    @property
    def changed(self) -> list[ProvisionerDiff]:
        return [p for p in self.provisioners if p.status != "unchanged"]

    @property
    def broken(self) -> list[WorkloadChange]:
        """The workloads (or some of their replicas) HEAD cannot place and BASE did: what a report leads with."""
        return [w for w in self.workloads if w.breaks]

    def broken_headline(self) -> str:
        """`1 workload can no longer be placed: Job/model-training — provisioner gpu: …` ("" when none); more than
        one: the count alone (each has its own line)."""
        broken = self.broken
        if not broken:
            return ""
        count = len(broken)
        text = f"{count} workload{'s' if count != 1 else ''} can no longer be placed"
        return f"{text}: {broken[0].lead()}" if count == 1 else text

    def exit_code(self, exit_code_on_diff: bool = False) -> int:
        if self.head.report.could_not_run:
            return 2
        if self.head.report.errors or self.broken:
            return 1
        if exit_code_on_diff and (self.changed or self.workloads or self.budget_changes):
            return 1
        return 0


def admitted(checked: CheckedProvisioner, catalog: Catalog) -> dict[tuple[str, str, str], float | None]:
    """The offerings a proven provisioner admits: every satisfying type's available offerings in a zone and
    capacity type its requirements allow, with their prices."""
    if checked.verdict != Verdict.SAT:
        return {}
    requirements = checked.provisioner.requirements
    zone = requirements.get(wk.ZONE)
    capacity = requirements.get(wk.CAPACITY_TYPE)
    result: dict[tuple[str, str, str], float | None] = {}
    for name in checked.instance_types:
        it = catalog.get(name)
        if it is None:
            continue
        for o in it.offerings:
            if (
                o.available
                and (zone is None or zone.has(o.zone))
                and (capacity is None or capacity.has(o.capacity_type))
            ):
                result[(name, o.zone, o.capacity_type)] = o.price
    return result


class _Prover:
    """Proves witnesses with Z3: the offering (and its label, if any) is admitted by one side's requirements and not
    the other's, each read with the labels of its API version."""

    def __init__(self, catalog: Catalog, timeout_ms: int) -> None:
        self.catalog, self.timeout_ms = catalog, timeout_ms
        self.solvers: dict[tuple[str, bool], Solver] = {}

    def admits(self, document: Mapping[str, Any], os: str, offering: Offering) -> Verdict:
        v1 = document.get("kind") == NODEPOOL_KIND
        solver = self.solvers.get((os, v1)) or self.solvers.setdefault(
            (os, v1), Solver(self.catalog, self.timeout_ms, os, v1=v1)
        )
        pins = [
            (wk.INSTANCE_TYPE, offering.instance_type),
            (wk.ZONE, offering.zone),
            (wk.CAPACITY_TYPE, offering.capacity_type),
            *([offering.label] if offering.label is not None else []),
        ]
        pinned = [Term(Requirement.new(key, "In", [value]), (), Origin.REQUIREMENT) for key, value in pins]
        return solver.solve([*terms_of(document), *pinned]).verdict

    def prove(
        self, offering: Offering, yes: tuple[Mapping[str, Any], str], no: tuple[Mapping[str, Any], str] | None
    ) -> Offering:
        proven = self.admits(*yes, offering) == Verdict.SAT
        if proven and no is not None:
            proven = self.admits(*no, offering) == Verdict.UNSAT
        return replace(offering, proven=proven)


def _invalid_provisioners(report: Report) -> set[str]:
    """The keys of the Provisioners and NodePools that have error findings (left out of the comparison)."""
    prefix = f"{PROVISIONER_KIND}/"
    return {
        f.object_ref.removeprefix(prefix)
        for f in report.findings
        if f.severity == "error" and f.object_ref and f.object_ref.startswith((prefix, f"{NODEPOOL_KIND}/"))
    }


def _cheapest(
    offerings: Mapping[tuple[str, str, str], float | None], keep: Iterable[tuple[str, str, str]], region: str
) -> Offering | None:
    best: Offering | None = None
    for key in keep:
        candidate = Offering(price_key(offerings[key]), *key, region=region)
        if best is None or candidate < best:
            best = candidate
    return best


def _offering_deltas(
    base: Mapping[tuple[str, str, str], float | None],
    head: Mapping[tuple[str, str, str], float | None],
    catalog: Catalog,
) -> list[Delta]:
    """The offerings dimension and its breakdown, each side's values with their cheapest witness (unproven)."""
    deltas: list[Delta] = []
    more, less = set(head) - set(base), set(base) - set(head)
    if not more and not less:
        return deltas
    deltas.append(
        Delta(
            "offerings",
            [f"{t} {z} {c}" for t, z, c in sorted(more)],
            [f"{t} {z} {c}" for t, z, c in sorted(less)],
            _cheapest(head, more, catalog.region),
            _cheapest(base, less, catalog.region),
        )
    )

    def arches(name: str) -> tuple[str, ...]:
        it = catalog.get(name)
        return it.architectures if it is not None else ()

    projections = (
        ("instance types", lambda key: (key[0],)),
        ("zones", lambda key: (key[1],)),
        ("capacity types", lambda key: (key[2],)),
        ("architectures", lambda key: arches(key[0])),
    )
    for dimension, project in projections:
        head_values = {v for key in head for v in project(key)}
        base_values = {v for key in base for v in project(key)}
        added, removed = sorted(head_values - base_values), sorted(base_values - head_values)
        if not added and not removed:
            continue
        added_set, removed_set = set(added), set(removed)
        deltas.append(
            Delta(
                dimension,
                added,
                removed,
                _cheapest(head, (k for k in head if added_set & set(project(k))), catalog.region),
                _cheapest(base, (k for k in base if removed_set & set(project(k))), catalog.region),
            )
        )
    return deltas


def _taint_deltas(base: CheckedProvisioner, head: CheckedProvisioner) -> list[Delta]:
    deltas: list[Delta] = []
    b, h = base.provisioner, head.provisioner
    for dimension, before, after in (
        ("taints", set(b.taints), set(h.taints)),
        ("startup taints", set(b.startup_taints), set(h.startup_taints)),
    ):
        gone, new = sorted(before - after, key=str), sorted(after - before, key=str)
        if not gone and not new:
            continue
        if dimension == "taints":  # a taint removed lets more pods on; one added keeps pods without it away
            delta = Delta(
                dimension,
                [f"pods that do not tolerate {t}" for t in gone],
                [f"pods that do not tolerate {t}" for t in new],
            )
        else:
            delta = Delta(dimension, [f"without {t}" for t in gone], [f"with {t}" for t in new])
            delta.note = "startup taints only delay pods until the node is initialised"
        deltas.append(delta)
    return deltas


def _limit_deltas(base: CheckedProvisioner, head: CheckedProvisioner) -> list[Delta]:
    b, h = base.provisioner.limits, head.provisioner.limits
    added: list[str] = []
    removed: list[str] = []
    for resource in sorted(set(b) | set(h)):
        before, after = b.get(resource), h.get(resource)
        if before == after:
            continue
        if after is None:
            added.append(f"{resource}: no limit (was {_q(before)})")
        elif before is None:
            removed.append(f"{resource}: limited to {_q(after)} (no limit before)")
        elif after > before:
            added.append(f"{resource}: limit raised from {_q(before)} to {_q(after)}")
        else:
            removed.append(f"{resource}: limit lowered from {_q(before)} to {_q(after)}")
    return [Delta("limits", added, removed)] if added or removed else []


def _q(value: Decimal | None) -> str:
    return "none" if value is None else format_quantity(value)


def _custom_keys(requirements: Requirements, table: CatalogTable) -> set[str]:
    return {k for k in requirements if not table.defines(k) and k not in (wk.ZONE, wk.CAPACITY_TYPE)}


def _label_deltas(base: CheckedProvisioner, head: CheckedProvisioner, table: CatalogTable) -> list[Delta]:
    """Custom node labels (labels, and requirements on keys the catalog of their API version does not define:
    `table`'s): the values a pod's nodeSelector may ask for on each side."""
    b, h = base.provisioner.requirements, head.provisioner.requirements
    added: list[str] = []
    removed: list[str] = []
    for key in sorted(_custom_keys(b, table) | _custom_keys(h, table)):
        rb, rh = b.get(key), h.get(key)
        if rb == rh:
            continue
        if rb is None or rh is None:
            present = rh if rb is None else rb
            assert present is not None
            (added if rb is None else removed).append(f"{key} {present.describe_values()}")
            continue
        candidates = sorted(rb.values | rh.values) + [_other_value(rb, rh)]
        more = [v for v in candidates if rh.has(v) and not rb.has(v)]
        less = [v for v in candidates if rb.has(v) and not rh.has(v)]
        added += [f"{key}={v}" for v in more]
        removed += [f"{key}={v}" for v in less]
        if not more and not less:
            added.append(f"{key} {rh.describe_values()} (was {rb.describe_values()})")
    return [Delta("node labels", added, removed)] if added or removed else []


def _other_value(*requirements: Requirement) -> str:
    mentioned = set().union(*(r.values for r in requirements))
    other = "any-other-value"
    while other in mentioned:
        other += "-"
    return other


def _v1_label_values(
    checked: CheckedProvisioner, offerings: Iterable[tuple[str, str, str]], key: str, catalog: Catalog
) -> dict[str, list[tuple[str, str, str]]]:
    """Each value of `key` (one of `model.labels.V1_INSTANCE_LABELS`) a node of a NodePool's `offerings` may carry,
    with the offerings that carry it: its type's value, or for a launch label (the tenancy) each value the type
    offers that the NodePool's requirements allow."""
    requirement = checked.provisioner.requirements.get(key)
    launched = launch_labels(True).get(key)
    found: dict[str, list[tuple[str, str, str]]] = {}
    for offering in offerings:
        if launched is not None:
            values: tuple[str, ...] = launched
        else:
            it = catalog.get(offering[0])
            value = it.v1_labels.get(key) if it is not None else None
            values = (value,) if value is not None else ()
        for value in values:
            if requirement is None or requirement.has(value):
                found.setdefault(value, []).append(offering)
    return found


def _v1_label_deltas(
    base: CheckedProvisioner,
    head: CheckedProvisioner,
    before: Mapping[tuple[str, str, str], float | None],
    after: Mapping[tuple[str, str, str], float | None],
    catalog: Catalog,
) -> list[Delta]:
    """A NodePool's change in each label Karpenter v1.14.1 added (`model.labels.V1_INSTANCE_LABELS`): the values
    HEAD's nodes may carry that BASE's could not, and the reverse, each with the cheapest offering carrying one
    (its `label` pinned when the solver proves it). None for a Provisioner: v0.31's nodes carry none of them."""
    if head.kind != NODEPOOL_KIND:
        return []
    deltas: list[Delta] = []
    for key in sorted(wk.V1_INSTANCE_LABELS):
        values_before = _v1_label_values(base, before, key, catalog)
        values_after = _v1_label_values(head, after, key, catalog)
        added, removed = sorted(values_after.keys() - values_before), sorted(values_before.keys() - values_after)
        if not added and not removed:
            continue
        deltas.append(
            Delta(
                key,
                added,
                removed,
                _label_witness(key, added, values_after, after, catalog.region),
                _label_witness(key, removed, values_before, before, catalog.region),
            )
        )
    return deltas


def _label_witness(
    key: str,
    values: Sequence[str],
    carried: Mapping[str, list[tuple[str, str, str]]],
    offerings: Mapping[tuple[str, str, str], float | None],
    region: str,
) -> Offering | None:
    """The cheapest of the `offerings` that carry one of `values` of `key` (ties: the first value), with its label."""
    cheapest = min(
        ((Offering(price_key(offerings[o]), *o, region=region), value) for value in values for o in carried[value]),
        default=None,
    )
    return None if cheapest is None else replace(cheapest[0], label=(key, cheapest[1]))


def compare(base: CheckedProvisioner, head: CheckedProvisioner, catalog: Catalog) -> list[Delta]:
    """Every dimension in which HEAD's provisioner admits other things than BASE's (witnesses not yet proven), each
    read with the labels of its API version (`catalog.table.catalog_keys`: a NodePool's include v1.14.1's)."""
    table = table_for(catalog, v1=head.kind == NODEPOOL_KIND)
    before, after = admitted(base, catalog), admitted(head, catalog)
    deltas = _offering_deltas(before, after, catalog)
    if base.verdict != head.verdict:
        deltas.insert(0, Delta("verdict", [head.verdict.value], [base.verdict.value]))
    deltas += _v1_label_deltas(base, head, before, after, catalog)
    deltas += _taint_deltas(base, head)
    deltas += _limit_deltas(base, head)
    deltas += _label_deltas(base, head, table)
    b, h = base.provisioner.weight, head.provisioner.weight
    if b != h:
        deltas.append(Delta("weight", [f"{h} (was {b}; tried {'earlier' if h > b else 'later'})"]))
    return deltas


def diff_sides(
    base: Side, head: Side, catalog: Catalog, timeout_ms: int = DEFAULT_TIMEOUT_MS, paths: Sequence[str] = ()
) -> DiffResult:
    """Compare two checked sides provisioner by provisioner; prove the witnesses."""
    prover = _Prover(catalog, timeout_ms)
    names = sorted({c.key for c in base.checked} | {c.key for c in head.checked})
    invalid = {label: _invalid_provisioners(side.report) for label, side in (("BASE", base), ("HEAD", head))}
    diffs: list[ProvisionerDiff] = []
    for name in names:
        b, h = base.provisioner(name), head.provisioner(name)
        if b is None or h is None:
            label = "BASE" if b is None else "HEAD"
            note = f"invalid in {label}: see its errors" if name in invalid[label] else ""
            diffs.append(ProvisionerDiff(name, "added" if b is None else "removed", b, h, note=note))
            continue
        if Verdict.UNKNOWN in (b.verdict, h.verdict):
            note = "not checked within the time limit on one side; raise --timeout-ms"
            diffs.append(ProvisionerDiff(name, "undecided", b, h, [Delta("verdict", note=note)]))
            continue
        deltas = compare(b, h, catalog)
        proofs = 0
        for delta in deltas:
            if proofs >= MAX_PROVEN_WITNESSES:
                break
            base_doc = (base.documents[name], base.os_of.get(name, "linux"))
            head_doc = (head.documents[name], head.os_of.get(name, "linux"))
            if delta.added_witness is not None:
                delta.added_witness = prover.prove(delta.added_witness, head_doc, base_doc)
                proofs += 1
            if delta.removed_witness is not None:
                delta.removed_witness = prover.prove(delta.removed_witness, base_doc, head_doc)
                proofs += 1
        diffs.append(ProvisionerDiff(name, "changed" if deltas else "unchanged", b, h, deltas))
    return DiffResult(base, head, list(paths), diffs, region=catalog.region)


# --- workloads ----------------------------------------------------------------------------------------------


def workload_paths_on(side: Side, workload_paths: Sequence[str]) -> list[str]:
    """Where the --workloads paths are on a side: as of the revision for a git side, as given otherwise."""
    if side.workload_root is None:
        return list(workload_paths)
    root = side.workload_root
    return [os.path.join(root, p) for p in workload_paths if os.path.exists(os.path.join(root, p))]


# --- rendering ----------------------------------------------------------------------------------------------


def _values(values: Sequence[str], sign: str) -> str:
    if not values:
        return ""
    if len(values) <= _SHOWN:
        return f"{sign}{', '.join(values)}"
    return f"{sign}{len(values)}: {', '.join(values[:_SHOWN])}, …"


#: What people call a dimension, where its name in JSON is the scheduler's word.
_DIMENSION_TEXT = {"offerings": "type × zone × capacity"}


def _dimension(name: str) -> str:
    return _DIMENSION_TEXT.get(name, name)


def _cell(values: Sequence[str], witness: Offering | None, sign: str, dimension: str) -> str:
    if not values:
        return "—"
    if dimension == "offerings":  # (instance type, zone, capacity type) triples
        text = f"{sign}{len(values):,} combination{'s' if len(values) != 1 else ''}"
    else:  # a limit's change says which way it went: no sign
        text = _values(values, "" if dimension == "limits" else sign)
    if witness is not None:
        text += f"; e.g. {witness}"
    return text


def _summary_line(result: DiffResult) -> str:
    counts: dict[str, int] = {}
    for p in result.provisioners:
        counts[p.status] = counts.get(p.status, 0) + 1
    parts = [f"{counts[s]} {s}" for s in ("changed", "added", "removed", "undecided", "unchanged") if counts.get(s)]
    text = f"{pools_noun((p.name for p in result.provisioners), 2)}: {', '.join(parts) or 'none'}"
    if result.workloads_checked is not None:
        moved = {s: sum(1 for w in result.workloads if w.status == s) for s in _WORKLOAD_STATUSES}
        text += f"; workloads: {result.workloads_checked} checked"
        text += "".join(f", {n} {s}" for s, n in moved.items() if n) if any(moved.values()) else ", none moved"
    head, base = result.head.report, result.base.report
    text += f"; HEAD: {head.errors} error{'s' if head.errors != 1 else ''}, {head.warnings} warning"
    text += "s" if head.warnings != 1 else ""
    if base.errors:
        text += f"; BASE: {base.errors} error{'s' if base.errors != 1 else ''}"
    return text


_WORKLOAD_STATUSES = (
    "changes provisioner",
    "becomes unschedulable",
    "becomes partly unschedulable",
    "becomes schedulable",
    "becomes partly schedulable",
    "new, unschedulable",
)


def _admits(c: CheckedProvisioner | None, region: str) -> str:
    if c is None:
        return ""
    if c.verdict == Verdict.UNKNOWN:
        return "not checked in time: see `karpenter-policy check`"
    if c.verdict != Verdict.SAT:
        return "admits no instance type: see `karpenter-policy check`"
    text = f"{len(c.instance_types)} instance types"
    if c.witness is not None:
        w = c.witness
        text += f", e.g. {w.instance_type} ({w.zone}, {w.capacity_type}, {price_text(w.price, region)})"
    return text


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_text(result: DiffResult) -> str:
    out = [f"karpenter-policy diff {result.base.label} → {result.head.label} ({', '.join(result.paths) or '.'})"]
    broken = result.broken
    if broken:
        out.append(f"error: {result.broken_headline()}")
        if len(broken) > 1:
            out += [f"  {w.lead()}" for w in broken]
    out += [f"note: {n}" for n in result.notes]
    for p in result.provisioners:
        if p.status == "unchanged":
            continue
        where = p.head or p.base
        assert where is not None
        out.append("")
        out.append(f"{p.title} ({where.file}:{where.line}): {p.status}" + (f" ({p.note})" if p.note else ""))
        if p.status in ("added", "removed"):
            admits = _admits(where, result.region).removeprefix("admits ")
            out.append(f"  {'HEAD' if p.status == 'added' else 'BASE'} admits {admits}")
            continue
        rows = [["DIMENSION", "HEAD ADMITS, BASE DID NOT", "BASE ADMITTED, HEAD DOES NOT"]]
        for d in p.deltas:
            rows.append(
                [
                    _dimension(d.dimension),
                    _cell(d.added, d.added_witness, "+", d.dimension),
                    _cell(d.removed, d.removed_witness, "-", d.dimension),
                ]
            )
            if d.note:
                rows.append(["", f"({d.note})", ""])
        out += ["  " + line for line in _table(rows)]
    if result.cost is not None:
        out += ["", f"cost of the workloads' nodes: {result.cost.summary()}"]
        monthly = result.cost.monthly_changes()
        out += [f"  {w}: {b} → {h}{monthly.get(w, '')}" for w, b, h in result.cost.workloads]
    if result.workloads:
        out.append("")
        rows = [["WORKLOAD", "CHANGE", "BASE", "HEAD", "WHY"]]
        for w in result.workloads:
            rows.append([w.workload, w.status, w.base or "-", w.head or "-", w.reason])
        out += _table(rows)
    for label, side in (("BASE", result.base), ("HEAD", result.head)):
        for f in side.report.sorted_findings():
            if f.severity == "error":
                out.append(f"{label} {f.file}:{f.line}:{f.column}: error: {f.message} [{f.rule}]")
    out.append("")
    out.append(_summary_line(result))
    return "\n".join(out) + "\n"


def render_json(result: DiffResult) -> str:
    def side(s: Side) -> dict[str, object]:
        return {
            "label": s.label,
            "kind": s.kind,
            "paths": s.present,
            "errors": s.report.errors,
            "warnings": s.report.warnings,
            "findings": [f.to_json() for f in s.report.sorted_findings()],
        }

    document = {
        "base": side(result.base),
        "head": side(result.head),
        "paths": result.paths,
        "provisioners": [p.to_json() for p in result.provisioners],
        "workloads": None if result.workloads_checked is None else [w.to_json() for w in result.workloads],
        "cost": None if result.cost is None else result.cost.to_json(),
        "notes": result.notes,
        "summary": {
            **{s: sum(1 for p in result.provisioners if p.status == s) for s in ("changed", "added", "removed")},
            "unchanged": sum(1 for p in result.provisioners if p.status == "unchanged"),
            "undecided": sum(1 for p in result.provisioners if p.status == "undecided"),
            "workloads_placed": result.workloads_checked,
            **{
                s.replace(",", "").replace(" ", "_"): sum(1 for w in result.workloads if w.status == s)
                for s in _WORKLOAD_STATUSES
            },
            "head_errors": result.head.report.errors,
            "newly_unschedulable": len(result.broken),
        },
    }
    return json_text(document)


def render_markdown(result: DiffResult) -> str:
    """A pull-request comment, in infracost's layout when `--workloads` priced both sides: the monthly change of
    the bill as the headline, then the cost per workload (`costcomment`); the provisioners' changes as a table;
    the workloads that change provisioner; the details folded away."""
    md = markdown_text
    title = f"karpenter-policy diff `{md(result.base.label)}` → `{md(result.head.label)}`"
    summary = f"**{md(_summary_line(result))}**"
    details: list[str] = []
    cost_change = result.cost
    compared = cost_change.compared() if cost_change is not None and cost_change.stranded else None
    headline = cost_headline(cost_change.base, cost_change.head, compared) if cost_change is not None else ""
    broken = result.broken
    if broken:  # what broke leads, above any cost
        out = [f"### ❌ {md(result.broken_headline())}"]
        if len(broken) > 1:
            out += ["", *(f"- `{md(w.workload)}`{md(w.lead().removeprefix(w.workload))}" for w in broken)]
        out += ["", f"{title}: {summary}"]
        if headline:
            out += ["", f"**{headline}**"]
    elif cost_change is not None:
        out = [f"### {headline}", "", f"{title}: {summary}"]
    else:
        out = [f"### {title}", "", summary]
    out += [f"> {md(n)}" for n in result.notes]
    if cost_change is not None:
        cost, details = diff_cost_lines(cost_change.base, cost_change.head, compared)
        out += ["", *cost]
        for side in ("base", "head"):
            if text := cost_change.stranded_text(side):
                out += ["", f"Not counted in the change: {md(text)}" + (" (no saving)." if side == "base" else ".")]
    rows: list[str] = []
    for p in result.provisioners:
        if p.status == "unchanged":
            continue
        if p.status in ("added", "removed"):
            where = p.head if p.status == "added" else p.base
            admits = md(_admits(where, result.region))
            cells = (admits, "—") if p.status == "added" else ("—", admits)
            status = f"**{p.status}**" + (f" ({md(p.note)})" if p.note else "")
            rows.append(f"| `{md(p.name)}` | {status} | {cells[0]} | {cells[1]} |")
            continue
        for d in p.deltas:
            added = md(_cell(d.added, d.added_witness, "+", d.dimension))
            removed = md(_cell(d.removed, d.removed_witness, "-", d.dimension))
            note = f" ({md(d.note)})" if d.note else ""
            rows.append(f"| `{md(p.name)}` | {_dimension(d.dimension)}{note} | {added} | {removed} |")
    noun = pools_noun((p.name for p in result.provisioners), 1)  # the column's heading: Provisioner, NodePool, Pool
    if rows:
        out += ["", f"| {noun[:1].upper()}{noun[1:]} | Change | HEAD admits, BASE did not | "
                    "BASE admitted, HEAD does not |"]
        out += ["|---|---|---|---|", *rows]
    else:
        out += ["", f"No change to what the {pools_noun((p.name for p in result.provisioners), 2)} admit."]
    if result.workloads:
        out += ["", "| Workload | Change | BASE | HEAD | Why |", "|---|---|---|---|---|"]
        for w in result.workloads:
            status = f"**{w.status}**" if w.head is None else w.status
            out.append(
                f"| `{md(w.workload)}` | {status} | {md(w.base or '—')} | {md(w.head or '—')} | {md(w.reason)} |"
            )
    out += details
    if result.budget_changes:
        out += ["", *budget_change_lines(result.budget_changes, ZoneInfo("UTC"))]
    errors = [f for f in result.head.report.sorted_findings() if f.severity == "error"]
    if errors:
        out += ["", f"<details><summary>{len(errors)} error(s) in HEAD</summary>", ""]
        out += [f"- `{md(f.file)}:{f.line}` {md(f.message)} (`{f.rule}`)" for f in errors]
        out += ["", "</details>"]
    long = [
        (p, d)
        for p in result.provisioners
        for d in p.deltas
        if d.dimension != "offerings" and (len(d.added) > _SHOWN or len(d.removed) > _SHOWN)
    ]
    if long:  # GitHub keeps comments under 65,536 characters: long lists are cut
        out += ["", "<details><summary>All values</summary>", ""]
        for p, d in long:
            if d.added:
                out.append(f"- `{md(p.name)}` {d.dimension}, HEAD admits: {md(_at_most(d.added))}")
            if d.removed:
                out.append(f"- `{md(p.name)}` {d.dimension}, HEAD no longer admits: {md(_at_most(d.removed))}")
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def _at_most(values: Sequence[str], count: int = 100) -> str:
    text = ", ".join(values[:count])
    return text + (f" … and {len(values) - count} more (--output json has them all)" if len(values) > count else "")


def render_diff(result: DiffResult, output: str) -> str:
    if output == "json":
        return render_json(result)
    if output == "markdown":
        return render_markdown(result)
    return render_text(result)


# --- the command --------------------------------------------------------------------------------------------


def diff_command(
    flags: DiffFlags,
    catalog: Catalog,
    *,
    values: Mapping[str, Any] | None = None,
    scale: Mapping[str, int] | None = None,
) -> CommandOutput:
    """Run `karpenter-policy diff` with its flags and what the CLI loaded from them: the catalog (`--catalog`,
    `--region`), the template values (`--values`) and `--scale`."""
    base, head, paths, timeout_ms, workload_paths = (
        flags.base, flags.head, flags.paths, flags.timeout_ms, flags.workload_paths
    )
    scratch = tempfile.mkdtemp(prefix="karpenter-policy-diff-")
    today = datetime.now(UTC).date()  # both sides' budgets over the same week
    try:
        try:
            sides = [
                load_side(
                    spec,
                    paths or None,
                    catalog,
                    scratch=os.path.join(scratch, label),
                    timeout_ms=timeout_ms,
                    values=values,
                    workload_paths=workload_paths,
                    today=today,
                    min_values_policy=flags.min_values_policy,
                )
                for label, spec in (("base", base), ("head", head))
            ]
        except DiffError as error:
            return CommandOutput(2, "", f"karpenter-policy diff: {error}\n")
        base_side, head_side = sides
        shown = list(paths) or ["policies/" if base_side.kind == "git" or head_side.kind == "git" else "."]
        nowhere = [p for p in (paths or []) if p not in base_side.present and p not in head_side.present]
        if nowhere:
            message = f"{', '.join(nowhere)}: not on either side ({base} nor {head})"
            return CommandOutput(2, "", f"karpenter-policy diff: {message}\n")
        result = diff_sides(base_side, head_side, catalog, timeout_ms, shown)
        result.budget_changes = budget_changes(base_side.budgets, head_side.budgets)
        for side in sides:
            for p in paths or []:
                if p not in side.present:
                    result.notes.append(f"{p} does not exist in {side.label}")
        if workload_paths:
            try:
                _compare_workloads(result, workload_paths, catalog, scale, flags.min_values_policy)
            except OptionError as error:
                return CommandOutput(2, "", f"karpenter-policy diff: {error}\n")
        return CommandOutput(result.exit_code(flags.exit_code_on_diff), render_diff(result, flags.output), "")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def side_workloads(side: Side, workload_paths: Sequence[str]) -> tuple[list[LocatedWorkload], list[Finding]]:
    """A side's workloads, and the `invalid-workload` errors of those left out — their pod spec cannot be read or
    the API server refuses it: never placed — with their files as read."""
    paths = workload_paths_on(side, workload_paths)
    if not paths:
        return [], []
    found = read_workloads(paths)
    return found.workloads, [f for f in found.findings if f.rule == INVALID_WORKLOAD]


def _placements(side: Side, found: Schedule) -> dict[tuple[str, str, str], Placement]:
    """Each workload of a side (by namespace, object and file), placed on that side's provisioners."""
    root = side.workload_root
    placed: dict[tuple[str, str, str], Placement] = {}
    for placement in found.placements:
        w = placement.workload
        file = _relative(w.file, root) if root is not None else w.file
        placed.setdefault((w.namespace or "", w.ref, file), placement)
    return placed


def _dominant(capacity: Capacity) -> dict[str, str]:
    """Workload → "type capacity-type" of the nodes most of its pods run on (ties: the cheaper)."""
    pods: dict[str, dict[tuple[str, str], int]] = {}
    for node in capacity.nodes:
        for workload, count in node.workloads.items():
            key = (node.instance_type, node.capacity_type)
            pods.setdefault(workload, {})[key] = pods.get(workload, {}).get(key, 0) + count
    return {w: " ".join(max(sorted(by.items()), key=lambda item: item[1])[0]) for w, by in pods.items()}


def _compare_cost(result: DiffResult, before: Capacity, after: Capacity) -> None:
    was, now = _dominant(before), _dominant(after)
    moved = tuple(
        (w, was.get(w, "unscheduled"), now.get(w, "unscheduled"))
        for w in sorted(set(was) | set(now))
        if was.get(w) != now.get(w)
    )
    result.cost = CostChange(before, after, moved, stranded_pods(before, after))


def _compare_workloads(
    result: DiffResult,
    workload_paths: Sequence[str],
    catalog: Catalog,
    scale: Mapping[str, int] | None = None,
    min_values_policy: str = STRICT,
) -> None:
    """Place each workload on both sides (every replica packed, as `check --workloads` does, NodePools' minValues
    kept under `min_values_policy`); record the ones whose placement differs — provisioner, or how many replicas
    can be placed — and new ones HEAD cannot place, and what the change does to the cost of their nodes. Replicas
    HEAD strands that BASE placed are `workload-unschedulable` errors of HEAD's report."""
    base_workloads, _ = side_workloads(result.base, workload_paths)
    head_workloads, refused = side_workloads(result.head, workload_paths)
    root = result.head.workload_root  # HEAD's refusals are errors of its report
    relative = [replace(f, file=_relative(f.file, root)) for f in refused] if root is not None else refused
    result.head.report.findings += relative
    unknown = unknown_scale_targets(scale, [*base_workloads, *head_workloads])
    if unknown is not None:
        raise OptionError(unknown)
    before_schedule = schedule(result.base.checked, base_workloads, catalog, scale, min_values_policy=min_values_policy)
    after_schedule = schedule(result.head.checked, head_workloads, catalog, scale, min_values_policy=min_values_policy)
    region = catalog.region
    _compare_cost(
        result,
        capacity_of(before_schedule.plan, "", True, region),
        capacity_of(after_schedule.plan, "", True, region),
    )
    base = _placements(result.base, before_schedule)
    head = _placements(result.head, after_schedule)
    result.workloads_checked = len(head)
    for key in sorted(set(base) | set(head)):
        before, after = base.get(key), head.get(key)
        if after is None:
            continue  # the workload is gone: nothing to place
        namespace, ref, file = key
        shown = f"{namespace}/{ref}" if namespace else ref
        head_stranded, replicas = after.stranded
        head_name = after.provisioner if head_stranded < replicas else None
        if before is None:
            if head_stranded:
                change = WorkloadChange(
                    shown, file, None, head_name, after.leading_reason(), "added", replicas, 0, head_stranded
                )
                result.workloads.append(change)
                _add_finding(result, change, after)
            continue
        base_stranded, base_replicas = before.stranded
        base_name = before.provisioner if base_stranded < base_replicas else None
        if base_name == head_name and base_stranded == head_stranded:
            continue
        if head_stranded > base_stranded:
            refusal = after.reasons.get(base_name) if base_name is not None else None
            reason = (f"{pool_ref(base_name)}: {refusal}" if base_name is not None and refusal is not None
                      else after.leading_reason())
        elif head_stranded < base_stranded:
            reason = after.summary()
        elif head_name is not None and base_name is not None:
            refusal = after.reasons.get(base_name)
            reason = f"{pool_ref(base_name)}: {refusal}" if refusal is not None else f"{head_name} is tried first now"
        else:
            reason = after.summary()
        change = WorkloadChange(
            shown, file, base_name, head_name, reason, "both", replicas, base_stranded, head_stranded
        )
        result.workloads.append(change)
        if change.breaks:
            _add_finding(result, change, after)


def _add_finding(result: DiffResult, change: WorkloadChange, after: Placement) -> None:
    """The `workload-unschedulable` error of HEAD's report for replicas HEAD strands (at the workload's pod
    template, as `check --workloads` reports it)."""
    if change.present == "added":
        message = after.message()
    else:
        newly = change.newly_stranded
        placed = "it" if newly >= change.replicas else f"{newly} of its {change.replicas} replicas"
        message = f"{result.base.label} placed {placed}, {result.head.label} cannot: {after.message()}"
    w = after.workload
    result.head.report.findings.append(
        Finding(WORKLOAD_UNSCHEDULABLE, ERROR, message, change.file, w.line, w.column, w.ref)
    )
