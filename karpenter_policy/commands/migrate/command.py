"""`karpenter-policy migrate PATHS --to v1 [-o DIR | --write]`: v1alpha5 Provisioners and AWSNodeTemplates
rewritten as Karpenter v1 NodePools and EC2NodeClasses, each NodePool proven to admit what its Provisioner did.

1. **Read** the repository once (`checks.repository.load_repository`: every file validated). A document with an
   error finding is not migrated (the finding says why); nothing of it raises.
2. **Convert** with `compile --api v1`'s conversion (`compile.manifests.to_v1`: the one definition of every field
   mapping), every NodePool with a disruption budget (`--budget`, default "1": Karpenter v0.31 disrupted one node
   at a time). What has no v1 form is a `v1-conversion` error and that object stays as it is; so do the
   Provisioners of a node template that stays, and a node template some of whose Provisioners stay (their
   `providerRef` must keep resolving). A document in a template file (`*.yaml.j2`) or inside a `kind: List` is
   not rewritten (`migration-not-written`).
3. **Prove** each Provisioner against its NodePool with Z3 (`checks.proof.equivalence`, `migration_solver`): the
   same instance type × zone × capacity-type offerings of the catalog, custom label values, labels and taints, the
   Provisioner read as Karpenter v0.31.1 and the NodePool as v1.14.1 (its labels, operators, `minValues`) —
   "proven equivalent", or a counter-example (`migration-not-equivalent`, and the Provisioner stays).
4. **Note** what no field carries over (`notes`: budgets, emptiness, expiry, drift, kubelet, AMI alias, inline
   provider), each a warning with its mitigation.
5. **Workloads** (`--workloads APPS`, `workloads`): `karpenter.sh/provisioner-name` selectors and node
   affinities of migrated Provisioners become `karpenter.sh/nodepool`, spliced in place; then every workload is
   placed again on the migrated files and must land where it did (`landing`: `migration-workload-moved`; one the
   API server refuses is never placed and is an `invalid-workload` error at its field, as `check` has it). With
   `--to v1beta1` they are placed on the same objects converted to v1 (the engine schedules v1 NodePools; the
   fields scheduling reads — requirements, labels, taints, weight, limits, kubelet — carry over alike).
6. **Write** (`documents.rewrite_text`: each migrated document replaced in place, its header and comments kept,
   every other document byte for byte): without `-o`/`--write` a unified diff; `--write` rewrites the files in
   place, all or none, the workloads with them (`filestaging.rewrite_all`); `-o DIR` writes every file read,
   migrated or not, at the same path relative to the PATHS' common directory, staged then renamed — refused as a
   whole when DIR holds a different file of that name or lies inside a directory of the PATHS (nothing already
   there is lost).

Deterministic: files, objects and findings in name order, YAML as `compile` writes it. Exit codes: 0 migrated (or
nothing to migrate); 1 an object was not migrated (or a warning, with `--strict`); 2 the tool could not run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND, object_ref
from karpenter_policy.api.rules.rule import ERROR
from karpenter_policy.api.v1.crds import EC2NODECLASS_KIND, NODEPOOL_KIND
from karpenter_policy.api.violations import (
    DUPLICATE_NAME,
    MIGRATION_NOT_EQUIVALENT,
    MIGRATION_NOT_WRITTEN,
    MIGRATION_WORKLOAD_MOVED,
    V1_CONVERSION,
)
from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.findings import CommandOutput, Finding, Report
from karpenter_policy.checks.reporters import render
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.checks.selection import EVERYTHING, Selection
from karpenter_policy.checks.source.loader import (
    STDIN,
    TEMPLATE_SUFFIX,
    Document,
    LoadError,
    discover,
    read_text,
)
from karpenter_policy.checks.validation.policies import place
from karpenter_policy.commands.compile.manifests import (
    TARGET_V1,
    TARGET_V1BETA1,
    V1Options,
    to_v1,
)
from karpenter_policy.commands.filestaging import (
    current_umask,
    discard_all,
    rewrite_all,
    stage,
    unified_diff,
)
from karpenter_policy.commands.migrate.documents import MigratedFile, rewrite_text, writable_identities
from karpenter_policy.commands.migrate.landing import check_landings
from karpenter_policy.commands.migrate.notes import node_template_notes, provisioner_notes
from karpenter_policy.commands.migrate.workloads import NODEPOOL_LABEL, RenamedFile, rename_selectors

__all__ = ["MigrateOptions", "TARGETS", "migrate_command"]

V1 = TARGET_V1
V1BETA1 = TARGET_V1BETA1
TARGETS = (V1, V1BETA1)
DEFAULT_BUDGET = "1"
_PROGRAM = "karpenter-policy migrate"

Key = tuple[str, str]  # (kind, name)


@dataclass(frozen=True, slots=True)
class MigrateOptions:
    """What `migrate` is asked to do (the CLI's flags)."""

    to: str = V1
    out: str | None = None
    write: bool = False
    budget: str = DEFAULT_BUDGET
    default_instance_profile: str | None = None
    node_role: str | None = None
    output: str = "text"
    fail_on_warn: bool = False
    quiet: bool = False
    selection: Selection = EVERYTHING
    values: Mapping[str, Any] | None = None
    #: Workload files or directories whose `karpenter.sh/provisioner-name` selectors become `karpenter.sh/nodepool`.
    workloads: tuple[str, ...] = ()


@dataclass(slots=True)
class _Plan:
    """What the run decided: the v1 objects replacing each (file, kind, name) document, the proof verdicts, the
    findings."""

    replacements: dict[str, dict[Key, list[Mapping[str, Any]]]] = field(default_factory=dict)
    proofs: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def _name(doc: Document) -> str:
    return str(doc.data["metadata"]["name"])


def _spec(doc: Document) -> Mapping[str, Any]:
    spec = doc.data.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _template_of(doc: Document) -> str | None:
    reference = _spec(doc).get("providerRef")
    if isinstance(_spec(doc).get("provider"), Mapping) or not isinstance(reference, Mapping):
        return None
    return str(reference.get("name"))


def _not_written(doc: Document, kind: str, why: str) -> Finding:
    line, column = doc.position(("metadata", "name"))
    return Finding(MIGRATION_NOT_WRITTEN, ERROR, why, doc.file, line, column, f"{kind}/{_name(doc)}")


def _stays(doc: Document, kind: str, why: str) -> Finding:
    path = ("spec", "providerRef", "name") if kind == PROVISIONER_KIND else ("metadata", "name")
    line, column = doc.position(path)
    return Finding(V1_CONVERSION, ERROR, why, doc.file, line, column, f"{kind}/{_name(doc)}")


def _plan(
    provisioners: Mapping[str, Document],
    templates: Mapping[str, Document],
    writable: set[tuple[str, str, str]],
    options: MigrateOptions,
    catalog: Catalog | None,
    duplicated: set[Key],
) -> _Plan:
    plan = _Plan()
    docs: dict[Key, Document] = {(PROVISIONER_KIND, n): d for n, d in provisioners.items()}
    docs.update({(NODE_TEMPLATE_KIND, n): d for n, d in templates.items()})
    refused: set[Key] = set(duplicated)  # which one is meant is unknown: the duplicate-name finding says so
    for key, doc in sorted(docs.items()):
        if (doc.file, *key) not in writable:
            why = (
                "a template file (*.yaml.j2) is not rewritten: migrate its rendered output, or convert the template "
                "by hand with that output as a guide"
                if doc.file.endswith(TEMPLATE_SUFFIX)
                else "not rewritten: it is not a document of its own in its file (an item of a kind: List); move "
                "it into a document of its own, or convert it by hand"
            )
            plan.findings.append(_not_written(doc, key[0], why))
            refused.add(key)
    objects, issues = to_v1(
        [provisioners[n].data for n in sorted(provisioners)],
        {n: templates[n].data for n in sorted(templates)},
        V1Options(options.default_instance_profile, options.node_role, options.budget, options.to),
    )
    placed = [place(docs[(i.kind, i.name)], i.violation) for i in issues]
    plan.findings.extend(dict.fromkeys(placed))  # a template converted twice reports once
    refused |= {(i.kind, i.name) for i in issues if i.violation.severity == ERROR}
    pools = {str(o["metadata"]["name"]): o for o in objects if o["kind"] == NODEPOOL_KIND}
    classes = {str(o["metadata"]["name"]): o for o in objects if o["kind"] == EC2NODECLASS_KIND}
    users: dict[str, list[str]] = {}
    for name in sorted(provisioners):
        template = _template_of(provisioners[name])
        if template is not None:
            users.setdefault(template, []).append(name)
    for template, names in users.items():
        if (NODE_TEMPLATE_KIND, template) in refused or template not in templates:
            why = (
                f"not migrated: its AWSNodeTemplate {template} is not (see its finding)"
                if template in templates
                else f"not migrated: its AWSNodeTemplate {template} is not among the valid documents read; migrate "
                "them together (its NodePool would name an EC2NodeClass that does not exist)"
            )
            for name in names:
                if (PROVISIONER_KIND, name) not in refused:
                    plan.findings.append(_stays(provisioners[name], PROVISIONER_KIND, why))
                    refused.add((PROVISIONER_KIND, name))
    _prove(plan, provisioners, templates, pools, refused, catalog)
    for template, names in sorted(users.items()):
        kept = [n for n in names if (PROVISIONER_KIND, n) in refused]
        if kept and (NODE_TEMPLATE_KIND, template) not in refused and template in templates:
            plan.findings.append(
                _stays(
                    templates[template],
                    NODE_TEMPLATE_KIND,
                    f"kept as v1alpha5: Provisioner {', '.join(kept)} uses it and is not migrated",
                )
            )
            refused.add((NODE_TEMPLATE_KIND, template))
    for name, doc in sorted(templates.items()):
        if (NODE_TEMPLATE_KIND, name) in refused:
            continue
        own: list[Mapping[str, Any]] = [classes[name]] if name in classes else []
        for user in users.get(name, []):  # the classes of users with kubelet settings of their own follow
            class_name = str(pools[user]["spec"]["template"]["spec"]["nodeClassRef"]["name"])
            if class_name != name and class_name in classes:
                own.append(classes[class_name])
        plan.replacements.setdefault(doc.file, {})[(NODE_TEMPLATE_KIND, name)] = own
        plan.findings += node_template_notes(doc, classes[name]) if name in classes else []
    for name, doc in sorted(provisioners.items()):
        if (PROVISIONER_KIND, name) in refused:
            continue
        pool = pools[name]
        class_name = str(pool["spec"]["template"]["spec"]["nodeClassRef"]["name"])
        own = [classes[class_name]] if isinstance(_spec(doc).get("provider"), Mapping) else []
        plan.replacements.setdefault(doc.file, {})[(PROVISIONER_KIND, name)] = [*own, pool]
        plan.findings += provisioner_notes(doc, pool, options.budget, class_name, options.to == V1BETA1)
        if own:
            plan.findings += node_template_notes(doc, own[0], ("spec", "provider"), PROVISIONER_KIND)
    return plan


def _prove(
    plan: _Plan,
    provisioners: Mapping[str, Document],
    templates: Mapping[str, Document],
    pools: Mapping[str, Mapping[str, Any]],
    refused: set[Key],
    catalog: Catalog | None,
) -> None:
    """Prove each Provisioner still to migrate against its NodePool; refuse the ones not proven."""
    to_prove = [n for n in sorted(provisioners) if (PROVISIONER_KIND, n) not in refused and n in pools]
    if not to_prove:
        return
    # the solver (z3) and the catalog are loaded only when there is something to prove
    from karpenter_policy.catalog import load_catalog
    from karpenter_policy.checks.proof.equivalence import migration_solver, prove_migration
    from karpenter_policy.checks.proof.provisioners import provisioner_os
    from karpenter_policy.checks.proof.solver import Solver

    catalog = catalog if catalog is not None else load_catalog()
    template_specs = {n: dict(_spec(d)) for n, d in templates.items()}
    solvers: dict[str, Solver] = {}
    for name in to_prove:
        doc = provisioners[name]
        os_name = provisioner_os(doc.data, template_specs)
        solver = solvers.get(os_name) or solvers.setdefault(os_name, migration_solver(catalog, os_name))
        verdict = prove_migration(doc.data, pools[name], solver)
        if verdict.proven:
            plan.proofs.append(
                f"Provisioner {name} → NodePool {name}: proven equivalent (instance type × zone × capacity type "
                f"over {len(catalog.instance_types)} types, labels, taints)"
            )
            continue
        plan.proofs.append(f"Provisioner {name} → NodePool {name}: NOT equivalent: {verdict.reason}")
        line, column = doc.position(("metadata", "name"))
        plan.findings.append(
            Finding(
                MIGRATION_NOT_EQUIVALENT,
                ERROR,
                f"not migrated: the NodePool would not admit what the Provisioner admits: {verdict.reason}",
                doc.file,
                line,
                column,
                f"{PROVISIONER_KIND}/{name}",
            )
        )
        refused.add((PROVISIONER_KIND, name))


def _common_base(paths: Sequence[str]) -> str:
    """The directory the output layout is relative to: the common directory of the PATHS (a file's own
    directory)."""
    bases = [os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or os.curdir) for p in paths]
    return os.path.commonpath(bases)


def _write_tree(
    out: str, base: str, directories: Sequence[str], results: Sequence[MigratedFile]
) -> tuple[list[str], str | None]:
    """Write every file into `out` at its path relative to `base`: all staged, then renamed; None or why not. `out`
    must not lie inside one of the `directories` the PATHS name (its files would be read next time)."""
    out_abs = os.path.abspath(out)
    for directory in (os.path.abspath(p) for p in directories):
        if os.path.commonpath([out_abs, directory]) == directory:
            return [], f"-o {out} lies inside the PATHS ({directory}): its files would be read as policies next " \
                "time; choose a directory outside them, or use --write to migrate in place"
    targets = [(os.path.join(out_abs, os.path.relpath(os.path.abspath(r.file), base)), r) for r in results]
    conflicts = []
    for target, result in targets:
        try:
            with open(target, encoding="utf-8") as handle:
                if handle.read() != result.updated:
                    conflicts.append(target)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError):
            conflicts.append(target)
    if conflicts:
        return [], f"nothing written: {', '.join(sorted(conflicts))} already exist(s) with other content; " \
            "remove them or choose an empty directory"
    mode = 0o666 & ~current_umask()
    staged = []
    try:
        for target, result in targets:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            staged.append(stage(target, result.updated.encode("utf-8"), mode))
    except OSError as error:
        discard_all(staged)
        return [], f"nothing written: {error.strerror or error}"
    for item in staged:
        item.commit()
    return [s.target for s in staged], None


def migrate_command(paths: Sequence[str], options: MigrateOptions, catalog: Catalog | None = None) -> CommandOutput:
    """Run `migrate` on `paths` (module doc)."""
    if options.to not in TARGETS:
        return CommandOutput(2, "", f"karpenter-policy migrate: --to {options.to}: supported: {', '.join(TARGETS)}\n")
    if options.out is not None and options.write:
        return CommandOutput(2, "", "karpenter-policy migrate: give -o DIR or --write, not both\n")
    if options.out is not None and options.workloads:
        return CommandOutput(
            2, "", f"{_PROGRAM}: --workloads rewrites the workload files in place: use it with --write or without -o\n"
        )
    files, missing = discover(paths, options.selection.exclude)
    if missing:
        return CommandOutput(2, "", "".join(f"{_PROGRAM}: {p}: no such file or directory\n" for p in missing))
    if STDIN in files:
        return CommandOutput(2, "", f"{_PROGRAM}: migrate rewrites files; standard input is not supported\n")
    repository = load_repository(paths, options.values, selection=options.selection)
    report: Report = repository.report
    texts: dict[str, str] = {}
    writable: set[tuple[str, str, str]] = set()
    for file in files:
        if file.endswith(TEMPLATE_SUFFIX):
            continue
        try:
            text = read_text(file)
            writable |= {(file, *identity) for identity in writable_identities(file, text)}
        except LoadError:
            continue  # the repository's report has its parse-error; the file is neither rewritten nor copied
        texts[file] = text
    duplicated = {
        (ref.partition("/")[0], ref.partition("/")[2])
        for ref in (f.object_ref for f in report.findings if f.rule == DUPLICATE_NAME)
        if ref
    }
    plan = _plan(repository.provisioners, repository.node_templates, writable, options, catalog, duplicated)
    report.findings.extend(plan.findings)
    results: list[MigratedFile] = []
    for file in files:
        if file in texts:
            results.append(rewrite_text(file, texts[file], plan.replacements.get(file, {})))
    migrated = frozenset(n for by_key in plan.replacements.values() for k, n in by_key if k == PROVISIONER_KIND)
    renamed, notes = _rename_workloads(options.workloads, migrated, migrated == set(repository.provisioners))
    if renamed is None:
        return CommandOutput(2, "", "".join(f"{_PROGRAM}: {note}\n" for note in notes))
    policies_changed = {os.path.abspath(r.file) for r in results if r.changed}
    both = sorted(policies_changed & {os.path.abspath(r.file) for r in renamed if r.changed})
    if both:  # two rewrites of one text: either would undo the other
        return CommandOutput(
            2, "", "".join(f"{_PROGRAM}: {f}: holds both a migrated policy and a workload to rename: keep "
                           "workloads in files of their own, or migrate without --workloads\n" for f in both)
        )
    if options.workloads:
        placed = results
        if options.to == V1BETA1:  # the engine places on v1 NodePools: the same objects in v1's shapes
            v1_plan = _plan(
                repository.provisioners, repository.node_templates, writable, replace(options, to=V1), catalog,
                duplicated,
            )
            placed = [rewrite_text(r.file, r.original, v1_plan.replacements.get(r.file, {})) for r in results]
        texts = {r.file: r.updated for r in placed if r.changed} | {r.file: r.updated for r in renamed if r.changed}
        pools = {name: object_ref(NODEPOOL_KIND, name) for name in migrated}
        landings = check_landings(paths, options.workloads, texts, pools, catalog, options.values)
        report.findings.extend(landings.findings)
        notes.append(landings.line)
    log: list[str] = []
    stdout: list[str] = []
    exit_code = report.exit_code(options.fail_on_warn)
    changed: list[MigratedFile | RenamedFile] = [r for r in results if r.changed]
    changed += [r for r in renamed if r.changed]
    moved = any(f.rule == MIGRATION_WORKLOAD_MOVED for f in report.findings)
    if options.write and moved:
        log.append(f"{_PROGRAM}: nothing written: a workload would land elsewhere after migration")
    elif options.write:
        outcome = rewrite_all(changed, "migrate --write")
        log += [f"{file}: written" for file in outcome.written]
        log += [f"{file}: not written: {why}" for file, why in outcome.failed]
        log += [f"{file}: not written: another file could not be" for file in outcome.untouched]
        if outcome.failed:
            exit_code = 2
    elif options.out is not None:
        copied = list(results)
        copied += [MigratedFile(f, t, t) for f, t in _templates_read(files)]
        directories = [p for p in paths if os.path.isdir(p)]
        written, problem = _write_tree(
            options.out, _common_base(paths), directories, sorted(copied, key=lambda r: r.file)
        )
        if problem is not None:
            log.append(f"karpenter-policy migrate: {problem}")
            exit_code = 2
        else:
            log.append(f"wrote {len(written)} file{'s' if len(written) != 1 else ''} into {options.out}")
    else:
        stdout += [unified_diff(r.file, r.original, r.updated) for r in changed]
    proofs = "".join(line + "\n" for line in [*plan.proofs, *notes])
    summary = render(report, options.output, verb="checked", quiet=options.quiet)
    if options.output == "text":
        stdout += [proofs, summary]
    else:
        stdout.append(summary)
        log.insert(0, proofs.rstrip("\n"))
    return CommandOutput(exit_code, "".join(stdout), "".join(line + "\n" for line in log if line))


def _rename_workloads(
    paths: Sequence[str], migrated: frozenset[str], everything_migrated: bool
) -> tuple[list[RenamedFile] | None, list[str]]:
    """The workload files under `paths` with their selectors renamed (`workloads`), and what to say of each
    rename; None (and why) when a path does not exist or a file cannot be read."""
    if not paths:
        return [], []
    files, missing = discover(paths)
    if missing:
        return None, [f"{p}: no such file or directory" for p in missing]
    renamed: list[RenamedFile] = []
    notes: list[str] = []
    for file in files:
        if file == STDIN or file.endswith(TEMPLATE_SUFFIX):
            notes.append(f"{file}: workloads: not rewritten (standard input or a template)")
            continue
        try:
            result = rename_selectors(file, read_text(file), migrated, everything_migrated)
        except LoadError as error:
            return None, [f"{file}: {error.message}"]
        renamed.append(result)
        notes += [f"{file}: {what} → {NODEPOOL_LABEL}" for what in result.renamed]
        notes += [f"{file}: kept: {what}" for what in result.kept]
    return renamed, notes


def _templates_read(files: Sequence[str]) -> list[tuple[str, str]]:
    """The template files (`*.yaml.j2`) among `files` with their text: `-o DIR` copies them as they are."""
    found = []
    for file in files:
        if file.endswith(TEMPLATE_SUFFIX):
            try:
                found.append((file, read_text(file)))
            except LoadError:
                continue
    return found
