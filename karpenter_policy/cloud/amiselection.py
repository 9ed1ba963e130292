"""Which AMI an AWSNodeTemplate gives an instance type — the pure part of Karpenter v0.31.1's AMI provider (aws
pkg/providers/amifamily/ami.go `Get`, `MapToInstanceTypes`), shared by the AWS adapter (`cloud/aws/amis.py`, which
asks EC2 and SSM) and `plan` (which reads what the user saved of them), so no SDK here.

* **Defaults** (no ``amiSelector``): the public SSM parameter naming the image of the template's family for the
  cluster's Kubernetes version (:func:`default_parameter`), chosen by the type's architecture and accelerators: AL2
  uses the ``-gpu`` image for x86 types with GPUs or Inferentia and has no image for Arm GPU types, AL2023 its
  ``nvidia`` variant for GPU types, ``neuron`` for x86 types with Inferentia or Trainium (none on Arm), ``standard``
  otherwise, Bottlerocket ``-nvidia`` for GPU types, Windows is x86 only (v0.31's ``DefaultAMIs``; AL2023 and
  Windows2025 as v1.14.1's `DescribeImageQuery`).
* **``amiSelector``** (ids, owners, name with ``*``/``?`` wildcards, tags; every entry must match): the images it
  selects (:func:`selector_matches`, as EC2's DescribeImages filters them), newest first (:func:`newest_first`;
  created in the same second: the greater name), and each type gets the newest of its architecture
  (:func:`image_for`). v0.31.1 also keeps apart images tagged with well-known labels (their tags become
  requirements); here only the architecture does.

A type with no image cannot launch.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.model.instancetypes import InstanceType

__all__ = [
    "ID_KEYS",
    "NAME_KEY",
    "OWNERS_KEY",
    "Image",
    "created_at",
    "default_parameter",
    "image_for",
    "newest_first",
    "selector_matches",
    "selector_values",
]

#: An ``amiSelector``'s (and the subnet and security group selectors') keys that list ids.
ID_KEYS = ("aws-ids", "aws::ids")
OWNERS_KEY = "aws::owners"
NAME_KEY = "aws::name"
#: Go's zero time in Unix seconds (0001-01-01T00:00:00Z).
_GO_ZERO_TIME = -62135596800
#: The owners a selector by name alone is given (a name alone could match anyone's public image).
DEFAULT_NAME_OWNERS = ("self", "amazon")


@dataclass(frozen=True, slots=True)
class Image:
    """One EC2 image as a selector sees it: id, architecture (Kubernetes name: amd64, arm64; empty: another),
    creation date (RFC 3339), name, owner id, owner alias (``amazon``, ``aws-marketplace``; empty: an account's
    own), tags and state."""

    id: str
    architecture: str
    creation_date: str
    name: str = ""
    owner_id: str = ""
    owner_alias: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    state: str = "available"


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


def selector_values(value: object) -> list[str]:
    """A selector entry's values: comma-separated, blanks dropped."""
    return [part.strip() for part in str(value).split(",") if part.strip()]


def _wildcard(pattern: str) -> re.Pattern[str]:
    """EC2's filter wildcards: ``*`` any run of characters, ``?`` one; the rest literal, case-sensitive."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _any_matches(patterns: Iterable[str], value: str | None) -> bool:
    return value is not None and any(_wildcard(p).fullmatch(value) for p in patterns)


def _owned(owners: Sequence[str], image: Image) -> bool:
    """DescribeImages' `Owners`: an account id, an alias (``amazon``, ``aws-marketplace``), or ``self`` — the
    caller's own images, which carry no owner alias."""
    return any(
        image.owner_id == owner or image.owner_alias == owner or (owner == "self" and not image.owner_alias)
        for owner in owners
    )


def selector_matches(selector: Mapping[str, str], image: Image) -> bool:
    """Whether an ``amiSelector`` selects ``image``, as DescribeImages with `cloud/aws/amis.py`'s `image_filters`
    selects it: ids, owners, name and tags all match; an image not ``available`` never."""
    if image.state != "available":
        return False
    owners: list[str] = []
    for key, value in selector.items():
        values = selector_values(value)
        if key in ID_KEYS:
            if image.id not in values:
                return False
        elif key == OWNERS_KEY:
            owners = values
        elif key == NAME_KEY:
            if not _any_matches(values, image.name):
                return False
        elif value == "*":
            if key not in image.tags:
                return False
        elif not _any_matches(values, image.tags.get(key)):
            return False
    if not owners and NAME_KEY in selector and not any(key in selector for key in ID_KEYS):
        owners = list(DEFAULT_NAME_OWNERS)
    return not owners or _owned(owners, image)


def created_at(image: Image) -> int:
    """An image's creation time in Unix seconds, as Go's `time.Parse(time.RFC3339, …)` reads it: a date that does
    not parse is the zero time (older than any)."""
    try:
        moment = dt.datetime.fromisoformat(image.creation_date)
    except ValueError:
        return _GO_ZERO_TIME
    return int((moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp())


def newest_first(images: Iterable[Image]) -> tuple[Image, ...]:
    """Images of a known architecture, newest first by creation time (to the second); of two created in the same
    second the one of the greater name first, as v0.31.1's `getAMIs` keeps it (then by id)."""
    ordered = sorted((i for i in images if i.architecture), key=lambda i: i.id)
    ordered.sort(key=lambda i: i.name, reverse=True)
    ordered.sort(key=created_at, reverse=True)
    return tuple(ordered)


def image_for(images: Sequence[Image], instance_type: InstanceType) -> Image | None:
    """The image a type gets of ``images`` (newest first): the first of one of its architectures
    (`MapToInstanceTypes`), or None."""
    return next((i for i in images if i.architecture in instance_type.architectures), None)
