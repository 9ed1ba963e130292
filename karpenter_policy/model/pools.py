"""The one name of a node pool across both APIs: a v1alpha5 Provisioner or a Karpenter v1 NodePool.

A repository (and so a directory of constraint sets) may hold a Provisioner and a NodePool of the same name side by
side, as while migrating. Everything that keys pools — the scheduler's node claim templates, the controller's
constraint sets, limits and the nodes it launched, instance tags — uses the *pool key*: a Provisioner's name, or
`NodePool/<name>` for a NodePool (an object name has no `/`, so the two never collide; `check` names a NodePool's
template the same way, `CheckedProvisioner.key`).

A node says which pool it belongs to by its owner label: `karpenter.sh/provisioner-name` (Karpenter v0.31) or
`karpenter.sh/nodepool` (Karpenter v1, `NodePoolLabelKey` in core pkg/apis/v1/labels.go at v1.14.1). A v1 node
never carries v0.31's label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from karpenter_policy.model import labels as wk

#: The prefix of a NodePool's pool key.
NODEPOOL_PREFIX: Final = "NodePool/"


def pool_key(name: str, nodepool: bool) -> str:
    """The key of the Provisioner (or, `nodepool`, the NodePool) `name`."""
    return f"{NODEPOOL_PREFIX}{name}" if nodepool else name


def is_nodepool(pool: str) -> bool:
    """Whether a pool key names a NodePool."""
    return pool.startswith(NODEPOOL_PREFIX)


def pool_name(pool: str) -> str:
    """The object name of a pool key (`NodePool/general` → `general`)."""
    return pool.removeprefix(NODEPOOL_PREFIX)


def owner_label(pool: str) -> str:
    """The label whose value names the pool on its nodes."""
    return wk.NODEPOOL if is_nodepool(pool) else wk.PROVISIONER_NAME


def owner_labels(pool: str) -> dict[str, str]:
    """The owner label of the pool's nodes, with its value."""
    return {owner_label(pool): pool_name(pool)}


def pool_of_labels(labels: Mapping[str, str]) -> str | None:
    """The pool a node (or instance, by its tags) with these labels belongs to: its NodePool when it has the v1
    label, else its Provisioner; None when it has neither."""
    nodepool = labels.get(wk.NODEPOOL)
    if nodepool:
        return pool_key(nodepool, True)
    return labels.get(wk.PROVISIONER_NAME) or None


__all__ = [
    "NODEPOOL_PREFIX",
    "is_nodepool",
    "owner_label",
    "owner_labels",
    "pool_key",
    "pool_name",
    "pool_of_labels",
]
