"""Carrying out disruption decisions (`disruption`): replacements before deletions; a Provisioner's commands one
at a time (v0.31.1), NodePools' side by side within their budgets (v1.14.1's orchestration queue).

Each pass the controller calls :meth:`Deprovisioner.step`, which follows every command under way, then:

* with no command under way, or only NodePools' (the nodes of those are neither candidates nor offered to the
  decision's simulations, which place their pods again, and use up their NodePool's budget: `Inputs.disrupting`),
  and the cluster quiet (no pod
  being provisioned, no launch in flight, no node of ours being drained — those commands' replacements and drains
  aside), at most every `interval` seconds — at once after a NodePool's command started (v1.14.1's
  `RequeueImmediately`) —, it asks the
  :class:`~karpenter_policy.reconcile.disruption.decider.Decider` for the next command. It asks for a pass of its
  own when a node will expire or while the cluster is not quiet; otherwise the controller's next pass (a change,
  or the runner's resync every 10 s) brings it back;
* a consolidation command is held for `validation` seconds (Karpenter's 15 s consolidation TTL: the cluster may be
  moving), then checked again (:mod:`~karpenter_policy.reconcile.disruption.recheck`): acted on when it still
  holds; otherwise abandoned and the decision goes on at once with the stages after the one that found it
  (Karpenter's next deprovisioner: empty → multi-node → single-node; a single-node command that fails waits for
  the next decision). A cluster that stops being quiet meanwhile drops the held command. Expiry and drift act at
  once;
* a command without replacements deletes its nodes at once: the termination finalizer cordons and drains them;
* a command with replacements cordons its nodes (no new pod lands on them; a NodePool's nodes are tainted
  `karpenter.sh/disrupted:NoSchedule` instead, before any command of theirs, as Karpenter v1.14.1), launches the
  replacements (their Nodes are registered; no pod is bound to them) and waits until every one is initialized,
  then deletes its nodes, whose evicted pods the provisioner (or kube-scheduler) puts on the replacements. A
  replacement that fails to launch, or is not initialized within `replacement_timeout`, abandons the command: its
  nodes are uncordoned (untainted) and nothing is deleted (the replacements left are empty nodes, for consolidation or
  emptiness);
* once its nodes are deleted, the command waits until they are gone from the cluster (at most
  `replacement_timeout`; Karpenter's `waitForDeletion`) — before the next decision when it is a Provisioner's —,
  then the next decision comes at once, not `interval` after the last one: a NodePool's budget is free again, and
  v0.31.1 requeues at once after a command that succeeded (`deprovisioning/controller.go:134`; only a pass that
  found nothing waits its 10 s `pollingPeriod`).

Each command carries on by itself: a failure abandons that one only. A Provisioner's command starts only when none
is under way. While a command is under way its replacements are *protected*: emptiness does not count them empty
and no other decision takes them (:mod:`~karpenter_policy.reconcile.disruption.queue` holds them). Everything is
logged with the command's reason and saving; a restarted controller simply decides again from what the cluster
shows.

What Karpenter's deprovisioning controller records, it records: per decision the candidates each method found
(`karpenter_deprovisioning_eligible_machines`), its time (`…_evaluation_duration_seconds`) and consolidations its
budget stopped (`…_consolidation_timeouts`) for the Provisioners' nodes, and v1.14.1's
`karpenter_voluntary_disruption_eligible_nodes`, `…_decision_evaluation_duration_seconds` and
`…_consolidation_timeouts_total` for the NodePools'; per command carried out `…_actions_performed{action=
"<method>/<action>"}`, a `DeprovisioningTerminating` Event on each node it deletes and the machine terminated with
that reason, the time its replacements took to initialize (`…_replacement_machine_initialized_seconds`) or a
replacement that failed (`…_replacement_machine_launch_failure_counter`); and on a node that cannot be disrupted, an
Event `Unconsolidatable` (consolidation's reasons) or `DeprovisioningBlocked` (the others), as Karpenter dedupes
them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import is_nodepool, pool_name, pool_of_labels
from karpenter_policy.reconcile import events, logs
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.claims.writer import ClaimWriter
from karpenter_policy.reconcile.disruption.claimconditions import ClaimConditions
from karpenter_policy.reconcile.disruption.decider import (
    CONSOLIDATION,
    EMPTY,
    MULTI_NODE,
    SINGLE_NODE,
    Command,
    Decider,
    Decision,
    Inputs,
    Move,
)
from karpenter_policy.reconcile.disruption.queue import Commands, Underway, runs_side_by_side
from karpenter_policy.reconcile.disruption.recheck import Recheck, invalid
from karpenter_policy.reconcile.disruption.restamp import restamp
from karpenter_policy.reconcile.events import Recorder
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.options import DEFAULT_DISRUPTION_INTERVAL as DEFAULT_INTERVAL
from karpenter_policy.reconcile.options import DEFAULT_REPLACEMENT_TIMEOUT, DEFAULT_VALIDATION
from karpenter_policy.reconcile.result import Disrupted
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import ClusterState

DEPROVISIONING = logs.logger("deprovisioning")
#: While a command is under way, it is followed this often.
FOLLOW_SECONDS = 1.0
#: Karpenter v1.14.1's consolidation types that can time out (metrics.go `init`: both counted from 0).
V1_CONSOLIDATION_TYPES = ("multi", "single")


#: Launches the replacements of a command: the names of the Nodes registered, or why it failed.
LaunchReplacements = Callable[[Command], "list[str] | str"]


@dataclass(slots=True)
class _Held:
    command: Command
    since: float


class Deprovisioner:
    """See the module docstring. `fields` makes a log line's structured fields."""

    def __init__(
        self,
        cluster: Cluster,
        state: ClusterState,
        decider: Decider,
        clock: Callable[[], float],
        fields: Callable[..., dict[str, object]],
        *,
        interval: float = DEFAULT_INTERVAL,
        validation: float = DEFAULT_VALIDATION,
        replacement_timeout: float = DEFAULT_REPLACEMENT_TIMEOUT,
        metrics: Metrics | None = None,
        recorder: Recorder | None = None,
        claims: ClaimWriter | None = None,
    ) -> None:
        self.metrics = metrics or Metrics(clock)
        self.events = recorder or Recorder(cluster, clock, fields)
        self.cluster = cluster
        self.state = state
        self.decider = decider
        self.clock = clock
        self.fields = fields
        self.interval = interval
        self.validation = validation
        self.replacement_timeout = replacement_timeout
        self.underway = Commands()
        self._held: _Held | None = None
        self._next_decision = 0.0
        self._told: dict[str, str] = {}  # node → the blocked reason last logged
        self._taint_scan_at = 0.0  # when nodes left tainted are next looked for
        self.claim_conditions = ClaimConditions(claims) if claims is not None else None

    @property
    def holding(self) -> bool:
        """A consolidation waits for its validation."""
        return self._held is not None

    def protected(self) -> frozenset[str]:
        """The replacements of the commands under way."""
        return self.underway.protected()

    def disrupting(self) -> frozenset[str]:
        """The nodes the commands under way disrupt (they are not candidates, and use up their NodePool's budget)."""
        return self.underway.disrupting()

    def step(
        self,
        quiet: bool,
        inputs: Callable[[], Inputs],
        launch: LaunchReplacements,
    ) -> Disrupted:
        """One pass: follow the commands under way, then validate the held one or decide when `quiet` and no
        Provisioner's command is under way (see the module docstring). `inputs` builds the decision's inputs (only
        called when deciding or validating)."""
        done = Disrupted()
        self._clear_stale_taints(done)
        alone = not self.underway.side_by_side()  # a Provisioner's command: nothing else this pass, as v0.31.1
        for underway in self.underway:
            self._follow(underway, done)
        follow = done.due
        done.due = None
        if not alone and self.underway.side_by_side():
            self._next(quiet, inputs, launch, done)
        if follow is not None:
            done.due = follow if done.due is None else min(done.due, follow)
        return done

    def _next(self, quiet: bool, inputs: Callable[[], Inputs], launch: LaunchReplacements, done: Disrupted) -> None:
        """Validate the held command, else decide (see :meth:`step`)."""
        now = self.clock()
        if not quiet:
            self._held = None  # the cluster moved: a held consolidation is decided again
            done.due = now + self.interval  # look again once it has settled
            return
        after = None
        held = self._held
        if held is not None:
            if now - held.since < self.validation:
                done.held = held.command.message()
                done.due = held.since + self.validation
                return
            self._held = None
            current = inputs()
            verdict = invalid(self.decider, held.command, current)
            why = verdict.why
            if not why:
                self._act(held.command, launch, done)
                return
            self._count_failed_validation(held.command, verdict)
            done.abandoned = f"the command is no longer valid: {why}"
            DEPROVISIONING.info(
                "abandoning %s consolidation, the command is no longer valid (%s): %s", held.command.stage, why,
                held.command.message(), extra=self.fields(nodes=list(held.command.names)),
            )
            if held.command.stage == SINGLE_NODE:
                self._next_decision = now + self.interval
                done.due = self._next_decision
                return
            after = held.command.stage  # Karpenter goes on to its next deprovisioner at once
            self._decide(current, after, launch, done)
            return
        if now < self._next_decision:
            done.due = self._next_decision
            return
        self._decide(inputs(), after, launch, done)

    def _decide(self, inputs: Inputs, after: str | None, launch: LaunchReplacements, done: Disrupted) -> None:
        now = self.clock()
        self._next_decision = now + self.interval
        decision = self.decider.decide(inputs, after)
        if self.claim_conditions is not None:  # before any command: its nodes are as the decision saw them
            done.errors.extend(self.claim_conditions.update(inputs, self.decider.drift_reasons()))
        done.errors.extend(restamp(self.cluster, inputs, self.decider.drift_reasons()))  # a stale hash version
        self._record(decision)
        self._log_blocked(decision.blocked)
        for pod, held in decision.do_not_disrupt_read.values():  # v1.14.1's `IsDoNotDisruptActive` Events, deduped
            event = events.do_not_disrupt(pod.obj, held)
            if event is not None:
                self.events.publish(event)
        if decision.stopped:
            DEPROVISIONING.info("%s", decision.stopped, extra=self.fields())
        done.stopped = decision.stopped
        done.blocked = decision.blocked
        command = decision.command
        # Come back when a node expires; otherwise at the next pass the controller runs anyway (a change, the
        # runner's resync every 10 s): a cluster with nothing to disrupt asks for no pass of its own.
        done.due = now + decision.expires_in if decision.expires_in is not None else None
        if command is None:
            return
        if command.method == CONSOLIDATION:
            decided = self.clock()  # the wait starts once the decision is made (Karpenter's Validation)
            self._held = _Held(command, decided)
            done.held = command.message()
            done.due = decided + self.validation
            DEPROVISIONING.info(
                "validating consolidation in %.0fs: %s", self.validation, command.message(),
                extra=self.fields(nodes=list(command.names)),
            )
            return
        self._act(command, launch, done)

    def _act(self, command: Command, launch: LaunchReplacements, done: Disrupted) -> None:
        if self.underway and not runs_side_by_side(command):
            return  # a Provisioner's command waits until none is under way (v0.31.1: one at a time)
        message = command.message()
        done.decided = message
        DEPROVISIONING.info(message, extra=self.fields(
            reason=command.method, action=command.action, nodes=list(command.names),
            savings=command.savings,
        ))
        self._count_decision(command)
        underway = Underway(command, [], self.clock())
        if not command.replacements:
            self._started(underway, done)
            self._cordon(command, True, done, nodepools_only=True)  # v1 taints every command's nodes first
            self._delete(underway, done)
            return
        self._cordon(command, True, done)  # no new pod lands on a node about to go
        launched = launch(command)
        if isinstance(launched, str):
            self.metrics.deprovisioning_launch_failures.labels(command.reason).inc()
            self._cordon(command, False, done)
            done.abandoned = f"could not launch the replacement(s): {launched}; nothing deleted"
            DEPROVISIONING.error("abandoned %s %s, %s", command.method, command.action, done.abandoned,
                                 extra=self.fields(nodes=list(command.names)))
            return
        done.replacements.extend(launched)
        underway.replacements, underway.started = launched, self.clock()
        self._started(underway, done)
        DEPROVISIONING.info(
            "waiting on %d replacement node(s) to initialize: %s", len(launched), ", ".join(launched),
            extra=self.fields(nodes=list(command.names)),
        )
        done.due = _sooner(done.due, self.clock() + FOLLOW_SECONDS)

    def _started(self, underway: Underway, done: Disrupted) -> None:
        """A command is under way; a NodePool's lets the next decision come at once (v1.14.1's `StartCommand` then
        `RequeueImmediately`, core pkg/controllers/disruption/controller.go). Its nodes are marked for deletion once
        its replacements are launched (v1.14.1's queue.go `StartCommand`, v0.31.1's `executeCommand`:
        `MarkForDeletion`): provisioning places their pods again from now on, not from their deletion."""
        self.underway.start(underway)
        self.state.mark_for_deletion(underway.command.names)
        if underway.nodepools:
            self._next_decision = self.clock()
            done.due = self._next_decision

    def _follow(self, underway: Underway, done: Disrupted) -> None:
        command = underway.command
        now = self.clock()
        if underway.deleted is not None:
            left = [name for name in command.names if self.state.node(name) is not None]
            if not left:
                self.underway.finish(underway)
                # the next decision at once, not at the next poll: a NodePool's budget is free again; a Provisioner's
                # command succeeded, and v0.31.1 requeues at once after one (deprovisioning/controller.go:134)
                self._next_decision = min(self._next_decision, now)
                return
            if now - underway.deleted > self.replacement_timeout:
                DEPROVISIONING.error(
                    "waiting on node deletion, node(s) %s still there after %.0fs", ", ".join(left),
                    self.replacement_timeout, extra=self.fields(nodes=left),
                )
                self.underway.finish(underway)
                self._next_decision = min(self._next_decision, now)  # v0.31.1: `waitForDeletion` only logs
                return
            done.due = _sooner(done.due, now + FOLLOW_SECONDS)
            return
        ready = [n for n in underway.replacements if (node := self.state.node(n)) is not None and node.initialized]
        if len(ready) == len(underway.replacements):
            self.metrics.deprovisioning_replacement_initialized.observe(self.clock() - underway.started)
            DEPROVISIONING.info(
                "replacement node(s) initialized: %s", ", ".join(underway.replacements),
                extra=self.fields(nodes=list(command.names)),
            )
            self._delete(underway, done)
            return
        if now - underway.started > self.replacement_timeout:
            waiting = sorted(set(underway.replacements) - set(ready))
            done.abandoned = (
                f"replacement node(s) {', '.join(waiting)} not initialized after {self.replacement_timeout:.0f}s; "
                "nothing deleted"
            )
            DEPROVISIONING.error("abandoned %s %s, %s", command.method, command.action,
                                 done.abandoned, extra=self.fields(nodes=list(command.names)))
            self.metrics.deprovisioning_launch_failures.labels(command.reason).inc()
            if underway.nodepools:  # v1.14.1's queue.go `waitOrTerminate`: the replacements not initialized
                self.metrics.voluntary_disruption_queue_failures.labels(
                    command.action, command.v1_reason, command.action  # its consolidation_type is the decision
                ).inc(len(waiting))
            self._cordon(command, False, done)
            self.state.mark_for_deletion(command.names, marked=False)  # `UnmarkForDeletion`: they stay
            self.underway.finish(underway)
            return
        done.due = _sooner(done.due, now + FOLLOW_SECONDS)

    def _delete(self, underway: Underway, done: Disrupted) -> None:
        command = underway.command
        reason = command.reason
        failed = False
        for candidate in command.candidates:
            name = candidate.name
            node = self.state.node(name)
            if node is not None:
                self.events.publish(events.deprovisioning_terminating(node.obj, reason))
            try:
                self.cluster.delete(objects.NODE, name)
            except NotFound:
                continue
            except ClusterError as error:
                done.errors.append(f"could not delete node {name} ({command.method}), {error}")
                failed = True
                continue
            done.deleted.append(name)
            if is_nodepool(candidate.provisioner):  # v1.14.1's queue.go: the claim disrupted, with v1's reason
                capacity = node.labels.get(wk.CAPACITY_TYPE, "") if node is not None else ""
                self.metrics.nodeclaims_disrupted.labels(
                    command.v1_reason, pool_name(candidate.provisioner), capacity
                ).inc()
            else:
                self.metrics.machines_terminated.labels(reason, candidate.provisioner).inc()
        if not failed:
            underway.deleted = self.clock()  # now wait for them to be gone
        done.due = _sooner(done.due, self.clock() + FOLLOW_SECONDS)

    def _count_decision(self, command: Command) -> None:
        """A command carried out: v0.31's `…_actions_performed` when it disrupts a Provisioner's node, v1.14.1's
        `karpenter_voluntary_disruption_decisions_total` (and `…_by_nodepool_total` per NodePool) when it disrupts a
        NodePool's (core pkg/controllers/disruption/queue.go)."""
        pools = {c.provisioner for c in command.candidates}
        if any(not is_nodepool(pool) for pool in pools):
            self.metrics.deprovisioned(command.method, command.action)
        nodepools = sorted(pool_name(pool) for pool in pools if is_nodepool(pool))
        if nodepools:
            labels = (command.action, command.v1_reason, command.consolidation_type)
            self.metrics.voluntary_disruption_decisions.labels(*labels).inc()
            for nodepool in nodepools:
                self.metrics.voluntary_disruption_decisions_by_nodepool.labels(nodepool, *labels).inc()

    def _cordon(self, command: Command, unschedulable: bool, done: Disrupted, nodepools_only: bool = False) -> None:
        """Cordon (or uncordon) the command's nodes, as the API shows them now (the state may not have seen the
        cordon of this very pass); a node being deleted is left as it is. A NodePool's node is tainted
        `karpenter.sh/disrupted:NoSchedule` instead (untainted when the command is abandoned), as Karpenter v1.14.1's
        queue does (`StartCommand` and its failure path, core pkg/controllers/disruption/queue.go)."""
        for name in command.names:
            try:
                node = self.cluster.get(objects.NODE, name)
                if node is None or objects.is_deleting(node):
                    continue
                if is_nodepool(pool_of_labels(objects.labels(node)) or ""):
                    self._taint(node, unschedulable)
                    continue
                if nodepools_only or bool((node.get("spec") or {}).get("unschedulable")) == unschedulable:
                    continue
                self.cluster.patch(objects.NODE, name, {"spec": {"unschedulable": unschedulable}})
            except NotFound:
                continue
            except ClusterError as error:
                done.errors.append(f"could not {'cordon' if unschedulable else 'uncordon'} node {name}, {error}")

    def _taint(self, node: Obj, present: bool) -> None:
        patch = node_info.disrupted_taint_patch(node, present)
        if patch is not None:
            self.cluster.patch(objects.NODE, objects.name(node), patch)
            DEPROVISIONING.info("%s node", "tainted" if present else "untainted",
                                extra=self.fields(node=objects.name(node), taint=f"{wk.TAINT_DISRUPTED}:NoSchedule"))

    def _clear_stale_taints(self, done: Disrupted) -> None:
        """Untaint the NodePool nodes left with `karpenter.sh/disrupted` that no command under way holds and that are
        not being deleted (a restart mid-command): Karpenter v1.14.1's disruption controller does so at every pass
        (core pkg/controllers/disruption/controller.go, `Reconcile`)."""
        now = self.clock()
        if now < self._taint_scan_at:
            return
        self._taint_scan_at = now + FOLLOW_SECONDS
        held = self.disrupting()
        for node in self.state.nodes():
            if node.deleting or node.name in held or not any(t.key == wk.TAINT_DISRUPTED for t in node.taints):
                continue
            if not is_nodepool(node.provisioner or ""):
                continue
            try:
                self._taint(node.obj, False)
            except NotFound:
                continue
            except ClusterError as error:
                done.errors.append(f"could not untaint node {node.name}, {error}")

    def _record(self, decision: Decision) -> None:
        """Karpenter's metrics of a decision."""
        metrics = self.metrics
        if decision.provisioners:  # v0.31's names for the Provisioners' nodes
            for method, count in decision.eligible.items():
                metrics.deprovisioning_eligible.labels(method).set(count)
            for method, seconds in decision.evaluated.items():
                metrics.deprovisioning_evaluation.labels(method).observe(seconds)
        for kind in decision.timeouts:
            metrics.deprovisioning_timeouts.labels(kind).inc()
        self._record_v1(decision)
        for (nodepool, reason), (allowed, disrupting) in sorted(decision.budgets.items()):
            metrics.nodepool_allowed_disruptions.labels(nodepool, reason).set(allowed)
            metrics.nodepool_nodes_consuming_budgets.labels(nodepool, reason).set(disrupting)
        for move in decision.moves:  # v1.14.1's `ApproveCommand` / `EmitMultiNodeEvents`
            self._record_move(move)

    def _count_failed_validation(self, command: Command, verdict: Recheck) -> None:
        """Karpenter v1.14.1's `karpenter_voluntary_disruption_failed_validations_total` for a NodePools' command
        (core pkg/controllers/disruption/validation.go): a consolidation's validation counts all its candidates when
        one is no longer a candidate (`ConsolidationValidator.validateCandidates`); emptiness's when none still is
        (`EmptinessValidator`, which acts on those left: this controller decides again instead, docs/reconcile.md).
        A command that fails on its simulation is not counted, as v1.14.1's `validateCommand` counts none."""
        if not verdict.stale or not all(is_nodepool(c.provisioner) for c in command.candidates):
            return
        if command.stage == EMPTY and verdict.stale < len(command.candidates):
            return
        self.metrics.voluntary_disruption_failed_validations.labels(command.consolidation_type).inc(
            len(command.candidates)
        )

    def _record_v1(self, decision: Decision) -> None:
        """Karpenter v1.14.1's figures of a decision over NodePools' nodes (core pkg/controllers/disruption/
        controller.go `disrupt`, metrics.go): the timeouts' two series from the first (its `init` adds 0 to each)."""
        metrics = self.metrics
        if not (decision.v1_eligible or decision.v1_evaluated):
            return
        for kind in V1_CONSOLIDATION_TYPES:
            metrics.voluntary_disruption_timeouts.labels(kind)
        for reason, count in decision.v1_eligible.items():
            metrics.voluntary_disruption_eligible.labels(reason).set(count)
        for (reason, kind), seconds in decision.v1_evaluated.items():
            metrics.voluntary_disruption_evaluation.labels(reason, kind).observe(seconds)
        for kind in decision.v1_timeouts:
            metrics.voluntary_disruption_timeouts.labels(kind).inc()

    def _record_move(self, move: Move) -> None:
        """A scored consolidation move's metrics and, approved, its `ConsolidationApproved` Events."""
        scores = {score.pool: score for score in move.scores}
        for key, policy in move.pools:
            score, pool = scores.get(key), pool_name(key)  # the NodePool's name, not its constraint set's key
            decision = "rejected" if not move.approved or (score is not None and not score.approved) else "approved"
            if move.stage == MULTI_NODE:
                decision = "approved" if move.approved else "rejected"
            self.metrics.consolidation_moves.labels(decision, pool, policy).inc()
            if score is None:
                continue
            pool_decision = "approved" if score.approved else "rejected"
            self.metrics.consolidation_score.labels(pool_decision, pool, policy).observe(score.score)
            if not score.approved:
                continue
            if move.stage == MULTI_NODE:  # on the NodePool (the state keeps its name, not its object)
                reference = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool}}
                self.events.publish(events.consolidation_approved(reference, score.message()))
                continue
            for name in move.names:
                node = self.state.node(name)
                if node is None:
                    continue
                self.events.publish(events.consolidation_approved(node.obj, score.message()))
                claim_name = claim_of_node(node.obj)
                claim = self.state.claim(claim_name) if claim_name is not None else None
                if claim is not None:
                    self.events.publish(events.consolidation_approved(claim.obj, score.message()))

    def _log_blocked(self, blocked: dict[str, str]) -> None:
        for name, why in sorted(blocked.items()):
            if self._told.get(name) != why:
                DEPROVISIONING.info("node %s is not disrupted: %s", name, why, extra=self.fields(node=name))
            node = self.state.node(name)
            if node is not None:  # Karpenter's Events, each deduped as its recorder does
                prefix = f"{CONSOLIDATION}: "
                self.events.publish(
                    events.unconsolidatable(node.obj, why.removeprefix(prefix)) if why.startswith(prefix)
                    else events.deprovisioning_blocked(node.obj, why)
                )
        self._told = dict(blocked)


def _sooner(due: float | None, other: float) -> float:
    return other if due is None else min(due, other)


__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_REPLACEMENT_TIMEOUT",
    "DEFAULT_VALIDATION",
    "FOLLOW_SECONDS",
    "Deprovisioner",
    "LaunchReplacements",
]
