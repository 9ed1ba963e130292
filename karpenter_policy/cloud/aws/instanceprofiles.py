"""Whether an IAM instance profile exists (`iam:GetInstanceProfile`), for an EC2NodeClass's `InstanceProfileReady`:
the profile its nodes launch with — its `instanceProfile`, else the controller's `--default-instance-profile`. Answers
are kept a minute, as the network's; a call that fails tells nothing (None), and IAM's "no such entity" is an answer
(False)."""

from __future__ import annotations

from typing import Final

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.cloud.provider import Clock

#: How long an answer is kept (seconds).
PROFILE_TTL: Final = 60.0


class InstanceProfiles:
    """See the module docstring."""

    def __init__(self, api: AwsApi, clock: Clock, ttl: float = PROFILE_TTL) -> None:
        self._api = api
        self._found: TtlCache[bool] = TtlCache(clock, ttl)

    def exists(self, name: str) -> bool | None:
        """Whether IAM has the instance profile `name`; None when IAM could not be asked."""
        def load() -> bool:
            try:
                self._api.call("iam", "get_instance_profile", InstanceProfileName=name)
            except NotFound:
                return False
            return True

        try:
            return self._found.get_or_load(name, load)
        except CloudError:
            return None


__all__ = ["PROFILE_TTL", "InstanceProfiles"]
