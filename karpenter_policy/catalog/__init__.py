"""The embedded EC2 instance-type catalog (offline, shipped as package data) and its refresh from EC2.

``load_catalog()`` gives the embedded us-east-1 catalog (cached); ``catalog_to_json`` serialises one
deterministically; ``refresh`` rebuilds one from any EC2 source it is given (`catalog refresh` passes the boto3 one
of ``karpenter_policy.cloud.aws``, which sits above this package). It imports only `model`.
"""

from karpenter_policy.catalog.catalog import (
    DEFAULT_REGION,
    Catalog,
    CatalogError,
    catalog_from_json,
    catalog_to_json,
)
from karpenter_policy.catalog.loading import clear_catalog_cache, load_catalog

__all__ = [
    "DEFAULT_REGION",
    "Catalog",
    "CatalogError",
    "catalog_from_json",
    "catalog_to_json",
    "clear_catalog_cache",
    "load_catalog",
]
