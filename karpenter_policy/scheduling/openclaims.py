"""The cost strategy's open node claims of one template, indexed by free room: the same claims, in the same order,
as a scan of every open claim — without asking the full ones.

The cost strategy's best fit (`scheduler._Run._best_fit`) offers a pod the open claims of the templates that may
take it, in the order they were made, and compares the first five that accept it. The claims stay open while they
can take the run's smallest pod, so most of those a large pod is offered are too full for it: at 100 Provisioners
× 10,000 workloads a scan asked ~76 claims a pod, 1.72 million `NodeClaim.check` calls, most refused for room.

:class:`OpenClaims` keeps, in a segment tree over one template's claims in creation order, the largest free cpu,
memory and pod slots of every range of claims — a claim's free amount of a resource being the most any of its
instance type options has, less what the claim requests — and walks it left to right, skipping a whole range
when one of the three is smaller than the pod's request. A skipped claim is one whose `check` would refuse for
room (no option holds the claim's requests and the pod's together, so none holds them on that one resource
either), so the claims it yields are a subsequence of the scan that keeps every claim that could accept: the
first five that accept are the scan's first five. This is :class:`firstfit.FirstFit`'s walk over a tree that
grows as claims are made. The scheduler gives a claim's new room with :meth:`OpenClaims.update` whenever its
requests or options change (a pod joined it, its price cap was lifted), and :meth:`OpenClaims.close` removes it.
"""

from __future__ import annotations

from collections.abc import Iterator

from karpenter_policy.scheduling.nodes import NodeClaim
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, Vector

#: Free room of a slot that holds no open claim: below any request.
_NONE = -(1 << 80)


def room(claim: NodeClaim) -> tuple[int, int, int]:
    """The free cpu, memory and pod slots of the claim: on each, the most any of its options has (allocatable,
    the DaemonSet overhead being among its requests) less what it requests, at least 0 (a pod that requests none
    of a resource is never refused on it); below any request when it has no option left."""
    shapes, options, requests = claim.template.shapes, claim.options, claim.requests
    if not options:
        return _NONE, _NONE, _NONE
    return (
        max(shapes.most(CPU_I, options) - requests[CPU_I], 0),
        max(shapes.most(MEMORY_I, options) - requests[MEMORY_I], 0),
        max(shapes.most(PODS_I, options) - requests[PODS_I], 0),
    )


class OpenClaims:
    """The open claims of one template in creation order, with their room (see the module docstring). Each claim
    keeps the slot :meth:`add` gave it; a closed slot holds None."""

    __slots__ = ("_cpu", "_leaves", "_memory", "_pods", "created", "slots")

    def __init__(self) -> None:
        #: the claims by slot, in creation order (None: closed)
        self.slots: list[NodeClaim | None] = []
        #: each slot's creation number in the run (the order claims of several templates are merged in)
        self.created: list[int] = []
        self._leaves = 1
        self._cpu = [_NONE, _NONE]
        self._memory = [_NONE, _NONE]
        self._pods = [_NONE, _NONE]

    def __len__(self) -> int:
        return sum(1 for claim in self.slots if claim is not None)

    def add(self, claim: NodeClaim, created: int) -> int:
        """Open `claim` (the run's `created`-th claim, made after every claim here); its slot."""
        slot = len(self.slots)
        if slot == self._leaves:
            self._grow()
        self.slots.append(claim)
        self.created.append(created)
        self._set(slot, room(claim))
        return slot

    def update(self, slot: int, claim: NodeClaim) -> None:
        """The claim at `slot` changed its requests or options: its room again."""
        if self.slots[slot] is claim:
            self._set(slot, room(claim))

    def close(self, slot: int) -> None:
        """The claim at `slot` takes no more pods: it is never yielded again."""
        self.slots[slot] = None
        self._set(slot, (_NONE, _NONE, _NONE))

    def holding(self, requests: Vector) -> Iterator[tuple[int, NodeClaim]]:
        """(creation number, claim) of the open claims whose free cpu, memory and pod slots each hold `requests`,
        in creation order. Lazy: the caller stops when it has enough, and changes nothing while it walks."""
        want_cpu, want_memory, want_pods = requests[CPU_I], requests[MEMORY_I], requests[PODS_I]
        cpu, memory, pods, leaves = self._cpu, self._memory, self._pods, self._leaves
        slots, created = self.slots, self.created
        stack = [1]
        while stack:
            i = stack.pop()
            if cpu[i] < want_cpu or memory[i] < want_memory or pods[i] < want_pods:
                continue
            if i >= leaves:
                claim = slots[i - leaves]
                if claim is not None:
                    yield created[i - leaves], claim
            else:
                stack.append(2 * i + 1)
                stack.append(2 * i)

    def _set(self, slot: int, free: tuple[int, int, int]) -> None:
        cpu, memory, pods = self._cpu, self._memory, self._pods
        i = self._leaves + slot
        cpu[i], memory[i], pods[i] = free
        i //= 2
        while i:
            left, right = 2 * i, 2 * i + 1
            c, m, p = max(cpu[left], cpu[right]), max(memory[left], memory[right]), max(pods[left], pods[right])
            if cpu[i] == c and memory[i] == m and pods[i] == p:
                break  # the ranges above are unchanged too
            cpu[i], memory[i], pods[i] = c, m, p
            i //= 2

    def _grow(self) -> None:
        """Twice the leaves: the tree built again over the slots so far (amortised O(1) a claim)."""
        old_leaves = self._leaves
        leaves = old_leaves * 2
        trees = []
        for old in (self._cpu, self._memory, self._pods):
            tree = [_NONE] * (2 * leaves)
            tree[leaves:leaves + old_leaves] = old[old_leaves:2 * old_leaves]
            for i in range(leaves - 1, 0, -1):
                tree[i] = max(tree[2 * i], tree[2 * i + 1])
            trees.append(tree)
        self._cpu, self._memory, self._pods = trees
        self._leaves = leaves


__all__ = ["OpenClaims", "room"]
