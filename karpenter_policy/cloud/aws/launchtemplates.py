"""Launch templates: what a node boots with (AMI, userData, security groups, instance profile, volumes,
instance metadata options, network interfaces, CPU options, placement group), created once and reused, named by the
hash of their content — and deleted once no launch needs them.

The name is ``karpenter-policy/<sha256 of the cluster name and the template data>``: the same settings always
map to the same template, so a reconciler that restarts, or several replicas, reuse it instead of piling up
copies, and changed settings (a new AMI, another node template, other max pods) get a new template. A node
template that names its own ``launchTemplate`` uses that one as it is, and it is never deleted.

**Clean-up, as Karpenter v0.31.1 does it** (`pkg/providers/launchtemplate/launchtemplate.go`: a cache whose
entries live ``DefaultTTL`` from their last use, `cachedEvictedFunc` deleting an evicted template, `hydrateCache`
at start-up taking in the cluster's templates, tagged `karpenter.k8s.aws/cluster`): every template this provider
makes or uses is remembered with when a launch last needed it; :meth:`LaunchTemplates.collect` (garbage
collection calls it every pass) deletes the ones unused for ``ttl`` seconds (an hour) — those of an AMI since
replaced, of a node template since deleted or changed. Its first call for a cluster takes in the templates tagged
for it (``kubernetes.io/cluster/<name>: owned`` and ``karpenter.sh/managed-by: <name>``, named with our prefix)
that earlier runs left, each given a full ``ttl`` from then: another replica's launch under way during a leader
change still finds its template. From v0.34 Karpenter also deletes a node template's templates when it is deleted
(the EC2NodeClass finalizer, `Provider.DeleteLaunchTemplates`, by a `karpenter.k8s.aws/ec2nodeclass` tag); here
nothing ties a template to one node template (the same content is shared), and the TTL covers it.

**Ordering with launches.** A launch *pins* its templates from :meth:`LaunchTemplates.acquire` until its
CreateFleet answered (:meth:`LaunchTemplates.release`), and a pinned template is never picked for deletion. A
template being deleted is marked so under the lock before DeleteLaunchTemplate is sent; a launch that needs it
meanwhile waits for the deletion to finish and then creates it again. So a CreateFleet never names a template
this provider is deleting; one deleted by anyone else is recreated and the request retried once
(`provider.AwsCloudProvider._create_fleet`, as Karpenter invalidates its cache on a not-found launch template).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.constraintset import canonical_json
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.capacityreservations import TYPE_CAPACITY_BLOCK
from karpenter_policy.cloud.errors import CloudError, NotFound
from karpenter_policy.cloud.provider import TAG_MANAGED_BY, Clock, cluster_tag
from karpenter_policy.model.nodeclassfit import EFA_ONLY
from karpenter_policy.model.resources import parse_quantity

log = logging.getLogger(__name__)

NAME_PREFIX = "karpenter-policy/"
#: A template no launch needed for this long is deleted (and its existence is checked again this often).
TEMPLATE_TTL = 3600.0
GIB = 1 << 30
ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"

#: Root volumes per AMI family when the node template has no blockDeviceMappings (Karpenter v0.31; AL2023 and
#: Windows2025 as v1.14.1's `DefaultBlockDeviceMappings`, aws pkg/providers/amifamily/al2023.go and windows.go).
DEFAULT_BLOCK_DEVICES: dict[str, tuple[tuple[str, int], ...]] = {
    "AL2": (("/dev/xvda", 20),),
    "AL2023": (("/dev/xvda", 20),),
    "Ubuntu": (("/dev/sda1", 20),),
    "Bottlerocket": (("/dev/xvda", 4), ("/dev/xvdb", 20)),
    "Windows2019": (("/dev/sda1", 50),),
    "Windows2022": (("/dev/sda1", 50),),
    "Windows2025": (("/dev/sda1", 50),),
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
    public_ip: bool | None = None,
    ip_prefix_count: int | None = None,
    ipv6: bool = False,
    connection_tracking: Mapping[str, Any] | None = None,
    interfaces: Sequence[Mapping[str, Any]] = (),
    cpu: Mapping[str, Any] | None = None,
    placement: Mapping[str, Any] | None = None,
    reservation: tuple[str, str, bool] | None = None,
    efa_count: int = 0,
) -> dict[str, Any]:
    """CreateLaunchTemplate's LaunchTemplateData (userData base64-encoded, as EC2 wants it). ``public_ip`` (an
    EC2NodeClass's `associatePublicIPAddress`, None: unset) and ``ip_prefix_count`` (its `ipPrefixCount`: the
    `Ipv4PrefixCount` of an IPv4 cluster's interface, an IPv6 cluster's `Ipv6PrefixCount`; None: unset) and
    ``connection_tracking`` (its `connectionTracking`, :func:`connection_tracking`; None: unset) are said on the
    primary network interface, which then carries the security groups (EC2 takes them there or at the top, not
    both): v1.14.1's `generateNetworkInterfaces` (aws pkg/providers/launchtemplate/launchtemplate.go:355-367) for
    one ENA interface. ``interfaces`` (an EC2NodeClass's `networkInterfaces`, :func:`network_interfaces`) replaces
    that one interface; else ``efa_count`` (the EFA of the type, when the claim's pods request
    `vpc.amazonaws.com/efa`) makes it that many EFA interfaces, one per network card (:func:`efa_interfaces`);
    ``cpu`` (:func:`cpu_options`) is the template's CpuOptions and ``placement``
    (:func:`placement`) its Placement. ``reservation`` (id, type, interruptible) targets a capacity reservation as
    v1.14.1's `CreateLaunchTemplateInputBuilder` does for a reserved launch (aws
    pkg/providers/launchtemplate/types.go:153-180): `capacity-reservations-only` with the reservation as target, a
    capacity block's or an interruptible reservation's market type. (v1.14.1 also writes preference `none` on its
    other templates; these leave it unset: docs/cloud.md.)"""
    data: dict[str, Any] = {
        "ImageId": image_id,
        "IamInstanceProfile": {"Name": instance_profile},
        "MetadataOptions": dict(metadata),
        "Monitoring": {"Enabled": detailed_monitoring},
    }
    if interfaces:
        data["NetworkInterfaces"] = network_interfaces(
            interfaces, security_groups, public_ip=public_ip, ip_prefix_count=ip_prefix_count, ipv6=ipv6,
            connection_tracking=connection_tracking,
        )  # fmt: skip
    elif efa_count:
        data["NetworkInterfaces"] = efa_interfaces(
            efa_count, security_groups, public_ip=public_ip, ip_prefix_count=ip_prefix_count, ipv6=ipv6,
            connection_tracking=connection_tracking,
        )  # fmt: skip
    elif public_ip is None and ip_prefix_count is None and connection_tracking is None:
        data["SecurityGroupIds"] = sorted(security_groups)
    else:
        interface: dict[str, Any] = {"DeviceIndex": 0, "Groups": sorted(security_groups)}
        if public_ip is not None:
            interface["AssociatePublicIpAddress"] = public_ip
        if ip_prefix_count is not None:
            interface["Ipv6PrefixCount" if ipv6 else "Ipv4PrefixCount"] = ip_prefix_count
        if connection_tracking is not None:
            interface["ConnectionTrackingSpecification"] = dict(connection_tracking)
        data["NetworkInterfaces"] = [dict(sorted(interface.items()))]
    if block_devices:
        data["BlockDeviceMappings"] = [dict(m) for m in block_devices]
    if user_data:
        data["UserData"] = base64.b64encode(user_data.encode("utf-8")).decode("ascii")
    if cpu:
        data["CpuOptions"] = dict(cpu)
    if placement:
        data["Placement"] = dict(placement)
    if reservation is not None:
        reservation_id, kind, interruptible = reservation
        data["CapacityReservationSpecification"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
        }
        if kind == TYPE_CAPACITY_BLOCK:
            data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        elif interruptible:
            data["InstanceMarketOptions"] = {"MarketType": "interruptible-capacity-reservation"}
    return data




def network_interfaces(
    interfaces: Sequence[Mapping[str, Any]],
    security_groups: Sequence[str],
    *,
    public_ip: bool | None,
    ip_prefix_count: int | None,
    ipv6: bool,
    connection_tracking: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """An EC2NodeClass's `networkInterfaces` as the template's NetworkInterfaces, in the class's order: v1.14.1's
    `generateNetworkInterfaces` (launchtemplate.go:302-332, `ipCounts` :371-383). Each interface has its network card,
    device index, type and the security groups; an `efa-only` one nothing else (prefixes, a public address, IPv6 and
    connection tracking make RunInstances fail there); the others the class's `associatePublicIPAddress`,
    `connectionTracking` and `ipPrefixCount` (an IPv6 cluster's as Ipv6PrefixCount, with PrimaryIpv6 and one IPv6
    address)."""
    out = []
    for interface in interfaces:
        kind = str(interface.get("interfaceType") or "")
        spec: dict[str, Any] = {
            "NetworkCardIndex": int(interface.get("networkCardIndex") or 0),
            "DeviceIndex": int(interface.get("deviceIndex") or 0),
            "InterfaceType": kind,
            "Groups": sorted(security_groups),
        }
        if kind != EFA_ONLY:
            spec.update(_addressing(public_ip, ip_prefix_count, ipv6, connection_tracking))
        out.append(dict(sorted(spec.items())))
    return out


def _addressing(
    public_ip: bool | None, ip_prefix_count: int | None, ipv6: bool, connection_tracking: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What an interface that carries IP traffic takes of the class (v1.14.1's `generateNetworkInterfaces`):
    an IPv6 cluster's PrimaryIpv6 and one address, `ipPrefixCount` (as Ipv6PrefixCount there), the public address
    and `connectionTracking`."""
    fields: dict[str, Any] = {}
    if ipv6:
        fields.update({"PrimaryIpv6": True, "Ipv6AddressCount": 1})
    if ip_prefix_count is not None:
        fields["Ipv6PrefixCount" if ipv6 else "Ipv4PrefixCount"] = ip_prefix_count
    if public_ip is not None:
        fields["AssociatePublicIpAddress"] = public_ip
    if connection_tracking is not None:
        fields["ConnectionTrackingSpecification"] = dict(connection_tracking)
    return fields


#: The interface type of an EFA interface that also carries IP traffic (EC2's `efa`).
EFA_INTERFACE = "efa"


def efa_interfaces(
    count: int,
    security_groups: Sequence[str],
    *,
    public_ip: bool | None,
    ip_prefix_count: int | None,
    ipv6: bool,
    connection_tracking: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """`count` EFA interfaces, one per network card, for a claim whose pods request `vpc.amazonaws.com/efa` (the
    class sets no `networkInterfaces`): v1.14.1's `generateNetworkInterfaces` EFA branch (launchtemplate.go:334-353).
    Card i, device index 0 on card 0 and 1 on the others (so that card 0's interface stays primary), type `efa`,
    the security groups, the class's `associatePublicIPAddress`, `ipPrefixCount` (IPv6 cluster: as Ipv6PrefixCount,
    with PrimaryIpv6 and one IPv6 address) and `connectionTracking`."""
    out = []
    for card in range(count):
        spec: dict[str, Any] = {
            "NetworkCardIndex": card,
            "DeviceIndex": 0 if card == 0 else 1,
            "InterfaceType": EFA_INTERFACE,
            "Groups": sorted(security_groups),
            **_addressing(public_ip, ip_prefix_count, ipv6, connection_tracking),
        }
        out.append(dict(sorted(spec.items())))
    return out


def cpu_options(spec: Any) -> dict[str, str] | None:
    """An EC2NodeClass's `cpuOptions` as the template's CpuOptions; None when it sets no `nestedVirtualization`
    (v1.14.1's `cpuOptions`, launchtemplate.go:433-440)."""
    if not isinstance(spec, Mapping) or not spec.get("nestedVirtualization"):
        return None
    return {"NestedVirtualization": str(spec["nestedVirtualization"])}


def placement(group_id: str, partition: int = 0) -> dict[str, Any]:
    """The template's Placement for a placement group (and partition, 0: none): v1.14.1's `buildPlacement` (aws
    pkg/providers/launchtemplate/types.go:184-195; its Tenancy `default` is EC2's default, not written here)."""
    out: dict[str, Any] = {"GroupId": group_id}
    if partition:
        out["PartitionNumber"] = partition
    return out


_TRACKING_FIELDS = {
    "tcpEstablishedTimeout": "TcpEstablishedTimeout", "udpStreamTimeout": "UdpStreamTimeout",
    "udpTimeout": "UdpTimeout",
}  # fmt: skip


def connection_tracking(spec: Any) -> dict[str, int] | None:
    """An EC2NodeClass's `connectionTracking` as the interface's ConnectionTrackingSpecification; None when it sets
    no timeout (v1.14.1's `connectionTrackingSpec`, launchtemplate.go)."""
    if not isinstance(spec, Mapping):
        return None
    found = {ec2: spec[key] for key, ec2 in _TRACKING_FIELDS.items() if isinstance(spec.get(key), int)}
    return dict(sorted(found.items())) or None


def template_name(cluster_name: str, data: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(canonical_json({"cluster": cluster_name, "data": data}).encode("utf-8")).hexdigest()
    return NAME_PREFIX + digest


@dataclass(slots=True)
class _Owned:
    """A template this provider made or took in: the cluster it is for, when a launch last needed it
    (monotonic), until when its existence is known, the launches under way that use it, a deletion under way."""

    cluster: str
    used: float
    known_until: float = -math.inf
    pins: int = 0
    deleting: bool = False


class LaunchTemplates:
    """Creates templates on first use, remembers which exist and when each was last needed, deletes the ones no
    launch has needed for ``ttl`` seconds (see the module docstring)."""

    def __init__(self, api: AwsApi, clock: Clock, ttl: float = TEMPLATE_TTL) -> None:
        self._api = api
        self._clock = clock
        self._ttl = ttl
        self._named: TtlCache[bool] = TtlCache(clock, ttl)  # node templates' own templates: existence only
        self._owned: dict[str, _Owned] = {}
        self._changed = threading.Condition()
        self._taken_in: set[str] = set()  # clusters whose earlier templates were taken in

    def acquire(self, name: str, data: Mapping[str, Any], cluster_name: str) -> None:
        """Make sure the template ``name`` exists with ``data`` (created, tagged for the cluster, if absent) and
        pin it for a launch: it is not deleted before :meth:`release`."""
        now = self._clock()
        with self._changed:
            while (entry := self._owned.get(name)) is not None and entry.deleting:
                self._changed.wait()
            if entry is None:
                entry = self._owned[name] = _Owned(cluster_name, now)
            entry.used = max(entry.used, now)
            entry.pins += 1
            known = entry.known_until > now
        if known:
            return
        try:
            self._create_unless_present(name, data, cluster_name)
        except BaseException:
            self.release([name])
            raise
        with self._changed:
            entry.known_until = now + self._ttl

    def release(self, names: Iterable[str]) -> None:
        """The launch that acquired these templates is over: they age from now."""
        now = self._clock()
        with self._changed:
            for name in names:
                entry = self._owned.get(name)
                if entry is not None and entry.pins > 0:
                    entry.pins -= 1
                    entry.used = max(entry.used, now)

    def recreate(self, name: str, data: Mapping[str, Any], cluster_name: str) -> None:
        """A launch found the (pinned) template gone: create it again."""
        with self._changed:
            entry = self._owned.get(name)
            if entry is not None:
                entry.known_until = -math.inf
        self._create_unless_present(name, data, cluster_name)
        with self._changed:
            if entry is not None:
                entry.known_until = self._clock() + self._ttl

    def _create_unless_present(self, name: str, data: Mapping[str, Any], cluster_name: str) -> None:
        if self._exists(name):
            return
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

    def require(self, name: str) -> None:
        """A template the node template names must exist: :class:`NotFound` otherwise."""

        def load() -> bool:
            if not self._exists(name):
                raise NotFound(
                    self._api.endpoint("ec2"), f"launch template {name!r} does not exist", "DescribeLaunchTemplates"
                )
            return True

        self._named.get_or_load(name, load)

    def collect(self, cluster_name: str) -> list[str]:
        """Delete the cluster's templates no launch has needed for ``ttl`` seconds and none uses now; their names.
        The first call takes in the templates earlier runs left (:class:`CloudError` if they cannot be listed:
        nothing is deleted then, and the next call tries again). A deletion that fails is logged and tried again
        at the next call."""
        if cluster_name not in self._taken_in:
            self._take_in(cluster_name)
            self._taken_in.add(cluster_name)
        now = self._clock()
        with self._changed:
            doomed = sorted(
                name for name, entry in self._owned.items()
                if entry.cluster == cluster_name and not entry.pins and not entry.deleting
                and now - entry.used >= self._ttl
            )
            for name in doomed:
                self._owned[name].deleting = True
        deleted = []
        for name in doomed:
            gone = False
            try:
                gone = self._delete(name)
            finally:  # whatever happened, a launch waiting for this template goes on
                with self._changed:
                    if gone:
                        del self._owned[name]
                    else:
                        self._owned[name].deleting = False
                    self._changed.notify_all()
            if gone:
                deleted.append(name)
                log.info("deleted launch template %s, unused for %.0fs", name, self._ttl)
        return deleted

    def _delete(self, name: str) -> bool:
        """DeleteLaunchTemplate; whether the template is gone now."""
        try:
            self._api.call("ec2", "delete_launch_template", LaunchTemplateName=name)
        except NotFound:
            return True  # deleted by someone else already
        except CloudError as error:
            if self._gone(name):
                return True
            log.warning("could not delete launch template %s (tried again later): %s", name, error)
            return False
        return True

    def _take_in(self, cluster_name: str) -> None:
        found = self._api.paginate(
            "ec2",
            "describe_launch_templates",
            "LaunchTemplates",
            Filters=[
                {"Name": f"tag:{cluster_tag(cluster_name)}", "Values": ["owned"]},
                {"Name": f"tag:{TAG_MANAGED_BY}", "Values": [cluster_name]},
            ],
        )
        names = [str(t.get("LaunchTemplateName") or "") for t in found if isinstance(t, dict)]
        now = self._clock()
        with self._changed:
            for name in names:
                if name.startswith(NAME_PREFIX) and name not in self._owned:
                    self._owned[name] = _Owned(cluster_name, now, known_until=now + self._ttl)

    def _gone(self, name: str) -> bool:
        """After a deletion failed: whether the template is gone anyway (False when that cannot be told)."""
        try:
            return not self._exists(name)
        except CloudError:
            return False

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
    "EFA_INTERFACE",
    "EFA_ONLY",
    "connection_tracking",
    "cpu_options",
    "efa_interfaces",
    "metadata_options",
    "network_interfaces",
    "placement",
    "template_data",
    "template_name",
    "volume_gib",
]
