"""Launch templates: what a node boots with (AMI, userData, security groups, instance profile, volumes,
instance metadata options), created once and reused, named by the hash of their content.

The name is ``karpenter-policy/<sha256 of the cluster name and the template data>``: the same settings always
map to the same template, so a reconciler that restarts, or several replicas, reuse it instead of piling up
copies, and changed settings get a new template (old ones are left for garbage collection). A node template
that names its own ``launchTemplate`` uses that one as it is. Existence is cached; a launch that finds a
template gone invalidates the cache entry and the template is created again.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from karpenter_policy.api.constraintset import canonical_json
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.cloud.provider import TAG_MANAGED_BY, Clock, cluster_tag
from karpenter_policy.model.resources import parse_quantity

NAME_PREFIX = "karpenter-policy/"
TEMPLATE_TTL = 3600.0
GIB = 1 << 30
ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"

#: Root volumes per AMI family when the node template has no blockDeviceMappings (Karpenter v0.31).
DEFAULT_BLOCK_DEVICES: dict[str, tuple[tuple[str, int], ...]] = {
    "AL2": (("/dev/xvda", 20),),
    "Ubuntu": (("/dev/sda1", 20),),
    "Bottlerocket": (("/dev/xvda", 4), ("/dev/xvdb", 20)),
    "Windows2019": (("/dev/sda1", 50),),
    "Windows2022": (("/dev/sda1", 50),),
    "Custom": (),
}

#: Instance metadata defaults (IMDSv2 required, one hop for the node plus one for pods on host network).
DEFAULT_METADATA_OPTIONS = {
    "HttpEndpoint": "enabled",
    "HttpProtocolIpv6": "disabled",
    "HttpPutResponseHopLimit": 2,
    "HttpTokens": "required",
}
_METADATA_FIELDS = {
    "httpEndpoint": "HttpEndpoint",
    "httpProtocolIPv6": "HttpProtocolIpv6",
    "httpPutResponseHopLimit": "HttpPutResponseHopLimit",
    "httpTokens": "HttpTokens",
}
_EBS_FIELDS = {
    "volumeType": "VolumeType",
    "iops": "Iops",
    "throughput": "Throughput",
    "encrypted": "Encrypted",
    "kmsKeyID": "KmsKeyId",
    "deleteOnTermination": "DeleteOnTermination",
    "snapshotID": "SnapshotId",
}


def volume_gib(size: object) -> int:
    """A Kubernetes quantity as whole GiB, rounded up (EC2 sizes volumes in GiB)."""
    return max(1, math.ceil(parse_quantity(size) / GIB))


def block_device_mappings(spec: Sequence[Mapping[str, Any]] | None, family: str) -> list[dict[str, Any]]:
    """EC2 BlockDeviceMappings for the template's ``blockDeviceMappings`` (else the family's defaults: gp3,
    encrypted, deleted with the instance)."""
    if spec:
        mappings = []
        for mapping in spec:
            ebs_spec = mapping.get("ebs") or {}
            ebs: dict[str, Any] = {_EBS_FIELDS[k]: v for k, v in sorted(ebs_spec.items()) if k in _EBS_FIELDS}
            if ebs_spec.get("volumeSize") is not None:
                ebs["VolumeSize"] = volume_gib(ebs_spec["volumeSize"])
            mappings.append({"DeviceName": str(mapping["deviceName"]), "Ebs": ebs})
        return mappings
    return [
        {
            "DeviceName": device,
            "Ebs": {"VolumeSize": size, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }
        for device, size in DEFAULT_BLOCK_DEVICES.get(family, DEFAULT_BLOCK_DEVICES["AL2"])
    ]


def metadata_options(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    options = dict(DEFAULT_METADATA_OPTIONS)
    for key, value in (spec or {}).items():
        if key in _METADATA_FIELDS:
            options[_METADATA_FIELDS[key]] = value
    return options


def template_data(
    *,
    image_id: str,
    user_data: str,
    security_groups: Sequence[str],
    instance_profile: str,
    block_devices: Sequence[Mapping[str, Any]],
    metadata: Mapping[str, Any],
    detailed_monitoring: bool,
) -> dict[str, Any]:
    """CreateLaunchTemplate's LaunchTemplateData (userData base64-encoded, as EC2 wants it)."""
    data: dict[str, Any] = {
        "ImageId": image_id,
        "IamInstanceProfile": {"Name": instance_profile},
        "SecurityGroupIds": sorted(security_groups),
        "MetadataOptions": dict(metadata),
        "Monitoring": {"Enabled": detailed_monitoring},
    }
    if block_devices:
        data["BlockDeviceMappings"] = [dict(m) for m in block_devices]
    if user_data:
        data["UserData"] = base64.b64encode(user_data.encode("utf-8")).decode("ascii")
    return data


def template_name(cluster_name: str, data: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(canonical_json({"cluster": cluster_name, "data": data}).encode("utf-8")).hexdigest()
    return NAME_PREFIX + digest


class LaunchTemplates:
    """Creates templates on first use and remembers which exist."""

    def __init__(self, api: AwsApi, clock: Clock, ttl: float = TEMPLATE_TTL) -> None:
        self._api = api
        self._known: TtlCache[bool] = TtlCache(clock, ttl)

    def ensure(self, name: str, data: Mapping[str, Any], cluster_name: str) -> None:
        """Make sure the template ``name`` exists with ``data`` (created, tagged for the cluster, if absent)."""

        def load() -> bool:
            if self._exists(name):
                return True
            tags = [
                {"Key": cluster_tag(cluster_name), "Value": "owned"},
                {"Key": TAG_MANAGED_BY, "Value": cluster_name},
            ]
            try:
                self._api.call(
                    "ec2",
                    "create_launch_template",
                    LaunchTemplateName=name,
                    LaunchTemplateData=dict(data),
                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
                )
            except CloudError as error:
                if error.code != ALREADY_EXISTS:  # another replica created it meanwhile: fine
                    raise
            return True

        self._known.get_or_load(name, load)

    def require(self, name: str) -> None:
        """A template the node template names must exist: :class:`NotFound` otherwise."""

        def load() -> bool:
            if not self._exists(name):
                raise NotFound(
                    self._api.endpoint("ec2"), f"launch template {name!r} does not exist", "DescribeLaunchTemplates"
                )
            return True

        self._known.get_or_load(name, load)

    def invalidate(self, name: str) -> None:
        self._known.invalidate(name)

    def _exists(self, name: str) -> bool:
        try:
            found = self._api.call("ec2", "describe_launch_templates", LaunchTemplateNames=[name])
        except NotFound:  # InvalidLaunchTemplateName.NotFoundException
            return False
        return bool(found.get("LaunchTemplates"))


__all__ = [
    "NAME_PREFIX",
    "LaunchTemplates",
    "block_device_mappings",
    "metadata_options",
    "template_data",
    "template_name",
    "volume_gib",
]
