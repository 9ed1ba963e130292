"""botocore exceptions -> :mod:`karpenter_policy.cloud.errors`, with a reason a person can act on.

Every AWS adapter module translates through :func:`translate`, so no SDK exception escapes the package and the
same failure reads the same everywhere.
"""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError

from karpenter_policy.cloud.errors import CloudError, NotFound, Throttled

#: Error codes AWS uses for throttling (botocore's standard retry mode retries them with backoff first).
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "TooManyRequestsException",
        "EC2ThrottledException",
        "SlowDown",
        "PriorRequestNotComplete",
        "BandwidthLimitExceeded",
    }
)

#: The exceptions an AWS call may raise that :func:`translate` handles.
SDK_ERRORS = (BotoCoreError, ClientError, ResponseParserError)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError ("" for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def is_not_found(code: str) -> bool:
    """EC2/SSM spell "does not exist" many ways: InvalidInstanceID.NotFound, ParameterNotFound, ...; IAM says
    NoSuchEntity."""
    return "NotFound" in code or code == "NoSuchEntity"


def reason(exc: BaseException) -> str:
    """What went wrong, for a person: the AWS code, message and HTTP status, or the connection problem."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Unknown")
        message = error.get("Message", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        detail = f"{code}: {message}" if message else str(code)
        return f"{detail} (HTTP {status})" if status else detail
    if isinstance(exc, EndpointConnectionError):
        return f"cannot connect to the endpoint ({exc})"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"{exc}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or another credential source"
    if isinstance(exc, ResponseParserError):
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        return f"the endpoint did not answer like AWS ({first_line.rstrip(':')})"
    if isinstance(exc, NoRegionError):
        return f"{exc}: pass --region"
    return str(exc) or type(exc).__name__


def translate(exc: BaseException, endpoint: str, operation: str) -> CloudError:
    """The cloud error for an SDK exception: :class:`Throttled`, :class:`NotFound` or :class:`CloudError`."""
    code = error_code(exc)
    if code in THROTTLING_CODES:
        return Throttled(endpoint, reason(exc), operation, code=code)
    if is_not_found(code):
        return NotFound(endpoint, reason(exc), operation, code=code)
    return CloudError(endpoint, reason(exc), operation, code=code)


__all__ = ["SDK_ERRORS", "THROTTLING_CODES", "error_code", "is_not_found", "reason", "translate"]
