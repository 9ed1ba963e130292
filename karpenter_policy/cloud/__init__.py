"""Cloud providers: the :class:`CloudProvider` protocol the reconciler launches nodes through, its errors, the
unavailable-offerings cache, and the interruption queue's protocol (`queue`). The in-memory stand-ins are not
here: they are in :mod:`karpenter_policy.fakes`. It imports `model`, `api` and `catalog`.

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
