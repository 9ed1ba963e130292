"""Karpenter's AWS rules (provider v0.31): the inline `provider` of a Provisioner and AWSNodeTemplate specs."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from karpenter_policy.api.metadata import metadata_violations
from karpenter_policy.api.placeholders import placeholder_violations
from karpenter_policy.api.userdata import user_data_violations
from karpenter_policy.api.violations import AWS_ID_SHAPE, INVALID_SPEC, Path, Violation
from karpenter_policy.model import labels as wk
from karpenter_policy.model.resources import parse_quantity

AMI_FAMILIES = ("AL2", "Bottlerocket", "Ubuntu", "Windows2019", "Windows2022", "Custom")
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
METADATA_ENUMS = {
    "httpEndpoint": ("enabled", "disabled"),
    "httpProtocolIPv6": ("enabled", "disabled"),
    "httpTokens": ("required", "optional"),
}
MIN_VOLUME = Decimal(10**9)  # 1G
MAX_VOLUME = Decimal(64 * 10**12)  # 64T

#: Tag keys Karpenter writes on every instance it launches, as (what users read, the exact pattern).
RESTRICTED_TAG_PATTERNS = (
    ("kubernetes.io/cluster/<cluster>", re.compile(r"^kubernetes\.io/cluster/[0-9A-Za-z][A-Za-z0-9\-_]*$")),
    (wk.PROVISIONER_NAME, re.compile(f"^{re.escape(wk.PROVISIONER_NAME)}$")),
    (wk.MANAGED_BY, re.compile(f"^{re.escape(wk.MANAGED_BY)}$")),
)

#: Selector keys that list resource ids instead of matching tags, and the id prefix each selector expects.
ID_SELECTOR_KEYS = ("aws-ids", "aws::ids")
ID_PREFIXES = {"subnetSelector": "subnet-", "securityGroupSelector": "sg-", "amiSelector": "ami-"}

#: What follows the prefix of an EC2 resource id.
_EC2_ID = re.compile(r"[0-9a-f]{8}|[0-9a-f]{17}")

#: Fields a launch template already decides, so Karpenter refuses them next to `launchTemplate`.
EXCLUDED_BY_LAUNCH_TEMPLATE = (
    "securityGroupSelector",
    "amiFamily",
    "instanceProfile",
    "blockDeviceMappings",
    "userData",
    "amiSelector",
    "metadataOptions",
)


def validate_aws(
    spec: Mapping[str, Any], base: Path, inline: bool, metadata: Mapping[str, Any] | None = None
) -> Iterator[Violation]:
    """Every AWS rule `spec` breaks; `inline` is True for a Provisioner's `provider` block; `metadata` is the
    object's (its Flux mark, see `placeholders`)."""
    yield from _launch_template(spec, base)
    yield from _selector(spec, base, "subnetSelector", required=True)
    yield from _selector(spec, base, "securityGroupSelector", required="launchTemplate" not in spec)
    yield from _selector(spec, base, "amiSelector", required=False)
    yield from _tags(spec.get("tags") or {}, base)
    yield from _metadata_options(spec.get("metadataOptions"), (*base, "metadataOptions"))
    yield from _ami_family(spec, base, inline)
    for index, mapping in enumerate(spec.get("blockDeviceMappings") or []):
        yield from _block_device_mapping(mapping, (*base, "blockDeviceMappings", index))
    yield from placeholder_violations(spec, base, metadata)
    yield from user_data_violations(spec, base)


def _launch_template(spec: Mapping[str, Any], base: Path) -> Iterator[Violation]:
    if "launchTemplate" not in spec:
        return
    for field in EXCLUDED_BY_LAUNCH_TEMPLATE:
        if field in spec:
            yield Violation(
                INVALID_SPEC,
                (*base, field),
                f"{field} and launchTemplate are mutually exclusive: the launch template already decides it",
                at_key=True,
                related=((*base, "launchTemplate"),),
            )


def _selector(spec: Mapping[str, Any], base: Path, field: str, required: bool) -> Iterator[Violation]:
    selector = spec.get(field)
    if selector is None:
        if required:
            why = " (or use launchTemplate)" if field == "securityGroupSelector" else ""
            yield Violation(INVALID_SPEC, base, f"{field} is required{why}: it tells Karpenter where to launch nodes")
        return
    path: Path = (*base, field)
    if not selector:
        yield Violation(INVALID_SPEC, path, f"{field} must not be empty: an empty selector matches nothing")
    for key, value in selector.items():
        if key == "" or value == "":
            yield Violation(INVALID_SPEC, (*path, key), f"{field}: keys and values must be non-empty", at_key=key == "")
    id_keys = [key for key in selector if key in ID_SELECTOR_KEYS]
    for key in id_keys:
        if len(selector) > 1:
            yield Violation(
                INVALID_SPEC,
                (*path, key),
                f"{field}: {key} lists ids and cannot be combined with other filters",
                at_key=True,
            )
        prefix = ID_PREFIXES[field]
        if selector[key] == "":
            continue  # reported above as empty
        for resource_id in str(selector[key]).split(","):
            # Karpenter's webhook: the unanchored `prefix[0-9a-z]+`; EC2's ids: the prefix and 8 or 17 hex digits
            if not re.search(re.escape(prefix) + "[0-9a-z]+", resource_id):
                yield Violation(
                    INVALID_SPEC,
                    (*path, key),
                    f"{field}: {resource_id!r} is not an id: Karpenter requires {prefix} and letters or digits "
                    f"(regex: {prefix}[0-9a-z]+)",
                )
            elif not (written := resource_id.strip()).startswith(prefix) or not _EC2_ID.fullmatch(
                written.removeprefix(prefix)
            ):
                yield Violation(
                    AWS_ID_SHAPE,
                    (*path, key),
                    f"{field}: {written!r} does not have EC2's shape ({prefix} and 8 or 17 hexadecimal "
                    "digits); Karpenter admits it, but no resource has that id",
                )


def _tags(tags: Mapping[str, str], base: Path) -> Iterator[Violation]:
    for key in tags:
        if key == "":
            yield Violation(INVALID_SPEC, (*base, "tags"), "tags: empty tag keys are not supported")
        for name, pattern in RESTRICTED_TAG_PATTERNS:
            if pattern.match(key):
                yield Violation(
                    INVALID_SPEC,
                    (*base, "tags", key),
                    f"tag {key} is restricted: Karpenter sets {name} on every instance itself",
                    at_key=True,
                )


def _metadata_options(options: Mapping[str, Any] | None, path: Path) -> Iterator[Violation]:
    if not options:
        return
    for field, allowed in METADATA_ENUMS.items():
        value = options.get(field)
        if value is not None and value not in allowed:
            yield Violation(INVALID_SPEC, (*path, field), f"{field} {value!r} is not one of {', '.join(allowed)}")
    hop_limit = options.get("httpPutResponseHopLimit")
    if hop_limit is not None and not 1 <= hop_limit <= 64:
        yield Violation(
            INVALID_SPEC,
            (*path, "httpPutResponseHopLimit"),
            f"httpPutResponseHopLimit {hop_limit} is out of range: it must be between 1 and 64",
        )


def _ami_family(spec: Mapping[str, Any], base: Path, inline: bool) -> Iterator[Violation]:
    family = spec.get("amiFamily")
    if family is None:
        return
    if family not in AMI_FAMILIES:
        yield Violation(
            INVALID_SPEC, (*base, "amiFamily"), f"amiFamily {family!r} is not one of {', '.join(AMI_FAMILIES)}"
        )
    elif family == "Custom" and "amiSelector" not in spec:
        where = "an AWSNodeTemplate with amiSelector" if inline else "amiSelector"
        yield Violation(INVALID_SPEC, (*base, "amiFamily"), f"amiFamily Custom needs {where} to choose the AMI")


def _block_device_mapping(mapping: Mapping[str, Any], path: Path) -> Iterator[Violation]:
    if not mapping.get("deviceName"):
        yield Violation(INVALID_SPEC, path, "blockDeviceMappings: deviceName is required (e.g. /dev/xvda)")
    ebs = mapping.get("ebs")
    if ebs is None:
        yield Violation(INVALID_SPEC, path, "blockDeviceMappings: ebs is required")
        return
    volume_type = ebs.get("volumeType")
    if volume_type is not None and volume_type not in VOLUME_TYPES:
        yield Violation(
            INVALID_SPEC,
            (*path, "ebs", "volumeType"),
            f"volumeType {volume_type!r} is not one of {', '.join(VOLUME_TYPES)}",
        )
    size = ebs.get("volumeSize")
    if size is None:
        if ebs.get("snapshotID") is None:
            yield Violation(INVALID_SPEC, (*path, "ebs"), "ebs: volumeSize is required unless snapshotID is given")
        return
    try:
        quantity = parse_quantity(size)
    except ValueError as error:
        yield Violation(INVALID_SPEC, (*path, "ebs", "volumeSize"), str(error))
        return
    if not MIN_VOLUME <= quantity <= MAX_VOLUME:
        yield Violation(
            INVALID_SPEC,
            (*path, "ebs", "volumeSize"),
            f"volumeSize {size} is out of range: it must be between 1G and 64T",
        )


def validate_node_template(doc: Mapping[str, Any]) -> list[Violation]:
    """Every rule a schema-valid AWSNodeTemplate breaks."""
    spec: Mapping[str, Any] = doc.get("spec") or {}
    metadata = doc.get("metadata") or {}
    return [*metadata_violations(metadata), *validate_aws(spec, ("spec",), inline=False, metadata=metadata)]
