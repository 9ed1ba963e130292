"""Findings (a rule's verdict at file:line:column) and the report that collects them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from karpenter_policy.api.violations import ERROR, WARNING


@dataclass(frozen=True, slots=True, order=True)
class Location:
    file: str
    line: int
    column: int = 1


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem, placed in a file. Sorted by file, line, column, rule."""

    rule: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    object_ref: str | None = None
    related: tuple[Location, ...] = ()

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """The order findings are shown in: file, line, column, rule, message."""
        return (self.file, self.line, self.column, self.rule, self.message)

    def to_json(self) -> dict[str, object]:
        """The finding as the JSON report writes it."""
        data: dict[str, object] = {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
        }
        if self.object_ref:
            data["object"] = self.object_ref
        if self.related:
            data["related"] = [{"file": r.file, "line": r.line, "column": r.column} for r in self.related]
        return data


class Suppressor(Protocol):
    """What silences findings (`suppression.Suppression`: `--disable`, directives in the files)."""

    def suppresses(self, finding: Finding) -> bool:
        """Whether the finding is silenced (by `--disable` or a directive in its file)."""


@dataclass(slots=True)
class Report:
    """What a run checked and found.

    `findings` holds every finding made; with a `suppression` (`--disable`, directives in the files), the ones it
    silences are left out of everything that counts or shows them (`errors`, `warnings`, `sorted_findings`), and
    counted in `suppressed`.
    """

    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    could_not_run: bool = False
    #: The files read, in order (reports that list every file: JUnit).
    file_names: list[str] = field(default_factory=list)
    #: File → YAML documents in it that are not Kubernetes objects (values files, workflows), skipped.
    not_kubernetes: Counter[str] = field(default_factory=Counter)
    #: The files read that hold no Kubernetes object at all.
    without_objects: set[str] = field(default_factory=set)
    suppression: Suppressor | None = None

    @property
    def objects(self) -> int:
        """How many objects were checked, every kind counted."""
        return sum(self.kinds.values())

    def reported(self) -> list[Finding]:
        """The findings the suppression lets through (all of them without one)."""
        if self.suppression is None:
            return self.findings
        return [f for f in self.findings if not self.suppression.suppresses(f)]

    @property
    def suppressed(self) -> int:
        """How many findings the suppression silenced."""
        return len(self.findings) - len(self.reported())

    @property
    def errors(self) -> int:
        """How many errors are reported (silenced ones left out)."""
        return sum(1 for f in self.reported() if f.severity == ERROR)

    @property
    def warnings(self) -> int:
        """How many warnings are reported (silenced ones left out)."""
        return sum(1 for f in self.reported() if f.severity == WARNING)

    def sorted_findings(self) -> list[Finding]:
        """The reported findings in their order (:meth:`Finding.sort_key`)."""
        return sorted(self.reported(), key=Finding.sort_key)

    def exit_code(self, fail_on_warn: bool = False) -> int:
        """The command's exit code: 2 when the checks could not run, 1 on an error (or a warning with `fail_on_warn`),
        else 0."""
        if self.could_not_run:
            return 2
        if self.errors or (fail_on_warn and self.warnings):
            return 1
        return 0


@dataclass(frozen=True, slots=True)
class CommandOutput:
    """What a command prints — its report on stdout, logs on stderr — and its exit code; the CLI only echoes it."""

    exit_code: int
    stdout: str
    stderr: str
