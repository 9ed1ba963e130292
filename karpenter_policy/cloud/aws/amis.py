"""Which AMI each instance type boots: the node template's ``amiSelector``, else its AMI family's default.

Defaults are the public SSM parameters EKS, Bottlerocket, Canonical and Windows publish for the cluster's
Kubernetes version (Karpenter v0.31's ``DefaultAMIs``; AL2023 and Windows2025 as v1.14.1's `DescribeImageQuery`
in aws pkg/providers/amifamily/al2023.go and windows.go), chosen by the type's architecture and accelerators:
AL2 uses the ``-gpu`` image for x86 types with GPUs or Inferentia and has no image for Arm GPU types,
AL2023 its ``nvidia`` variant for GPU types, ``neuron`` for x86 types with Inferentia or Trainium (none on Arm),
``standard`` otherwise,
Bottlerocket uses ``-nvidia`` for GPU types, Windows is x86 only. With ``amiSelector`` (ids, owners, name or
tags, every entry must match) each type gets the newest matching image of its architecture. A type with no
image cannot launch and is dropped by the caller. Answers are cached for five minutes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.aws.discovery import ID_KEYS
from karpenter_policy.cloud.errors import ConfigurationError, NotFound
from karpenter_policy.cloud.provider import Clock
from karpenter_policy.model.instancetypes import EC2_TO_KUBE_ARCHITECTURES, InstanceType

AMI_TTL = 300.0
DEFAULT_FAMILY = "AL2"
OWNERS_KEY = "aws::owners"
NAME_KEY = "aws::name"


@dataclass(frozen=True, slots=True)
class Image:
    id: str
    architecture: str  # Kubernetes name: amd64, arm64
    creation_date: str
    name: str = ""


def _accelerated(instance_type: InstanceType) -> bool:
    return instance_type.gpu_count > 0 or instance_type.accelerator_count > 0


def default_parameter(
    family: str, kubernetes_version: str, instance_type: InstanceType, version: str | None = None
) -> str | None:
    """The SSM parameter naming the default image of ``family`` for this type, or None when there is none.
    ``version``: a release an alias pins (``al2023@v20240807``), named as v1.14.1's `resolvePath` names it (AL2,
    AL2023, Bottlerocket: aws pkg/providers/amifamily/al2.go, al2023.go, bottlerocket.go); None or ``latest``: the
    recommended (latest) image."""
    arch = instance_type.architectures[0] if len(instance_type.architectures) == 1 else "amd64"
    v = kubernetes_version
    pinned = version if version and version.lower() != "latest" else None
    if family == "AL2":
        if arch == "arm64":
            if _accelerated(instance_type):
                return None
            variant, release = "amazon-linux-2-arm64", f"amazon-eks-arm64-node-{v}-{pinned}"
        elif _accelerated(instance_type):
            variant, release = "amazon-linux-2-gpu", f"amazon-eks-gpu-node-{v}-{pinned}"
        else:
            variant, release = "amazon-linux-2", f"amazon-eks-node-{v}-{pinned}"
        return f"/aws/service/eks/optimized-ami/{v}/{variant}/{release if pinned else 'recommended'}/image_id"
    if family == "AL2023":
        if _accelerated(instance_type):
            if instance_type.gpu_count == 0 and arch == "arm64":
                return None
            variant = "nvidia" if instance_type.gpu_count > 0 else "neuron"
        else:
            variant = "standard"
        machine = "arm64" if arch == "arm64" else "x86_64"
        name = f"amazon-eks-node-al2023-{machine}-{variant}-{v}-{pinned}" if pinned else "recommended"
        return f"/aws/service/eks/optimized-ami/{v}/amazon-linux-2023/{machine}/{variant}/{name}/image_id"
    if family == "Bottlerocket":
        flavour = f"aws-k8s-{v}-nvidia" if instance_type.gpu_count > 0 else f"aws-k8s-{v}"
        release = pinned.lstrip("v") if pinned else "latest"  # SSM names Bottlerocket's releases without the v
        return f"/aws/service/bottlerocket/{flavour}/{'arm64' if arch == 'arm64' else 'x86_64'}/{release}/image_id"
    if pinned:
        return None  # no other family's alias names a version
    if family == "Ubuntu":
        return f"/aws/service/canonical/ubuntu/eks/20.04/{v}/stable/current/{arch}/hvm/ebs-gp2/ami-id"
    if family in ("Windows2019", "Windows2022", "Windows2025"):
        if arch != "amd64":
            return None
        year = family.removeprefix("Windows")
        return f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{v}/image_id"
    return None


def image_filters(selector: Mapping[str, str]) -> dict[str, Any]:
    """DescribeImages arguments for an ``amiSelector``."""
    filters: list[dict[str, Any]] = []
    owners: list[str] = []
    for key, value in sorted(selector.items()):
        values = [part.strip() for part in str(value).split(",") if part.strip()]
        if key in ID_KEYS:
            filters.append({"Name": "image-id", "Values": values})
        elif key == OWNERS_KEY:
            owners = values
        elif key == NAME_KEY:
            filters.append({"Name": "name", "Values": values})
        elif value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": values})
    if not owners and NAME_KEY in selector and not any(key in selector for key in ID_KEYS):
        owners = ["self", "amazon"]  # a name alone could match anyone's public image
    arguments: dict[str, Any] = {"Filters": filters}
    if owners:
        arguments["Owners"] = owners
    return arguments


class AmiResolver:
    """Resolves (and caches) images for instance types."""

    def __init__(self, api: AwsApi, clock: Clock, kubernetes_version: str, ttl: float = AMI_TTL) -> None:
        self._api = api
        self._version = kubernetes_version
        self._parameters: TtlCache[str | None] = TtlCache(clock, ttl)
        self._selected: TtlCache[tuple[Image, ...]] = TtlCache(clock, ttl)

    def images(
        self, family: str | None, selector: Mapping[str, str] | None, instance_types: Sequence[InstanceType],
        version: str | None = None,
    ) -> dict[str, str]:
        """instance type name -> image id, for the types that have an image (``version``: the release an alias
        pins, see :func:`default_parameter`).

        Raises :class:`ConfigurationError` when no type has one (naming what was looked up).
        """
        family = family or DEFAULT_FAMILY
        chosen: dict[str, str] = {}
        if selector:
            images = self.selected(selector)
            for it in instance_types:
                image = next((i for i in images if i.architecture in it.architectures), None)
                if image is not None:
                    chosen[it.name] = image.id
            if not chosen:
                raise ConfigurationError(
                    self._api.endpoint("ec2"),
                    f"amiSelector {dict(selector)} matches no image for the architectures "
                    f"{sorted({a for it in instance_types for a in it.architectures})}",
                    "DescribeImages",
                )
            return chosen
        if family == "Custom":
            raise ConfigurationError("AWSNodeTemplate", "amiFamily Custom needs an amiSelector", "resolve AMI")
        looked_up: set[str] = set()
        for it in instance_types:
            parameter = default_parameter(family, self._version, it, version)
            if parameter is None:
                continue
            looked_up.add(parameter)
            image_id = self._parameter(parameter)
            if image_id:
                chosen[it.name] = image_id
        if not chosen:
            what = ", ".join(sorted(looked_up)) or f"no {family} image exists for these instance types"
            raise ConfigurationError(
                self._api.endpoint("ssm"), f"no default {family} AMI found ({what})", "GetParameter"
            )
        return chosen

    def selected(self, selector: Mapping[str, str]) -> tuple[Image, ...]:
        """The images an ``amiSelector`` matches, newest first (ties: id)."""
        key = tuple(sorted(selector.items()))
        return self._selected.get_or_load(key, lambda: self._describe(selector))

    def _describe(self, selector: Mapping[str, str]) -> tuple[Image, ...]:
        try:
            found = list(self._api.paginate("ec2", "describe_images", "Images", **image_filters(selector)))
        except NotFound:
            return ()
        images = [
            Image(
                str(i["ImageId"]),
                EC2_TO_KUBE_ARCHITECTURES.get(str(i.get("Architecture", "")), ""),
                str(i.get("CreationDate", "")),
                str(i.get("Name", "")),
            )
            for i in found
            if i.get("State", "available") == "available"
        ]
        images.sort(key=lambda i: i.id)
        images.sort(key=lambda i: i.creation_date, reverse=True)
        return tuple(i for i in images if i.architecture)

    def _parameter(self, name: str) -> str | None:
        def load() -> str | None:
            try:
                answer = self._api.call("ssm", "get_parameter", Name=name)
            except NotFound:
                return None
            value = answer.get("Parameter", {}).get("Value")
            return str(value) if value else None

        return self._parameters.get_or_load(name, load)


__all__ = ["AmiResolver", "Image", "default_parameter", "image_filters"]
