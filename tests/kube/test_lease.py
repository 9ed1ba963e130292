"""Leases and leader election: two replicas, one leader; when it stops (or dies), the other takes over."""

from __future__ import annotations

import threading

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import Conflict
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.kube.objects import LEASE

from .conftest import Backend
from .support import GENEROUS

# Long leases (a stalled CI machine never loses one by accident) and quick retries: hand-overs on release
# happen at the next retry, so only the crash test waits for an expiry.
FAST = {"lease_duration": 10.0, "renew_deadline": 8.0, "retry_period": 0.1}


def test_leases_are_updated_under_optimistic_concurrency(backend: Backend) -> None:
    lease = backend.cluster.create(
        LEASE, {"metadata": {"name": "lock", "namespace": "kube-system"}, "spec": {"holderIdentity": "a"}}
    )
    backend.cluster.update(LEASE, {**lease, "spec": {"holderIdentity": "b"}})

    with pytest.raises(Conflict):
        backend.cluster.update(LEASE, {**lease, "spec": {"holderIdentity": "c"}})
    assert (backend.cluster.get(LEASE, "lock", "kube-system") or {})["spec"]["holderIdentity"] == "b"


def test_only_one_of_two_candidates_acquires_a_held_lease(backend: Backend) -> None:
    first = LeaderElector(backend.cluster, "kube-system", "lock", "replica-1", **FAST)
    second = LeaderElector(backend.cluster, "kube-system", "lock", "replica-2", **FAST)

    assert first.try_acquire_or_renew()
    assert not second.try_acquire_or_renew()
    assert first.try_acquire_or_renew()  # renewing

    spec = (backend.cluster.get(LEASE, "lock", "kube-system") or {})["spec"]
    assert spec["holderIdentity"] == "replica-1" and spec["leaseDurationSeconds"] == 10
    assert objects.parse_time(spec["renewTime"]) >= objects.parse_time(spec["acquireTime"])


def _track(leaders: list[str], lock: threading.Lock, identity: str, electors: dict[str, LeaderElector]) -> None:
    """Note who started leading, and anyone else who was leading at that moment (there must be nobody)."""
    with lock:
        others = [name for name, elector in electors.items() if name != identity and elector.is_leader]
        leaders.extend([identity, *(f"also {other}" for other in others)])


@pytest.mark.slow
def test_the_other_replica_takes_over_when_the_leader_stops(backend: Backend) -> None:
    leaders: list[str] = []
    lock = threading.Lock()
    electors: dict[str, LeaderElector] = {}
    for identity in ("replica-1", "replica-2"):
        electors[identity] = LeaderElector(
            backend.cluster, "kube-system", "lock", identity,
            on_started_leading=lambda identity=identity: _track(leaders, lock, identity, electors),  # type: ignore[misc]
            **FAST,
        )
    for elector in electors.values():
        elector.start()
    try:
        assert any(e.leading.wait(GENEROUS) for e in electors.values())
        with lock:
            leader = leaders[0]
        follower = next(name for name in electors if name != leader)
        assert not electors[follower].is_leader

        electors[leader].stop()  # releases the lease

        assert electors[follower].wait_for_leadership(GENEROUS)
        assert not electors[leader].is_leader
        spec = (backend.cluster.get(LEASE, "lock", "kube-system") or {})["spec"]
        assert spec["holderIdentity"] == follower and spec["leaseTransitions"] >= 1
    finally:
        for elector in electors.values():
            elector.stop()
    assert leaders == [leader, follower]


def test_a_crashed_leader_is_replaced_once_its_lease_expires(backend: Backend) -> None:
    short = {"lease_duration": 1.0, "renew_deadline": 0.5, "retry_period": 0.1}
    crashed = LeaderElector(backend.cluster, "kube-system", "lock", "crashed", release_on_stop=False, **short)
    assert crashed.try_acquire_or_renew()  # then it never renews again

    with LeaderElector(backend.cluster, "kube-system", "lock", "survivor", **short) as survivor:
        assert survivor.wait_for_leadership(GENEROUS)

    spec = (backend.cluster.get(LEASE, "lock", "kube-system") or {})["spec"]
    assert spec["holderIdentity"] == ""  # the survivor released it on stop


def test_inconsistent_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        LeaderElector(object(), "ns", "lock", "me", lease_duration=5, renew_deadline=10)  # type: ignore[arg-type]
