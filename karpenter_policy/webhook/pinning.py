"""Pod pinning for `/mutate/pods`: a pod in, the JSONPatch that adds its pins (and the warnings) out.

`/mutate/pods` is written against one small interface, `Pinner`: ``pinner(pod, namespace) -> Pinning``.
`PolicyPinner` implements it with the CLI's pinning rules (`policy.pinning`, `kind: PinningPolicy`), so a pod
admitted by the webhook carries what `karpenter-policy pin --write` writes into a manifest: `resolve` finds the
matching rules' pins, `changes_for` what the pod lacks, and `changes_patch` writes the JSONPatch that does what
`apply_changes` does to a manifest. A nodeSelector
value the pod sets differently is overwritten, as `pin` does, with `Change.message()` as a warning; two rules
that disagree resolve to the first, with the conflict's message as a warning. A pinned pod gets an empty
patch (idempotent, for `reinvocationPolicy: IfNeeded`). Pins that the pod's own required node affinity rejects
(`affinity_conflict`, the very check that makes `pin --write` refuse the manifest) are not applied: the pod is
admitted unpinned, with the conflict as a warning.

A pod's workload kind is its controller's kind (its owner reference with `controller: true`); a ReplicaSet's
pod that has Deployment's `pod-template-hash` label counts as a Deployment's. A bare pod is a Pod. Its name is
`metadata.name`, or `generateName` while the name is not yet set.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from karpenter_policy.checks.pinning import (
    Change,
    Rule,
    affinity_conflict,
    bind_provisioners,
    changes_for,
    resolve,
    rules_from_documents,
)
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model.taints import Taint

_TEMPLATE_HASH_LABEL = "pod-template-hash"


class PinningError(ValueError):
    """Pinning rules that cannot be used (the webhook refuses to start with them)."""


@dataclass(frozen=True, slots=True)
class Pinning:
    """What pinning does to one pod: the JSONPatch operations, the rules that matched, warnings."""

    patch: Sequence[Mapping[str, Any]] = ()
    rules: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())


#: The interface `/mutate/pods` is written against: (pod, namespace of the request) → what to do to it.
Pinner = Callable[[Mapping[str, Any], str], Pinning]


def no_pinning(pod: Mapping[str, Any], namespace: str) -> Pinning:
    """The pinner without rules."""
    return Pinning()


def workload_kind(metadata: Mapping[str, Any]) -> str:
    """The kind a pinning rule's `kinds` sees for a pod (see the module doc)."""
    owners = metadata.get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if isinstance(owner, Mapping) and owner.get("controller") is True and isinstance(owner.get("kind"), str):
            kind = str(owner["kind"])
            labels = metadata.get("labels")
            if kind == "ReplicaSet" and isinstance(labels, Mapping) and _TEMPLATE_HASH_LABEL in labels:
                return "Deployment"
            return kind
    return "Pod"


class PolicyPinner:
    """`Pinner` over the CLI's pinning rules (already bound to the provisioners they name)."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)

    def __len__(self) -> int:
        return len(self.rules)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        provisioner_taints: Mapping[str, Sequence[Taint]],
        nodepool_taints: Mapping[str, Sequence[Taint]] | None = None,
        static_nodepools: Collection[str] = (),
    ) -> PolicyPinner:
        """The rules of the valid PinningPolicy documents given; a rule that names an unknown provisioner (or
        NodePool), or a static NodePool, raises PinningError (the CLI's `pinning-conflict` message)."""
        bound, findings = bind_provisioners(
            rules_from_documents(documents), provisioner_taints, nodepool_taints, static_nodepools
        )
        if findings:
            raise PinningError("; ".join(f"{f.file}:{f.line}:{f.column}: {f.message}" for f in findings))
        return cls(bound)

    def __call__(self, pod: Mapping[str, Any], namespace: str) -> Pinning:
        spec = pod.get("spec")
        raw_metadata = pod.get("metadata")
        if not self.rules or not isinstance(spec, Mapping):
            return Pinning()
        metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
        name = metadata.get("name") or metadata.get("generateName")
        pod_namespace = namespace or metadata.get("namespace")
        pins = resolve(
            self.rules,
            metadata,
            workload_kind(metadata),
            pod_namespace if isinstance(pod_namespace, str) and pod_namespace else None,
            name if isinstance(name, str) and name else None,
            spec,
        )
        warnings = [conflict.message() for conflict in pins.conflicts]
        changes = changes_for(spec, pins)
        if not changes:
            return Pinning((), tuple(r.ref for r in pins.rules), tuple(warnings))
        if (conflict := affinity_conflict(spec, changes)) is not None:
            warnings.append(f"not pinned: {conflict.message()}")
            return Pinning((), tuple(r.ref for r in pins.rules), tuple(warnings))
        warnings += [change.message() for change in changes if change.current is not None]
        return Pinning(changes_patch(spec, changes).patch, tuple(r.ref for r in pins.rules), tuple(warnings))


def _escape(key: str) -> str:
    """A JSON Pointer reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def changes_patch(spec: Mapping[str, Any], changes: Sequence[Change]) -> jsonpatch.JsonPatch:
    """The JSONPatch that does to a pod what `apply_changes(spec, changes)` does to its spec: set each
    nodeSelector entry (an `add` replaces a differing value), append each toleration, creating either list or
    mapping when the pod has none. Written out rather than diffed (`jsonpatch.make_patch` costs ~0.5 ms and every
    pod of the cluster comes through here); the tests hold it, applied, to what `pin --write` writes."""
    selector = [c for c in changes if c.field != "tolerations"]
    tolerations = [c for c in changes if c.field == "tolerations"]
    ops: list[dict[str, Any]] = []
    if selector:
        if isinstance(spec.get("nodeSelector"), Mapping):
            ops += [{"op": "add", "path": f"/spec/nodeSelector/{_escape(c.key)}", "value": c.value} for c in selector]
        else:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": {c.key: c.value for c in selector}})
    if tolerations:
        if isinstance(spec.get("tolerations"), list):
            ops += [
                {"op": "add", "path": "/spec/tolerations/-", "value": dict(c.toleration or {})} for c in tolerations
            ]
        else:
            ops.append(
                {"op": "add", "path": "/spec/tolerations", "value": [dict(c.toleration or {}) for c in tolerations]}
            )
    return jsonpatch.JsonPatch(ops)
