"""What the user saved of EC2 and SSM for `plan`'s AMI, subnet and security-group drift (Karpenter v0.31's and v1's),
read and checked at the edge.

* `--instances FILE` (repeatable): what `aws ec2 describe-instances --output json` prints — each instance's
  `ImageId`, `SubnetId`, `SecurityGroups[].GroupId` and capacity reservation (`CapacityReservationId`, read as
  v1.14.1 reads it: `capacityreservations.instance_reservation`) by its `InstanceId` (a node's `spec.providerID`
  names its instance);
* `--capacity-reservations FILE` (repeatable): what `aws ec2 describe-capacity-reservations --output json` prints —
  the reservations an EC2NodeClass's `capacityReservationSelectorTerms` may select and capacity blocks' ends (each
  entry's `CapacityReservationId`, `State`, `OwnerId`, `Tags`, `InstanceMatchCriteria`, `ReservationType`,
  `InstanceType`, `AvailabilityZone`, `Interruptible`, `EndDate`), kept in the shape `cloud/capacityreservations.py`
  reads (`EndDate` a datetime);
* `--subnets FILE` / `--security-groups FILE` (repeatable): what `aws ec2 describe-subnets --output json` /
  `aws ec2 describe-security-groups --output json` print — the subnets (`SubnetId`, `Tags`) and security groups
  (`GroupId`, `GroupName`, `Tags`) a class's selector terms may select (`cloud/networkselection.py`);
* `--images FILE` (repeatable): what `aws ec2 describe-images --output json` prints — the images an AWSNodeTemplate's
  `amiSelector` or an EC2NodeClass's `amiSelectorTerms` may select (id, architecture, creation date, name, owner,
  tags, state, deprecation time);
* `--ssm-parameters FILE` (repeatable): what `aws ssm get-parameters --names … --output json` prints — the default
  AMIs' parameters (`Name` → `Value`) a template without `amiSelector` resolves, the ones an EC2NodeClass's alias
  or `ssmParameter` term reads, and the names SSM does not have (`InvalidParameters`).

Nothing is trusted: a file is bounded (1 GiB, read as a snapshot file is: `snapshot.read_bytes`) and must be JSON
of that shape; a field of the wrong type is an :class:`Ec2FileError` naming the file and the field's path
(`instances.json: Reservations[0].Instances[1].ImageId: not a string: 7`), never a traceback. Several files of a
kind merge (a later answer for an id replaces an earlier).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.schema import show_value
from karpenter_policy.cloud.amiselection import Image
from karpenter_policy.cloud.capacityreservations import MAX_EC2_COUNT, instance_reservation, is_ec2_count
from karpenter_policy.cloud.networkselection import Described
from karpenter_policy.commands.plan.snapshot import read_bytes
from karpenter_policy.kube.objects import parse_time
from karpenter_policy.model.instancetypes import EC2_TO_KUBE_ARCHITECTURES

__all__ = ["Ec2Answers", "Ec2FileError", "InstanceNetwork", "instance_id", "kubernetes_version", "read_ec2_answers"]

_VERSION = re.compile(r"(?<![\d.])1\.\d{1,3}(?![\d.])")


class Ec2FileError(ValueError):
    """A file of `--instances`, `--images`, `--ssm-parameters`, `--subnets`, `--security-groups` or
    `--capacity-reservations` that cannot be read as its command's output."""


@dataclass(frozen=True, slots=True)
class InstanceNetwork:
    """An instance's network as DescribeInstances answers: its `SubnetId` ("" when it has none, as a terminated
    instance) and its security groups' ids (`SecurityGroups[].GroupId`, sorted)."""

    subnet_id: str
    security_group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Ec2Answers:
    """The saved answers: `images_of` (instance id → ImageId; None: no --instances), `images` (None: no --images),
    `parameters` (SSM name → value; None: no --ssm-parameters) and `absent` (the names SSM answered it does not
    have: `InvalidParameters`); `network_of` (instance id → its network; None: no --instances), `subnets` and
    `security_groups` (None: no --subnets, no --security-groups); `reservation_of` (instance id → the capacity
    reservation it is in, "" none; None: no --instances) and `capacity_reservations` (the described reservations,
    by id; None: no --capacity-reservations)."""

    image_of: Mapping[str, str] | None = None
    images: tuple[Image, ...] | None = None
    parameters: Mapping[str, str] | None = field(default=None)
    absent: frozenset[str] = frozenset()
    network_of: Mapping[str, InstanceNetwork] | None = None
    subnets: tuple[Described, ...] | None = None
    security_groups: tuple[Described, ...] | None = None
    reservation_of: Mapping[str, str] | None = None
    capacity_reservations: tuple[Mapping[str, Any], ...] | None = None

    @property
    def given(self) -> bool:
        """Whether a file AMI drift reads was given (without any, AMI drift is not assessed, as before)."""
        return self.image_of is not None or self.images is not None or self.parameters is not None

    @property
    def network_given(self) -> bool:
        """Whether a file subnet and security-group drift read was given (`--instances`, `--subnets`,
        `--security-groups`)."""
        return self.network_of is not None or self.subnets is not None or self.security_groups is not None


def kubernetes_version(names: Iterable[str]) -> str | None:
    """The Kubernetes version SSM parameter names carry (`/aws/service/eks/optimized-ami/1.28/…`,
    `aws-k8s-1.31`), when they carry exactly one; else None."""
    found = {m.group(0) for name in names for m in _VERSION.finditer(name)}
    return found.pop() if len(found) == 1 else None


def instance_id(provider_id: object) -> str | None:
    """The EC2 instance id of a node's `spec.providerID` (`aws:///us-east-1a/i-0abc…`), or None."""
    if not isinstance(provider_id, str) or not provider_id.startswith("aws://"):
        return None
    last = provider_id.rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


def _load(file: str) -> Any:
    try:
        data = read_bytes(file)
    except OSError as error:
        raise Ec2FileError(f"{file}: cannot read: {error.strerror or error}") from None
    except ValueError as error:
        raise Ec2FileError(f"{file}: {error}") from None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise Ec2FileError(f"{file}: not JSON: {error}") from None


def _list(file: str, path: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise Ec2FileError(f"{file}: {path}: not a list: {show_value(value)}")
    return value


def _object(file: str, path: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise Ec2FileError(f"{file}: {path}: not an object: {show_value(value)}")
    return value


def _string(file: str, path: str, item: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        what = "missing" if value is None else f"not a string: {show_value(value)}" if not isinstance(
            value, str) else "empty"
        raise Ec2FileError(f"{file}: {path}.{key}: {what}")
    return value


def _top(file: str, data: Any, key: str, command: str) -> list[Any]:
    if not isinstance(data, Mapping) or key not in data:
        raise Ec2FileError(f"{file}: not what `{command} --output json` prints (no {key} list)")
    return _list(file, key, data[key])


def _optional(file: str, path: str, item: Mapping[str, Any], key: str, kind: type[Any], what: str) -> Any:
    """`item[key]` when it is of `kind` (None when absent or null); else an error naming the field."""
    value = item.get(key)
    if value is None or isinstance(value, kind):
        return value
    raise Ec2FileError(f"{file}: {path}.{key}: not {what}: {show_value(value)}")


def _instance_reservation(file: str, path: str, item: Mapping[str, Any]) -> str:
    _optional(file, path, item, "CapacityReservationId", str, "a string")
    _optional(file, path, item, "SpotInstanceRequestId", str, "a string")
    specification = _optional(file, path, item, "CapacityReservationSpecification", Mapping, "an object")
    if specification is not None:
        _optional(file, f"{path}.CapacityReservationSpecification", specification, "CapacityReservationPreference",
                  str, "a string")
    return instance_reservation(item)


def _instances(file: str, into: dict[str, str], networks: dict[str, InstanceNetwork],
               reservations: dict[str, str]) -> None:
    for r, reservation in enumerate(_top(file, _load(file), "Reservations", "aws ec2 describe-instances")):
        where = f"Reservations[{r}]"
        for i, instance in enumerate(_list(file, f"{where}.Instances",
                                           _object(file, where, reservation).get("Instances", []))):
            path = f"{where}.Instances[{i}]"
            item = _object(file, path, instance)
            key = _string(file, path, item, "InstanceId")
            into[key] = _string(file, path, item, "ImageId")
            groups = []
            for g, group in enumerate(_list(file, f"{path}.SecurityGroups", item.get("SecurityGroups") or [])):
                groups.append(_string(file, f"{path}.SecurityGroups[{g}]",
                                      _object(file, f"{path}.SecurityGroups[{g}]", group), "GroupId"))
            networks[key] = InstanceNetwork(_string(file, path, item, "SubnetId", required=False),
                                            tuple(sorted(set(groups))))
            reservations[key] = _instance_reservation(file, path, item)


def _end_date(file: str, path: str, value: Any) -> dt.datetime | None:
    """A reservation's `EndDate` as the CLI prints it (ISO 8601; no zone: UTC), in UTC, or None when it has none."""
    if value is None:
        return None
    try:
        moment = parse_time(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise Ec2FileError(f"{file}: {path}.EndDate: not a time: {show_value(value)}")
    try:  # kept in UTC, as boto3 gives it: 9999-12-31T23:59:59-05:00 is past any UTC time Python can hold
        return moment.astimezone(dt.UTC) if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
    except OverflowError:
        raise Ec2FileError(f"{file}: {path}.EndDate: not a time Python can hold in UTC: {show_value(value)}") from None


def _capacity_reservations(file: str, into: dict[str, Mapping[str, Any]]) -> None:
    listed = _top(file, _load(file), "CapacityReservations", "aws ec2 describe-capacity-reservations")
    for r, found in enumerate(listed):
        path = f"CapacityReservations[{r}]"
        item = _object(file, path, found)
        read: dict[str, Any] = {"CapacityReservationId": _string(file, path, item, "CapacityReservationId")}
        for key in ("State", "OwnerId", "InstanceMatchCriteria", "ReservationType", "InstanceType",
                    "AvailabilityZone"):
            if (value := _optional(file, path, item, key, str, "a string")) is not None:
                read[key] = value
        if (interruptible := _optional(file, path, item, "Interruptible", bool, "true or false")) is not None:
            read["Interruptible"] = interruptible
        count = item.get("AvailableInstanceCount")
        if count is not None:
            if not is_ec2_count(count):
                raise Ec2FileError(f"{file}: {path}.AvailableInstanceCount: not a count (an integer, 0 to "
                                   f"{MAX_EC2_COUNT:,}): {show_value(count)}")
            read["AvailableInstanceCount"] = count
        tags = _tags(file, path, item.get("Tags"))
        read["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
        if (end := _end_date(file, path, item.get("EndDate"))) is not None:
            read["EndDate"] = end
        into[read["CapacityReservationId"]] = read


def _described(file: str, into: dict[str, Described], key: str, id_key: str, command: str) -> None:
    for i, found in enumerate(_top(file, _load(file), key, command)):
        path = f"{key}[{i}]"
        item = _object(file, path, found)
        read = Described(_string(file, path, item, id_key),
                         _string(file, path, item, "GroupName", required=False) if key == "SecurityGroups" else "",
                         _tags(file, path, item.get("Tags")))
        into[read.id] = read


def _tags(file: str, path: str, value: Any) -> dict[str, str]:
    tags: dict[str, str] = {}
    for t, tag in enumerate(_list(file, f"{path}.Tags", value if value is not None else [])):
        where = f"{path}.Tags[{t}]"
        item = _object(file, where, tag)
        tags[_string(file, where, item, "Key")] = _string(file, where, item, "Value", required=False)
    return tags


def _images(file: str, into: dict[str, Image]) -> None:
    for i, image in enumerate(_top(file, _load(file), "Images", "aws ec2 describe-images")):
        path = f"Images[{i}]"
        item = _object(file, path, image)
        read = Image(
            id=_string(file, path, item, "ImageId"),
            architecture=EC2_TO_KUBE_ARCHITECTURES.get(_string(file, path, item, "Architecture"), ""),
            creation_date=_string(file, path, item, "CreationDate", required=False),
            name=_string(file, path, item, "Name", required=False),
            owner_id=_string(file, path, item, "OwnerId", required=False),
            owner_alias=_string(file, path, item, "ImageOwnerAlias", required=False),
            tags=_tags(file, path, item.get("Tags")),
            state=_string(file, path, item, "State", required=False) or "available",
            deprecation_time=_string(file, path, item, "DeprecationTime", required=False),
        )
        into[read.id] = read


def _parameters(file: str, into: dict[str, str], absent: set[str]) -> None:
    data = _load(file)
    for p, parameter in enumerate(_top(file, data, "Parameters", "aws ssm get-parameters")):
        path = f"Parameters[{p}]"
        item = _object(file, path, parameter)
        into[_string(file, path, item, "Name")] = _string(file, path, item, "Value")
    for n, name in enumerate(_list(file, "InvalidParameters", data.get("InvalidParameters") or [])):
        if not isinstance(name, str) or not name:
            raise Ec2FileError(f"{file}: InvalidParameters[{n}]: not a parameter name: {show_value(name)}")
        absent.add(name)


def read_ec2_answers(instances: Sequence[str] = (), images: Sequence[str] = (), parameters: Sequence[str] = (),
                     subnets: Sequence[str] = (), security_groups: Sequence[str] = (),
                     capacity_reservations: Sequence[str] = ()) -> Ec2Answers:
    """The answers of the files given (none of a kind: None). Raises :class:`Ec2FileError`."""
    image_of: dict[str, str] = {}
    network_of: dict[str, InstanceNetwork] = {}
    reservation_of: dict[str, str] = {}
    reservations: dict[str, Mapping[str, Any]] = {}
    found: dict[str, Image] = {}
    values: dict[str, str] = {}
    absent: set[str] = set()
    described: dict[str, Described] = {}
    groups: dict[str, Described] = {}
    for file in instances:
        _instances(file, image_of, network_of, reservation_of)
    for file in capacity_reservations:
        _capacity_reservations(file, reservations)
    for file in subnets:
        _described(file, described, "Subnets", "SubnetId", "aws ec2 describe-subnets")
    for file in security_groups:
        _described(file, groups, "SecurityGroups", "GroupId", "aws ec2 describe-security-groups")
    for file in images:
        _images(file, found)
    for file in parameters:
        _parameters(file, values, absent)
    return Ec2Answers(
        image_of if instances else None,
        tuple(found[k] for k in sorted(found)) if images else None,
        values if parameters else None,
        frozenset(absent - set(values)),
        network_of if instances else None,
        tuple(described[k] for k in sorted(described)) if subnets else None,
        tuple(groups[k] for k in sorted(groups)) if security_groups else None,
        reservation_of if instances else None,
        tuple(reservations[k] for k in sorted(reservations)) if capacity_reservations else None,
    )

