"""Which VolumeAttachments hold the termination of a NodePool's node, as Karpenter v1.14.1's node termination reads
them (core pkg/controllers/node/termination/controller.go `pendingVolumeAttachments`, `filterVolumeAttachments`):
its instance is terminated only once the node's attachments are deleted (by the attach-detach controller, once
the pods using them are gone), so that a pod's PersistentVolume moves with it smoothly.

An attachment holds the node unless it attaches no PersistentVolume (an inline volume) or the volume of a pod the
drain does not move: a pod tolerating the disrupted taint, stuck terminating, a static pod's mirror (those of
`IsDrainable`; a DaemonSet's pod is drained, so its volumes are waited for). A pod's claims are those its volumes
name (`state.pods.volume_claims`); a claim that does not exist is skipped, as Karpenter skips it. Pure, but for the
claims it is handed a reader of (`kube.volumes.bound_volume`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from karpenter_policy.kube.volumes import Attachment
from karpenter_policy.reconcile.state.pods import volume_claims
from karpenter_policy.reconcile.state.records import PodRecord

#: (namespace, claim) → the PersistentVolume it is bound to, None when it does not exist or is unbound.
BoundVolume = Callable[[str, str], "str | None"]


def stays(pod: PodRecord, now: dt.datetime) -> bool:
    """A pod the drain does not move (see the module docstring), `now` by the wall clock."""
    return pod.tolerates_disrupted or pod.stuck_terminating(now) or pod.static


def pending(
    attachments: Sequence[Attachment], pods: Sequence[PodRecord], now: dt.datetime, bound: BoundVolume
) -> list[Attachment]:
    """The attachments that hold the node (see the module docstring); `pods`: every pod bound to it. `bound` is
    asked only when there are attachments, and only for the claims of pods that stay; what it raises goes up."""
    if not attachments:
        return []
    kept: set[str] = set()
    for pod in pods:
        if stays(pod, now):
            for claim in volume_claims(pod.obj):
                volume = bound(pod.namespace, claim)
                if volume:
                    kept.add(volume)
    return [a for a in attachments if a.volume is not None and a.volume not in kept]


__all__ = ["BoundVolume", "pending", "stays"]
