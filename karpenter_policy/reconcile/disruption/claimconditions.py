"""The Drifted and Consolidatable conditions of a NodePool's NodeClaims, as the disruption controller decides them:
Karpenter v1.14.1 marks a claim Drifted while it has drifted (core pkg/controllers/nodeclaim/disruption/drift.go)
and Consolidatable once `consolidateAfter` has passed since its node's last pod event (consolidation.go), and
removes either when it no longer holds. Here both are what a disruption decision found: after each decision, the
claim of every NodePool node of ours not being deleted gets Drifted when the decision saw it drifted — its reason
the kind of drift as v1.14.1 names it (`NodePoolDrifted`, `RequirementsDrifted`, `NodeClassDrift`, `AMIDrift`:
`claims.conditions.drift_reason`), its message why (the changed hash, the requirement, the image, …) — and
Consolidatable when its consolidateAfter has passed (`decider.consolidatable_in`; never under `Never`); a condition
that no longer holds is removed. A claim is written only when what it shows changes (a new kind of drift too); a
write that fails is tried again after the next decision.
"""

from __future__ import annotations

from collections.abc import Mapping

from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model.pools import is_nodepool
from karpenter_policy.reconcile.claims import conditions
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.claims.writer import ClaimWriter
from karpenter_policy.reconcile.disruption.decider import Inputs, consolidatable_in

#: What a claim shows: (why it drifted, "" when it has not; consolidatable).
Shown = tuple[str, bool]


class ClaimConditions:
    """See the module docstring."""

    def __init__(self, writer: ClaimWriter) -> None:
        self.writer = writer
        self._shown: dict[str, Shown] = {}

    def update(self, inputs: Inputs, drifted: Mapping[str, str]) -> list[str]:
        """Write the conditions that changed since the last decision; the errors met."""
        errors: list[str] = []
        present: set[str] = set()
        for name, node in sorted(inputs.view.nodes.items()):
            pool = node.provisioner or ""
            if not node.ours or node.deleting or not is_nodepool(pool):
                continue
            claim = claim_of_node(node.obj)
            if claim is None:
                continue
            present.add(claim)
            constraint_set = inputs.templates.sets.get(pool)
            wait = consolidatable_in(inputs, node, constraint_set) if constraint_set is not None else None
            shown = (drifted.get(name, ""), node.initialized and wait is not None and wait <= 0)
            if self._shown.get(claim) == shown:
                continue
            try:
                why, consolidatable = shown
                if why:
                    self.writer.set_true(claim, conditions.DRIFTED, message=why, reason=conditions.drift_reason(why))
                else:
                    self.writer.clear(claim, conditions.DRIFTED)
                if consolidatable:
                    self.writer.set_true(claim, conditions.CONSOLIDATABLE)
                else:
                    self.writer.clear(claim, conditions.CONSOLIDATABLE)
            except ClusterError as error:
                errors.append(f"could not write the conditions of nodeclaim {claim}, {error}")
                self._shown.pop(claim, None)
                continue
            self._shown[claim] = shown
        self._shown = {claim: shown for claim, shown in self._shown.items() if claim in present}
        return errors


__all__ = ["ClaimConditions"]
