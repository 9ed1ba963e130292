"""The API kinds the project reads and their identities (`apiVersion` + `kind`)."""

from __future__ import annotations

from typing import Final

PROVISIONER_API_VERSION: Final = "karpenter.sh/v1alpha5"
PROVISIONER_KIND: Final = "Provisioner"
NODE_TEMPLATE_API_VERSION: Final = "karpenter.k8s.aws/v1alpha1"
NODE_TEMPLATE_KIND: Final = "AWSNodeTemplate"
#: The project's own policy kinds (never applied to a cluster as such): a group of ours, not Karpenter's.
PINNING_POLICY_API_VERSION: Final = "karpenter-policy.dev/v1alpha1"
PINNING_POLICY_KIND: Final = "PinningPolicy"
PLACEMENT_TEST_KIND: Final = "PlacementTest"

#: (apiVersion, kind) → the schema file that describes it (in `schemas/`).
SCHEMA_FILES: Final[dict[tuple[str, str], str]] = {
    (PROVISIONER_API_VERSION, PROVISIONER_KIND): "provisioner.v1alpha5.json",
    (NODE_TEMPLATE_API_VERSION, NODE_TEMPLATE_KIND): "awsnodetemplate.v1alpha1.json",
    (PINNING_POLICY_API_VERSION, PINNING_POLICY_KIND): "pinningpolicy.v1alpha1.json",
    (PINNING_POLICY_API_VERSION, PLACEMENT_TEST_KIND): "placementtest.v1alpha1.json",
}

#: Kinds that are ours but of another version than the one supported (reported, not skipped).
POLICY_KINDS: Final[frozenset[str]] = frozenset(
    {PROVISIONER_KIND, NODE_TEMPLATE_KIND, PINNING_POLICY_KIND, PLACEMENT_TEST_KIND}
)

#: The supported apiVersion of each policy kind.
API_VERSIONS: Final[dict[str, str]] = {kind: api_version for api_version, kind in SCHEMA_FILES}


def object_ref(kind: object, name: object) -> str:
    """`Provisioner/default` — how findings name an object."""
    return f"{kind if isinstance(kind, str) and kind else '?'}/{name if isinstance(name, str) and name else '?'}"
