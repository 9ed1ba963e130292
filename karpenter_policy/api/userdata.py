"""A node template's own userData, read as its AMI family's bootstrap reads it (Karpenter v0.31,
pkg/providers/amifamily/bootstrap): Bottlerocket's is TOML that Karpenter merges its settings into; AL2's and
Ubuntu's is a shell script (wrapped in a MIME part) or, when it starts with `MIME-Version:` or `Content-Type:`, a
multipart MIME document whose parts run before Karpenter's. Windows' (PowerShell) and Custom's (passed as is) are
not read.

Karpenter's webhook does not look at userData: a template it cannot read fails every launch ("invalid UserData",
"parsing custom user data input"). `invalid-user-data` reports it at the line where reading stops. The controller's
bootstrap (`cloud/aws/userdata.py`) reads the same way, with these functions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from karpenter_policy.api.violations import INVALID_USER_DATA, Path, Violation

#: The AMI families whose userData is TOML, and those whose userData may be MIME multipart.
TOML_FAMILIES = ("Bottlerocket",)
MIME_FAMILIES = ("AL2", "Ubuntu")
DEFAULT_FAMILY = "AL2"  # Karpenter's default amiFamily
SHELL_PART_TYPE = 'text/x-shellscript; charset="us-ascii"'

_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
_HEADER = re.compile(r"^[!-9;-~]+:")  # a field name (printable ASCII but ':'), then ':'
_BOUNDARY = re.compile(r'boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))', re.IGNORECASE)


class UserDataError(ValueError):
    """userData its family cannot read: what is wrong, and where (1-based line and column of the text)."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def is_mime(text: str) -> bool:
    """Whether AL2/Ubuntu userData is a MIME document (Karpenter's test) rather than a script to wrap."""
    start = text.strip()
    return start.startswith("MIME-Version:") or start.startswith("Content-Type:")


def toml_settings(text: str) -> dict[str, Any]:
    """Bottlerocket userData as TOML (Karpenter merges its `settings.kubernetes` into it)."""
    import tomllib  # ~5 ms: only for a template that has Bottlerocket userData

    try:
        return tomllib.loads(text)
    except RecursionError:  # hostile input: arrays nested thousands deep
        raise UserDataError("not valid TOML: it nests too deeply") from None
    except tomllib.TOMLDecodeError as error:
        found = _TOML_AT.search(str(error))
        line, column = (int(found.group(1)), int(found.group(2))) if found else (1, 1)
        reason = _TOML_AT.sub("", str(error)).strip()
        raise UserDataError(f"not valid TOML: {reason}", line, column) from None


def mime_parts(text: str) -> list[tuple[str, str]]:
    """(content type, body) of each part of a multipart MIME userData, as Go's mail and multipart readers take it:
    header lines, a multipart Content-Type with a boundary, parts that open with `--BOUNDARY` and a closing
    `--BOUNDARY--`."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    headers: dict[str, str] = {}
    index = first
    while index < len(lines) and lines[index].strip():
        line = lines[index].rstrip("\r")
        if line[:1] in (" ", "\t") and headers:  # a folded header line
            last = next(reversed(headers))
            headers[last] += " " + line.strip()
        elif _HEADER.match(line):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            raise UserDataError(f"MIME header line {line.strip()[:40]!r} is not `Name: value`", index + 1)
        index += 1
    content_type = headers.get("content-type")
    at_type = next((i + 1 for i in range(first, index) if lines[i].lower().startswith("content-type:")), first + 1)
    if content_type is None:
        raise UserDataError("a MIME document without a Content-Type header", first + 1)
    if not content_type.lower().startswith("multipart/"):
        raise UserDataError(f"Content-Type {content_type.split(';')[0]} is not multipart: not multipart MIME", at_type)
    found = _BOUNDARY.search(content_type)
    if found is None:
        raise UserDataError("the multipart Content-Type has no boundary", at_type)
    boundary = found.group(1) or found.group(2)
    opening, closing = f"--{boundary}", f"--{boundary}--"
    marks = [i for i in range(index, len(lines)) if lines[i].rstrip() in (opening, closing)]
    if not marks or lines[marks[0]].rstrip() != opening:
        raise UserDataError(f"no part: no line {opening} after the headers", min(index + 2, len(lines)))
    if lines[marks[-1]].rstrip() != closing:
        end_at = max(i for i, text_line in enumerate(lines) if text_line.strip()) + 1
        raise UserDataError(f"the closing {closing} is missing after the last part", end_at)
    parts: list[tuple[str, str]] = []
    for start, end in zip(marks, marks[1:], strict=False):
        if lines[start].rstrip() == closing:
            break
        body_at = start + 1
        part_type = SHELL_PART_TYPE
        while body_at < end and lines[body_at].strip():
            header = lines[body_at].rstrip("\r")
            if not _HEADER.match(header) and header[:1] not in (" ", "\t"):
                raise UserDataError(f"part header line {header.strip()[:40]!r} is not `Name: value`", body_at + 1)
            if header.lower().startswith("content-type:"):
                part_type = header.partition(":")[2].strip()
            body_at += 1
        parts.append((part_type, "\n".join(lines[body_at + 1 : end])))
    return parts


def user_data_violations(spec: Mapping[str, Any], base: Path) -> Iterator[Violation]:
    """`invalid-user-data` for the userData of a node template spec (or inline provider at `base`) that its AMI
    family cannot read."""
    text = spec.get("userData")
    if not isinstance(text, str) or not text.strip():
        return
    family = str(spec.get("amiFamily") or DEFAULT_FAMILY)
    try:
        if family in TOML_FAMILIES:
            toml_settings(text)
        elif family in MIME_FAMILIES and is_mime(text):
            mime_parts(text)
        else:
            return
    except UserDataError as error:
        what = "TOML" if family in TOML_FAMILIES else "MIME multipart"
        message = f"userData ({family}: {what}) line {error.line}: {error.message}; Karpenter fails every launch"
        yield Violation(INVALID_USER_DATA, (*base, "userData"), message, in_text=(error.line, error.column))


__all__ = [
    "MIME_FAMILIES",
    "SHELL_PART_TYPE",
    "TOML_FAMILIES",
    "UserDataError",
    "is_mime",
    "mime_parts",
    "toml_settings",
    "user_data_violations",
]
