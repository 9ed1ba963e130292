"""Interruption handling on the in-memory cluster and cloud, with the in-memory queue: each kind of EventBridge
event does what Karpenter does to the Node it names; malformed and foreign messages are deleted and counted; a
failed action leaves the message to be delivered again. Then the same over HTTP on moto's SQS."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.cloud.queue import QueueMessage
from karpenter_policy.fakes import eventbridge as events
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.fakes.queue import FakeQueue
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import Controller, ControllerOptions
from karpenter_policy.reconcile.interruption.handler import InterruptionHandler
from karpenter_policy.reconcile.runner import assemble, run_in_thread
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.simulate.kubelet import FakeKubelet
from karpenter_policy.testing import Scene, compile_policies

from .conftest import CLUSTER, REGION
from .lifecycle import WallClock, fake_cloud
from .support import FakeClock, Harness, create_all, inflate
from .test_runner import GENEROUS, eventually


@dataclass
class Interrupted:
    harness: Harness
    queue: FakeQueue
    handler: InterruptionHandler

    @property
    def cloud(self) -> FakeCloudProvider:
        assert isinstance(self.harness.cloud, FakeCloudProvider)
        return self.harness.cloud

    def node_names(self) -> list[str]:
        return sorted(objects.name(n) for n in self.harness.nodes())

    def instance_of(self, name: str) -> str:
        return node_info.instance_id(self.harness.node(name))

    def drain(self) -> None:
        """Controller passes until no Node is being deleted: termination evicts, terminates, releases."""
        for _ in range(10):
            self.harness.controller.reconcile_once()
            if not any(objects.is_deleting(n) for n in self.harness.nodes()):
                return
            self.harness.clock.advance(1)

    def metric(self, name: str, **labels: str) -> float:
        value = self.harness.controller.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


class Refusing:
    """The cluster, except that deleting a Node fails (the API server could not be reached)."""

    def __init__(self, inner: MemoryCluster) -> None:
        self.inner = inner

    def delete(
        self, kind: objects.Kind, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        raise ClusterError("the server is currently unable to handle the request", 503)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def offering_of(node: dict[str, object]) -> tuple[str, str]:
    labels = objects.labels(node)
    return labels["node.kubernetes.io/instance-type"], labels["topology.kubernetes.io/zone"]


@pytest.fixture()
def interrupted(compiled: Path, log: io.StringIO) -> Interrupted:
    """Two nodes launched for ten 1-vCPU pods (spot, the default provisioner), and a handler on an empty queue."""
    clock = FakeClock()
    wall = WallClock(clock)
    cluster = MemoryCluster(clock=wall)
    cloud = fake_cloud(clock, ["m5.xlarge", "m5.2xlarge"])
    queue = FakeQueue(clock=clock)
    controller = Controller(
        cluster, cloud, DirectorySource(compiled),
        ControllerOptions(cluster_name=CLUSTER, launch_parallelism=1, batch_max=5.0), region=REGION,
        clock=clock, wall_clock=wall, interruption_queue=queue,
    )
    harness = Harness(cluster, cloud, controller, FakeKubelet(cluster, clock), clock, log)
    create_all(cluster, objects.POD, inflate(0, 10))
    harness.batch()
    assert len(harness.nodes()) >= 2 and harness.unbound() == []
    assert controller.interruption is not None
    controller.feed.sync()  # the state follows the cluster up to now: the handler matches messages against it
    return Interrupted(harness, queue, controller.interruption)


def test_a_spot_interruption_warning_deletes_the_node_terminates_it_and_marks_its_offering(
    interrupted: Interrupted,
) -> None:
    victim, other = interrupted.node_names()[:2]
    instance = interrupted.instance_of(victim)
    node = interrupted.harness.node(victim)
    offering = offering_of(node)
    interrupted.queue.send(events.spot_interruption(instance))

    result = interrupted.handler.poll_once()

    assert result.acted == {victim: "CordonAndDrain"} and result.draining == [victim]
    assert objects.is_deleting(interrupted.harness.node(victim)), "the node is being deleted"
    on_victim = [p for p in interrupted.harness.pods() if p["spec"].get("nodeName") == victim]
    assert on_victim, "its pods are still there: termination drains them"
    interrupted.drain()
    assert interrupted.harness.cluster.get(objects.NODE, victim) is None, "the node is gone"
    assert interrupted.cloud.get(instance) is None, "its instance is terminated"
    assert not [p for p in interrupted.harness.pods() if p["spec"].get("nodeName") == victim], "pods evicted"
    assert "Cordoned node" in interrupted.harness.messages()
    assert interrupted.harness.cluster.get(objects.NODE, other) is not None, "other nodes are left alone"
    assert interrupted.queue.visible() == 0 and result.deleted == 1
    assert interrupted.cloud.unavailable.is_unavailable(*offering, "spot"), "the offering is not tried again soon"
    reasons = [e["reason"] for e in interrupted.harness.events() if e["involvedObject"]["name"] == victim]
    assert "SpotInterrupted" in reasons and "TerminatingOnInterruption" in reasons
    assert "initiating delete from interruption message" in interrupted.harness.messages()
    assert interrupted.metric(
        "karpenter_interruption_received_messages", message_type="SpotInterruptionKind"
    ) == 1
    actions = "karpenter_interruption_actions_performed"
    assert interrupted.metric(actions, action_type="CordonAndDrain") == 1


def test_a_rebalance_recommendation_only_records_an_event(interrupted: Interrupted) -> None:
    victim = interrupted.node_names()[0]
    interrupted.queue.send(events.rebalance_recommendation(interrupted.instance_of(victim)))

    result = interrupted.handler.poll_once()

    assert result.acted == {victim: "NoAction"} and result.draining == []
    assert not objects.is_deleting(interrupted.harness.node(victim)), "the node stays"
    assert interrupted.queue.visible() == 0
    reasons = [e["reason"] for e in interrupted.harness.events() if e["involvedObject"]["name"] == victim]
    assert "SpotRebalanceRecommendation" in reasons and "TerminatingOnInterruption" not in reasons


def test_a_capacity_reservation_interruption_deletes_the_node_and_leaves_its_reservation_no_room(
    interrupted: Interrupted,
) -> None:
    """aws v1.14.1 pkg/controllers/interruption/suite_test.go:150 "should delete the NodeClaim when receiving a
    capacity reservation interruption warning" and :296 "should mark the capacity reservation as unavailable when
    getting an interruption warning": the message (parser: messages/capacityreservationinterruption/parser.go) deletes
    the claim (utils.go `actionForMessage`: CordonAndDrain), Events `CapacityReservationInstanceInterrupted`
    (events.go:44) and takes the node's reservation's room to 0 (utils.go:144-149 `MarkUnavailable`)."""
    victim, other = interrupted.node_names()[:2]
    reservation = "cr-56fac701cc1951b03"
    interrupted.harness.cluster.patch(objects.NODE, victim, {"metadata": {"labels": {
        "karpenter.k8s.aws/capacity-reservation-id": reservation,
        "karpenter.k8s.aws/capacity-reservation-type": "default",
    }}})
    interrupted.harness.controller.feed.sync()
    interrupted.queue.send(events.capacity_reservation_interruption(interrupted.instance_of(victim)))

    result = interrupted.handler.poll_once()

    assert result.acted == {victim: "CordonAndDrain"} and result.draining == [victim]
    assert objects.is_deleting(interrupted.harness.node(victim)), "the node is being deleted"
    assert not objects.is_deleting(interrupted.harness.node(other)), "other nodes are left alone"
    assert interrupted.queue.visible() == 0 and result.deleted == 1
    assert interrupted.cloud.unavailable_reservations == {reservation}
    reasons = [e["reason"] for e in interrupted.harness.events() if e["involvedObject"]["name"] == victim]
    assert "CapacityReservationInstanceInterrupted" in reasons and "TerminatingOnInterruption" in reasons
    assert interrupted.metric(
        "karpenter_interruption_received_messages", message_type="CapacityReservationInterruptionKind"
    ) == 1


@pytest.mark.parametrize(
    ("state", "reason"),
    [("stopping", "InstanceStopping"), ("stopped", "InstanceStopping"),
     ("shutting-down", "InstanceTerminating"), ("terminated", "InstanceTerminating")],
)
def test_an_instance_stopping_or_terminating_deletes_its_node(
    interrupted: Interrupted, state: str, reason: str
) -> None:
    victim = interrupted.node_names()[0]
    instance = interrupted.instance_of(victim)
    interrupted.queue.send(events.state_change(instance, state))

    result = interrupted.handler.poll_once()

    assert result.acted == {victim: "CordonAndDrain"}
    interrupted.drain()
    assert interrupted.harness.cluster.get(objects.NODE, victim) is None
    assert interrupted.cloud.get(instance) is None
    assert reason in [e["reason"] for e in interrupted.harness.events() if e["involvedObject"]["name"] == victim]
    assert interrupted.metric(
        "karpenter_interruption_received_messages", message_type="StateChangeKind"
    ) == 1


def test_running_and_pending_state_changes_are_read_and_ignored(interrupted: Interrupted) -> None:
    victim = interrupted.node_names()[0]
    interrupted.queue.send(events.state_change(interrupted.instance_of(victim), "running"))
    interrupted.queue.send(events.state_change(interrupted.instance_of(victim), "pending"))

    result = interrupted.handler.poll_once()

    assert result.acted == {} and result.deleted == 2 and interrupted.queue.visible() == 0
    assert not objects.is_deleting(interrupted.harness.node(victim))
    assert interrupted.metric("karpenter_interruption_received_messages", message_type="NoOpKind") == 2


def test_a_scheduled_change_deletes_every_node_it_names(interrupted: Interrupted) -> None:
    names = interrupted.node_names()
    instances = [interrupted.instance_of(n) for n in names]
    interrupted.queue.send(events.scheduled_change(*instances, "i-0notours000000000"))

    result = interrupted.handler.poll_once()

    assert result.acted == dict.fromkeys(names, "CordonAndDrain")
    interrupted.drain()
    assert interrupted.harness.nodes() == []
    assert all(interrupted.cloud.get(i) is None for i in instances)
    assert all(
        "InstanceUnhealthy" in [e["reason"] for e in interrupted.harness.events() if e["involvedObject"]["name"] == n]
        for n in names
    )


def test_a_health_event_of_another_category_is_not_acted_on(interrupted: Interrupted) -> None:
    victim = interrupted.node_names()[0]
    interrupted.queue.send(events.scheduled_change(interrupted.instance_of(victim), category="issue"))

    result = interrupted.handler.poll_once()

    assert result.acted == {} and result.deleted == 1
    assert not objects.is_deleting(interrupted.harness.node(victim))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object, got a list"),
        ('{"version": "0", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning", '
         '"detail": {"instance-id": 7}}', "detail.instance-id: expected a string, got a number"),
        ('{"version": "0", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning", '
         '"detail": {}}', "detail.instance-id: missing"),
        ('{"version": "0", "source": "aws.ec2", "time": "yesterday", "detail-type": "x"}', "time: 'yesterday'"),
        ("[" * 100_000, "not JSON"),
        ('{"version": "0", "source": "aws.ec2", "detail-type": "EC2 Capacity Reservation Instance Interruption '
         'Warning", "detail": {"instance-id": ["i-1"]}}', "detail.instance-id: expected a string, got a list"),
        ('{"version": "0", "source": "aws.ec2", "detail-type": "EC2 Capacity Reservation Instance Interruption '
         'Warning", "detail": "i-1"}', "detail: expected an object, got a string"),
    ],
)
def test_a_malformed_message_is_deleted_counted_and_logged_and_the_next_one_handled(
    interrupted: Interrupted, body: str, why: str
) -> None:
    victim = interrupted.node_names()[0]
    interrupted.queue.send(body)
    interrupted.queue.send(events.spot_interruption(interrupted.instance_of(victim)))

    result = interrupted.handler.poll_once()

    (reason,) = result.malformed.values()
    assert why in reason
    assert result.deleted == 2 and interrupted.queue.visible() == 0
    assert result.acted == {victim: "CordonAndDrain"}, "the good message after it is handled"
    assert interrupted.metric("karpenter_policy_interruption_malformed_messages_total") == 1
    assert any(line.startswith("parsing message,") for line in interrupted.harness.messages())


def test_foreign_events_and_instances_not_ours_are_deleted_without_action(interrupted: Interrupted) -> None:
    interrupted.queue.send(events.foreign())
    interrupted.queue.send(events.spot_interruption("i-0notours000000000"))
    interrupted.queue.send("")

    result = interrupted.handler.poll_once()

    assert result.acted == {} and result.malformed == {} and result.deleted == 3
    assert len(interrupted.harness.nodes()) >= 2 and interrupted.queue.visible() == 0


def test_messages_of_another_account_or_region_are_deleted_counted_and_not_acted_on(
    interrupted: Interrupted,
) -> None:
    h = interrupted.harness
    handler = InterruptionHandler(
        h.cluster, h.cloud, interrupted.queue, metrics=h.controller.metrics, account=events.ACCOUNT, region=REGION,
    )
    victim = interrupted.node_names()[0]
    instance = interrupted.instance_of(victim)
    interrupted.queue.send(events.elsewhere(events.spot_interruption(instance), account="210987654321"))
    interrupted.queue.send(events.elsewhere(events.state_change(instance, "terminated"), region="eu-west-1"))
    interrupted.queue.send(events.elsewhere(events.scheduled_change(instance), account="210987654321"))

    result = handler.poll_once()

    assert result.acted == {} and result.draining == [] and not result.failed
    assert sorted(result.foreign.values()) == ["account", "account", "region"]
    assert result.deleted == 3 and interrupted.queue.visible() == 0, "deleted: they would come back for ever"
    assert not objects.is_deleting(h.node(victim)), "another account's instance id is not our node's"
    assert interrupted.metric("karpenter_policy_interruption_foreign_messages_total", reason="account") == 2
    assert interrupted.metric("karpenter_policy_interruption_foreign_messages_total", reason="region") == 1
    assert interrupted.metric("karpenter_interruption_actions_performed", action_type="CordonAndDrain") == 0

    interrupted.queue.send(events.spot_interruption(instance))  # our account and region: acted on
    assert handler.poll_once().acted == {victim: "CordonAndDrain"}


def test_a_message_whose_action_failed_comes_back_and_is_handled_then(interrupted: Interrupted) -> None:
    victim = interrupted.node_names()[0]
    instance = interrupted.instance_of(victim)
    interrupted.queue.send(events.spot_interruption(instance))
    interrupted.handler.cluster = Refusing(interrupted.harness.cluster)

    failed = interrupted.handler.poll_once()

    assert failed.kept == 1 and failed.deleted == 0 and interrupted.queue.visible() == 1
    assert failed.failed, "a failed reconcile, as Karpenter's handleMessage error"
    assert not objects.is_deleting(interrupted.harness.node(victim)), "the API refused: the node stays"
    interrupted.handler.cluster = interrupted.harness.cluster
    assert interrupted.handler.poll_once().received == 0, "hidden until its visibility timeout ends"
    interrupted.harness.clock.advance(21)
    again = interrupted.handler.poll_once()
    assert again.deleted == 1 and interrupted.queue.visible() == 0
    interrupted.drain()
    assert interrupted.cloud.get(instance) is None and interrupted.harness.cluster.get(objects.NODE, victim) is None
    # Logged at each attempt to delete the Node: the one the API refused, and the one that worked.
    assert interrupted.harness.messages().count("initiating delete from interruption message") == 2
    assert any("could not delete node" in m and "unable to handle the request" in m
               for m in interrupted.harness.messages())


def test_a_queue_that_cannot_be_read_is_reported_not_raised(interrupted: Interrupted) -> None:
    interrupted.queue.fail_next("receive", CloudError("https://sqs", "connection refused", "receive"))
    result = interrupted.handler.poll_once()
    assert result.error is not None and "connection refused" in result.error and result.failed
    assert interrupted.metric("karpenter_policy_interruption_queue_errors_total", operation="receive") == 1


def test_a_queue_that_cannot_be_read_is_a_failed_reconcile_of_the_interruption_controller(
    interrupted: Interrupted, compiled: Path
) -> None:
    """As Karpenter's controller returns the receive error: `controller_runtime_reconcile_errors_total
    {controller="interruption"}` counts it, and the runner goes on polling."""
    h = interrupted.harness
    interrupted.queue.fail_next("receive", NotFound("https://sqs", "queue interruption does not exist", "Receive"))
    runner = assemble(  # the threaded runner's controller on the same cluster, cloud and queue, in the same time
        h.cluster, h.cloud, DirectorySource(compiled), h.controller.options, region=REGION, resync=1.0,
        clock=h.clock, wall_clock=h.controller.wall_clock, interruption_queue=interrupted.queue,
    )

    def metric(name: str, **labels: str) -> float:
        return runner.controller.metrics.registry.get_sample_value(name, labels) or 0.0

    thread = run_in_thread(runner)
    try:
        assert eventually(lambda: metric("controller_runtime_reconcile_errors_total", controller="interruption") == 1)
        assert metric("controller_runtime_reconcile_total", controller="interruption", result="error") == 1
        victim = interrupted.node_names()[0]
        interrupted.queue.send(events.spot_interruption(interrupted.instance_of(victim)))
        assert eventually(lambda: interrupted.queue.visible() == 0), "polled again after the pause, and handled"
        assert metric("controller_runtime_reconcile_errors_total", controller="interruption") == 1
        assert metric("controller_runtime_reconcile_total", controller="interruption", result="requeue_after") >= 1
    finally:
        runner.stop()
        thread.join(GENEROUS)
    assert any("does not exist" in m for m in h.messages())


def test_a_replica_that_lost_the_lease_leaves_the_messages_in_the_queue(interrupted: Interrupted) -> None:
    victim = interrupted.node_names()[0]
    interrupted.queue.send(events.spot_interruption(interrupted.instance_of(victim)))
    result = interrupted.handler.poll_once(acting=lambda: False)
    assert result.kept == 1 and interrupted.queue.visible() == 1
    assert not objects.is_deleting(interrupted.harness.node(victim))


def test_a_step_of_the_controller_takes_the_queues_messages_first(interrupted: Interrupted) -> None:
    """Interruption is the first controller of the list: a step-driven pass (as `simulate` and scenes run) takes the
    warning and deletes the node, and termination, later in the same pass, cordons it (the handler shows the
    cluster state the deletion at once)."""
    h = interrupted.harness
    assert [c.name for c in h.controller.controllers][0] == "interruption"
    victim = interrupted.node_names()[0]
    interrupted.queue.send(events.spot_interruption(interrupted.instance_of(victim)))

    result = h.controller.reconcile_once()

    assert result.interrupted == {victim: "CordonAndDrain"} and interrupted.queue.visible() == 0
    assert result.terminated is not None and victim in result.terminated.cordoned
    h.clock.advance(1)
    assert h.controller.reconcile_once().interrupted == {}, "nothing left to take"


def test_the_nodes_of_an_interrupted_instance_are_replaced_for_their_pods(interrupted: Interrupted) -> None:
    """After the node is gone its pods come back pending (as their ReplicaSet recreates them): the controller
    provisions for them, avoiding the interrupted spot offering."""
    h = interrupted.harness
    victim = interrupted.node_names()[0]
    node = h.node(victim)
    offering = offering_of(node)
    on_victim = [p for p in h.pods() if p["spec"].get("nodeName") == victim]
    interrupted.queue.send(events.spot_interruption(interrupted.instance_of(victim)))
    interrupted.handler.poll_once()
    for evicted in on_victim:  # what the pod garbage collector and the ReplicaSet do
        h.cluster.delete(objects.POD, objects.name(evicted), "default")
        h.cluster.create(objects.POD, {"metadata": {**evicted["metadata"], "name": objects.name(evicted) + "-new"},
                                       "spec": {k: v for k, v in evicted["spec"].items() if k != "nodeName"}})
    h.clock.advance(1)
    h.batch()

    assert h.unbound() == []
    replaced = {(*offering_of(n), objects.labels(n)["karpenter.sh/capacity-type"]) for n in h.nodes()}
    assert on_victim and (*offering, "spot") not in replaced


class LongPolling:
    """The queue, except that a receive waits like SQS's 20 s long poll — until the test lets it answer — and says
    when it started waiting."""

    def __init__(self, inner: FakeQueue) -> None:
        self.inner = inner
        self.waiting = threading.Event()
        self.answer = threading.Event()

    def receive(self) -> list[QueueMessage]:
        self.waiting.set()
        self.answer.wait(60)
        return self.inner.receive()

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_stopping_does_not_wait_for_the_long_poll_and_what_it_receives_then_is_left_for_the_next_leader(
    interrupted: Interrupted, compiled: Path
) -> None:
    """A replica told to stop (a rolling update, SIGTERM) must let the Lease go at once, as Karpenter's cancelled
    context ends its SQS poll: the runner no longer waits up to 20 s for the interruption controller's receive.
    The messages that receive brings back after the stop are not acted on (no node deleted, none deleted from the
    queue): they come back after their visibility timeout for the next leader. (Failed before: `run` returned only
    once the receive did.)"""
    h = interrupted.harness
    queue = LongPolling(interrupted.queue)
    runner = assemble(
        h.cluster, h.cloud, DirectorySource(compiled), h.controller.options, region=REGION, resync=1.0,
        clock=h.clock, wall_clock=h.controller.wall_clock, interruption_queue=queue,
    )
    thread = run_in_thread(runner)
    try:
        assert queue.waiting.wait(GENEROUS), "the interruption controller polls the queue"
        victim = interrupted.node_names()[0]
        interrupted.queue.send(events.spot_interruption(interrupted.instance_of(victim)))
        runner.stop()
        thread.join(GENEROUS / 2)
        assert not thread.is_alive(), "the runner returned while the receive still waited"
    finally:
        runner.stop()
        queue.answer.set()
        thread.join(GENEROUS)
    (worker,) = [w for w in runner.workers if w.name == "interruption"]
    worker.thread.join(GENEROUS)
    assert not worker.thread.is_alive(), "its receive answered, and the controller's thread ended"
    assert interrupted.queue.visible() == 1, "the message stays in the queue for the next leader"
    assert victim in interrupted.node_names() and not objects.is_deleting(h.node(victim))


@pytest.fixture(scope="module")
def v1_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(Path(__file__).resolve().parents[2] / "examples" / "v1" / "controller" / "policies",
                            tmp_path_factory.mktemp("v1interruption") / "build")


@pytest.mark.parametrize(("body", "reason"), [
    (events.spot_interruption, "SpotInterrupted"),
    (events.rebalance_recommendation, "SpotRebalanceRecommendation"),
    (events.scheduled_change, "InstanceUnhealthy"),
    (lambda i: events.state_change(i, "stopping"), "InstanceStopping"),
    (lambda i: events.state_change(i, "terminated"), "InstanceTerminating"),
    (events.capacity_reservation_interruption, "CapacityReservationInstanceInterrupted"),
])
def test_every_kinds_event_goes_on_the_nodeclaim_and_the_node(
    v1_example: Path, body: Callable[[str], str], reason: str,
) -> None:
    """aws v1.14.1 pkg/controllers/interruption/events/events.go: each kind's Event (`SpotInterrupted`,
    `SpotRebalanceRecommendation`, `InstanceUnhealthy`, `InstanceStopping`, `InstanceTerminating`,
    `CapacityReservationInstanceInterrupted`) and `TerminatingOnInterruption` are published with the NodeClaim as
    involved object, then the Node (controller.go:190-205 `notifyForMessage`, utils.go:161)."""
    scene = Scene(v1_example)
    queue = scene.queue  # before the controller: it then polls it
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (node,) = scene.nodes()
    (claim,) = scene.nodeclaims()
    queue.send(body(str(scene.nodes()[node]["spec"]["providerID"]).rpartition("/")[2]))
    scene.run(controller, 5, until=lambda: any(e["reason"] == reason for e in scene.cluster.list(objects.EVENT).items))

    involved = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"], e["message"])
                for e in scene.cluster.list(objects.EVENT).items
                if e["reason"] in (reason, "TerminatingOnInterruption")]
    assert ("NodeClaim", claim, reason) in [i[:3] for i in involved]
    assert ("Node", node, reason) in [i[:3] for i in involved]
    if reason != "SpotRebalanceRecommendation":
        assert ("NodeClaim", claim, "TerminatingOnInterruption",
                "Interruption triggered termination for the NodeClaim") in involved
        assert ("Node", node, "TerminatingOnInterruption",
                "Interruption triggered termination for the Node") in involved
