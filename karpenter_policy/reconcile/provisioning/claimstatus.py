"""The lifecycle conditions of a NodePool's NodeClaims, from what the cluster shows of their Nodes, as Karpenter
v1.14.1's NodeClaim lifecycle controller sets them (core pkg/controllers/nodeclaim/lifecycle/): `Registered` (and
`status.nodeName`) once the Node's kubelet joined (`registration.go`), `Initialized` once the Node is labelled
`karpenter.sh/initialized` — Ready, its startup taints gone (`initialization.go`) —, and with the three (`Launched`
is set at creation, `reconcile.claims.writer`) `Ready`. A claim turning Registered is a node created
(`karpenter_nodes_created_total{nodepool, zone}`) and a success for its NodePool's `NodeRegistrationHealthy`
(`reconcile.claims.nodepoolstatus`).

It follows the state: a Node of ours that names a NodeClaim as owner and whose joined or initialized changed is
looked at in the next provisioning step; a write that failed is tried again at the next one. A claim written once
is not written again for the same stage, however late the state shows the change.

Before `Registered`, the cloud provider's registration hooks (`registrationhooks`: a partition placement group's
partition label, known from DescribeInstances) must be ready: until then the claim's `Registered` is Unknown
(`RegistrationHookPending`, the hook's name) and it is looked at again after v1.14.1's per-item backoff (1 s,
doubling, at most a minute: `next_due`) or at its Node's next change — never by a scan. What a ready hook resolved
is written on the claim's and its Node's labels first. Then, as v1.14.1's registration (registration.go:93-103), the
Node loses the `karpenter.sh/unregistered:NoExecute` taint it was written with and is labelled
`karpenter.sh/registered=true` — from then on pods are bound there (`Provisioner.bind`) — and the claim turns
Registered; a Node of ours with neither is `UnregisteredTaintMissing` (logged, an Event on the claim).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import events
from karpenter_policy.reconcile.claims import conditions
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.claims.writer import CLAIMS
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.provisioning import registrationhooks as hooks
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.records import NodeRecord

#: What a claim's Node showed: (kubelet joined, labelled initialized).
Stage = tuple[bool, bool]


class ClaimLifecycle:
    """See the module docstring. `on_dirty` wakes the provisioning thread (set by its owner)."""

    def __init__(self, context: Context, on_dirty: Callable[[], None]) -> None:
        self.context = context
        self.on_dirty = on_dirty
        self._lock = threading.Lock()
        self._dirty: dict[str, tuple[str, Stage]] = {}  # claim → (node, stage seen)
        self._written: dict[str, Stage] = {}  # claim → stage written
        self._waiting: dict[str, tuple[str, Stage, float, int]] = {}  # claim → (node, stage, due, attempts): hooks
        #: nodes of ours awaiting registration that name no claim (a cluster without the NodeClaim CRD): node → (due,
        #: attempts)
        self._unclaimed: dict[str, tuple[float, int]] = {}
        context.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.kind != "node":
            return
        after = change.after
        if not isinstance(after, NodeRecord):
            before = change.before
            if isinstance(before, NodeRecord):
                with self._lock:
                    self._unclaimed.pop(before.name, None)
            if isinstance(before, NodeRecord) and (claim := claim_of_node(before.obj)) is not None:
                with self._lock:
                    self._written.pop(claim, None)
                    self._dirty.pop(claim, None)
                    self._waiting.pop(claim, None)
            return
        if not after.ours or after.deleting:
            return
        claim = claim_of_node(after.obj)
        if claim is None:  # no claim to register (no NodeClaim CRD): the Node registers alone once its kubelet joined
            if after.joined and node_info.awaiting_registration(after.obj):
                with self._lock:
                    self._unclaimed.setdefault(after.name, (0.0, 0))
                self.on_dirty()
            return
        stage = (after.joined, after.labelled_initialized)
        with self._lock:
            if self._written.get(claim) == stage or stage == (False, False):
                return
            self._dirty[claim] = (after.name, stage)
        self.on_dirty()

    @property
    def pending(self) -> bool:
        """Some claim waits for its conditions to be written."""
        with self._lock:
            return bool(self._dirty) or any(due == 0.0 for due, _ in self._unclaimed.values())

    def next_due(self) -> float | None:
        """When a claim (or a Node without one) a registration hook held back is looked at again (None: none is)."""
        with self._lock:
            dues = [due for _, _, due, _ in self._waiting.values()] + [due for due, _ in self._unclaimed.values()]
            return min(dues, default=None)

    def sync(self) -> None:
        """Write the conditions of the claims whose Node changed, and of those whose hook's backoff ran out."""
        now = self.context.clock()
        with self._lock:
            dirty, self._dirty = self._dirty, {}
            for claim, (node, stage, due, _) in list(self._waiting.items()):
                if due <= now:
                    dirty.setdefault(claim, (node, stage))
        writer = self.context.claims
        for claim, (node, stage) in sorted(dirty.items()):
            joined, initialized = stage
            try:
                if joined or initialized:
                    if not self._hooks_ready(claim, node, stage, now):
                        continue
                    self._register_node(claim, node)
                    if writer.set_true(claim, conditions.REGISTERED, node_name=node):
                        self._registered(claim)
                if initialized:
                    writer.set_true(claim, conditions.INITIALIZED)
            except ClusterError as error:
                CLAIMS.warning(
                    "could not write the conditions of nodeclaim %s, %s", claim, error,
                    extra=self.context.fields(nodeclaim=claim, node=node),
                )
                with self._lock:
                    self._dirty.setdefault(claim, (node, stage))
                continue
            with self._lock:
                self._written[claim] = stage
        self._sync_unclaimed(now)

    def _sync_unclaimed(self, now: float) -> None:
        """Register the Nodes of ours that name no claim once the hooks are ready: the hook's labels, then the
        taint removed (`_register_node`); not ready, or a write that failed: looked at again after the backoff."""
        with self._lock:
            due_now = sorted(node for node, (due, _) in self._unclaimed.items() if due <= now)
        for node in due_now:
            record = self.context.state.node(node)
            if record is None or record.deleting or not node_info.awaiting_registration(record.obj):
                with self._lock:
                    self._unclaimed.pop(node, None)
                continue
            answer = hooks.placement_group_partition(record.labels, record.provider_id, self.context.cloud)
            if not answer.ready:
                _log_not_ready(answer, self.context.fields(node=node))
            try:
                if answer.ready:
                    if answer.labels:
                        self.context.cluster.patch(objects.NODE, node, {"metadata": {"labels": dict(answer.labels)}})
                    self._register_node("", node)
                    with self._lock:
                        self._unclaimed.pop(node, None)
                    continue
            except ClusterError as error:
                CLAIMS.warning("could not register node %s, %s", node, error, extra=self.context.fields(node=node))
            with self._lock:
                attempts = self._unclaimed.get(node, (0.0, 0))[1] + 1
                self._unclaimed[node] = (now + hooks.backoff(attempts), attempts)

    def _hooks_ready(self, claim: str, node: str, stage: Stage, now: float) -> bool:
        """Whether the registration hooks let the claim register now (`registrationhooks`); when one resolved labels,
        they are written on the claim and its Node first. Not ready: `Registered` Unknown `RegistrationHookPending`,
        looked at again after the backoff. Raises ClusterError (a write failed: tried again at the next sync)."""
        record = self.context.state.node(node)
        if record is None:
            return True
        answer = hooks.placement_group_partition(record.labels, record.provider_id, self.context.cloud)
        if answer.ready:
            with self._lock:
                self._waiting.pop(claim, None)
            if answer.labels:
                patch = {"metadata": {"labels": dict(answer.labels)}}
                self.context.cluster.patch(objects.NODE, node, patch)
                self.context.claims.label(claim, dict(answer.labels))
            return True
        _log_not_ready(answer, self.context.fields(nodeclaim=claim, node=node))
        with self._lock:
            attempts = self._waiting[claim][3] + 1 if claim in self._waiting else 1
            self._waiting[claim] = (node, stage, now + hooks.backoff(attempts), attempts)
        self.context.claims.set_unknown(
            claim, conditions.REGISTERED, hooks.PENDING, message=hooks.PLACEMENT_GROUP_HOOK
        )
        return False

    def _register_node(self, claim: str, node: str) -> None:
        """Every hook ready: the Node loses `karpenter.sh/unregistered` and is labelled `karpenter.sh/registered`
        (registration.go:96-103), by a merge patch on the resourceVersion of the Node read again (a conflict
        raises: tried again at the next sync). A Node of ours that has neither — its taint gone before
        registration — is v1.14.1's `UnregisteredTaintMissing`: logged and a Warning Event on the claim
        (registration.go:82-88). Only a NodePool's node was written with the taint (a Provisioner's has no claim)."""
        record = self.context.state.node(node)
        if record is None or node_info.registered_patch(record.obj) is None:
            return  # gone, or registered already
        current = self.context.cluster.get(objects.NODE, node)  # the hook may just have labelled it: its version
        if current is None:
            return
        if not node_info.awaiting_registration(current) and objects.labels(current).get(wk.REGISTERED) != "true":
            CLAIMS.error(
                "node claim registration error, missing taint prevents registration-related race conditions on "
                "Karpenter-managed nodes", extra=self.context.fields(nodeclaim=claim, node=node,
                                                                     taint=wk.TAINT_UNREGISTERED),
            )
            stored = self.context.state.claim(claim)
            if stored is not None:
                self.context.events.publish(events.unregistered_taint_missing(stored.obj))
        patch = node_info.registered_patch(current)
        if patch is not None:
            self.context.cluster.patch(objects.NODE, node, patch)

    def _registered(self, name: str) -> None:
        """The claim just turned Registered: a node created (`karpenter_nodes_created_total{nodepool, zone}`) and a
        success for its NodePool's registration health (registration.go `NodesCreatedTotal`,
        `updateNodePoolRegistrationHealth`)."""
        record = self.context.state.claim(name)
        claim = record.obj if record is not None else self.context.claims.read(name)
        if claim is not None:
            labels = objects.labels(claim)
            self.context.metrics.node_created(labels.get(wk.NODEPOOL, ""), labels.get(wk.ZONE, ""))
            self.context.registration_health.registered(claim)


def _log_not_ready(answer: hooks.HookAnswer, fields: dict[str, object]) -> None:
    """Say why a registration hook held a node back: a failed call (v1.14.1 returns it as an error, logged) is a
    warning naming the hook and the failure; an answer not given yet, a debug line."""
    if answer.error:
        CLAIMS.warning("registration hook %r failed, %s", hooks.PLACEMENT_GROUP_HOOK, answer.error, extra=fields)
    else:
        CLAIMS.debug("awaiting registration hooks %s", hooks.PLACEMENT_GROUP_HOOK, extra=fields)


__all__ = ["ClaimLifecycle"]

