"""The errors every cloud provider raises; an SDK exception never escapes an adapter.

Callers catch :class:`CloudError` (or one of its kinds) and decide: :class:`InsufficientCapacity` means try
again later with other offerings, :class:`Throttled` means back off, :class:`ConfigurationError` means the
node template cannot launch anything until someone fixes it, :class:`NotFound` means the thing is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class CloudError(Exception):
    """A cloud API call failed: which endpoint, what operation, and why (connection refused, denied, ...);
    ``code`` is the cloud's error code when it gave one (``InvalidParameterValue``, ...)."""

    def __init__(self, endpoint: str, reason: str, operation: str = "", *, code: str = "") -> None:
        self.endpoint = endpoint
        self.reason = reason
        self.operation = operation
        self.code = code
        where = f"{operation} at {endpoint}" if operation else endpoint
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True, slots=True)
class FailedOffering:
    """One offering a launch tried and the cloud refused, with the cloud's error code and message."""

    instance_type: str
    zone: str
    capacity_type: str
    code: str
    message: str = ""

    def __str__(self) -> str:
        detail = f": {self.message}" if self.message else ""
        return f"{self.instance_type} {self.capacity_type} in {self.zone} ({self.code}{detail})"


class InsufficientCapacity(CloudError):
    """Every offering of a launch request failed for lack of capacity; each is now marked unavailable."""

    def __init__(self, endpoint: str, failed: Sequence[FailedOffering], operation: str = "CreateFleet") -> None:
        self.failed = tuple(failed)
        if not self.failed:
            reason = "no offering to try: every option is unavailable (recent capacity errors) or not allowed"
        else:
            shown = "; ".join(str(f) for f in self.failed[:5])
            more = f" and {len(self.failed) - 5} more" if len(self.failed) > 5 else ""
            reason = f"insufficient capacity for every offering tried: {shown}{more}"
        super().__init__(endpoint, reason, operation)


class NotFound(CloudError):
    """The resource (instance, launch template, ...) does not exist."""


class Throttled(CloudError):
    """The cloud kept throttling the call after every retry: back off and try again later."""


class ConfigurationError(CloudError):
    """The provider settings cannot launch anything: no subnet or security group matches a selector, no AMI
    is found, a named launch template does not exist, or the cloud rejects the launch parameters."""


__all__ = ["CloudError", "ConfigurationError", "FailedOffering", "InsufficientCapacity", "NotFound", "Throttled"]
