"""The embedded EC2 instance-type catalog (offline, shipped as package data) and its refresh from EC2.

``load_catalog()`` gives the embedded us-east-1 catalog (cached); ``catalog_to_json`` serialises one
deterministically; ``refresh.refresh_catalog`` rebuilds one from an EC2 endpoint (boto3 is only imported
then, through ``karpenter_policy.cloud.aws``).
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
