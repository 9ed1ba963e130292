"""Launch liveness of a NodePool's NodeClaims, as Karpenter v1.14.1's `nodeclaim/lifecycle/liveness.go` times a
claim that has not launched: a NodeClaim of ours (held by the `karpenter.sh/termination` finalizer, labelled
`karpenter.sh/nodepool`) without a providerID for `LaunchTimeout` (5 minutes) is deleted — a claim written before a
launch that never completed (the controller stopped between writing the claim and launching, or between the launch
and writing its status). Termination then finalizes it (`termination.terminator`): with neither an instance nor a
Node, it goes at once. It is counted as v1.14.1 counts it (`karpenter_nodeclaims_disrupted_total{reason=
"launch_timeout"}`) and is a failure for its NodePool's `NodeRegistrationHealthy` (`reconcile.claims.nodepoolstatus`:
False's reason and message are the claim's `Launched` condition's).

A claim that some Node of ours names as owner is never deleted here: its launch happened (only its status write
was lost), and an instance with a Node is never terminated from under it. As `liveness`, a claim's age is this
controller's own (the moment it first saw the claim not launched), never an API timestamp against the local clock.
"""

from __future__ import annotations

import threading

from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.records import ClaimRecord

CLAIMS = logs.logger("nodeclaim")
#: v1.14.1's `LaunchTimeout`.
LAUNCH_TIMEOUT = 300.0
#: v1.14.1's reason for a NodeClaim deleted this way (liveness.go `launchTimeoutReason`).
LAUNCH_TIMEOUT_REASON = "launch_timeout"


def _unlaunched(claim: ClaimRecord) -> bool:
    return (
        not claim.provider_id and claim.deletion_timestamp is None
        and wk.TERMINATION_FINALIZER in claim.finalizers and bool(claim.labels.get(wk.NODEPOOL))
    )


class LaunchLiveness:
    """See the module docstring."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._since: dict[str, tuple[str, float]] = {}  # claim → (its uid, when first seen not launched)
        self._lock = threading.Lock()
        context.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        """Runs under the state's lock: take note only."""
        if change.kind != "nodeclaim":
            return
        after = change.after
        with self._lock:
            if not isinstance(after, ClaimRecord) or not _unlaunched(after):
                if isinstance(change.before, ClaimRecord):
                    self._since.pop(change.before.name, None)
                return
            known = self._since.get(after.name)
            if known is None or known[0] != after.uid:
                self._since[after.name] = (after.uid, self.context.clock())

    def next_due(self) -> float | None:
        """When the oldest claim not launched runs out of time (None: none waits)."""
        with self._lock:
            return min(since for _, since in self._since.values()) + LAUNCH_TIMEOUT if self._since else None

    def reconcile(self, result: ReconcileResult) -> None:
        """Delete the claims not launched within LAUNCH_TIMEOUT (see the module docstring)."""
        context = self.context
        now = context.clock()
        with self._lock:
            expired = sorted((n, uid) for n, (uid, since) in self._since.items() if now - since >= LAUNCH_TIMEOUT)
        for name, uid in expired:
            claim = context.state.claim(name)
            if claim is None or claim.uid != uid or not _unlaunched(claim):
                continue
            if any(node.ours and claim_of_node(node.obj) == name for node in context.state.nodes()):
                with self._lock:
                    self._since.pop(name, None)
                continue
            try:
                context.claims.delete(name)
            except ClusterError as error:
                context.error(result.errors, CLAIMS, f"could not delete nodeclaim {name} that never launched, {error}",
                              nodeclaim=name)
                continue
            with self._lock:
                self._since.pop(name, None)
            CLAIMS.error("nodeclaim %s did not launch within %ds: deleting it", name, int(LAUNCH_TIMEOUT),
                         extra=context.fields(nodeclaim=name))
            context.metrics.nodeclaims_disrupted.labels(
                LAUNCH_TIMEOUT_REASON, claim.labels.get(wk.NODEPOOL, ""), claim.labels.get(wk.CAPACITY_TYPE, "")
            ).inc()
            context.registration_health.failed(claim.obj)


__all__ = ["LAUNCH_TIMEOUT", "LAUNCH_TIMEOUT_REASON", "LaunchLiveness"]
