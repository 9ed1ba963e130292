"""The one name of a node pool across both APIs: a v1alpha5 Provisioner or a Karpenter v1 NodePool.

A repository (and so a directory of constraint sets) may hold a Provisioner and a NodePool of the same name side by
side, as while migrating. Everything that keys pools — the scheduler's node claim templates, the controller's
constraint sets, limits and the nodes it launched, instance tags — uses the *pool key*: a Provisioner's name, or
`NodePool/<name>` for a NodePool (an object name has no `/`, so the two never collide; `check` names a NodePool's
template the same way, `CheckedProvisioner.key`).

A node says which pool it belongs to by its owner label: `karpenter.sh/provisioner-name` (Karpenter v0.31) or
`karpenter.sh/nodepool` (Karpenter v1, `NodePoolLabelKey` in core pkg/apis/v1/labels.go at v1.14.1). A v1 node
never carries v0.31's label.

What a message calls pools (`pools_noun`, `pool_ref`) follows the API the repository speaks: a v0.31 repository's
messages speak of provisioners, a v1 repository's of NodePools (as Karpenter v1.14.1's own: `incompatible with
nodepool "default"`), a repository holding both of pools.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from karpenter_policy.model import labels as wk

#: The prefix of a NodePool's pool key.
NODEPOOL_PREFIX: Final = "NodePool/"

#: What messages call v1alpha5 Provisioners, Karpenter v1 NodePools, and the pools of a repository holding both.
PROVISIONER_NOUN: Final = "provisioner"
NODEPOOL_NOUN: Final = "NodePool"
MIXED_NOUN: Final = "pool"


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


def pools_noun(pools: Iterable[str], count: int | None = None) -> str:
    """What a message calls the pools with these keys: `provisioner` when none is a NodePool (and when there are
    none: v0.31's word, the tool's words before v1), `NodePool` when all are, `pool` when both kinds are among them;
    plural unless `count` (by default the number of pools) is 1."""
    keys = list(pools)
    nodepools = sum(1 for key in keys if is_nodepool(key))
    noun = NODEPOOL_NOUN if keys and nodepools == len(keys) else MIXED_NOUN if nodepools else PROVISIONER_NOUN
    return noun if (len(keys) if count is None else count) == 1 else f"{noun}s"


def pool_ref(pool: str) -> str:
    """How a message names one pool: `provisioner gpu` (v0.31's words) or `NodePool/gpu`."""
    return pool if is_nodepool(pool) else f"{PROVISIONER_NOUN} {pool}"


def pool_of_labels(labels: Mapping[str, str]) -> str | None:
    """The pool a node (or instance, by its tags) with these labels belongs to: its NodePool when it has the v1
    label, else its Provisioner; None when it has neither."""
    nodepool = labels.get(wk.NODEPOOL)
    if nodepool:
        return pool_key(nodepool, True)
    return labels.get(wk.PROVISIONER_NAME) or None


__all__ = [
    "MIXED_NOUN",
    "NODEPOOL_NOUN",
    "NODEPOOL_PREFIX",
    "PROVISIONER_NOUN",
    "is_nodepool",
    "owner_label",
    "owner_labels",
    "pool_key",
    "pool_name",
    "pool_of_labels",
    "pool_ref",
    "pools_noun",
]
