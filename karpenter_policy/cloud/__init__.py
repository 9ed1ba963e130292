"""Cloud providers: the :class:`CloudProvider` protocol the reconciler launches nodes through, its errors, and
an in-memory fake (:mod:`karpenter_policy.fakes.cloud`) for controller tests.

Adapters live in subpackages (``aws/`` is the only boto3 importer). Callers catch :class:`CloudError` and
report it; an SDK exception never escapes an adapter.
"""

from __future__ import annotations

from karpenter_policy.cloud.errors import (
    CloudError,
    ConfigurationError,
    FailedOffering,
    InsufficientCapacity,
    NotFound,
    Throttled,
)
from karpenter_policy.cloud.provider import CloudProvider, Instance, LaunchRequest

__all__ = [
    "CloudError",
    "CloudProvider",
    "ConfigurationError",
    "FailedOffering",
    "Instance",
    "InsufficientCapacity",
    "LaunchRequest",
    "NotFound",
    "Throttled",
]
