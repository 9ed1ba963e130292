"""What the API says is never trusted blindly: the real KubeCluster against a hostile API server over real
HTTP (tests/kube/hostile.py). A malformed list or object answer is "unavailable", never "zero objects"."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from karpenter_policy.kube import objects, shape
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import Malformed, Unavailable
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.objects import NODE

from .hostile import Answer, HostileServer, status_body
from .support import GENEROUS, names, node

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


@pytest.mark.parametrize("body", [b"", status_body(500, "InternalError", "x"), {"metadata": "x"}, {"metadata": {}}],
                         ids=["empty", "Status", "metadata not a map", "no name"])
def test_a_malformed_object_answer_is_unavailable(server: HostileServer, body: Any) -> None:
    server.put(NODE, node("n"))
    server.script(NODE, "get", Answer(body=body))

    with pytest.raises(Malformed):
        _cluster(server).get(NODE, "n")


