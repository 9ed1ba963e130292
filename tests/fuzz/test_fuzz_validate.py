"""Fuzz `validate`: thousands of random, mutated and hostile policy files, in-process and through the CLI.

For every file (or set of files) the properties are:

- nothing escapes `validate_paths` or `render` (no traceback), in any output format;
- json and sarif parse as JSON, junit as XML, github has one annotation per finding, and every format is
  encodable as UTF-8 (what the CLI writes);
- every finding has a known rule id, a severity, the file it is about, a non-negative line and column (within
  the file) and a non-empty message;
- a report with errors exits 1 or 2, one without exits 0;
- a file made certainly invalid (a known-bad mutation) gets at least one error; a file left untouched gets none;
- when `validate` finds no error, an independent reading (PyYAML + jsonschema on `schemas/`) agrees that every
  document is a schema-valid policy object, a skipped object of another kind, or empty.

Nothing is tolerated: an exception that escapes or a report that does not parse fails the test. Every bug the
fuzzer found is fixed; its minimal input stays below (`MINIMAL`) as a regression test. The properties shared
with the fuzz tests of the other inputs are in `properties`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis.control import currently_in_test_context
from profiles import examples
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from karpenter_policy.checks.findings import Report
from karpenter_policy.checks.validation.policies import validate_paths

from .properties import FUZZ, check_rendering, max_line
from .strategies import (
    KNOWN_RULES,
    MAX_FILE_BYTES,
    NASTY,
    POLICY_KINDS,
    POLICY_SCHEMAS,
    SUBPROCESS_ONLY,
    Case,
    file_sets,
    hostile_cases,
    mutated_cases,
    nasty_bytes,
    raw_cases,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas"

# Fixed bugs: what the minimal inputs below (`MINIMAL`) used to do.
JUNIT_BUG = (
    "checks/reporters.py render_junit: characters XML 1.0 forbids (\\x01, \\x1b, \\uFFFE, ...) taken from a YAML "
    "key into a message were written as they are, so the junit report was not well-formed XML"
)
LABEL_NEWLINE_BUG = (
    "model/labels.py: the label key/value/DNS regexes ended with `$` and were used with .match, so a trailing "
    "newline passed (`labels: {team: \"a\\n\"}` was accepted; Kubernetes refuses it)"
)


@pytest.fixture(scope="module", autouse=True)
def _clean_scratch() -> Iterator[None]:
    yield
    while _SCRATCH:
        shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)


# --------------------------------------------------------------------------------------------------------
# An independent reading of a file: PyYAML + jsonschema

class _Refused(Exception):
    pass


class _ReferenceLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML 1.1 scalars as kubectl reads them; keys as their text; no merge keys; unknown tags kept as text."""


def _mapping(loader: Any, node: MappingNode) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, ScalarNode):
            raise _Refused("a key that is not a scalar")
        if key_node.value in result:
            raise _Refused(f"duplicate key {key_node.value!r}")
        result[key_node.value] = loader.construct_object(value_node, deep=True)
    return result


def _text(loader: Any, node: Node) -> Any:
    return loader.construct_scalar(node) if isinstance(node, ScalarNode) else _refuse(node)


def _refuse(node: Node) -> Any:
    raise _Refused(f"unexpected {type(node).__name__}")


_ReferenceLoader.add_constructor("tag:yaml.org,2002:map", _mapping)
_ReferenceLoader.add_constructor("tag:yaml.org,2002:timestamp", _text)
_ReferenceLoader.add_constructor("tag:yaml.org,2002:binary", _text)
_ReferenceLoader.add_multi_constructor("", lambda loader, suffix, node: _text(loader, node))


def _retag(root: Node) -> None:
    """Tags on collections mean nothing to kubectl: make every mapping a map and every sequence a seq."""
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            node.tag = "tag:yaml.org,2002:map"
            for key, value in node.value:
                stack += [key, value]
        elif isinstance(node, SequenceNode):
            node.tag = "tag:yaml.org,2002:seq"
            stack += node.value


@cache
def _schema_validator(file_name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMA_DIR / file_name).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def reference_problem(content: bytes) -> str | None:
    """Why the file is not acceptable policy input, or None when every document in it is fine."""
    if len(content) > MAX_FILE_BYTES:
        return "larger than the size bound"
    if b"\x00" in content:
        return "contains NUL"
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        return f"not UTF-8: {error}"
    documents: list[Any] = []
    loader = _ReferenceLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            _retag(node)
            data = loader.construct_document(node)
            if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
                documents.extend(data["items"])
            else:
                documents.append(data)
    except (yaml.YAMLError, _Refused, RecursionError, ValueError, KeyError, IndexError, TypeError) as error:
        return f"does not load: {type(error).__name__}: {error}"
    finally:
        loader.dispose()
    for index, doc in enumerate(documents):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            continue  # not a Kubernetes object (a list, a scalar): skipped and counted
        if "apiVersion" not in doc and "kind" not in doc and not ("metadata" in doc and "spec" in doc):
            continue  # a values file, a workflow: skipped and counted
        api_version, kind = doc.get("apiVersion"), doc.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            return f"document {index} has no apiVersion or kind"
        schema = POLICY_SCHEMAS.get((api_version, kind))
        if schema is not None:
            try:
                mismatch = jsonschema.exceptions.best_match(_schema_validator(schema).iter_errors(doc))
            except RecursionError:
                return f"document {index} nests too deeply for jsonschema"
            if mismatch is not None:
                return f"document {index} does not match {schema}: {mismatch.message[:300]}"
        elif kind in POLICY_KINDS:
            return f"document {index} is a {kind} of apiVersion {api_version}"
    return None


# --------------------------------------------------------------------------------------------------------
# The properties

def check_report(report: Report, files: dict[str, bytes]) -> None:
    """Finding shape, exit code and rendering in every format."""
    assert report.files == len(files)
    for finding in report.findings:
        assert finding.rule in KNOWN_RULES, finding
        assert finding.severity in ("error", "warning"), finding
        assert finding.file in files, finding
        assert type(finding.line) is int and 0 <= finding.line <= max_line(files[finding.file]), finding
        assert type(finding.column) is int and finding.column >= 0, finding
        assert isinstance(finding.message, str) and finding.message.strip(), finding
        as_json = finding.to_json()
        assert as_json.get("object") is None or isinstance(as_json["object"], str), finding
        for related in finding.related:
            assert related.file in files and related.line >= 0 and related.column >= 0, finding
    code = report.exit_code()
    if report.errors:
        assert code in (1, 2), (code, report.findings)
    else:
        assert code == 0 and not report.could_not_run, (code, report.findings)
    if report.warnings:
        assert report.exit_code(fail_on_warn=True) in (1, 2)
    check_rendering(report, KNOWN_RULES)


def check_cases(cases: list[Case], names: list[str] | None = None) -> Report:
    """Write `cases` to files and validate them, by file name or, given `names` (relative paths), as one
    directory tree; then check every property."""
    folder = os.path.join(_scratch(), "tree" if names else "files")
    if names:
        shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):  # one scratch folder, emptied: a fresh one per example is slow
        os.unlink(os.path.join(folder, name))
    files: dict[str, bytes] = {}
    for index, case in enumerate(cases):
        path = os.path.normpath(os.path.join(folder, names[index] if names else f"policy-{index}.yaml"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(case.content)
        files[path] = case.content
    report = validate_paths([folder] if names else list(files))
    check_report(report, files)
    errors = [f for f in report.findings if f.severity == "error"]
    if currently_in_test_context():  # what the examples exercised: --hypothesis-show-statistics
        event("no error" if not errors else "errors")
        for rule in sorted({f.rule for f in report.findings}):
            event(f"rule {rule}")
        if report.kinds:
            event("reached the rules" if any(k != "(invalid)" for k in report.kinds) else "no policy object")
        for case in cases:
            event("must fail" if case.must_fail else "expect valid" if case.expect_valid else "unknown verdict")
    for case in cases:
        if case.must_fail:
            assert errors, f"{case.must_fail}: no error reported for a certainly invalid file"
        if case.expect_valid and len(cases) == 1:
            assert not errors, f"errors for an untouched, valid file: {errors}"
    if not errors:
        for path, content in files.items():
            problem = reference_problem(content)
            assert problem is None, f"validate found no error in {path}, but it {problem}"
    return report


_SCRATCH: list[str] = []


def _scratch() -> str:
    if not _SCRATCH:
        _SCRATCH.append(tempfile.mkdtemp(prefix="karpenter-policy-fuzz-"))
    return _SCRATCH[0]


# --------------------------------------------------------------------------------------------------------
# Fuzz tests (700 + 700 + 400 + 300 = 2,100 examples, 2,000+ files, under HYPOTHESIS_PROFILE=ci; fewer in `dev`)

@FUZZ
@given(case=mutated_cases())
def test_mutated_documents(case: Case) -> None:
    check_cases([case])


@FUZZ
@given(case=raw_cases())
def test_raw_text_mutations(case: Case) -> None:
    check_cases([case])


@settings(FUZZ, max_examples=examples(400))
@given(case=hostile_cases())
@pytest.mark.slow
def test_hostile_files(case: Case) -> None:
    check_cases([case])


@settings(FUZZ, max_examples=examples(300))
@given(files=file_sets())
@pytest.mark.slow
def test_directories_of_mixed_files(files: list[tuple[str, Case]]) -> None:
    check_cases([case for _, case in files], names=[name for name, _ in files])


# --------------------------------------------------------------------------------------------------------
# The nasty corpus, file by file, in-process

#: Nasty files that are certainly invalid: validate must report an error.
MUST_FAIL = frozenset({
    "kind-list-odd-items",
    "kind-list-of-kind-not-string", "deep-flow-sequence-3000", "deep-flow-mapping-2000", "deep-block-sequence-800",
    "deep-in-labels-300", "deep-in-unknown-field-150", "billion-laughs", "billion-laughs-in-spec",
    "recursive-alias-sequence", "recursive-alias-mapping", "recursive-alias-in-spec",
    "undefined-alias", "alias-to-mapping-as-key", "duplicate-keys-top", "duplicate-keys-nested",
    "duplicate-keys-quoted", "non-scalar-key-sequence", "non-scalar-key-mapping", "non-scalar-key-flow",
    "nul-byte", "invalid-utf8", "overlong-utf8", "utf8-surrogate", "truncated-utf8", "utf16-with-bom",
    "latin1", "five-megabytes", "huge-int-5000-digits", "huge-int-in-ttl", "python-object-tag",
    "python-name-tag", "explicit-int-not-a-number", "explicit-float-not-a-number",
    "explicit-bool-maybe", "explicit-int-empty", "implicit-hex-underscore", "implicit-binary-underscore",
    "set-and-omap-tags", "local-tag", "tab-indentation", "bad-yaml-directive", "repeated-yaml-directive",
    "many-duplicate-names", "spec-is-a-list", "spec-is-a-string", "spec-is-true", "metadata-is-a-list",
    "name-is-a-mapping", "control-chars-in-keys", "noncharacter-in-key", "github-command-injection",
    "xml-injection", "label-value-trailing-newline", "every-field-null", "requirements-of-nulls",
    "non-finite-numbers", "deep-flow-sequence-50000",
})
#: Nasty files that are certainly valid: validate must report no error.
MUST_PASS = frozenset({
    "empty", "whitespace-only", "comments-only", "separators-only", "bom", "crlf", "cr-only", "many-documents-2000",
    "yaml-directive",
    # YAML that is not a Kubernetes object is skipped and counted, as kubeconform and check-jsonschema do:
    "top-level-list", "top-level-scalar", "top-level-int", "alias-as-key", "binary-tag", "long-string-aliased",
    "one-long-line", "merge-key",
})

_LOADER = (
    "policy/loader.py _Converter.convert: PyYAML's scalar constructors raise ValueError/KeyError/IndexError "
    "(`!!int abc`, `!!bool maybe`, `!!int \"\"`, plain `0x_`/`0b_`, an int of more than 4300 digits)"
)
#: Nasty files that hit a known bug, in-process: strict xfail (fix the bug, then delete the line).
IN_PROCESS_XFAIL: dict[str, str] = {}


def _params(names: list[str], xfails: dict[str, str]) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=xfails[name])) if name in xfails else name
        for name in names
    ]


@pytest.mark.parametrize("name", _params(sorted(NASTY), IN_PROCESS_XFAIL))
def test_nasty_file_in_process(name: str) -> None:
    report = check_cases([Case(nasty_bytes(name), name)])
    if name in MUST_FAIL:
        assert report.errors >= 1, report.findings
    if name in MUST_PASS:
        assert report.errors == 0, report.findings


def test_the_corpus_is_classified() -> None:
    assert set(NASTY) | set(SUBPROCESS_ONLY) >= MUST_FAIL
    assert set(NASTY) >= MUST_PASS and not MUST_FAIL & MUST_PASS


# Minimal inputs of the known bugs, as regression tests.
MINIMAL = {
    "int-tag": (b"a: !!int abc\n", _LOADER),
    "bool-tag": (b"a: !!bool maybe\n", _LOADER),
    "hex-underscore": (b"a: 0x_\n", _LOADER),
    "int-4301-digits": (b"a: " + b"9" * 4301 + b"\n", _LOADER),
    "junit-control-char": (
        b"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: a}\n"
        b'spec: {providerRef: {name: a}, "\\x01": 1}\n', JUNIT_BUG),
    "label-trailing-newline": (
        b"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: a}\n"
        b'spec: {providerRef: {name: a}, labels: {team: "a\\n"}}\n', LABEL_NEWLINE_BUG),
}


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_fixed_bug_minimal_input(name: str) -> None:
    """Each minimal input of a bug the fuzzer found (the reason names it) now gets a finding, not a crash."""
    report = check_cases([Case(MINIMAL[name][0], name)])
    assert report.errors >= 1, report.findings


def _restricted_labels(count: int) -> bytes:
    labels = "".join(f"    kubernetes.io/k{i}: x\n" for i in range(count))
    return (f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: a}}\n"
            f"spec:\n  providerRef: {{name: a}}\n  labels:\n{labels}").encode()


def test_findings_in_a_large_mapping_cost_linear_time() -> None:
    """Placing one finding per key of a large mapping reads the mapping once (an index), not once per key.

    Counted, not timed: the mapping's entries are wrapped in a list that counts how often it is walked.
    """
    from yaml.nodes import MappingNode

    from karpenter_policy.checks.source.loader import parse

    count = 4000
    (doc,) = parse("labels.yaml", _restricted_labels(count).decode())
    labels = next(v for k, v in next(v for k, v in doc.node.value if k.value == "spec").value if k.value == "labels")
    assert isinstance(labels, MappingNode)

    class CountingList(list):  # type: ignore[type-arg]
        walks = 0

        def __iter__(self):  # type: ignore[no-untyped-def]
            CountingList.walks += 1
            return super().__iter__()

    labels.value = CountingList(labels.value)
    positions = [doc.position(("spec", "labels", f"kubernetes.io/k{i}"), at_key=True) for i in range(count)]
    assert positions[0] == (7, 5) and positions[-1] == (7 + count - 1, 5)
    assert CountingList.walks <= 2, f"the mapping was walked {CountingList.walks} times for {count} lookups"


# --------------------------------------------------------------------------------------------------------
# The nastiest files through the real CLI, in a subprocess

CLI_CASES = (
    "billion-laughs", "billion-laughs-in-spec", "deep-flow-sequence-3000", "deep-flow-sequence-50000",
    "deep-flow-mapping-2000", "deep-block-sequence-800", "recursive-alias-sequence", "recursive-alias-in-spec",
    "undefined-alias", "duplicate-keys-nested", "non-scalar-key-mapping", "nul-byte", "invalid-utf8",
    "utf8-surrogate", "truncated-utf8", "utf16-with-bom", "five-megabytes",
    "huge-int-5000-digits", "explicit-bool-maybe", "implicit-hex-underscore", "tab-indentation",
    "bad-yaml-directive", "spec-is-a-list", "kind-list-odd-items", "many-duplicate-names",
    "control-chars-in-keys", "github-command-injection", "label-value-trailing-newline",
)
CLI_XFAIL: dict[str, str] = {}
CLI_TIMEOUT = 60
FIFO_TIMEOUT = 5


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str


def _cli(target: Path, timeout: float) -> CliRun:
    command = [sys.executable, "-m", "karpenter_policy.cli", "validate", str(target), "--output", "json"]
    try:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return CliRun(-1, "", f"timed out after {timeout} s")
    return CliRun(result.returncode, result.stdout.decode("utf-8", "replace"), result.stderr.decode("utf-8", "replace"))


def _make_fifo(directory: Path) -> Path:
    path = directory / "fifo.yaml"
    os.mkfifo(path)
    return path


def _make_unreadable_directory(directory: Path) -> Path:
    target = directory / "locked"
    target.mkdir()
    (target / "policy.yaml").write_bytes(nasty_bytes("top-level-scalar"))
    target.chmod(0)
    return target


SPECIAL_CLI_CASES: dict[str, tuple[Callable[[Path], Path], float]] = {
    "fifo": (_make_fifo, FIFO_TIMEOUT),
    "unreadable-directory": (_make_unreadable_directory, CLI_TIMEOUT),
}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, CliRun]]:
    """Every CLI case, run concurrently (each is a fresh interpreter: ~0.5 s of start-up)."""
    base = tmp_path_factory.mktemp("cli")
    jobs: dict[str, tuple[Path, float]] = {}
    for name in CLI_CASES:
        path = base / f"{name}.yaml"
        path.write_bytes(nasty_bytes(name))
        jobs[name] = (path, CLI_TIMEOUT)
    for name, (make, timeout) in SPECIAL_CLI_CASES.items():
        if name == "unreadable-directory" and os.geteuid() == 0:
            continue
        if name == "fifo" and not hasattr(os, "mkfifo"):
            continue
        folder = base / name
        folder.mkdir()
        jobs[name] = (make(folder), timeout)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_cli, path, timeout) for name, (path, timeout) in jobs.items()}
        runs = {name: future.result() for name, future in futures.items()}
    yield runs
    for path in base.rglob("*"):
        if path.is_dir():
            path.chmod(stat.S_IRWXU)
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("name", _params([*CLI_CASES, *SPECIAL_CLI_CASES], CLI_XFAIL))
@pytest.mark.slow
def test_nastiest_files_through_the_cli(name: str, cli_runs: dict[str, CliRun]) -> None:
    if name == "unreadable-directory" and os.geteuid() == 0:
        pytest.skip("running as root: permissions do not stop root from reading a directory")
    run = cli_runs[name]
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode in (1, 2), (run.returncode, run.stderr[-2000:])
    report = json.loads(run.stdout)
    assert len(report["findings"]) >= 1 and report["summary"]["errors"] >= 1, report
    for finding in report["findings"]:
        assert finding["rule"] in KNOWN_RULES and finding["severity"] in ("error", "warning")
        assert finding["message"].strip() and finding["line"] >= 0
