"""What must hold before a NodePool's NodeClaim turns Registered: Karpenter v1.14.1's registration hooks.

Core v1.14.1 asks every hook of the cloud provider before it completes a claim's registration (core
pkg/controllers/nodeclaim/lifecycle/registration.go `checkRegistrationHooks`): while one is not ready, or fails, the
claim's `Registered` stays Unknown with reason `RegistrationHookPending` and the pending hooks' names as message,
and the claim is looked at again after the lifecycle controller's per-item backoff — one second, doubling, at most
a minute (controller.go's `NewTypedItemExponentialFailureRateLimiter(time.Second, time.Minute)`), :func:`backoff`.

The AWS provider has one hook, :func:`placement_group_partition` (aws pkg/cloudprovider/registrationhooks/
placementgrouphook.go): a node launched into a partition placement group without a partition chosen is labelled
`karpenter.k8s.aws/placement-group-partition: ""` (cloudprovider.go:476-488) and registers only once
DescribeInstances says its `Placement.PartitionNumber`, which becomes the label — so that a topology spread over the
partition key never counts a node in no partition. An answer without a partition number is "not yet"; an instance
the cloud does not know, or a call that failed, is "unknown" (v1.14.1: an error, backed off the same way): neither
ever raises out of the lifecycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.model import labels as wk

#: The claim's `Registered` reason while a hook is not ready (registration.go:171).
PENDING: Final = "RegistrationHookPending"
#: The AWS provider's hook, by the name v1.14.1 reports it under.
PLACEMENT_GROUP_HOOK: Final = "PlacementGroupRegistrationHook"
#: The lifecycle controller's per-item backoff: its first delay and its ceiling (seconds).
BACKOFF_BASE: Final = 1.0
BACKOFF_MAX: Final = 60.0


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """A hook's answer: `ready`, with the labels it resolved (to write on the claim and its Node); else `error`
    says why it failed ("" when it is only not ready yet)."""

    ready: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    error: str = ""


READY: Final = HookAnswer(True)
NOT_YET: Final = HookAnswer(False)


def backoff(attempt: int) -> float:
    """The delay before the `attempt`-th look again (1-based): 1 s, 2 s, 4 s, … at most a minute."""
    return min(BACKOFF_BASE * 2.0 ** min(max(attempt - 1, 0), 16), BACKOFF_MAX)


def instance_id(provider_id: str) -> str | None:
    """The instance id of an `aws:///<zone>/<id>` provider ID (v1.14.1's `ParseInstanceID`); None in another shape."""
    prefix, _, rest = provider_id.partition(":///")
    found = rest.rpartition("/")[2]
    return found if prefix == "aws" and found.startswith("i-") else None


def placement_group_partition(labels: Mapping[str, str], provider_id: str, cloud: CloudProvider) -> HookAnswer:
    """placementgrouphook.go `Registered`: ready unless the claim is in a placement group with the partition label
    present and empty; then its instance's partition number from the cloud (`cloud.get`, uncached), or not yet."""
    if wk.PLACEMENT_GROUP_ID not in labels or labels.get(wk.PLACEMENT_GROUP_PARTITION) != "":
        return READY
    if not provider_id:
        return NOT_YET
    found = instance_id(provider_id)
    if found is None:
        return HookAnswer(False, error=f"parsing instance ID from provider ID {provider_id!r}")
    try:
        instance = cloud.get(found)
    except CloudError as error:
        return HookAnswer(False, error=f"describing instance for partition number, {error}")
    if instance is None:
        return HookAnswer(False, error=f"describing instance for partition number, instance {found} not found")
    if not instance.placement_partition:
        return NOT_YET
    return HookAnswer(True, {wk.PLACEMENT_GROUP_PARTITION: instance.placement_partition})


__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_MAX",
    "NOT_YET",
    "PENDING",
    "PLACEMENT_GROUP_HOOK",
    "READY",
    "HookAnswer",
    "backoff",
    "instance_id",
    "placement_group_partition",
]
