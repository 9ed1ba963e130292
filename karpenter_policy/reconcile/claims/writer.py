"""The controller's reads and writes of NodeClaims, through the `Cluster` protocol: create a claim (with its
NodePool as owner when the cluster serves NodePools), write its status conditions, delete it, and remove its
`karpenter.sh/termination` finalizer once its instance is gone (core pkg/controllers/nodeclaim/lifecycle/
controller.go `finalize`: the finalizer goes only when `CloudProvider.Delete` says the instance is not found).

What comes back is not trusted: a claim whose metadata, status or conditions are not of the expected shape is
skipped with a log line (once per claim and problem) and left alone — never an exception out of a controller's
step. A NodePool that cannot be read (not served: its CRD is not installed; unavailable) leaves the claim without an
ownerReference, logged once per NodePool; a cluster that does not serve NodeClaims at all (no CRD) gets none, logged
once — the node is registered all the same.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import AlreadyExists, ClusterError, Conflict, NotFound
from karpenter_policy.kube.objects import NODE_CLAIM, NODE_POOL, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims import conditions
from karpenter_policy.reconcile.claims.objects import nodepool_reference

CLAIMS = logs.logger("nodeclaim")
#: Conflicting writes of one claim's status are retried this many times.
CONFLICT_RETRIES = 3


def claim_problem(claim: Any) -> str | None:
    """Why a NodeClaim read back is not of the shape the controller writes (None: it is)."""
    if not isinstance(claim, dict):
        return "not an object"
    meta = claim.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return "metadata.name is missing"
    finalizers = meta.get("finalizers")
    if finalizers is not None and (not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)):
        return "metadata.finalizers is not a list of strings"
    status = claim.get("status")
    if status is not None and not isinstance(status, dict):
        return "status is not an object"
    found = (status or {}).get("conditions")
    if found is not None and (not isinstance(found, list) or not all(isinstance(c, dict) for c in found)):
        return "status.conditions is not a list of objects"
    return None


class ClaimWriter:
    """See the module docstring. `fields` makes a log line's extra (the controller's `Context.fields`)."""

    def __init__(
        self, cluster: Cluster, wall_clock: Callable[[], dt.datetime], fields: Callable[..., dict[str, object]]
    ) -> None:
        self.cluster = cluster
        self.wall_clock = wall_clock
        self.fields = fields
        self._told: set[tuple[str, str]] = set()

    def _once(self, whom: str, why: str, message: str, *args: object) -> None:
        if (whom, why) not in self._told:
            if len(self._told) > 10_000:
                self._told.clear()
            self._told.add((whom, why))
            CLAIMS.warning(message, *args, extra=self.fields(nodeclaim=whom))

    def read(self, name: str) -> Obj | None:
        """The claim, shape-checked: None when it is gone or of an unexpected shape (logged). Raises ClusterError."""
        claim = self.cluster.get(NODE_CLAIM, name)
        if claim is None:
            return None
        problem = claim_problem(claim)
        if problem is not None:
            self._once(name, problem, "nodeclaim %s skipped: %s", name, problem)
            return None
        return claim

    def _owner(self, nodepool: str) -> dict[str, Any] | None:
        try:
            found = self.cluster.get(NODE_POOL, nodepool)
        except ClusterError as error:
            self._once(nodepool, "nodepool", "NodePool %s could not be read (%s): its nodeclaims have no owner",
                       nodepool, error)
            return None
        if found is None or not objects.uid(found):
            self._once(nodepool, "nodepool", "NodePool %s is not in the cluster: its nodeclaims have no owner",
                       nodepool)
            return None
        return nodepool_reference(found)

    def create(self, claim: Obj, status: dict[str, Any] | None = None) -> Obj | None:
        """Create the claim (owned by its NodePool when readable), then write its status: with Launched True when
        `status` (what the launch resolved) is given, else (a claim written before its launch) the lifecycle
        conditions Unknown; the claim as stored. A claim of that name created before (a retried pass) is taken as
        it is. None when the cluster does not serve NodeClaims (their CRD is not installed: the node goes without
        one, logged once). Raises ClusterError (the caller retries)."""
        nodepool = objects.labels(claim).get(wk.NODEPOOL, "")
        owner = self._owner(nodepool) if nodepool else None
        body = {**claim, "metadata": dict(objects.metadata(claim))}
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        try:
            created = self.cluster.create(NODE_CLAIM, body)
        except NotFound:
            self._once("", "not served", "the cluster does not serve NodeClaims (%s): NodePools' nodes have none",
                       NODE_CLAIM)
            return None
        except AlreadyExists:
            existing = self.read(objects.name(claim))
            if existing is None:
                raise NotFound(f"nodeclaim {objects.name(claim)} exists but cannot be read") from None
            return existing
        now = self.wall_clock()
        if status is None:
            created["status"] = {"conditions": conditions.initial(now)}
        else:
            found = conditions.set_true(conditions.initial(now), conditions.LAUNCHED, now) or []
            created["status"] = {**status, "conditions": found}
        CLAIMS.info("created nodeclaim", extra=self.fields(nodeclaim=objects.name(created), nodepool=nodepool))
        return self.cluster.update(NODE_CLAIM, created, subresource="status")

    def launched(self, name: str, status: dict[str, Any], labels: dict[str, str]) -> bool:
        """Fill a claim written before its launch with what the launch resolved (`PopulateNodeClaimDetails`): the
        instance's labels (the claim's own win), then `status` with Launched True. False when the claim is gone or
        unreadable. Raises ClusterError."""
        claim = self.read(name)
        if claim is None:
            return False
        added = {key: value for key, value in labels.items() if key not in objects.labels(claim)}
        if added:
            try:
                self.cluster.patch(NODE_CLAIM, name, {"metadata": {"labels": added}})
            except NotFound:
                return False
        now = self.wall_clock()

        def fill(found: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            return conditions.set_true(found or conditions.initial(now), conditions.LAUNCHED, now)

        return self._write(name, fill, extra=status)

    def launch_failed(self, name: str, message: str) -> bool:
        """Record a failed launch as v1.14.1's launch.go does: Launched Unknown, reason `LaunchFailed`, the error as
        message. Raises ClusterError."""
        now = self.wall_clock()
        return self._write(name, lambda found: conditions.set_unknown(
            found or conditions.initial(now), conditions.LAUNCHED, conditions.LAUNCH_FAILED, message[:300], now))

    def set_true(
        self, name: str, kind: str, node_name: str | None = None, message: str = "", reason: str = ""
    ) -> bool:
        """Set condition `kind` True on the claim (with `message` and `reason`, else its type as reason; and
        `status.nodeName`); False when the claim is gone, unreadable or already so. Raises ClusterError."""
        return self._write(
            name, lambda found: conditions.set_true(found, kind, self.wall_clock(), message[:300], reason), node_name
        )

    def set_unknown(self, name: str, kind: str, reason: str, message: str | None = None) -> bool:
        """Set condition `kind` Unknown with `reason` and `message` (default: the reason, as v1.14.1's termination
        writes it); False when the claim is gone, unreadable or already so. Raises ClusterError."""
        said = reason if message is None else message
        return self._write(name, lambda found: conditions.set_unknown(found, kind, reason, said, self.wall_clock()))

    def label(self, name: str, labels: dict[str, str]) -> None:
        """Set labels on the claim (a merge patch); gone already is fine. Raises ClusterError."""
        try:
            self.cluster.patch(NODE_CLAIM, name, {"metadata": {"labels": labels}})
        except NotFound:
            return

    def set_false(self, name: str, kind: str, reason: str) -> bool:
        """Set condition `kind` False with `reason` (as message too); as `set_unknown`."""
        return self._write(name, lambda found: conditions.set_false(found, kind, reason, reason, self.wall_clock()))

    def clear(self, name: str, kind: str) -> bool:
        """Remove condition `kind` from the claim; False when it had none (or is gone). Raises ClusterError."""
        return self._write(name, lambda found: conditions.cleared(found, kind))

    def _write(
        self,
        name: str,
        change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
        node_name: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> bool:
        for _ in range(CONFLICT_RETRIES):
            claim = self.read(name)
            if claim is None:
                return False
            status = dict(claim.get("status") or {})
            changed = change(list(status.get("conditions") or []))
            name_changed = node_name is not None and status.get("nodeName") != node_name
            if changed is None and not name_changed and not extra:
                return False
            status.update(extra or {})
            if changed is not None:
                status["conditions"] = changed
            if node_name is not None:
                status["nodeName"] = node_name
            try:
                self.cluster.update(NODE_CLAIM, {**claim, "status": status}, subresource="status")
            except Conflict:
                continue
            except NotFound:
                return False
            return True
        return False

    def annotate(self, name: str, annotations: dict[str, str]) -> None:
        """Add annotations to the claim (a merge patch); gone already is fine. Raises ClusterError."""
        try:
            self.cluster.patch(NODE_CLAIM, name, {"metadata": {"annotations": annotations}})
        except NotFound:
            return

    def delete(self, name: str) -> None:
        """Ask for the claim's deletion (its finalizer keeps it until `release`); gone already is fine."""
        try:
            self.cluster.delete(NODE_CLAIM, name)
        except NotFound:
            return

    def release(self, name: str) -> bool:
        """Remove the termination finalizer from the claim (its instance is gone); True when it is gone or released."""
        claim = self.read(name)
        if claim is None:
            return self.cluster.get(NODE_CLAIM, name) is None
        finalizers = objects.finalizers(claim)
        if wk.TERMINATION_FINALIZER not in finalizers:
            return True
        remaining = [f for f in finalizers if f != wk.TERMINATION_FINALIZER]
        patch = {"metadata": {"finalizers": remaining or None, "resourceVersion": objects.resource_version(claim)}}
        try:
            self.cluster.patch(NODE_CLAIM, name, patch)
        except NotFound:
            return True
        except Conflict:
            return False
        CLAIMS.info("deleted nodeclaim", extra=self.fields(nodeclaim=name))
        return True


__all__ = ["CLAIMS", "ClaimWriter", "claim_problem"]
