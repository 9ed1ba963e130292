"""`compile`: check the policies, then build constraint sets and manifests, and write them atomically.

Output (`-o DIR`)::

    DIR/constraintsets/<provisioner>.json   one ConstraintSet each (api/constraintset.py), pretty JSON
    DIR/constraintsets/index.json           every set with its hash, and the catalog used
    DIR/manifests/<kind>-<name>.yaml        the objects to apply (v1alpha5 as defaulted, or v1), and the
                                            ConfigMap carrying the sets (compact JSON, one key per set)

Everything is computed in memory first; nothing is written when any error is found (or any warning with
`--fail-on-warn`). The directory is built next to DIR under a hidden temporary name and renamed into place; an
existing DIR is replaced only after the new one is complete, and only when it is empty or an earlier output
(it has `constraintsets/index.json`): `-o .` cannot delete a repository. With `-o -` the manifests are one YAML
stream on stdout (for an Argo CD Config Management Plugin) and the report goes to stderr.

Determinism: files in name order, sorted keys, LF, no timestamps, source paths relative to the git repository
of each file (else to the common directory of the PATHS given), so two runs on the same commit produce the same
bytes whatever the working directory or the order of PATHS.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from karpenter_policy.api.constraintset import (
    INDEX_KEY,
    PROVIDER_INLINE,
    PROVIDER_REF,
    UNVERSIONED,
    ConstraintSet,
    ConstraintSetIndex,
    ProviderSettings,
    content_hash,
    set_key,
)
from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.api.violations import CONFIGMAP_TOO_LARGE, ERROR
from karpenter_policy.catalog import Catalog, catalog_to_json
from karpenter_policy.policy import manifests
from karpenter_policy.policy.check import check_paths
from karpenter_policy.policy.findings import CommandOutput, Finding, Report
from karpenter_policy.policy.loader import Document
from karpenter_policy.policy.validate import place

SETS_DIR = "constraintsets"
MANIFESTS_DIR = "manifests"
#: A directory holding this file is an earlier compile output and may be replaced.
OUTPUT_MARKER = f"{SETS_DIR}/{INDEX_KEY}"
STDOUT = "-"
GIT_TIMEOUT_SECONDS = 10


class OutputError(Exception):
    """The output directory cannot be written or replaced (the tool could not run: exit 2)."""


@dataclass(slots=True)
class CompileOptions:
    catalog: Catalog
    api: str = manifests.API_V1ALPHA5
    values: Mapping[str, Any] | None = None
    configmap_namespace: str = manifests.DEFAULT_CONFIGMAP_NAMESPACE
    configmap_name: str = manifests.DEFAULT_CONFIGMAP_NAME
    flux_escape: bool = False
    v1: manifests.V1Options = field(default_factory=manifests.V1Options)


@dataclass(slots=True)
class CompileResult:
    """The report and, when it has no errors, everything to write: `files` (relative POSIX path → bytes) and the
    manifests in apply order."""

    report: Report
    sets: list[ConstraintSet] = field(default_factory=list)
    objects: list[Mapping[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    def stream(self) -> str:
        """All manifests (the ConfigMap included) as one YAML stream."""
        return manifests.yaml_stream(self.objects)


# --- the checks ---------------------------------------------------------------------------------------------


def run_checks(
    paths: Sequence[str],
    values: Mapping[str, Any] | None,
    catalog: Catalog,
    on_valid: Callable[[Document], None],
) -> Report:
    """The checks `compile` runs before building anything: validation and the solver (`check`), which hand each
    valid policy document to `on_valid`."""
    report, _ = check_paths(paths, catalog, values=values, on_valid=on_valid)
    return report


# --- versions and sources -----------------------------------------------------------------------------------


def _git(directory: str, *args: str) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        result = subprocess.run(
            ["git", "-C", directory, *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = result.stdout.strip()
    return out if result.returncode == 0 and out else None


@functools.lru_cache(maxsize=256)
def git_toplevel(directory: str) -> str | None:
    """The root of the git work tree `directory` is in, if any."""
    return _git(directory, "rev-parse", "--show-toplevel")


@functools.lru_cache(maxsize=256)
def git_describe(directory: str) -> str | None:
    """`git describe --always --dirty` of the repository `directory` is in, if any."""
    if git_toplevel(directory) is None:
        return None
    return _git(directory, "describe", "--always", "--dirty")


def policy_version(provisioner: Provisioner, file: str) -> str:
    """The annotation `karpenter-policy/version`, else the git describe of the source, else "unversioned"."""
    if provisioner.version:
        return provisioner.version
    return git_describe(os.path.dirname(os.path.abspath(file))) or UNVERSIONED


def _input_base(paths: Sequence[str]) -> str:
    bases = [os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p)) for p in paths]
    try:
        return os.path.commonpath(bases) if bases else os.getcwd()
    except ValueError:  # different drives
        return os.getcwd()


def relative_source(file: str, input_base: str) -> str:
    """`file` relative to its git repository root (else to `input_base`), with forward slashes; symbolic links
    are resolved first (git reports the real root)."""
    absolute = os.path.realpath(file)
    base = git_toplevel(os.path.dirname(absolute)) or input_base
    relative = os.path.relpath(absolute, base)
    if relative.startswith(".."):
        relative = os.path.basename(absolute)
    return PurePath(relative).as_posix()


# --- building -----------------------------------------------------------------------------------------------


def _name_of(doc: Document) -> str:
    return str(doc.data["metadata"]["name"])


def _pretty_json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def catalog_identity(catalog: Catalog) -> dict[str, Any]:
    return {
        "region": catalog.region,
        "types": len(catalog),
        "sha256": content_hash(catalog_to_json(catalog)).removeprefix("sha256:"),
    }


def compile_paths(paths: Sequence[str], options: CompileOptions) -> CompileResult:
    """Check `paths` and, if no error was found, build the constraint sets, manifests and files."""
    provisioners: dict[str, Document] = {}
    templates: dict[str, Document] = {}

    def collect(doc: Document) -> None:
        kind = doc.data.get("kind")
        if kind == PROVISIONER_KIND:
            provisioners.setdefault(_name_of(doc), doc)
        elif kind == NODE_TEMPLATE_KIND:
            templates.setdefault(_name_of(doc), doc)

    report = run_checks(paths, options.values, options.catalog, collect)
    result = CompileResult(report)
    if report.errors or report.could_not_run:
        return result

    base = _input_base(paths)
    catalog = options.catalog
    sets: list[ConstraintSet] = []
    for name in sorted(provisioners):
        doc = provisioners[name]
        provisioner = Provisioner.from_document(doc.data)
        sources = [relative_source(doc.file, base)]
        provider: ProviderSettings | None = None
        if provisioner.provider_ref is not None:
            template = templates.get(provisioner.provider_ref.name)
            spec = dict(template.data.get("spec") or {}) if template is not None else None
            if template is not None:
                sources.append(relative_source(template.file, base))
            provider = ProviderSettings(PROVIDER_REF, provisioner.provider_ref.name, spec)
        elif provisioner.provider is not None:
            provider = ProviderSettings(PROVIDER_INLINE, None, dict(provisioner.provider))
        sets.append(
            ConstraintSet.of(
                provisioner,
                version=policy_version(provisioner, doc.file),
                sources=sources,
                region=catalog.region,
                provider=provider,
                instance_types=catalog,
            )
        )
    index = ConstraintSetIndex.of(sets, catalog_identity(catalog))

    config_data = {set_key(s.name): s.dumps() for s in sets}
    config_data[INDEX_KEY] = index.dumps()
    size = manifests.configmap_data_bytes(config_data)
    if size > manifests.MAX_CONFIGMAP_DATA_BYTES and sets:
        largest = max(sets, key=lambda s: (len(config_data[set_key(s.name)]), s.name))
        doc = provisioners[largest.name]
        line, column = doc.position(("metadata", "name"))
        report.findings.append(
            Finding(
                CONFIGMAP_TOO_LARGE,
                ERROR,
                f"the constraint sets take {size} bytes, more than the {manifests.MAX_CONFIGMAP_DATA_BYTES} a "
                f"ConfigMap can hold; the largest is {largest.name} ({len(config_data[set_key(largest.name)])} "
                f"bytes, {len(largest.instance_types)} instance types): narrow its requirements",
                doc.file,
                line,
                column,
                f"{PROVISIONER_KIND}/{largest.name}",
            )
        )

    objects: list[Mapping[str, Any]]
    if options.api == manifests.API_V1:
        converted, issues = manifests.to_v1(
            [provisioners[n].data for n in sorted(provisioners)],
            {n: templates[n].data for n in sorted(templates)},
            options.v1,
        )
        docs = {(PROVISIONER_KIND, n): d for n, d in provisioners.items()}
        docs.update({(NODE_TEMPLATE_KIND, n): d for n, d in templates.items()})
        placed = [place(docs[(i.kind, i.name)], i.violation) for i in issues]
        report.findings.extend(dict.fromkeys(placed))  # a template converted twice reports once
        objects = list(converted)
    else:
        objects = [manifests.node_template_manifest(templates[n].data) for n in sorted(templates)]
        objects += [manifests.provisioner_manifest(provisioners[n].data) for n in sorted(provisioners)]
    objects.append(manifests.configmap(options.configmap_namespace, options.configmap_name, config_data))
    if report.errors:
        return result

    objects = [manifests.protect_from_flux(o, options.flux_escape) for o in manifests.sort_objects(objects)]
    files: dict[str, bytes] = {}
    for constraint_set in sets:
        files[f"{SETS_DIR}/{set_key(constraint_set.name)}"] = _pretty_json(constraint_set.to_json())
    files[OUTPUT_MARKER] = _pretty_json(index.to_json())
    for obj in objects:
        files[f"{MANIFESTS_DIR}/{manifests.manifest_file_name(obj)}"] = manifests.dump_yaml(obj).encode("utf-8")
    result.sets, result.objects, result.files = sets, objects, dict(sorted(files.items()))
    return result


# --- writing ------------------------------------------------------------------------------------------------


def check_output_dir(out_dir: str, paths: Iterable[str]) -> None:
    """Refuse an output directory that compile must not replace (raises OutputError): a symbolic link, a file,
    a non-empty directory that is not an earlier output, or one inside an input path (it would be read back as
    policies next time)."""
    target = os.path.abspath(out_dir)
    if os.path.islink(target):
        raise OutputError(f"{out_dir} is a symbolic link; give the directory it points to")
    if os.path.exists(target):
        if not os.path.isdir(target):
            raise OutputError(f"{out_dir} exists and is not a directory")
        if os.listdir(target) and not os.path.isfile(os.path.join(target, *OUTPUT_MARKER.split("/"))):
            raise OutputError(
                f"{out_dir} is not empty and is not a karpenter-policy output (no {OUTPUT_MARKER}); "
                "refusing to replace it"
            )
    for path in paths:
        source = os.path.abspath(path)
        if os.path.isdir(source) and (target == source or target.startswith(source.rstrip(os.sep) + os.sep)):
            raise OutputError(
                f"the output directory {out_dir} is inside the input path {path}: its manifests would be read back "
                "as policies; write it elsewhere"
            )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_output(files: Mapping[str, bytes], out_dir: str) -> None:
    """Write `files` as `out_dir`, atomically: built in a hidden temporary directory next to it, then renamed
    into place; a previous `out_dir` is removed only after the new one is in place. Raises OutputError."""
    target = os.path.abspath(out_dir)
    parent, name = os.path.split(target)
    try:
        os.makedirs(parent, exist_ok=True)
        temporary = tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
    except OSError as error:
        raise OutputError(f"cannot create {out_dir}: {error.strerror or error}") from None
    old = temporary[: -len(".tmp")] + ".old"
    try:
        os.chmod(temporary, 0o777 & ~_umask())
        for relative, content in sorted(files.items()):
            path = os.path.join(temporary, *relative.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
        if os.path.exists(target):
            os.rename(target, old)
            try:
                os.rename(temporary, target)
            except OSError:
                os.rename(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(temporary, target)
    except OSError as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise OutputError(f"cannot write {out_dir}: {error.strerror or error}") from None
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


# --- the command --------------------------------------------------------------------------------------------


def _cannot_run(message: str) -> CommandOutput:
    return CommandOutput(2, "", f"karpenter-policy compile: {message}\n")


def compile_command(
    paths: Sequence[str],
    out: str,
    *,
    api: str = manifests.API_V1ALPHA5,
    values_file: str | None = None,
    catalog_file: str | None = None,
    configmap_namespace: str = manifests.DEFAULT_CONFIGMAP_NAMESPACE,
    configmap_name: str = manifests.DEFAULT_CONFIGMAP_NAME,
    flux_escape: bool = False,
    default_instance_profile: str | None = None,
    node_role: str | None = None,
    report_format: str = "text",
    fail_on_warn: bool = False,
) -> CommandOutput:
    """Run `compile`: with `-o DIR` the report goes to stdout and the files to DIR; with `-o -` the YAML stream
    goes to stdout and the report to stderr. On any error (exit 1 findings, 2 could not run) nothing is written
    and, when streaming, stdout is empty."""
    from karpenter_policy.catalog import CatalogError, load_catalog
    from karpenter_policy.policy.reporters import render
    from karpenter_policy.policy.templating import ValuesError, load_values

    streaming = out == STDOUT
    if not streaming:
        try:
            check_output_dir(out, paths)
        except OutputError as error:
            return _cannot_run(str(error))
    try:
        values = load_values(values_file) if values_file is not None else None
    except ValuesError as error:
        return _cannot_run(str(error))
    try:
        catalog = load_catalog(None if catalog_file is None else Path(catalog_file))
    except CatalogError as error:
        return _cannot_run(f"cannot load the catalog: {error}")
    options = CompileOptions(
        catalog=catalog,
        api=api,
        values=values,
        configmap_namespace=configmap_namespace,
        configmap_name=configmap_name,
        flux_escape=flux_escape,
        v1=manifests.V1Options(default_instance_profile, node_role),
    )
    result = compile_paths(paths, options)
    report = result.report
    code = report.exit_code(fail_on_warn)
    text = render(report, report_format, "compiled")
    if code != 0:
        return CommandOutput(code, "" if streaming else text, text if streaming else "")
    if streaming:
        return CommandOutput(0, result.stream(), text)
    try:
        write_output(result.files, out)
    except OutputError as error:
        return CommandOutput(2, text, f"karpenter-policy compile: {error}\n")
    summary = f"wrote {out}: {len(result.sets)} constraint sets, {len(result.objects)} manifests\n"
    return CommandOutput(0, text, summary)
