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

What fails is not acted on; the caller decides again (Karpenter goes on to its next deprovisioner). The verdict
also says how many of the command's nodes are no longer candidates (`Recheck.stale`), which Karpenter v1.14.1's
`karpenter_voluntary_disruption_failed_validations_total` counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_policy.reconcile.disruption.decider import EMPTY, Candidate, Command, Decider, Decision, Inputs


@dataclass(frozen=True, slots=True)
class Recheck:
    """Why the command no longer holds ("" when it still does), and how many of its nodes are no longer candidates
    of its kind (gone, blocked, no longer consolidatable or, for an empty command, no longer empty): 0 when the
    nodes still are and the command fails on its simulation."""

    why: str
    stale: int = 0


def _stale(candidate: Candidate | None, name: str, decision: Decision) -> str:
    """Why the command's node `name` is no longer a candidate ("" when it still is)."""
    if candidate is None or candidate.eventual:
        return f"node {name} can no longer be disrupted ({decision.blocked.get(name) or 'gone or being deleted'})"
    if not candidate.consolidatable:
        return f"node {name} can no longer be consolidated"
    return ""


def invalid(decider: Decider, command: Command, inputs: Inputs) -> Recheck:
    """Whether `command` still holds on `inputs`; see the module docstring."""
    decision = Decision()
    current = {c.name: c for c in decider.candidates(inputs, decision)}
    reasons = [why for name in command.names if (why := _stale(current.get(name), name, decision))]
    if command.stage == EMPTY:  # its nodes still empty, those still candidates
        reasons += [f"node {name} is no longer empty" for name in command.names
                    if name in current and not _stale(current[name], name, decision) and not current[name].empty]
    if reasons:
        return Recheck(reasons[0], len(reasons))
    if command.stage == EMPTY:
        return Recheck("")
    candidates = [current[name] for name in command.names]
    why = _command_invalid(decider, command, inputs, candidates)
    return Recheck(why)


def _command_invalid(decider: Decider, command: Command, inputs: Inputs, candidates: list[Candidate]) -> str:
    """Why the command's simulation on `inputs` no longer leads to it ("" when it does)."""
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


__all__ = ["Recheck", "invalid"]
