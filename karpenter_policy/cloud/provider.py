"""The :class:`CloudProvider` protocol: what the reconciler asks of a cloud, and the contract each answer keeps.

A provider launches one node per :class:`LaunchRequest` from a list of offerings the scheduler chose
(instance type x zone x capacity type, cheapest first), deletes, gets and lists its instances, deletes the launch
templates no launch needs any more (garbage collection asks it every pass), and tells which
instance types it can launch right now: the catalog's types with their live offerings (zones, prices,
availability). Offerings that just failed for lack of capacity are unavailable for
:data:`UNAVAILABLE_OFFERING_TTL` seconds, so the scheduler picks other ones meanwhile.

Implementations: :class:`karpenter_policy.cloud.aws.provider.AwsCloudProvider` (boto3, CreateFleet) and
:class:`karpenter_policy.fakes.cloud.FakeCloudProvider` (in memory, for controller tests).
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from karpenter_policy.cloud.capacityreservations import CapacityReservation, ReservedOffering
from karpenter_policy.cloud.errors import FailedOffering
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType
from karpenter_policy.model.pools import owner_label, owner_labels, pool_name, pool_of_labels
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.taints import Taint

#: Seconds since an arbitrary origin, never going back (``time.monotonic``); tests pass a fake one.
Clock = Callable[[], float]

#: How long an offering stays unavailable after the cloud reported insufficient capacity (Karpenter: 3 min).
UNAVAILABLE_OFFERING_TTL = 180.0

#: Tags on every instance a provider launches. The cluster tag (value ``owned``) and the provisioner tag
#: identify the instances :meth:`CloudProvider.list` returns; the client token makes a launch idempotent.
TAG_CLUSTER_PREFIX = "kubernetes.io/cluster/"
TAG_PROVISIONER = wk.PROVISIONER_NAME
#: A Karpenter v1 NodePool's instances carry this tag instead of the provisioner tag (v1.14.1's instance tags).
TAG_NODEPOOL = wk.NODEPOOL
#: The tags that say which pool launched an instance: one of them marks an instance as launched for a pool.
POOL_TAGS = (TAG_PROVISIONER, TAG_NODEPOOL)
TAG_MANAGED_BY = wk.MANAGED_BY
TAG_CONSTRAINT_SET_HASH = "karpenter-policy/constraint-set-hash"
TAG_CLIENT_TOKEN = "karpenter-policy/client-token"
TAG_NAME = "Name"

#: Instance states; ``terminated`` instances are gone (get returns None, list skips them).
STATE_PENDING = "pending"
STATE_RUNNING = "running"
STATE_SHUTTING_DOWN = "shutting-down"
STATE_TERMINATED = "terminated"
STATE_STOPPING = "stopping"
STATE_STOPPED = "stopped"
LIVE_STATES = (STATE_PENDING, STATE_RUNNING, STATE_SHUTTING_DOWN, STATE_STOPPING, STATE_STOPPED)

#: The client token is stored as a tag value (at most 256 characters on EC2).
MAX_CLIENT_TOKEN_LENGTH = 255


def cluster_tag(cluster_name: str) -> str:
    """The tag key marking a cluster's resources (``kubernetes.io/cluster/<name>``, value ``owned``)."""
    return f"{TAG_CLUSTER_PREFIX}{cluster_name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchRequest:
    """One node to launch, as the reconciler decided it.

    ``options`` are the offerings the node may run on, cheapest first: each is an instance type admitted by the
    provisioner's constraint set, in a zone and capacity type its requirements allow, priced from
    :meth:`CloudProvider.instance_types`. ``requirements`` are the node's (the provisioner's narrowed by the
    pods it is for); ``labels``, ``taints`` and ``startup_taints`` go on the node at registration.
    ``provider`` is the AWSNodeTemplate spec (``ProviderSettings.spec``: subnetSelector,
    securityGroupSelector, amiFamily, amiSelector, instanceProfile, launchTemplate, userData, tags,
    blockDeviceMappings, metadataOptions, detailedMonitoring) and ``kubelet`` the provisioner's
    kubeletConfiguration. ``client_token`` makes the launch idempotent: a second request with the same token
    returns the instance the first one launched instead of launching another. ``min_values_relaxed``: the claim's
    minValues were relaxed (Karpenter's `karpenter.sh/nodeclaim-min-values-relaxed: "true"`); the AWS provider then
    launches without the EC2NodeClass's `context`, as v1.14.1 does (aws pkg/providers/instance/instance.go:379).
    ``efa_requested``: the claim's pods request `vpc.amazonaws.com/efa`; the AWS provider then launches each type
    with its EFA interfaces, one per network card (v1.14.1's `EFACount`, aws pkg/providers/amifamily/resolver.go:192).
    """

    cluster_name: str
    provisioner: str
    constraint_set_hash: str
    options: Sequence[ChosenOffering]
    client_token: str
    requirements: Requirements = field(default_factory=Requirements)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    startup_taints: Sequence[Taint] = ()
    provider: Mapping[str, Any] | None = None
    kubelet: Mapping[str, Any] | None = None
    min_values_relaxed: bool = False
    efa_requested: bool = False

    def __post_init__(self) -> None:
        if not self.client_token or len(self.client_token) > MAX_CLIENT_TOKEN_LENGTH:
            raise ValueError(f"a launch request needs a client token of 1 to {MAX_CLIENT_TOKEN_LENGTH} characters")
        if not self.options:
            raise ValueError("a launch request needs at least one offering to try")
        if not self.cluster_name or not self.provisioner:
            raise ValueError("a launch request needs a cluster name and a provisioner name")


@dataclass(frozen=True, slots=True)
class Instance:
    """A cloud instance as a provider reports it.

    ``capacity_type`` is ``spot``, ``on-demand`` or (launched into a capacity reservation) ``reserved``; ``state``
    one of the ``STATE_*`` values; ``launch_template`` the template's name (its id when only the id is known, empty
    when the cloud does not say);
    ``provider_id`` is what the node's ``spec.providerID`` will be (``aws:///<zone>/<instance id>``).
    ``failed_offerings`` are the offerings :meth:`CloudProvider.create` tried first and the cloud refused for lack
    of capacity (now marked unavailable) before this instance launched.
    ``subnet_id`` (empty when the cloud did not say) and ``security_groups`` (their ids; None when the cloud did not
    say, or said it in an unexpected shape) are what subnet and security-group drift compare with :class:`Network`.
    ``placement_group`` is the id of the placement group it was launched into (empty: none, or the cloud did not
    say) and ``placement_partition`` its partition as v1.14.1 labels it (cloudprovider.go:472-488): the number
    (``"2"``), ``""`` in a partition group whose partition EC2 has not said yet (the sentinel the registration hook
    fills), None outside a partition group or when the cloud cannot tell.
    """

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    private_dns_name: str = ""
    launch_time: dt.datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    image_id: str = ""
    launch_template: str = ""
    provider_id: str = ""
    failed_offerings: tuple[FailedOffering, ...] = ()
    subnet_id: str = ""
    security_groups: tuple[str, ...] | None = None
    #: a `reserved` instance's capacity reservation: its id, type (`default`, `capacity-block`) and interruptibility
    #: (v1.14.1's `CapacityReservationDetails`); empty otherwise
    reservation_id: str = ""
    reservation_type: str = ""
    reservation_interruptible: bool = False
    placement_group: str = ""
    placement_partition: str | None = None
    #: the EFA interfaces it was launched with (v1.14.1's `Instance.EFACount`: at launch `model.nodeclassfit.
    #: launched_efas`, read back — a restart, a retried launch — its `efa` and `efa-only` interfaces): its node
    #: offers `vpc.amazonaws.com/efa` only when > 0; 0 also when the cloud does not say
    efa_interfaces: int = 0

    @property
    def provisioner(self) -> str | None:
        """The pool key (`model.pools`) of the pool it was launched for: a Provisioner's name or `NodePool/<name>`."""
        return pool_of_labels(self.tags)

    @property
    def constraint_set_hash(self) -> str | None:
        return self.tags.get(TAG_CONSTRAINT_SET_HASH)


@dataclass(frozen=True, slots=True)
class Network:
    """The subnets and security groups (ids) a node class's selectors resolve to now: what Karpenter v1.14.1 keeps
    in an EC2NodeClass's `status.subnets` and `status.securityGroups`, and what subnet and security-group drift
    compare an instance with (aws pkg/cloudprovider/drift.go). Either may be empty: nothing resolves.
    `placement_group`: the id of the placement group the class's `placementGroupSelector` resolves to, what
    placement-group drift compares a node's `karpenter.k8s.aws/placement-group-id` label with ("": it names none, or
    none is found; None: the cloud could not tell). `reservations`: the ids of the capacity reservations its
    `capacityReservationSelectorTerms` select now (v1.14.1's `status.capacityReservations`; empty: none), what
    capacity-reservation drift compares a reserved instance's reservation with (None: the cloud could not tell, or
    the disruption controller runs with the ReservedCapacity gate off)."""

    subnets: frozenset[str]
    security_groups: frozenset[str]
    placement_group: str | None = ""
    reservations: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class NodeClassResolution:
    """What a node class's AMI selection and instance profile resolve to now: what Karpenter v1.14.1 keeps in an
    EC2NodeClass's `status.amis` and `status.instanceProfile` (aws pkg/controllers/nodeclass/ami.go,
    instanceprofile.go). `images`: the AMI ids its selector (or its family's SSM parameters) give the instance types
    of the catalog — empty when none matches, None when the cloud could not tell; `instance_profile`: the profile its
    launches use (its own, else the provider's default; "" when there is none); `instance_profile_found`: whether the
    cloud has that profile (None: it could not tell); `placement_group_found`: whether the cloud has the placement
    group its `placementGroupSelector` names (True when it names none; None: it could not tell)."""

    images: frozenset[str] | None
    instance_profile: str
    instance_profile_found: bool | None
    placement_group_found: bool | None = True


def launch_tags(request: LaunchRequest, global_tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tags of an instance launched for ``request``, as Karpenter v0.31 computes them: ``Name``
    (``karpenter.sh/provisioner-name/<provisioner>``) can be overridden by the global tags and the node
    template's ``tags``; the cluster, provisioner, managed-by, constraint-set and client-token tags cannot. A
    NodePool's instance (``request.provisioner`` a `NodePool/<name>` pool key) carries ``karpenter.sh/nodepool``
    instead of the provisioner tag, as Karpenter v1 tags it."""
    spec_tags = (request.provider or {}).get("tags") or {}
    fixed = {
        cluster_tag(request.cluster_name): "owned",
        **owner_labels(request.provisioner),
        TAG_MANAGED_BY: request.cluster_name,
        TAG_CONSTRAINT_SET_HASH: request.constraint_set_hash,
        TAG_CLIENT_TOKEN: request.client_token,
    }
    owner = owner_label(request.provisioner)
    tags = {TAG_NAME: f"{owner}/{pool_name(request.provisioner)}"}
    tags.update({str(k): str(v) for k, v in (global_tags or {}).items()})
    tags.update({str(k): str(v) for k, v in dict(spec_tags).items()})
    tags.update(fixed)
    return dict(sorted(tags.items()))


class CloudProvider(Protocol):
    """What the reconciler needs of a cloud. Every method raises only :class:`~karpenter_policy.cloud.CloudError`
    (or a subclass) for cloud failures; ``ValueError`` only for a malformed argument."""

    def create(self, request: LaunchRequest) -> Instance:
        """Launch one instance for ``request`` and return it.

        Tries ``request.options`` in order (offerings currently marked unavailable are skipped); an offering the
        cloud refuses for lack of capacity is marked unavailable (:meth:`mark_unavailable`) and the next ones
        are tried within this call. Raises :class:`~karpenter_policy.cloud.InsufficientCapacity` only when every
        option failed, :class:`~karpenter_policy.cloud.ConfigurationError` when the provider settings cannot
        launch anything (no subnet, security group, AMI or launch template), :class:`Throttled` when the cloud
        kept throttling after retries. Idempotent per ``request.client_token``.
        """
        ...

    def delete(self, instance_id: str) -> None:
        """Terminate the instance. Idempotent: an instance that is already gone (or never existed) is fine."""
        ...

    def get(self, instance_id: str) -> Instance | None:
        """The instance, or None when the cloud does not know it or it is terminated."""
        ...

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        """Every instance this provider launched for ``cluster_name`` (tagged with the cluster and a
        provisioner) that is not terminated, sorted by id."""
        ...

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        """The catalog's instance types with their live offerings, sorted by name.

        An offering is a zone where the type is offered now x a capacity type the type supports, priced now
        (spot from the spot market, on-demand from the price list, falling back to the embedded table). It is
        unavailable when it has no price or recently failed for lack of capacity. Types offered in no zone are
        left out. With ``provider`` (an AWSNodeTemplate spec) offerings are limited to the zones its subnets are
        in. ``region`` must be None or the provider's own region. Answers are cached for a refresh period.
        """
        ...

    def unlaunchable(self, provider: Mapping[str, Any] | None) -> str | None:
        """Why nodes of these provider settings (an AWSNodeTemplate spec) cannot be launched now although the
        settings are valid — a fact of the cluster the cloud has not told (AL2023's service CIDR) — or None when
        they can. Never raises: the node claim templates leave such a set out with this reason, as Karpenter v1
        holds a node class that is not ready."""
        ...

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        """Make the offering unavailable for :data:`UNAVAILABLE_OFFERING_TTL` seconds (e.g. after a spot
        interruption warning or an insufficient-capacity error)."""
        ...

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        """The image a node of `instance_type` launched now with these provider settings (an AWSNodeTemplate
        spec) would get — what AMI drift compares a node's image with. None when it cannot be told (no image
        resolves, the cloud could not be asked): no drift is concluded then. Answers are cached like launches'."""
        ...

    def network(self, provider: Mapping[str, Any] | None) -> Network | None:
        """The subnets and security groups these provider settings (an AWSNodeTemplate spec) select now, or None
        when the cloud cannot tell (it failed): no network drift is concluded then. Answers are cached like
        launches'."""
        ...

    def node_class(self, provider: Mapping[str, Any] | None) -> NodeClassResolution:
        """The images and the instance profile these provider settings (an AWSNodeTemplate spec, or an EC2NodeClass's
        launch settings) resolve to now (an EC2NodeClass's `AMIsReady` and `InstanceProfileReady`). Answers are
        cached like launches'."""
        ...

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        """Delete the launch templates this provider made for ``cluster_name`` that no launch has needed for their
        time to live (templates of old images and settings, of node templates since deleted), never one a launch
        under way uses; return their names. The first call also takes in the cluster's templates left by earlier
        runs, which then get a full time to live before they can go. Garbage collection calls it each pass."""
        ...


@runtime_checkable
class ReservingCloud(Protocol):
    """A cloud that tells the reserved offerings of an EC2NodeClass's capacity reservations and keeps their room
    (`AwsCloudProvider`)."""

    def capacity_reservations(self, provider: Mapping[str, Any] | None) -> tuple[CapacityReservation, ...] | None:
        """The capacity reservations the settings' `capacityReservationSelectorTerms` select now, as v1.14.1's class
        status lists them (its `state` `expiring` from 40 minutes before a capacity block's end); None when the
        cloud could not answer (unknown, not none)."""
        ...

    def reserved_offerings(
        self, provider: Mapping[str, Any] | None, *, enabled: bool = True
    ) -> dict[str, tuple[ReservedOffering, ...]] | None:
        """instance type -> the reserved offerings of the settings' capacity reservations (`enabled`: Karpenter's
        ReservedCapacity gate; off: none); None when they are unknown now."""
        ...

    def mark_reservation_unavailable(self, reservation_id: str) -> None:
        """Take the reservation's room to 0 until EC2 answers for it again (v1.14.1's capacityreservation provider
        `MarkUnavailable`: a launch refused for its capacity, or a capacity-reservation interruption warning)."""
        ...


@runtime_checkable
class PlacingCloud(Protocol):
    """A cloud that tells the placement group an EC2NodeClass launches into (`AwsCloudProvider`)."""

    def placement_requirements(self, provider: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
        """The values v1.14.1 adds to the class's instance types and offerings for its placement group
        (offering.go `InjectOfferings`, placement_group_resolver.go): `karpenter.k8s.aws/placement-group-id` its id,
        and for a partition group with a partition count `…/placement-group-partition` `1` … `N` — the topology
        domains a spread over those keys finds. Empty: no group named, or none found (or the cloud cannot tell)."""
        ...


__all__ = [
    "LIVE_STATES",
    "TAG_CLIENT_TOKEN",
    "TAG_CLUSTER_PREFIX",
    "TAG_CONSTRAINT_SET_HASH",
    "TAG_MANAGED_BY",
    "TAG_NAME",
    "POOL_TAGS",
    "TAG_NODEPOOL",
    "TAG_PROVISIONER",
    "UNAVAILABLE_OFFERING_TTL",
    "Clock",
    "CloudProvider",
    "Instance",
    "LaunchRequest",
    "Network",
    "NodeClassResolution",
    "PlacingCloud",
    "ReservingCloud",
    "cluster_tag",
    "launch_tags",
]
