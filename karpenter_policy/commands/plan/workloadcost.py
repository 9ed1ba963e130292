"""What each workload (`namespace/Kind/name`: a Deployment, StatefulSet, Job, DaemonSet… or a bare pod) costs a
month before the rollout, at its own peak and after — the fleet's cost (`commands.plan.cost`) split among the pods.

The attribution rule: a node's $/month is shared by the pods bound to it (DaemonSet pods included), each by its
requests — the mean of its share of the CPU and of the memory the node's pods request (a resource none of them
requests is left out of the mean; a node whose pods request nothing splits evenly). A node without pods is
attributed to no workload. A pod a wave moves onto a node with room takes its share of that node (the node's other
pods pay less); a wave's replacements are shared the same way by the pods they take (the DaemonSet pods they will
run are not in the snapshot); a pod left pending costs nothing after. The timeline is the fleet
cost's (`wave_moments`): a workload's peak is the most it costs at any moment of the rollout, its old node and its
new one side by side when a wave replaces first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import partial

from karpenter_policy.catalog import Catalog
from karpenter_policy.commands.plan.cost import WorkloadCost, monthly, node_price, wave_moments
from karpenter_policy.commands.plan.fleet import Fleet, FleetPod
from karpenter_policy.commands.plan.waves import Rollout
from karpenter_policy.model.pods import PodSpecError, pod_requests
from karpenter_policy.model.resources import CPU, MEMORY

__all__ = ["workload_costs"]


def _requests(pod: FleetPod) -> tuple[Decimal, Decimal]:
    """The pod's CPU and memory requests (a pod spec the model cannot read requests nothing)."""
    if pod.pod is not None:
        requests = pod.pod.shape.scheduling.resource_requests
    else:
        spec = pod.obj.get("spec")
        try:
            requests = pod_requests(spec) if isinstance(spec, Mapping) else {}
        except PodSpecError:
            requests = {}
    return requests.get(CPU, Decimal(0)), requests.get(MEMORY, Decimal(0))


def shares(pods: Sequence[FleetPod]) -> dict[str, float]:
    """Each workload's share (summing to 1) of what `pods` run on, by the rule of the module docstring."""
    if not pods:
        return {}
    asked = [_requests(p) for p in pods]
    totals = [sum((a[i] for a in asked), Decimal(0)) for i in (0, 1)]
    used = [i for i in (0, 1) if totals[i] > 0]
    out: defaultdict[str, float] = defaultdict(float)
    for pod, requests in zip(pods, asked, strict=True):
        weight = (sum(float(requests[i] / totals[i]) for i in used) / len(used)) if used else 1.0 / len(pods)
        out[pod.workload] += weight
    return dict(out)


class _Shares:
    """The running cost of each workload while nodes take pods, come and go: each node's $/month shared by its pods
    (re-shared whenever pods join it)."""

    def __init__(self) -> None:
        self.running: defaultdict[str, float] = defaultdict(float)
        self._pods: dict[str, list[FleetPod]] = {}
        self._price: dict[str, float] = {}
        self._share: dict[str, dict[str, float]] = {}

    def _drop(self, node: str) -> set[str]:
        dropped = self._share.pop(node, {})
        for workload, cost in dropped.items():
            self.running[workload] -= cost
        return set(dropped)

    def join(self, node: str, pods: Sequence[FleetPod], price: float | None = None) -> set[str]:
        """`pods` join `node` (a new node: at `price`); the workloads whose cost changed."""
        touched = self._drop(node)
        self._pods[node] = self._pods.get(node, []) + list(pods)
        if price is not None or node not in self._price:
            self._price[node] = price or 0.0
        self._share[node] = {w: share * self._price[node] for w, share in shares(self._pods[node]).items()}
        for workload, cost in self._share[node].items():
            self.running[workload] += cost
        return touched | set(self._share[node])

    def go(self, node: str) -> set[str]:
        self._pods.pop(node, None)
        return self._drop(node)


def workload_costs(catalog: Catalog, fleet: Fleet, rollout: Rollout) -> list[WorkloadCost]:
    """Each workload's cost before, at its peak and after `rollout`, most expensive before first (then by name)."""
    state = _Shares()
    for name, node in fleet.nodes.items():
        state.join(name, fleet.pods_on.get(name, []), monthly(node_price(catalog, node)))
    before = {w: c for w, c in state.running.items()}
    peak = dict(before)
    # (seconds from the first wave, 0 = goes / 1 = comes, order, what happens): at a tie, going first
    changes: list[tuple[float, int, int, Callable[[], set[str]]]] = []
    first = rollout.waves[0].start if rollout.waves else None
    for wave in rollout.waves:
        comes, goes = wave_moments(wave, first or wave.start)
        landings = wave.landings or []
        prices = {landing.node: monthly(landing.replacement.price) for landing in landings
                  if landing.replacement is not None}
        for landing in landings:
            changes.append((comes, 1, len(changes), partial(state.join, landing.node, landing.pods,
                                                            prices.get(landing.node))))
        for name in wave.nodes:
            changes.append((goes, 0, len(changes), partial(state.go, name)))
    changes.sort(key=lambda c: (c[0], c[1], c[2]))
    touched: set[str] = set()
    for index, (moment, _, _, change) in enumerate(changes):
        touched |= change()
        if index + 1 == len(changes) or changes[index + 1][0] != moment:  # every change of this moment made
            for name in touched:
                peak[name] = max(peak.get(name, 0.0), state.running[name])
            touched = set()
    rows = [WorkloadCost(w, before.get(w, 0.0), peak.get(w, 0.0), max(state.running[w], 0.0))
            for w in state.running]
    return sorted(rows, key=lambda r: (-r.before, -r.after, r.workload))


def _first_of(changes: Sequence[tuple[float, int, str, float]], index: int) -> int:
    """The index of the first change at the moment of `changes[index]`."""
    moment = changes[index][0]
    while index > 0 and changes[index - 1][0] == moment:
        index -= 1
    return index
