"""The constraint sets of Karpenter v1 NodePools, as `compile` builds them beside the Provisioners' sets.

A NodePool compiles through its scheduling view — the one `check` proves (`api.v1.objects.NodePool.provisioner`,
with the EC2NodeClass its nodeClassRef names, both in the stored form the API server keeps: CRD defaults applied)
— so its requirements (template requirements ∩ labels, `Gte`/`Lte` as their `Gt`/`Lt` equivalents), labels,
taints, weight, kubelet settings and admitted instance types are the ones every proof ran on. A NodePool set adds:

* `limits`: the NodePool's `spec.limits`, `nodes` included (the view's: a count of nodes, `model.resources.NODES`);
* `provider`: `{source: nodeClassRef, name, spec}` — the EC2NodeClass's stored spec (None when the repository does
  not hold it: `unresolved-reference` says so);
* `nodePool`: what v1 adds and a Provisioner has no field for — `minValues` per key, `disruption` (consolidation
  policy, consolidateAfter, budgets), `expireAfter`, `terminationGracePeriod`; and `replicas` for a static NodePool
  only (the controller leaves its set out of scheduling, `ConstraintSet.is_static`; a dynamic NodePool's set has no
  such key, and its hash is as before).

Its version is its own `karpenter-policy/version` annotation, else compile's; its sources the NodePool's file and
its EC2NodeClass's. The webhook's pinning, the controller and `simulate` read such a set, each checking it as
Karpenter v1.14.1 admits its NodePool (`api.constraintcheck.nodepool_set_problems`); `plan`'s consolidation builds
HEAD's the same way (`nodepool_constraint_set`, from a NodePool and its EC2NodeClass as stored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.constraintset import PROVIDER_NODE_CLASS, ConstraintSet, ProviderSettings
from karpenter_policy.api.objects import VERSION_ANNOTATION
from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.api.v1.managed import ref_not_managed
from karpenter_policy.api.v1.objects import EC2NodeClass, NodePool
from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.source.loader import Document

__all__ = ["NodePoolSource", "nodepool_constraint_set", "nodepool_set", "nodepool_sources"]


@dataclass(frozen=True, slots=True)
class NodePoolSource:
    """A NodePool to compile: its document, the typed NodePool of its stored form, and the EC2NodeClass document
    its nodeClassRef names (None: not in the repository, or another provider's class)."""

    doc: Document
    pool: NodePool
    node_class: Document | None

    @property
    def version(self) -> str | None:
        """Its `karpenter-policy/version` annotation (None: none)."""
        annotations = (self.doc.data.get("metadata") or {}).get("annotations") or {}
        version = annotations.get(VERSION_ANNOTATION) if isinstance(annotations, Mapping) else None
        return str(version) if version else None


def nodepool_sources(nodepools: Mapping[str, Document], node_classes: Mapping[str, Document]) -> list[NodePoolSource]:
    """The NodePools of a checked repository (valid documents by name), by name, each with its EC2NodeClass."""
    sources = []
    for name in sorted(nodepools):
        doc = nodepools[name]
        pool = NodePool.from_document(stored_form(doc.data))
        ref = pool.node_class_ref
        node_class = node_classes.get(ref.name) if ref is not None and ref.is_ec2_node_class else None
        sources.append(NodePoolSource(doc, pool, node_class))
    return sources


def nodepool_set(
    source: NodePoolSource,
    *,
    version: str,
    relative: Callable[[str], str],
    catalog: Catalog,
) -> ConstraintSet:
    """The constraint set of one NodePool (see the module docstring); `relative` makes a file a source path."""
    sources = [relative(source.doc.file)]
    if source.node_class is not None:
        sources.append(relative(source.node_class.file))
    return nodepool_constraint_set(source.pool, source.node_class.data if source.node_class is not None else None,
                                   version=version, sources=sources, catalog=catalog)


def nodepool_constraint_set(
    pool: NodePool,
    node_class_document: Mapping[str, Any] | None,
    *,
    version: str,
    sources: Sequence[str],
    catalog: Catalog,
) -> ConstraintSet:
    """The constraint set of `pool` with the EC2NodeClass document its nodeClassRef names (None: not known), as
    :func:`nodepool_set` makes it — what `plan`'s consolidation runs for a snapshot's NodePools too. ValueError: its
    nodeClassRef is not an EC2NodeClass (Karpenter's AWS provider does not manage it; `foreign-node-class`)."""
    if (why := ref_not_managed(pool.node_class_ref)) is not None:
        raise ValueError(why)
    class_spec: dict[str, Any] | None = None
    node_class: EC2NodeClass | None = None
    if node_class_document is not None:
        stored = stored_form(node_class_document)
        class_spec = dict(stored.get("spec") or {})
        node_class = EC2NodeClass.from_document(stored)
    view = pool.provisioner(node_class)
    family = (view.provider or {}).get("amiFamily")
    ref_name = pool.node_class_ref.name if pool.node_class_ref is not None else None
    return ConstraintSet.of(
        view,
        version=version,
        sources=list(sources),
        region=catalog.region,
        provider=ProviderSettings(PROVIDER_NODE_CLASS, ref_name, class_spec),
        instance_types=catalog,
        ami_family=str(family) if family else None,
        nodepool={
            "minValues": dict(sorted(pool.min_values.items())),
            "disruption": {
                "consolidationPolicy": pool.disruption.consolidation_policy,
                "consolidateAfter": pool.disruption.consolidate_after,
                "budgets": [dict(b) for b in pool.disruption.budgets],
            },
            "expireAfter": pool.expire_after,
            "terminationGracePeriod": pool.termination_grace_period,
            **({"replicas": pool.replicas} if pool.replicas is not None else {}),
        },
    )
