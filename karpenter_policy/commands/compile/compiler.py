"""`compile`: check the policies, then build constraint sets and manifests, and write them atomically.

Output (`-o DIR`)::

    DIR/constraintsets/<provisioner>.json   one ConstraintSet each (api/constraintset.py), pretty JSON
    DIR/constraintsets/nodepool.<name>.json one per Karpenter v1 NodePool (`nodepools`), beside them
    DIR/constraintsets/index.json           every set with its hash, and the catalog used
    DIR/manifests/<kind>-<name>.yaml        the objects to apply (v1alpha5 as defaulted, or v1; NodePools and
                                            EC2NodeClasses as written, whatever --api says: the API server
                                            applies their CRDs' defaults), and the ConfigMap carrying the sets
                                            (compact JSON, one key per set)
    DIR/kustomization.yaml                  lists manifests/*.yaml: `kubectl apply -k DIR`, or DIR as a resource of
                                            a Flux kustomization, which then never needs editing
    DIR/.karpenter-policy-output            the files above that compile owns (see `output`)

Everything is computed in memory first; nothing is written when any error is found (or any warning with
`--strict`; a `placeholder` is an error here, as what compile writes is what reaches the cluster), nor when two
objects would land in one file or data key (a Provisioner named `index` and the index: `reserved-name`). Then
`output` writes the files into DIR, replacing and removing only files compile wrote there before. With `-o -` the
manifests are one YAML stream on stdout (for an Argo CD Config Management Plugin) and the report goes to stderr.
When nothing is written, the report says `checked`, not `compiled`, and stderr says why nothing was written. With
`--api v1`, a Provisioner (or AWSNodeTemplate) whose conversion has the name of a NodePool (or EC2NodeClass) of the
repository is an error (`duplicate-name`): both would be one object in the cluster.

Versions: the annotation `karpenter-policy/version`, else `--policy-version`, else `git describe --always` of the
repository holding the PATHS, run as `gitrepo` says (a repository-shaped folder committed in the tree is never
used; nothing the repository configures runs), with `-dirty` when the policies read are not HEAD's
(`revision.differs_from_head`), else "unversioned".

Determinism: files in name order, sorted keys, LF, no timestamps, source paths relative to that repository's root
(else to the common directory of the PATHS given), so two runs on the same commit produce the same bytes whatever
the working directory or the order of PATHS.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from karpenter_policy.api.constraintset import (
    INDEX_KEY,
    UNVERSIONED,
    ConstraintSet,
    ConstraintSetIndex,
    canonical_json,
    content_hash,
    provider_settings,
    set_key,
    wire_data,
)
from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND, object_ref
from karpenter_policy.api.objects import VERSION_ANNOTATION, Provisioner
from karpenter_policy.api.rules import RULES
from karpenter_policy.api.v1.crds import EC2NODECLASS_KIND, NODEPOOL_KIND
from karpenter_policy.api.violations import CONFIGMAP_TOO_LARGE, DUPLICATE_NAME, ERROR, RESERVED_NAME
from karpenter_policy.catalog import Catalog, catalog_to_json
from karpenter_policy.checks.findings import CommandOutput, Finding, Report
from karpenter_policy.checks.options import OptionError, catalog_option, values_option
from karpenter_policy.checks.reporters import displayable, render
from karpenter_policy.checks.repository import PolicyRepository, load_repository
from karpenter_policy.checks.selection import EVERYTHING, Selection
from karpenter_policy.checks.source.gitrepo import GitError, Repository, find_repository
from karpenter_policy.checks.source.loader import Document, discover
from karpenter_policy.checks.source.revision import differs_from_head
from karpenter_policy.checks.validation.policies import place
from karpenter_policy.commands.compile import manifests
from karpenter_policy.commands.compile.nodepools import nodepool_set, nodepool_sources
from karpenter_policy.commands.compile.output import (
    INDEX_FILE,
    KUSTOMIZATION_FILE,
    MANIFESTS_DIR,
    SETS_DIR,
    OutputError,
    check_output_dir,
    write_output,
)
from karpenter_policy.commands.flags import DEFAULT_CONFIGMAP_NAME, DEFAULT_CONFIGMAP_NAMESPACE, CompileFlags

STDOUT = "-"


@dataclass(slots=True)
class CompileOptions:
    catalog: Catalog
    api: str = manifests.API_V1ALPHA5
    values: Mapping[str, Any] | None = None
    configmap_namespace: str = DEFAULT_CONFIGMAP_NAMESPACE
    configmap_name: str = DEFAULT_CONFIGMAP_NAME
    flux_escape: bool = False
    v1: manifests.V1Options = field(default_factory=manifests.V1Options)
    #: The version of sets without the annotation; None: from git (`repository_version`).
    policy_version: str | None = None
    #: The files left out (--exclude) and the rules disabled (--disable).
    selection: Selection = EVERYTHING
    #: Where `values` came from (--values): part of what the version describes.
    values_file: str | None = None


@dataclass(slots=True)
class CompileResult:
    """The report and, when it has no errors, everything to write: `files` (relative POSIX path → bytes) and the
    manifests in apply order."""

    report: Report
    sets: list[ConstraintSet] = field(default_factory=list)
    objects: list[Mapping[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # for stderr (e.g. why there is no version from git)

    def stream(self) -> str:
        """All manifests (the ConfigMap included) as one YAML stream."""
        return manifests.yaml_stream(self.objects)


# --- the checks ---------------------------------------------------------------------------------------------


def run_checks(
    paths: Sequence[str],
    values: Mapping[str, Any] | None,
    catalog: Catalog,
    selection: Selection = EVERYTHING,
) -> PolicyRepository:
    """The checks `compile` runs before building anything — the repository read and its provisioners proven, as
    `check` does —, the findings as compile reports them (`_as_compiled`)."""
    policies = load_repository(paths, values, prove=True, catalog=catalog, selection=selection)
    policies.report.findings = [_as_compiled(f) for f in policies.report.findings]
    return policies


#: The rules that are warnings where a policy is reviewed and errors where it is compiled (`error_when_compiled` in
#: their declaration, `api/rules`): what compile writes is what reaches the cluster. A `${VAR}` left in a selector
#: matches no subnet: no node ever launches.
ERRORS_WHEN_COMPILED = frozenset(rule.id for rule in RULES if rule.error_when_compiled)


def _as_compiled(finding: Finding) -> Finding:
    """`finding` as compile reports it (`ERRORS_WHEN_COMPILED`: an error, saying why)."""
    if finding.rule not in ERRORS_WHEN_COMPILED or finding.severity == ERROR:
        return finding
    return replace(finding, severity=ERROR, message=f"{finding.message} (an error in compile: its output is applied)")


# --- versions and sources -----------------------------------------------------------------------------------


def _input_base(paths: Sequence[str]) -> str:
    bases = [os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p)) for p in paths]
    try:
        return os.path.commonpath(bases) if bases else os.getcwd()
    except ValueError:  # different drives
        return os.getcwd()


def repository_version(
    repository: Repository | None,
    files_read: Sequence[str] = (),
    paths: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> tuple[str, str | None]:
    """The version of sets without the `karpenter-policy/version` annotation: `git describe --always` of
    `repository`, `-dirty` when `files_read` (under `paths`, less `exclude`) are not HEAD's policies, else
    "unversioned" — with a note saying why, when a repository is there but git failed."""
    if repository is None:
        return UNVERSIONED, None
    try:
        described = repository.describe()
        if not described:
            return UNVERSIONED, None
        return described + ("-dirty" if differs_from_head(repository, files_read, paths, exclude) else ""), None
    except GitError as error:
        return UNVERSIONED, (
            f"no version from git in {repository.root} ({error}): sets without a {VERSION_ANNOTATION} annotation "
            f"are {UNVERSIONED!r}; give --policy-version to set one"
        )


def relative_source(file: str, input_base: str, repository: Repository | None = None) -> str:
    """`file` relative to the root of `repository` (else to `input_base`), with forward slashes; symbolic links
    are resolved first, and a name that is not UTF-8 is escaped (`\\xe9`)."""
    absolute = os.path.realpath(file)
    relative = os.path.relpath(absolute, repository.root if repository is not None else input_base)
    if relative.startswith(".."):
        relative = os.path.basename(absolute)
    return displayable(PurePath(relative).as_posix())


# --- building -----------------------------------------------------------------------------------------------


def _name_of(doc: Document) -> str:
    return str(doc.data["metadata"]["name"])


def _pretty_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def _reserved(doc: Document) -> Finding:
    """A Provisioner whose set would be stored under the index's own file name and ConfigMap key."""
    line, column = doc.position(("metadata", "name"))
    name = _name_of(doc)
    return Finding(
        RESERVED_NAME,
        ERROR,
        f"compile cannot store the constraint set of a Provisioner named {name!r}: {SETS_DIR}/{set_key(name)} and "
        f"the ConfigMap key {set_key(name)!r} hold the index of all the sets; rename it",
        doc.file,
        line,
        column,
        f"{PROVISIONER_KIND}/{name}",
    )


def _converted_twice(
    converted: Sequence[Mapping[str, Any]], nodepools: Mapping[str, Document], node_classes: Mapping[str, Document]
) -> list[Finding]:
    """`duplicate-name` (error) at each NodePool / EC2NodeClass of the repository that `--api v1`'s conversion of
    a Provisioner / AWSNodeTemplate also writes: applied, one would replace the other."""
    written = {NODEPOOL_KIND: nodepools, EC2NODECLASS_KIND: node_classes}
    findings = []
    for obj in converted:
        kind, name = str(obj.get("kind")), str((obj.get("metadata") or {}).get("name"))
        doc = written.get(kind, {}).get(name)
        if doc is None:
            continue
        source = PROVISIONER_KIND if kind == NODEPOOL_KIND else NODE_TEMPLATE_KIND
        line, column = doc.position(("metadata", "name"))
        message = (
            f"compile --api v1 would write two {kind} objects named {name!r}: this one and one converted from the "
            f"repository's {source}s; rename one, or compile with --api v1alpha5"
        )
        findings.append(Finding(DUPLICATE_NAME, ERROR, message, doc.file, line, column, object_ref(kind, name)))
    return findings


def catalog_identity(catalog: Catalog) -> dict[str, Any]:
    return {
        "region": catalog.region,
        "types": len(catalog),
        "sha256": content_hash(catalog_to_json(catalog)).removeprefix("sha256:"),
    }


def compile_paths(paths: Sequence[str], options: CompileOptions) -> CompileResult:
    """Check `paths` and, if no error was found, build the constraint sets, manifests and files."""
    policies = run_checks(paths, options.values, options.catalog, options.selection)
    report, provisioners, templates = policies.report, policies.provisioners, policies.node_templates
    result = CompileResult(report)
    report.findings += [_reserved(doc) for name, doc in provisioners.items() if set_key(name) == INDEX_KEY]
    if report.errors or report.could_not_run:
        return result

    base = _input_base(paths)
    # the repository of the policies, determined once from the common directory of PATHS and found without git:
    # a repository-shaped folder inside the tree is never taken (see `gitrepo`)
    repository = find_repository(base)
    typed = {name: Provisioner.from_document(provisioners[name].data) for name in sorted(provisioners)}
    pools = nodepool_sources(policies.nodepools, policies.node_classes)
    fallback_version = options.policy_version
    unversioned = any(not p.version for p in typed.values()) or any(not p.version for p in pools)
    if fallback_version is None and unversioned:  # git runs only when needed
        read = [*discover(paths, options.selection.exclude)[0], *([options.values_file] if options.values_file else [])]
        fallback_version, note = repository_version(repository, read, paths, options.selection.exclude)
        result.notes += [note] if note else []
    catalog = options.catalog
    sets: list[ConstraintSet] = []
    for name, provisioner in typed.items():
        doc = provisioners[name]
        sources = [relative_source(doc.file, base, repository)]
        template = templates.get(provisioner.provider_ref.name) if provisioner.provider_ref is not None else None
        if template is not None:
            sources.append(relative_source(template.file, base, repository))
        provider = provider_settings(provisioner, (template.data.get("spec") or {}) if template is not None else None)
        sets.append(
            ConstraintSet.of(
                provisioner,
                version=provisioner.version or fallback_version or UNVERSIONED,
                sources=sources,
                region=catalog.region,
                provider=provider,
                instance_types=catalog,
            )
        )
    docs = {set_key(name): provisioners[name] for name in typed}
    for pool in pools:
        constraint_set = nodepool_set(
            pool,
            version=pool.version or fallback_version or UNVERSIONED,
            relative=lambda file: relative_source(file, base, repository),
            catalog=catalog,
        )
        sets.append(constraint_set)
        docs[constraint_set.key] = pool.doc
    index = ConstraintSetIndex.of(sets, catalog_identity(catalog))

    config_data = wire_data(sets, index)
    size = manifests.configmap_data_bytes(config_data)
    if size > manifests.MAX_CONFIGMAP_DATA_BYTES and sets:
        # what each set costs the ConfigMap: its own key and its node template (held once in the index)
        def weight(s: ConstraintSet) -> int:
            spec = s.provider.spec if s.provider is not None and s.provider.spec is not None else None
            return len(config_data[s.key]) + (len(canonical_json(spec)) if spec is not None else 0)

        largest = max(sets, key=lambda s: (weight(s), s.name, s.origin))
        doc = docs[largest.key]
        line, column = doc.position(("metadata", "name"))
        report.findings.append(
            Finding(
                CONFIGMAP_TOO_LARGE,
                ERROR,
                f"the constraint sets take {size} bytes, more than the {manifests.MAX_CONFIGMAP_DATA_BYTES} a "
                f"ConfigMap can hold; the largest is {largest.name} ({weight(largest)} bytes with its node "
                "template): split the policies over several ConfigMaps (--configmap-name) or shrink it",
                doc.file,
                line,
                column,
                object_ref(largest.origin, largest.name),
            )
        )

    objects: list[Mapping[str, Any]]
    if options.api == manifests.API_V1:
        converted, issues = manifests.to_v1(
            [provisioners[n].data for n in sorted(provisioners)],
            {n: templates[n].data for n in sorted(templates)},
            options.v1,
        )
        originals = {(PROVISIONER_KIND, n): d for n, d in provisioners.items()}
        originals.update({(NODE_TEMPLATE_KIND, n): d for n, d in templates.items()})
        placed = [place(originals[(i.kind, i.name)], i.violation) for i in issues]
        report.findings.extend(dict.fromkeys(placed))  # a template converted twice reports once
        objects = list(converted)
        report.findings += _converted_twice(objects, policies.nodepools, policies.node_classes)
    else:
        objects = [manifests.node_template_manifest(templates[n].data) for n in sorted(templates)]
        objects += [manifests.provisioner_manifest(provisioners[n].data) for n in sorted(provisioners)]
    objects += [manifests.v1_manifest(policies.node_classes[n].data) for n in sorted(policies.node_classes)]
    objects += [manifests.v1_manifest(policies.nodepools[n].data) for n in sorted(policies.nodepools)]
    objects.append(manifests.configmap(options.configmap_namespace, options.configmap_name, config_data))
    if report.errors:
        return result

    objects = [manifests.protect_from_flux(o, options.flux_escape) for o in manifests.sort_objects(objects)]
    files: dict[str, bytes] = {}

    def add(relative: str, content: bytes) -> None:
        if relative in files:  # the checks above make this impossible; never let one file silently replace another
            raise RuntimeError(f"compile would write {relative} twice")
        files[relative] = content

    for constraint_set in sets:
        add(f"{SETS_DIR}/{constraint_set.key}", _pretty_json(constraint_set.to_json()))
    add(INDEX_FILE, _pretty_json(index.to_json()))
    manifest_files = [f"{MANIFESTS_DIR}/{manifests.manifest_file_name(obj)}" for obj in objects]
    for relative, obj in zip(manifest_files, objects, strict=True):
        add(relative, manifests.dump_yaml(obj).encode("utf-8"))
    add(KUSTOMIZATION_FILE, manifests.kustomization(manifest_files).encode("utf-8"))
    result.sets, result.objects, result.files = sets, objects, dict(sorted(files.items()))
    return result


# --- the command --------------------------------------------------------------------------------------------


def _cannot_run(message: str) -> CommandOutput:
    return CommandOutput(2, "", f"karpenter-policy compile: {message}\n")


def compile_command(flags: CompileFlags, selection: Selection = EVERYTHING) -> CommandOutput:
    """Run `compile` with its flags (`selection`: what the CLI made of --exclude and --disable): with `-o DIR`
    the report goes to stdout and the files to DIR (what changed there to stderr); with `-o -` the YAML stream goes
    to stdout and the report to stderr. On any error (exit 1 findings, 2 could not run) nothing is written and,
    when streaming, stdout is empty. `--quiet`: the findings alone, no summary of what was written."""
    paths, out, report_format, quiet = flags.paths, flags.out, flags.report_format, flags.quiet
    streaming = out == STDOUT
    if not streaming:
        try:
            check_output_dir(out, paths)
        except OutputError as error:
            return _cannot_run(str(error))
    try:
        values = values_option(flags.values_file)
        catalog = catalog_option(flags.catalog_file, flags.region, flags.previous_generation)
    except OptionError as error:
        return _cannot_run(str(error))
    options = CompileOptions(
        catalog=catalog,
        api=flags.api,
        values=values,
        configmap_namespace=flags.configmap_namespace,
        configmap_name=flags.configmap_name,
        flux_escape=flags.flux_escape,
        v1=manifests.V1Options(flags.default_instance_profile, flags.node_role),
        policy_version=flags.policy_version,
        selection=selection,
        values_file=flags.values_file,
    )
    result = compile_paths(paths, options)
    report = result.report
    code = report.exit_code(flags.fail_on_warn)
    # "compiled" only when something is written: a run that stops on its findings checked the objects
    text = render(report, report_format, "compiled" if code == 0 else "checked", quiet)
    notes = "".join(f"karpenter-policy compile: note: {note}\n" for note in result.notes)
    if code != 0:
        if report.errors:
            why = f"{report.errors} error{'s' if report.errors != 1 else ''}"
        elif code == 1:
            why = f"{report.warnings} warning{'s' if report.warnings != 1 else ''} (--strict)"
        else:
            why = "not every policy could be read"
        stopped = f"karpenter-policy compile: nothing written: {why}\n"
        if streaming and report_format not in ("text", "github"):
            stopped = ""  # stderr holds the structured report: nothing may follow it
        return CommandOutput(code, "" if streaming else text, notes + (text if streaming else "") + stopped)
    if streaming:
        return CommandOutput(0, result.stream(), notes + text)
    try:
        changes = write_output(result.files, out)
    except OutputError as error:
        return CommandOutput(2, text, f"{notes}karpenter-policy compile: {error}\n")
    summary = f"wrote {out}: {len(result.sets)} constraint sets, {len(result.objects)} manifests; {changes.summary()}\n"
    return CommandOutput(0, text, notes + ("" if quiet else summary))
