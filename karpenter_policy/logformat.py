"""The log formats of the long-running commands (`reconcile`, `webhook`): one definition, used by both.

``text`` is Karpenter's (zap's console encoder): ``<RFC 3339 time>\\t<LEVEL>\\t<logger>\\t<message>\\t{"commit": "…",
…}``; ``json`` is one JSON object per line (``level``, ``time``, ``logger``, ``message``, ``commit`` and the
structured fields), for log pipelines. Loggers are shown without the package prefix: the controller's
``karpenter_policy.reconcile.controller.<name>`` as ``controller.<name>`` (as Karpenter names its loggers), the
webhook's ``karpenter_policy.webhook.<module>`` as ``webhook.<module>``.

The level (``--log-level``) is one of Karpenter's (zap's) names: ``debug``, ``info`` (the default), ``warn``,
``error``; lines below it are not written.

Structured fields travel in ``extra={"fields": {...}}``; the time of a line is the caller's injected wall clock
when it passes one (``extra={"when": datetime}``: a simulation logs in simulated time), else the record's.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from typing import Any, TextIO

from karpenter_policy import installed_version

TEXT = "text"
JSON = "json"
FORMATS = (TEXT, JSON)
#: The ``--log-level`` names (Karpenter's, zap's) and the logging levels they stand for.
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}
DEFAULT_LEVEL = "info"

_PREFIXES = ("karpenter_policy.reconcile.", "karpenter_policy.")
_LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL"}
#: The name of the handler :func:`configure` adds (a second call replaces it).
HANDLER_NAME = "karpenter-policy"


def _timestamp(record: logging.LogRecord) -> str:
    when = getattr(record, "when", None)
    moment = when if isinstance(when, dt.datetime) else dt.datetime.fromtimestamp(record.created, dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def logger_name(record: logging.LogRecord) -> str:
    """The name a line shows: the logger's without the package prefix."""
    for prefix in _PREFIXES:
        if record.name.startswith(prefix):
            return record.name[len(prefix) :]
    return record.name


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    values = getattr(record, "fields", None)
    out: dict[str, Any] = {"commit": installed_version()}
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
            line = {"level": level, "time": _timestamp(record), "logger": logger_name(record), "message": message}
            line.update(values)
            return json.dumps(line, default=str, ensure_ascii=False)
        trailer = json.dumps(values, default=str, ensure_ascii=False)
        return f"{_timestamp(record)}\t{level}\t{logger_name(record)}\t{message}\t{trailer}"


def level_name(value: object) -> str:
    """A ``--log-level`` value (any case; empty or None: the default) as one of :data:`LEVELS`' names; ValueError
    names the choices."""
    name = str(value or DEFAULT_LEVEL).lower()
    if name not in LEVELS:
        raise ValueError(f"{value!r} is not a log level: one of {', '.join(LEVELS)}")
    return name


def level_of(value: object) -> int:
    """The logging level of a ``--log-level`` value (see :func:`level_name`)."""
    return LEVELS[level_name(value)]


def configure(stream: TextIO, style: str = TEXT, level: int = logging.INFO) -> logging.Handler:
    """Send the package's log lines of `level` and above to `stream` in `style` (replacing a handler this function
    added before)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(KarpenterFormatter(style))
    handler.set_name(HANDLER_NAME)
    package = logging.getLogger("karpenter_policy")
    for old in [h for h in package.handlers if h.get_name() == HANDLER_NAME]:
        package.removeHandler(old)
    package.addHandler(handler)
    package.setLevel(level)
    return handler


__all__ = [
    "DEFAULT_LEVEL",
    "FORMATS",
    "HANDLER_NAME",
    "JSON",
    "LEVELS",
    "TEXT",
    "KarpenterFormatter",
    "configure",
    "level_name",
    "level_of",
    "logger_name",
]
