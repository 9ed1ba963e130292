"""The controller's log, in Karpenter's format: one line per decision, readable next to Karpenter's own.

Karpenter (zap's console encoder) writes ``<RFC 3339 time>\\t<LEVEL>\\t<logger>\\t<message>\\t{"commit": "…", …}``;
with ``--log-format json`` each line is one JSON object (``level``, ``time``, ``logger``, ``message`` and the
fields), for log pipelines. The controller's loggers are named ``karpenter_policy.reconcile.controller.<name>``
and shown as ``controller.<name>``, as Karpenter's are; other loggers of the package keep their dotted name
without the ``karpenter_policy.`` prefix.

Structured fields travel in ``extra={"fields": {...}}``; the time of a line is the controller's injected wall
clock when it passes one (``extra={"when": datetime}``: a simulation logs in simulated time), else the record's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, TextIO

from karpenter_policy import __version__
from karpenter_policy.model.pods import format_bytes
from karpenter_policy.model.resources import EPHEMERAL_STORAGE, MEMORY, format_quantity

TEXT = "text"
JSON = "json"
FORMATS = (TEXT, JSON)

_PREFIXES = ("karpenter_policy.reconcile.", "karpenter_policy.")
_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL"}
#: How many instance types a line names before "and N other(s)" (Karpenter's rule).
SHOWN_OPTIONS = 5


def logger(name: str) -> logging.Logger:
    """The logger shown as ``controller.<name>``."""
    return logging.getLogger(f"karpenter_policy.reconcile.controller.{name}")


def fields(when: dt.datetime | None = None, **values: Any) -> dict[str, Any]:
    """The ``extra`` of a log call: structured fields, and the time of the line when the caller has a clock."""
    extra: dict[str, Any] = {"fields": values}
    if when is not None:
        extra["when"] = when
    return extra


def options_text(names: Sequence[str], shown: int = SHOWN_OPTIONS) -> str:
    """``a, b, c, d, e and 12 other(s)``: the first few names, then how many more (Karpenter's instance-type
    lists)."""
    head = ", ".join(names[:shown])
    rest = len(names) - shown
    return f"{head} and {rest} other(s)" if rest > 0 else head


def resources_text(resources: Mapping[str, Decimal]) -> str:
    """`{"cpu":"4","memory":"7884Mi","pods":"1"}`: requests as Karpenter logs them (binary units for bytes)."""
    return json.dumps(
        {
            name: format_bytes(value) if name in (MEMORY, EPHEMERAL_STORAGE) else format_quantity(value)
            for name, value in sorted(resources.items())
        },
        separators=(",", ":"),
    )


def _timestamp(record: logging.LogRecord) -> str:
    when = getattr(record, "when", None)
    moment = when if isinstance(when, dt.datetime) else dt.datetime.fromtimestamp(record.created, dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _logger_name(record: logging.LogRecord) -> str:
    for prefix in _PREFIXES:
        if record.name.startswith(prefix):
            return record.name[len(prefix) :]
    return record.name


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    values = getattr(record, "fields", None)
    out: dict[str, Any] = {"commit": __version__}
    if isinstance(values, Mapping):
        out.update(values)
    if record.exc_info:
        out["error"] = logging.Formatter().formatException(record.exc_info)
    return out


class KarpenterFormatter(logging.Formatter):
    """Karpenter's console format (``text``) or one JSON object per line (``json``)."""

    def __init__(self, style: str = TEXT) -> None:
        if style not in FORMATS:
            raise ValueError(f"unknown log format {style!r}: one of {', '.join(FORMATS)}")
        super().__init__()
        self.json = style == JSON

    def format(self, record: logging.LogRecord) -> str:
        level = _LEVELS.get(record.levelname, record.levelname)
        message = record.getMessage()
        values = _fields(record)
        if self.json:
            line = {"level": level, "time": _timestamp(record), "logger": _logger_name(record), "message": message}
            line.update(values)
            return json.dumps(line, default=str, ensure_ascii=False)
        trailer = json.dumps(values, default=str, ensure_ascii=False)
        return f"{_timestamp(record)}\t{level}\t{_logger_name(record)}\t{message}\t{trailer}"


def configure(stream: TextIO, style: str = TEXT, level: int = logging.INFO) -> logging.Handler:
    """Send the package's log lines to `stream` in `style` (replacing a handler this function added before)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(KarpenterFormatter(style))
    handler.set_name("karpenter-policy-reconcile")
    package = logging.getLogger("karpenter_policy")
    for old in [h for h in package.handlers if h.get_name() == handler.get_name()]:
        package.removeHandler(old)
    package.addHandler(handler)
    package.setLevel(level)
    return handler


__all__ = [
    "FORMATS",
    "JSON",
    "TEXT",
    "KarpenterFormatter",
    "configure",
    "fields",
    "logger",
    "options_text",
    "resources_text",
]
