"""The controller's log, in Karpenter's format: one line per decision, readable next to Karpenter's own.

The formats (Karpenter's console format, ``text``, and one JSON object per line, ``json``) are
:mod:`karpenter_policy.logformat`'s, which the webhook uses too. The controller's loggers are named
``karpenter_policy.reconcile.controller.<name>`` and shown as ``controller.<name>``, as Karpenter's are; other
loggers of the package keep their dotted name without the ``karpenter_policy.`` prefix.

Structured fields travel in ``extra={"fields": {...}}``; the time of a line is the controller's injected wall
clock when it passes one (``extra={"when": datetime}``: a simulation logs in simulated time), else the record's.

Something read every pass that can be unavailable for a while (:class:`Outage`) is logged once when it fails and once
when it works again, as the informers log a watch that fails and then works again (`kube.informer`): never a line
per pass while it fails.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from karpenter_policy.logformat import (
    DEFAULT_LEVEL,
    FORMATS,
    JSON,
    LEVELS,
    TEXT,
    KarpenterFormatter,
    configure,
    level_name,
    level_of,
)
from karpenter_policy.model.pods import format_bytes
from karpenter_policy.model.resources import EPHEMERAL_STORAGE, MEMORY, format_quantity

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


class Outage:
    """A run of failures of something read every pass: :meth:`failed` is True for the first failure of a run only
    (log then), :meth:`worked` the number of failures of the run it ends (log "again" when not 0). Called from one
    thread (its controller's)."""

    def __init__(self) -> None:
        self.failures = 0

    def failed(self) -> bool:
        self.failures += 1
        return self.failures == 1

    def worked(self) -> int:
        failures, self.failures = self.failures, 0
        return failures


__all__ = [
    "DEFAULT_LEVEL",
    "FORMATS",
    "JSON",
    "LEVELS",
    "TEXT",
    "KarpenterFormatter",
    "Outage",
    "configure",
    "level_name",
    "level_of",
    "fields",
    "logger",
    "options_text",
    "resources_text",
]
