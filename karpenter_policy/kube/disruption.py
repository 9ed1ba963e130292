"""PodDisruptionBudget arithmetic and the Eviction subresource's verdict.

A real cluster's disruption controller keeps ``status.disruptionsAllowed`` up to date and the API server
checks it on each eviction. Clusters without that controller (the in-memory one, the test API emulator)
compute it here from the pods a budget selects, the same way: healthy pods are Running and Ready and not
being deleted; ``minAvailable`` and ``maxUnavailable`` (an int or a percentage, rounded up) give the
healthy count to keep. The expected pod count is the number of selected pods, or the budget's
``status.expectedPods`` when larger (it stands for the owning controller's scale, which bare pods lack).
The reconciler can call :func:`disruption_budget` too, to plan drains that respect the budgets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.model.selectors import NOTHING, LabelSelector, SelectorError, parse_selector

Obj = objects.Obj



@dataclass(frozen=True)
class Budget:
    """What a PodDisruptionBudget allows right now."""

    expected: int
    healthy: int
    desired_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        return max(0, self.healthy - self.desired_healthy)


@dataclass(frozen=True)
class EvictionVerdict:
    allowed: bool
    message: str = ""
    budget_name: str = ""
    status: int = 429  # the HTTP status of a refusal: 429 for a budget, 500 for a pod two budgets cover


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_healthy(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Running" and is_ready(pod) and not objects.is_deleting(pod)


def evicts_unhealthy(pdb: Obj, pod: Obj) -> bool:
    """Whether the budget lets the pod go whatever it allows: the pod is not healthy and the budget's
    ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow`` (the Eviction API's rule, which Karpenter's deprovisioning
    applies to its candidates too)."""
    policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
    return policy == "AlwaysAllow" and not is_healthy(pod)


def fully_blocking(pdb: Obj) -> bool:
    """Whether the budget never lets one of its pods go: ``maxUnavailable`` 0 or "0%", or ``minAvailable`` "100%"
    (Karpenter v1.14.1's `isFullyBlocking`, core pkg/utils/pdb/pdb.go `newPdb`; an int ``minAvailable`` is not)."""
    spec = pdb.get("spec")
    if not isinstance(spec, dict):
        return False
    unavailable, available = spec.get("maxUnavailable"), spec.get("minAvailable")
    return (
        (isinstance(unavailable, int) and not isinstance(unavailable, bool) and unavailable == 0)
        or unavailable == "0%"
        or available == "100%"
    )


def budget_selector(pdb: Obj) -> LabelSelector:
    """The budget's selector: an absent one selects nothing, an empty one every pod (policy/v1); a malformed one
    (an unknown operator, …) selects nothing, as the eviction subresource skips a budget whose selector
    `metav1.LabelSelectorAsSelector` refuses."""
    try:
        return parse_selector((pdb.get("spec") or {}).get("selector"))
    except SelectorError:
        return NOTHING


def selects(pdb: Obj, pod: Obj, selector: LabelSelector | None = None) -> bool:
    """Whether the budget covers the pod: same namespace and its selector matches the pod's labels."""
    same_namespace = objects.namespace(pdb) == objects.namespace(pod)
    return same_namespace and (budget_selector(pdb) if selector is None else selector).matches(objects.labels(pod))


#: a pod's namespace and its labels, sorted: a budget selects every pod of a group or none
PodGroup = tuple[str | None, tuple[tuple[str, str], ...]]


def pod_group(pod: Obj) -> PodGroup:
    """The pod's :data:`PodGroup`."""
    return objects.namespace(pod), tuple(sorted(objects.labels(pod).items()))


def disruption_budgets(pdbs: Sequence[Obj], pods: Iterable[Obj]) -> list[Budget]:
    """Each budget of `pdbs` over `pods`, as :func:`disruption_budget` computes it, with the pods grouped first by
    namespace and labels (:func:`pod_group`), so that a selector is matched once per group, not once per pod:
    linear in the pods, not in pods × budgets (a disruption decision computes every budget over every pod of the
    cluster)."""
    groups: dict[PodGroup, list[Obj]] = {}
    for pod in pods:
        groups.setdefault(pod_group(pod), []).append(pod)
    out = []
    for pdb in pdbs:
        selector, namespace = budget_selector(pdb), objects.namespace(pdb)
        members = [pod for (group, labels), grouped in groups.items()
                   if group == namespace and selector.matches(dict(labels)) for pod in grouped]
        out.append(_budget(pdb, members))
    return out


def scaled_value(value: int | str, total: int) -> int:
    """An IntOrString against a total: an int as is, a percentage rounded up (as the controller does)."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def disruption_budget(pdb: Obj, pods: Iterable[Obj]) -> Budget:
    """Compute the budget over ``pods`` (any pods: those the budget does not select are skipped)."""
    selector = budget_selector(pdb)
    return _budget(pdb, [pod for pod in pods if selects(pdb, pod, selector)])


def _budget(pdb: Obj, members: Iterable[Obj]) -> Budget:
    """The budget over `members`, pods it selects (those finished left out)."""
    selected = [pod for pod in members if counted(pod)]
    return budget_of(pdb, len(selected), sum(1 for pod in selected if is_healthy(pod)))


def counted(pod: Obj) -> bool:
    """Whether a budget that selects the pod counts it: every pod but a finished one."""
    return (pod.get("status") or {}).get("phase") not in wk.TERMINAL_PHASES


def budget_of(pdb: Obj, selected: int, healthy: int) -> Budget:
    """The budget given how many of the pods it selects are :func:`counted`, and how many of those are healthy."""
    spec: dict[str, Any] = pdb.get("spec") or {}
    expected = max(selected, int((pdb.get("status") or {}).get("expectedPods") or 0))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - scaled_value(spec["maxUnavailable"], expected))
    else:
        desired = scaled_value(spec.get("minAvailable", 1), expected)
    return Budget(expected=expected, healthy=healthy, desired_healthy=desired)


def eviction_verdict(pod: Obj, pdbs: Iterable[Obj], pods: Iterable[Obj]) -> EvictionVerdict:
    """Whether the Eviction subresource lets ``pod`` go, given the budgets and pods of its namespace.

    Pods that are Pending, finished or already being deleted are evicted regardless of budgets, as on a
    real server; a pod covered by two budgets cannot be evicted (the server refuses with a 500).
    """
    phase = (pod.get("status") or {}).get("phase")
    if phase in wk.TERMINAL_PHASES or phase == "Pending" or objects.is_deleting(pod):
        return EvictionVerdict(True)
    covering = [pdb for pdb in pdbs if selects(pdb, pod)]
    if not covering:
        return EvictionVerdict(True)
    if len(covering) > 1:
        names = ", ".join(sorted(objects.name(pdb) for pdb in covering))
        message = (
            f"This pod has more than one PodDisruptionBudget ({names}), "
            "which the eviction subresource does not support."
        )
        return EvictionVerdict(False, message, status=500)
    pdb = covering[0]
    budget = disruption_budget(pdb, pods)
    if is_healthy(pod):
        allowed = budget.disruptions_allowed > 0
    else:
        allowed = evicts_unhealthy(pdb, pod) or budget.healthy >= budget.desired_healthy
    message = "" if allowed else (
        f"Cannot evict pod as it would violate the pod's disruption budget {objects.name(pdb)} "
        f"(needs {budget.desired_healthy} healthy, has {budget.healthy})."
    )
    return EvictionVerdict(allowed, message, objects.name(pdb))
