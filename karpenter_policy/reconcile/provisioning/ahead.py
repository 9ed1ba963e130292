"""Planning a batch ahead, while its window is open and quiet, so that the pass closing it can launch at once.

A batch window closes `batch_idle` seconds after the last pod arrived. Once it has been quiet for a moment
(:data:`QUIET`, or half the idle time when that is shorter: a burst is probably over), the controller plans the
window's pods. When the window closes, the plan launches without planning again if nothing it was made from has
changed since in a way that could make it wrong, and the constraint sets are the same:

* nothing at all changed (the same :attr:`SchedulingInputs.version`): it is exactly the plan the closing pass would
  make;
* or what changed cannot have changed it. A busy cluster never stands still between a plan and a window's close:
  bound pods are replaced (hundreds a second), nodes send heartbeats, and a burst that spans several windows has
  the pods of the earlier window bound onto the launches in flight, their Nodes registered, their kubelets joining
  and the launches settling — all while the next window is open. None of that alone makes it plan again. The plan
  is kept when, at the close:

  - the pending pods are the same, in the same order, with the same specs (a pod added, gone, bound elsewhere or
    changed: planned again);
  - the same nodes are there — the state's nodes not being deleted and the launches in flight, by name (a launch
    in flight whose Node registered keeps its name; a node deleted, a launch dropped, a node or launch that was
    not there: planned again) — so every provisioner uses what it did against its limits;
  - every node it places pods on still has room for them as the state shows it now (what bound pods request, the
    DaemonSet pods still to come), with the labels the pods may have constrained unchanged and no taint it did not
    have (capacity taken by another pod, a node cordoned: planned again);
  - no pending pod has topology terms (a bound pod's labels count in its groups), no pod it places on a node asks
    host ports or extended resources, and nothing it cannot check changed (:func:`~..state.cluster.reshapes`:
    DaemonSets, namespaces, a pod with required anti-affinity).

  Karpenter's own scheduling reads a state that lags the cluster by as much (`state.Cluster` is synced from
  informers, and its provisioner waits for it only to have *seen* the nodes it launched).

The cloud's offerings are those read for the plan, at most a batch window old (the provider skips offerings marked
unavailable since). A new pod makes the plan stale: the next quiet moment plans again.

Planning ahead has no side effects, and takes at most half of the time: after a plan that took t seconds, the
next waits at least t (a trickle of pods could otherwise make every quiet moment a new plan).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from karpenter_policy.reconcile.constraints import Loaded
from karpenter_policy.reconcile.provisioning.batcher import Batcher
from karpenter_policy.reconcile.provisioning.inputs import SchedulingInputs
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.scheduling import ExistingNode, Plan, Pod
from karpenter_policy.scheduling.vectors import add, fits

#: Seconds without a new pod before the window's pods are planned ahead.
QUIET = 0.25


@dataclass(frozen=True, slots=True)
class PlannedAhead:
    """A plan made for an open window: for exactly these inputs and constraint sets, with these templates."""

    inputs: SchedulingInputs
    loaded: Loaded | None
    templates: Templates
    plan: Plan
    trigger: tuple[float, int]  # the window's last trigger (time, count) when it was made

    def fits(self, inputs: SchedulingInputs, loaded: Loaded | None) -> bool:
        """Whether the closing pass may use it: nothing it was made from has changed, or nothing that could change
        it did (see the module docstring)."""
        if self.loaded is not loaded:
            return False
        then = self.inputs
        if then.version == inputs.version:
            return True
        if then.structure != inputs.structure or then.nodes != inputs.nodes:
            return False
        if not _same_pods(then.pending, inputs.pending) or not _same_pods(then.moving, inputs.moving):
            return False
        if any(not pod.shape.topology.empty for pod in then.pending):
            return False
        before = {node.name: node for node in then.existing}
        now = {node.name: node for node in inputs.existing}
        return all(_still_takes(before.get(name), now.get(name), pods) for name, pods in self.plan.existing.items())


def _same_pods(before: list[Pod], now: list[Pod]) -> bool:
    """The same pending pods in the same order, each with the spec it had (the state keeps a pod's shape for as long
    as its spec and labels are unchanged)."""
    return len(before) == len(now) and all(
        a.uid == b.uid and a.shape is b.shape for a, b in zip(before, now, strict=True)
    )


def _still_takes(before: ExistingNode | None, now: ExistingNode | None, pods: list[Pod]) -> bool:
    """The node the plan placed `pods` on still takes them: offered now (it has room for the smallest pending pod),
    no new taint, the labels any of them constrains unchanged, room for them all; none asks host ports or extended
    resources (their checks are not repeated here)."""
    if before is None or now is None:
        return False
    if any(pod.shape.host_ports or pod.shape.extended for pod in pods):
        return False
    if not set(now.taints) <= set(before.taints):
        return False
    changed = {key for key in {*before.labels, *now.labels} if before.labels.get(key) != now.labels.get(key)}
    if changed and any(key in changed for pod in pods for attempt in pod.shape.attempts(False)
                       for key in attempt.requirements):
        return False
    requests = now.requests
    for pod in pods:
        requests = add(requests, pod.requests)
    return fits(requests, now.allocatable)


class PlanAhead:
    """The plan made ahead for the open window, if any, and when the next one may be made."""

    def __init__(self, batcher: Batcher, batch_idle: float, clock: Callable[[], float]) -> None:
        self.batcher = batcher
        self.clock = clock
        self.quiet = min(QUIET, batch_idle / 2)
        self.current: PlannedAhead | None = None
        self._not_before = 0.0

    def due(self) -> float | None:
        """When a plan can be made for the open window (None: no window, or planned since its last trigger)."""
        last = self.batcher.last_trigger()
        if last is None:
            return None
        if self.current is not None and self.current.trigger == last:
            return None
        return max(last[0] + self.quiet, self._not_before)

    def maybe(
        self,
        inputs: Callable[[], SchedulingInputs],
        loaded: Loaded | None,
        templates: Callable[[], Templates],
        plan: Callable[[Templates, SchedulingInputs], Plan],
    ) -> None:
        """Plan now if it is due (see the module docstring); `inputs`, `templates` and `plan` make them as a
        pass would."""
        due = self.due()
        last = self.batcher.last_trigger()
        if due is None or last is None or self.clock() < due:
            return
        seen = inputs()
        if not seen.pending:
            return
        started = self.clock()
        made = templates()
        self.current = PlannedAhead(seen, loaded, made, plan(made, seen), last)
        self._not_before = self.clock() + (self.clock() - started)

    def take(self) -> PlannedAhead | None:
        """The plan made ahead (forgotten: a window is planned ahead once)."""
        current, self.current = self.current, None
        return current


__all__ = ["QUIET", "PlanAhead", "PlannedAhead"]
