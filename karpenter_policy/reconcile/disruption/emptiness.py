"""Emptiness (`ttlSecondsAfterEmpty`), as Karpenter v0.31 does it: a Node of ours that is initialized and has no
pod but DaemonSets' gets the ``karpenter.sh/emptiness-timestamp`` annotation ("Added TTL to empty node"); a node
that gains a pod loses it ("Removed emptiness TTL from node"); once the provisioner's TTL has passed since, the
Node is deleted ("Triggering termination after 30s for empty node") and termination (`termination`) cordons it,
terminates its instance and removes the finalizer. Provisioners without the TTL leave their nodes alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info

EMPTINESS = logs.logger("node")
EMPTINESS_TIMESTAMP = "karpenter.sh/emptiness-timestamp"
INITIALIZED = "karpenter.sh/initialized"


@dataclass(slots=True)
class Emptied:
    marked: list[str] = field(default_factory=list)
    unmarked: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    due: float | None = None  # seconds from now until the next node's TTL runs out


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def reconcile_emptiness(
    cluster: Cluster,
    nodes: list[Obj],
    pods: list[Obj],
    ttls: Mapping[str, int | None],
    now: dt.datetime,
    fields: Callable[..., dict[str, object]],
    protected: frozenset[str] = frozenset(),
) -> Emptied:
    """One pass over the nodes; `ttls`: provisioner name → ttlSecondsAfterEmpty (None: never). `protected` nodes
    (the replacements of a disruption under way, about to receive pods) do not count as empty."""
    done = Emptied()
    busy = {pod_info.node_name(p) for p in pods
            if pod_info.node_name(p) and not pod_info.is_terminal(p) and not pod_info.is_daemon_pod(p)}
    for node in nodes:
        name = objects.name(node)
        if not node_info.is_ours(node) or objects.is_deleting(node):
            continue
        ttl = ttls.get(node_info.template_of(node) or "")
        stamped = objects.annotations(node).get(EMPTINESS_TIMESTAMP)
        empty = name not in busy and name not in protected and objects.labels(node).get(INITIALIZED) == "true"
        try:
            if ttl is None or not empty:
                if stamped is not None:
                    cluster.patch(objects.NODE, name, {"metadata": {"annotations": {EMPTINESS_TIMESTAMP: None}}})
                    done.unmarked.append(name)
                    EMPTINESS.info("Removed emptiness TTL from node", extra=fields(node=name))
                continue
            since = _parse(stamped) if stamped else None
            if since is None:
                cluster.patch(objects.NODE, name, {"metadata": {"annotations": {EMPTINESS_TIMESTAMP: _stamp(now)}}})
                done.marked.append(name)
                EMPTINESS.info("Added TTL to empty node", extra=fields(node=name))
                since = now.replace(microsecond=0)
            left = ttl - (now - since).total_seconds()
            if left > 0:
                done.due = left if done.due is None else min(done.due, left)
                continue
            EMPTINESS.info("Triggering termination after %ds for empty node", ttl, extra=fields(node=name))
            cluster.delete(objects.NODE, name)
            done.deleted.append(name)
        except NotFound:
            continue
        except ClusterError as error:
            done.errors.append(f"emptiness of node {name}: {error}")
    return done


__all__ = ["EMPTINESS_TIMESTAMP", "Emptied", "reconcile_emptiness"]
