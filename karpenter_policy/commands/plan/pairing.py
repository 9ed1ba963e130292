"""Which NodeClaim (or v1alpha5 Machine) is a Node's: the one whose `status.providerID` is the Node's
`spec.providerID`, as Karpenter's cluster state pairs them — v1.14.1 and v0.31.1 `state.Cluster.UpdateNodeClaim` and
`UpdateNode` hold one state node per providerID and never read a claim's `status.nodeName` for it.

A claim without a providerID is not launched yet: it is no node's. A Node without one is keyed by its name when it
is not Karpenter's (no `karpenter.sh/nodepool` or `karpenter.sh/provisioner-name` label), as `UpdateNode` keys it;
one of a NodePool or Provisioner is left out of Karpenter's state until the cloud provider sets it: it is paired
with no claim, and :func:`pairing_problems` warns of it. Two Nodes, or two claims of one kind, with one providerID
would be one state node: :func:`pairing_problems` names them as an error (the plan refuses the snapshot), and
:func:`claims_by_node` (read only of a snapshot without errors) keeps the later claim.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from karpenter_policy.api.provisionerrules import shown_long
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk

__all__ = ["PairingProblem", "claim_provider_id", "claims_by_node", "node_provider_id", "pairing_problems"]

#: A problem of the pairing: severity ("error" or "warning"), message and the first object's kind and name.
PairingProblem = tuple[str, str, tuple[str, str, str]]


def _managed(node: Obj) -> bool:
    labels = objects.labels(node)
    return bool(labels.get(wk.NODEPOOL) or labels.get(wk.PROVISIONER_NAME))


def node_provider_id(node: Obj) -> str | None:
    """The key Karpenter's cluster state holds the Node by: `spec.providerID`, else its name when it is not
    Karpenter's (None: a NodePool's or Provisioner's Node without one, which the state leaves out)."""
    spec = node.get("spec")
    found = spec.get("providerID") if isinstance(spec, dict) else None
    if isinstance(found, str) and found:
        return found
    return None if _managed(node) else objects.name(node) or None


def claim_provider_id(claim: Obj) -> str | None:
    """A NodeClaim's or Machine's `status.providerID` (None: not launched yet)."""
    status = claim.get("status")
    found = status.get("providerID") if isinstance(status, dict) else None
    return found if isinstance(found, str) and found else None


def claims_by_node(nodes: Iterable[Obj], claims: Iterable[Obj], kinds: Sequence[str] = ("NodeClaim", "Machine"),
                   ) -> dict[str, list[Obj]]:
    """Node name → the claims of `kinds` whose providerID is the node's: one of each kind (of two, the later; a
    snapshot holding two is refused, :func:`pairing_problems`), in the order their kinds first appear."""
    by_id: dict[str, dict[str, Obj]] = defaultdict(dict)
    for claim in claims:
        provider_id, kind = claim_provider_id(claim), claim.get("kind")
        if provider_id is not None and isinstance(kind, str) and kind in kinds:
            by_id[provider_id][kind] = claim
    out: dict[str, list[Obj]] = {}
    for node in nodes:
        provider_id = node_provider_id(node)
        if provider_id is not None and provider_id in by_id:
            out[objects.name(node)] = list(by_id[provider_id].values())
    return out


def _duplicates(items: Iterable[tuple[str, Obj]], field: str) -> list[PairingProblem]:
    """An error for each providerID more than one of `items` (providerID, object) has."""
    holders: dict[str, list[Obj]] = defaultdict(list)
    for provider_id, obj in items:
        holders[provider_id].append(obj)
    problems: list[PairingProblem] = []
    for provider_id, objs in holders.items():
        if len(objs) < 2:
            continue
        named = ", ".join(f"{o.get('kind')} {objects.name(o)}" for o in objs)
        problems.append(("error", (
            f"{named} have one {field} {shown_long(provider_id)}: Karpenter keeps one node per providerID in its "
            "cluster state, so which claim pairs with which Node cannot be told (take the snapshot again; fix the "
            "objects if it stays)"),
            (str(objs[0].get("kind")), "", objects.name(objs[0]))))
    return problems


def pairing_problems(nodes: Sequence[Obj], claims: Sequence[Obj]) -> list[PairingProblem]:
    """What keeps the snapshot's Nodes and claims from pairing as Karpenter pairs them: two Nodes, or two claims
    of one kind, with one providerID (errors); a NodePool's or Provisioner's Node without a providerID (a warning)."""
    problems = _duplicates(((p, n) for n in nodes if (p := node_provider_id(n)) is not None), "spec.providerID")
    for kind in ("NodeClaim", "Machine"):
        problems += _duplicates(((p, c) for c in claims if c.get("kind") == kind
                                 and (p := claim_provider_id(c)) is not None), "status.providerID")
    for node in nodes:
        if node_provider_id(node) is None:
            labels = objects.labels(node)
            owner = (f"NodePool {labels[wk.NODEPOOL]}" if labels.get(wk.NODEPOOL)
                     else f"Provisioner {labels.get(wk.PROVISIONER_NAME)}")
            problems.append(("warning", (
                f"Node {objects.name(node)} of {owner} has no spec.providerID: Karpenter leaves it out of its cluster "
                "state until the cloud provider sets one, so the plan pairs it with no "
                f"{'NodeClaim' if labels.get(wk.NODEPOOL) else 'Machine'}"), ("Node", "", objects.name(node))))
    return problems
