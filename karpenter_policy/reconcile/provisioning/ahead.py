"""Planning a batch ahead, while its window is open and quiet, so that the pass closing it can launch at once.

A batch window closes `batch_idle` seconds after the last pod arrived. Once it has been quiet for a moment
(:data:`QUIET`, or half the idle time when that is shorter: a burst is probably over), the controller plans the
window's pods. When the window closes, the plan launches without planning again if nothing it was made from has
changed since, and the constraint sets are the same:

* nothing at all changed (the same :attr:`SchedulingInputs.version`): it is exactly the plan the closing pass would
  make;
* or only bound pods changed (churn: a bound pod deleted, a replacement created bound, status updates) or nodes
  sent status heartbeats — the same :attr:`SchedulingInputs.structure`: the same pending pods, nodes as read,
  launches in flight, DaemonSets and namespaces — and the plan cannot have been changed by them: no pending pod
  has topology terms (a bound pod's labels count in its groups), no pod it places on a node has host ports, and
  every node it places pods on still has room for them as the state shows it now. A cluster whose pods come and
  go all the time (hundreds of replacements a second) would otherwise never keep a plan; Karpenter's own
  scheduling reads a state that lags the cluster by as much.

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
from karpenter_policy.scheduling import Plan
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
        """Whether the closing pass may use it: nothing it was made from has changed, or only bound pods did and
        not in a way that changes the plan (see the module docstring)."""
        if self.loaded is not loaded:
            return False
        if self.inputs.version == inputs.version:
            return True
        if self.inputs.structure != inputs.structure:
            return False
        if any(not pod.shape.topology.empty for pod in self.inputs.pending):
            return False
        nodes = {node.name: node for node in inputs.existing}
        for name, pods in self.plan.existing.items():
            node = nodes.get(name)
            if node is None or any(pod.shape.host_ports or pod.shape.extended for pod in pods):
                return False
            requests = node.requests
            for pod in pods:
                requests = add(requests, pod.requests)
            if not fits(requests, node.allocatable):
                return False
        return True


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
