"""The :class:`InterruptionQueue` protocol: where the cloud announces that instances are going away.

On AWS, EventBridge rules put EC2 spot interruption warnings, rebalance recommendations, instance state changes
and AWS Health scheduled changes into an SQS queue (Karpenter's interruption queue); the reconciler reads it with
long polling and deletes each message once handled. A message it cannot read is deleted too (it would come back
forever otherwise). A received message that is not deleted becomes visible again after the queue's visibility
timeout, so a replica that stops between receiving and handling loses nothing.

Implementations: :class:`karpenter_policy.cloud.aws.sqs.SqsQueue` (boto3) and
:class:`karpenter_policy.fakes.queue.FakeQueue` (in memory, for tests and simulations).
"""

from __future__ import annotations

import builtins
import datetime as dt
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One received message: its id, body (the EventBridge event, JSON), the receipt that deletes it, and when
    the queue received it (None when the queue does not say)."""

    id: str
    body: str
    receipt: str
    sent_at: dt.datetime | None = None


class InterruptionQueue(Protocol):
    """A queue of interruption events. Every method raises only :class:`~karpenter_policy.cloud.CloudError`
    (:class:`~karpenter_policy.cloud.NotFound` when the queue does not exist)."""

    @property
    def name(self) -> str: ...

    def check(self) -> None:
        """Raise NotFound when the queue does not exist (a configuration error), CloudError when it cannot be
        told."""
        ...

    def receive(self) -> builtins.list[QueueMessage]:
        """Up to 10 messages; waits up to the queue's long-polling time for the first one (an empty list when
        none came). Received messages are hidden from other readers until deleted or until the visibility
        timeout ends."""
        ...

    def delete(self, message: QueueMessage) -> None:
        """Remove a received message for good."""
        ...


__all__ = ["InterruptionQueue", "QueueMessage"]
