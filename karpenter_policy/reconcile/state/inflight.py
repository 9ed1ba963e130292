"""Nodes being launched: instances the controller launched whose Node or pod bindings the cluster does not show yet.

Between CreateFleet returning and the cluster (or an informer's cache of it) showing the Node with its pods bound,
a launch is *in flight*. Each entry holds the Node object to register and the pods planned onto it, and lasts
until the cluster shows the Node and every planned pod bound (or gone). Meanwhile:

* the entry counts as an existing node for scheduling, with its planned pods' requests, and those pods are not
  pending — so a second batch never launches again for them, however stale the cache;
* a registration or binding that failed (the API was unavailable) is retried on the next pass.

An entry whose Node was seen and then disappears, or that never shows up within `registration_timeout`
seconds of its launch, is dropped (the pods are pending again; garbage collection of the instance is the
disruption controller's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from karpenter_policy.cloud.provider import Instance
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.scheduling import Pod


@dataclass(eq=False)
class InFlightNode:
    """One launch: the instance, the Node to register, the pods planned onto it (by uid) and what is done."""

    instance: Instance
    node: Obj
    template: str
    launched_at: float
    pods: dict[str, Pod] = field(default_factory=dict)  # uid → pod
    registered: bool = False
    bound: set[str] = field(default_factory=set)  # uids bound by the controller (or found bound elsewhere)
    seen: bool = False  # the cluster showed the Node once
    adopted: bool = False  # launched before a restart or a take-over: its Node is registered here, not created
    #: a NodePool's launch: the NodeClaim to create before the Node (`reconcile.claims`), and what its status says
    claim: Obj | None = None
    claim_status: Obj = field(default_factory=dict)
    claim_created: bool = False

    @property
    def name(self) -> str:
        """The name of the Node registered for the launch."""
        return objects.name(self.node)

    def unbound(self) -> list[Pod]:
        """The pods planned onto it and not bound yet."""
        return [pod for uid, pod in self.pods.items() if uid not in self.bound]


class InFlight:
    """The launches in flight, by node name. Thread-safe (provisioning and disruption both launch)."""

    def __init__(self) -> None:
        self._entries: dict[str, InFlightNode] = {}
        self._lock = threading.RLock()

    def add(self, entry: InFlightNode) -> None:
        """Hold a launch in flight (replacing one of the same node name)."""
        with self._lock:
            self._entries[entry.name] = entry

    def __iter__(self) -> Iterator[InFlightNode]:
        with self._lock:
            return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> InFlightNode | None:
        """The launch in flight for that node name, None when there is none."""
        return self._entries.get(name)

    def planned(self) -> dict[str, InFlightNode]:
        """uid of every pod planned onto an in-flight node → its entry."""
        with self._lock:
            return {uid: entry for entry in self._entries.values() for uid in list(entry.pods)}

    def fingerprint(self) -> object:
        """Equal as long as no launch was added, settled or bound to (what a memoized scheduling input relies on)."""
        with self._lock:
            return tuple(
                (e.name, e.registered, frozenset(e.pods), frozenset(e.bound)) for e in self._entries.values()
            )

    def provider_ids(self) -> set[str]:
        """The providerIDs of the instances in flight."""
        with self._lock:
            return {entry.instance.provider_id for entry in self._entries.values()}

    def settle(
        self, present: Callable[[str], bool], settled: Callable[[str], bool], now: float, timeout: float
    ) -> list[InFlightNode]:
        """Drop the entries the cluster now shows settled (`present(node)`, and `settled(uid)` — bound or gone —
        for every planned pod), and those whose Node vanished or never came; return the dropped ones."""
        dropped = []
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            shown = present(entry.name)
            if shown:
                entry.seen = True
            pods_done = all(settled(uid) for uid in entry.pods)
            vanished = entry.seen and not shown
            stale = not entry.seen and now - entry.launched_at > timeout
            if (shown and entry.registered and pods_done) or vanished or stale:
                with self._lock:
                    self._entries.pop(entry.name, None)
                dropped.append(entry)
        return dropped


__all__ = ["InFlight", "InFlightNode"]
