"""Cloud providers: the errors every provider raises (and, later, the CloudProvider protocol and fakes).

Adapters live in subpackages (``aws/`` is the only boto3 importer). Callers catch :class:`CloudError` and
report it; an SDK exception never escapes an adapter.
"""

from __future__ import annotations


class CloudError(Exception):
    """A cloud API call failed: which endpoint, what operation, and why (connection refused, denied, ...)."""

    def __init__(self, endpoint: str, reason: str, operation: str = "") -> None:
        self.endpoint = endpoint
        self.reason = reason
        self.operation = operation
        where = f"{operation} at {endpoint}" if operation else endpoint
        super().__init__(f"{where}: {reason}")


__all__ = ["CloudError"]
