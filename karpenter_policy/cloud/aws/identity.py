"""Which AWS account the controller's credentials belong to (STS GetCallerIdentity).

The interruption handler acts only on events of its own account; the account is the one the credentials are in,
which is where the controller launches. GetCallerIdentity needs no IAM permission (AWS: "No permissions are
required to perform this operation"), so it is not in ``deploy/iam-policy.json``.
"""

from __future__ import annotations

import re

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.errors import CloudError

_ACCOUNT = re.compile(r"^\d{12}$")


def caller_account(api: AwsApi) -> str:
    """The 12-digit account id of the credentials. Raises CloudError (also for an answer without one)."""
    answer = api.call("sts", "get_caller_identity")
    account = answer.get("Account") if isinstance(answer, dict) else None
    if not isinstance(account, str) or not _ACCOUNT.match(account):
        raise CloudError(api.endpoint("sts"), f"no account id in the answer: {account!r}", "GetCallerIdentity")
    return account


__all__ = ["caller_account"]
