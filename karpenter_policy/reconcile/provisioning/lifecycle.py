"""Node lifecycle: launches in flight until the cluster shows them settled, adoption, initialization.

* **registration**: a launch whose Node could not be registered (the API was unavailable) is registered again;
* **binding**: pods planned onto a registered launch that the state does not show bound are bound again;
* **settling**: a launch leaves the in-flight registry once the state shows its Node and every planned pod bound
  (or gone); one whose Node vanished, or never showed up within `registration_timeout`, is dropped — its pods
  are pending again and the provisioner opens a window for them;
* **adoption** (at start-up and at every leader take-over): each instance of ours (tagged for the cluster by a
  provisioner) that no Node names gets its Node registered — a controller that stopped between CreateFleet and
  registration picks its instance up instead of launching another (counted as a machine registered, not as a node
  created: it was launched before); a NodePool's instance whose NodeClaim was written and launched before (its
  providerID names the instance) gets a Node naming that claim, else a new claim;
* **initialization**: a node of ours that is Ready with every startup taint gone is labelled
  `karpenter.sh/initialized=true` (Karpenter's rule), once;
* **NodeClaim conditions** of a NodePool's nodes: Registered and Initialized as their Nodes reach them
  (`claimstatus`).

Counted as Karpenter's machine lifecycle counts them: `karpenter_machines_initialized`, and a launch whose Node never
showed up as a machine terminated for `liveness` (`karpenter_machines_terminated`) — a NodePool's as v1.14.1 counts a
claim that did not register (`karpenter_nodeclaims_disrupted_total{reason="registration_timeout"}`), its claim a
failure for the NodePool's `NodeRegistrationHealthy`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import STATE_PENDING, STATE_RUNNING
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims import objects as claim_objects
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.provisioning.claimstatus import ClaimLifecycle
from karpenter_policy.reconcile.provisioning.provisioner import Provisioner
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.inflight import InFlightNode
from karpenter_policy.reconcile.state.records import NodeRecord
from karpenter_policy.reconcile.templates import Templates

NODE = logs.logger("node")


class NodeLifecycle:
    """See the module docstring."""

    def __init__(self, context: Context, provisioner: Provisioner) -> None:
        self.context = context
        self.provisioner = provisioner
        self.adopted = False
        self._dirty: set[str] = set()  # nodes changed since they were last looked at for initialization
        self._labelled: set[str] = set()  # uids labelled by this controller that the state does not show so yet
        #: called (under the state's lock) when a node may now be labelled initialized: wakes the provisioning thread
        self.on_dirty: Callable[[], None] = provisioner.wake.set
        self._lock = threading.Lock()
        context.state.subscribe(self._on_change)
        self.claims = ClaimLifecycle(context, lambda: self.on_dirty())

    def _on_change(self, change: Change) -> None:
        if change.kind != "node":
            return
        after = change.after
        for record in (change.before, after):
            if isinstance(record, NodeRecord):
                entry = self.context.inflight.get(record.name)
                if entry is not None:
                    entry.seen = True  # once seen, a launch whose Node goes away is dropped, not offered again
        if (  # a launch in flight first: most nodes are not, and their taints are then not read
            isinstance(after, NodeRecord) and isinstance(change.before, NodeRecord)
            and self.context.inflight.get(after.name) is not None
            and node_info.awaiting_registration(change.before.obj) and not node_info.awaiting_registration(after.obj)
        ):
            self.on_dirty()  # its claim registered: the pods planned onto it are bound at once (`settle`)
        with self._lock:
            if not isinstance(after, NodeRecord):
                if isinstance(change.before, NodeRecord):
                    self._labelled.discard(change.before.uid)
            elif after.labelled_initialized:
                self._labelled.discard(after.uid)
            elif after.ours and not after.deleting and after.uid not in self._labelled:
                self._dirty.add(after.name)
                if after.initialized:
                    self.on_dirty()

    def took_over(self) -> None:
        """This replica just became the leader (or started): adopt at the next pass."""
        self.adopted = False

    def register_pending(self, result: ReconcileResult) -> None:
        """Register again the launches whose Node could not be registered."""
        for entry in self.context.inflight:
            if not entry.registered:
                self.provisioner.register(entry, result)

    def settle(self, result: ReconcileResult) -> None:
        """Bind planned pods the state does not show bound, and drop the launches that settled (see above)."""
        context = self.context
        state = context.state
        if not self.adopted:
            self._adopt(result)
        for entry in context.inflight:
            if entry.registered:
                waiting = []
                for uid, pod in entry.pods.items():
                    record = state.pod(uid)
                    if uid not in entry.bound and record is not None and not record.node:
                        waiting.append(pod)
                if waiting:
                    self.provisioner.bind(entry.name, waiting, entry, result)

        def settled(uid: str) -> bool:
            record = state.pod(uid)
            return record is None or bool(record.node)

        dropped = context.inflight.settle(
            lambda name: state.node(name) is not None, settled, context.clock(), context.options.registration_timeout
        )
        for entry in dropped:
            if state.node(entry.name) is not None:
                continue  # settled
            if entry.seen:  # deleted since (by a user, an interruption, termination): nothing went wrong here
                NODE.info("node %s left before its launch settled", entry.name, extra=context.fields(node=entry.name))
            else:
                context.error(
                    result.errors, NODE, f"node {entry.name} of instance {entry.instance.id} never showed up",
                    node=entry.name,
                )
                context.metrics.claim_disrupted(
                    entry.template, "liveness", "registration_timeout", entry.instance.capacity_type
                )
                claim = context.state.claim(objects.name(entry.claim)) if entry.claim is not None else None
                if claim is not None:
                    context.registration_health.failed(claim.obj)
            self.provisioner.relaunch(list(entry.pods))

    def _adopt(self, result: ReconcileResult) -> None:
        """Register a Node for each instance of ours that has none."""
        context = self.context
        try:
            instances = context.cloud.list(context.options.cluster_name)
            known = {n.provider_id for n in context.state.nodes() if n.provider_id} | context.inflight.provider_ids()
            orphans = [
                i for i in instances if i.provider_id not in known and i.state in (STATE_PENDING, STATE_RUNNING)
            ]
            templates = context.template_sets() if orphans else Templates()
        except CloudError as error:
            context.error(result.errors, NODE, f"could not list the cluster's instances, {error}")
            return
        self.adopted = True
        for instance in orphans:
            name = instance.provisioner or ""
            constraint_set = templates.sets.get(name)
            if constraint_set is None:
                NODE.warning(
                    "instance %s of provisioner %s has no node and no constraint set in force: not registered "
                    "(garbage collection terminates it)",
                    instance.id, name, extra=context.fields(provisioner=name),
                )
                continue
            template = templates.template(name)
            node = node_info.node_object(instance, template, constraint_set, template.requirements)
            entry = InFlightNode(instance, node, name, context.clock(), adopted=True)
            written = next((c for c in context.state.claims() if c.instance_id == instance.id), None)
            if written is not None:  # its claim was written and launched before the restart: the Node names it
                entry.claim_created = True
                node["metadata"]["ownerReferences"] = [claim_objects.node_reference(written.obj)]
            elif constraint_set.is_nodepool:
                entry.claim = claim_objects.nodeclaim_object(constraint_set, instance, node, template.requirements, {})
                entry.claim_status = claim_objects.launched_status(node, instance)
            context.inflight.add(entry)
            self.provisioner.register(entry, result)
            NODE.info(
                "registered node %s for instance %s launched before a restart", entry.name, instance.id,
                extra=context.fields(provisioner=name),
            )

    def initialize(self) -> None:
        """Label our Ready nodes without startup taints initialized: each node of ours not labelled yet is looked
        at when it changes (a label written is not written again, however late the state shows it; one that
        could not be written is tried again at the next pass)."""
        context = self.context
        with self._lock:
            dirty, self._dirty = sorted(self._dirty), set()
        for name in dirty:
            node = context.state.node(name)
            if node is None or node.deleting or node.labelled_initialized or not node.initialized:
                continue
            if node.uid in self._labelled:
                continue
            try:
                context.cluster.patch(objects.NODE, node.name, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
            except ClusterError as error:
                NODE.warning(
                    "could not label node %s initialized, %s", node.name, error, extra=context.fields(node=node.name)
                )
                with self._lock:
                    self._dirty.add(name)
                continue
            with self._lock:
                self._labelled.add(node.uid)
            context.metrics.machines_initialized.labels(node.provisioner or "").inc()
            NODE.info("initialized node %s", node.name, extra=context.fields(node=node.name))
        self.claims.sync()

    @property
    def pending_initialization(self) -> bool:
        """Some node waits to be labelled again (a write failed), or a NodeClaim for its conditions."""
        return bool(self._dirty) or self.claims.pending


__all__ = ["NodeLifecycle"]
