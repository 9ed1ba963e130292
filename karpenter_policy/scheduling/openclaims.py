"""The cost strategy's open node claims of one run, of every template, in creation order — indexed by free room and
template once there are many of them, so that best fit asks neither the full ones nor those of other templates.

The cost strategy's best fit (`scheduler._Run._best_fit`) offers a pod the open claims of the templates that may
take it, in the order they were made, and compares the first five that accept it. The claims stay open while they
can take the run's smallest pod, so when there are many, most of those a large pod is offered are too full for
it: at 100 Provisioners × 10,000 workloads a scan asked ~76 claims a pod, 1.72 million `NodeClaim.check` calls,
most refused for room.

:class:`OpenClaims` keeps the run's claims in creation order, each with its template's bit. While the run has made
at most :data:`INDEX_FROM` claims it offers every open one of the templates asked, as a plain scan does: with few
claims, asking them is cheaper than keeping their room (the scheduler's many small simulations — a controller's
disruption decisions and plans under churn — make a handful of claims each, and an index kept for them cost more
than it saved: issue #23). From the claim after that, it keeps in a tagged
:class:`~karpenter_policy.scheduling.roomtree.RoomTree` the room of every claim — a claim's free amount of a
resource being the most any of its instance type options has, less what the claim requests — and its template's
bit, and one walk offers only the claims of the templates asked whose free cpu, memory and pod slots each hold the
pod's request. A claim left out is one of a template not asked or one whose `check` would refuse for room (no
option holds the claim's requests and the pod's together, so none holds them on that one resource either), so
either way the claims offered are a subsequence of the scan that keeps every claim that could accept: the first
five that accept are the scan's first five, and the plan is the scan's.

The room counts every resource instance types offer, not only cpu, memory and pod slots: GPU nodes fill up on GPUs
while cpu and memory are left, and stay open for the batch's small pods. (Until issue #27's item 6 each template
kept a tree of cpu, memory and pod slots of its own, indexed past 16 claims of that template, and best fit merged
the walks of the templates asked by creation number: at 100 Provisioners × 1,000 workloads few templates made more
than 16 claims, so most were scanned, GPU nodes out of GPUs were offered to GPU pods, and every pod started a walk
per template asked — best fit met 24,959 claims without room for the pod against 4,024 that took it; now 45.)

The scheduler gives a claim's new room with :meth:`OpenClaims.update` whenever its requests or options change (a
pod joined it, its price cap was lifted), and :meth:`OpenClaims.close` removes it.
"""

from __future__ import annotations

from collections.abc import Iterator

from karpenter_policy.scheduling.nodes import NodeClaim
from karpenter_policy.scheduling.roomtree import NO_ROOM, Room, RoomTree
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, RESOURCES, Vector

#: Claims a run makes before their room is indexed: up to this many, every open claim of the templates asked is
#: offered. Measured per template (benchmarks/README.md, "The open-claim index and churn"): below it the scan is
#: cheaper; a run of the controller's small simulations makes at most this many in all.
INDEX_FROM = 16

#: The resources a claim's room gives after cpu, memory and pod slots (every other one instance types offer).
EXTRA: tuple[int, ...] = tuple(r for r in range(len(RESOURCES)) if r not in (CPU_I, MEMORY_I, PODS_I))

#: The resources of a claim's room, in its order.
ROOM_ORDER: tuple[int, ...] = (CPU_I, MEMORY_I, PODS_I, *EXTRA)

_CLOSED = (NO_ROOM,) * len(ROOM_ORDER)


def room(claim: NodeClaim) -> Room:
    """The free cpu, memory, pod slots and :data:`EXTRA` resources of the claim: on each, the most any of its options
    has (allocatable, the DaemonSet overhead being among its requests) less what it requests, at least 0 (a pod that
    requests none of a resource is never refused on it); below any request when it has no option left."""
    shapes, options, requests = claim.template.shapes, claim.options, claim.requests
    if not options:
        return _CLOSED
    return tuple(max(shapes.most(r, options) - requests[r], 0) for r in ROOM_ORDER)


class OpenClaims:
    """The open claims of one run in creation order, each with its template's bit, their room and bits indexed once
    more than `index_from` were made (see the module docstring). A claim's slot is its creation number in the run
    (:meth:`add` gives it); a closed slot holds None."""

    __slots__ = ("_index_from", "_tree", "slots", "tags")

    def __init__(self, index_from: int | None = None) -> None:
        """`index_from`: :data:`INDEX_FROM` unless given."""
        #: the claims by slot, in creation order (None: closed)
        self.slots: list[NodeClaim | None] = []
        #: each slot's template bit (1 << the template's position in the scheduler's order)
        self.tags: list[int] = []
        self._index_from = INDEX_FROM if index_from is None else index_from
        self._tree: RoomTree | None = None  # the claims' room and bits, once indexed

    def __len__(self) -> int:
        return sum(1 for claim in self.slots if claim is not None)

    @property
    def indexed(self) -> bool:
        """Whether only the claims with room are offered (more than `index_from` claims were made)."""
        return self._tree is not None

    def add(self, claim: NodeClaim, tag: int) -> int:
        """Open `claim`, of the template whose bit is `tag` (made after every claim here); its slot."""
        slot = len(self.slots)
        self.slots.append(claim)
        self.tags.append(tag)
        tree = self._tree
        if tree is not None:
            if slot == tree.capacity:
                tree.grow()
            tree.set(slot, room(claim), tag)
        elif len(self.slots) > self._index_from:
            self._tree = RoomTree(
                (_CLOSED if each is None else room(each) for each in self.slots),
                (0 if each is None else bit for each, bit in zip(self.slots, self.tags, strict=True)),
                EXTRA,
            )
        return slot

    def update(self, slot: int, claim: NodeClaim) -> None:
        """The claim at `slot` changed its requests or options: its room again (when indexed)."""
        if self._tree is not None and self.slots[slot] is claim:
            self._tree.set(slot, room(claim), self.tags[slot])

    def close(self, slot: int) -> None:
        """The claim at `slot` takes no more pods: it is never offered again."""
        self.slots[slot] = None
        if self._tree is not None:
            self._tree.set(slot, _CLOSED, 0)

    def holding(self, requests: Vector, among: int) -> Iterator[int]:
        """The slots of the open claims of the templates `among` (bits) that may hold `requests`, in creation
        order: when indexed, exactly those whose free cpu, memory and pod slots each hold it; before, every open
        claim of those templates. Lazy: the caller stops when it has enough, and changes nothing while it walks."""
        slots, tags = self.slots, self.tags
        if self._tree is None:
            return (slot for slot, claim in enumerate(slots) if claim is not None and tags[slot] & among)
        return self._tree.holding(requests, among)

    def claims(self, requests: Vector, among: int) -> Iterator[NodeClaim]:
        """The claims of :meth:`holding`."""
        slots, tags = self.slots, self.tags
        if self._tree is None:
            return (claim for claim, tag in zip(slots, tags, strict=True) if claim is not None and tag & among)
        return (claim for slot in self._tree.holding(requests, among) if (claim := slots[slot]) is not None)


__all__ = ["EXTRA", "INDEX_FROM", "ROOM_ORDER", "OpenClaims", "room"]
