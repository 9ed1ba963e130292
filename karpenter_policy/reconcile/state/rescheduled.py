"""Which pods of a node a scheduling simulation places again when the node goes: a disruption candidate's, and a
node being deleted's (a command under way, a node being terminated), which every disruption decision and every
provisioning run schedule beside the pending pods so that the room they will take is not offered twice.

* a Provisioner's node (and any node without the `karpenter.sh/nodepool` label): Karpenter v0.31.1's `GetNodePods`
  (pkg/utils/node/node.go) — not a DaemonSet's nor a static pod's mirror (owned by the Node), not finished, not
  terminating (:func:`movable`);
* a NodePool's node: v1.14.1's `IsCurrentlyReschedulable` (core pkg/utils/pdb/pdb.go, the filter of
  `GetCurrentlyReschedulablePods`, pkg/utils/node/node.go) — `IsReschedulable` (active, or a StatefulSet's pod
  terminating: its successor waits for it; not a DaemonSet's, not a mirror), `IsDisruptable` (no active
  `karpenter.sh/do-not-disrupt`), and no PodDisruptionBudget that never allows an eviction (or two budgets) covering
  it (:func:`currently_reschedulable`; :func:`replaceable` the last two, what disruption asks of an eventual
  candidate's pods).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from karpenter_policy.api.v1.donotdisrupt import do_not_disrupt, start_time
from karpenter_policy.kube import disruption as budgets
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.selectors import LabelSelector
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord

#: The workload whose terminating pods v1.14.1's `IsReschedulable` still places (`IsOwnedByStatefulSet`).
STATEFUL_SET = "StatefulSet"


def movable(pods: Iterable[PodRecord]) -> list[PodRecord]:
    """The pods of a node that would move if it went (Karpenter v0.31.1's `GetNodePods`): not DaemonSets' or static
    (owned by the Node), not finished, not terminating."""
    return [
        p for p in pods
        if not p.daemon and not p.deleting and not p.terminal
        and not (p.owner is not None and p.owner[0] == pod_info.NODE)
    ]


def replaceable(
    pod: PodRecord, pdbs: Sequence[Obj], now: dt.datetime, selectors: Sequence[LabelSelector] | None = None
) -> bool:
    """Whether a place is planned for the pod when its node goes (the half of v1.14.1's `IsCurrentlyReschedulable`
    past `IsReschedulable`): not while its `do-not-disrupt` holds it, nor while a budget that never allows an
    eviction (`fully_blocking`), or two budgets, cover it — Karpenter does not know when such a pod will go, so it
    plans nothing for it. `selectors`: the budgets' selectors, parsed once by a caller that asks of many pods."""
    if do_not_disrupt(pod.annotations, start_time(pod.obj), now).active:
        return False
    parsed = selectors if selectors is not None else [budgets.budget_selector(pdb) for pdb in pdbs]
    covering = [pdb for pdb, selector in zip(pdbs, parsed, strict=True) if budgets.selects(pdb, pod.obj, selector)]
    if len(covering) > 1:  # the Eviction API refuses a pod two budgets cover
        return False
    return not covering or budgets.evicts_unhealthy(covering[0], pod.obj) or not budgets.fully_blocking(covering[0])


def currently_reschedulable(
    pod: PodRecord, pdbs: Sequence[Obj], now: dt.datetime, selectors: Sequence[LabelSelector] | None = None
) -> bool:
    """v1.14.1's `IsCurrentlyReschedulable` (see the module docstring)."""
    stateful = pod.owner is not None and pod.owner[0] == STATEFUL_SET
    active = (not pod.terminal and not pod.deleting) or (stateful and pod.deleting)
    if not active or pod.daemon or (pod.owner is not None and pod.owner[0] == pod_info.NODE):
        return False
    return replaceable(pod, pdbs, now, selectors)


def rescheduled(node: NodeRecord, pods: Iterable[PodRecord], pdbs: Sequence[Obj], now: dt.datetime) -> list[PodRecord]:
    """The pods of a node being deleted that a simulation places again: a NodePool's node's by v1.14.1's rule, any
    other's by v0.31.1's (see the module docstring)."""
    if wk.NODEPOOL in node.labels:
        selectors = [budgets.budget_selector(pdb) for pdb in pdbs]  # once, not once per pod
        return [p for p in pods if currently_reschedulable(p, pdbs, now, selectors)]
    return movable(pods)


__all__ = ["currently_reschedulable", "movable", "replaceable", "rescheduled"]
