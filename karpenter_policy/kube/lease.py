"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection does, on any Cluster.

Replicas race to write their identity into one Lease; writes carry the resourceVersion they read, so
only one wins each round (the others get Conflict). The holder renews every ``retry_period``; a candidate
takes over once the lease has gone unrenewed for ``lease_duration`` — measured on the candidate's own
monotonic clock from when it last saw the lease change, so clock skew between machines does not matter.
A leader that cannot renew within ``renew_deadline`` steps down on its own; one that stops releases the
lease (empty holder) so another replica takes over at once rather than after ``lease_duration``.
"""

from __future__ import annotations

import datetime
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        release_on_stop: bool = True,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs retry_period < renew_deadline < lease_duration")
        self.identity = identity
        self._cluster = cluster
        self._namespace = namespace
        self._name = name
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._release_on_stop = release_on_stop
        self._observed_version = ""
        self._observed_at = 0.0
        self._observed_duration = 0.0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.leading = threading.Event()

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    def try_acquire_or_renew(self) -> bool:
        """One round: take the lease if it is free or expired, renew it if ours. True if we hold it now."""
        now = time.monotonic()
        stamp = objects.format_micro_time(datetime.datetime.now(datetime.UTC))
        try:
            lease = self._cluster.get(objects.LEASE, self._name, self._namespace)
            if lease is None:
                created = self._cluster.create(objects.LEASE, self._lease(None, stamp))
                self._observe(created, now)
                return True
            self._observe(lease, now)
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            if holder and holder != self.identity and now < self._observed_at + self._observed_duration:
                return False
            updated = self._cluster.update(objects.LEASE, self._lease(lease, stamp))
            self._observe(updated, now)
            return True
        except ClusterError as error:  # Conflict: another replica wrote first; others: try next round
            log.debug("lease %s/%s: %s", self._namespace, self._name, error)
            return False

    def release(self) -> None:
        """Give the lease up (if ours) so that another replica takes over without waiting for expiry."""
        try:
            lease = self._cluster.get(objects.LEASE, self._name, self._namespace)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            stamp = objects.format_micro_time(datetime.datetime.now(datetime.UTC))
            spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": stamp}
            self._cluster.update(objects.LEASE, {**lease, "spec": spec})
        except ClusterError as error:
            log.warning("lease %s/%s: release failed: %s", self._namespace, self._name, error)

    # -- the loop ------------------------------------------------------------------------------------

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self._run, name=f"leader-{self.identity}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> LeaderElector:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self.leading.wait(timeout)

    def _run(self) -> None:
        last_renewal = 0.0
        while not self._stopping.is_set():
            held = self.try_acquire_or_renew()
            if held:
                last_renewal = time.monotonic()
                if not self.leading.is_set():
                    self._change(True)
            elif self.leading.is_set() and time.monotonic() - last_renewal > self._renew_deadline:
                self._change(False)  # could not renew in time: another replica may take over now
            self._stopping.wait(self._retry_period)
        if self.leading.is_set():
            self._change(False)  # stop acting first, then let another replica in
            if self._release_on_stop:
                self.release()

    def _change(self, leading: bool) -> None:
        log.info("lease %s/%s: %s %s leading", self._namespace, self._name, self.identity,
                 "started" if leading else "stopped")
        (self.leading.set if leading else self.leading.clear)()
        callback = self._on_started if leading else self._on_stopped
        if callback is not None:
            try:
                callback()
            except Exception:  # the caller's bug must not stop renewing (or releasing) the lease
                log.exception("lease %s/%s: leadership callback failed", self._namespace, self._name)

    def _observe(self, lease: Obj, now: float) -> None:
        """Note when the lease last changed, by our clock: expiry is judged from then."""
        if objects.resource_version(lease) != self._observed_version:
            self._observed_version = objects.resource_version(lease)
            self._observed_at = now
            self._observed_duration = float((lease.get("spec") or {}).get("leaseDurationSeconds") or 0)

    def _lease(self, current: Obj | None, stamp: str) -> Obj:
        spec: dict[str, Any] = dict((current or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if current else 0)
        spec.update(holderIdentity=self.identity, renewTime=stamp,
                    leaseDurationSeconds=max(1, math.ceil(self._lease_duration)))
        lease: Obj = dict(current) if current else {
            "apiVersion": objects.LEASE.api_version,
            "kind": objects.LEASE.kind,
            "metadata": {"name": self._name, "namespace": self._namespace},
        }
        lease["spec"] = spec
        return lease
