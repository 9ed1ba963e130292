"""The Informer keeps its cache equal to the cluster through watch timeouts, outages and 410 Gone, on both
cluster implementations."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import ObjectList, WatchEvent, WatchStream
from karpenter_policy.kube.errors import ClusterError, Invalid
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.objects import POD

from .conftest import FAST_BACKOFF, Backend
from .support import GENEROUS, eventually, names, pod


def _recorder() -> tuple[list[tuple[str, str]], threading.Lock, object]:
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def on_event(event: WatchEvent) -> None:
        with lock:
            seen.append((event.type, objects.name(event.object)))

    return seen, lock, on_event


def test_the_cache_follows_creates_updates_and_deletes(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("existing"))
    seen, lock, on_event = _recorder()

    with Informer(cluster, POD, on_event=on_event, backoff=FAST_BACKOFF) as informer:  # type: ignore[arg-type]
        assert informer.wait_synced(GENEROUS)
        cluster.create(POD, pod("new"))
        cluster.patch(POD, "existing", {"metadata": {"labels": {"v": "2"}}}, "default")
        cluster.delete(POD, "new", "default")

        assert informer.wait_until(
            lambda items: names(items) == ["existing"] and objects.labels(items[0]) == {"v": "2"}, GENEROUS
        )
        assert informer.get("existing", "default") == cluster.get(POD, "existing", "default")

    with lock:
        assert seen == [("ADDED", "existing"), ("ADDED", "new"), ("MODIFIED", "existing"), ("DELETED", "new")]


def test_synced_means_every_handler_has_seen_the_first_list(backend: Backend) -> None:
    """The controller starts acting once its informers are synced and reads the state their handlers fill: were
    `synced` set before the list's events reached the handlers, a node not yet in the state looked like an orphan
    instance to adopt, and a disruption decision saw a cluster still being filled."""
    cluster = backend.cluster
    for name in ("a", "b", "c"):
        cluster.create(POD, pod(name))
    gate = threading.Event()
    seen: list[str] = []

    def slow_handler(event: WatchEvent) -> None:
        gate.wait(GENEROUS)  # the handler is still busy with the list while the waiter looks
        seen.append(objects.name(event.object))

    with Informer(cluster, POD, on_event=slow_handler, backoff=FAST_BACKOFF) as informer:  # type: ignore[arg-type]
        synced_while_busy = informer.wait_synced(1.0)
        gate.set()
        assert not synced_while_busy, "synced before the handlers had seen the list"
        assert informer.wait_synced(GENEROUS)
        assert sorted(seen) == ["a", "b", "c"]


def test_a_selective_informer_caches_only_what_matches(backend: Backend) -> None:
    cluster = backend.cluster
    with Informer(cluster, POD, field_selector="spec.nodeName=", backoff=FAST_BACKOFF) as pending:
        assert pending.wait_synced(GENEROUS)
        cluster.create(POD, pod("a"))
        cluster.create(POD, pod("b"))
        cluster.bind("default", "a", "node-1")

        assert pending.wait_until(lambda items: names(items) == ["b"], GENEROUS)


def test_watch_timeouts_restart_the_watch_without_relisting(backend: Backend) -> None:
    cluster = backend.cluster
    with Informer(cluster, POD, watch_timeout=1, backoff=FAST_BACKOFF) as informer:
        assert informer.wait_synced(GENEROUS)
        eventually(lambda: informer.stats.watches >= 3, what="three watches")
        cluster.create(POD, pod("late"))

        assert informer.wait_until(lambda items: names(items) == ["late"], GENEROUS)
        assert informer.stats.lists == 1 and informer.stats.gone == 0


def test_after_an_outage_and_410_gone_the_informer_relists_and_reports_what_it_missed(backend: Backend) -> None:
    cluster = backend.cluster
    for name in ("a", "b"):
        cluster.create(POD, pod(name))
    seen, lock, on_event = _recorder()

    with Informer(cluster, POD, on_event=on_event, backoff=FAST_BACKOFF) as informer:  # type: ignore[arg-type]
        assert informer.wait_until(lambda items: names(items) == ["a", "b"], GENEROUS)
        with backend.watch_outage():
            eventually(lambda: informer.stats.errors >= 1, what="the informer meeting the outage")
            cluster.delete(POD, "a", "default")  # changes the informer cannot see
            cluster.patch(POD, "b", {"metadata": {"labels": {"v": "2"}}}, "default")
            cluster.create(POD, pod("c"))
            backend.compact()  # and the history to replay them is gone

        assert informer.wait_until(
            lambda items: names(items) == ["b", "c"] and objects.labels(items[0]) == {"v": "2"}, GENEROUS
        )
        assert informer.stats.gone >= 1 and informer.stats.lists >= 2
        assert informer.resource_version == cluster.list(POD).resource_version

    with lock:
        assert seen[:2] == [("ADDED", "a"), ("ADDED", "b")]
        assert sorted(seen[2:]) == [("ADDED", "c"), ("DELETED", "a"), ("MODIFIED", "b")]


def test_stop_ends_a_long_watch_at_once(backend: Backend) -> None:
    informer = Informer(backend.cluster, POD, watch_timeout=300, backoff=FAST_BACKOFF).start()
    assert informer.wait_synced(GENEROUS)
    eventually(lambda: informer.stats.watches >= 1, what="the watch opening")

    started = time.monotonic()
    informer.stop(timeout=GENEROUS)

    assert informer._thread is not None and not informer._thread.is_alive()
    assert time.monotonic() - started < GENEROUS


def test_shared_reads_are_the_cached_objects_and_never_change_under_the_reader(backend: Backend) -> None:
    cluster = backend.cluster
    cluster.create(POD, pod("a"))
    with Informer(cluster, POD, backoff=FAST_BACKOFF) as informer:
        assert informer.wait_until(lambda items: names(items) == ["a"], GENEROUS)
        shared = informer.get_shared("a", "default")
        copied = informer.get("a", "default")

        assert shared is not None and informer.items_shared()[0] is shared
        assert copied == shared and copied is not shared and informer.items()[0] is not shared
        cluster.patch(POD, "a", {"metadata": {"labels": {"v": "2"}}}, "default")
        assert informer.wait_until(lambda items: objects.labels(items[0]) == {"v": "2"}, GENEROUS)

        assert objects.labels(shared) == {}  # the informer replaced the object, it did not change it
        assert objects.labels(informer.get_shared("a", "default") or {}) == {"v": "2"}


_MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]


def test_the_cache_keeps_no_managed_fields_and_everything_else(backend: Backend) -> None:
    """Listed or watched, a cached object has no `metadata.managedFields` (nothing reads them; they were a third of
    a pod's size in the cache) and every other field as the server has it."""
    cluster = backend.cluster
    for name in ("listed", "watched"):
        obj = pod(name, labels={"app": "web"})
        obj["metadata"]["managedFields"] = _MANAGED
        if name == "listed":
            cluster.create(POD, obj)
    with Informer(cluster, POD, backoff=FAST_BACKOFF) as informer:
        assert informer.wait_synced(GENEROUS)
        cluster.create(POD, obj)
        assert informer.wait_until(lambda items: names(items) == ["listed", "watched"], GENEROUS)

        for name in ("listed", "watched"):
            served = cluster.get(POD, name, "default")
            cached = informer.get_shared(name, "default")
            assert served is not None and cached is not None
            assert served["metadata"]["managedFields"] == _MANAGED  # the server keeps them: only the cache drops them
            del served["metadata"]["managedFields"]
            assert cached == served


def test_a_cluster_refuses_an_object_a_reader_could_not_trust(backend: Backend) -> None:
    for bad in ({"metadata": {"name": "a", "labels": "abc"}}, {"metadata": {"name": "b", "finalizers": "x"}}):
        with pytest.raises(Invalid):
            backend.cluster.create(POD, {**bad, "spec": {}})
    backend.cluster.create(POD, pod("c"))
    with pytest.raises(Invalid):
        backend.cluster.patch(POD, "c", {"metadata": {"annotations": {"n": 1}}}, "default")


class _GatedCluster(MemoryCluster):
    """A cluster whose lists wait for `gate`, then are refused (a role without `list`) or answered."""

    def __init__(self, refuse: bool) -> None:
        super().__init__()
        self.refuse = refuse
        self.gate = threading.Event()

    def list(self, *args: Any, **kwargs: Any) -> ObjectList:
        self.gate.wait(GENEROUS)
        if self.refuse:
            raise ClusterError("pods is forbidden", status=403)
        return super().list(*args, **kwargs)


def _answered(informer: Informer, gate: threading.Event) -> bool:
    """Whether `wait_answered` with no timeout, begun before the first list is answered (`gate` opened once the
    waiter is about to wait), returns: only a signal can end it (False after GENEROUS s)."""
    waiting, done = threading.Event(), threading.Event()

    def waiter() -> None:
        waiting.set()
        informer.wait_answered()
        done.set()

    threading.Thread(target=waiter, daemon=True).start()
    waiting.wait(GENEROUS)
    gate.set()
    return done.wait(GENEROUS)


@pytest.mark.parametrize("refuse", [True, False], ids=["refused", "listed"])
def test_a_wait_for_the_first_list_ends_at_its_refusal_as_at_the_list(refuse: bool) -> None:
    """Issue #26: what waits for a first list (the VolumeAttachment index's first sync) woke only once listed — a
    refused list left it waiting out its timeout. `wait_answered` is woken by the first list's failure (not synced:
    False) as by the list itself (True)."""
    cluster = _GatedCluster(refuse)
    with Informer(cluster, POD, backoff=FAST_BACKOFF) as informer:
        assert _answered(informer, cluster.gate)
        assert informer.wait_answered(0) is not refuse
        assert (informer.health().consecutive_failures > 0) is refuse


class _BuggyCluster(MemoryCluster):
    """A Cluster with bugs: its list raises an unexpected exception, then its watch hands out a malformed
    event, a given number of times each."""

    def __init__(self, broken_lists: int, bad_events: int) -> None:
        super().__init__()
        self.broken_lists = broken_lists
        self.bad_events = bad_events

    def list(self, *args: Any, **kwargs: Any) -> ObjectList:
        if self.broken_lists:
            self.broken_lists -= 1
            raise KeyError("spec")
        return super().list(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> WatchStream:
        if self.bad_events:
            self.bad_events -= 1
            return _Stream([WatchEvent("ADDED", {"metadata": "x"})])
        return super().watch(*args, **kwargs)


class _Stream(Iterator[WatchEvent]):
    def __init__(self, events: list[WatchEvent]) -> None:
        self._events = iter(events)

    def __next__(self) -> WatchEvent:
        return next(self._events)

    def close(self) -> None:
        pass

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def test_an_unexpected_exception_or_a_malformed_event_from_any_cluster_does_not_end_the_informer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = _BuggyCluster(broken_lists=3, bad_events=3)
    cluster.create(POD, pod("a"))

    with Informer(cluster, POD, backoff=FAST_BACKOFF) as informer:
        eventually(lambda: informer.stats.lists >= 7 and informer.health().ok, what="lists after the bugs")
        cluster.create(POD, pod("b"))
        assert informer.wait_until(lambda items: names(items) == ["a", "b"], GENEROUS)

        health = informer.health()
        assert health.alive and health.stats.internal == 3 and health.malformed == {"bad-metadata": 3}
    errors = [r for r in caplog.records if r.name == "karpenter_policy.kube.informer" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None and "KeyError" in errors[0].getMessage()


def test_after_a_relist_an_unchanged_object_is_still_the_one_every_handler_holds(backend: Backend) -> None:
    """A relist (410 Gone) keeps the cached copy of each object whose resourceVersion did not change, so the
    cache and a handler that keeps what it is given (the cluster state's pod records) hold one object between
    them. The cache took the list's fresh copy of every object: after each relist every unchanged pod was held
    twice, the handler's copy and the cache's (issue #23: at 5,000 nodes / 100,000 pods under churn on a loaded
    machine, `scale.py --what memory` saw five relists in ten minutes take RSS from 1,010 to 1,450 MiB)."""
    cluster = backend.cluster
    for name in ("a", "b"):
        cluster.create(POD, pod(name))
    held: dict[str, Any] = {}

    def keep(event: WatchEvent) -> None:  # what ClusterState does with a pod: keeps the object it is given
        if event.type == "DELETED":
            held.pop(objects.name(event.object), None)
        else:
            held[objects.name(event.object)] = event.object

    with Informer(cluster, POD, on_event=keep, backoff=FAST_BACKOFF) as informer:
        assert informer.wait_until(lambda items: names(items) == ["a", "b"], GENEROUS)
        unchanged = informer.get_shared("a", "default")
        with backend.watch_outage():
            eventually(lambda: informer.stats.errors >= 1, what="the informer meeting the outage")
            cluster.patch(POD, "b", {"metadata": {"labels": {"v": "2"}}}, "default")
            backend.compact()
        assert informer.wait_until(lambda items: objects.labels(items[1]) == {"v": "2"}, GENEROUS)
        assert informer.stats.gone >= 1 and informer.stats.lists >= 2

        assert unchanged is not None and informer.get_shared("a", "default") is unchanged
        assert all(held[name] is informer.get_shared(name, "default") for name in ("a", "b"))
        assert objects.labels(held["b"]) == {"v": "2"}
