"""What each workload (`namespace/Kind/name`: a Deployment, StatefulSet, Job, DaemonSet… or a bare pod) costs a
month before the rollout, at its own peak and after — the fleet's cost (`commands.plan.cost`) split among the pods.

The attribution rule: a node's $/month is shared by the pods bound to it (DaemonSet pods included), each by its
requests — the mean of its share of the CPU and of the memory the node's pods request (a resource none of them
requests is left out of the mean; a node whose pods request nothing splits evenly). A node without pods is
attributed to no workload. A wave's replacements are shared the same way by the pods the wave moves (the DaemonSet
pods they will run are not in the snapshot); a pod left pending costs nothing after. The timeline is the fleet
cost's (`wave_moments`): a workload's peak is the most it costs at any moment of the rollout, its old node and its
new one side by side when a wave replaces first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal

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


def workload_costs(catalog: Catalog, fleet: Fleet, rollout: Rollout) -> list[WorkloadCost]:
    """Each workload's cost before, at its peak and after `rollout`, most expensive before first (then by name)."""
    running: defaultdict[str, float] = defaultdict(float)
    on_node: dict[str, dict[str, float]] = {}
    for name, node in fleet.nodes.items():
        price = monthly(node_price(catalog, node))
        on_node[name] = {w: share * price for w, share in shares(fleet.pods_on.get(name, [])).items()}
        for workload, cost in on_node[name].items():
            running[workload] += cost
    before = dict(running)
    peak = dict(running)
    pending = {p.pod for p in rollout.pending}
    # (seconds from the first wave, 0 = goes / 1 = comes, workload, $/month): at a tie, going first
    changes: list[tuple[float, int, str, float]] = []
    first = rollout.waves[0].start if rollout.waves else None
    for wave in rollout.waves:
        comes, goes = wave_moments(wave, first or wave.start)
        moved = [p for n in wave.nodes for p in fleet.moved_pods(n) if p.key not in pending]
        launched = sum(monthly(r.price) for r in wave.replacements)
        changes += [(comes, 1, w, share * launched) for w, share in shares(moved).items()]
        changes += [(goes, 0, w, -cost) for n in wave.nodes for w, cost in on_node.get(n, {}).items()]
    changes.sort(key=lambda c: (c[0], c[1]))
    for index, (moment, _, workload, change) in enumerate(changes):
        running[workload] += change
        if index + 1 == len(changes) or changes[index + 1][0] != moment:  # every change of this moment made
            for name in {c[2] for c in changes[_first_of(changes, index):index + 1]}:
                peak[name] = max(peak.get(name, 0.0), running[name])
    rows = [WorkloadCost(w, before.get(w, 0.0), peak.get(w, 0.0), max(running[w], 0.0)) for w in running]
    return sorted(rows, key=lambda r: (-r.before, -r.after, r.workload))


def _first_of(changes: Sequence[tuple[float, int, str, float]], index: int) -> int:
    """The index of the first change at the moment of `changes[index]`."""
    moment = changes[index][0]
    while index > 0 and changes[index - 1][0] == moment:
        index -= 1
    return index
