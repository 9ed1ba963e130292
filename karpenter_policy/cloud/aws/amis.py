"""Which AMI each instance type boots, asked of EC2 and SSM: the node template's ``amiSelector`` (or an
EC2NodeClass's several terms' selectors: each asked on its own, the images unioned by id and the newest of an
architecture kept of all of them, as v1.14.1's `amis` keeps one per requirement set, aws
pkg/providers/amifamily/ami.go), else its AMI family's default. What a selector or family gives a type is
`cloud/amiselection.py`'s (shared with `plan`, which reads saved answers instead); here the DescribeImages filters
of a selector, the calls, and a five-minute cache. A type with no image cannot launch and is dropped by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpenter_policy.api.v1.launchsettings import described
from karpenter_policy.cloud.amiselection import (
    ID_KEYS,
    NAME_KEY,
    OWNERS_KEY,
    Image,
    default_parameter,
    image_for,
    newest_first,
    selector_values,
)
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import ConfigurationError, NotFound
from karpenter_policy.cloud.provider import Clock
from karpenter_policy.model.instancetypes import EC2_TO_KUBE_ARCHITECTURES, InstanceType

AMI_TTL = 300.0
DEFAULT_FAMILY = "AL2"


def image_filters(selector: Mapping[str, str]) -> dict[str, Any]:
    """DescribeImages arguments for an ``amiSelector``."""
    filters: list[dict[str, Any]] = []
    owners: list[str] = []
    for key, value in sorted(selector.items()):
        values = selector_values(value)
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
        self, family: str | None, selectors: Sequence[Mapping[str, str]], instance_types: Sequence[InstanceType],
        version: str | None = None,
    ) -> dict[str, str]:
        """instance type name -> image id, for the types that have an image: of the images any selector matches,
        else the family's default (``version``: the release an alias pins, see :func:`default_parameter`).

        Raises :class:`ConfigurationError` when no type has one (naming what was looked up).
        """
        family = family or DEFAULT_FAMILY
        chosen: dict[str, str] = {}
        if selectors:
            by_id = {image.id: image for selector in selectors for image in self.selected(selector)}
            images = newest_first(by_id.values())
            for it in instance_types:
                image = image_for(images, it)
                if image is not None:
                    chosen[it.name] = image.id
            if not chosen:
                raise ConfigurationError(
                    self._api.endpoint("ec2"),
                    f"{described('amiSelector', selectors)} matches no image for the architectures "
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
        return newest_first(
            Image(
                str(i["ImageId"]),
                EC2_TO_KUBE_ARCHITECTURES.get(str(i.get("Architecture", "")), ""),
                str(i.get("CreationDate", "")),
                str(i.get("Name", "")),
            )
            for i in found
            if i.get("State", "available") == "available"
        )

    def _parameter(self, name: str) -> str | None:
        def load() -> str | None:
            try:
                answer = self._api.call("ssm", "get_parameter", Name=name)
            except NotFound:
                return None
            value = answer.get("Parameter", {}).get("Value")
            return str(value) if value else None

        return self._parameters.get_or_load(name, load)


__all__ = [
    "AMI_TTL", "DEFAULT_FAMILY", "NAME_KEY", "OWNERS_KEY", "AmiResolver", "Image", "default_parameter", "image_filters",
]
