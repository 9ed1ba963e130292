"""Jinja2 policy templates (`*.yaml.j2`), rendered with the values of `--values FILE`.

Rendering is strict and contained: a sandbox (`policy.sandbox`: no attribute access to Python internals; time,
steps, the sizes of the strings, lists and integers a template builds, and memory bounded), `StrictUndefined`
(an undefined variable is an error, never an empty string), no loader (no `include`/`import` of other files), no
environment variables, and the output bounded in size. Any failure is a `TemplateError` — a `LoadError` with
rule `template-error` — at the template's file and line; never a traceback.

Templates are always discovered next to plain YAML; without `--values` they render with an empty mapping, so a
template that needs values reports `template-error` for its first undefined variable (and says to pass
`--values`) instead of being skipped unseen.

Positions: findings on a rendered template point at template lines. The template is rendered a second time with
an invisible marker at the start of every template line that begins in literal text; the markers in that output
map each rendered line back to the template line it came from, through loops, conditionals and macros (lines a
multi-line `{{ expression }}` expands to map to the line of the expression). When markers cannot be used (the
marked render differs from the real one, e.g. under `{%- ... %}` whitespace control across lines or values
that contain the marker characters), rendered line N maps to template line N, which is exact for templates that
keep their line structure (expressions inline, `{% ... %}` tags on lines of their own, no dropped blocks).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError

from karpenter_policy.api.violations import TEMPLATE_ERROR
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.checks.source.loader import (
    MAX_FILE_BYTES,
    Document,
    LoadError,
    UnreadableFile,
    parse,
    read_text,
)
from karpenter_policy.checks.source.sandbox import MAX_SECONDS, BoundedSandbox, TemplateTooCostly, bound_template

_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_MARKER = re.compile(f"{_MARK_OPEN}([0-9]+){_MARK_CLOSE}")
#: The tags of the top-level keys of a values file: names, and merge keys (`<<: *defaults`).
_NAME_TAGS = frozenset({"tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"})


class TemplateError(LoadError):
    """A template that cannot be rendered (syntax error, undefined variable, sandbox violation)."""

    rule = TEMPLATE_ERROR


class ValuesError(Exception):
    """The `--values` file cannot be used: unreadable, not YAML, or not a mapping."""


def _environment() -> BoundedSandbox:
    return BoundedSandbox(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        auto_reload=False,
        cache_size=0,
    )


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered template and, for each rendered line (0-based), the 1-based template line it came from."""

    text: str
    line_map: tuple[int, ...]

    def template_line(self, rendered_line: int) -> int:
        """The template line of 1-based `rendered_line` (0 stays 0: position unknown)."""
        if rendered_line <= 0 or not self.line_map:
            return rendered_line
        return self.line_map[min(rendered_line, len(self.line_map)) - 1]


def load_values(file: str) -> dict[str, Any]:
    """The values mapping of a `--values` file (an empty file is an empty mapping). Raises ValuesError.

    The file is read as policy files are (`loader`): at most 4 MiB of UTF-8, YAML 1.1 as kubectl reads it
    (keys are strings, timestamps stay text), aliases expanding to at most 200,000 nodes, nesting at most 500
    levels deep."""
    try:
        documents = parse(file, read_text(file), expand_lists=False)
    except UnreadableFile as error:
        reason = error.message.removeprefix("cannot read file: ")
        raise ValuesError(f"{file}: cannot read values file: {reason}") from None
    except LoadError as error:
        where = f":{error.line}:{error.column}" if error.line > 0 else ""
        message = error.message
        if message.startswith("invalid YAML: "):
            message = f"the values file is not valid YAML: {message.removeprefix('invalid YAML: ')}"
        else:
            message = f"the values file cannot be used: {message}"
        raise ValuesError(f"{file}{where}: {message}") from None
    if not documents:
        return {}
    if len(documents) > 1:
        raise ValuesError(f"{file}: the values file must hold one YAML document, not {len(documents)}")
    (document,) = documents
    node = document.node
    if not isinstance(document.data, dict) or any(key.tag not in _NAME_TAGS for key, _ in node.value):
        raise ValuesError(f"{file}: the values file must be a YAML mapping of names to values")
    return document.data


def _template_line(error: BaseException, file: str) -> int:
    """The template line an exception raised while rendering points at (Jinja2 rewrites the traceback so that
    frames of the template carry its file name and line)."""
    line = 0
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _describe(error: Exception) -> str:
    if isinstance(error, jinja2.UndefinedError):
        return f"undefined variable: {error.message}; define it in the values file (--values FILE)"
    if isinstance(error, TemplateTooCostly):
        return f"too costly for a policy template: {error}"
    if isinstance(error, SecurityError):
        return f"not allowed in a policy template: {error}"
    if isinstance(error, jinja2.TemplateNotFound) or "no loader" in str(error):
        return "policy templates cannot include or import other templates"
    if isinstance(error, jinja2.TemplateError):
        return f"template error: {error.message or error}"
    return f"template error: {type(error).__name__}: {error}"


def _error(file: str, message: str, line: int = 0) -> TemplateError:
    """A template-error at `line` (column 1; 0, 0 when the line is unknown)."""
    return TemplateError(file, message, line, 1 if line > 0 else 0)


def _render(
    env: BoundedSandbox, file: str, source: str, values: Mapping[str, Any], max_chars: int, deadline: float
) -> str:
    """Render `source` within the sandbox's budget and by `deadline` (time.monotonic()); raises TemplateError at
    the template line of the failure."""
    env.begin(deadline)
    try:
        tree = bound_template(env.parse(source, name=file, filename=file))
        code = env.compile(tree, name=file, filename=file)
        template = env.template_class.from_code(env, code, env.make_globals(None))
    except jinja2.TemplateSyntaxError as error:
        raise _error(file, f"template syntax error: {error.message}", error.lineno or 0) from None
    except Exception as error:  # anything else the compiler refuses
        raise _error(file, _describe(error), 0) from None
    chunks: list[str] = []
    size = 0
    rendering = template.generate(dict(values))  # a dict, so that a value named `self` is fine
    try:
        for chunk in rendering:
            size += len(chunk)
            if size > max_chars:
                message = f"the template renders to more than {max_chars} characters; is a loop running away?"
                raise _error(file, message, _output_line(rendering, template, file))
            chunks.append(chunk)
    except TemplateError:
        raise
    except RecursionError as error:
        raise _error(file, "template error: the template recurses too deeply", _template_line(error, file)) from None
    except Exception as error:  # UndefinedError, SecurityError, TypeError, ZeroDivisionError, ...
        raise _error(file, _describe(error), _template_line(error, file)) from None
    return "".join(chunks)


def _output_line(rendering: Any, template: jinja2.Template, file: str) -> int:
    """The template line of the output a suspended rendering produced last: the innermost generator of the
    template's code (blocks and macros yield from nested generators)."""
    line = 0
    generator = rendering
    while generator is not None:
        frame = getattr(generator, "gi_frame", None)
        if frame is not None and frame.f_code.co_filename == file:
            line = template.get_corresponding_lineno(frame.f_lineno)
        generator = getattr(generator, "gi_yieldfrom", None)
    return line


_RAW_START = re.compile(r"\{%-?\s*raw\s*-?%\}")
_RAW_END = re.compile(r"\{%-?\s*endraw\s*-?%\}")
_OPENERS = {"{{": "}}", "{%": "%}", "{#": "#}"}


def _instrument(source: str) -> str:
    """`source` with a line marker at the start of each line that begins in literal text (not inside a tag,
    expression or comment), skipping lines that open with whitespace control (`{%-` …), which would strip
    across the marker."""
    out: list[str] = []
    i, n, line = 0, len(source), 1
    at_line_start = True
    closer: str | None = None
    while i < n:
        if at_line_start and closer is None:
            rest = source[i : i + 64].lstrip(" \t")
            if rest[:3] not in ("{%-", "{{-", "{#-"):
                out.append(f"{_MARK_OPEN}{line}{_MARK_CLOSE}")
            at_line_start = False
        char = source[i]
        if closer is None:
            two = source[i : i + 2]
            if two in _OPENERS:
                raw = _RAW_START.match(source, i)
                if raw is not None:
                    end = _RAW_END.search(source, raw.end())
                    stop = end.end() if end is not None else n
                    segment = source[i:stop]
                    # raw text is literal: mark its lines too
                    for offset, piece in enumerate(segment.split("\n")):
                        if offset:
                            out.append("\n")
                            line += 1
                            out.append(f"{_MARK_OPEN}{line}{_MARK_CLOSE}")
                        out.append(piece)
                    i = stop
                    continue
                closer = _OPENERS[two]
                out.append(two)
                i += 2
                continue
        elif source.startswith(closer, i):
            out.append(closer)
            i += len(closer)
            closer = None
            continue
        out.append(char)
        if char == "\n":
            line += 1
            at_line_start = True
        i += 1
    return "".join(out)


def _line_map(marked: str) -> tuple[int, ...]:
    """For each line of the marked output, the template line in effect at its first visible character."""
    lines: list[int] = []
    current = 1
    for text in marked.split("\n"):
        first: int | None = None
        pos = 0
        for match in _MARKER.finditer(text):
            visible = text[pos : match.start()]
            if first is None and visible.strip():
                first = current
            current = int(match.group(1))
            pos = match.end()
        if first is None:
            first = current
        lines.append(first)
    return tuple(lines)


def render_template(file: str, source: str, values: Mapping[str, Any], max_chars: int = MAX_FILE_BYTES) -> Rendered:
    """Render a policy template; raises TemplateError."""
    env = _environment()
    deadline = time.monotonic() + MAX_SECONDS  # both passes together
    text = _render(env, file, source, values, max_chars, deadline)
    identity = tuple(range(1, text.count("\n") + 2))
    try:
        marked = _render(env, file, _instrument(source), values, max_chars * 2, deadline)
    except TemplateError:
        return Rendered(text, identity)
    if _MARKER.sub("", marked) != text:
        return Rendered(text, identity)
    return Rendered(text, _line_map(marked))


@dataclass(slots=True)
class TemplateDocument(Document):
    """A document of a rendered template: positions are template lines."""

    rendered: Rendered | None = None

    def position(self, path: FieldPath, at_key: bool = False) -> tuple[int, int]:
        line, column = Document.position(self, path, at_key)
        return (self.rendered.template_line(line) if self.rendered is not None else line), column


def load_template(
    file: str, text: str, values: Mapping[str, Any] | None, max_bytes: int = MAX_FILE_BYTES
) -> list[Document]:
    """Render the template `text` of `file` and parse the result; YAML errors point at template lines."""
    rendered = render_template(file, text, values or {}, max_bytes)
    try:
        documents = parse(file, rendered.text)
    except UnreadableFile:
        raise
    except LoadError as error:
        hint = " (in the rendered template)"
        raise LoadError(file, error.message + hint, rendered.template_line(error.line), error.column) from None
    return [TemplateDocument(d.file, d.index, d.data, d.node, rendered) for d in documents]
