"""Binding pods to the nodes the plan put them on (the Binding subresource), several at a time.

A pod that is already bound (409: kube-scheduler or another replica was first) or gone (404) is settled — the
controller never fights over a pod; any other failure leaves it for the next pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, Conflict, NotFound
from karpenter_policy.reconcile.options import DEFAULT_BIND_PARALLELISM

BOUND = "bound"
ALREADY_BOUND = "already-bound"
GONE = "gone"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Binding:
    namespace: str
    pod: str
    uid: str
    node: str


@dataclass(frozen=True, slots=True)
class BindResult:
    binding: Binding
    outcome: str  # BOUND, ALREADY_BOUND, GONE or FAILED
    error: str = ""

    @property
    def settled(self) -> bool:
        """Nothing more to do for this pod (bound by us or someone else, or deleted)."""
        return self.outcome != FAILED


class Binder:
    def __init__(self, cluster: Cluster, parallelism: int = DEFAULT_BIND_PARALLELISM) -> None:
        self.cluster = cluster
        self.parallelism = max(1, parallelism)

    def _one(self, binding: Binding) -> BindResult:
        try:
            self.cluster.bind(binding.namespace, binding.pod, binding.node)
        except Conflict:
            return BindResult(binding, ALREADY_BOUND)
        except NotFound:
            return BindResult(binding, GONE)
        except ClusterError as error:
            return BindResult(binding, FAILED, str(error))
        return BindResult(binding, BOUND)

    def bind(self, bindings: Sequence[Binding]) -> list[BindResult]:
        """The result of each binding, in the order given."""
        if self.parallelism == 1 or len(bindings) < 2:
            return [self._one(b) for b in bindings]
        with ThreadPoolExecutor(max_workers=min(self.parallelism, len(bindings)), thread_name_prefix="bind") as pool:
            return list(pool.map(self._one, bindings))


__all__ = ["ALREADY_BOUND", "BOUND", "FAILED", "GONE", "BindResult", "Binder", "Binding"]
