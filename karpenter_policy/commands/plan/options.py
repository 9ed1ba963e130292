"""The options of `karpenter-policy plan`, declared once (`optionspec`): light, so the CLI makes its flags without
loading the plan. BASE, HEAD and PATHS are its arguments."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from karpenter_policy.api.v1.featuregateflag import controller_feature_gates
from karpenter_policy.api.v1.featuregates import PLAN_FEATURE_GATES_HELP
from karpenter_policy.checks.options import REGION_HELP, PolicyOptions
from karpenter_policy.optionspec import argument, like, option

__all__ = ["FORMATS", "PlanOptions"]

FORMATS = ("text", "json", "markdown")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOptions:
    """`karpenter-policy plan`'s arguments and flags (docs/plan.md)."""

    base: str = argument(dataclasses.MISSING, "base")
    head: str = argument(dataclasses.MISSING, "head")
    paths: tuple[str, ...] = argument((), "paths", nargs=-1, path="any")

    snapshot: tuple[str, ...] = option(
        (),
        "--snapshot",
        multiple=True,
        metavar="FILE",
        help="What `kubectl get nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json` printed "
        "(repeatable; - for stdin). This or --kubeconfig.",
    )
    kubeconfig: str | None = option(
        None, "--kubeconfig", path="file",
        help="Read the snapshot from this kubeconfig's cluster (read-only: list nodes, pods, pdb, daemonsets, "
        "nodeclaims). This or --snapshot.",
    )
    context: str | None = option(None, "--context", help="The kubeconfig's context (default: its current one).")
    request_timeout: str = option(
        "30s", "--request-timeout", metavar="DURATION", show_default=True,
        help="How long reading the cluster of --kubeconfig may take in all, every request and retry included "
        "(a Go duration: 30s, 2m); a server that does not answer in time is exit 2.",
    )
    start: str | None = option(
        None, "--start", metavar="TIME",
        help="When the rollout starts (RFC 3339, e.g. 2026-11-30T09:00:00Z; default: now).",
    )
    horizon: str = option(
        "24h", "--horizon", metavar="DURATION", show_default=True,
        help="Also plan the nodes that expire this long after --start (a Go duration: 24h, 90m, 0s), at their time.",
    )
    consolidation_timeout: str = option(
        "60s", "--consolidation-timeout", metavar="DURATION", show_default=True,
        help="With BASE = HEAD: how long working out what consolidation would do now may take (a Go duration; 0s: "
        "not at all). Past it, the moves found so far, with a note.",
    )
    rollout_timeout: str = option(
        "120s", "--rollout-timeout", metavar="DURATION", show_default=True,
        help="How long planning the rollout may take (a Go duration, more than 0; v0.31's and v1's waves together). "
        "Past it, the waves planned so far, the other nodes blocked, with a note (exit 1 unless --allow-stranded).",
    )
    output: str = option("text", "--output", choices=FORMATS, show_default=True,
                         help="text, json, or markdown (a pull-request comment).")
    drift_disabled: bool = option(
        False, "--drift-disabled", is_flag=True,
        help="Model a cluster that keeps Karpenter v0.31's featureGates.driftEnabled off (default: on, as this "
        "project's controller runs).",
    )
    redact: bool = option(
        False, "--redact", is_flag=True,
        help="Name the snapshot's nodes, pods, namespaces and workloads by a stable hash in every output, and keep "
        "no env, image or annotation but Karpenter's (docs/plan.md).",
    )
    allow_stranded: bool = option(
        False, "--allow-stranded", is_flag=True,
        help="Exit 0 even when the plan leaves pods pending or can never finish.",
    )
    node_startup: float = option(60.0, "--node-startup", metavar="SECONDS", float_range=(0, 3600), show_default=True,
                                 help="Seconds a replacement node takes to be initialized.")
    pod_startup: float = option(15.0, "--pod-startup", metavar="SECONDS", float_range=(0, 3600), show_default=True,
                                help="Seconds an evicted pod's replacement takes to be Ready.")
    catalog_file: str | None = option(None, "--catalog", path="file", help="Instance-type catalog file.")
    region: str | None = option(None, "--region", help=REGION_HELP)
    spot_prices_file: str | None = option(
        None,
        "--spot-prices",
        path="file",
        help="Price spot capacity from this `aws ec2 describe-spot-price-history` JSON (else: at on-demand prices).",
    )
    instances: tuple[str, ...] = option(
        (), "--instances", multiple=True, path="file", metavar="FILE",
        help="For AMI, subnet, security-group and capacity-reservation drift: what `aws ec2 describe-instances "
        "--output json` printed (each node's ImageId, SubnetId, security groups and CapacityReservationId, by its "
        "providerID; repeatable).",
    )
    images: tuple[str, ...] = option(
        (), "--images", multiple=True, path="file", metavar="FILE",
        help="For AMI drift: what `aws ec2 describe-images --output json` printed (what an amiSelector or "
        "amiSelectorTerms select; repeatable).",
    )
    ssm_parameters: tuple[str, ...] = option(
        (), "--ssm-parameters", multiple=True, path="file", metavar="FILE",
        help="For AMI drift: what `aws ssm get-parameters --names ... --output json` printed (the default AMIs, "
        "an alias's or ssmParameter term's; a note names the parameters; repeatable).",
    )
    subnets: tuple[str, ...] = option(
        (), "--subnets", multiple=True, path="file", metavar="FILE",
        help="For subnet drift: what `aws ec2 describe-subnets --output json` printed (what HEAD's subnetSelectorTerms "
        "or subnetSelector select; a note names the filters; repeatable).",
    )
    security_groups: tuple[str, ...] = option(
        (), "--security-groups", multiple=True, path="file", metavar="FILE",
        help="For security-group drift: what `aws ec2 describe-security-groups --output json` printed (what HEAD's "
        "securityGroupSelectorTerms or securityGroupSelector select; a note names the filters; repeatable).",
    )
    capacity_reservations: tuple[str, ...] = option(
        (), "--capacity-reservations", multiple=True, path="file", metavar="FILE",
        help="For capacity-reservation drift and capacity blocks' ends: what `aws ec2 describe-capacity-reservations "
        "--output json` printed (what HEAD's capacityReservationSelectorTerms select; repeatable).",
    )
    values_file: str | None = option(None, "--values", path="file", help="Template values (YAML mapping).")
    timeout_ms: int = option(5000, "--timeout-ms", int_range=(1, None), show_default=True, help="Per solver call.")
    min_values_policy: str = like(PolicyOptions, "min_values_policy")
    feature_gates: str = controller_feature_gates(PLAN_FEATURE_GATES_HELP)
