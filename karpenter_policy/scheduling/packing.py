"""Pod orders for packing: the sequence in which first fit fills node claims evenly on every resource.

Karpenter's queue (largest cpu first) makes first fit fill a node's cpu with the cpu-heavy pods that come first
and leave its memory idle, while the memory-heavy pods that come last open nodes of their own. The balanced order
interleaves the pods so that every prefix of the sequence asks for cpu, memory and pod slots in the proportions
of the whole batch: a node filled from it runs out of every resource at about the same time. Within one request
shape the pods keep their queue order.

A pod with required pod affinity follows the pods it selects: it is never packed before the first of them
(`targets_first`). Packed first, a pod whose affinity also selects itself picks a domain of its own choosing
(Karpenter's bootstrap of self-affinity) and its target may then land elsewhere; Karpenter's queue happens to
place the target first whenever it is larger.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from karpenter_policy.model.podtopology import AffinityTerm
from karpenter_policy.scheduling.pods import Pod, PodShape
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, Vector

_BALANCED = (CPU_I, MEMORY_I, PODS_I)


def balanced_order(pods: Sequence[Pod]) -> list[Pod]:
    """`pods` in an order whose every prefix is as close as possible to the batch's own mix of cpu, memory and
    pod slots (greedy: the next pod is from the request shape that keeps the running totals most even relative to
    the batch totals; larger shapes first on ties)."""
    groups: dict[Vector, list[Pod]] = {}
    for pod in pods:
        groups.setdefault(pod.requests, []).append(pod)
    totals = [sum(v[r] * len(members) for v, members in groups.items()) or 1 for r in _BALANCED]
    shapes = sorted(groups, key=lambda v: tuple(-v[r] for r in _BALANCED))
    # (shape, its share of each of the three totals, minus the sum of its shares): the three resources spelled
    # out, as this loop runs pods × shapes times
    live = []
    for v in shapes:
        share = [v[r] / totals[j] for j, r in enumerate(_BALANCED)]
        live.append((v, share[0], share[1], share[2], -sum(share)))
    cursor = {v: 0 for v in shapes}
    running0 = running1 = running2 = 0.0
    order: list[Pod] = []
    while live:
        best = live[0]
        best_spread = best_tie = math.inf
        for entry in live:
            _, s0, s1, s2, tie = entry
            a, b, c = running0 + s0, running1 + s1, running2 + s2
            # max(a, b, c) - min(a, b, c), without the two calls
            if a < b:
                low, high = a, b
            else:
                low, high = b, a
            if c < low:
                low = c
            elif c > high:
                high = c
            spread = high - low
            if spread < best_spread or (spread == best_spread and tie < best_tie):
                best, best_spread, best_tie = entry, spread, tie
        v = best[0]
        order.append(groups[v][cursor[v]])
        cursor[v] += 1
        running0, running1, running2 = running0 + best[1], running1 + best[2], running2 + best[3]
        if cursor[v] == len(groups[v]):
            live.remove(best)
    return order


def follow_dependencies(order: Sequence[Pod], stuck: Sequence[Pod]) -> list[Pod]:
    """`order` with each stuck pod that has required pod affinity moved right behind the first pod its terms
    select (so that it lands on that pod's node while the node still has room); other pods keep their places."""
    moving = {pod.key: pod for pod in stuck if any(t.required for t in pod.shape.topology.affinity)}
    if not moving:
        return list(order)
    behind: dict[str, list[Pod]] = {}
    kept: list[Pod] = []
    for pod in order:
        if pod.key in moving:
            continue
        kept.append(pod)
    for pod in moving.values():
        terms = [t for t in pod.shape.topology.affinity if t.required]
        anchor = next(
            (
                other
                for other in kept
                if all(t.selector.matches(other.labels) and other.namespace in t.namespaces.names for t in terms)
            ),
            None,
        )
        behind.setdefault(anchor.key if anchor is not None else "", []).append(pod)
    result: list[Pod] = []
    for pod in kept:
        result.append(pod)
        result.extend(behind.get(pod.key, ()))
    result.extend(behind.get("", ()))
    return result


def targets_first(order: Sequence[Pod], namespace_labels: Mapping[str, Mapping[str, str]]) -> list[Pod]:
    """`order` with each pod that has required pod affinity held back until, for each of its required terms, a pod
    of another shape the term selects has come (when the batch has one); other pods keep their places. Pods that
    wait on each other in a cycle come at the end, in their order. Linear in the pods, plus one selector match per
    term and shape of the batch that carries the term's first label (or every shape, for a term without one)."""
    # Equal shapes are one shape here: each pod's is looked up once, by identity, for the first equal one (the
    # dicts below then find their keys without comparing shapes field by field).
    first: dict[PodShape, PodShape] = {}
    same: dict[int, PodShape] = {}  # id(a pod's shape) → the first shape equal to it
    for pod in order:
        if id(pod.shape) not in same:
            same[id(pod.shape)] = first.setdefault(pod.shape, pod.shape)
    shapes = list(first)
    by_label: dict[tuple[str, str], list[PodShape]] = {}
    for shape in shapes:
        for pair in shape.labels:
            by_label.setdefault(pair, []).append(shape)
    unmet: dict[PodShape, int] = {}  # shape → its required terms no pod of another shape has met yet
    # Per term, the (position of the follower's shape, follower, its term's index) still waiting on it; per target
    # shape, the terms that select it. A term is shared by many followers and selects many targets: listing
    # followers per target instead would be followers × targets.
    position = {shape: i for i, shape in enumerate(shapes)}
    waiting: dict[AffinityTerm, list[tuple[int, PodShape, int]]] = {}
    selected: dict[AffinityTerm, frozenset[PodShape]] = {}
    for shape in shapes:
        count = 0
        for index, term in enumerate(t for t in shape.topology.affinity if t.required):
            found = selected.get(term)
            if found is None:
                found = selected[term] = _targets(term, shapes, by_label, namespace_labels)
            if len(found) > 1 or (found and shape not in found):  # some shape other than its own
                count += 1
                waiting.setdefault(term, []).append((position[shape], shape, index))
        if count:
            unmet[shape] = count
    if not unmet:
        return list(order)
    terms_of: dict[PodShape, list[AffinityTerm]] = {}
    for term in waiting:
        for target in selected[term]:
            terms_of.setdefault(target, []).append(term)
    arrived: set[PodShape] = set()
    held: dict[PodShape, list[Pod]] = {}
    result: list[Pod] = []

    def arrive(shape: PodShape) -> None:
        """A pod of `shape` is in the order: release the pods that waited only on it (and those they release)."""
        pending = [shape]
        while pending:
            current = pending.pop()
            if current in arrived:
                continue
            arrived.add(current)
            at = position[current]
            # the terms it meets, of followers of other shapes, in the followers' order then their terms' order
            met: list[tuple[int, PodShape, int]] = []
            for term in terms_of.get(current, ()):
                still: list[tuple[int, PodShape, int]] = []
                for entry in waiting[term]:
                    (still if entry[0] == at else met).append(entry)
                waiting[term] = still
            met.sort(key=lambda entry: (entry[0], entry[2]))
            for _, follower, _ in met:
                unmet[follower] -= 1
                if not unmet[follower] and follower in held:
                    result.extend(held.pop(follower))
                    pending.append(follower)

    for pod in order:
        shape = same[id(pod.shape)]
        if unmet.get(shape, 0) or shape in held:
            held.setdefault(shape, []).append(pod)
            continue
        result.append(pod)
        arrive(shape)
    for pods in held.values():
        result.extend(pods)
    return result


def _targets(
    term: AffinityTerm,
    shapes: Sequence[PodShape],
    by_label: Mapping[tuple[str, str], Sequence[PodShape]],
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> frozenset[PodShape]:
    """The shapes of the batch whose pods the term selects (those carrying its first matchLabels pair, when it
    has one, are the only candidates)."""
    selector = term.selector
    candidates = by_label.get(selector.match_labels[0], ()) if selector.match_labels else shapes
    return frozenset(
        other
        for other in candidates
        if selector.matches(other.label_map) and term.namespaces.includes(other.namespace, namespace_labels)
    )
