"""The errors every :class:`~karpenter_policy.kube.cluster.Cluster` raises, whatever talks to the API.

Callers catch these and only these: the client adapter maps HTTP statuses and connection failures onto
them, so no exception of the ``kubernetes`` client (or urllib3) ever escapes it.
"""

from __future__ import annotations


class ClusterError(Exception):
    """A Kubernetes API call failed. ``status`` is the HTTP status when the server answered, else None."""

    status: int | None = None

    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.reason = reason


class BadRequest(ClusterError):
    """400: a malformed request, such as a selector the server cannot parse."""

    status = 400


class NotFound(ClusterError):
    """404: the object (or its namespace) does not exist."""

    status = 404


class AlreadyExists(ClusterError):
    """409 AlreadyExists: create of a name that is taken."""

    status = 409


class Conflict(ClusterError):
    """409 Conflict: a stale resourceVersion (optimistic concurrency), or a pod bound twice."""

    status = 409


class Gone(ClusterError):
    """410: a watch (or list) from a resourceVersion older than the server keeps history for; relist."""

    status = 410


class Invalid(ClusterError):
    """422: the request is well-formed but rejected (bad patch, a failed JSON Patch ``test``)."""

    status = 422


class TooManyRequests(ClusterError):
    """429: an eviction a PodDisruptionBudget forbids right now (or server throttling); retry later."""

    status = 429


class Unavailable(ClusterError):
    """The API could not be reached or failed (connection refused or reset, timeout, 5xx)."""


class Malformed(Unavailable):
    """The API answered, but not with the shape the request must get: an empty or non-JSON body, a ``Status``
    where an object or a list belongs, ``items`` that are not a list of objects, a watch line that is not an
    event. Unavailable — never "no objects". ``problem`` names what was wrong, in a few fixed words
    (:data:`karpenter_policy.kube.shape.PROBLEMS`), for metrics and for logging each problem once."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


def error_for_status(status: int, message: str, reason: str = "") -> ClusterError:
    """The error for an HTTP status the API server answered with (its Status ``reason`` splits 409)."""
    if status == 400:
        return BadRequest(message, status, reason)
    if status == 404:
        return NotFound(message, status, reason)
    if status == 409:
        return (AlreadyExists if reason == "AlreadyExists" else Conflict)(message, status, reason)
    if status == 410:
        return Gone(message, status, reason)
    if status == 422:
        return Invalid(message, status, reason)
    if status == 429:
        return TooManyRequests(message, status, reason)
    if status >= 500:
        return Unavailable(message, status, reason)
    return ClusterError(message, status, reason)
