"""Helpers for the cloud tests: launch requests and reading what moto stored."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from karpenter_policy.cloud.provider import LaunchRequest
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.taints import Taint

from .conftest import CLUSTER


def offer(instance_type: str, zone: str, capacity_type: str = "spot", price: float = 0.05) -> ChosenOffering:
    return ChosenOffering(instance_type, zone, capacity_type, price)


def request(
    spec: dict[str, Any],
    options: Sequence[ChosenOffering],
    *,
    token: str = "claim-default-abcde",
    cluster: str = CLUSTER,
    provisioner: str = "default",
    requirements: Requirements | None = None,
    labels: dict[str, str] | None = None,
    taints: Sequence[Taint] = (),
    startup_taints: Sequence[Taint] = (),
    kubelet: dict[str, Any] | None = None,
) -> LaunchRequest:
    return LaunchRequest(
        cluster_name=cluster,
        provisioner=provisioner,
        constraint_set_hash="sha256:" + "ab" * 32,
        options=list(options),
        client_token=token,
        requirements=requirements or Requirements(),
        labels=labels or {},
        taints=taints,
        startup_taints=startup_taints,
        provider=spec,
        kubelet=kubelet,
    )


def launch_template(ec2: Any, name: str) -> dict[str, Any]:
    """The latest version's LaunchTemplateData of a template, userData decoded."""
    versions = ec2.describe_launch_template_versions(LaunchTemplateName=name, Versions=["$Latest"])
    data: dict[str, Any] = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    if "UserData" in data:
        data["UserData"] = base64.b64decode(data["UserData"]).decode()
    return data


def user_data(ec2: Any, instance_id: str) -> str:
    value = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    return base64.b64decode(value).decode()
