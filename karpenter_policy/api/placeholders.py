"""Placeholders left in what Karpenter matches against AWS: `${CLUSTER_NAME}` in a subnet, security group or AMI
selector, or in tags (Karpenter's own examples ship `karpenter.sh/discovery: "${CLUSTER_NAME}"`, to be replaced).
Karpenter's webhook admits them; the selector then matches nothing (no subnet is tagged `${CLUSTER_NAME}`) and no
node launches. A `placeholder` warning each, unless the object is marked for Flux's post-build substitution, which
fills them in when Flux applies it: `kustomize.toolkit.fluxcd.io/substitute: enabled` among its annotations or
labels (Flux substitutes every object not marked `disabled`; `enabled` says it is meant).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from karpenter_policy.api.violations import PLACEHOLDER, Path, Violation

#: Flux's annotation (or label) that turns post-build substitution off (`disabled`) — or, `enabled`, marks an
#: object whose `${...}` Flux is meant to fill in.
FLUX_SUBSTITUTE = "kustomize.toolkit.fluxcd.io/substitute"
FLUX_SUBSTITUTE_ENABLED = "enabled"
#: The fields whose placeholders are reported (and, in a marked object, left to Flux by `compile`).
MATCHED_FIELDS = ("subnetSelector", "securityGroupSelector", "amiSelector", "tags")
#: `${NAME}`, `${NAME:-default}`, `${NAME:=default}` (shell, envsubst and Flux's forms).
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[-=+?][^}]*)?\}")


def placeholders(text: str) -> list[str]:
    """The `${...}` placeholders in `text`, in order."""
    return _PLACEHOLDER.findall(text)


def marked_for_flux(metadata: Mapping[str, Any] | None) -> bool:
    """Whether an object's metadata marks it for Flux's post-build substitution (`...substitute: enabled`)."""
    metadata = metadata if isinstance(metadata, Mapping) else {}
    for field in ("annotations", "labels"):
        values = metadata.get(field)
        if isinstance(values, Mapping) and values.get(FLUX_SUBSTITUTE) == FLUX_SUBSTITUTE_ENABLED:
            return True
    return False


def placeholder_violations(
    spec: Mapping[str, Any], base: Path, metadata: Mapping[str, Any] | None
) -> Iterator[Violation]:
    """A warning for each selector or tag key or value of `spec` (an AWSNodeTemplate's, or a Provisioner's inline
    provider at `base`) holding a placeholder, unless `metadata` marks the object for Flux substitution."""
    if marked_for_flux(metadata):
        return
    for field in MATCHED_FIELDS:
        entries = spec.get(field)
        if not isinstance(entries, Mapping):
            continue
        for key, value in entries.items():
            for text, at_key in ((str(key), True), (value if isinstance(value, str) else "", False)):
                found = placeholders(text)
                if not found:
                    continue
                where = "tag" if field == "tags" else f"{field} key" if at_key else field
                subject = f"{where} {key!r}" if at_key else f"{where} {key}: {value!r}"
                effect = (
                    "Karpenter tags its instances with it as written"
                    if field == "tags"
                    else "Karpenter matches it as written and finds nothing"
                )
                message = (
                    f"{subject} holds the placeholder {found[0]}: {effect}; substitute it before applying, or mark "
                    f"the object {FLUX_SUBSTITUTE}: {FLUX_SUBSTITUTE_ENABLED} for Flux's post-build substitution"
                )
                yield Violation(PLACEHOLDER, (*base, field, key), message, at_key=at_key)


__all__ = [
    "FLUX_SUBSTITUTE",
    "FLUX_SUBSTITUTE_ENABLED",
    "MATCHED_FIELDS",
    "marked_for_flux",
    "placeholder_violations",
    "placeholders",
]
