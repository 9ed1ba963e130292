"""Karpenter's Provisioner defaulting (AWS webhook, v0.31).

Each default is added only when the provisioner's requirements do not mention its key (beta keys count as
their GA names): `kubernetes.io/os In [linux]`, `kubernetes.io/arch In [amd64]`,
`karpenter.sh/capacity-type In [on-demand]`, and — when none of instance-type, -family, -category,
-generation is constrained — `instance-category In [c, m, r]` with `instance-generation Gt 2`.
Defaulting is idempotent: defaulting a defaulted provisioner changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from karpenter_policy.model import labels as wk

_INSTANCE_SHAPE_KEYS = (wk.INSTANCE_TYPE, wk.INSTANCE_FAMILY, wk.INSTANCE_CATEGORY, wk.INSTANCE_GENERATION)


def default_requirements(requirements: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The requirements Karpenter's webhook appends to `requirements` (API form, in Karpenter's order)."""
    present = {wk.normalize_key(str(r.get("key", ""))) for r in requirements}
    added: list[dict[str, Any]] = []
    if wk.OS not in present:
        added.append({"key": wk.OS, "operator": "In", "values": ["linux"]})
    if wk.ARCH not in present:
        added.append({"key": wk.ARCH, "operator": "In", "values": [wk.ARCH_AMD64]})
    if wk.CAPACITY_TYPE not in present:
        added.append({"key": wk.CAPACITY_TYPE, "operator": "In", "values": [wk.CAPACITY_ON_DEMAND]})
    if not present.intersection(_INSTANCE_SHAPE_KEYS):
        added.append({"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]})
        added.append({"key": wk.INSTANCE_GENERATION, "operator": "Gt", "values": ["2"]})
    return added


def default_provisioner(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A defaulted copy of a (schema-valid) Provisioner document; the input is not modified."""
    defaulted: dict[str, Any] = copy.deepcopy(dict(doc))
    spec = defaulted.setdefault("spec", {})
    requirements = spec.setdefault("requirements", [])
    requirements.extend(default_requirements(requirements))
    return defaulted
