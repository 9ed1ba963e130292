"""The Karpenter v1 CustomResourceDefinitions the package ships (`schemas/crds/`, aws/karpenter-provider-aws
v1.14.1): which file describes which kind, and the OpenAPI v3 schema of its served version.

The files are Karpenter's own, unchanged (`schemas/crds/SOURCE.md` names the commit), so moving to a new tag is a
copy; they are read once per process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import yaml

#: The Karpenter release the CRDs (and the rules of `api/v1`) follow.
CRD_SOURCE_TAG: Final = "v1.14.1"

NODEPOOL_API_VERSION: Final = "karpenter.sh/v1"
NODEPOOL_KIND: Final = "NodePool"
NODECLAIM_KIND: Final = "NodeClaim"
EC2NODECLASS_GROUP: Final = "karpenter.k8s.aws"
EC2NODECLASS_API_VERSION: Final = f"{EC2NODECLASS_GROUP}/v1"
EC2NODECLASS_KIND: Final = "EC2NodeClass"

CRD_DIRECTORY: Final = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "schemas", "crds")

#: (apiVersion, kind) → the CRD file of `schemas/crds/` that defines it.
CRD_FILES: Final[dict[tuple[str, str], str]] = {
    (NODEPOOL_API_VERSION, NODEPOOL_KIND): "karpenter.sh_nodepools.yaml",
    (NODEPOOL_API_VERSION, NODECLAIM_KIND): "karpenter.sh_nodeclaims.yaml",
    (EC2NODECLASS_API_VERSION, EC2NODECLASS_KIND): "karpenter.k8s.aws_ec2nodeclasses.yaml",
}


@dataclass(frozen=True, slots=True)
class CrdVersion:
    """One served version of a CRD: its `openAPIV3Schema` and whether its status is a subresource (then the API
    server ignores the status of a create or update of the object)."""

    kind: str
    api_version: str
    schema: dict[str, Any]
    status_subresource: bool


def _load_yaml(path: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, "rb") as handle:
        return yaml.load(handle, Loader=loader)  # noqa: S506 - a safe loader, C or pure


@cache
def crd_version(api_version: str, kind: str) -> CrdVersion | None:
    """The served version `api_version` of the CRD of `kind`, None for a kind the package has no CRD of."""
    file_name = CRD_FILES.get((api_version, kind))
    if file_name is None:
        return None
    crd = _load_yaml(os.path.join(CRD_DIRECTORY, file_name))
    spec = crd["spec"]
    wanted = api_version.rpartition("/")[2]
    for version in spec["versions"]:
        if version["name"] == wanted:
            return CrdVersion(
                kind=kind,
                api_version=api_version,
                schema=version["schema"]["openAPIV3Schema"],
                status_subresource="status" in (version.get("subresources") or {}),
            )
    raise LookupError(f"{file_name} serves no version {wanted}")  # a broken package, not a user's mistake
