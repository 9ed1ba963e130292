"""The capacity-block expiration controller (aws v1.14.1 pkg/controllers/capacityreservation/expiration/
controller.go): a NodeClaim in a capacity block is deleted 40 minutes before the block's end — 10 minutes before EC2
begins reclaiming its instances, in line with EC2's own interruption notice.

Once a minute (`cadence`), as v1.14.1's singleton, while some NodeClaim carries a
`karpenter.k8s.aws/capacity-reservation-id` label: the reservations those labels name are asked of the cloud by id
(`ReservingCloud.capacity_reservations` with one `id` term each: v1.14.1's `crProvider.List`, each id's answer cached
a minute), each read as the class's status reads it at the cloud's wall clock — never the API server's — so a
capacity block is `expiring` from 40 minutes before its `EndDate` (`CapacityReservationFromEC2`; a default or
interruptible reservation never is), and every claim whose reservation is expiring is deleted (its termination then
drains its Node and terminates its instance, as any claim deleted). A reservation EC2 no longer reports (ended,
cancelled) is not expiring: its claims are the capacity-type controller's. Reservations the cloud could not tell
delete nothing (the reconcile's error, tried again a minute on); claims already being deleted are not deleted again;
a claim gone meanwhile is fine. Each deletion is logged as v1.14.1 logs it (`initiating delete for capacity block
expiration`, with the claim and its reservation id)."""

from __future__ import annotations

from karpenter_policy.cloud.capacityreservations import STATE_EXPIRING
from karpenter_policy.cloud.capacityreservations import TERMS as RESERVATION_TERMS
from karpenter_policy.cloud.provider import ReservingCloud
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.capacityreservation.cadence import Minutely
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.metrics import RESERVATION_EXPIRATION
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.records import ClaimRecord

__all__ = ["ReservationExpiration"]

LOG = logs.logger("capacityreservation.expiration")


class ReservationExpiration:
    """See the module docstring."""

    name = "capacityreservation-expiration"
    label = RESERVATION_EXPIRATION

    def __init__(self, context: Context) -> None:
        self.context = context
        self._cadence = Minutely()
        self._active = False  # the last look found a claim naming a reservation
        self.wake = self._cadence.wake

    def poll(self) -> float | None:
        return self._cadence.poll()

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Once a minute: the claims looked at, and when one names a reservation the cloud asked. Due again in a
        minute only while one does (else a later step, or the runner's minute, looks again)."""
        if self._cadence.due(now):
            claims = [c for c in self.context.state.claims() if c.labels.get(wk.CAPACITY_RESERVATION_ID)]
            self._active = bool(claims)
            if claims:
                self.expire(claims, result)
        return self._cadence.next if self._active else None

    def expire(self, claims: list[ClaimRecord], result: ReconcileResult) -> list[str]:
        """Delete the claims in an expiring capacity block; their names."""
        cloud = self.context.cloud
        if not isinstance(cloud, ReservingCloud):
            return []  # a cloud that keeps no reservations: none is expiring
        ids = sorted({c.labels[wk.CAPACITY_RESERVATION_ID] for c in claims})
        found = cloud.capacity_reservations({RESERVATION_TERMS: [{"id": i} for i in ids]})
        if found is None:
            self.context.error(result.errors, LOG, "getting capacity reservations, unknown now")
            result.failed = True
            return []
        expiring = {r.id for r in found if r.state == STATE_EXPIRING}
        deleted: list[str] = []
        for claim in claims:
            reservation = claim.labels[wk.CAPACITY_RESERVATION_ID]
            if reservation not in expiring or claim.deletion_timestamp is not None:
                continue
            try:
                self.context.cluster.delete(objects.NODE_CLAIM, claim.name)
            except NotFound:
                continue
            except ClusterError as error:
                self.context.error(result.errors, LOG, f"deleting nodeclaims, {error}", NodeClaim=claim.name)
                result.failed = True
                continue
            deleted.append(claim.name)
            LOG.info("initiating delete for capacity block expiration",
                     extra=self.context.fields(NodeClaim=claim.name, **{"capacity-reservation-id": reservation}))
        return deleted
