"""The AWS :class:`~karpenter_policy.cloud.provider.CloudProvider`: EC2 CreateFleet launches, live offerings.

``create`` resolves the node template (subnets and security groups by selector, AMI per instance type,
userData for the AMI family, a launch template per AMI x max-pods group, created once by content hash and
pinned until the launch is over; ``collect_launch_templates`` deletes those unused for an hour), then
asks CreateFleet for one instance: the options of the first capacity type in the caller's (cheapest-first)
order, up to 60 type x subnet overrides per request. Pools EC2 reports as out of capacity are marked
unavailable for three minutes and the remaining options (then the other capacity type) are tried in the same
call; :class:`~karpenter_policy.cloud.InsufficientCapacity` is raised only when none is left. Throttling and
5xx answers are retried by botocore's standard mode with exponential backoff; a launch is idempotent per
client token (EC2 ClientToken per request, and an instance already tagged with the token is returned as is).

``instance_types`` prices the catalog's types with live data (see :mod:`karpenter_policy.cloud.offerings`):
zones and spot prices refreshed every ``offerings_refresh`` seconds (the previous answer stays in use while a
refresh fails), on-demand prices from the Price List API every ``pricing_refresh`` seconds, the catalog's
(embedded) on-demand prices when that API cannot answer.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.constraintset import node_configuration_of
from karpenter_policy.api.v1.launchsettings import (
    CONNECTION_TRACKING,
    CONTEXT,
    CPU_OPTIONS,
    IP_PREFIX_COUNT,
    MAX_PARTITIONS,
    NETWORK_INTERFACES,
    PLACEMENT_GROUP,
    PUBLIC_IP,
    alias_version,
    ami_terms,
    selectors,
)
from karpenter_policy.api.v1.objects import arithmetic_family
from karpenter_policy.cloud.aws import compatibility, pricing, userdata
from karpenter_policy.cloud.aws import fleet as fleets
from karpenter_policy.cloud.aws.amis import DEFAULT_FAMILY, NAME_KEY, AmiResolver
from karpenter_policy.cloud.aws.api import AwsApi, AwsConnection
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.aws.discovery import Discovery, Subnet
from karpenter_policy.cloud.aws.instanceprofiles import InstanceProfiles
from karpenter_policy.cloud.aws.launchtemplates import (
    EFA_INTERFACE,
    LaunchTemplates,
    block_device_mappings,
    connection_tracking,
    cpu_options,
    metadata_options,
    placement,
    template_data,
    template_name,
)
from karpenter_policy.cloud.aws.placementgroups import PARTITION, PlacementGroups
from karpenter_policy.cloud.aws.reservations import CapacityReservations
from karpenter_policy.cloud.aws.servicecidr import ServiceCidr
from karpenter_policy.cloud.capacityreservations import TERMS as RESERVATION_TERMS
from karpenter_policy.cloud.capacityreservations import (
    TYPE_CAPACITY_BLOCK,
    TYPE_DEFAULT,
    CapacityReservation,
    ReservedOffering,
    instance_reservation,
    launch_choices,
    reserved_offerings,
)
from karpenter_policy.cloud.errors import (
    CloudError,
    ConfigurationError,
    FailedOffering,
    InsufficientCapacity,
    NotFound,
)
from karpenter_policy.cloud.networkselection import GROUP_ID, SUBNET_ID, filter_sets, selection
from karpenter_policy.cloud.offerings import live_instance_types, with_unavailable
from karpenter_policy.cloud.provider import (
    LIVE_STATES,
    POOL_TAGS,
    STATE_PENDING,
    STATE_TERMINATED,
    TAG_CLIENT_TOKEN,
    UNAVAILABLE_OFFERING_TTL,
    Clock,
    Instance,
    LaunchRequest,
    Network,
    NodeClassResolution,
    cluster_tag,
    launch_tags,
)
from karpenter_policy.cloud.unavailable import UnavailableOfferings
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import INSTANCE_STORE_POLICY, RAID0, max_pods, with_efa_only_enis
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType
from karpenter_policy.model.nodeclassfit import EFA_ONLY, efas, interfaces_of, launched_efas
from karpenter_policy.model.pools import is_nodepool
from karpenter_policy.model.taints import with_unregistered

log = logging.getLogger(__name__)

OFFERINGS_REFRESH = 300.0
PRICING_REFRESH = 12 * 3600.0
#: A catalog this small is priced with queries filtered by type (cheaper than reading the whole region).
FILTERED_QUERY_LIMIT = 200
#: EC2 is eventually consistent: an instance CreateFleet just returned may not be described yet.
DESCRIBE_ATTEMPTS = 3
#: How many zone sets (node classes' subnets), and how many launch settings' compatibility checks, the types made
#: for them are kept for.
ZONED_KEPT = 8
_LAUNCH_TEMPLATE_TAG = "aws:ec2launchtemplate:id"
#: The AMI family whose nodes boot with nodeadm (and so need the cluster's service CIDR).
NODEADM_FAMILY = "AL2023"
#: The launch settings' AMI selector key (`api.v1.launchsettings.selectors`).
AMIS = "amiSelector"


def _bottlerocket_release(spec: Mapping[str, Any]) -> str:
    """The Bottlerocket release the settings boot, as v1.14.1's `resolveAMIVersion` reads it (aws
    pkg/providers/amifamily/bottlerocket.go): an alias's version (`latest` when it pins none), else the version a
    name term says (an AWSNodeTemplate: its selector's name; none: the family's latest); empty when unknown (ids and
    the resolved images' names are not read here: then the older `bind --dirs …`, which every release takes)."""
    terms = ami_terms(spec)
    if terms:
        return alias_version(terms) or userdata.bottlerocket_version([str(t["name"]) for t in terms if t.get("name")])
    found = selectors(spec, AMIS)
    if not found:
        return "latest"
    return userdata.bottlerocket_version([str(s[NAME_KEY]) for s in found if s.get(NAME_KEY)])


def _prefixes(value: Any) -> int | None:
    """An EC2NodeClass's `ipPrefixCount` (admission: an integer ≥ 0); None when unset."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fleet_context(request: LaunchRequest) -> str | None:
    """CreateFleet's `Context`: the EC2NodeClass's `context`, unless the claim's minValues were relaxed (v1.14.1's
    instance.go:379-381; None: no `Context`)."""
    context = (request.provider or {}).get(CONTEXT)
    return None if context is None or request.min_values_relaxed else str(context)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class ClusterSettings:
    """The cluster nodes join: API server endpoint, CA bundle (base64), Kubernetes version (for the default
    AMIs), the cluster DNS IP, the instance profile used when a node template names none, and tags put on every
    instance (node templates' tags override them); its EKS name, of which AL2023 nodes' service CIDR is asked
    (`servicecidr`), unless `service_cidr` gives it."""

    endpoint: str
    ca_bundle: str
    kubernetes_version: str
    dns_cluster_ip: str | None = None
    default_instance_profile: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    service_cidr: str | None = None


@dataclass
class _Templates:
    """The launch template of each instance type of one launch, and each template's data."""

    by_type: dict[str, str] = field(default_factory=dict)
    data: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: a reserved launch's template per capacity reservation (v1.14.1: one per reservation id)
    by_reservation: dict[str, str] = field(default_factory=dict)


class AwsCloudProvider:
    """Launches, finds and terminates EC2 instances for one region and cluster; prices the catalog live."""

    def __init__(
        self,
        connection: AwsConnection,
        cluster: ClusterSettings,
        catalog: Sequence[InstanceType],
        *,
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utc_now,
        sleep: Callable[[float], None] = time.sleep,
        offerings_refresh: float = OFFERINGS_REFRESH,
        pricing_refresh: float = PRICING_REFRESH,
        unavailable_ttl: float = UNAVAILABLE_OFFERING_TTL,
        use_pricing_api: bool = True,
    ) -> None:
        self.region = connection.region
        self.cluster = cluster
        self.api = AwsApi(connection)
        self.unavailable = UnavailableOfferings(clock, unavailable_ttl)
        self._catalog = {it.name: it for it in catalog}
        self._fallback_prices = {it.name: it.price_on_demand for it in catalog if it.price_on_demand is not None}
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._pricing_refresh = pricing_refresh
        self._offerings_refresh = offerings_refresh
        self._use_pricing_api = use_pricing_api
        self._discovery = Discovery(self.api, clock)
        self._amis = AmiResolver(self.api, clock, cluster.kubernetes_version, wall_clock=wall_clock)
        self._profiles = InstanceProfiles(self.api, clock)
        self._templates = LaunchTemplates(self.api, clock)
        self._placement_groups = PlacementGroups(self.api, clock)
        self.reservations = CapacityReservations(self.api, clock, wall_clock)
        #: v1.14.1's `ClusterIPFamily`: IPv6 when the cluster DNS IP is an IPv6 address (aws pkg/operator).
        self._ipv6 = ":" in (cluster.dns_cluster_ip or "")
        self._service_cidr = ServiceCidr(self.api, cluster.name, clock, cluster.service_cidr)
        self._zones: TtlCache[dict[str, frozenset[str]]] = TtlCache(clock, offerings_refresh, keep_stale=True)
        self._spot: TtlCache[dict[str, dict[str, float]]] = TtlCache(clock, offerings_refresh, keep_stale=True)
        self._described: TtlCache[dict[str, dict[str, Any]]] = TtlCache(clock, offerings_refresh, keep_stale=True)
        self._lock = threading.Lock()
        self._on_demand: tuple[float, dict[str, float]] | None = None  # (valid until, prices)
        self._built: tuple[tuple[object, object, object], list[InstanceType]] | None = None
        #: (live types, zones, those types in those zones), for the current live types only.
        self._zoned: builtins.list[
            tuple[builtins.list[InstanceType], frozenset[str], builtins.list[InstanceType]]
        ] = []
        #: (types, DescribeInstanceTypes' answer, what the check reads of the settings, the checked types), the last
        #: few for the current answer.
        self._fitted: builtins.list[
            tuple[builtins.list[InstanceType], object, str, builtins.list[InstanceType]]
        ] = []
        self._reserved_instances: dict[str, str] = {}  # instance id -> its capacity reservation

    # --- offerings ------------------------------------------------------------------------------------------

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        if region is not None and region != self.region:
            raise ValueError(f"this provider serves region {self.region}, not {region}")
        types = self._live_types()
        if filter_sets(provider, SUBNET_ID) != [[]]:  # the settings select subnets
            types = self._in_zones(types, frozenset(self._discovery.subnet_per_zone(provider)))
        types = self._compatible(types, provider or {})
        # A list of its own per call (the types are frozen): a caller changing it changes no cached list.
        return with_unavailable(types, self.unavailable.active())

    def _in_zones(
        self, types: builtins.list[InstanceType], zones: frozenset[str]
    ) -> builtins.list[InstanceType]:
        """The types offered in ``zones`` with their offerings there, made again only when the live types (by
        identity) or the zones change, not per call: a reconcile asks with the same settings many times."""
        with self._lock:
            for built, known, found in self._zoned:
                if built is types and known == zones:
                    return found
        found = [
            dataclasses.replace(it, offerings=tuple(o for o in it.offerings if o.zone in zones))
            for it in types
            if any(o.zone in zones for o in it.offerings)
        ]
        with self._lock:
            # Kept for the current live types only, one entry per zone set (a few node classes).
            self._zoned = [entry for entry in self._zoned if entry[0] is types][-ZONED_KEPT + 1 :] + [
                (types, zones, found)
            ]
        return found

    def _compatible(self, types: builtins.list[InstanceType], spec: Mapping[str, Any]) -> builtins.list[InstanceType]:
        """The types with the offerings of those that cannot launch with the settings' `networkInterfaces`,
        `cpuOptions` and placement group made unavailable, as v1.14.1's `IsCompatibleWithNodeClass` decides from
        DescribeInstanceTypes (`cloud.aws.compatibility`; the region's answer kept as the offerings') and its
        offering resolver marks them (instancetype suite_test.go:3205); unchanged when the settings set none of
        these. A type EC2 does not describe is not compatible when a check applies."""
        interfaces = spec.get(NETWORK_INTERFACES)
        interfaces = interfaces if isinstance(interfaces, list) else None
        cpu = spec.get(CPU_OPTIONS)
        try:  # v1.14.1 reads the group ignoring the error: none found, no strategy check
            group = self._placement_groups.get(spec[PLACEMENT_GROUP]) if spec.get(PLACEMENT_GROUP) else None
        except CloudError:
            group = None
        strategy = group.strategy if group is not None else None
        nested = isinstance(cpu, Mapping) and cpu.get("nestedVirtualization") == "enabled"
        if interfaces is None and not nested and strategy is None:
            return types
        described = self._described.get_or_load("types", self._describe_types)
        # Made again only when the types, EC2's answer (by identity) or what the check reads of the settings change,
        # not per call: a reconcile asks with the same settings many times.
        read = json.dumps([interfaces, cpu, strategy], sort_keys=True, default=str)
        with self._lock:
            for built, answer, known, found in self._fitted:
                if built is types and answer is described and known == read:
                    return found

        def fits(it: InstanceType) -> bool:
            info = described.get(it.name)
            return info is not None and compatibility.compatible(info, interfaces, cpu, strategy)

        found = [
            it if fits(it) else dataclasses.replace(
                it, offerings=tuple(dataclasses.replace(o, available=False) for o in it.offerings))
            for it in types
        ]
        with self._lock:
            # The last few (node classes alternate; each zone set has its types), for the current answer only.
            current = [entry for entry in self._fitted if entry[1] is described]
            self._fitted = [*current[-ZONED_KEPT + 1 :], (types, described, read, found)]
        return found

    def _describe_types(self) -> dict[str, dict[str, Any]]:
        """DescribeInstanceTypes of the region, by name: every page (EC2 refuses a list naming a type it does not
        have, and the catalog names some no region sells any more), as v1.14.1's instance-type provider asks."""
        found: dict[str, dict[str, Any]] = {}
        for info in self.api.paginate("ec2", "describe_instance_types", "InstanceTypes"):
            if isinstance(info, dict) and isinstance(info.get("InstanceType"), str):
                found[info["InstanceType"]] = {k: info[k] for k in compatibility.READ if k in info}
        return found

    def on_demand_prices(self) -> dict[str, float]:
        """instance type -> on-demand USD/hour: the Price List API's, the catalog's where it has none (or when
        it cannot be reached; then it is asked again after ``offerings_refresh`` seconds)."""
        now = self._clock()
        with self._lock:
            if self._on_demand is not None and self._on_demand[0] > now:
                return self._on_demand[1]
        prices = dict(self._fallback_prices)
        valid_for = self._pricing_refresh
        if self._use_pricing_api:
            try:
                prices.update(pricing.fetch_on_demand_prices(self.api, self.region))
            except CloudError as error:
                log.warning("on-demand prices from the embedded table: the Price List API failed: %s", error)
                valid_for = self._offerings_refresh
        with self._lock:
            self._on_demand = (now + valid_for, prices)
        return prices

    def _live_types(self) -> builtins.list[InstanceType]:
        names = sorted(self._catalog) if len(self._catalog) <= FILTERED_QUERY_LIMIT else None
        zones = self._zones.get_or_load("zones", lambda: pricing.fetch_zones(self.api, names))
        spot = self._spot.get_or_load("spot", lambda: pricing.fetch_spot_prices(self.api, self._wall_clock(), names))
        on_demand = self.on_demand_prices()
        sources = (zones, spot, on_demand)
        with self._lock:
            # The same answers (by identity: the caches hand out the objects they hold) build the same types.
            if self._built is not None and all(a is b for a, b in zip(self._built[0], sources, strict=True)):
                return self._built[1]
        built = live_instance_types(self._catalog.values(), zones, on_demand, spot)
        with self._lock:
            self._built = (sources, built)
        return built

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        spec = provider or {}
        it = self._catalog.get(instance_type)
        if it is None:
            return None
        try:
            family = spec.get("amiFamily") or None
            images = self._amis.images(family, selectors(spec, AMIS), [it], ami_terms(spec))
        except CloudError:
            return None
        return images.get(instance_type)

    def network(self, provider: Mapping[str, Any] | None) -> Network | None:
        """The subnets and security groups the settings' selectors match now, as a launch reads them (Karpenter
        v1.14.1's EC2NodeClass `status.subnets` / `status.securityGroups`), the id of the placement group its
        `placementGroupSelector` resolves to, and the ids of the capacity reservations it selects (None: unknown);
        None when EC2 could not be asked."""
        spec = provider or {}
        try:
            subnets = self._discovery.subnets(spec)
            groups = self._discovery.security_groups(spec)
        except CloudError:
            return None
        placement_group: str | None = ""
        if spec.get(PLACEMENT_GROUP):
            try:
                found = self._placement_groups.get(spec[PLACEMENT_GROUP])
            except CloudError:
                placement_group = None
            else:
                placement_group = found.id if found is not None else ""
        selected = self.capacity_reservations(spec)
        reservations = frozenset(r.id for r in selected) if selected is not None else None
        return Network(frozenset(s.id for s in subnets), frozenset(groups), placement_group, reservations)

    def capacity_reservations(
        self, provider: Mapping[str, Any] | None
    ) -> tuple[CapacityReservation, ...] | None:
        """The capacity reservations an EC2NodeClass's `capacityReservationSelectorTerms` select now, as v1.14.1's
        class status lists them (`cloud/aws/reservations.py`); None when EC2 could not answer (unknown, not none)."""
        try:
            return self.reservations.list((provider or {}).get(RESERVATION_TERMS))
        except CloudError as error:
            log.warning("capacity reservations unknown: %s", error)
            return None

    def reserved_offerings(
        self, provider: Mapping[str, Any] | None, *, enabled: bool = True
    ) -> dict[str, tuple[ReservedOffering, ...]] | None:
        """instance type -> the reserved offerings of the settings' capacity reservations, as v1.14.1's
        `ReservedCapacityResolver` makes them (`capacityreservations.reserved_offerings`: the type's zones those its
        live offerings are in for the settings' subnets; `enabled`: the ReservedCapacity gate); None when the
        reservations, the subnets or the types' zones are unknown."""
        if not enabled:
            return {}
        found = self.capacity_reservations(provider)
        if found is None:
            return None
        if not found:
            return {}
        try:
            types = self.instance_types(provider=provider)
        except CloudError as error:
            log.warning("reserved offerings unknown: %s", error)
            return None
        zones = {it.name: frozenset(o.zone for o in it.offerings) for it in types}
        return reserved_offerings(found, zones, self.on_demand_prices(), self.reservations.available)

    def mark_reservation_unavailable(self, reservation_id: str) -> None:
        """No room in the reservation until EC2 answers for it again (v1.14.1's `MarkUnavailable`)."""
        self.reservations.mark_unavailable(reservation_id)

    def node_class(self, provider: Mapping[str, Any] | None) -> NodeClassResolution:
        """The images the settings give the catalog's instance types now, as a launch resolves them (the selector's
        images, or the family's SSM parameters; none: an empty set), and whether IAM has the instance profile its
        launches use (its `instanceProfile`, else the default; this controller creates none from a `role`), and
        whether EC2 has the placement group it names (v1.14.1's `PlacementGroupReady`)."""
        spec = provider or {}
        try:
            images: frozenset[str] | None = frozenset(self._amis.images(
                spec.get("amiFamily") or None, selectors(spec, AMIS), list(self._catalog.values()), ami_terms(spec),
            ).values())
        except ConfigurationError:
            images = frozenset()
        except CloudError:
            images = None
        profile = str(spec.get("instanceProfile") or self.cluster.default_instance_profile or "")
        placement_group: bool | None = True
        if spec.get(PLACEMENT_GROUP):
            try:
                placement_group = self._placement_groups.get(spec[PLACEMENT_GROUP]) is not None
            except CloudError:
                placement_group = None
        found = self._profiles.exists(profile) if profile else False
        return NodeClassResolution(images, profile, found, placement_group)

    def unlaunchable(self, provider: Mapping[str, Any] | None) -> str | None:
        """Why nodes of these settings cannot launch now: an AL2023 node's NodeConfig needs the cluster's service
        CIDR, which EKS has not told (Karpenter v1 holds such an EC2NodeClass not ready). None: they can."""
        spec = provider or {}
        missing = self._missing_placement_group(spec)
        if missing is not None:
            return missing
        if spec.get("amiFamily") != NODEADM_FAMILY or spec.get("launchTemplate"):
            return None
        try:
            self._service_cidr.get()
        except CloudError as error:
            return f"AL2023's nodeadm needs the cluster's service CIDR, which EKS did not tell: {error}"
        return None

    def _missing_placement_group(self, spec: Mapping[str, Any]) -> str | None:
        """Why the class's placement group holds its nodes back (v1.14.1's `PlacementGroupReady` False, aws
        pkg/controllers/nodeclass/placementgroup.go: not found, or its resolution failed); None: none named or found."""
        selector = spec.get(PLACEMENT_GROUP)
        if not selector:
            return None
        named = (selector.get("name") or selector.get("id")) if isinstance(selector, Mapping) else selector
        try:
            if self._placement_groups.get(selector) is None:
                return f"placement group {str(named)!r} not found"
        except CloudError as error:
            return f"placement group {str(named)!r} could not be resolved: {error}"
        return None

    def _placement(self, request: LaunchRequest, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        """The launch template's Placement for the class's placement group (None: no selector). A partition group's
        partition is the lowest the node's requirements name (v1.14.1's `EnsureAll`, launchtemplate.go:157-175: the
        label's values sorted as strings, the first parsed; none: EC2 picks)."""
        selector = spec.get(PLACEMENT_GROUP)
        if not selector:
            return None
        why = self._missing_placement_group(spec)
        if why is not None:
            raise ConfigurationError(self.api.endpoint("ec2"), why, "DescribePlacementGroups")
        group = self._placement_groups.get(selector)
        assert group is not None  # found just now, and kept a minute
        partition = 0
        wanted = request.requirements.get(wk.PLACEMENT_GROUP_PARTITION)
        if group.strategy == PARTITION and wanted is not None and wanted.values:
            first = sorted(wanted.values)[0]
            partition = int(first) if first.lstrip("-").isdigit() else 0
        return placement(group.id, partition)

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        log.info("offering %s %s in %s unavailable: %s", instance_type, capacity_type, zone, reason)
        self.unavailable.mark(instance_type, zone, capacity_type, reason)

    # --- launch ---------------------------------------------------------------------------------------------

    def create(self, request: LaunchRequest) -> Instance:
        spec = request.provider
        if spec is None:
            raise ConfigurationError(
                "AWSNodeTemplate",
                f"provisioner {request.provisioner!r} has no provider settings (its AWSNodeTemplate is unknown)",
                "create",
            )
        existing = self._find_by_token(request)
        if existing is not None:
            return existing
        options = self._launchable(request)
        reserved = self._reserved_choices(request, spec, options)
        options = [
            o for o in options if o.capacity_type != wk.CAPACITY_RESERVED or (o.instance_type, o.zone) in reserved
        ]
        if not options:
            raise InsufficientCapacity(self.api.endpoint("ec2"), [])
        subnets = self._discovery.subnet_per_zone(spec)
        if not subnets:
            raise ConfigurationError(
                self.api.endpoint("ec2"), f"no subnet matches {selection(spec, SUBNET_ID)}", "DescribeSubnets"
            )
        placed = [o for o in options if o.zone in subnets]
        if not placed:
            raise ConfigurationError(
                self.api.endpoint("ec2"),
                f"no subnet matching subnetSelector is in the zones {sorted({o.zone for o in options})} "
                f"(subnets are in {sorted(subnets)})",
                "DescribeSubnets",
            )
        templates = _Templates()
        try:  # the templates stay pinned (never deleted) until CreateFleet answered
            unreserved = {o.instance_type for o in placed if o.capacity_type != wk.CAPACITY_RESERVED}
            self._launch_templates(
                request, spec, sorted({o.instance_type for o in placed}), templates, reserved, unreserved
            )
            placed = [o for o in placed if self._has_template(o, templates, reserved)]
            return self._placed(self._launch(request, placed, subnets, templates, reserved), request, spec)
        finally:
            self._templates.release(templates.data)

    def _placed(self, instance: Instance, request: LaunchRequest, spec: Mapping[str, Any]) -> Instance:
        """The launched instance with the placement group of its class and its partition, as v1.14.1's
        `instanceToNodeClaim` labels the claim (cloudprovider.go:472-488): the group's id; in a partition group the
        partition the launch targeted (the lowest the node's requirement names), else `""` — whatever EC2 may have
        said already: v1.14.1 reads the class and the claim here, not the instance — the sentinel its registration
        hook fills from DescribeInstances (`reconcile.provisioning.registrationhooks`)."""
        placed_in = self._placement(request, spec) if spec.get(PLACEMENT_GROUP) else None
        if placed_in is None:
            return instance
        group = self._placement_groups.get(spec[PLACEMENT_GROUP])
        partition: str | None = None
        if group is not None and group.strategy == PARTITION:
            target = placed_in.get("PartitionNumber")
            partition = str(target) if target else ""
        return dataclasses.replace(
            instance, placement_group=str(placed_in["GroupId"]), placement_partition=partition
        )

    def placement_requirements(self, provider: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
        """See :class:`~karpenter_policy.cloud.provider.PlacingCloud`. v1.14.1 reads the group ignoring the error."""
        spec = provider or {}
        if not spec.get(PLACEMENT_GROUP):
            return {}
        try:
            group = self._placement_groups.get(spec[PLACEMENT_GROUP])
        except CloudError:
            return {}
        if group is None:
            return {}
        found: dict[str, tuple[str, ...]] = {wk.PLACEMENT_GROUP_ID: (group.id,)}
        if group.strategy == PARTITION and group.partition_count > 0:
            found[wk.PLACEMENT_GROUP_PARTITION] = tuple(str(i) for i in range(1, group.partition_count + 1))
        return found

    def _launchable(self, request: LaunchRequest) -> list[ChosenOffering]:
        """The options that are known types, allowed by the node's requirements and not marked unavailable."""
        zone = request.requirements.get_or_exists(wk.ZONE)
        capacity = request.requirements.get_or_exists(wk.CAPACITY_TYPE)
        instance_type = request.requirements.get_or_exists(wk.INSTANCE_TYPE)
        unavailable = self.unavailable.active()
        launchable = []
        for option in request.options:
            if option.instance_type not in self._catalog:
                log.warning("skipping %s: not in the catalog", option.instance_type)
            elif not (
                zone.has(option.zone) and capacity.has(option.capacity_type) and instance_type.has(option.instance_type)
            ):
                log.warning("skipping %s: not allowed by the node's requirements", option)
            elif (option.instance_type, option.zone, option.capacity_type) not in unavailable:
                launchable.append(option)
        return launchable

    @staticmethod
    def _has_template(
        option: ChosenOffering, templates: _Templates, reserved: Mapping[tuple[str, str], ReservedOffering]
    ) -> bool:
        if option.capacity_type != wk.CAPACITY_RESERVED:
            return option.instance_type in templates.by_type
        choice = reserved.get((option.instance_type, option.zone))
        return choice is not None and choice.reservation_id in templates.by_reservation

    def _reserved_choices(
        self, request: LaunchRequest, spec: Mapping[str, Any], options: Sequence[ChosenOffering]
    ) -> dict[tuple[str, str], ReservedOffering]:
        """The reservation each reserved option launches into (`capacityreservations.launch_choices` of the settings'
        reserved offerings the node's requirements allow); a reserved option with none is dropped — the reservations
        unknown, none is (never a launch into nothing)."""
        wanted = [(o.instance_type, o.zone) for o in options if o.capacity_type == wk.CAPACITY_RESERVED]
        if not wanted:
            return {}
        offerings = self.reserved_offerings(spec)
        if offerings is None:
            log.warning("skipping the reserved options: the capacity reservations are unknown")
            return {}
        allowed = [
            o for found in offerings.values() for o in found
            if all(request.requirements.get_or_exists(key).has(value) for key, value in o.labels().items())
        ]
        return launch_choices(wanted, allowed)

    def _launch_templates(
        self,
        request: LaunchRequest,
        spec: Mapping[str, Any],
        names: Sequence[str],
        templates: _Templates,
        reserved: Mapping[tuple[str, str], ReservedOffering] | None = None,
        unreserved: Set[str] | None = None,
    ) -> None:
        """A launch template per (AMI, max pods) group of the instance types (of `unreserved`, when given: the types
        with options not reserved), and one per capacity reservation of `reserved` (v1.14.1's template per
        reservation id), created if missing and pinned for this launch (each one pinned is in ``templates.data`` as
        soon as it is)."""
        named = spec.get("launchTemplate")
        if named:
            try:
                self._templates.require(str(named))
            except NotFound as error:
                raise ConfigurationError(error.endpoint, error.reason, error.operation) from None
            templates.by_type = {name: str(named) for name in names}
            return
        family = str(spec.get("amiFamily") or DEFAULT_FAMILY)
        endpoint = self.api.endpoint("ec2")
        groups = self._discovery.security_groups(spec)
        if not groups:
            raise ConfigurationError(endpoint, f"no security group matches {selection(spec, GROUP_ID)}")
        profile = spec.get("instanceProfile") or self.cluster.default_instance_profile
        if not profile:
            raise ConfigurationError(
                "AWSNodeTemplate", "no instanceProfile in the node template and no default instance profile set"
            )
        types = [self._catalog[name] for name in names]
        placed_in = self._placement(request, spec)
        images = self._amis.images(family, selectors(spec, AMIS), types, ami_terms(spec))
        labels = userdata.bootstrap_labels(request.provisioner, request.labels, request.requirements)
        if placed_in is not None:  # v1.14.1's `instanceToNodeClaim` placement-group labels (cloudprovider.go:472-488)
            labels[wk.PLACEMENT_GROUP_ID] = str(placed_in["GroupId"])
            if placed_in.get("PartitionNumber"):
                labels[wk.PLACEMENT_GROUP_PARTITION] = str(placed_in["PartitionNumber"])
            labels = dict(sorted(labels.items()))
        taints = (*request.taints, *request.startup_taints)
        if is_nodepool(request.provisioner):  # Karpenter v1's kubelet registers with it (resolver.go:288-296)
            taints = with_unregistered(taints)
        by_group: dict[tuple[str, int, int], str] = {}
        arguments: dict[tuple[str, int, int], dict[str, Any]] = {}
        reservations_of: dict[str, list[ReservedOffering]] = {}
        for choice in (reserved or {}).values():
            reservations_of.setdefault(choice.instance_type, []).append(choice)
        node = with_efa_only_enis(node_configuration_of(request.kubelet, arithmetic_family(family)), spec)
        cidr = None
        if family == NODEADM_FAMILY:
            try:
                cidr = self._service_cidr.get()
            except CloudError as error:
                reason = f"the cluster's service CIDR: {error.reason}"
                raise ConfigurationError(error.endpoint, reason, error.operation) from None
        for it in types:
            image = images.get(it.name)
            if image is None:
                continue
            pods = max_pods(it, node)
            efa = efas(it, interfaces_of(spec)) if request.efa_requested else 0  # resolver.go:192-196
            group = (image, pods, efa)
            if group not in arguments:
                bootstrap = userdata.Bootstrap(
                    cluster_name=request.cluster_name,
                    cluster_endpoint=self.cluster.endpoint,
                    ca_bundle=self.cluster.ca_bundle,
                    labels=labels,
                    taints=taints,
                    kubelet=request.kubelet,
                    max_pods=pods or None,
                    dns_cluster_ip=self.cluster.dns_cluster_ip,
                    custom=spec.get("userData"),
                    cluster_cidr=cidr,
                    raid0=spec.get(INSTANCE_STORE_POLICY) == RAID0,
                    default_mount_paths=userdata.supports_default_bind(_bottlerocket_release(spec)),
                )
                try:
                    text = userdata.render(family, bootstrap)
                except ValueError as error:
                    raise ConfigurationError("AWSNodeTemplate", f"userData: {error}") from None
                arguments[group] = {
                    "image_id": image,
                    "user_data": text,
                    "security_groups": groups,
                    "instance_profile": str(profile),
                    "block_devices": block_device_mappings(spec.get("blockDeviceMappings"), family),
                    "metadata": metadata_options(spec.get("metadataOptions")),
                    "detailed_monitoring": bool(spec.get("detailedMonitoring")),
                    "public_ip": public_ip if isinstance(public_ip := spec.get(PUBLIC_IP), bool) else None,
                    "ip_prefix_count": _prefixes(spec.get(IP_PREFIX_COUNT)),
                    "ipv6": self._ipv6,
                    "connection_tracking": connection_tracking(spec.get(CONNECTION_TRACKING)),
                    "interfaces": interfaces if isinstance(interfaces := spec.get(NETWORK_INTERFACES), list) else (),
                    "cpu": cpu_options(spec.get(CPU_OPTIONS)),
                    "placement": placed_in,
                    "efa_count": efa,
                }
            if unreserved is None or it.name in unreserved:
                if group not in by_group:
                    by_group[group] = self._acquire(request, templates, template_data(**arguments[group]))
                templates.by_type[it.name] = by_group[group]
            for choice in reservations_of.get(it.name, ()):  # v1.14.1: a template per reservation
                target = (choice.reservation_id, choice.reservation_type, choice.interruptible)
                data = template_data(**arguments[group], reservation=target)
                templates.by_reservation[choice.reservation_id] = self._acquire(request, templates, data)

    def _acquire(self, request: LaunchRequest, templates: _Templates, data: dict[str, Any]) -> str:
        """The name of the template of `data`, created if missing and pinned for this launch."""
        name = template_name(request.cluster_name, data)
        if name not in templates.data:
            self._templates.acquire(name, data, request.cluster_name)
            templates.data[name] = data
        return name

    def _launch(
        self,
        request: LaunchRequest,
        options: Sequence[ChosenOffering],
        subnets: Mapping[str, Subnet],
        templates: _Templates,
        reserved: Mapping[tuple[str, str], ReservedOffering] | None = None,
    ) -> Instance:
        endpoint = self.api.endpoint("ec2")
        tags = launch_tags(request, self.cluster.tags)
        zone_of_subnet = {s.id: s.zone for s in subnets.values()}
        choices = reserved or {}
        remaining = list(options)
        failed: list[FailedOffering] = []
        while remaining:
            capacity_type = remaining[0].capacity_type
            batch = [o for o in remaining if o.capacity_type == capacity_type][: fleets.MAX_OVERRIDES]
            into = capacity_type == wk.CAPACITY_RESERVED
            overrides = [
                fleets.Override(o, subnets[o.zone].id, templates.by_reservation[choices[(o.instance_type, o.zone)]
                                .reservation_id] if into else templates.by_type[o.instance_type])
                for o in batch
            ]
            kind = next(((c.reservation_type, c.interruptible) for c in choices.values()), (TYPE_DEFAULT, False))
            launched, errors = self._create_fleet(
                request, capacity_type, overrides, tags, zone_of_subnet, templates, reservation_kind=kind
            )
            for error in errors:
                if error.unfulfillable:
                    if into:  # v1.14.1: the reservation is full until EC2 says otherwise; no offering is marked
                        choice = choices.get((error.instance_type, error.zone))
                        if choice is not None:
                            self.reservations.mark_unavailable(choice.reservation_id)
                    else:
                        self.mark_unavailable(error.instance_type, error.zone, error.capacity_type, error.code)
                    failed.append(
                        FailedOffering(error.instance_type, error.zone, capacity_type if into else error.capacity_type,
                                       error.code, error.message)
                    )
            if launched:
                instance = self._launched_instance(launched[0], zone_of_subnet, tags)
                if (it := self._catalog.get(instance.instance_type)) is not None:
                    efa = launched_efas(it, request.provider, request.efa_requested)
                    instance = dataclasses.replace(instance, efa_interfaces=efa)
                if into:
                    instance = self._into_reservation(instance, choices)
                return dataclasses.replace(instance, failed_offerings=tuple(failed)) if failed else instance
            other = [e for e in errors if not e.unfulfillable]
            if other:
                detail = "; ".join(f"{e.instance_type} in {e.zone}: {e.code}: {e.message}" for e in other[:5])
                raise ConfigurationError(endpoint, detail, "CreateFleet", code=other[0].code)
            tried = set(batch)
            remaining = [o for o in remaining if o not in tried]
        raise InsufficientCapacity(endpoint, failed)

    def _into_reservation(
        self, instance: Instance, choices: Mapping[tuple[str, str], ReservedOffering]
    ) -> Instance:
        """A reserved launch's instance: capacity type `reserved` and its reservation (v1.14.1's
        `WithCapacityReservationDetails`), one instance fewer in the reservation (`MarkLaunched`)."""
        choice = choices.get((instance.instance_type, instance.zone))
        if choice is None:
            return instance
        self.reservations.mark_launched(choice.reservation_id)
        self._remember_reserved([dataclasses.replace(instance, reservation_id=choice.reservation_id)])
        return dataclasses.replace(
            instance, capacity_type=wk.CAPACITY_RESERVED, reservation_id=choice.reservation_id,
            reservation_type=choice.reservation_type, reservation_interruptible=choice.interruptible,
        )

    def _create_fleet(
        self,
        request: LaunchRequest,
        capacity_type: str,
        overrides: Sequence[fleets.Override],
        tags: Mapping[str, str],
        zone_of_subnet: Mapping[str, str],
        templates: _Templates,
        retried: bool = False,
        reservation_kind: tuple[str, bool] = (TYPE_DEFAULT, False),
    ) -> tuple[list[fleets.Launched], list[fleets.FleetError]]:
        """One CreateFleet; a launch template that vanished is created again and the request retried once (with
        a new client token: EC2 would answer the same token with the same failure)."""
        arguments = fleets.fleet_request(
            capacity_type, overrides, tags, request.client_token, attempt=int(retried),
            reservation_kind=reservation_kind, context=_fleet_context(request),
        )
        again = (request, capacity_type, overrides, tags, zone_of_subnet, templates, True, reservation_kind)
        try:
            answer = self.api.call("ec2", "create_fleet", **arguments)
        except NotFound as error:
            every = {o.launch_template for o in overrides}
            if not retried and self._recreate_templates(every, templates, request.cluster_name):
                return self._create_fleet(*again)
            raise ConfigurationError(error.endpoint, error.reason, error.operation, code=error.code) from None
        launched, errors = fleets.parse_fleet_response(answer, capacity_type, zone_of_subnet)
        not_found = [e for e in errors if e.code in fleets.LAUNCH_TEMPLATE_NOT_FOUND_CODES]
        gone = {e.launch_template for e in not_found if e.launch_template}
        if any(not e.launch_template for e in not_found):
            gone |= {o.launch_template for o in overrides}
        if not launched and gone and not retried and self._recreate_templates(gone, templates, request.cluster_name):
            return self._create_fleet(*again)
        return launched, errors

    def _recreate_templates(self, names: set[str], templates: _Templates, cluster_name: str) -> bool:
        """Forget and create again the templates this provider made (False for a node template's own)."""
        if not names <= set(templates.data):
            return False
        for name in sorted(names):
            self._templates.recreate(name, templates.data[name], cluster_name)
        return True

    def _launched_instance(
        self, launched: fleets.Launched, zone_of_subnet: Mapping[str, str], tags: Mapping[str, str]
    ) -> Instance:
        for attempt in range(DESCRIBE_ATTEMPTS):
            instance = self.get(launched.instance_id)
            if instance is not None:
                return dataclasses.replace(instance, launch_template=launched.launch_template)
            self._sleep(0.5 * (attempt + 1))
        zone = zone_of_subnet.get(launched.subnet_id, "")
        return Instance(
            id=launched.instance_id,
            instance_type=launched.instance_type,
            zone=zone,
            capacity_type=launched.capacity_type,
            state=STATE_PENDING,
            tags=dict(tags),
            launch_template=launched.launch_template,
            provider_id=f"aws:///{zone}/{launched.instance_id}",
        )

    def _find_by_token(self, request: LaunchRequest) -> Instance | None:
        """The instance an earlier launch with the same client token made, if it is not terminated."""
        found = self._describe(
            Filters=[
                {"Name": f"tag:{TAG_CLIENT_TOKEN}", "Values": [request.client_token]},
                {"Name": "tag-key", "Values": [cluster_tag(request.cluster_name)]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ]
        )
        return found[0] if found else None

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        return self._templates.collect(cluster_name)

    # --- get, list, delete ----------------------------------------------------------------------------------

    def get(self, instance_id: str) -> Instance | None:
        try:
            found = self._describe(InstanceIds=[instance_id])
        except NotFound:
            return None
        live = [i for i in found if i.state != STATE_TERMINATED]
        return live[0] if live else None

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        return self._describe(
            Filters=[
                # Two filters of the same name are not ANDed everywhere (moto merges them): one each.
                {"Name": f"tag:{cluster_tag(cluster_name)}", "Values": ["owned"]},
                {"Name": "tag-key", "Values": list(POOL_TAGS)},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ]
        )

    def delete(self, instance_id: str) -> None:
        try:
            self.api.call("ec2", "terminate_instances", InstanceIds=[instance_id])
        except NotFound:
            return
        with self._lock:
            reservation = self._reserved_instances.pop(instance_id, None)
        if reservation:  # v1.14.1's cloudprovider Delete: `MarkTerminated` of the claim's reservation
            self.reservations.mark_terminated(reservation)

    def _describe(self, **arguments: Any) -> builtins.list[Instance]:
        instances = [
            _instance(raw)
            for reservation in self.api.paginate("ec2", "describe_instances", "Reservations", **arguments)
            for raw in reservation.get("Instances") or []
        ]
        self._remember_reserved(instances)
        return sorted(instances, key=lambda i: i.id)

    def _remember_reserved(self, instances: Sequence[Instance]) -> None:
        """Which reservation each live reserved instance is in, for `delete` to give its room back."""
        with self._lock:
            for instance in instances:
                if instance.reservation_id and instance.state != STATE_TERMINATED:
                    self._reserved_instances[instance.id] = instance.reservation_id


def _partition_number(number: object) -> bool:
    """Whether DescribeInstances' `Placement.PartitionNumber` is one EC2 can give (1 … 7): anything else — a number
    past any label's 63 characters, 0, a negative — is read as not said (the registration hook waits), never written
    on a Node."""
    return isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= MAX_PARTITIONS


def _instance(raw: Mapping[str, Any]) -> Instance:
    """An :class:`Instance` from a DescribeInstances entry."""
    tags = {str(t["Key"]): str(t.get("Value", "")) for t in raw.get("Tags") or []}
    placement: Mapping[str, Any] = raw["Placement"] if isinstance(raw.get("Placement"), Mapping) else {}
    zone = str(placement.get("AvailabilityZone") or "")
    group = placement.get("GroupId")
    number = placement.get("PartitionNumber")
    launch_time = raw.get("LaunchTime")
    instance_id = str(raw["InstanceId"])
    lifecycle = raw.get("InstanceLifecycle")
    reservation = instance_reservation(raw) if lifecycle != "spot" else ""
    capacity_type = (
        wk.CAPACITY_SPOT if lifecycle == "spot" else wk.CAPACITY_RESERVED if reservation else wk.CAPACITY_ON_DEMAND
    )
    return Instance(
        id=instance_id,
        instance_type=str(raw.get("InstanceType") or ""),
        zone=zone,
        capacity_type=capacity_type,
        reservation_id=reservation,
        reservation_type=(
            (TYPE_CAPACITY_BLOCK if lifecycle == "capacity-block" else TYPE_DEFAULT) if reservation else ""
        ),
        reservation_interruptible=bool(reservation) and lifecycle == "interruptible-capacity-reservation",
        state=str((raw.get("State") or {}).get("Name") or ""),
        private_dns_name=str(raw.get("PrivateDnsName") or ""),
        launch_time=launch_time.astimezone(dt.UTC) if isinstance(launch_time, dt.datetime) else None,
        tags=dict(sorted(tags.items())),
        image_id=str(raw.get("ImageId") or ""),
        launch_template=tags.get(_LAUNCH_TEMPLATE_TAG, ""),
        provider_id=f"aws:///{zone}/{instance_id}",
        subnet_id=subnet_id if isinstance(subnet_id := raw.get("SubnetId"), str) else "",
        security_groups=_group_ids(raw.get("SecurityGroups")),
        placement_group=group if isinstance(group, str) else "",
        placement_partition=str(number) if _partition_number(number) else None,
        efa_interfaces=_efa_count(raw.get("NetworkInterfaces")),
    )


#: The `InterfaceType`s v1.14.1 counts as EFA (aws pkg/providers/instance/types.go:90-93).
_EFA_INTERFACE_TYPES = frozenset({EFA_INTERFACE, EFA_ONLY})


def _efa_count(raw: Any) -> int:
    """The EFA interfaces of a DescribeInstances entry's `NetworkInterfaces`, as v1.14.1's `NewInstance` counts
    them (`EFACount`: those whose `InterfaceType` is `efa` or `efa-only`); 0 when absent or in another shape. An
    instance listed after a restart so offers the EFA it was launched with (cloudprovider.go:440-446)."""
    if not isinstance(raw, list):
        return 0
    kinds = [i.get("InterfaceType") for i in raw if isinstance(i, Mapping)]
    return sum(1 for kind in kinds if isinstance(kind, str) and kind in _EFA_INTERFACE_TYPES)


def _group_ids(raw: Any) -> tuple[str, ...] | None:
    """The ids of a DescribeInstances entry's `SecurityGroups` (a list of `{GroupId, GroupName}`), sorted; None
    when it is absent or in any other shape (unknown: no security-group drift is concluded from it)."""
    if not isinstance(raw, list):
        return None
    ids = [group.get("GroupId") for group in raw if isinstance(group, dict)]
    if len(ids) != len(raw) or not all(isinstance(i, str) and i for i in ids):
        return None
    return tuple(sorted({str(i) for i in ids}))


__all__ = ["AwsCloudProvider", "ClusterSettings"]
