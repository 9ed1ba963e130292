"""What the API says is never trusted blindly: the real KubeCluster and Informer against a hostile API server
over real HTTP (tests/kube/hostile.py) — malformed watch lines and list bodies, empty and Status answers,
410 on every watch, 500s, a watch that hangs, slow answers. The informer's thread survives, counts and logs
each problem once, backs off, relists, reports the failure in its health while it lasts, and converges to
the server's state once it recovers; a malformed list is "unavailable", never "zero objects"."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from profiles import fast_first

from karpenter_policy.kube import objects, shape
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.cluster import WatchEvent
from karpenter_policy.kube.errors import Malformed, Unavailable
from karpenter_policy.kube.informer import Informer, InformerHealth, Synced
from karpenter_policy.kube.objects import NODE, POD

from .hostile import GONE, GONE_LINE, SERVER_ERROR, Answer, HostileServer, status_body
from .support import GENEROUS, eventually, names, node, pod

INFORMER_LOG = "karpenter_policy.kube.informer"


@pytest.fixture()
def server() -> Iterator[HostileServer]:
    with HostileServer() as hostile:
        yield hostile


def _cluster(server: HostileServer, **options: Any) -> KubeCluster:
    return KubeCluster.from_url(server.url, retries=0, **options)


def _least_wait(backoff: Backoff, failures: int) -> float:
    """The shortest total time ``failures`` successive backoff delays can take (each is at least half its
    ceiling): a lower bound that a loaded machine only makes longer."""
    return sum(min(backoff.maximum, backoff.initial * backoff.factor**i) / 2 for i in range(failures))


def _warnings(caplog: pytest.LogCaptureFixture, word: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == INFORMER_LOG and r.levelno >= logging.WARNING
            and word in r.getMessage()]


def _converges(informer: Informer, server: HostileServer, kind: objects.Kind = NODE) -> bool:
    def same(items: list[objects.Obj]) -> bool:
        return [(objects.name(o), objects.resource_version(o)) for o in items] == [
            (objects.name(o), objects.resource_version(o)) for o in server.state(kind)
        ]

    return informer.wait_until(same, GENEROUS)


MALFORMED_LINES = {
    "a JSON array": ([1, 2], shape.NOT_AN_OBJECT),
    "not JSON": (b"{oops", shape.NOT_JSON),
    "an object that is a string": ({"type": "ADDED", "object": "x"}, shape.EVENT_OBJECT_NOT_AN_OBJECT),
    "an ERROR whose object is not a Status": ({"type": "ERROR", "object": "boom"}, shape.EVENT_OBJECT_NOT_AN_OBJECT),
    "an unknown type": ({"type": "EXPLODED", "object": node("n")}, shape.UNKNOWN_EVENT_TYPE),
    "metadata that is not a map": ({"type": "ADDED", "object": {"metadata": ["n"]}}, shape.BAD_METADATA),
    "an object without a name": ({"type": "MODIFIED", "object": {"metadata": {"labels": {}}}}, shape.NO_NAME),
    "labels that are not a map": (
        {"type": "ADDED", "object": {"metadata": {"name": "n", "labels": "abc"}}}, shape.BAD_METADATA),
    "a bookmark without a version": ({"type": "BOOKMARK", "object": {"metadata": {}}}, shape.NO_RESOURCE_VERSION),
}


@pytest.mark.parametrize("line,problem", fast_first(MALFORMED_LINES.values(), unpack=True), ids=MALFORMED_LINES.keys())
def test_a_malformed_watch_line_is_counted_logged_once_backed_off_and_relisted(
    server: HostileServer, caplog: pytest.LogCaptureFixture, line: Any, problem: str
) -> None:
    caplog.set_level(logging.WARNING, INFORMER_LOG)
    server.put(NODE, node("a"))
    backoff = Backoff(initial=0.1, maximum=0.4)
    server.always(NODE, "watch", Answer(lines=(line,)))

    with Informer(_cluster(server), NODE, backoff=backoff) as informer:
        assert informer.wait_synced(GENEROUS)
        started = time.monotonic()
        eventually(lambda: informer.stats.malformed.get(problem, 0) >= 5, what="five malformed lines")
        elapsed = time.monotonic() - started
        health = informer.health()

        assert health.alive and health.synced and not health.ok
        assert health.consecutive_failures >= 5 and health.failing_for() > 0
        assert health.malformed[problem] >= 5 and problem in (health.last_error or "")
        assert server.count(NODE, "list") >= 5  # each malformed line made it list again
        assert elapsed >= _least_wait(backoff, 4)  # …after a backoff that grew
        assert len(_warnings(caplog, problem)) == 1  # logged once, not once per line

        server.heal()
        server.put(NODE, node("b"))
        server.remove(NODE, "a")
        assert _converges(informer, server)
        eventually(lambda: informer.health().ok, what="the informer healthy again")
        assert informer.health().failing_since is None


MALFORMED_LISTS = {
    "an empty 200 body": (b"", shape.EMPTY),
    "a body that is not JSON": (b"<html>bad gateway</html>", shape.NOT_JSON),
    "a JSON array": ([], shape.NOT_AN_OBJECT),
    "a 200 Status": (status_body(500, "InternalError", "etcd timeout"), shape.STATUS),
    "items that are a string": ({"kind": "NodeList", "metadata": {"resourceVersion": "9"}, "items": "abc"},
                                shape.ITEMS_NOT_A_LIST),
    "no items at all": ({"metadata": {"resourceVersion": "9"}}, shape.ITEMS_NOT_A_LIST),
    "a null item": ({"kind": "NodeList", "metadata": {"resourceVersion": "9"}, "items": [None]},
                    shape.ITEM_NOT_AN_OBJECT),
    "an item whose metadata is not a map": (
        {"kind": "NodeList", "metadata": {"resourceVersion": "9"}, "items": [{"metadata": "x"}]}, shape.BAD_METADATA),
    "a list without a resourceVersion": ({"kind": "NodeList", "metadata": {}, "items": []},
                                         shape.NO_RESOURCE_VERSION),
    "a continue token that is not a string": (
        {"kind": "NodeList", "metadata": {"resourceVersion": "9", "continue": 5}, "items": []}, shape.BAD_METADATA),
}


@pytest.mark.parametrize("body,problem", MALFORMED_LISTS.values(), ids=MALFORMED_LISTS.keys())
def test_a_malformed_list_is_unavailable_never_zero_objects(server: HostileServer, body: Any, problem: str) -> None:
    server.put(NODE, node("live"))
    cluster = _cluster(server)
    server.script(NODE, "list", Answer(body=body))

    with pytest.raises(Malformed) as raised:
        cluster.list(NODE)

    assert raised.value.problem == problem and isinstance(raised.value, Unavailable)
    assert names(cluster.list(NODE).items) == ["live"]  # the next, well-formed answer


def test_pages_whose_continue_token_comes_back_are_malformed_not_an_endless_list(server: HostileServer) -> None:
    server.put(NODE, node("live"))
    cluster = _cluster(server)
    page = {"kind": "NodeList", "metadata": {"resourceVersion": "9", "continue": "again"}, "items": []}
    server.always(NODE, "list", Answer(body=page))

    with pytest.raises(Malformed) as raised:
        cluster.list(NODE)

    assert raised.value.problem == shape.BAD_METADATA and "came back" in str(raised.value)
    server.heal()
    assert names(cluster.list(NODE).items) == ["live"]


@pytest.mark.parametrize("body,problem", fast_first(MALFORMED_LISTS.values(), unpack=True), ids=MALFORMED_LISTS.keys())
def test_a_relist_that_gets_a_malformed_body_keeps_the_cache_and_deletes_nothing(
    server: HostileServer, body: Any, problem: str
) -> None:
    for name in ("a", "b"):
        server.put(NODE, node(name))
    deleted: list[str] = []

    def on_event(event: WatchEvent) -> None:
        if event.type == "DELETED":
            deleted.append(objects.name(event.object))

    informer = Informer(_cluster(server), NODE, on_event=on_event, watch_timeout=1, backoff=Backoff(0.02, 0.1))
    with informer:
        assert informer.wait_until(lambda items: names(items) == ["a", "b"], GENEROUS)
        server.always(NODE, "list", Answer(body=body))
        server.script(NODE, "watch", GONE)  # the open watch ends on its timeout; the next one gets 410

        eventually(lambda: informer.stats.malformed.get(problem, 0) >= 3, what="three malformed relists")

        assert names(informer.items()) == ["a", "b"] and deleted == []
        assert not informer.health().ok and informer.health().synced
        server.heal()
        server.remove(NODE, "a")
        assert _converges(informer, server)
        assert deleted == ["a"]


@pytest.mark.parametrize("body", [b"", status_body(500, "InternalError", "x"), {"metadata": "x"}, {"metadata": {}}],
                         ids=["empty", "Status", "metadata not a map", "no name"])
def test_a_malformed_object_answer_is_unavailable(server: HostileServer, body: Any) -> None:
    server.put(NODE, node("n"))
    server.script(NODE, "get", Answer(body=body))

    with pytest.raises(Malformed):
        _cluster(server).get(NODE, "n")


@pytest.mark.slow
def test_410_on_every_watch_relists_at_once_then_backs_off_and_a_watch_with_events_resets_it(
    server: HostileServer,
) -> None:
    server.put(NODE, node("a"))
    backoff = Backoff(initial=2.0, maximum=8.0)  # every delay at least 1 s: "at once" is far below it
    change = {"type": "MODIFIED", "object": server.put(NODE, node("a", {"v": "2"}))}
    server.script(NODE, "watch", GONE, GONE, Answer(lines=(change, GONE_LINE)), GONE)

    with Informer(_cluster(server), NODE, backoff=backoff) as informer:
        eventually(lambda: server.count(NODE, "list") >= 5, what="five lists")
        lists, watches = server.times(NODE, "list"), server.times(NODE, "watch")

        gaps = [lists[i + 1] - watches[i] for i in range(4)]  # from each 410 to the relist it caused
        assert gaps[0] < 1.0  # the first 410: at once
        assert gaps[1] >= 1.0  # a second in a row: backed off
        assert gaps[2] < 1.0  # after a watch that delivered an event: at once again
        assert gaps[3] >= 1.0
        assert informer.stats.gone == 4 and informer.health().alive


@pytest.mark.slow
def test_410_forever_is_a_capped_exponential_backoff_not_a_list_storm(server: HostileServer) -> None:
    for i in range(20):
        server.put(POD, pod(f"p{i}"))
    backoff = Backoff(initial=0.1, maximum=0.4)
    server.always(POD, "watch", GONE)

    with Informer(_cluster(server), POD, backoff=backoff) as informer:
        started = time.monotonic()
        eventually(lambda: server.count(POD, "list") >= 8, what="eight lists")
        elapsed = time.monotonic() - started

        assert elapsed >= _least_wait(backoff, 6)  # one relist at once, then six delays
        health = informer.health()
        assert not health.ok and health.consecutive_failures >= 7 and "Gone" in (health.last_error or "")
        server.heal()
        eventually(lambda: informer.health().ok, what="healthy once watches work")
        assert len(informer.items()) == 20


def test_500s_are_backed_off_reported_and_recovered_from(
    server: HostileServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, INFORMER_LOG)
    server.put(NODE, node("a"))
    backoff = Backoff(initial=0.1, maximum=0.4)
    server.always(NODE, "list", SERVER_ERROR)

    with Informer(_cluster(server), NODE, backoff=backoff) as informer:
        eventually(lambda: server.count(NODE, "list") >= 5, what="five lists")
        health = informer.health()

        assert health.alive and not health.synced and not health.ok and health.last_list_at is None
        assert health.stats.errors >= 4 and "etcd is on fire" in (health.last_error or "")
        assert len(_warnings(caplog, "Unavailable")) == 1
        server.heal()
        assert _converges(informer, server)
        assert informer.health().synced and informer.health().last_list_at is not None


BOOKMARK = {"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}}}


@pytest.mark.parametrize("lines", [(), (BOOKMARK,)], ids=["empty", "a bookmark alone"])
def test_a_watch_that_ends_at_once_with_no_change_is_a_very_short_watch_and_backed_off(
    server: HostileServer, lines: tuple[Any, ...]
) -> None:
    backoff = Backoff(initial=0.1, maximum=0.4)
    server.always(NODE, "watch", Answer(lines=lines))  # 200, then the stream ends at once

    with Informer(_cluster(server), NODE, backoff=backoff) as informer:
        assert informer.wait_synced(GENEROUS)
        started = time.monotonic()
        eventually(lambda: informer.stats.short_watches >= 5, what="five very short watches")

        assert time.monotonic() - started >= _least_wait(backoff, 4)
        assert not informer.health().ok
        server.heal()
        server.put(NODE, node("late"))
        assert _converges(informer, server)


def test_a_watch_that_sends_a_line_then_hangs_is_given_up_and_watched_again(server: HostileServer) -> None:
    server.put(NODE, node("a"))
    before = server.list_body(NODE)
    change = {"type": "MODIFIED", "object": server.put(NODE, node("a", {"v": "2"}))}
    server.script(NODE, "list", Answer(body=before))
    server.script(NODE, "watch", Answer(lines=(change,), then="hang"))
    cluster = _cluster(server, watch_slack=0.5)

    with Informer(cluster, NODE, watch_timeout=1, backoff=Backoff(0.02, 0.1)) as informer:
        assert informer.wait_until(lambda items: [objects.labels(o) for o in items] == [{"v": "2"}], GENEROUS)
        eventually(lambda: server.count(NODE, "watch") >= 2, what="a new watch after the hung one")
        server.put(NODE, node("b"))
        assert _converges(informer, server)
        assert informer.stats.lists == 1 and informer.health().alive


def test_stop_ends_a_hung_watch_at_once(server: HostileServer) -> None:
    server.always(NODE, "watch", Answer(then="hang"))
    informer = Informer(_cluster(server), NODE, backoff=Backoff(0.02, 0.1)).start()
    assert informer.wait_synced(GENEROUS)
    eventually(lambda: server.count(NODE, "watch") >= 1, what="the watch opening")

    informer.stop(timeout=GENEROUS)

    assert not informer.health().alive


def test_a_slow_list_is_not_synced_until_it_answers_and_one_too_slow_times_out(server: HostileServer) -> None:
    server.put(NODE, node("a"))
    server.script(NODE, "list", Answer(body=None, delay=2.0), Answer(delay=0.3))
    cluster = _cluster(server, read_timeout=1.0)

    with Informer(cluster, NODE, backoff=Backoff(0.02, 0.1)) as informer:
        eventually(lambda: server.count(NODE, "list") >= 1, what="the first list")
        assert not informer.health().synced
        assert informer.wait_synced(GENEROUS)  # the first timed out (1 s), the second answered in 0.3 s

        assert informer.stats.lists == 2 and informer.stats.errors == 1
        assert names(informer.items()) == ["a"]


@pytest.mark.slow
def test_on_event_and_on_sync_see_the_first_list_and_each_relist_in_order(server: HostileServer) -> None:
    for name in ("b", "a", "c"):
        server.put(NODE, node(name))
    seen: list[tuple[str, ...]] = []
    lock = threading.Lock()

    def on_event(event: WatchEvent) -> None:
        with lock:
            seen.append((event.type, objects.name(event.object)))

    def on_sync(synced: Synced) -> None:
        with lock:
            seen.append(("SYNCED", str(synced.initial), str(synced.items), str(synced.added), str(synced.modified),
                         str(synced.deleted)))

    cluster = _cluster(server, watch_slack=0.5)
    with Informer(cluster, NODE, on_event=on_event, on_sync=on_sync, watch_timeout=1,
                  backoff=Backoff(0.02, 0.1)) as informer:
        assert informer.wait_until(lambda items: len(items) == 3, GENEROUS)
        server.always(NODE, "watch", Answer(then="hang"))  # the informer misses what follows…
        eventually(lambda: server.count(NODE, "watch") >= 2, what="the informer watching blind")
        server.remove(NODE, "a")
        server.put(NODE, node("b", {"v": "2"}))
        server.put(NODE, node("d"))
        server.heal()
        server.compact()  # …and the history to replay it is gone: 410, relist
        eventually(lambda: len(seen) >= 8, what="the relist's events")

    with lock:
        assert seen[:4] == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("SYNCED", "True", "3", "3", "0", "0")]
        relist = [("DELETED", "a"), ("MODIFIED", "b"), ("ADDED", "d"), ("SYNCED", "False", "3", "1", "1", "1")]
        assert seen[4:8] == relist


def test_health_before_start_and_after_stop(server: HostileServer) -> None:
    informer = Informer(_cluster(server), NODE, backoff=Backoff(0.02, 0.1))
    before = informer.health()
    informer.start()
    assert informer.wait_synced(GENEROUS)
    eventually(lambda: informer.health().ok, what="a healthy informer")
    informer.stop()
    after = informer.health()

    assert isinstance(before, InformerHealth) and not before.alive and not before.synced
    assert after.synced and not after.alive
