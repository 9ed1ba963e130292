"""An in-memory :class:`~karpenter_policy.cloud.provider.CloudProvider` for fast controller tests (no boto3).

It launches instances from a fixed list of instance types and offerings, honours client tokens, marks offerings
unavailable like the real providers, and lets a test inject failures: insufficient capacity per offering
(:meth:`FakeCloudProvider.fail_capacity`) and arbitrary errors for the next calls
(:meth:`FakeCloudProvider.fail_next`). Time comes from injectable clocks.
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpenter_policy.cloud.capacityreservations import CapacityReservation, ReservedOffering
from karpenter_policy.cloud.errors import CloudError, FailedOffering, InsufficientCapacity
from karpenter_policy.cloud.offerings import with_unavailable
from karpenter_policy.cloud.provider import (
    POOL_TAGS,
    STATE_RUNNING,
    STATE_SHUTTING_DOWN,
    STATE_TERMINATED,
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
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType
from karpenter_policy.model.labels import CAPACITY_ON_DEMAND, CAPACITY_RESERVED
from karpenter_policy.model.nodeclassfit import launched_efas

ENDPOINT = "fake://cloud"
INSUFFICIENT_CAPACITY = "InsufficientInstanceCapacity"
UNSUPPORTED = "Unsupported"


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class FakeCloudProvider:
    """Instances in a dict; offerings from ``instance_types``; failures injected by the test."""

    def __init__(
        self,
        instance_types: Sequence[InstanceType],
        *,
        region: str = "us-east-1",
        clock: Clock = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utc_now,
        unavailable_ttl: float = UNAVAILABLE_OFFERING_TTL,
        image_id: str = "ami-0123456789abcdef0",
    ) -> None:
        self.region = region
        self.image_id = image_id
        #: amiFamily → why its node templates cannot launch now (`unlaunchable`): a test sets it, e.g. AL2023's
        #: service CIDR that EKS has not told.
        self.not_ready: dict[str, str] = {}
        #: The subnet every launch goes into and the security groups it gets; `network` answers with them (a test
        #: changes them to model a selector that now resolves otherwise; None: the cloud cannot tell).
        self.subnet_id = "subnet-0fake0000000000001"
        self.security_groups: tuple[str, ...] = ("sg-0fake0000000000001",)
        self.resolved: Network | None = None
        #: What `node_class` answers when a test set it (images none or None, an instance profile missing); else the
        #: one image launches get and the settings' instance profile (or `default`), found.
        self.node_class_resolution: NodeClassResolution | None = None
        #: Seconds (of `clock`) a terminated instance spends shutting-down first, as EC2's do (0: terminated at once).
        self.shutting_down = 0.0
        self._clock = clock
        self._ends: dict[str, float] = {}  # instance shutting down → when it is terminated
        self.unavailable = UnavailableOfferings(clock, unavailable_ttl)
        #: The capacity reservations given no room (`mark_reservation_unavailable`); it offers none of its own.
        self.unavailable_reservations: set[str] = set()
        self._types = sorted(instance_types, key=lambda it: it.name)
        self._offered = {(it.name, o.zone, o.capacity_type) for it in self._types for o in it.offerings if o.available}
        self._wall_clock = wall_clock
        self._lock = threading.RLock()
        self._instances: dict[str, Instance] = {}
        self._by_token: dict[str, str] = {}
        self._no_capacity: dict[tuple[str, str, str], str] = {}
        self._next_errors: dict[str, builtins.list[CloudError]] = {}
        self._counter = 0
        #: Every create request received, and every offering a create tried, in order (for assertions).
        self.requests: builtins.list[LaunchRequest] = []
        self.attempts: builtins.list[ChosenOffering] = []

    # --- failure injection ----------------------------------------------------------------------------------

    def fail_capacity(
        self, instance_type: str, zone: str, capacity_type: str, code: str = INSUFFICIENT_CAPACITY
    ) -> None:
        """From now on, launching this offering fails with ``code`` (until :meth:`restore_capacity`)."""
        with self._lock:
            self._no_capacity[(instance_type, zone, capacity_type)] = code

    def restore_capacity(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Launching this offering succeeds again (after :meth:`fail_capacity`)."""
        with self._lock:
            self._no_capacity.pop((instance_type, zone, capacity_type), None)

    def stop_selling(self, instance_type: str) -> None:
        """The cloud no longer offers `instance_type` (retired, or no longer in any zone): it is gone from
        `instance_types` and launches."""
        with self._lock:
            self._types = [it for it in self._types if it.name != instance_type]
            self._offered = {key for key in self._offered if key[0] != instance_type}

    def fail_next(self, operation: str, error: CloudError) -> None:
        """The next call of ``operation`` (create, delete, get, list, instance_types) raises ``error``."""
        with self._lock:
            self._next_errors.setdefault(operation, []).append(error)

    def set_state(self, instance_id: str, state: str) -> None:
        """Change an instance's state, as the cloud would (e.g. a spot interruption terminates it)."""
        with self._lock:
            instance = self._instances[instance_id]
            self._instances[instance_id] = _replace_state(instance, state)

    def set_placement(self, instance_id: str, group_id: str, partition: str | None = None) -> None:
        """Say the instance is in placement group `group_id` (and `partition`, as DescribeInstances says it: None,
        not said yet)."""
        with self._lock:
            self._instances[instance_id] = dataclasses.replace(
                self._instances[instance_id], placement_group=group_id, placement_partition=partition
            )

    def set_reservation(self, instance_id: str, reservation_id: str | None) -> None:
        """Report the instance in that capacity reservation (`reserved`, a default one), as DescribeInstances reads a
        `capacity-reservations-only` launch; None: EC2 moved it out, `on-demand` (the reservation ended)."""
        with self._lock:
            instance = self._instances[instance_id]
            self._instances[instance_id] = dataclasses.replace(
                instance,
                capacity_type=CAPACITY_RESERVED if reservation_id else CAPACITY_ON_DEMAND,
                reservation_id=reservation_id or "",
                reservation_type="default" if reservation_id else "",
                reservation_interruptible=False,
            )

    def _injected(self, operation: str) -> None:
        with self._lock:
            queue = self._next_errors.get(operation)
            if queue:
                raise queue.pop(0)

    # --- the protocol ---------------------------------------------------------------------------------------

    def create(self, request: LaunchRequest) -> Instance:
        """Launch the first option that is not unavailable and has capacity, as CreateFleet does (the same instance
        again for a client token already used); `InsufficientCapacity` listing the offerings tried when none
        launches."""
        with self._lock:
            self.requests.append(request)
            self._injected("create")
            known = self._by_token.get(request.client_token)
            if known is not None and self._instances[known].state != STATE_TERMINATED:
                return self._instances[known]
            failed: builtins.list[FailedOffering] = []
            for option in request.options:
                key = (option.instance_type, option.zone, option.capacity_type)
                if self.unavailable.is_unavailable(*key):
                    continue
                self.attempts.append(option)
                code = self._no_capacity.get(key) or (None if key in self._offered else UNSUPPORTED)
                if code is not None:
                    self.unavailable.mark(*key, reason=code)
                    failed.append(FailedOffering(*key, code=code))
                    continue
                return self._launch(request, option, failed)
            raise InsufficientCapacity(ENDPOINT, failed)

    def _efa_interfaces(self, request: LaunchRequest, instance_type: str) -> int:
        """What the AWS provider launches the type with (`model.nodeclassfit.launched_efas`); 0 for a type unknown."""
        known = next((it for it in self._types if it.name == instance_type), None)
        return launched_efas(known, request.provider, request.efa_requested) if known is not None else 0

    def _launch(self, request: LaunchRequest, option: ChosenOffering, failed: Sequence[FailedOffering]) -> Instance:
        self._counter += 1
        instance_id = f"i-{self._counter:017x}"
        instance = Instance(
            id=instance_id,
            instance_type=option.instance_type,
            zone=option.zone,
            capacity_type=option.capacity_type,
            state=STATE_RUNNING,
            private_dns_name=f"ip-10-0-{self._counter // 250}-{self._counter % 250 + 1}.ec2.internal",
            launch_time=self._wall_clock(),
            tags=launch_tags(request),
            image_id=self.image_id,
            launch_template="fake",
            provider_id=f"aws:///{option.zone}/{instance_id}",
            failed_offerings=tuple(failed),
            subnet_id=self.subnet_id,
            security_groups=tuple(sorted(self.security_groups)),
            efa_interfaces=self._efa_interfaces(request, option.instance_type),
        )
        self._instances[instance_id] = instance
        self._by_token[request.client_token] = instance_id
        return instance

    def delete(self, instance_id: str) -> None:
        """Terminate the instance (nothing when there is none)."""
        with self._lock:
            self._injected("delete")
            instance = self._instances.get(instance_id)
            if instance is None or instance.state in (STATE_TERMINATED, STATE_SHUTTING_DOWN):
                return
            if self.shutting_down > 0:
                self._instances[instance_id] = _replace_state(instance, STATE_SHUTTING_DOWN)
                self._ends[instance_id] = self._clock() + self.shutting_down
            else:
                self._instances[instance_id] = _replace_state(instance, STATE_TERMINATED)

    def _shut_down(self) -> None:
        """Instances whose shutting-down has lasted `shutting_down` are terminated (with the lock held)."""
        now = self._clock()
        for instance_id, end in list(self._ends.items()):
            if now >= end:
                del self._ends[instance_id]
                self._instances[instance_id] = _replace_state(self._instances[instance_id], STATE_TERMINATED)

    def get(self, instance_id: str) -> Instance | None:
        """The instance, None when it is unknown or terminated."""
        with self._lock:
            self._injected("get")
            self._shut_down()
            instance = self._instances.get(instance_id)
            return None if instance is None or instance.state == STATE_TERMINATED else instance

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        """The cluster's live instances launched for a provisioner, by id."""
        with self._lock:
            self._injected("list")
            self._shut_down()
            key = cluster_tag(cluster_name)
            return sorted(
                (
                    i
                    for i in self._instances.values()
                    if i.state != STATE_TERMINATED and key in i.tags and any(tag in i.tags for tag in POOL_TAGS)
                ),
                key=lambda i: i.id,
            )

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        """The instance types sold, each offering marked unavailable while the cache holds it so."""
        if region is not None and region != self.region:
            raise ValueError(f"this provider serves region {self.region}, not {region}")
        self._injected("instance_types")
        return with_unavailable(self._types, self.unavailable.active())

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        """`image_id`, the one image every launch gets (a test sets another to publish a new AMI)."""
        return self.image_id or None

    def network(self, provider: Mapping[str, Any] | None) -> Network | None:
        """`resolved` when a test set it, else the subnet and security groups launches get now."""
        if self.resolved is not None:
            return self.resolved
        return Network(frozenset({self.subnet_id}), frozenset(self.security_groups))

    def node_class(self, provider: Mapping[str, Any] | None) -> NodeClassResolution:
        """`node_class_resolution` when a test set it, else `image_id` and the settings' instance profile, found."""
        if self.node_class_resolution is not None:
            return self.node_class_resolution
        profile = str((provider or {}).get("instanceProfile") or "default")
        return NodeClassResolution(frozenset({self.image_id}) if self.image_id else frozenset(), profile, True)

    def unlaunchable(self, provider: Mapping[str, Any] | None) -> str | None:
        """`not_ready`'s reason for the settings' AMI family (none by default: every node template launches)."""
        return self.not_ready.get(str((provider or {}).get("amiFamily") or ""))

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        """No launch templates here: nothing to delete."""
        return []

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        """Hold the offering unavailable for the cache's time to live, as an insufficient-capacity answer does."""
        self.unavailable.mark(instance_type, zone, capacity_type, reason)


    def capacity_reservations(self, provider: Mapping[str, Any] | None) -> tuple[CapacityReservation, ...] | None:
        """None selected: the fake keeps no capacity reservations."""
        return ()

    def reserved_offerings(
        self, provider: Mapping[str, Any] | None, *, enabled: bool = True
    ) -> dict[str, tuple[ReservedOffering, ...]] | None:
        """None to offer: the fake keeps no capacity reservations."""
        return {}

    def mark_reservation_unavailable(self, reservation_id: str) -> None:
        """Note the reservation as having no room (`unavailable_reservations`)."""
        self.unavailable_reservations.add(reservation_id)


def _replace_state(instance: Instance, state: str) -> Instance:
    return dataclasses.replace(instance, state=state)


__all__ = ["FakeCloudProvider"]
