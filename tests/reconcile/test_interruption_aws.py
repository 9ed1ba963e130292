"""Interruption over HTTP: the AWS provider and the SQS queue (boto3 → the fault proxy → moto's server), the
controller on an in-memory cluster; then the `reconcile --interruption-queue` command end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from karpenter_policy.cloud.aws.api import AwsConnection
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings
from karpenter_policy.cloud.aws.sqs import SqsQueue
from karpenter_policy.cloud.errors import NotFound
from karpenter_policy.fakes import eventbridge as events
from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.reconcile.command import own_account
from karpenter_policy.reconcile.interruption.handler import InterruptionHandler
from karpenter_policy.reconcile.state import nodes as node_info

from .conftest import CLUSTER, REGION, AwsWorkloads, MakeHarness
from .support import ROOT, create_all, inflate
from .test_command import GENEROUS, api_server, free_port, kubeconfig, reconcile

__all__ = ["api_server"]  # fixture, re-exported

QUEUE = "workloads-interruption"


def sqs(aws_workloads: AwsWorkloads) -> Any:
    return boto3.client("sqs", region_name=REGION, endpoint_url=aws_workloads.env.moto_url)


@pytest.fixture()
def queue_url(aws_workloads: AwsWorkloads) -> str:
    return str(sqs(aws_workloads).create_queue(QueueName=QUEUE)["QueueUrl"])


def state(aws_workloads: AwsWorkloads, instance_id: str) -> str:
    answer = aws_workloads.env.ec2.describe_instances(InstanceIds=[instance_id])
    return str(answer["Reservations"][0]["Instances"][0]["State"]["Name"])


@pytest.mark.slow
def test_each_kind_of_message_from_sqs_is_handled_and_deleted(
    make_harness: MakeHarness, aws_workloads: AwsWorkloads, queue_url: str
) -> None:
    cloud = aws_workloads.provider()
    h = make_harness(cloud=cloud, batch_max=5.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    h.batch()
    (node,) = h.nodes()
    name, instance = objects.name(node), node_info.instance_id(node)
    client = sqs(aws_workloads)
    for body in (
        events.rebalance_recommendation(instance),  # an Event only
        events.state_change(instance, "running"),  # read, ignored
        events.foreign(),
        "{broken",
    ):
        client.send_message(QueueUrl=queue_url, MessageBody=body)
    queue = SqsQueue(cloud.api, QUEUE, wait_seconds=0)
    handler = InterruptionHandler(h.cluster, cloud, queue, metrics=h.controller.metrics)

    results = [handler.poll_once() for _ in range(3)]

    assert sum(r.deleted for r in results) == 4 and sum(len(r.malformed) for r in results) == 1
    assert not objects.is_deleting(h.node(name)) and state(aws_workloads, instance) == "running"
    assert "SpotRebalanceRecommendation" in [e["reason"] for e in h.events()]

    client.send_message(QueueUrl=queue_url, MessageBody=events.scheduled_change(instance))
    results = [handler.poll_once() for _ in range(3)]

    assert sum(r.deleted for r in results) == 1
    assert objects.is_deleting(h.node(name)), "deleted: termination drains it"
    for _ in range(5):  # the controller's passes: cordon, evict, terminate, release
        h.step()
        h.clock.advance(1)
    assert h.cluster.get(objects.NODE, name) is None
    assert state(aws_workloads, instance) in ("shutting-down", "terminated"), "TerminateInstances was called"
    assert "InstanceUnhealthy" in [e["reason"] for e in h.events()]
    attributes = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_the_command_acts_for_the_account_of_its_credentials_and_ignores_another_accounts_messages(
    make_harness: MakeHarness, aws_workloads: AwsWorkloads, queue_url: str
) -> None:
    """The account comes from STS (moto's server, over HTTP); a spot interruption naming our instance but sent from
    another account's events is deleted and counted, not acted on."""
    cloud = aws_workloads.provider()
    assert own_account(cloud) == events.ACCOUNT, "moto's account, from GetCallerIdentity"
    h = make_harness(cloud=cloud, batch_max=5.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    h.batch()
    (node,) = h.nodes()
    instance = node_info.instance_id(node)
    queue = SqsQueue(cloud.api, QUEUE, wait_seconds=0)
    handler = InterruptionHandler(
        h.cluster, cloud, queue, metrics=h.controller.metrics, account=own_account(cloud), region=REGION
    )
    sqs(aws_workloads).send_message(
        QueueUrl=queue_url, MessageBody=events.elsewhere(events.spot_interruption(instance), account="210987654321")
    )

    result = handler.poll_once()

    assert result.foreign == {next(iter(result.kinds)): "account"} and result.deleted == 1 and result.acted == {}
    assert not objects.is_deleting(h.node(objects.name(node))) and state(aws_workloads, instance) == "running"


def test_an_account_sts_cannot_tell_is_none_and_logged(log: Any) -> None:
    cloud = AwsCloudProvider(
        AwsConnection(REGION, endpoint_url="http://127.0.0.1:9", max_attempts=1, connect_timeout=1.0),
        ClusterSettings(endpoint="https://example", ca_bundle="", kubernetes_version="1.27"), [],
    )
    assert own_account(cloud) is None
    assert "cannot tell the controller's AWS account" in log.getvalue()


@pytest.mark.slow
def test_a_queue_that_does_not_exist_is_not_found(aws_workloads: AwsWorkloads) -> None:
    cloud = aws_workloads.provider()
    with pytest.raises(NotFound, match="queue nowhere does not exist"):
        SqsQueue(cloud.api, "nowhere", wait_seconds=0).check()


def test_the_command_refuses_an_interruption_queue_that_does_not_exist(
    compiled: Path, aws_workloads: AwsWorkloads, tmp_path: Path
) -> None:
    result = reconcile(
        "--constraints", str(compiled), "--cluster-name", CLUSTER,
        "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")),
        "--endpoint-url", aws_workloads.env.proxy.url, "--kubernetes-version", "1.27", "--metrics-port", "0",
        "--interruption-queue", "nowhere",
    )
    assert result.returncode == 2, result.stderr
    assert "--interruption-queue nowhere: the queue does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture()
def running_command(
    compiled: Path, api_server: Any, aws_workloads: AwsWorkloads, tmp_path: Path, queue_url: str
) -> Iterator[tuple[KubeCluster, subprocess.Popen[str]]]:
    cluster = KubeCluster.from_url(api_server.url)
    command = [
        sys.executable, "-m", "karpenter_policy.cli", "reconcile",
        "--constraints", str(compiled), "--cluster-name", CLUSTER,
        "--kubeconfig", str(kubeconfig(tmp_path / "kubeconfig", api_server.url)),
        "--endpoint-url", aws_workloads.env.proxy.url, "--kubernetes-version", "1.27",
        "--default-instance-profile", "KarpenterNodeInstanceProfile-workloads",
        "--provision-all-pending", "--batch-idle-duration", "200ms",
        "--metrics-port", str(free_port()), "--metrics-address", "127.0.0.1",
        "--interruption-queue", QUEUE,
    ]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        yield cluster, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=GENEROUS)
        finally:
            process.kill()
            cluster.close()


def wait_for(predicate: Any, timeout: float = GENEROUS) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return bool(predicate())


@pytest.mark.slow
def test_the_command_deletes_the_node_of_a_spot_interruption_and_survives_a_malformed_message(
    running_command: tuple[KubeCluster, subprocess.Popen[str]], aws_workloads: AwsWorkloads, queue_url: str
) -> None:
    cluster, process = running_command
    for item in inflate(0, 3):
        cluster.create(objects.POD, item)
    assert wait_for(lambda: len(cluster.list(objects.NODE).items) == 1), "a node is launched"
    (node,) = cluster.list(objects.NODE).items
    instance = node_info.instance_id(node)
    client = sqs(aws_workloads)
    client.send_message(QueueUrl=queue_url, MessageBody="not an event")
    client.send_message(QueueUrl=queue_url, MessageBody=events.spot_interruption(instance))

    def gone() -> bool:
        found = cluster.get(objects.NODE, objects.name(node))
        return found is None or objects.is_deleting(found)

    assert wait_for(gone), "the interrupted node is deleted"
    assert wait_for(lambda: state(aws_workloads, instance) in ("shutting-down", "terminated"))
    assert wait_for(lambda: client.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"] == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"})
    assert process.poll() is None, "still running after a malformed message"
