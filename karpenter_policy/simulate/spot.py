"""Spot interruptions in a simulation, as AWS gives them, taken by the controller's interruption controller.

:meth:`SpotInterruptions.interrupt` picks spot nodes at random (a seeded generator: the same scenario picks the
same nodes) among the Ready nodes of ours not being deleted, and for each puts EventBridge's "EC2 Spot Instance
Interruption Warning" on an in-memory queue (`fakes.queue`, SQS's visibility rules). The controller is built with
that queue (`Controller(interruption_queue=…)`): its interruption controller, first of its list, takes the
messages at every step (:class:`~karpenter_policy.reconcile.interruption.handler.InterruptionHandler`), marks the
offering unavailable and deletes the Node through the node-deletion path, as it does on a real cluster.
:data:`INTERRUPTION_NOTICE` seconds after the warning, AWS reclaims the instance: :meth:`SpotInterruptions.reclaim`
terminates it in moto's EC2 (whatever the controller did meanwhile) and puts the "EC2 Instance State-change
Notification" (terminated) on the queue, as EventBridge would.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.errors import NotFound
from karpenter_policy.fakes.queue import FakeQueue
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.simulate.clock import VirtualClock

#: Seconds from the interruption warning to the instance being reclaimed (AWS's two-minute notice).
INTERRUPTION_NOTICE = 120.0
#: moto's account (what the events name).
ACCOUNT = "123456789012"
QUEUE_NAME = "simulated-interruptions"


@dataclass(frozen=True, slots=True)
class Interruption:
    """A warning sent at `at` (virtual seconds) for a node; its instance is reclaimed at `reclaim_at`."""

    at: float
    node: str
    instance_id: str
    instance_type: str
    zone: str
    reclaim_at: float


class SpotInterruptions:
    """See the module docstring."""

    def __init__(
        self,
        cluster: Cluster,
        api: AwsApi,
        clock: VirtualClock,
        *,
        region: str,
        seed: int,
        notice: float = INTERRUPTION_NOTICE,
    ) -> None:
        self.api = api
        self.clock = clock
        self.region = region
        self.notice = notice
        self.queue = FakeQueue(QUEUE_NAME, clock=clock)  # the controller's interruption queue
        self._cluster = cluster
        self._random = random.Random(seed)
        self._events = 0
        self._reclaimed: set[str] = set()
        #: Every warning sent, in order.
        self.sent: list[Interruption] = []

    def candidates(self, nodes: Iterable[objects.Obj]) -> list[objects.Obj]:
        """The nodes a spot interruption can hit: ours, spot, Ready, not being deleted (by name)."""
        found = [
            n for n in nodes
            if node_info.is_ours(n) and node_info.is_ready(n) and not objects.is_deleting(n)
            and objects.labels(n).get(wk.CAPACITY_TYPE) == wk.CAPACITY_SPOT and node_info.instance_id(n)
        ]
        return sorted(found, key=objects.name)

    def interrupt(self, count: int) -> list[Interruption]:
        """Warn `count` random spot nodes (fewer when there are fewer)."""
        candidates = self.candidates(self._cluster.list(objects.NODE).items)
        chosen = self._random.sample(candidates, min(count, len(candidates)))
        now = self.clock.now
        sent = []
        for node in sorted(chosen, key=objects.name):
            labels = objects.labels(node)
            interruption = Interruption(
                now, objects.name(node), node_info.instance_id(node), labels.get(wk.INSTANCE_TYPE, ""),
                labels.get(wk.ZONE, ""), now + self.notice,
            )
            self.queue.send(self._event(
                "EC2 Spot Instance Interruption Warning",
                {"instance-id": interruption.instance_id, "instance-action": "terminate"},
                interruption.instance_id,
            ))
            sent.append(interruption)
        self.sent.extend(sent)
        return sent

    def due(self) -> float | None:
        """When the next instance is to be reclaimed (None: none is)."""
        waiting = [i.reclaim_at for i in self.sent if i.instance_id not in self._reclaimed]
        return min(waiting, default=None)

    def reclaim(self) -> list[Interruption]:
        """Terminate the instances whose notice is over, each with its state-change event on the queue."""
        done = []
        for interruption in self.sent:
            if interruption.instance_id in self._reclaimed or interruption.reclaim_at > self.clock.now:
                continue
            self._reclaimed.add(interruption.instance_id)
            with contextlib.suppress(NotFound):  # already gone: the controller terminated it
                self.api.call("ec2", "terminate_instances", InstanceIds=[interruption.instance_id])
            self.queue.send(self._event(
                "EC2 Instance State-change Notification",
                {"instance-id": interruption.instance_id, "state": "terminated"},
                interruption.instance_id,
            ))
            done.append(interruption)
        return done

    def _event(self, detail_type: str, detail: dict[str, str], instance_id: str) -> str:
        self._events += 1
        return json.dumps({
            "version": "0",
            "id": f"00000000-0000-4000-8000-{self._events:012d}",
            "detail-type": detail_type,
            "source": "aws.ec2",
            "account": ACCOUNT,
            "time": self.clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.region,
            "resources": [f"arn:aws:ec2:{self.region}:{ACCOUNT}:instance/{instance_id}"],
            "detail": detail,
        })


__all__ = ["INTERRUPTION_NOTICE", "Interruption", "SpotInterruptions"]
