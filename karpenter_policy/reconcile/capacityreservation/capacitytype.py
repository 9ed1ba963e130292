"""The capacity-type controller (aws v1.14.1 pkg/controllers/capacityreservation/capacitytype/controller.go): a
NodeClaim of ours labelled `karpenter.sh/capacity-type: reserved` whose instance EC2 now reports on-demand — its
reservation expired or was cancelled and EC2 moved it out — is relabelled `on-demand`, and so are its Nodes, each
losing the reservation labels `karpenter.k8s.aws/capacity-reservation-id` and `-type` (v1.14.1's
`cloudprovider.ReservedCapacityLabels`, apis/v1/doc.go:39; `-interruptible` stays, as there).

Once a minute (`cadence`), as v1.14.1's singleton: the cloud's instances are listed (`CloudProvider.list`, a fresh
DescribeInstances; `reserved` as v1.14.1's `capacityTypeFromInstance` reads it: a `capacity-reservations-only`
launch's `CapacityReservationId`), matched to the claims by `status.providerID`, and only an instance read
`on-demand` demotes: one missing from the answer (EC2 is eventually consistent), or read `reserved` or `spot`, is left
alone — an instance the cloud does not list is unknown, never "out of its reservation". Claims being deleted are
skipped (they drain already), and so are Nodes being deleted. Where v1.14.1 skips a Node not yet `registered` (its
labels may not be synced from its claim yet), this controller writes a Node with its claim's labels at launch, so
every Node of ours is as registered. One demotion only: an on-demand claim is never promoted to reserved (v1.14.1:
"not natively supported by Karpenter").

The claims and Nodes are looked at once a minute (the state's records, no pod read), and the cloud is not asked at
all when no claim nor Node of ours is labelled `reserved` (nothing could change: v1.14.1 would list and find nothing
to do), so a cluster without reservations makes no extra DescribeInstances. The
patches are merge patches of the labels (v1.14.1's `client.MergeFrom`); a claim or Node gone meanwhile is fine; any
other refusal is the reconcile's error, tried again at the next minute. The claims changed are logged
(`updated capacity type for nodeclaims`, v1.14.1's line at debug level)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.capacityreservation.cadence import Minutely
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.metrics import CAPACITY_TYPE
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.records import ClaimRecord

__all__ = ["RESERVATION_LABELS", "CapacityTypeSync", "demotion"]

LOG = logs.logger("capacityreservation.capacitytype")

#: v1.14.1's `cloudprovider.ReservedCapacityLabels` (aws apis/v1/doc.go:39): what a demotion removes.
RESERVATION_LABELS: Final = (wk.CAPACITY_RESERVATION_ID, wk.CAPACITY_RESERVATION_TYPE)


def demotion(labels: Mapping[str, str]) -> dict[str, str | None] | None:
    """The merge patch of the labels that makes a `reserved` object `on-demand` (v1.14.1 `syncCapacityType`: the
    capacity type, and each reservation label it carries removed); None when it is not labelled `reserved`."""
    if labels.get(wk.CAPACITY_TYPE) != wk.CAPACITY_RESERVED:
        return None
    patch: dict[str, str | None] = {wk.CAPACITY_TYPE: wk.CAPACITY_ON_DEMAND}
    patch.update({key: None for key in RESERVATION_LABELS if key in labels})
    return patch


class CapacityTypeSync:
    """See the module docstring."""

    name = "capacityreservation-capacitytype"
    label = CAPACITY_TYPE

    def __init__(self, context: Context) -> None:
        self.context = context
        self._cadence = Minutely()
        self._active = False  # the last look found a claim or Node labelled `reserved`
        self.wake = self._cadence.wake

    def poll(self) -> float | None:
        return self._cadence.poll()

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Once a minute: the claims and Nodes looked at, and when one is labelled `reserved` the cloud asked. Due
        again in a minute only while one is (else a later step, or the runner's minute, looks again)."""
        if self._cadence.due(now):
            claims, nodes_by_provider = self._reserved()
            self._active = bool(claims)
            if claims:
                self.sync(claims, nodes_by_provider, result)
        return self._cadence.next if self._active else None

    def _reserved(self) -> tuple[list[ClaimRecord], dict[str, list[Obj]]]:
        """The live claims with an instance of which the claim or a Node is labelled `reserved`, and the live Nodes of
        ours by provider id."""
        state = self.context.state
        nodes_by_provider: dict[str, list[Obj]] = {}
        for node in state.nodes():
            if node.ours and node.provider_id and not node.deleting:
                nodes_by_provider.setdefault(node.provider_id, []).append(node.obj)
        claims = [
            c for c in state.claims()
            if c.deletion_timestamp is None and c.provider_id and (
                c.labels.get(wk.CAPACITY_TYPE) == wk.CAPACITY_RESERVED
                or any(objects.labels(n).get(wk.CAPACITY_TYPE) == wk.CAPACITY_RESERVED
                       for n in nodes_by_provider.get(c.provider_id, ()))
            )
        ]
        return claims, nodes_by_provider

    def sync(
        self, claims: list[ClaimRecord], nodes_by_provider: dict[str, list[Obj]], result: ReconcileResult
    ) -> list[str]:
        """One reconcile: the names of the claims whose claim or Nodes it relabelled."""
        try:
            instances = self.context.cloud.list(self.context.options.cluster_name)
            listed = {i.provider_id: i.capacity_type for i in instances}
        except CloudError as error:
            self.context.error(result.errors, LOG, f"listing instances, {error}")
            result.failed = True
            return []
        updated: list[str] = []
        for claim in claims:
            if listed.get(claim.provider_id) != wk.CAPACITY_ON_DEMAND:
                continue  # not listed (unknown), or still reserved, or spot: nothing to do
            changed = self._patch(objects.NODE_CLAIM, claim.name, claim.labels, result)
            for node in nodes_by_provider.get(claim.provider_id, ()):
                changed = self._patch(objects.NODE, objects.name(node), objects.labels(node), result) or changed
            if changed:
                updated.append(claim.name)
        if updated:
            LOG.debug("updated capacity type for nodeclaims", extra=self.context.fields(NodeClaims=updated))
        return updated

    def _patch(self, kind: objects.Kind, name: str, labels: Mapping[str, str], result: ReconcileResult) -> bool:
        patch = demotion(labels)
        if patch is None:
            return False
        try:
            self.context.cluster.patch(kind, name, {"metadata": {"labels": patch}})
        except NotFound:
            return False
        except ClusterError as error:
            self.context.error(result.errors, LOG, f"patching {kind.kind.lower()} {name}, {error}", **{kind.kind: name})
            result.failed = True
            return False
        return True
