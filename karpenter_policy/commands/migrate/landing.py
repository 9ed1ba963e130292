"""`migrate --workloads`: every workload lands where it did — checked again on the migrated repository.

The migrated files (the policies as `migrate` rewrote them, the workloads with their selectors renamed) are
written into a scratch directory at their absolute paths, and both repositories — as read and as migrated — go
through what `check --workloads` runs (`checks.repository.check_paths`, then `checks.proof.placement.schedule`:
the controller's scheduler, every replica planned). For each workload, matched by file and object, two things must
not change: the pool that launches a node for it (a NodePool keeps its Provisioner's name) and the pools that
could take it (the `overlap` candidates). A difference is a `migration-workload-moved` error at the workload, naming
both sides. Then its landing set (`checks.proof.landingset`, what `diff --equivalent` compares: every offering it
may land on, with the node's labels and taints) must not change either; a difference is the same error, with the
node one side admits and the other not. The pair proof (`checks.proof.equivalence`) shows each NodePool admits what
its Provisioner did; this shows that the renamed selectors, the weights, the limits and the kubelet settings still
send each workload to the same place and the same nodes.

A workload whose pod spec cannot be read or the Kubernetes API server refuses (`model.podadmission`) is never placed,
before migration as after: it is an `invalid-workload` error at its field, in the API server's words, as `check
--workloads` reports it (the workload files as read; renaming selectors changes no resource), and is not compared.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.rules.rule import ERROR
from karpenter_policy.api.violations import INVALID_WORKLOAD, MIGRATION_WORKLOAD_MOVED
from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.proof.landingset import LandingSet, compare_landings, landing_sets
from karpenter_policy.checks.proof.placement import schedule
from karpenter_policy.checks.proof.provisioners import provisioner_ref
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.source.loader import STDIN, LoadError, discover, read_text
from karpenter_policy.checks.source.workloads import read_workloads

__all__ = ["Landing", "LandingCheck", "check_landings"]


@dataclass(frozen=True, slots=True)
class Landing:
    """Where one workload goes: the pool that launches its node (None: nowhere) and every pool that could."""

    pool: str | None
    could: tuple[str, ...]

    def describe(self) -> str:
        where = f"lands on {provisioner_ref(self.pool)}" if self.pool is not None else "lands nowhere"
        could = ", ".join(sorted(provisioner_ref(pool) for pool in self.could)) or "none"
        return f"{where} (could land on: {could})"

    def renamed(self, pools: Mapping[str, str]) -> Landing:
        """This landing with each pool named as it is after migration (`pools`: old key → new key)."""
        pool = None if self.pool is None else pools.get(self.pool, self.pool)
        return Landing(pool, tuple(sorted(pools.get(p, p) for p in self.could)))


@dataclass(frozen=True, slots=True)
class LandingCheck:
    """The verdict: how many workloads were compared, and a finding for each that moved (`migration-workload-moved`)
    or that the API server refuses (`invalid-workload`: not compared)."""

    compared: int
    findings: list[Finding]

    @property
    def line(self) -> str:
        """The summary line `migrate` prints."""
        moved = sum(1 for f in self.findings if f.rule == MIGRATION_WORKLOAD_MOVED)
        refused = len({(f.file, f.object_ref) for f in self.findings if f.rule == INVALID_WORKLOAD})
        not_compared = f"; {refused} not placed (invalid-workload)" if refused else ""
        if not moved:
            counted = "1 workload lands where it did" if self.compared == 1 else (
                f"{self.compared} workloads land where they did"
            )
            return f"workloads: {counted} (placed again on the migrated files){not_compared}"
        return (
            f"workloads: {moved} of {self.compared} would land elsewhere after migration: nothing written"
            f"{not_compared}"
        )


def _landings(
    policy_paths: Sequence[str],
    workload_paths: Sequence[str],
    catalog: Catalog,
    values: Mapping[str, Any] | None,
) -> tuple[dict[tuple[str, str], tuple[Landing, Any, LandingSet]], list[Finding]]:
    """(file, object) → its landing, its located workload and its landing set, for the workloads under
    `workload_paths` on the pools under `policy_paths`; and the `invalid-workload` findings of the workloads left
    out (never placed)."""
    _, checked = check_paths(policy_paths, catalog, values=values)
    workloads = read_workloads(workload_paths)
    found = schedule(checked, workloads.workloads, catalog)
    sets = landing_sets(checked, workloads.workloads, catalog)
    landings = {
        (os.path.abspath(p.workload.file), p.ref): (Landing(p.provisioner, tuple(could)), p.workload, nodes)
        for p, could, nodes in zip(found.placements, found.could_take, sets, strict=True)
    }
    return landings, [f for f in workloads.findings if f.rule == INVALID_WORKLOAD]


def _mirror(root: str, path: str) -> str:
    """Where `path` stands inside the scratch directory `root` (at its absolute path)."""
    return os.path.join(root, os.path.abspath(path).lstrip(os.sep))


def check_landings(
    policy_paths: Sequence[str],
    workload_paths: Sequence[str],
    migrated: Mapping[str, str],
    pools: Mapping[str, str],
    catalog: Catalog | None = None,
    values: Mapping[str, Any] | None = None,
) -> LandingCheck:
    """Compare each workload's landing before and after migration. `migrated`: file → its text after migration
    (a file not named is read as it is); `pools`: the scheduler key of each migrated Provisioner → its NodePool's
    (`default` → `NodePool/default`)."""
    catalog = catalog if catalog is not None else load_catalog()
    before, refused = _landings(policy_paths, workload_paths, catalog, values)
    texts = {os.path.abspath(file): text for file, text in migrated.items()}
    for file in (*discover(policy_paths)[0], *discover(workload_paths)[0]):
        if file != STDIN and os.path.abspath(file) not in texts:
            try:
                texts[os.path.abspath(file)] = read_text(file)
            except LoadError:
                continue  # unreadable before as after: its parse error is in the report already
    with tempfile.TemporaryDirectory(prefix="karpenter-policy-migrate-") as root:
        for file, text in texts.items():
            target = _mirror(root, file)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        after_raw, _ = _landings(
            [_mirror(root, p) for p in policy_paths], [_mirror(root, p) for p in workload_paths], catalog, values
        )
        after = {(os.sep + os.path.relpath(file, root), ref): value for (file, ref), value in after_raw.items()}
    findings: list[Finding] = list(refused)  # the workload files as read: the same refusals after renaming
    for key in sorted(before):
        was, workload, was_nodes = before[key]
        now = after[key][0] if key in after else None
        if now is not None and was.renamed(pools) == now.renamed({}):
            difference = compare_landings(was_nodes, after[key][2], catalog)
            if difference is None:
                continue
            side, other = ("before", "after") if difference.first else ("after", "before")
            message = (
                f"{side} migration it may land on {difference.node.describe()} (through "
                f"{difference.pool.object_ref}); {other}, it may not"
            )
        else:
            told = now.describe() if now is not None else "is no longer read"
            message = f"before migration it {was.describe()}; after, it {told}"
        at = (workload.file, workload.line, workload.column)
        findings.append(Finding(MIGRATION_WORKLOAD_MOVED, ERROR, message, *at, workload.ref))
    return LandingCheck(len(before), findings)
