"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection does, on any Cluster — with
the guarantee that two replicas never act at once, however the API server or the network behaves.

Replicas race to write their identity into one Lease; writes carry the resourceVersion they read, so only one wins
each round (the others get Conflict). The holder renews every ``retry_period``; a candidate takes over once the
lease has gone unchanged for its ``leaseDurationSeconds`` — measured on the candidate's own monotonic clock from
when it *received* that version of the lease (client-go's observedTime), so clock skew between machines does not
matter. A replica that stops stops acting first, then releases the lease (empty holder) so that another takes over
at once rather than after ``lease_duration``.

**One leader at a time.** Leadership is a deadline, not a flag a thread must remember to clear: a renewal that
*started* at ``s`` and succeeded makes :attr:`LeaderElector.is_leader` true until ``s + renew_deadline``, and false
from then on by the clock alone — even while the elector's thread is blocked on a request that hangs, or dead. The
write that renewed was committed after ``s``, and any other replica received it later still, so none can take the
lease before ``s + lease_duration``; ``renew_deadline < lease_duration`` leaves the difference as margin for a step
under way to see the change (client-go's tryAcquireOrRenew under a context bounded by the renew deadline,
k8s.io/client-go/tools/leaderelection/leaderelection.go). Every attempt carries its own deadline,
``renew_deadline - retry_period`` after its start, passed to the Cluster as each request's ``timeout``: a hung API
server costs one attempt, never the client's read timeout and its retries. A leader that reads a lease held by
another replica, or one it cannot read, stops leading at once.

**Whatever the Lease says.** Its content is read by :func:`~karpenter_policy.kube.leasespec.read_lease`: a malformed
lease (``leaseDurationSeconds: "abc"``, ``spec: "x"``, a number of 5,000 digits, …) is held by an unknown replica
for this elector's own ``lease_duration`` from when it was received, then taken over with a well-formed spec; each
malformed version (or unreadable answer) is counted by reason (:meth:`LeaderElector.malformed`) and logged once
until the lease reads well again. No exception ends the elector's thread: a round that fails is logged (once per
streak) and the next one runs; its liveness (:meth:`LeaderElector.alive`) and when the API server last answered
(:meth:`LeaderElector.silent_for`) are for the probes.
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
from karpenter_policy.kube.errors import ClusterError, Malformed, Unavailable
from karpenter_policy.kube.leasespec import INT32_MAX, LeaseRecord, MalformedLease, read_lease
from karpenter_policy.kube.objects import Obj

log = logging.getLogger(__name__)

#: The reason counted for an answer to the lease's GET or PUT that is not a readable object at all.
UNREADABLE_ANSWER = "answer"


class LeaderElector:
    """See the module docstring. ``retry_period < renew_deadline < lease_duration`` (seconds) is required."""

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
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs retry_period < renew_deadline < lease_duration")
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._cluster = cluster
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._release_on_stop = release_on_stop
        self._changed = threading.Condition()
        self._announced = False  # the callbacks know we lead (set by the elector's thread only)
        self._held_until = 0.0  # monotonic: the lease is ours until then, by the last renewal's start
        self._observed: LeaseRecord | MalformedLease | None = None
        self._observed_at = 0.0
        self._created = time.monotonic()
        self._last_answer: float | None = None
        self._heartbeat = self._created
        self._malformed: dict[str, int] = {}
        self._malformed_version: str | None = None  # the malformed version counted last
        self._malformed_logged = False
        self._failing = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the rest of the process asks -------------------------------------------------------------

    @property
    def attempt_timeout(self) -> float:
        """The time one attempt (a GET, then a create or an update) may take: ``renew_deadline - retry_period``."""
        return self.renew_deadline - self.retry_period

    @property
    def is_leader(self) -> bool:
        """This replica may act now: it leads, and its last renewal started less than ``renew_deadline`` ago."""
        return self._announced and time.monotonic() < self._held_until

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        """Wait until :attr:`is_leader` (True), or `timeout` seconds (False)."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not self.is_leader:
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def alive(self) -> bool:
        """The elector's thread runs and finished a round lately (within ``lease_duration + retry_period``: an
        attempt is bounded by ``attempt_timeout``, so a healthy thread always does). True before :meth:`start`."""
        thread = self._thread
        if thread is None:
            return True
        return thread.is_alive() and time.monotonic() - self._heartbeat <= self.lease_duration + self.retry_period

    def silent_for(self) -> float:
        """Seconds since the API server last answered a request of the elector (any answer, an error status too),
        or since the elector was made."""
        last = self._last_answer
        return time.monotonic() - (last if last is not None else self._created)

    def malformed(self) -> dict[str, int]:
        """Malformed lease versions (and unreadable answers) seen, by reason."""
        with self._changed:
            return dict(self._malformed)

    # -- one round -------------------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One attempt: take the lease if it is free or expired, renew it if ours. True if we hold it now (until
        this attempt's start plus ``renew_deadline``)."""
        started = time.monotonic()
        try:
            held = self._attempt(started + self.attempt_timeout)
        except ClusterError as error:
            if isinstance(error, Malformed):
                self._answered()
                self._note_malformed(UNREADABLE_ANSWER, str(error), None)
            elif error.status is not None:
                self._answered()  # Conflict, a 5xx and the like: the server is there (a timeout has no status)
            log.debug("lease %s/%s: %s", self.namespace, self.name, error)
            return False
        with self._changed:
            self._held_until = started + self.renew_deadline if held else 0.0
        return held

    def _attempt(self, deadline: float) -> bool:
        lease = self._cluster.get(objects.LEASE, self.name, self.namespace, timeout=self._left(deadline))
        self._answered()
        if lease is None:
            created = self._cluster.create(objects.LEASE, self._lease(None, None), timeout=self._left(deadline))
            self._answered()
            self._observe(read_lease(created), time.monotonic())
            return True
        record = read_lease(lease)
        received = time.monotonic()
        self._observe(record, received)
        if isinstance(record, MalformedLease):
            self._note_malformed(record.reason, record.detail, record.version)
            if not record.version or received < self._observed_at + self.lease_duration:
                return False  # an unknown replica's until it expires by our own duration
        else:
            self._readable_again()
            if record.holder and record.holder != self.identity and received < self._observed_at + (
                record.duration or 0
            ):
                return False
        updated = self._cluster.update(objects.LEASE, self._lease(lease, record), timeout=self._left(deadline))
        self._answered()
        self._observe(read_lease(updated), time.monotonic())
        return True

    def _left(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Unavailable(f"lease {self.namespace}/{self.name}: the attempt ran out of time")
        return left

    def _answered(self) -> None:
        self._last_answer = time.monotonic()

    def _observe(self, record: LeaseRecord | MalformedLease, received: float) -> None:
        """Note when the lease last changed, by our clock: expiry is judged from then."""
        if self._observed is None or record.version != self._observed.version:
            self._observed = record
            self._observed_at = received

    def _note_malformed(self, reason: str, detail: str, version: str | None) -> None:
        """Stop acting (nothing proves the lease ours), then count a malformed version once (an unreadable answer
        each time) and log the first of a streak: whoever sees the count sees :attr:`is_leader` false."""
        with self._changed:
            self._held_until = 0.0
            if version is not None and self._malformed_version == version:
                return
            self._malformed_version = version
            self._malformed[reason] = self._malformed.get(reason, 0) + 1
            first = not self._malformed_logged
            self._malformed_logged = True
        if first:
            log.warning("lease %s/%s is malformed (%s: %s): held by an unknown replica until it expires",
                        self.namespace, self.name, reason, detail)

    def _readable_again(self) -> None:
        if self._malformed_logged:
            self._malformed_logged = False
            log.info("lease %s/%s reads well again", self.namespace, self.name)

    def _lease(self, current: Obj | None, record: LeaseRecord | MalformedLease | None) -> Obj:
        """The lease to write: `current` (None: a new one) renewed by us, or taken over (a malformed spec is
        replaced whole, its transitions counted from 0)."""
        stamp = objects.format_micro_time(datetime.datetime.now(datetime.UTC))
        spec: dict[str, Any] = dict(current.get("spec") or {}) if current and isinstance(record, LeaseRecord) else {}
        if not isinstance(record, LeaseRecord) or record.holder != self.identity:
            spec["acquireTime"] = stamp
            transitions = record.transitions + 1 if isinstance(record, LeaseRecord) else 0
            spec["leaseTransitions"] = min(transitions, INT32_MAX)
        spec.update(holderIdentity=self.identity, renewTime=stamp,
                    leaseDurationSeconds=max(1, math.ceil(self.lease_duration)))
        lease: Obj = dict(current) if current else {
            "apiVersion": objects.LEASE.api_version,
            "kind": objects.LEASE.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
        }
        lease["spec"] = spec
        return lease

    def release(self) -> None:
        """Give the lease up (if ours) so that another replica takes over without waiting for expiry."""
        deadline = time.monotonic() + self.attempt_timeout
        try:
            lease = self._cluster.get(objects.LEASE, self.name, self.namespace, timeout=self._left(deadline))
            record = read_lease(lease) if lease is not None else None
            if lease is None or not isinstance(record, LeaseRecord) or record.holder != self.identity:
                return
            stamp = objects.format_micro_time(datetime.datetime.now(datetime.UTC))
            spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": stamp}
            self._cluster.update(objects.LEASE, {**lease, "spec": spec}, timeout=self._left(deadline))
        except ClusterError as error:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, error)

    # -- the loop --------------------------------------------------------------------------------------

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

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.try_acquire_or_renew()
                self._announce()
            except Exception:  # a bug or an unforeseen answer must not end leader election
                if not self._failing:
                    log.exception("lease %s/%s: a leader election round failed; trying again", self.namespace,
                                  self.name)
                self._failing = True
                with self._changed:
                    self._held_until = 0.0  # nothing proves the lease ours
                self._announce()
            else:
                self._failing = False
            self._heartbeat = time.monotonic()
            with self._changed:
                self._changed.notify_all()
            pause = self.retry_period
            if self._announced:  # wake when the lease would lapse, to tell the callbacks
                pause = max(0.0, min(pause, self._held_until - time.monotonic()))
            self._stopping.wait(pause)
        with self._changed:
            self._held_until = 0.0  # stop acting first, then let another replica in
        if self._announced:
            self._change(False)
            if self._release_on_stop:
                self.release()

    def _announce(self) -> None:
        """Tell the callbacks (and waiters) when leadership started or ended."""
        held = time.monotonic() < self._held_until
        if held != self._announced:
            self._change(held)

    def _change(self, leading: bool) -> None:
        log.info("lease %s/%s: %s %s leading", self.namespace, self.name, self.identity,
                 "started" if leading else "stopped")
        with self._changed:
            self._announced = leading
            self._changed.notify_all()
        callback = self._on_started if leading else self._on_stopped
        if callback is not None:
            try:
                callback()
            except Exception:  # the caller's bug must not stop renewing (or releasing) the lease
                log.exception("lease %s/%s: leadership callback failed", self.namespace, self.name)
