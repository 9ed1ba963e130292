"""The controller's probes over real HTTP: /healthz (every thread alive, the leader election's too), /readyz (state
synced, sets loaded, the API server answering; a standby is ready without leading), /metrics, and 404 for anything
else — the paths the Helm chart's probes use."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import Unavailable
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.controller import ControllerOptions
from karpenter_policy.reconcile.probes import ProbeServer
from karpenter_policy.reconcile.runner import Health, Runner, assemble, run_in_thread

from .conftest import CLUSTER, REGION, fake_cloud
from .support import FakeClock


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def eventually(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture()
def probed(compiled: Path, log: Any) -> Iterator[Callable[..., tuple[Runner, int]]]:
    started: list[tuple[Runner, threading.Thread | None, ProbeServer]] = []

    def start(cluster: MemoryCluster | None = None, elector: LeaderElector | None = None,
              run: bool = True) -> tuple[Runner, int]:
        cluster = cluster or MemoryCluster()
        runner = assemble(cluster, fake_cloud(FakeClock()), DirectorySource(compiled),
                          ControllerOptions(cluster_name=CLUSTER), region=REGION, elector=elector, resync=1.0)
        controller = runner.controller
        controller.refresh_constraint_sets()
        server = ProbeServer("127.0.0.1", 0, controller.metrics.registry, runner.health).start()
        started.append((runner, run_in_thread(runner) if run else None, server))
        return runner, server.port

    yield start
    for runner, thread, server in started:
        runner.stop()
        if thread is not None:
            thread.join(30)
        server.shutdown()


def test_a_running_controller_is_alive_ready_and_leading(probed: Any) -> None:
    runner, port = probed()
    assert eventually(lambda: get(port, "/readyz")[0] == 200)
    assert get(port, "/readyz") == (200, "ok (leading)\n")
    assert get(port, "/healthz") == (200, "ok\n")
    status, body = get(port, "/metrics")
    assert status == 200 and "karpenter_policy_constraint_sets 4.0" in body
    assert "karpenter_policy_watch_malformed_answers_total" not in body or "# TYPE" in body
    assert get(port, "/")[0] == 404 and get(port, "/metrics/extra")[0] == 404


def test_not_ready_until_the_state_is_synced(probed: Any) -> None:
    _, port = probed(run=False)  # the informers have not listed: the state knows nothing yet
    status, body = get(port, "/readyz")
    assert status == 503 and "not synced" in body


def test_a_standby_is_ready_without_leading(probed: Any) -> None:
    cluster = MemoryCluster()
    now = objects.format_micro_time(dt.datetime.now(dt.UTC))
    cluster.create(objects.LEASE, {  # another replica leads for the next hour
        "metadata": {"name": "karpenter-policy-reconcile", "namespace": "default"},
        "spec": {"holderIdentity": "the-leader", "leaseDurationSeconds": 3600, "acquireTime": now, "renewTime": now},
    })
    elector = LeaderElector(cluster, "default", "karpenter-policy-reconcile", "standby",
                            lease_duration=3.0, renew_deadline=2.0, retry_period=0.1).start()
    try:
        _, port = probed(cluster=cluster, elector=elector)
        assert eventually(lambda: get(port, "/readyz")[0] == 200)
        assert get(port, "/readyz") == (200, "ok (standby)\n")
        assert get(port, "/healthz") == (200, "ok\n")
    finally:
        elector.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread is meant to die
def test_a_dead_controller_thread_fails_the_liveness_probe(probed: Any) -> None:
    runner, port = probed()
    assert eventually(lambda: get(port, "/healthz")[0] == 200)

    def dies(now: float, result: object) -> float | None:
        raise SystemExit  # what no `except Exception` catches: the thread ends

    worker = next(w for w in runner.workers if w.name == "emptiness")
    assert eventually(lambda: worker.thread.is_alive())  # started (a thread not started yet is not "dead")
    worker.controller.step = dies  # type: ignore[method-assign]
    worker.wake.set()
    assert eventually(lambda: not worker.thread.is_alive())
    status, body = get(port, "/healthz")
    assert status == 500 and "thread" in body


def test_a_dead_informer_fails_the_liveness_probe_and_readiness(probed: Any) -> None:
    runner, port = probed()
    assert eventually(lambda: get(port, "/readyz")[0] == 200)
    runner.feed.informers[objects.NODE].stop()
    assert get(port, "/healthz")[0] == 500


def test_silent_connections_are_dropped_and_bounded_so_probes_are_answered_again() -> None:
    """Anything in the cluster can open connections to the metrics port. Silent ones used to hold a thread each for
    ever; now each is dropped after the idle timeout, and beyond the cap a new one is closed at once: the threads
    stay bounded, and once the silent ones are gone the kubelet's probe is answered."""
    server = ProbeServer(
        "127.0.0.1", 0, CollectorRegistry(), lambda: Health(True, True, True), idle_timeout=0.5, max_connections=8
    ).start()
    threads_before = threading.active_count()
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]
    try:
        assert threading.active_count() <= threads_before + 8, "one thread per silent connection, without a cap"
        for sock in silent:  # every one ends: closed at once past the cap, or dropped at the idle timeout
            sock.settimeout(10)
            assert sock.recv(1) == b""
        assert eventually(lambda: get(server.port, "/healthz") == (200, "ok\n"))
    finally:
        for sock in silent:
            sock.close()
        server.shutdown()


class _ApiServer(MemoryCluster):
    """The API server as the elector's requests see it: `freeze()` makes every lease request hang until its timeout
    and fail (a frozen API server: nothing answers), `thaw()` answers again; `break_thread()` raises from the next
    request what no handler catches (the elector's thread ends)."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen = threading.Event()
        self.fatal = threading.Event()

    def _hang(self, timeout: float | None) -> None:
        if self.fatal.is_set():
            raise SystemExit
        if self.frozen.is_set():
            threading.Event().wait(timeout if timeout is not None else 30.0)  # no answer within the request's time
            raise Unavailable("timed out (frozen API server)")

    def get(self, kind: Any, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Any:
        if kind == objects.LEASE:
            self._hang(timeout)
        return super().get(kind, name, namespace, timeout=timeout)

    def update(self, kind: Any, obj: Any, subresource: str | None = None, *, timeout: float | None = None) -> Any:
        if kind == objects.LEASE:
            self._hang(timeout)
        return super().update(kind, obj, subresource, timeout=timeout)


LEASE_STATUS = 'leader_election_master_status{name="karpenter-policy-reconcile"}'


def test_a_leader_the_api_server_stops_answering_stops_leading_and_turns_unready_but_stays_alive(probed: Any) -> None:
    """The probe's case: during a freeze of the API server /readyz and /healthz both stayed 200 and the body said
    `ok (leading)`. Now the replica stops leading within its renew deadline (the gauge says 0), is not ready once the
    API server has been silent for a lease duration, and stays alive (its elector's requests are bounded)."""
    cluster = _ApiServer()
    # A lease duration well above one hung attempt (0.9 s): /healthz allows a round lease_duration + retry_period,
    # so a loaded machine's scheduling delays cannot read as a hung elector.
    elector = LeaderElector(cluster, "default", "karpenter-policy-reconcile", "leader",
                            lease_duration=3.0, renew_deadline=1.0, retry_period=0.1).start()
    try:
        _, port = probed(cluster=cluster, elector=elector)
        assert eventually(lambda: get(port, "/readyz") == (200, "ok (leading)\n"))
        assert f"{LEASE_STATUS} 1.0" in get(port, "/metrics")[1]

        cluster.frozen.set()
        assert eventually(lambda: not elector.is_leader, 5.0)
        assert f"{LEASE_STATUS} 0.0" in get(port, "/metrics")[1]
        assert eventually(lambda: get(port, "/readyz")[0] == 503)
        assert "the API server has not answered for" in get(port, "/readyz")[1]
        assert get(port, "/healthz") == (200, "ok\n")

        cluster.frozen.clear()
        assert eventually(lambda: get(port, "/readyz") == (200, "ok (leading)\n"))
    finally:
        elector.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread is meant to die
def test_a_dead_leader_election_thread_fails_the_liveness_probe(probed: Any) -> None:
    cluster = _ApiServer()
    elector = LeaderElector(cluster, "default", "karpenter-policy-reconcile", "leader",
                            lease_duration=1.5, renew_deadline=1.0, retry_period=0.1).start()
    try:
        _, port = probed(cluster=cluster, elector=elector)
        assert eventually(lambda: get(port, "/healthz") == (200, "ok\n") and elector.is_leader)

        cluster.fatal.set()  # what no `except Exception` catches

        assert eventually(lambda: get(port, "/healthz")[0] == 500)
        assert "leader election thread" in get(port, "/healthz")[1]
        assert eventually(lambda: not elector.is_leader, 5.0)  # and it acts no more: the lease lapses by the clock
    finally:
        elector.stop()


def test_a_malformed_lease_shows_in_the_metrics_and_the_replica_stays_alive(probed: Any) -> None:
    cluster = MemoryCluster()
    elector = LeaderElector(cluster, "default", "karpenter-policy-reconcile", "leader",
                            lease_duration=30.0, renew_deadline=20.0, retry_period=0.1).start()
    try:
        _, port = probed(cluster=cluster, elector=elector)
        assert eventually(lambda: get(port, "/readyz") == (200, "ok (leading)\n"))
        lease = cluster.get(objects.LEASE, "karpenter-policy-reconcile", "default") or {}
        cluster.update(objects.LEASE, {**lease, "spec": "x"})  # written by anyone

        counted = 'karpenter_policy_lease_malformed_total{reason="spec"} 1.0'
        assert eventually(lambda: counted in get(port, "/metrics")[1])
        assert eventually(lambda: f"{LEASE_STATUS} 0.0" in get(port, "/metrics")[1], 1.0)  # it stopped leading
        assert get(port, "/readyz") == (200, "ok (standby)\n") and get(port, "/healthz") == (200, "ok\n")
    finally:
        elector.stop()
