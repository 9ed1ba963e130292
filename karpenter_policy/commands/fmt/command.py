"""`karpenter-policy fmt [PATHS] [--write] [--check]`: format policy files (`fmt.format_text`).

Without `--write` the changes are printed as a unified diff; with it the files are rewritten in place, all of them
or none (`filestaging.rewrite_all`: staged next to each file, renamed only when every one is ready; a file edited
meanwhile is not overwritten; a symbolic link is never written through; the temporary files a killed
`fmt --write` left next to the files are removed). `--check` exits 1 when a file is (or was) not formatted, like
`black --check` and `terraform fmt -check`. Templates (`*.yaml.j2`) are refused: their YAML exists only once
rendered. Exit codes: 0 formatted; 1 a file was not formatted (with `--check`) or cannot be read as YAML; 2 the
tool could not run (a missing path, a template named, a file it cannot rewrite faithfully or cannot write).
"""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.source.loader import (
    STDIN,
    TEMPLATE_SUFFIX,
    LoadError,
    discover,
    exclusion_notes,
    read_text,
)
from karpenter_policy.commands.filestaging import LEFTOVER_NOTE, remove_leftovers, rewrite_all, unified_diff
from karpenter_policy.commands.fmt.fmt import CannotFormat, Formatted, format_text


def fmt_command(paths: Sequence[str], *, write: bool, check: bool, exclude: Sequence[str] = ()) -> CommandOutput:
    files, missing = discover(paths, exclude)
    log = [f"{path}: error: no such file or directory" for path in missing]
    log += exclusion_notes(paths, exclude, "format")[0]  # a named file left out is said, not dropped silently
    could_not_run = bool(missing)
    unreadable = False
    named = {p.rstrip("/") for p in paths}
    results: list[Formatted] = []
    for file in files:
        if file == STDIN:
            log.append("-: error: fmt rewrites files; standard input is not supported")
            could_not_run = True
        elif file.endswith(TEMPLATE_SUFFIX):
            if file in named:
                log.append(f"{file}: error: fmt does not format templates (*.yaml.j2): their YAML only exists once "
                           "rendered; format the template by hand")
                could_not_run = True
            else:
                log.append(f"{file}: skipped: a template (*.yaml.j2)")
        else:
            try:
                results.append(format_text(file, read_text(file)))
            except LoadError as error:
                where = f"{file}:{error.line}:{error.column}" if error.line else file
                log.append(f"{where}: error: {error.message} [{error.rule}]")
                could_not_run |= error.line == 0
                unreadable = True
            except CannotFormat as error:
                log.append(f"{file}: error: not formatted: {error}")
                could_not_run = True
    for result in results:
        log += result.notes
    changed = [r for r in results if r.changed]
    if write:
        log += [f"{path}: removed: {LEFTOVER_NOTE}" for path in remove_leftovers(r.file for r in results)]
    stdout = ""
    if write and changed and not could_not_run:
        outcome = rewrite_all(changed, "fmt")
        if outcome.failed:
            log += [f"{file}: error: not written: {reason}" for file, reason in outcome.failed]
            log.append("nothing written" if not outcome.written else f"written: {', '.join(outcome.written)}")
            return CommandOutput(2, "", "\n".join(log) + "\n")
        log += [f"{r.file}: formatted: {change}" for r in changed for change in r.changes]
        log.append(f"formatted {_files(len(changed))}, {_files(len(results) - len(changed))} left unchanged")
    else:
        stdout = "".join(unified_diff(r.file, r.original, r.updated) for r in changed)
        if write and could_not_run:
            log.append("nothing written")
        verb = "would be formatted" + ("" if write else " (run with --write)")
        log.append(f"{_files(len(changed))} {verb}, {_files(len(results) - len(changed))} already formatted")
    code = 2 if could_not_run else 1 if unreadable or (check and changed) else 0
    return CommandOutput(code, stdout, "\n".join(log) + "\n")


def _files(count: int) -> str:
    return f"{count} file{'s' if count != 1 else ''}"
