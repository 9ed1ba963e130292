"""A consolidation command checked again after its wait, as Karpenter v0.31 does (`validation.go`,
`emptymachineconsolidation.go`).

A consolidation is decided on a cluster that may be moving, so it is acted on only when, `consolidation_validation`
seconds (15 s) later, the cluster as it is then still supports the same command:

* every node of the command is still a candidate: not deleted or being deleted, initialized, not nominated for a
  pending pod, no `karpenter.sh/do-not-disrupt` on it, no pod on it with `karpenter.sh/do-not-evict` or
  `karpenter.sh/do-not-disrupt` and none a PodDisruptionBudget keeps, and still consolidatable (its provisioner
  consolidates, no `karpenter.sh/do-not-consolidate`);
* an *empty* command's nodes are all still empty;
* otherwise the same nodes, simulated again with the pods they run now and the pods pending now, still lead to
  the same command: every pod placed; no new node when the command launched none (a pod that arrived needs one);
  one new node when the command launched one (none: capacity appeared and a better command is likely, so decide
  again), whose instance types still include every type the command would launch (a pod added to a node that
  now needs a larger type makes it another command).

What fails is not acted on; the caller decides again (Karpenter goes on to its next deprovisioner).
"""

from __future__ import annotations

from karpenter_policy.reconcile.disruption.decider import EMPTY, Command, Decider, Decision, Inputs


def invalid(decider: Decider, command: Command, inputs: Inputs) -> str:
    """Why `command` no longer holds on `inputs` ("" when it still does); see the module docstring."""
    decision = Decision()
    current = {c.name: c for c in decider.candidates(inputs, decision)}
    candidates = []
    for name in command.names:
        candidate = current.get(name)
        if candidate is None or candidate.eventual:
            return f"node {name} can no longer be disrupted ({decision.blocked.get(name) or 'gone or being deleted'})"
        if not candidate.consolidatable:
            return f"node {name} can no longer be consolidated"
        candidates.append(candidate)
    if command.stage == EMPTY:
        busy = [c.name for c in candidates if not c.empty]
        return f"node {busy[0]} is no longer empty" if busy else ""
    plan = decider.simulate(inputs, candidates)
    unplaceable = decider.unplaceable(inputs, plan, candidates)
    if unplaceable:
        return unplaceable
    if len(plan.claims) > 1:
        return f"its pods would now need {len(plan.claims)} new nodes"
    if not plan.claims:
        return "the replacement is no longer needed (a better command is likely)" if command.replacements else ""
    if not command.replacements:
        return "its pods would now need a new node"
    offered = {o.instance_type for o in plan.claims[0].options}
    missing = sorted({o.instance_type for o in command.replacements[0].options} - offered)
    if missing:
        return f"the replacement could no longer be of type {', '.join(missing[:5])}"
    return ""


__all__ = ["invalid"]
