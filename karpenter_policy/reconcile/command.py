"""`karpenter-policy reconcile`: options in, a running controller out (and configuration errors as exit code 2).

Start-up order: the log format; the cluster (`--kubeconfig` / `--context`, else the pod's service account when
running in a cluster, else the default kubeconfig); the constraint sets, which must load (a directory, or the
ConfigMap `configmap/NAMESPACE/NAME`): nothing is launched from a version nobody reviewed, and a controller with
nothing to act on says so and exits 2; the region (`--region`, else the sets'); the catalog of that region; the
AWS provider (`--endpoint-url` for a VPC endpoint proxy or a test server) and what nodes join: the API server
endpoint and CA bundle (flags, else the kubeconfig's cluster or the service account's CA) and the Kubernetes
version (for the EKS AMIs); the interruption queue (`--interruption-queue`: it must exist); then the metrics
server, leader election, the informers, and the passes.

SIGTERM or SIGINT stops the passes (the one under way finishes), releases the lease and exits 0.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from karpenter_policy.api.v1.featuregates import reserved_capacity, static_capacity
from karpenter_policy.catalog import CatalogError, load_catalog
from karpenter_policy.cloud.aws.api import AwsConnection
from karpenter_policy.cloud.aws.identity import caller_account
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings
from karpenter_policy.cloud.aws.sqs import SqsQueue
from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.constraints import Loaded, Refused, SourceError, source_for
from karpenter_policy.reconcile.controller import REASON_REFUSED, Controller, ControllerOptions
from karpenter_policy.reconcile.flags import ReconcileOptions
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.probes import ProbeServer
from karpenter_policy.reconcile.runner import Runner, assemble
from karpenter_policy.scheduling import STRATEGIES

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
LEASE_NAME = "karpenter-policy-reconcile"
LOG = logs.logger("command")


class StartupError(Exception):
    """The controller cannot start (exit 2)."""


# --- the cluster ---------------------------------------------------------------------------------------------


def _in_cluster(options: ReconcileOptions) -> bool:
    return not options.kubeconfig and not options.context and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def connect(options: ReconcileOptions) -> KubeCluster:
    try:
        if _in_cluster(options):
            return KubeCluster.in_cluster()
        return KubeCluster.from_kubeconfig(options.kubeconfig, options.context)
    except ClusterError as error:
        raise StartupError(str(error)) from None


def _kubeconfig_cluster(options: ReconcileOptions) -> Mapping[str, Any]:
    """The `cluster` entry of the kubeconfig's (current) context, or {} when it cannot be told."""
    path = options.kubeconfig or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or "~/.kube/config"
    try:
        config = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
        name = options.context or config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == name)
        return dict(next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"]))
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration):
        return {}


def join_settings(options: ReconcileOptions, cluster: KubeCluster) -> tuple[str, str]:
    """The API server endpoint and CA bundle (base64) nodes join with (see the module docstring)."""
    if _in_cluster(options):
        endpoint = options.api_server_endpoint
        if not endpoint:
            raise StartupError(
                "--api-server-endpoint is required in a cluster (the endpoint nodes join, e.g. the EKS endpoint: "
                "the in-cluster service address is not reachable from a node that is starting)"
            )
        ca = options.ca_bundle
        if not ca:
            try:
                ca = base64.b64encode((SERVICE_ACCOUNT / "ca.crt").read_bytes()).decode()
            except OSError as error:
                raise StartupError(f"no --ca-bundle, and the service account's CA is unreadable: {error}") from None
        return endpoint, ca
    entry = _kubeconfig_cluster(options)
    endpoint = options.api_server_endpoint or str(entry.get("server") or cluster.host)
    ca = options.ca_bundle or str(entry.get("certificate-authority-data") or "")
    if not ca and entry.get("certificate-authority"):
        try:
            ca = base64.b64encode(Path(str(entry["certificate-authority"])).expanduser().read_bytes()).decode()
        except OSError as error:
            raise StartupError(f"the kubeconfig's certificate-authority is unreadable: {error}") from None
    return endpoint, ca


def _lease_namespace(options: ReconcileOptions) -> str:
    if options.leader_election_namespace:
        return options.leader_election_namespace
    try:
        return (SERVICE_ACCOUNT / "namespace").read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


# --- start-up ------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Reconciler:
    """A built (not yet running) controller and what runs it."""

    controller: Controller
    runner: Runner
    elector: LeaderElector | None
    metrics: Metrics


def controller_options_of(options: ReconcileOptions) -> ControllerOptions:
    """How the controller behaves, from the command's flags; the rest at `ControllerOptions`' defaults."""
    return ControllerOptions(
        cluster_name=options.cluster_name,
        batch_idle=options.batch_idle,
        batch_max=options.batch_max,
        unschedulable_only=options.unschedulable_only,
        bind_existing=not options.unschedulable_only,
        strategy=options.strategy,
        min_values_policy=options.min_values_policy,
        registration_ttl=options.registration_ttl,
        static_capacity=static_capacity(options.feature_gates),
        reserved_capacity=reserved_capacity(options.feature_gates),
    )


def build(options: ReconcileOptions) -> Reconciler:
    """Everything up to the first pass (see the module docstring). Raises StartupError."""
    if options.strategy not in STRATEGIES:
        raise StartupError(f"--strategy {options.strategy!r}: one of {', '.join(STRATEGIES)}")
    if not options.kubernetes_version:
        raise StartupError("--kubernetes-version is required (the control plane's, e.g. 1.27: it picks the EKS AMIs)")
    cluster = connect(options)
    try:
        source = source_for(options.constraints, cluster)
    except SourceError as error:
        raise StartupError(str(error)) from None
    first = source.poll()
    if not isinstance(first, Loaded):
        why = first.message if isinstance(first, Refused) else "nothing to read"
        if isinstance(first, Refused) and first.involved is not None:
            with contextlib.suppress(ClusterError):
                cluster.record_event(first.involved, REASON_REFUSED, f"refused constraint sets: {why}", "Warning")
        raise StartupError(f"cannot load the constraint sets from {source.description}: {why}")
    regions = sorted({s.region for s in first.sets if s.region})
    region = options.region or (regions[0] if len(regions) == 1 else None)
    if region is None:
        raise StartupError(
            f"--region is required: the constraint sets name {', '.join(regions) or 'no region'}"
        )
    try:
        catalog = load_catalog(Path(options.catalog_file)) if options.catalog_file else load_catalog(region=region)
    except CatalogError as error:
        raise StartupError(f"cannot load the catalog for {region} (give --catalog FILE): {error}") from None
    if catalog.region != region:
        raise StartupError(f"the catalog is for {catalog.region}, the controller launches in {region}")
    endpoint, ca_bundle = join_settings(options, cluster)
    controller_options = controller_options_of(options)
    cloud = AwsCloudProvider(
        AwsConnection(
            region, endpoint_url=options.endpoint_url, max_pool_connections=controller_options.launch_parallelism
        ),
        ClusterSettings(
            endpoint=endpoint,
            ca_bundle=ca_bundle,
            kubernetes_version=options.kubernetes_version,
            dns_cluster_ip=options.dns_cluster_ip,
            default_instance_profile=options.default_instance_profile,
            name=options.cluster_name,
        ),
        list(catalog.instance_types),
    )
    queue = interruption_queue(cloud, options.interruption_queue) if options.interruption_queue else None
    elector = None
    if options.leader_elect:
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        elector = LeaderElector(cluster, _lease_namespace(options), LEASE_NAME, identity)
    runner = assemble(
        cluster, cloud, source, controller_options, region=region, elector=elector, interruption_queue=queue,
        account=own_account(cloud) if queue is not None else None,
    )
    controller = runner.controller
    controller.take(first)
    return Reconciler(controller, runner, elector, controller.metrics)


def interruption_queue(cloud: AwsCloudProvider, name: str) -> SqsQueue:
    """The SQS queue; a queue that does not exist is a configuration error, one that cannot be reached now is
    tried again by the passes."""
    queue = SqsQueue(cloud.api, name)
    try:
        queue.check()
    except NotFound:
        raise StartupError(f"--interruption-queue {name}: the queue does not exist") from None
    except CloudError as error:
        LOG.warning("interruption queue %s cannot be reached yet, %s", name, error, extra=logs.fields())
    return queue


def own_account(cloud: AwsCloudProvider) -> str | None:
    """The account of the controller's credentials, which its interruption handler acts for (None when STS cannot
    tell: messages are then not checked against an account, only a region)."""
    try:
        return caller_account(cloud.api)
    except CloudError as error:
        LOG.warning(
            "cannot tell the controller's AWS account, interruption messages of any account are acted on, %s",
            error, extra=logs.fields(),
        )
        return None


def main(options: ReconcileOptions) -> int:
    """`karpenter-policy reconcile` with its options (`flags`); the exit code."""
    try:
        logs.configure(sys.stderr, options.log_format, logs.level_of(options.log_level))
        reconciler = build(options)
    except StartupError as error:
        print(f"karpenter-policy reconcile: {error}", file=sys.stderr)
        return 2
    return run(reconciler, options)


def run(reconciler: Reconciler, options: ReconcileOptions) -> int:
    runner = reconciler.runner

    def on_signal(signum: int, frame: FrameType | None) -> None:
        LOG.info("received %s, stopping", signal.Signals(signum).name, extra=logs.fields())
        runner.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    server: ProbeServer | None = None
    if options.metrics_port:
        try:
            server = ProbeServer(
                options.metrics_address, options.metrics_port, reconciler.metrics.registry, runner.health
            ).start()
        except OSError as error:
            print(f"karpenter-policy reconcile: --metrics-port {options.metrics_port}: {error}", file=sys.stderr)
            return 2
    controller = reconciler.controller
    LOG.info(
        "reconciling cluster %s from %s (%s)",
        options.cluster_name,
        controller.constraints.description,
        "provisioning for pods kube-scheduler marked Unschedulable"
        if options.unschedulable_only
        else "provisioning for every pending pod, binding them",
        extra=logs.fields(metricsPort=options.metrics_port or None, interruptionQueue=options.interruption_queue),
    )
    if reconciler.elector is not None:
        reconciler.elector.start()
    try:
        runner.run()
    finally:
        if reconciler.elector is not None:
            reconciler.elector.stop()
        if server is not None:
            server.shutdown()
    LOG.info("stopped", extra=logs.fields())
    return 0


__all__ = ["ReconcileOptions", "StartupError", "build", "controller_options_of", "main"]
