"""An in-memory :class:`~karpenter_policy.cloud.queue.InterruptionQueue` (no boto3), with SQS's visibility rules.

A received message is hidden until deleted or until its visibility timeout ends (by the injected clock); a test
can send messages, inject an error for the next call (:meth:`FakeQueue.fail_next`) and read what was deleted.
``receive`` waits up to `wait_seconds` (real time) for a message, as SQS's long polling does (default 0: it never
waits, for step-driven tests).
"""

from __future__ import annotations

import builtins
import datetime as dt
import itertools
import threading
import time

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import Clock
from karpenter_policy.cloud.queue import QueueMessage

ENDPOINT = "fake://queue"
MAX_MESSAGES = 10


class FakeQueue:
    """Messages in a list, in the order sent; see the module docstring."""

    def __init__(
        self,
        name: str = "interruption",
        *,
        clock: Clock = time.monotonic,
        visibility_timeout: float = 20.0,
        wait_seconds: float = 0.0,
    ):
        self._name = name
        self._clock = clock
        self._visibility = visibility_timeout
        self._wait = wait_seconds
        self._lock = threading.Condition()
        self._messages: builtins.list[tuple[QueueMessage, float]] = []  # (message, hidden until)
        self._ids = itertools.count(1)
        self._receipts = itertools.count(1)
        self._errors: dict[str, builtins.list[CloudError]] = {}
        #: Bodies of the messages deleted, in order (for assertions).
        self.deleted: builtins.list[str] = []

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._name

    def send(self, body: str) -> str:
        """Put a message in the queue (as EventBridge does); its id."""
        with self._lock:
            message_id = f"msg-{next(self._ids):06d}"
            message = QueueMessage(message_id, body, "", dt.datetime.now(dt.UTC))
            self._messages.append((message, 0.0))
            self._lock.notify_all()
            return message_id

    def fail_next(self, operation: str, error: CloudError) -> None:
        """The next call of ``operation`` (check, receive, delete) raises ``error``."""
        with self._lock:
            self._errors.setdefault(operation, []).append(error)

    def visible(self) -> int:
        """Messages not deleted (hidden ones included)."""
        with self._lock:
            return len(self._messages)

    def _injected(self, operation: str) -> None:
        queue = self._errors.get(operation)
        if queue:
            raise queue.pop(0)

    def check(self) -> None:
        """Check that the queue can be read, as the controller does at start-up (raises an error injected
        for `check`)."""
        with self._lock:
            self._injected("check")

    def receive(self) -> builtins.list[QueueMessage]:
        """Up to ten visible messages, each hidden for the visibility timeout with a new receipt (waiting up to
        `wait_seconds` for one)."""
        deadline = time.monotonic() + self._wait
        with self._lock:
            self._injected("receive")
            while True:
                received = self._take()
                left = deadline - time.monotonic()
                if received or left <= 0:
                    return received
                self._lock.wait(left)

    def _take(self) -> builtins.list[QueueMessage]:
        now = self._clock()
        received: builtins.list[QueueMessage] = []
        for index, (message, hidden_until) in enumerate(self._messages):
            if len(received) == MAX_MESSAGES:
                break
            if hidden_until > now:
                continue
            handed = QueueMessage(message.id, message.body, f"{message.id}/{next(self._receipts)}", message.sent_at)
            self._messages[index] = (handed, now + self._visibility)
            received.append(handed)
        return received

    def delete(self, message: QueueMessage) -> None:
        """Delete a received message by its receipt; a `CloudError` when the receipt is no longer valid."""
        with self._lock:
            self._injected("delete")
            for index, (held, _) in enumerate(self._messages):
                if held.receipt and held.receipt == message.receipt:
                    del self._messages[index]
                    self.deleted.append(held.body)
                    return
            raise CloudError(ENDPOINT, f"receipt {message.receipt!r} is not valid (expired or deleted)", "delete")


__all__ = ["FakeQueue"]
