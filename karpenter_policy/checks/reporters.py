"""Render a `Report` as text, JSON (`{"findings": [...], "summary": {...}}`), SARIF 2.1.0, GitHub workflow commands
or JUnit XML.

Every format is deterministic: findings sorted by file, line, column, rule; keys sorted; no timestamps.
Findings silenced by `--disable` or a directive (`suppression`) are left out and counted in the summary. With
`quiet`, text and GitHub output hold the findings and nothing else. GitHub annotations and SARIF locations name
files relative to the repository (`$GITHUB_WORKSPACE`, else the git repository holding the working directory),
which is how GitHub places them on a pull request; JUnit lists every file read, passing ones too.

Every format is valid UTF-8 whatever the file names: a name that is not UTF-8 reaches Python with its undecodable
bytes as lone surrogates (`surrogateescape`), which no UTF-8 writer can encode; they are spelt `\\xe9` (the byte)
in text, JSON, GitHub and JUnit output (`displayable`), and percent-encoded (`%E9`) in SARIF URIs.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import PurePath
from typing import Any

from karpenter_policy import installed_version
from karpenter_policy.api.rules import ERROR, RULE_IDS, rule_named
from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.prettyjson import Written, pretty_json
from karpenter_policy.checks.ruledocs import docs_url, help_uri
from karpenter_policy.checks.source.gitrepo import find_repository

FORMATS = ("text", "json", "sarif", "github", "junit")

_SURROGATE = re.compile("[\ud800-\udfff]")


def _byte_of(surrogate: str) -> int | None:
    """The byte a `surrogateescape` surrogate stands for (U+DC80..U+DCFF), else None."""
    code = ord(surrogate)
    return code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else None


def _escape(match: re.Match[str]) -> str:
    byte = _byte_of(match.group())
    return f"\\x{byte:02x}" if byte is not None else f"\\u{ord(match.group()):04x}"


def displayable(text: str) -> str:
    """`text` as valid UTF-8: an undecodable byte of a file name (a lone surrogate) spelt `\\xe9`, any other lone
    surrogate `\\udXXX`; everything else unchanged."""
    return _SURROGATE.sub(_escape, text)


def json_text(data: Any) -> str:
    """Pretty JSON with sorted keys, every string `displayable`: the one way the commands print JSON (`prettyjson`:
    what `json.dumps(…, indent=2, sort_keys=True, ensure_ascii=False)` writes, in one pass)."""
    return pretty_json(data, displayable) + "\n"


#: How the summary line says a pseudo-kind of `Report.kinds`: "(invalid)" counts objects of no kind and version the
#: tool knows (`kind: Provisoner`), whose schema error says which.
_KIND_WORDS = {"(invalid)": "of an unknown kind"}


def _summary_text(report: Report, verb: str) -> str:
    kinds = ", ".join(f"{n} {_KIND_WORDS.get(k, k)}" for k, n in sorted(report.kinds.items()))
    line = f"{verb} {report.objects} object{'s' if report.objects != 1 else ''}"
    line += f" ({kinds})" if kinds else ""
    line += f" in {report.files} file{'s' if report.files != 1 else ''}"
    if report.skipped:
        skipped = ", ".join(f"{k}: {n}" for k, n in sorted(report.skipped.items()))
        line += f"; skipped {sum(report.skipped.values())} of other kinds ({skipped})"
    if report.not_kubernetes:
        documents = sum(report.not_kubernetes.values())
        plural = documents != 1
        line += f"; skipped {documents} YAML document{'s' if plural else ''} that {'are' if plural else 'is'} not "
        line += f"{'Kubernetes objects' if plural else 'a Kubernetes object'}"
    if suppressed := report.suppressed:
        line += f"; {suppressed} finding{'s' if suppressed != 1 else ''} suppressed"
    return (
        f"{line}: {report.errors} error{'s' if report.errors != 1 else ''}, "
        f"{report.warnings} warning{'s' if report.warnings != 1 else ''}"
    )


def render_text(report: Report, verb: str = "validated", quiet: bool = False) -> str:
    lines = []
    for f in report.sorted_findings():
        where = f"{f.file}:{f.line}:{f.column}" if f.line else f.file
        subject = f" {f.object_ref}:" if f.object_ref else ""
        first, *more = f.message.split("\n")
        lines.append(f"{where}: {f.severity}:{subject} {first} [{f.rule}]")
        lines.extend(f"  {line}" for line in more)  # a multi-line message: its lines under the finding
        lines.extend(f"    related: {r.file}:{r.line}:{r.column}" for r in f.related)
    if not quiet:
        lines.append(_summary_text(report, verb))
    return "".join(f"{line}\n" for line in lines)


def _summary(report: Report) -> dict[str, object]:
    return {
        "errors": report.errors,
        "warnings": report.warnings,
        "files": report.files,
        "objects": report.objects,
        "kinds": dict(sorted(report.kinds.items())),
        "skipped": dict(sorted(report.skipped.items())),
        "not_kubernetes": sum(report.not_kubernetes.values()),
        "suppressed": report.suppressed,
    }


def json_report(report: Report) -> dict[str, Any]:
    """The JSON report as data: its `findings` and `summary` (what `render_json` prints; `check` adds sections)."""
    return {"findings": [f.to_json() for f in report.sorted_findings()], "summary": _summary(report)}


def render_json(report: Report) -> str:
    return json_text(json_report(report))


def repository_root() -> str:
    """The directory GitHub names files from: `$GITHUB_WORKSPACE` (a workflow's checkout), else the git repository
    holding the working directory, else the working directory."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace and os.path.isdir(workspace):
        return os.path.abspath(workspace)
    repository = find_repository(os.getcwd())
    return repository.root if repository is not None else os.getcwd()


def repository_path(file: str, root: str) -> str:
    """`file` relative to `root` with forward slashes, when it lies inside (symbolic links resolved if need be);
    else as given."""
    if not file or file.startswith("<"):  # <stdin>
        return file
    for candidate, base in ((os.path.abspath(file), root), (os.path.realpath(file), os.path.realpath(root))):
        relative = os.path.relpath(candidate, base)
        if not relative.startswith(".."):
            return PurePath(relative).as_posix()
    return PurePath(file).as_posix()


def _sarif_uri(file: str) -> str:
    """The file as a relative URI reference: forward slashes, an undecodable byte percent-encoded (`%E9`)."""

    def encode(match: re.Match[str]) -> str:
        byte = _byte_of(match.group())
        return f"%{byte:02X}" if byte is not None else _escape(match)

    return _SURROGATE.sub(encode, file.replace("\\", "/"))


_SRCROOT = "%SRCROOT%"


def _sarif_location(file: str, line: int, column: int, root: str) -> dict[str, object]:
    region = {"startLine": max(line, 1), "startColumn": max(column, 1)}
    artifact: dict[str, str] = {"uri": _sarif_uri(repository_path(file, root))}
    if not os.path.isabs(artifact["uri"]):
        artifact["uriBaseId"] = _SRCROOT
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def sarif_rule(rule: str, docs: str | None) -> dict[str, object]:
    """A SARIF reportingDescriptor from the rule's declaration (`api/rules`): the one-line and the full
    description, its severity as the default level, help (how to silence it, or that it cannot be), its page."""
    declared = rule_named(rule)
    short = declared.summary if declared is not None else rule
    full = declared.description if declared is not None else short
    page = declared.page if declared is not None else rule
    if declared is None or declared.silenceable:
        silence = (
            f"Silence one finding with the comment `# karpenter-policy: disable={rule}` on its line or the line above."
        )
    else:
        silence = "It cannot be silenced: neither --disable nor a `# karpenter-policy: disable=` comment applies."
    descriptor: dict[str, object] = {
        "id": rule,
        "name": rule,
        "shortDescription": {"text": short},
        "fullDescription": {"text": full},
        "help": {"text": f"{full} {silence} See {page}.", "markdown": f"{full}\n\n{silence}\n\nSee `{page}`."},
    }
    if declared is not None:
        descriptor["defaultConfiguration"] = {"level": "error" if declared.severity == ERROR else "warning"}
    if (uri := help_uri(rule, docs)) is not None:
        descriptor["helpUri"] = uri
    return descriptor


@lru_cache(maxsize=16)
def _sarif_rules(rule_ids: tuple[str, ...], docs: str | None) -> Written:
    """The SARIF rule descriptors of `rule_ids`, written once per rule set and docs URL — all they depend on, the
    declarations being constant (every report lists every rule: 110 KB of JSON, 1.3 ms a report written anew)."""
    return Written(pretty_json([sarif_rule(r, docs) for r in rule_ids], displayable))


def render_sarif(report: Report) -> str:
    findings = report.sorted_findings()
    rule_ids = tuple(sorted({f.rule for f in findings} | set(RULE_IDS)))
    root = repository_root()
    results = []
    for f in findings:
        result: dict[str, object] = {
            "ruleId": f.rule,
            "level": "error" if f.severity == "error" else "warning",
            "message": {"text": f"{f.object_ref}: {f.message}" if f.object_ref else f.message},
            "locations": [_sarif_location(f.file, f.line, f.column, root)],
        }
        if f.related:
            result["relatedLocations"] = [
                {"id": i, **_sarif_location(r.file, r.line, r.column, root)} for i, r in enumerate(f.related)
            ]
        results.append(result)
    docs = docs_url()
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "karpenter-policy",
                        "version": installed_version(),
                        "rules": _sarif_rules(rule_ids, docs),
                    }
                },
                "results": results,
            }
        ],
    }
    return json_text(sarif)


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, verb: str = "validated", quiet: bool = False) -> str:
    """GitHub Actions workflow commands: one `::error`/`::warning` annotation per finding, at the file's path in the
    repository."""
    lines = []
    root = repository_root()
    for f in report.sorted_findings():
        props = [f"file={_gh_property(repository_path(f.file, root))}"] if not f.file.startswith("<") else []
        if f.line:
            props += [f"line={f.line}", f"col={f.column}"]
        props.append(f"title={_gh_property(f.rule)}")
        subject = f"{f.object_ref}: " if f.object_ref else ""
        lines.append(
            f"::{'error' if f.severity == 'error' else 'warning'} {','.join(props)}::{_gh_data(subject + f.message)}"
        )
    if not quiet:
        lines.append(_summary_text(report, verb))
    return "".join(f"{line}\n" for line in lines)


_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _xml_text(text: str) -> str:
    """Characters XML 1.0 forbids, spelt as Python escapes (`\\x01`), so that the report stays well-formed."""
    return _XML_ILLEGAL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), displayable(text))


def render_junit(report: Report) -> str:
    """One test case per file read, passing ones too: failing with its errors, warnings in system-out, skipped when
    it holds no Kubernetes object (a values file, a workflow)."""
    from xml.sax.saxutils import escape, quoteattr  # pulls in urllib: only JUnit output needs it

    by_file: dict[str, list[Finding]] = defaultdict(list)
    for file in report.file_names:
        by_file[file] = []
    for f in report.sorted_findings():
        by_file[f.file].append(f)
    failures = sum(1 for findings in by_file.values() if any(f.severity == "error" for f in findings))
    skipped = [file for file, findings in by_file.items() if not findings and file in report.without_objects]
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuite name="karpenter-policy" tests="{len(by_file)}" failures="{failures}" errors="0" '
        f'skipped="{len(skipped)}">',
    ]
    for file, findings in sorted(by_file.items()):
        out.append(f'  <testcase classname="karpenter-policy" name={quoteattr(_xml_text(file))}>')
        errors = [f for f in findings if f.severity == "error"]
        lines = (f"{f.file}:{f.line}:{f.column}: {f.severity}: {f.message} [{f.rule}]" for f in findings)
        body = _xml_text("\n".join(lines))
        if errors:
            message = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
            out.append(f"    <failure message={quoteattr(message)}>{escape(body)}</failure>")
        elif findings:
            out.append(f"    <system-out>{escape(body)}</system-out>")
        elif file in skipped:
            out.append('    <skipped message="no Kubernetes object in this file"/>')
        out.append("  </testcase>")
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


def render(report: Report, output: str, verb: str = "validated", quiet: bool = False) -> str:
    """The report in `output` format; `quiet` leaves only the findings in text and GitHub output (the structured
    formats are unchanged)."""
    if output == "json":
        return render_json(report)
    if output == "sarif":
        return render_sarif(report)
    if output == "github":
        return displayable(render_github(report, verb, quiet))
    if output == "junit":
        return render_junit(report)
    return displayable(render_text(report, verb, quiet))
