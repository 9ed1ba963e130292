"""The pods already running, as topology asks for them: by namespace and label, never by scanning them all.

Topology spread and pod (anti-)affinity count the running pods a group's selector selects (Karpenter's
`countDomains`), and every running pod with a required anti-affinity term keeps others away (an *inverse* group).
A cluster of 100,000 pods cannot be scanned for each group of each scheduling run; :class:`RunningPods` keeps
them indexed by namespace and by (label key, value), and by whether they carry required anti-affinity, so a
group's candidates are the pods of its namespaces that carry one of its `matchLabels` (the group's selector still
decides each one). It is updated in O(1) per pod (:meth:`add`, :meth:`remove`): the controller keeps one for the
life of the process; `check --workloads` builds one from a list.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from karpenter_policy.model.podtopology import NamespaceScope
from karpenter_policy.model.selectors import LabelSelector
from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling.pods import Pod

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class ClusterPod:
    """A pod already running, for counting: its shape and the labels (and taints) of its node."""

    pod: Pod
    node_name: str
    node_labels: Mapping[str, str]
    #: asked only by v1.14.1's `nodeTaintsPolicy: Honor` (unknown: none)
    node_taints: tuple[Taint, ...] = ()


@runtime_checkable
class PodsForTopology(Protocol):
    """What topology asks of the running pods (see the module docstring)."""

    def anti_affine(self) -> list[ClusterPod]:
        """The pods with a required pod anti-affinity term, in a stable order."""

    def candidates(
        self, scope: NamespaceScope, selector: LabelSelector, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> list[ClusterPod]:
        """The pods a group of `scope` and `selector` may select (a superset: the group decides each), in a stable
        order."""


class RunningPods:
    """Running pods indexed for topology (see the module docstring). Not thread-safe: the owner locks."""

    def __init__(self, pods: Iterable[ClusterPod] = ()) -> None:
        self._by_uid: dict[str, ClusterPod] = {}
        self._by_namespace: dict[str, dict[str, ClusterPod]] = {}
        self._by_label: dict[tuple[str, str, str], dict[str, ClusterPod]] = {}  # (namespace, key, value)
        self._anti_affine: dict[str, ClusterPod] = {}
        for pod in pods:
            self.add(pod)

    def __len__(self) -> int:
        return len(self._by_uid)

    def __iter__(self) -> Iterator[ClusterPod]:
        return iter(list(self._by_uid.values()))

    @staticmethod
    def _uid(running: ClusterPod) -> str:
        return running.pod.uid or running.pod.key

    def add(self, running: ClusterPod) -> None:
        """Add a pod (or replace what is known of it)."""
        uid = self._uid(running)
        if uid in self._by_uid:
            self.remove(uid)
        shape = running.pod.shape
        self._by_uid[uid] = running
        self._by_namespace.setdefault(shape.namespace, {})[uid] = running
        for key, value in shape.label_map.items():
            self._by_label.setdefault((shape.namespace, key, value), {})[uid] = running
        if any(term.required for term in shape.topology.anti_affinity):
            self._anti_affine[uid] = running

    def remove(self, uid: str) -> None:
        """Forget the pod of that uid (nothing when it is not held)."""
        running = self._by_uid.pop(uid, None)
        if running is None:
            return
        shape = running.pod.shape
        _discard(self._by_namespace, shape.namespace, uid)
        for key, value in shape.label_map.items():
            _discard(self._by_label, (shape.namespace, key, value), uid)
        self._anti_affine.pop(uid, None)

    def anti_affine(self) -> list[ClusterPod]:
        """The pods with a required pod anti-affinity term, in a stable order."""
        return sorted(self._anti_affine.values(), key=_order)

    def candidates(
        self, scope: NamespaceScope, selector: LabelSelector, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> list[ClusterPod]:
        """The pods a group of `scope` and `selector` may select (a superset: the group decides each), in a
        stable order."""
        if selector.selects_nothing:
            return []
        namespaces = [n for n in self._by_namespace if scope.includes(n, namespace_labels)]
        found: dict[str, ClusterPod] = {}
        for namespace in namespaces:
            if selector.match_labels:
                key, value = selector.match_labels[0]
                found.update(self._by_label.get((namespace, key, value), {}))
            else:
                found.update(self._by_namespace.get(namespace, {}))
        return sorted(found.values(), key=_order)


class WithoutNodes:
    """The running pods but those on `nodes` (what a disruption decision asks: the candidates gone)."""

    def __init__(self, running: PodsForTopology, nodes: Collection[str]) -> None:
        self.running = running
        self.nodes = nodes

    def anti_affine(self) -> list[ClusterPod]:
        """The anti-affine pods, those on the nodes left out excepted."""
        return [p for p in self.running.anti_affine() if p.node_name not in self.nodes]

    def candidates(
        self, scope: NamespaceScope, selector: LabelSelector, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> list[ClusterPod]:
        found = self.running.candidates(scope, selector, namespace_labels)
        return [p for p in found if p.node_name not in self.nodes]


class WithoutPods:
    """The running pods but `uids` (what provisioning asks: the pods it places again count where they will go, not
    where they run — v1.14.1's topology `excludedPods`, core pkg/controllers/provisioning/scheduling/topology.go)."""

    def __init__(self, running: PodsForTopology, uids: Collection[str]) -> None:
        self.running = running
        self.uids = uids

    def anti_affine(self) -> list[ClusterPod]:
        """The anti-affine pods, the ones left out excepted."""
        return [p for p in self.running.anti_affine() if p.pod.uid not in self.uids]

    def candidates(
        self, scope: NamespaceScope, selector: LabelSelector, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> list[ClusterPod]:
        found = self.running.candidates(scope, selector, namespace_labels)
        return [p for p in found if p.pod.uid not in self.uids]


def as_running(pods: PodsForTopology | Iterable[ClusterPod]) -> PodsForTopology:
    """An index of `pods` (anything that answers topology's questions is returned as it is)."""
    # this module's own indexes asked first (isinstance stops at the first match): a protocol's isinstance is slow,
    # and a disruption decision asks it for every run of every simulation
    if isinstance(pods, (RunningPods, WithoutNodes, WithoutPods, PodsForTopology)):
        return pods
    return RunningPods(pods)


def _order(running: ClusterPod) -> tuple[str, str, str]:
    return running.pod.namespace, running.pod.name, running.node_name


def _discard(index: dict[K, dict[str, ClusterPod]], key: K, uid: str) -> None:
    bucket = index.get(key)
    if bucket is not None:
        bucket.pop(uid, None)
        if not bucket:
            del index[key]


__all__ = ["ClusterPod", "PodsForTopology", "RunningPods", "WithoutNodes", "WithoutPods", "as_running"]
