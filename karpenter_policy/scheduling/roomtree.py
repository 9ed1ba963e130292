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

Two options serve the open claims of every template of a run in one tree. `extra` resources (vector indexes:
ephemeral storage, GPUs …) are kept after the three, and a request for one of them skips the ranges without room
for it too — a run's GPU nodes fill up on GPUs long before cpu or memory. `tags` keep a tag per position (bits:
one per template) and, for every range, the union of its positions' tags; :meth:`RoomTree.holding` given `among`
then skips a range whose tags share no bit with it, so one walk yields the positions of the templates asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, Vector

#: The room of a position that holds nothing: below any request.
NO_ROOM = -(1 << 80)

#: Free cpu, memory and pod slots (then the tree's `extra` resources, in its order).
Room = tuple[int, ...]


class RoomTree:
    """Free cpu, memory and pod slots (and `extra` resources) of positions 0 … `capacity` - 1, with their tags when
    tagged (see the module docstring)."""

    __slots__ = ("_cpu", "_extra", "_memory", "_pods", "_rest", "_tags", "capacity")

    def __init__(
        self, rooms: Iterable[Room] = (), tags: Iterable[int] | None = None, extra: tuple[int, ...] = ()
    ) -> None:
        """A tree of the given rooms, at positions 0, 1, … (built bottom-up, O(n)); the other positions up to a
        power of two hold nothing. `tags` (one per room): a tagged tree. `extra`: the vector indexes of the resources
        each room gives after cpu, memory and pod slots."""
        given = list(rooms)
        capacity = 1
        while capacity < len(given):
            capacity *= 2
        #: how many positions the tree has (a power of two)
        self.capacity = capacity
        self._extra = extra
        width = 3 + len(extra)
        columns = [[NO_ROOM] * (2 * capacity) for _ in range(width)]
        for position, room in enumerate(given):
            leaf = capacity + position
            for column, amount in zip(columns, room, strict=True):
                column[leaf] = amount
        self._cpu, self._memory, self._pods, *self._rest = columns
        self._tags: list[int] | None = None
        if tags is not None:
            self._tags = [0] * (2 * capacity)
            for position, tag in enumerate(tags):
                self._tags[capacity + position] = tag
        self._build()

    def _build(self) -> None:
        cpu, memory, pods, rest, tags = self._cpu, self._memory, self._pods, self._rest, self._tags
        for i in range(self.capacity - 1, 0, -1):
            left, right = 2 * i, 2 * i + 1
            cpu[i] = max(cpu[left], cpu[right])
            memory[i] = max(memory[left], memory[right])
            pods[i] = max(pods[left], pods[right])
            for column in rest:
                column[i] = max(column[left], column[right])
            if tags is not None:
                tags[i] = tags[left] | tags[right]

    def set(self, position: int, room: Room, tag: int = 0) -> None:
        """The room of `position` is now `room` (and, in a tagged tree, its tag `tag`)."""
        cpu, memory, pods, rest, tags = self._cpu, self._memory, self._pods, self._rest, self._tags
        i = self.capacity + position
        cpu[i], memory[i], pods[i] = room[0], room[1], room[2]
        for column, amount in zip(rest, room[3:], strict=True):
            column[i] = amount
        if tags is not None:
            tags[i] = tag
        i //= 2
        while i:
            left, right = 2 * i, 2 * i + 1
            c, m, p = max(cpu[left], cpu[right]), max(memory[left], memory[right]), max(pods[left], pods[right])
            same = cpu[i] == c and memory[i] == m and pods[i] == p
            cpu[i], memory[i], pods[i] = c, m, p
            for column in rest:
                e = max(column[left], column[right])
                if column[i] != e:
                    same = False
                    column[i] = e
            if tags is not None:
                t = tags[left] | tags[right]
                if tags[i] != t:
                    same = False
                    tags[i] = t
            if same:
                break  # the ranges above are unchanged too
            i //= 2

    def copy(self) -> RoomTree:
        """An independent tree of the same rooms and tags (O(n) list copies, no rebuild)."""
        tree = RoomTree.__new__(RoomTree)
        tree.capacity, tree._extra = self.capacity, self._extra
        tree._cpu, tree._memory, tree._pods = list(self._cpu), list(self._memory), list(self._pods)
        tree._rest = [list(column) for column in self._rest]
        tree._tags = list(self._tags) if self._tags is not None else None
        return tree

    def grow(self) -> None:
        """Twice the positions: the new ones hold nothing (the tree built again, O(n))."""
        old = self.capacity
        capacity = self.capacity = old * 2

        def grown(tree: list[int], empty: int) -> list[int]:
            bigger = [empty] * (2 * capacity)
            bigger[capacity:capacity + old] = tree[old:2 * old]
            return bigger

        self._cpu, self._memory, self._pods = (grown(tree, NO_ROOM) for tree in (self._cpu, self._memory, self._pods))
        self._rest = [grown(column, NO_ROOM) for column in self._rest]
        if self._tags is not None:
            self._tags = grown(self._tags, 0)
        self._build()

    def holding(self, requests: Vector, among: int = 0) -> Iterator[int]:
        """The positions whose free cpu, memory, pod slots and `extra` resources each hold `requests` — in a tagged
        tree, of those whose tag shares a bit with `among` —, in order. Lazy: the caller stops when it has enough
        (and changes no room while it walks)."""
        want_cpu, want_memory, want_pods = requests[CPU_I], requests[MEMORY_I], requests[PODS_I]
        cpu, memory, pods, tags, leaves = self._cpu, self._memory, self._pods, self._tags, self.capacity
        # the extra resources asked for (most pods ask none: their walk is the three resources')
        wanted = [(column, requests[r]) for column, r in zip(self._rest, self._extra, strict=True) if requests[r] > 0]
        stack = [1]
        while stack:
            i = stack.pop()
            if cpu[i] < want_cpu or memory[i] < want_memory or pods[i] < want_pods:
                continue
            if tags is not None and not tags[i] & among:
                continue
            if wanted and any(column[i] < amount for column, amount in wanted):
                continue
            if i >= leaves:
                yield i - leaves
            else:
                stack.append(2 * i + 1)
                stack.append(2 * i)


__all__ = ["NO_ROOM", "Room", "RoomTree"]
