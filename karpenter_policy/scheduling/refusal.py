"""The pods Karpenter refuses to provision for, and why, per API version: v0.31's `Provisioner.Validate`
(`provisioning_refusal`) and v1.14.1's (`provisioning_refusal_v1`), both in `pkg/controllers/provisioning/
provisioner.go`; Karpenter logs "ignoring pod" and never launches a node for them.

v0.31.1 (the Provisioner's reading):

* a `karpenter.sh/provisioner-name DoesNotExist` requirement (the pod asks not to run on a Karpenter node), or
  `karpenter.sh/nodepool DoesNotExist` (v1.14.1's `validateKarpenterManagedLabelCanExist`);
* a node-affinity term, required or preferred, with `matchFields`;
* a node-affinity expression, required or preferred, that Karpenter's `ValidateRequirement` rejects: a restricted
  label (`kubernetes.io/hostname`, any `kubernetes.io/…` or `karpenter.sh/…` key outside the well-known set), an
  unsupported operator, a key that is not a qualified name, an invalid value, `In` without values, `Gt`/`Lt`
  without one integer. The nodeSelector is not validated (Karpenter's v0.31 does not either).

A pod may constrain `karpenter.sh/nodepool`, v1's pool label (well-known in v1.14.1, how a pod picks a NodePool),
as it may `karpenter.sh/provisioner-name`: Karpenter v0.31 would refuse the former as a restricted label, but no
Provisioner's node carries it, so such a pod lands on NodePools only — and a repository holding both kinds (a
migration under way) keeps one reading of its pods.

v1.14.1 (the NodePool's reading; `validateKarpenterManagedLabelCanExist`, `validateNodeSelector`,
`validateAffinity`, `validateNodeSelectorTerm`):

* a `karpenter.sh/nodepool DoesNotExist` requirement (`karpenter.sh/provisioner-name` means nothing to v1);
* each **nodeSelector** entry, read as an `In [value]` requirement, and each **required** node-affinity term
  (preferred terms are not validated): `matchFields`, or what v1's `ValidateRequirement`
  (`api.v1.nodepool.requirement_errors`: v1's restricted domains and well-known labels, the AWS provider's
  included) rejects, in v1.14.1's words.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from karpenter_policy.api.provisionerrules import requirement_violations
from karpenter_policy.api.v1.nodepool import requirement_errors
from karpenter_policy.api.violations import ERROR, RESTRICTED_LABEL
from karpenter_policy.model import labels as wk

__all__ = ["provisioning_refusal", "provisioning_refusal_v1"]


def provisioning_refusal(spec: Mapping[str, Any]) -> str | None:
    """Why Karpenter ignores a pod with this spec (its words, joined by "; "), None when it provisions for it."""
    reasons = list(_reasons(spec))
    return "; ".join(dict.fromkeys(reasons)) if reasons else None


def provisioning_refusal_v1(spec: Mapping[str, Any]) -> str | None:
    """Why Karpenter v1.14.1 ignores a pod with this spec (its words, joined by "; "), None when it provisions for
    it (see the module docstring)."""
    reasons = list(_reasons_v1(spec))
    return "; ".join(dict.fromkeys(reasons)) if reasons else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _terms(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every node-selector term of the pod's node affinity: (`required` or `preferred`, the term)."""
    node_affinity = _mapping(_mapping(spec.get("affinity")).get("nodeAffinity"))
    for preferred in _list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")):
        yield "preferred", _mapping(_mapping(preferred).get("preference"))
    required = _mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in _list(required.get("nodeSelectorTerms")):
        yield "required", _mapping(term)


def _first_terms(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The terms Karpenter's `NewPodRequirements` starts from: the heaviest preferred one, the first required one."""
    node_affinity = _mapping(_mapping(spec.get("affinity")).get("nodeAffinity"))
    preferred = [_mapping(p) for p in _list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))]
    weights = [w if isinstance(w := p.get("weight"), int) else 0 for p in preferred]
    if preferred:
        yield _mapping(preferred[weights.index(max(weights))].get("preference"))
    required = _mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in _list(required.get("nodeSelectorTerms"))[:1]:
        yield _mapping(term)


def _well_typed(expression: Mapping[str, Any]) -> bool:
    values = expression.get("values")
    return (
        isinstance(expression.get("key", ""), str)
        and isinstance(expression.get("operator", ""), str)
        and (values is None or (isinstance(values, list) and all(isinstance(v, str) for v in values)))
    )


def _reasons(spec: Mapping[str, Any]) -> Iterator[str]:
    for term in _first_terms(spec):
        for expression in _list(term.get("matchExpressions")):
            expression = _mapping(expression)
            key = expression.get("key")
            if key in (wk.PROVISIONER_NAME, wk.NODEPOOL) and expression.get("operator") == "DoesNotExist":
                yield f"configured to not run on a Karpenter provisioned node via {key} DoesNotExist requirement"
    for kind, term in _terms(spec):
        if term.get("matchFields") is not None:
            yield f"a {kind} node selector term with matchFields is not supported"
        for expression in _list(term.get("matchExpressions")):
            expression = _mapping(expression)
            if not _well_typed(expression):
                continue  # not a node-selector requirement at all: the pod spec's reader says so
            for violation in requirement_violations(expression, ()):
                # the pool label is well-known to a pod: only a pool may not constrain it
                own = expression.get("key") in (wk.PROVISIONER_NAME, wk.NODEPOOL) and violation.rule == RESTRICTED_LABEL
                if violation.severity == ERROR and not own:
                    yield f"a {kind} node affinity term: {violation.message}"


def _reasons_v1(spec: Mapping[str, Any]) -> Iterator[str]:
    for term in _first_terms(spec):
        for expression in _list(term.get("matchExpressions")):
            expression = _mapping(expression)
            if expression.get("key") == wk.NODEPOOL and expression.get("operator") == "DoesNotExist":
                yield ("configured to not run on a Karpenter provisioned node via "
                       f"{wk.NODEPOOL} DoesNotExist requirement")
    for key, value in sorted(_mapping(spec.get("nodeSelector")).items()):
        if isinstance(key, str) and isinstance(value, str):
            for error in _v1_errors(key, "In", (value,)):
                yield f"nodeSelector {key}: {error}"
    for kind, term in _terms(spec):
        if kind != "required":
            continue
        if term.get("matchFields") is not None:
            yield "node selector term with matchFields is not supported"
        for expression in _list(term.get("matchExpressions")):
            expression = _mapping(expression)
            if _well_typed(expression):
                values = tuple(expression.get("values") or ())
                for error in _v1_errors(str(expression.get("key", "")), str(expression.get("operator", "")), values):
                    yield f"a required node affinity term: {error}"


@lru_cache(maxsize=4096)
def _v1_errors(key: str, operator: str, values: tuple[str, ...]) -> tuple[str, ...]:
    """v1's `ValidateRequirement` of one pod requirement, remembered: pods repeat the same few requirements."""
    return tuple(requirement_errors({"key": key, "operator": operator, "values": list(values)}))
