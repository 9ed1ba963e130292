"""The canonical key order `fmt` gives policy objects: the order of Karpenter's own documentation (v0.31).

Each entry maps a path pattern to the keys in order; keys not listed keep their relative order after the listed
ones. `*` in a path stands for every item of a list.
"""

from __future__ import annotations

from typing import Final

TOP: Final = ("apiVersion", "kind", "metadata", "spec", "status")
METADATA: Final = ("name", "namespace", "labels", "annotations")
TAINT: Final = ("key", "value", "effect", "timeAdded")
REQUIREMENT: Final = ("key", "operator", "values")

PROVISIONER_SPEC: Final = (
    "providerRef",
    "provider",
    "taints",
    "startupTaints",
    "labels",
    "annotations",
    "requirements",
    "kubeletConfiguration",
    "limits",
    "consolidation",
    "ttlSecondsUntilExpired",
    "ttlSecondsAfterEmpty",
    "weight",
)
NODE_TEMPLATE_SPEC: Final = (
    "subnetSelector",
    "securityGroupSelector",
    "launchTemplate",
    "instanceProfile",
    "amiFamily",
    "amiSelector",
    "userData",
    "tags",
    "metadataOptions",
    "blockDeviceMappings",
    "detailedMonitoring",
    "context",
)

_COMMON: Final[dict[tuple[str, ...], tuple[str, ...]]] = {(): TOP, ("metadata",): METADATA}

#: kind → {path of a mapping: its keys in order}.
ORDERS: Final[dict[str, dict[tuple[str, ...], tuple[str, ...]]]] = {
    "Provisioner": {
        **_COMMON,
        ("spec",): PROVISIONER_SPEC,
        ("spec", "requirements", "*"): REQUIREMENT,
        ("spec", "taints", "*"): TAINT,
        ("spec", "startupTaints", "*"): TAINT,
        ("spec", "provider"): NODE_TEMPLATE_SPEC,
    },
    "AWSNodeTemplate": {**_COMMON, ("spec",): NODE_TEMPLATE_SPEC},
}
