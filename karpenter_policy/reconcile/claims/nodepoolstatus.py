"""A NodePool's `NodeRegistrationHealthy` status condition, as Karpenter v1.14.1 keeps it (design:
designs/noderegistrationhealthy-status-condition.md; core pkg/controllers/nodepool/registrationhealth/controller.go,
pkg/controllers/nodeclaim/lifecycle/liveness.go and registration.go `updateNodePoolRegistrationHealth`), written to
the NodePool's `/status` in the cluster.

- **Unknown** (`observe`, the registrationhealth controller's `Reconcile`): a NodePool whose EC2NodeClass (its
  `nodeClassRef`, of group `karpenter.k8s.aws`, kind `EC2NodeClass`) is in the cluster gets the condition Unknown
  when it has none, when its `metadata.generation` is not the condition's `observedGeneration` (its spec changed),
  or when its class's generation is not its `status.nodeClassObservedGeneration` (the class changed); the results
  recorded for it are forgotten. `status.nodeClassObservedGeneration` is then the class's generation. A NodePool
  without its class, or whose class is of another kind, is left alone. With no results recorded yet (a restart),
  the condition read back stands for them (True: one success; False: two failures).
- **False** (`failed`, liveness): a NodeClaim of the NodePool that did not launch or register in time is a failure;
  once the recorded results with it are unhealthy (`health`: two failures among the last four) and the condition is
  not False already, it is set False — reason `RegistrationFailed`, message `Failed to register node` when the
  claim had launched, else the claim's `Launched` reason and message.
- **True** (`registered`, registration): a NodeClaim that registered is a success; once the results with it are
  healthy, the condition is set True (reason `NodeRegistrationHealthy`).

Only a NodeClaim owned by the NodePool of its `karpenter.sh/nodepool` label (an ownerReference with the NodePool's
uid) counts: a claim of a NodePool since deleted and recreated does not. Each write is a read of the NodePool, then
an update of `/status` with its resourceVersion (v1.14.1's optimistic lock), retried on a conflict. A NodePool not in
the cluster (or a cluster that does not serve NodePools) is left alone; a write the API refuses, one still
conflicting after retries, and one the API stored without the field (a NodePool CRD older than v1.14.1's prunes it)
are logged once per NodePool and reason and counted (`karpenter_policy_nodepool_status_failures_total{reason}`),
never raised: the controller goes on, and the next result or change writes again.

`observe` runs for every NodePool of the constraint sets in force when they change (compile writes the sets and the
NodePool manifests together) and for a NodePool, or every NodePool, when it or an EC2NodeClass changes in the cluster
(the state's watch of them: provisioning's listener), as v1.14.1 runs its controllers on each NodePool or class event.
The same read-and-write sets the NodePool's readiness (`readiness`: ValidationSucceeded, NodeClassReady, Ready) and
its `status.resources` and `status.nodes` (`counter`; provisioning observes a NodePool again when they change), and
remembers its readiness: a NodePool of the cluster that is not Ready, or is being deleted, is `not_ready` —
provisioning leaves its constraint set out, as v1.14.1's provisioner skips it. `observe` then runs the hash
controllers on the NodePool and its EC2NodeClass (`hashes`: their hash annotations, and the NodeClaims re-stamped
after a hash-version bump). A NodePool known True is not read again for a success that leaves it True.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, Conflict, NotFound
from karpenter_policy.kube.objects import EC2_NODE_CLASS, NODE_POOL, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims import conditions, counter, hashes, readiness
from karpenter_policy.reconcile.claims.health import HealthState, Status
from karpenter_policy.reconcile.claims.readiness import Verdict
from karpenter_policy.reconcile.metrics import Metrics

NODEPOOL = logs.logger("nodepool")
NODE_REGISTRATION_HEALTHY: Final = "NodeRegistrationHealthy"
#: The reason and message of False for a claim that launched and did not register (liveness.go).
REGISTRATION_FAILED: Final = "RegistrationFailed"
REGISTRATION_FAILED_MESSAGE: Final = "Failed to register node"
#: Conflicting writes of one NodePool's status are tried this many times.
CONFLICT_RETRIES: Final = 3
#: Reasons of `karpenter_policy_nodepool_status_failures_total`.
REFUSED, CONFLICT, PRUNED = "refused", "conflict", "pruned"

Change = Callable[[Obj], bool]
#: The EC2NodeClass's Ready, from the class (`readiness.class_ready` of what the cloud resolves of it).
ClassReady = Callable[[Obj], Verdict]
#: A NodePool's `status.resources` now (`counter.resources`), by its name; None: not known (nothing written).
Counts = Callable[[str], dict[str, str] | None]
#: The static-drift hash annotations of a NodePool's nodes as its set runs (`statichash`), by name; None: not known.
Hashes = Callable[[str], dict[str, str] | None]
#: The gate of a NodePool being deleted.
TERMINATING: Final = Verdict("False", "NodePoolTerminating", "NodePool is being deleted")


def _always_ready(_: Obj) -> Verdict:
    return Verdict("True", readiness.READY)


def _uncounted(_: str) -> dict[str, str] | None:
    return None


def _status(obj: Obj) -> dict[str, Any]:
    """The object's status, {} when it has none or one of another shape (what the API answers is not trusted)."""
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def condition_of(nodepool: Obj) -> dict[str, Any] | None:
    """The NodePool's NodeRegistrationHealthy condition (None: it has none)."""
    found = _status(nodepool).get("conditions")
    for condition in found if isinstance(found, list) else ():
        if isinstance(condition, dict) and condition.get("type") == NODE_REGISTRATION_HEALTHY:
            return condition
    return None


def _generation(obj: Obj) -> int:
    value = objects.metadata(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def set_registration_health(nodepool: Obj, status: str, reason: str, message: str, now: dt.datetime) -> bool:
    """Set the NodePool's condition in place (observedGeneration its generation); whether anything changed."""
    state = nodepool["status"] = _status(nodepool)
    found = state.get("conditions")
    kept = [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []
    changed = conditions.set_condition(kept, NODE_REGISTRATION_HEALTHY, status, reason, message, now,
                                       _generation(nodepool))
    state["conditions"] = kept
    return changed


def owner_uid(claim: Obj) -> str:
    """The uid of the NodePool a NodeClaim names as owner ("" when it names none)."""
    references = objects.metadata(claim).get("ownerReferences")
    for reference in references if isinstance(references, list) else ():
        if isinstance(reference, dict) and reference.get("kind") == NODE_POOL.kind and reference.get("uid"):
            return str(reference["uid"])
    return ""


def failure_reason(claim: Obj) -> tuple[str, str]:
    """False's reason and message for a claim that did not register (see the module docstring)."""
    found = _status(claim).get("conditions")
    launched = next((c for c in found if isinstance(c, dict) and c.get("type") == conditions.LAUNCHED), None) \
        if isinstance(found, list) else None
    if launched is None:
        return conditions.AWAITING, conditions.AWAITING_MESSAGE
    if launched.get("status") == "True":
        return REGISTRATION_FAILED, REGISTRATION_FAILED_MESSAGE
    return str(launched.get("reason") or ""), str(launched.get("message") or "")


class RegistrationHealth:
    """See the module docstring. `fields` makes a log line's extra (the controller's `Context.fields`)."""

    def __init__(
        self,
        cluster: Cluster,
        wall_clock: Callable[[], dt.datetime],
        fields: Callable[..., dict[str, object]],
        metrics: Metrics,
        class_ready: ClassReady = _always_ready,
        counts: Counts = _uncounted,
        hashes: Hashes = _uncounted,
    ) -> None:
        self.cluster = cluster
        self.class_ready = class_ready
        self.counts = counts
        self.hashes = hashes
        self.wall_clock = wall_clock
        self.fields = fields
        self.metrics = metrics
        self.state = HealthState()
        self._true: set[str] = set()  # uids of the NodePools this controller last saw or left True
        self._told: set[tuple[str, str]] = set()
        self._not_ready: dict[str, Verdict] = {}  # NodePools of the cluster not Ready (or being deleted), by name
        self._lock = threading.Lock()

    # --- the registrationhealth controller ------------------------------------------------------------------

    def observe_all(self, names: Iterable[str]) -> None:
        """`observe` each NodePool named (the NodePools of the constraint sets in force, when they change)."""
        for name in sorted(set(names)):
            self.observe(name)

    def observe(self, name: str) -> None:
        """Set the NodePool's readiness and counts, reset its NodeRegistrationHealthy to Unknown when it has none or
        its spec or class changed, and annotate its hash if it has none (see the module docstring)."""
        self._write(name, self._reconcile)
        self._annotate(name)

    def _annotate(self, name: str) -> None:
        """The hash controllers (`hashes`) on a managed NodePool of the cluster and on its EC2NodeClass: their hash
        annotations, and the NodeClaims re-stamped after a hash-version bump; an error logged once and counted."""
        wanted = self.hashes(name)
        if not wanted:
            return
        try:
            nodepool = self.cluster.get(NODE_POOL, name)
            class_name = readiness.node_class_name(nodepool) if nodepool is not None else None
            if nodepool is None or class_name is None:
                return
            errors = hashes.annotate_nodepool(self.cluster, nodepool, wanted)
            node_class = self.cluster.get(EC2_NODE_CLASS, class_name)
            if node_class is not None:
                errors += hashes.annotate_node_class(self.cluster, node_class, wanted)
        except ClusterError as failure:
            errors = [f"could not be read, {failure}"]
        for error in errors:
            self._failure(name, REFUSED, f"hash controller: {error}")

    def not_ready(self) -> dict[str, Verdict]:
        """The NodePools of the cluster last seen not Ready or being deleted, by name: why (their Ready)."""
        with self._lock:
            return dict(self._not_ready)

    def _gate(self, name: str, verdict: Verdict | None) -> None:
        with self._lock:
            if verdict is None or verdict.true:
                self._not_ready.pop(name, None)
            else:
                self._not_ready[name] = verdict

    def _reconcile(self, nodepool: Obj) -> bool:
        class_name = readiness.node_class_name(nodepool)
        if class_name is None:
            self._gate(objects.name(nodepool), None)
            return False  # not a class this controller manages
        node_class = self.cluster.get(EC2_NODE_CLASS, class_name)
        changed = readiness.set_readiness(
            nodepool, node_class, self.class_ready(node_class) if node_class is not None else readiness.UNKNOWN,
            self.wall_clock(),
        )
        deleting = bool(objects.metadata(nodepool).get("deletionTimestamp"))
        self._gate(objects.name(nodepool), TERMINATING if deleting else readiness.ready_of(nodepool))
        counted = self.counts(objects.name(nodepool))
        if counted is not None:
            changed |= counter.set_counts(nodepool, counted)
        if node_class is None:
            return changed
        uid = objects.uid(nodepool)
        condition = condition_of(nodepool)
        if self.state.status(uid) is Status.UNKNOWN and condition is not None:
            if condition.get("status") == "True":
                self.state.set_status(uid, Status.HEALTHY)
            elif condition.get("status") == "False":
                self.state.set_status(uid, Status.UNHEALTHY)
        status = nodepool["status"] = _status(nodepool)
        class_generation = _generation(node_class)
        if (
            condition is None
            or status.get("nodeClassObservedGeneration") != class_generation
            or condition.get("observedGeneration") != _generation(nodepool)
        ):
            changed |= set_registration_health(
                nodepool, "Unknown", conditions.AWAITING, conditions.AWAITING_MESSAGE, self.wall_clock()
            )
            self.state.set_status(uid, Status.UNKNOWN)
        if status.get("nodeClassObservedGeneration") != class_generation:
            status["nodeClassObservedGeneration"] = class_generation
            changed = True
        return changed

    # --- the NodeClaim lifecycle's results -----------------------------------------------------------------

    def registered(self, claim: Obj) -> None:
        """A NodeClaim registered: a success for its NodePool (True once the results are healthy)."""
        uid = owner_uid(claim)
        if not uid:
            return
        with self._lock:
            known_true = uid in self._true
        if known_true and self.state.dry_run(uid, True) is Status.HEALTHY:
            self.state.update(uid, True)  # it stays True: nothing to read or write
            return

        def healthy(nodepool: Obj) -> bool:
            return self.state.dry_run(uid, True) is Status.HEALTHY and set_registration_health(
                nodepool, "True", NODE_REGISTRATION_HEALTHY, "", self.wall_clock()
            )

        if self._write(objects.labels(claim).get(wk.NODEPOOL, ""), healthy, uid):
            self.state.update(uid, True)

    def failed(self, claim: Obj) -> None:
        """A NodeClaim did not launch or register in time: a failure for its NodePool (False once the results are
        unhealthy)."""
        uid = owner_uid(claim)
        if not uid:
            return
        reason, message = failure_reason(claim)

        def unhealthy(nodepool: Obj) -> bool:
            found = condition_of(nodepool)
            if self.state.dry_run(uid, False) is not Status.UNHEALTHY or (found or {}).get("status") == "False":
                return False
            return set_registration_health(nodepool, "False", reason, message, self.wall_clock())

        if self._write(objects.labels(claim).get(wk.NODEPOOL, ""), unhealthy, uid):
            self.state.update(uid, False)

    # --- writing ---------------------------------------------------------------------------------------------

    def _write(self, name: str, change: Change, owner: str = "") -> bool:
        """Read the NodePool, `change` it, write its status when changed; False when it is not there, is not the
        claim's `owner` (a uid) or could not be read (nothing recorded then). A write that did not take is logged
        and counted (see the module docstring): its result is recorded all the same."""
        if not name:
            return False
        for _ in range(CONFLICT_RETRIES):
            try:
                nodepool = self.cluster.get(NODE_POOL, name)
            except ClusterError as error:
                self._failure(name, REFUSED, f"could not be read, {error}")
                return False
            if nodepool is None and not owner:
                self._gate(name, None)  # not in the cluster: the constraint set is what runs
            if nodepool is None or (owner and objects.uid(nodepool) != owner):
                return False
            try:
                if not change(nodepool):
                    self._remember(nodepool)
                    return True
            except ClusterError as error:  # the EC2NodeClass could not be read
                self._failure(name, REFUSED, f"its EC2NodeClass could not be read, {error}")
                return False
            try:
                stored = self.cluster.update(NODE_POOL, nodepool, subresource="status")
            except Conflict:
                continue
            except NotFound:
                return False
            except ClusterError as error:
                self._failure(name, REFUSED, f"status write refused, {error}")
                return True
            wanted = condition_of(nodepool)
            kept = condition_of(stored)
            ready = readiness.ready_of(nodepool)
            if wanted is not None and (kept is None or kept.get("status") != wanted.get("status")):
                self._failure(name, PRUNED, "the API stored it without status.conditions' NodeRegistrationHealthy")
            else:
                NODEPOOL.info(
                    "NodeRegistrationHealthy %s, Ready %s", (wanted or {}).get("status", "unchanged"),
                    ready.status if ready is not None else "unchanged",
                    extra=self.fields(nodepool=name, reason=(wanted or {}).get("reason", ""),
                                      ready=ready.reason if ready is not None else ""),
                )
            self._remember(stored)
            return True
        self._failure(name, CONFLICT, f"status still conflicting after {CONFLICT_RETRIES} writes")
        return True

    def _remember(self, nodepool: Obj) -> None:
        uid = objects.uid(nodepool)
        with self._lock:
            if (condition_of(nodepool) or {}).get("status") == "True":
                if len(self._true) > 10_000:
                    self._true.clear()
                self._true.add(uid)
            else:
                self._true.discard(uid)

    def _failure(self, name: str, reason: str, message: str) -> None:
        self.metrics.nodepool_status_failures.labels(reason).inc()
        with self._lock:
            first = (name, reason) not in self._told
            if first:
                if len(self._told) > 10_000:
                    self._told.clear()
                self._told.add((name, reason))
        if first:
            NODEPOOL.warning("NodePool %s: status not written: %s", name, message,
                             extra=self.fields(nodepool=name))


__all__ = [
    "NODE_REGISTRATION_HEALTHY", "REGISTRATION_FAILED", "REGISTRATION_FAILED_MESSAGE", "RegistrationHealth",
    "condition_of", "failure_reason", "owner_uid", "set_registration_health",
]
