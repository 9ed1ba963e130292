"""Reading the snapshot from a running cluster (`plan --kubeconfig FILE`): the objects `kubectl get
nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json` prints, listed read-only through the cluster
adapter (`kube.client.KubeCluster`: its kubeconfig handling, paging, retries and shape checks), then checked item by
item exactly as a snapshot file's items are (`snapshot.read_objects`): one code path after reading.

What may be missing and what may not:

- Nodes, pods, PodDisruptionBudgets, DaemonSets, PersistentVolumeClaims, PersistentVolumes and StorageClasses (the
  zones of the pods' volumes) must all be read; once they are, a volume kind without objects has none
  (`Snapshot.volumes_listed`). Any failure — 401, 403 (the user may not
  `list` them cluster-wide), an unreachable server, a malformed answer — is an error, and the plan refuses to run
  (exit 2) with a message naming the resource and the RBAC rule it needs: a plan of the nodes that could be read
  would be a plan of the wrong fleet.
- NodeClaims (`karpenter.sh/v1`), Machines (`karpenter.sh/v1alpha5`) and EC2NodeClasses (`karpenter.k8s.aws/v1`,
  for the AMIs their status resolved) are read where their CRD is served — as kubectl tells, by discovery
  (`KubeCluster.served`: the API server refuses a list of an unserved resource with a 403 before it finds it
  missing). Not served (a cluster of Karpenter v0.31 has no NodeClaims, one of v1 no Machines) is "none", and its
  rule is not needed; served but forbidden is an error like the others: the plan of a v1 cluster without its
  NodeClaims would miss every hash and condition Karpenter's drift reads.
- The whole read holds one deadline (`--request-timeout`, 30 s by default, as kubectl's flag of that name bounds a
  request): every discovery, page and retry is cut to what is left of it. The first kind the server does not
  answer (a refused connection, a read that timed out, the deadline run out) ends the read at once, naming the
  server — a server that accepts connections and never answers costs the deadline, not a timeout per kind.

Nothing is written to the cluster, and nothing read is written anywhere.
"""

from __future__ import annotations

import time

from karpenter_policy.commands.plan.snapshot import Problem, Seen, Snapshot, checked_snapshot, read_objects
from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import ClusterError, Malformed, Unavailable
from karpenter_policy.kube.objects import Kind

__all__ = ["CORE_KINDS", "DEFAULT_REQUEST_TIMEOUT", "OPTIONAL_KINDS", "read_cluster"]

#: Seconds the whole read may take (`plan --request-timeout`'s default).
DEFAULT_REQUEST_TIMEOUT = 30.0

#: The kinds every plan needs (each a refusal when it cannot be listed).
CORE_KINDS: tuple[Kind, ...] = (objects.NODE, objects.POD, objects.POD_DISRUPTION_BUDGET, objects.DAEMON_SET,
                                 objects.PERSISTENT_VOLUME_CLAIM, objects.PERSISTENT_VOLUME, objects.STORAGE_CLASS)
#: Karpenter's kinds, read where their CRD is served.
OPTIONAL_KINDS: tuple[Kind, ...] = (objects.NODE_CLAIM, objects.MACHINE, objects.EC2_NODE_CLASS)
_RBAC_HINT = "grant it the read-only ClusterRole of examples/ci/plan-reader-rbac.yaml (docs/plan.md)"


def _rule(kind: Kind) -> str:
    group = kind.group or '""'
    return f"list {kind.plural} (apiGroups: [{group}]) in every namespace" if kind.namespaced else (
        f"list {kind.plural} (apiGroups: [{group}])")


def _refusal(kind: Kind, error: ClusterError, host: str) -> str:
    if error.status == 401:
        return f"listing {kind.plural}: the API server refused the kubeconfig's credentials (401): {error.message}"
    if error.status == 403:
        return (f"listing {kind.plural}: forbidden (403): the kubeconfig's user may not {_rule(kind)}; "
                f"{_RBAC_HINT}")
    if isinstance(error, Malformed):
        return f"listing {kind.plural}: the API server's answer is malformed: {error.message}"
    status = f" ({error.status})" if error.status is not None else ""
    where = "" if host in error.message else f" (API server {host})"
    return f"listing {kind.plural}: failed{status}: {error.message}{where}"


class _Deadline:
    """What is left of the read's one overall timeout (monotonic)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        return self._end - time.monotonic()


def _read_kind(cluster: KubeCluster, kind: Kind, snapshot: Snapshot, seen: Seen, optional: bool,
               deadline: _Deadline) -> bool:
    """Read `kind` into `snapshot`; False when the server did not answer (the read must stop)."""
    source = f"{cluster.host} {kind.plural}"
    try:
        left = deadline.left()
        if left <= 0:
            raise Unavailable(f"no answer from {cluster.host} within --request-timeout {deadline.seconds:g}s")
        if optional and not cluster.served(kind, timeout=left):
            return True  # the CRD is not installed: none of them
        listed = cluster.list(kind, timeout=deadline.left())
    except ClusterError as error:
        if optional and error.status == 404:
            return True  # removed between discovery and the list
        snapshot.problems.append(Problem(cluster.host, None, "error", _refusal(kind, error, cluster.host)))
        return not (isinstance(error, Unavailable) and error.status is None)
    read_objects(listed.items, source, snapshot, seen)
    return True


def read_cluster(kubeconfig: str, context: str | None = None, retries: int = 3,
                 request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> Snapshot:
    """The snapshot of the cluster of `kubeconfig`'s `context` (None: its current one), read within
    `request_timeout` seconds overall; every failure is a :class:`Problem` of severity error, never an exception
    and never "no objects"."""
    snapshot = Snapshot()
    try:
        cluster = KubeCluster.from_kubeconfig(kubeconfig, context, retries=retries)
    except ClusterError as error:
        snapshot.problems.append(Problem(kubeconfig, None, "error", f"cannot connect: {error.message}"))
        return snapshot
    seen: Seen = {}
    deadline = _Deadline(request_timeout)
    try:
        for kind in CORE_KINDS + OPTIONAL_KINDS:
            if not _read_kind(cluster, kind, snapshot, seen, kind in OPTIONAL_KINDS, deadline):
                break
    finally:
        cluster.close()
    snapshot.volumes_listed = not snapshot.errors  # every volume kind listed (any failure is an error)
    return checked_snapshot(snapshot)
