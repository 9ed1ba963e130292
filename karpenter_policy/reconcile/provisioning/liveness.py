"""Registration liveness: a node of ours whose kubelet never joins is deleted, its instance terminated.

Karpenter v0.31.1's `nodeclaim/lifecycle/liveness.go` (`Liveness.Reconcile`): a machine whose Node has not
registered within `registrationTTL` (15 minutes) of the machine's launch is deleted and counted
`karpenter_machines_terminated{reason="liveness"}` — a bad AMI or user data, a kubelet that cannot reach the API
server, leaves an instance that would otherwise bill for ever and take pods that never run. Here the controller
registers the Node itself at launch, so *registered* means what Karpenter's Node appearing means: a kubelet joined
it and posted its status (:func:`~karpenter_policy.reconcile.state.nodes.kubelet_joined`; a Ready condition
`Unknown` with `NodeStatusNeverUpdated` — the node lifecycle controller's mark of a kubelet that never posted —
is not joining). A node that joined once is never looked at again, whatever its kubelet does later.

A node's age is this controller's own: the moment it launched the node (the in-flight launch's clock time), or,
for a node it did not launch in this process (launched before a restart or by another replica), the moment it
first saw it unjoined — never a timestamp of the API server against the local clock, so a skewed clock can
neither delete a young node nor keep an old one. (After a restart a node gets at most one more TTL.)

Once `registration_ttl` (`ControllerOptions`, 15 minutes by default) has passed, the Node is deleted through the
termination path — the `karpenter.sh/termination` finalizer holds it while termination drains it (its pods never
ran: their owners recreate them and they are provisioned again), terminates the instance and lets the Node go —
with a Warning Event `RegistrationTimeout` on the Node, an error log line and `karpenter_machines_terminated{reason=
"liveness"}` — a NodePool's node as v1.14.1's liveness counts its NodeClaim, `karpenter_nodeclaims_disrupted_total
{reason="registration_timeout"}`, and its NodeClaim a failure for the NodePool's `NodeRegistrationHealthy`
(`reconcile.claims.nodepoolstatus`). A deletion the API refused is tried again at the next pass.
"""

from __future__ import annotations

import threading

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.provisioning.launchliveness import LaunchLiveness
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.records import NodeRecord

NODE = logs.logger("node")

#: Karpenter's reason for the machines it terminates this way (`metrics.ReasonLabel`).
LIVENESS = "liveness"
#: v1.14.1's reason for a NodeClaim deleted this way (liveness.go `registrationTimeoutReason`).
REGISTRATION_TIMEOUT = "registration_timeout"
#: The Warning Event on a Node deleted because its kubelet never joined.
REASON_REGISTRATION_TIMEOUT = "RegistrationTimeout"


class Liveness:
    """See the module docstring. It follows the state: a node of ours that has not joined is timed from its launch
    (or from when it was first seen), one that joins or goes is forgotten."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._since: dict[str, tuple[str, float]] = {}  # unjoined node → (its uid, when its age started)
        self._joined: set[str] = set()  # uids of the nodes of ours that joined once (never timed again)
        self._lock = threading.Lock()
        #: a NodePool's NodeClaims not launched in time (v1.14.1's launch timeout: `launchliveness`)
        self.launches = LaunchLiveness(context)
        context.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        """Runs under the state's lock: take note only."""
        if change.kind != "node":
            return
        after = change.after
        with self._lock:
            if not isinstance(after, NodeRecord):
                if isinstance(change.before, NodeRecord):
                    self._since.pop(change.before.name, None)
                    self._joined.discard(change.before.uid)
                return
            if after.ours and after.joined:
                self._joined.add(after.uid)
            if not after.ours or after.deleting or after.uid in self._joined:
                self._since.pop(after.name, None)  # it joined once: whatever its kubelet does later is not ours
                return
            known = self._since.get(after.name)
            if known is not None and known[0] == after.uid:
                return
            launch = self.context.inflight.get(after.name)
            since = launch.launched_at if launch is not None else self.context.clock()
            self._since[after.name] = (after.uid, since)

    def next_due(self) -> float | None:
        """When the oldest node not joined yet (or claim not launched) runs out of time (None: none waits)."""
        with self._lock:
            nodes = min(since for _, since in self._since.values()) if self._since else None
        dues = [due for due in (
            nodes + self.context.options.registration_ttl if nodes is not None else None, self.launches.next_due()
        ) if due is not None]
        return min(dues) if dues else None

    def reconcile(self, result: ReconcileResult) -> None:
        """Delete the nodes whose kubelet has not joined within the registration TTL (see the module docstring), and
        the NodeClaims not launched in time (`launchliveness`)."""
        self.launches.reconcile(result)
        context = self.context
        ttl = context.options.registration_ttl
        now = context.clock()
        with self._lock:
            expired = sorted((name, uid, since) for name, (uid, since) in self._since.items() if now - since >= ttl)
        for name, uid, _ in expired:
            node = context.state.node(name)
            if node is None or node.uid != uid or node.joined or node.deleting or not node.ours:
                continue  # the state moved on since (its change forgets it)
            try:
                context.cluster.delete(objects.NODE, name)  # the termination finalizer holds it (see above)
            except NotFound:
                continue
            except ClusterError as error:
                context.error(result.errors, NODE, f"could not delete node {name} that never joined, {error}",
                              node=name)
                continue
            with self._lock:
                if self._since.get(name, ("", 0.0))[0] == uid:
                    del self._since[name]
            self._report(node, result)

    def _report(self, node: NodeRecord, result: ReconcileResult) -> None:
        context = self.context
        ttl = context.options.registration_ttl
        kind = node.labels.get(wk.INSTANCE_TYPE, "")
        message = (
            f"the kubelet of node {node.name} (instance {node.instance_id or 'unknown'}"
            f"{', type ' + kind if kind else ''}) did not join within {_duration(ttl)}: deleting it"
        )
        result.unregistered.append(node.name)
        pool = node.provisioner or ""
        context.metrics.claim_disrupted(pool, LIVENESS, REGISTRATION_TIMEOUT, node.labels.get(wk.CAPACITY_TYPE, ""))
        claim_name = claim_of_node(node.obj)
        claim = context.state.claim(claim_name) if claim_name is not None else None
        if claim is not None:
            context.registration_health.failed(claim.obj)
        NODE.error(message, extra=context.fields(node=node.name, provisioner=node.provisioner or ""))
        context.event(node.obj, REASON_REGISTRATION_TIMEOUT, message, "Warning")


def _duration(seconds: float) -> str:
    """900 → `15m00s`, 42 → `42s`."""
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


__all__ = ["LIVENESS", "REASON_REGISTRATION_TIMEOUT", "REGISTRATION_TIMEOUT", "Liveness"]
