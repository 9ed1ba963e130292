"""The options of `karpenter-policy reconcile`, declared once (`optionspec`): each flag's default, help text and
spelling. `command` starts the controller from them; `ControllerOptions` (`options`) takes its batching and
registration defaults from here. Light on purpose: the CLI imports it to make its flags, without the controller.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from karpenter_policy.api.v1.featuregateflag import controller_feature_gates
from karpenter_policy.api.v1.featuregates import FEATURE_GATES_HELP
from karpenter_policy.model.minvalues import POLICIES, STRICT
from karpenter_policy.optionspec import OptionValueError, log_format_option, log_level_option, option, required

#: Karpenter's batching: a window closes 1 s after the last pod, 10 s after it opened at most.
DEFAULT_IDLE_SECONDS = 1.0
DEFAULT_MAX_SECONDS = 10.0
#: Karpenter's registration TTL (`nodeclaim/lifecycle/liveness.go`, `registrationTTL`): a launched node whose kubelet
#: has not joined within 15 minutes is deleted.
DEFAULT_REGISTRATION_TTL = 900.0
#: The scheduling strategies (`scheduling.STRATEGIES`; spelt here so that the CLI need not import the scheduler).
STRATEGY_NAMES = ("cost", "karpenter")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def read_duration(value: str) -> float:
    """`1s`, `500ms`, `2m`, `1.5` (seconds) → seconds; ValueError says why not. A number too large for a float
    (hundreds of digits) reads as infinity: refused too, as no timer can wait for it."""
    match = _DURATION.match(str(value))
    seconds = float(match[1]) * _UNITS[match[2]] if match else 0.0
    if not 0 < seconds < math.inf:
        shown = value if len(value) <= 64 else f"{value[:32]}… ({len(value)} characters)"
        raise ValueError(f"{shown!r}: expected a positive finite duration such as 1s, 500ms or 2m")
    return seconds


def duration_text(seconds: float) -> str:
    """Seconds as the flags write a duration: 900.0 → `15m`, 1.0 → `1s`, 0.5 → `500ms`."""
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    milliseconds = seconds * 1000
    if milliseconds == int(milliseconds):
        return f"{int(milliseconds)}ms"
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def _duration(default: float, *names: str, help: str) -> float:
    result: float = option(default, *names, help=help, show_default=True, read=read_duration, show=duration_text)
    return result


@dataclass(frozen=True, slots=True)
class ReconcileOptions:
    """`karpenter-policy reconcile`'s flags (docs/reconcile.md, "Flags"), in --help's order."""

    constraints: str = required(
        "--constraints", metavar="DIR|configmap/NAMESPACE/NAME", help="Compiled constraint sets."
    )
    cluster_name: str = required("--cluster-name", help="The cluster's name (instance tags, node bootstrap).")
    kubeconfig: str | None = option(None, "--kubeconfig", path="file", help="Default: in-cluster, else ~/.kube/config.")
    context: str | None = option(None, "--context", help="Kubeconfig context (default: the current one).")
    region: str | None = option(None, "--region", help="EC2 region (default: the constraint sets').")
    endpoint_url: str | None = option(
        None, "--endpoint-url", metavar="URL", help="AWS endpoint for every service (e.g. a proxy)."
    )
    log_format: str = log_format_option()
    log_level: str = log_level_option()
    batch_idle: float = _duration(DEFAULT_IDLE_SECONDS, "--batch-idle-duration", help="Batch closes after this idle.")
    batch_max: float = _duration(
        DEFAULT_MAX_SECONDS, "--batch-max-duration", help="Close a batch after this long at most."
    )
    metrics_port: int = option(8080, "--metrics-port", int_range=(0, 65535), show_default=True, help="0: no metrics.")
    metrics_address: str = option("0.0.0.0", "--metrics-address", show_default=True)
    kubernetes_version: str | None = option(
        None, "--kubernetes-version", metavar="X.Y", help="The control plane's version (picks the EKS AMIs). Required."
    )
    api_server_endpoint: str | None = option(
        None, "--api-server-endpoint", metavar="URL", help="What nodes join (default: the kubeconfig's server)."
    )
    ca_bundle: str | None = option(
        None, "--ca-bundle", metavar="BASE64", help="Cluster CA (default: kubeconfig's or in-cluster)."
    )
    dns_cluster_ip: str | None = option(
        None, "--dns-cluster-ip", help="Cluster DNS IP for the kubelet (default: the AMI's)."
    )
    default_instance_profile: str | None = option(
        None, "--default-instance-profile", help="For node templates that name no instanceProfile."
    )
    catalog_file: str | None = option(None, "--catalog", path="file", help="Region's catalog.")
    unschedulable_only: bool = option(
        True,
        "--provision-unschedulable-only/--provision-all-pending",
        show_default=True,
        help="Wait for kube-scheduler's Unschedulable mark (a real cluster), or take every unbound pod and bind it.",
    )
    leader_elect: bool = option(
        True, "--leader-elect/--no-leader-elect", show_default=True, help="One active replica (a Lease)."
    )
    leader_election_namespace: str | None = option(
        None, "--leader-election-namespace", help="Namespace of the Lease (default: the pod's, else default)."
    )
    strategy: str = option(STRATEGY_NAMES[0], "--strategy", choices=STRATEGY_NAMES, show_default=True)
    min_values_policy: str = option(
        STRICT,
        "--min-values-policy",
        choices=POLICIES,
        show_default=True,
        help="How a v1 NodePool's minValues are kept when packing, as Karpenter's operator flag: Strict (no node "
        "whose instance types miss it) or BestEffort (lowered to what is left; the node says so).",
    )
    feature_gates: str = controller_feature_gates(FEATURE_GATES_HELP)
    interruption_queue: str | None = option(
        None, "--interruption-queue", metavar="NAME", help="SQS queue of EventBridge interruption events."
    )
    registration_ttl: float = _duration(
        DEFAULT_REGISTRATION_TTL,
        "--registration-ttl",
        help="Delete a node whose kubelet has not joined this long after its launch (Karpenter's liveness).",
    )

    def __post_init__(self) -> None:
        if not self.cluster_name:
            raise OptionValueError("--cluster-name is required")
        if self.batch_max < self.batch_idle:
            raise OptionValueError("--batch-max-duration must be at least --batch-idle-duration")


__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_REGISTRATION_TTL",
    "STRATEGY_NAMES",
    "ReconcileOptions",
    "duration_text",
    "read_duration",
]
