"""The canonical key order `fmt` gives policy objects: the order of Karpenter's own documentation — v0.31's for
Provisioners and AWSNodeTemplates, v1.14's for NodePools and EC2NodeClasses (the annotated examples of
website/content/en/docs/concepts/nodepools.md and nodeclasses.md in aws/karpenter-provider-aws v1.14.1).

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

NODEPOOL_SPEC: Final = ("template", "disruption", "replicas", "limits", "weight")
NODEPOOL_TEMPLATE: Final = ("metadata", "spec")
NODEPOOL_TEMPLATE_METADATA: Final = ("labels", "annotations")
NODEPOOL_TEMPLATE_SPEC: Final = (
    "nodeClassRef",
    "taints",
    "startupTaints",
    "expireAfter",
    "terminationGracePeriod",
    "requirements",
)
NODEPOOL_REQUIREMENT: Final = ("key", "operator", "values", "minValues")
NODE_CLASS_REF: Final = ("group", "kind", "name")
DISRUPTION: Final = ("consolidationPolicy", "consolidateAfter", "budgets")
EC2NODECLASS_SPEC: Final = (
    "kubelet",
    "amiFamily",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "role",
    "instanceProfile",
    "amiSelectorTerms",
    "capacityReservationSelectorTerms",
    "placementGroupSelector",
    "tags",
    "metadataOptions",
    "connectionTracking",
    "blockDeviceMappings",
    "networkInterfaces",
    "instanceStorePolicy",
    "userData",
    "detailedMonitoring",
    "associatePublicIPAddress",
)
METADATA_OPTIONS: Final = ("httpEndpoint", "httpProtocolIPv6", "httpPutResponseHopLimit", "httpTokens")

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
    "NodePool": {
        **_COMMON,
        ("spec",): NODEPOOL_SPEC,
        ("spec", "template"): NODEPOOL_TEMPLATE,
        ("spec", "template", "metadata"): NODEPOOL_TEMPLATE_METADATA,
        ("spec", "template", "spec"): NODEPOOL_TEMPLATE_SPEC,
        ("spec", "template", "spec", "nodeClassRef"): NODE_CLASS_REF,
        ("spec", "template", "spec", "requirements", "*"): NODEPOOL_REQUIREMENT,
        ("spec", "template", "spec", "taints", "*"): TAINT,
        ("spec", "template", "spec", "startupTaints", "*"): TAINT,
        ("spec", "disruption"): DISRUPTION,
    },
    "EC2NodeClass": {**_COMMON, ("spec",): EC2NODECLASS_SPEC, ("spec", "metadataOptions"): METADATA_OPTIONS},
}
