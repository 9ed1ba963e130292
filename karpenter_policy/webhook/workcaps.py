"""What one Provisioner (or Karpenter v1 NodePool or EC2NodeClass: `v1_over_cap`) in an admission review may hold
before any check runs: caps on the work a request can ask of a worker, set where no real Provisioner comes near them.

The checks cost time in proportion to the requirements and their values (each value is validated, looked up in
the catalog, and an unknown one named in a finding); one review with 100,000 instance-type values held a worker
for ~9.5 s, and four at once pushed every other request's latency to seconds. A Provisioner over a cap is denied
at once, with a message that says which cap and why, before the schema, the rules or the solver:

* `MAX_REQUIREMENTS` (100) requirements — the cap Karpenter v1's NodePool CRD sets (`maxItems: 100` on
  `spec.template.spec.requirements`, pkg/apis/crds/karpenter.sh_nodepools.yaml); well-known keys number about 20.
* `MAX_VALUES` (2,000) values over all the requirements — every EC2 instance type of every region (about 1,400
  in the embedded catalog) is fewer.
* `MAX_NODE_ENTRIES` (200) labels, taints and startup taints in `spec` — each is a label or taint of every node
  Karpenter launches; nodes carry a few dozen.
* `MAX_METADATA_ENTRIES` (500) labels and annotations in `metadata` — tools add a handful.

The count walks the requirements once (no copy, nothing parsed), so the UPDATE path pays microseconds.

A pod sent to `/mutate/pods` has caps of its own (`pod_over_cap`), for the work pinning does — matching its labels,
comparing its nodeSelector and tolerations with each rule's, checking its node affinity against every pin: the same
`MAX_METADATA_ENTRIES` labels and annotations; `MAX_NODE_ENTRIES` nodeSelector entries and tolerations together
(a pod has a few); `MAX_REQUIREMENTS` node-affinity expressions and fields over every term, required and
preferred, and `MAX_VALUES` values in them. Over a cap, the pod is denied with the cap named, not pinned nor
admitted unpinned: admitting it would let a pod skip its pins by growing past a cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_REQUIREMENTS = 100
MAX_VALUES = 2_000
MAX_NODE_ENTRIES = 200
MAX_METADATA_ENTRIES = 500


def _size(value: object) -> int:
    return len(value) if isinstance(value, (Mapping, list)) else 0


def over_cap(obj: Mapping[str, Any]) -> str | None:
    """Why `obj` (a Provisioner as sent) holds more than the caps allow, None when it does not. Shapes that are
    not a list of mappings are left to the schema check, which reports them."""
    spec = obj.get("spec")
    if (excess := _metadata_over(obj)) is not None or not isinstance(spec, Mapping):
        return excess
    entries = sum(_size(spec.get(field)) for field in ("labels", "taints", "startupTaints"))
    return _node_entries_over(entries, "spec", "labels, taints and startup taints") or _requirements_over(
        spec.get("requirements"), "spec.requirements"
    )


def v1_over_cap(obj: Mapping[str, Any]) -> str | None:
    """`over_cap` for a Karpenter v1 NodePool (its node template: `spec.template.metadata.labels`,
    `spec.template.spec.taints`, `startupTaints`, `requirements`) or EC2NodeClass (`spec.tags`, on every
    instance), None when it holds no more than the caps allow. The CRDs cap many lists themselves, but the API
    server checks those before it calls the webhook, but the caps here bound the webhook's own work on whatever
    reaches it (a list the CRD leaves unbounded, a cluster whose CRDs are older)."""
    if (excess := _metadata_over(obj)) is not None:
        return excess
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    if obj.get("kind") != "NodePool":
        return _node_entries_over(_size(spec.get("tags")), "spec", "tags")
    template = spec.get("template")
    template = template if isinstance(template, Mapping) else {}
    metadata, node = template.get("metadata"), template.get("spec")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    node = node if isinstance(node, Mapping) else {}
    entries = _size(metadata.get("labels")) + _size(node.get("taints")) + _size(node.get("startupTaints"))
    return _node_entries_over(entries, "spec.template", "labels, taints and startup taints") or _requirements_over(
        node.get("requirements"), "spec.template.spec.requirements"
    )


def _metadata_over(obj: Mapping[str, Any]) -> str | None:
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        entries = _size(metadata.get("labels")) + _size(metadata.get("annotations"))
        if entries > MAX_METADATA_ENTRIES:
            return (
                f"metadata holds {entries} labels and annotations, over the webhook's limit of "
                f"{MAX_METADATA_ENTRIES}; refused before any check"
            )
    return None


def _node_entries_over(entries: int, where: str, what: str) -> str | None:
    if entries <= MAX_NODE_ENTRIES:
        return None
    return (
        f"{where} holds {entries} {what}, over the webhook's limit of "
        f"{MAX_NODE_ENTRIES} (each is on every node launched; nodes carry a few dozen); refused before any check"
    )


def _requirements_over(requirements: object, where: str) -> str | None:
    if not isinstance(requirements, list):
        return None
    if len(requirements) > MAX_REQUIREMENTS:
        return (
            f"{where} holds {len(requirements)} requirements, over the webhook's limit of "
            f"{MAX_REQUIREMENTS} (Karpenter v1's NodePool allows no more); refused before any check"
        )
    values = 0
    for requirement in requirements:
        listed = requirement.get("values") if isinstance(requirement, Mapping) else None
        if isinstance(listed, list):
            values += len(listed)
    if values > MAX_VALUES:
        return (
            f"{where} hold {values} values, over the webhook's limit of {MAX_VALUES} (every EC2 "
            "instance type of a region is fewer: use instance families, categories or sizes instead of listing "
            "types); refused before any check"
        )
    return None


def _node_affinity_work(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(expressions and fields, values) over every term of the pod's node affinity, required and preferred."""
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    if not isinstance(node, Mapping):
        return 0, 0
    terms: list[object] = []
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping) and isinstance(required.get("nodeSelectorTerms"), list):
        terms += required["nodeSelectorTerms"]
    preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution")
    if isinstance(preferred, list):
        terms += [p.get("preference") for p in preferred if isinstance(p, Mapping)]
    expressions = values = 0
    for term in terms:
        if not isinstance(term, Mapping):
            continue
        for field in ("matchExpressions", "matchFields"):
            listed = term.get(field)
            if not isinstance(listed, list):
                continue
            expressions += len(listed)
            values += sum(_size(e.get("values")) for e in listed if isinstance(e, Mapping))
    return expressions, values


def pod_over_cap(obj: Mapping[str, Any]) -> str | None:
    """Why a pod sent for pinning holds more than the caps allow (see the module docstring), None when it does
    not. Shapes that are not what a pod holds are left to pinning, which passes them over."""
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        entries = _size(metadata.get("labels")) + _size(metadata.get("annotations"))
        if entries > MAX_METADATA_ENTRIES:
            return (
                f"the pod's metadata holds {entries} labels and annotations, over the webhook's limit of "
                f"{MAX_METADATA_ENTRIES}; refused before pinning"
            )
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    entries = _size(spec.get("nodeSelector")) + _size(spec.get("tolerations"))
    if entries > MAX_NODE_ENTRIES:
        return (
            f"the pod's spec holds {entries} nodeSelector entries and tolerations, over the webhook's limit of "
            f"{MAX_NODE_ENTRIES} (a pod has a few); refused before pinning"
        )
    expressions, values = _node_affinity_work(spec)
    if expressions > MAX_REQUIREMENTS:
        return (
            f"the pod's node affinity holds {expressions} expressions, over the webhook's limit of "
            f"{MAX_REQUIREMENTS}; refused before pinning"
        )
    if values > MAX_VALUES:
        return (
            f"the pod's node affinity holds {values} values, over the webhook's limit of {MAX_VALUES} (every EC2 "
            "instance type of a region is fewer); refused before pinning"
        )
    return None
