"""The snapshot's PersistentVolumeClaims, PersistentVolumes and StorageClasses, and what they make of the pods a plan
moves: read as the controller reads them (`model.volumes`, the one reading; `scheduling.volumes.with_volumes`, the
one way of applying it), so a pod keeps to its volume's zone in every wave as in the controller's disruption
simulation (Karpenter v0.31.1 `VolumeTopology.Inject`, v1.14.1 `SimulateScheduling` → the volume requirements).

* A moved pod with a claim (:meth:`SnapshotVolumes.volumed`) gets its volumes' requirements in its required terms
  — a bound claim its PersistentVolume's first node-affinity term, an unbound one its StorageClass's first
  `allowedTopologies` term — wherever the plan moves it (a drift command's simulation, provisioning after a
  forceful deletion, consolidation). An object the snapshot lacks adds none, as the controller does for a running
  pod (Karpenter logs the lookup's error and goes on).
* Its *pending* form also carries the reason Karpenter v1.14.1 ignores it (`model.volumes.ignored_v1`, its
  `ValidatePersistentVolumeClaims`): what the provisioner reads once the pod is evicted and pending — after a
  NodePool's node goes forcefully (removed, expired) its pods are provisioned for, and a pod v1.14.1 ignores is left
  pending with that reason. A drift command's simulation reads the candidate's pods without that validation
  (v1.14.1 validates only `GetPendingPods`' pods), as the controller's disruption does.
* Which kinds were read: a kind is read when the snapshot holds an object of it, or when `--kubeconfig` listed it
  (`Snapshot.volumes_listed`). Only when all three were read is an object the snapshot lacks *missing* (v1.14.1's
  "… not found"); else it is not judged. Without PersistentVolumeClaims the pods are read as before — no volume
  topology — and :meth:`SnapshotVolumes.note` says so, naming what to add to the `kubectl get` command: never read
  as volume-less silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from karpenter_policy.commands.plan.snapshot import (
    KUBECTL_GET,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    VOLUME_KINDS,
    Snapshot,
)
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.volumes import READERS, Volumes, ignored_v1, pod_volumes, requirements_of
from karpenter_policy.model.volumes import ignored_v031 as ignored_v031_of
from karpenter_policy.scheduling import Pod, PodShape
from karpenter_policy.scheduling.volumes import with_volumes

__all__ = ["SnapshotVolumes", "kinds_read"]

#: How `kubectl get` names each volume kind.
_SHORT = {PERSISTENT_VOLUME_CLAIM: "pvc", PERSISTENT_VOLUME: "pv", STORAGE_CLASS: "storageclass"}
_PLURAL = {PERSISTENT_VOLUME_CLAIM: "PersistentVolumeClaims", PERSISTENT_VOLUME: "PersistentVolumes",
           STORAGE_CLASS: "StorageClasses"}


def kinds_read(snapshot: Snapshot) -> frozenset[str]:
    """The volume kinds the snapshot read: those it holds an object of, every one when `--kubeconfig` listed them."""
    if snapshot.volumes_listed:
        return frozenset(VOLUME_KINDS)
    return frozenset(kind for kind in VOLUME_KINDS if snapshot.of_kind(kind))


@dataclass(slots=True)
class SnapshotVolumes:
    """The snapshot's volume objects by key (`index`), which kinds it read (`read`), and how many pods with claims
    were read without their volumes (`unread`: no PersistentVolumeClaim was read) and with them (`claimed`)."""

    index: Volumes = field(default_factory=Volumes)
    read: frozenset[str] = frozenset()
    unread: int = 0
    #: the pods with claims read with their volumes
    claimed: int = 0
    #: shapes with volume requirements (and a v1.14.1 refusal) applied, by the shape's id and what was applied
    _shapes: dict[tuple[int, Requirements, tuple[Requirements, ...] | None, str | None, str | None], PodShape] = field(
        default_factory=dict
    )

    @classmethod
    def of(cls, snapshot: Snapshot) -> SnapshotVolumes:
        """The volume objects of a snapshot whose shapes were checked (`snapshot.py` reads each with the same
        reader: nothing raises here)."""
        volumes = cls(read=kinds_read(snapshot))
        for kind in VOLUME_KINDS:
            for item in snapshot.of_kind(kind):
                volumes.index.put(READERS[kind](item))
        return volumes

    @property
    def complete(self) -> bool:
        """Every volume kind was read: an object the snapshot lacks is missing from the cluster."""
        return self.read == frozenset(VOLUME_KINDS)

    def volumed(self, pod: Pod, spec: Mapping[str, Any], name: str, namespace: str) -> tuple[Pod, Pod | None]:
        """The moved pod with its volumes' requirements, and its pending form when Karpenter v1.14.1 ignores it for
        its claims (None: it does not, or nothing tells). A pod without a claim comes back as it is."""
        found = pod_volumes(spec, name)
        if not found:
            return pod, None
        if PERSISTENT_VOLUME_CLAIM not in self.read:
            self.unread += 1
            return pod, None
        self.claimed += 1
        wanted = requirements_of(found, namespace, self.index)
        alternatives, too_many = wanted.v1_reading()  # v1.14.1's reading, as the controller's
        ignored = ignored_v1(found, namespace, self.index, complete=self.complete)
        if too_many is not None:  # a moved pod keeps v0.31.1's reading; a pending one is refused, as the controller's
            ignored = f"{ignored}; {too_many}" if ignored else too_many
        ignored_v031 = ignored_v031_of(found, namespace, self.index, complete=self.complete)
        moved = self._with(pod, wanted.combined, alternatives, None, None)
        if ignored is None and ignored_v031 is None:
            return moved, None
        return moved, self._with(pod, wanted.combined, alternatives, ignored, ignored_v031)

    def _with(
        self, pod: Pod, requirements: Requirements, alternatives: tuple[Requirements, ...] | None,
        ignored: str | None, ignored_v031: str | None,
    ) -> Pod:
        if not requirements and alternatives is None and ignored is None and ignored_v031 is None:
            return pod
        key = (id(pod.shape), requirements, alternatives, ignored, ignored_v031)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = with_volumes(pod.shape, requirements, ignored, alternatives, ignored_v031)
        return replace(pod, shape=shape)

    def note(self) -> str | None:
        """What the plan says when pods with claims were read without every kind their volumes need (None: nothing
        to say)."""
        absent = [kind for kind in VOLUME_KINDS if kind not in self.read]
        pods = self.unread + self.claimed
        if not absent or not pods:
            return None
        what = ("their volumes' zones are not known: they are planned as if they had no volume" if self.unread
                else "the zones of the volumes it lacks are not known")
        return (f"{pods} pod{'s' if pods != 1 else ''} with PersistentVolumeClaims, but the snapshot holds no "
                f"{' and no '.join(_PLURAL[k] for k in absent)}: {what}; add {','.join(_SHORT[k] for k in absent)} "
                f"to the snapshot (`{KUBECTL_GET}`)")
