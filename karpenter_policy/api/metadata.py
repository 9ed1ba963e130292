"""Object metadata rules shared by every kind Karpenter's webhook validates."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from karpenter_policy.api.violations import INVALID_SPEC, Violation
from karpenter_policy.model import labels as wk


def metadata_violations(metadata: Mapping[str, Any]) -> Iterator[Violation]:
    """Karpenter's webhook (knative's ValidateObjectMetadata): the name must be a DNS-1035 label."""
    name = metadata.get("name")
    if isinstance(name, str) and not wk.is_dns1035_label(name):
        yield Violation(
            INVALID_SPEC,
            ("metadata", "name"),
            f"name {name!r} must be a DNS-1035 label: a lowercase letter first, then letters, digits or '-', "
            "at most 63 characters",
        )
