"""The interruption queue on SQS: long-polling receive and delete, as Karpenter's SQS provider does.

The queue is named (``--interruption-queue``); its URL is looked up once with GetQueueUrl and looked up again
after SQS says the queue does not exist (it may have been recreated). ReceiveMessage asks for up to 10 messages,
hides them for ``visibility_timeout`` seconds (20, Karpenter's value: a message not deleted by then — its reader
stopped — is delivered again) and waits up to ``wait_seconds`` (20, SQS's maximum) for the first one, which
keeps an idle queue to three requests a minute. The connection's read timeout must exceed the wait.
"""

from __future__ import annotations

import builtins
import datetime as dt
import threading
from collections.abc import Mapping
from typing import Any

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.cloud.queue import QueueMessage

WAIT_SECONDS = 20
VISIBILITY_TIMEOUT = 20
MAX_MESSAGES = 10
#: SQS's codes for "no such queue" (the JSON protocol's and the query protocol's).
QUEUE_MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class SqsQueue:
    """See the module docstring."""

    def __init__(
        self,
        api: AwsApi,
        name: str,
        *,
        wait_seconds: int = WAIT_SECONDS,
        visibility_timeout: int = VISIBILITY_TIMEOUT,
    ) -> None:
        if not name:
            raise ValueError("an interruption queue needs a name")
        if not 0 <= wait_seconds <= WAIT_SECONDS:
            raise ValueError(f"SQS waits 0 to {WAIT_SECONDS} seconds, not {wait_seconds}")
        if wait_seconds >= api.connection.read_timeout:
            raise ValueError("the connection's read timeout must exceed the long-polling wait")
        self._api = api
        self._name = name
        self._wait = wait_seconds
        self._visibility = visibility_timeout
        self._lock = threading.Lock()
        self._url: str | None = None

    @property
    def name(self) -> str:
        return self._name

    def check(self) -> None:
        self._queue_url()

    def receive(self) -> builtins.list[QueueMessage]:
        answer = self._call(
            "receive_message",
            MaxNumberOfMessages=MAX_MESSAGES,
            VisibilityTimeout=self._visibility,
            WaitTimeSeconds=self._wait,
            MessageSystemAttributeNames=["SentTimestamp"],
        )
        return [_message(raw) for raw in answer.get("Messages") or []]

    def delete(self, message: QueueMessage) -> None:
        self._call("delete_message", ReceiptHandle=message.receipt)

    def _queue_url(self) -> str:
        with self._lock:
            if self._url is None:
                try:
                    answer = self._api.call("sqs", "get_queue_url", QueueName=self._name)
                except CloudError as error:
                    raise _missing(error, self._name) from None
                self._url = str(answer["QueueUrl"])
            return self._url

    def _call(self, operation: str, **arguments: Any) -> Any:
        url = self._queue_url()
        try:
            return self._api.call("sqs", operation, QueueUrl=url, **arguments)
        except CloudError as error:
            if error.code in QUEUE_MISSING:
                with self._lock:
                    self._url = None  # recreated under the same name? look it up again next time
            raise _missing(error, self._name) from None


def _missing(error: CloudError, name: str) -> CloudError:
    if error.code in QUEUE_MISSING:
        return NotFound(error.endpoint, f"queue {name} does not exist", error.operation, code=error.code)
    return error


def _message(raw: Mapping[str, Any]) -> QueueMessage:
    sent = str((raw.get("Attributes") or {}).get("SentTimestamp") or "")
    sent_at = dt.datetime.fromtimestamp(int(sent) / 1000, dt.UTC) if sent.isdigit() else None
    return QueueMessage(
        id=str(raw.get("MessageId") or ""),
        body=str(raw.get("Body") or ""),
        receipt=str(raw.get("ReceiptHandle") or ""),
        sent_at=sent_at,
    )


__all__ = ["QUEUE_MISSING", "SqsQueue"]
