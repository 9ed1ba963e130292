"""Free room indexed by position: a segment tree of the largest free cpu, memory and pod slots over every range of
positions, walked left to right to find the positions whose room holds a request — the one walk the scheduler's
two room indexes share.

First fit over existing nodes (`firstfit.py`) and best fit over the cost strategy's open claims (`openclaims.py`)
both ask "which of these, in order, has room for this pod?". A plain scan asks every one; :class:`RoomTree` keeps,
for every range of positions, the most free cpu, memory and pod slots any position of it has, and skips a whole
range when one of the three is below the request. The positions it yields are therefore exactly those whose own
room holds the request, in order — a subsequence of the scan that keeps every position that could accept.

A position's room is set with :meth:`RoomTree.set` (O(log n): the ranges above it again, stopping where nothing
changed); the tree doubles its positions with :meth:`RoomTree.grow` (amortised O(1) a position). A position that
holds nothing has :data:`NO_ROOM`, below any request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, Vector

#: The room of a position that holds nothing: below any request.
NO_ROOM = -(1 << 80)

#: Free cpu, memory and pod slots.
Room = tuple[int, int, int]


class RoomTree:
    """Free cpu, memory and pod slots of positions 0 … `capacity` - 1 (see the module docstring)."""

    __slots__ = ("_cpu", "_memory", "_pods", "capacity")

    def __init__(self, rooms: Iterable[Room] = ()) -> None:
        """A tree of the given rooms, at positions 0, 1, … (built bottom-up, O(n)); the other positions up to a
        power of two hold nothing."""
        given = list(rooms)
        capacity = 1
        while capacity < len(given):
            capacity *= 2
        #: how many positions the tree has (a power of two)
        self.capacity = capacity
        self._cpu = [NO_ROOM] * (2 * capacity)
        self._memory = [NO_ROOM] * (2 * capacity)
        self._pods = [NO_ROOM] * (2 * capacity)
        for position, (cpu, memory, pods) in enumerate(given):
            leaf = capacity + position
            self._cpu[leaf], self._memory[leaf], self._pods[leaf] = cpu, memory, pods
        self._build()

    def _build(self) -> None:
        cpu, memory, pods = self._cpu, self._memory, self._pods
        for i in range(self.capacity - 1, 0, -1):
            left, right = 2 * i, 2 * i + 1
            cpu[i] = max(cpu[left], cpu[right])
            memory[i] = max(memory[left], memory[right])
            pods[i] = max(pods[left], pods[right])

    def set(self, position: int, room: Room) -> None:
        """The room of `position` is now `room`."""
        cpu, memory, pods = self._cpu, self._memory, self._pods
        i = self.capacity + position
        cpu[i], memory[i], pods[i] = room
        i //= 2
        while i:
            left, right = 2 * i, 2 * i + 1
            c, m, p = max(cpu[left], cpu[right]), max(memory[left], memory[right]), max(pods[left], pods[right])
            if cpu[i] == c and memory[i] == m and pods[i] == p:
                break  # the ranges above are unchanged too
            cpu[i], memory[i], pods[i] = c, m, p
            i //= 2

    def grow(self) -> None:
        """Twice the positions: the new ones hold nothing (the tree built again, O(n))."""
        old = self.capacity
        capacity = self.capacity = old * 2
        trees = []
        for tree in (self._cpu, self._memory, self._pods):
            grown = [NO_ROOM] * (2 * capacity)
            grown[capacity:capacity + old] = tree[old:2 * old]
            trees.append(grown)
        self._cpu, self._memory, self._pods = trees
        self._build()

    def holding(self, requests: Vector) -> Iterator[int]:
        """The positions whose free cpu, memory and pod slots each hold `requests`, in order. Lazy: the caller
        stops when it has enough (and changes no room while it walks)."""
        want_cpu, want_memory, want_pods = requests[CPU_I], requests[MEMORY_I], requests[PODS_I]
        cpu, memory, pods, leaves = self._cpu, self._memory, self._pods, self.capacity
        stack = [1]
        while stack:
            i = stack.pop()
            if cpu[i] < want_cpu or memory[i] < want_memory or pods[i] < want_pods:
                continue
            if i >= leaves:
                yield i - leaves
            else:
                stack.append(2 * i + 1)
                stack.append(2 * i)


__all__ = ["NO_ROOM", "Room", "RoomTree"]
