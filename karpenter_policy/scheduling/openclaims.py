"""The cost strategy's open node claims of one template, in creation order — indexed by free room once there are
many of them, so that best fit does not ask the full ones.

The cost strategy's best fit (`scheduler._Run._best_fit`) offers a pod the open claims of the templates that may
take it, in the order they were made, and compares the first five that accept it. The claims stay open while they
can take the run's smallest pod, so when a template has many, most of those a large pod is offered are too full for
it: at 100 Provisioners × 10,000 workloads a scan asked ~76 claims a pod, 1.72 million `NodeClaim.check` calls,
most refused for room.

:class:`OpenClaims` keeps one template's claims in creation order. While it has made at most :data:`INDEX_FROM`
claims it offers every open one, as a plain scan does: with few claims, asking them is cheaper than keeping their
room (the scheduler's many small simulations — a controller's disruption decisions and plans under churn — make a
handful of claims each, and an index kept for them cost more than it saved: issue #23). From the claim after that,
it keeps in a :class:`~karpenter_policy.scheduling.roomtree.RoomTree` the room of every claim — a claim's free
amount of a resource being the most any of its instance type options has, less what the claim requests — and
offers only the claims whose free cpu, memory and pod slots each hold the pod's request. A claim left out is one
whose `check` would refuse for room (no option holds the claim's requests and the pod's together, so none holds
them on that one resource either), so either way the claims offered are a subsequence of the scan that keeps every
claim that could accept: the first five that accept are the scan's first five, and the plan is the scan's.

The scheduler gives a claim's new room with :meth:`OpenClaims.update` whenever its requests or options change (a
pod joined it, its price cap was lifted), and :meth:`OpenClaims.close` removes it.
"""

from __future__ import annotations

from collections.abc import Iterator

from karpenter_policy.scheduling.nodes import NodeClaim
from karpenter_policy.scheduling.roomtree import NO_ROOM, Room, RoomTree
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, Vector

#: Claims of one template a run makes before their room is indexed: up to this many, every open claim is offered.
#: Measured (benchmarks/README.md, "The open-claim index and churn"): below it the scan is cheaper.
INDEX_FROM = 16

_CLOSED = (NO_ROOM, NO_ROOM, NO_ROOM)


def room(claim: NodeClaim) -> Room:
    """The free cpu, memory and pod slots of the claim: on each, the most any of its options has (allocatable,
    the DaemonSet overhead being among its requests) less what it requests, at least 0 (a pod that requests none
    of a resource is never refused on it); below any request when it has no option left."""
    shapes, options, requests = claim.template.shapes, claim.options, claim.requests
    if not options:
        return _CLOSED
    return (
        max(shapes.most(CPU_I, options) - requests[CPU_I], 0),
        max(shapes.most(MEMORY_I, options) - requests[MEMORY_I], 0),
        max(shapes.most(PODS_I, options) - requests[PODS_I], 0),
    )


class OpenClaims:
    """The open claims of one template in creation order, their room indexed once more than `index_from` were made
    (see the module docstring). Each claim keeps the slot :meth:`add` gave it; a closed slot holds None."""

    __slots__ = ("_index_from", "_tree", "created", "slots")

    def __init__(self, index_from: int | None = None) -> None:
        """`index_from`: :data:`INDEX_FROM` unless given."""
        #: the claims by slot, in creation order (None: closed)
        self.slots: list[NodeClaim | None] = []
        #: each slot's creation number in the run (the order claims of several templates are merged in)
        self.created: list[int] = []
        self._index_from = INDEX_FROM if index_from is None else index_from
        self._tree: RoomTree | None = None  # the claims' room, once indexed

    def __len__(self) -> int:
        return sum(1 for claim in self.slots if claim is not None)

    @property
    def indexed(self) -> bool:
        """Whether only the claims with room are offered (more than `index_from` claims were made)."""
        return self._tree is not None

    def add(self, claim: NodeClaim, created: int) -> int:
        """Open `claim` (the run's `created`-th claim, made after every claim here); its slot."""
        slot = len(self.slots)
        self.slots.append(claim)
        self.created.append(created)
        tree = self._tree
        if tree is not None:
            if slot == tree.capacity:
                tree.grow()
            tree.set(slot, room(claim))
        elif len(self.slots) > self._index_from:
            self._tree = RoomTree(_CLOSED if each is None else room(each) for each in self.slots)
        return slot

    def update(self, slot: int, claim: NodeClaim) -> None:
        """The claim at `slot` changed its requests or options: its room again (when indexed)."""
        if self._tree is not None and self.slots[slot] is claim:
            self._tree.set(slot, room(claim))

    def close(self, slot: int) -> None:
        """The claim at `slot` takes no more pods: it is never offered again."""
        self.slots[slot] = None
        if self._tree is not None:
            self._tree.set(slot, _CLOSED)

    def holding(self, requests: Vector) -> Iterator[tuple[int, NodeClaim]]:
        """(creation number, claim) of the open claims that may hold `requests`, in creation order: when indexed,
        exactly those whose free cpu, memory and pod slots each hold it; before, every open claim. Lazy: the
        caller stops when it has enough, and changes nothing while it walks."""
        slots, created = self.slots, self.created
        walk = range(len(slots)) if self._tree is None else self._tree.holding(requests)
        return ((created[slot], claim) for slot in walk if (claim := slots[slot]) is not None)

    def claims(self, requests: Vector) -> Iterator[NodeClaim]:
        """The claims of :meth:`holding`, without their creation numbers."""
        slots = self.slots
        if self._tree is None:
            return (claim for claim in slots if claim is not None)
        return (claim for slot in self._tree.holding(requests) if (claim := slots[slot]) is not None)


__all__ = ["INDEX_FROM", "OpenClaims", "room"]
