"""Launching the node claims of a plan: one cloud launch request per claim, issued in parallel.

A request carries what was reviewed and nothing else: the claim's instance types (admitted by its constraint
set, cheapest first, at most :data:`MAX_INSTANCE_TYPES` as Karpenter passes to CreateFleet), each in every zone
the claim's requirements allow where the live cloud offers it, in the capacity type the scheduler chose (spot
whenever the claim allows spot, as Karpenter launches); the claim's requirements, the set's labels, taints and
startup taints, its node template (provider spec) and kubelet settings.

The client token is derived from the cluster, the set (name and hash) and the uids of the pods the claim is
for: a pass that is retried after a lost answer (or a controller that restarts and plans the same pods again)
asks for the same token, and the provider returns the instance the first request launched instead of another.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import MAX_CLIENT_TOKEN_LENGTH, CloudProvider, Instance, LaunchRequest
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, known_price, price_key
from karpenter_policy.reconcile.options import DEFAULT_LAUNCH_PARALLELISM
from karpenter_policy.scheduling import ClaimPlan, NodeClaimTemplate
from karpenter_policy.scheduling.vectors import EFA_I

#: Karpenter passes at most 60 instance types to CreateFleet.
MAX_INSTANCE_TYPES = 60


def client_token(cluster_name: str, claim: ClaimPlan) -> str:
    """Deterministic per (cluster, set, pods of the claim): see the module docstring."""
    digest = hashlib.sha256()
    for part in (cluster_name, claim.template, claim.template_hash, *sorted(p.uid or p.key for p in claim.pods)):
        digest.update(part.encode())
        digest.update(b"\0")
    return f"{claim.template}-{digest.hexdigest()[:32]}"[-MAX_CLIENT_TOKEN_LENGTH:]


def launch_options(claim: ClaimPlan, template: NodeClaimTemplate) -> list[ChosenOffering]:
    """The claim's first MAX_INSTANCE_TYPES types, each in every allowed zone the cloud offers it in (in the
    capacity type of the claim's launch choice), cheapest first: when EC2 has no capacity for the cheapest, the
    provider tries the next within the same call. A type's reserved offerings in one zone (several reservations)
    are one option: the cloud picks the reservation, among those the claim's requirements name."""
    table = template.table
    zone = claim.requirements.get_or_exists(wk.ZONE)
    options = []
    seen: set[tuple[str, int]] = set()
    for chosen in claim.options[:MAX_INSTANCE_TYPES]:
        i = table.position[chosen.instance_type]
        for price, z, c in table.offerings[i]:
            if table.capacity_types[c] == chosen.capacity_type and zone.has(table.zones[z]):
                if (chosen.instance_type, z) in seen:
                    continue  # (a type's offerings come cheapest first: the first of a zone is its price)
                seen.add((chosen.instance_type, z))
                options.append(
                    ChosenOffering(chosen.instance_type, table.zones[z], chosen.capacity_type, known_price(price))
                )
    options.sort(key=lambda o: (price_key(o.price), o.instance_type, o.zone))
    return options


def launch_request(
    cluster_name: str, claim: ClaimPlan, template: NodeClaimTemplate, constraint_set: ConstraintSet
) -> LaunchRequest:
    return LaunchRequest(
        cluster_name=cluster_name,
        provisioner=claim.template,
        constraint_set_hash=constraint_set.hash,
        options=launch_options(claim, template),
        client_token=client_token(cluster_name, claim),
        requirements=claim.requirements,
        labels=dict(constraint_set.labels),
        taints=constraint_set.taints,
        startup_taints=constraint_set.startup_taints,
        provider=constraint_set.launch_spec,  # the templates were built from it: it does not raise
        kubelet=constraint_set.kubelet,
        min_values_relaxed=claim.min_values_relaxed,
        efa_requested=claim.requests[EFA_I] > 0,
    )


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    """What one launch request came to: the instance, or the cloud's error; and how long it took."""

    request: LaunchRequest
    instance: Instance | None
    error: CloudError | None
    seconds: float


class Launcher:
    """Issues launch requests to the cloud, `parallelism` at a time (1: in order, for reproducible runs)."""

    def __init__(
        self,
        cloud: CloudProvider,
        parallelism: int = DEFAULT_LAUNCH_PARALLELISM,
        clock: Callable[[], float] = time.monotonic,
    ):
        if parallelism < 1:
            raise ValueError("launch parallelism must be at least 1")
        self.cloud = cloud
        self.parallelism = parallelism
        self.clock = clock

    def _one(self, request: LaunchRequest) -> LaunchOutcome:
        started = self.clock()
        try:
            instance = self.cloud.create(request)
        except CloudError as error:
            return LaunchOutcome(request, None, error, self.clock() - started)
        return LaunchOutcome(request, instance, None, self.clock() - started)

    def launch(self, requests: Sequence[LaunchRequest]) -> list[LaunchOutcome]:
        """The outcome of each request, in the order given."""
        if self.parallelism == 1 or len(requests) < 2:
            return [self._one(r) for r in requests]
        # Each launch runs in a copy of the caller's context: the cloud's metrics know which controller calls.
        contexts = [contextvars.copy_context() for _ in requests]
        with ThreadPoolExecutor(max_workers=min(self.parallelism, len(requests)), thread_name_prefix="launch") as pool:
            return list(pool.map(lambda context, request: context.run(self._one, request), contexts, requests))


__all__ = ["MAX_INSTANCE_TYPES", "Launcher", "LaunchOutcome", "client_token", "launch_options", "launch_request"]
