"""One behavioural suite, two clusters: every test that takes ``backend`` runs against MemoryCluster and
against KubeCluster talking real HTTP to the kmock-based API emulator (tests/kube/emulator.py)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.cluster import Cluster, WatchStream
from karpenter_policy.kube.errors import Unavailable
from karpenter_policy.kube.memory import MemoryCluster

from .emulator import ApiEmulator, EmulatorThread


class FlakyMemoryCluster(MemoryCluster):
    """MemoryCluster with the emulator's watch outage: open watches are cut, lists and watches fail."""

    def __init__(self) -> None:
        super().__init__()
        self._down = threading.Event()
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()

    def list(self, *args: Any, **kwargs: Any) -> Any:
        if self._down.is_set():
            raise Unavailable("watch outage (test)")
        return super().list(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> WatchStream:
        if self._down.is_set():
            raise Unavailable("watch outage (test)")
        stream = super().watch(*args, **kwargs)
        self._streams.add(stream)
        return stream

    @contextlib.contextmanager
    def watch_outage(self) -> Iterator[None]:
        self._down.set()
        for stream in list(self._streams):
            stream.close()
        try:
            yield
        finally:
            self._down.clear()


@dataclass
class Backend:
    name: str
    cluster: Cluster
    compact: Callable[[], None]
    watch_outage: Callable[[], contextlib.AbstractContextManager[None]]
    emulator: ApiEmulator | None = None


FAST_BACKOFF = Backoff(initial=0.02, maximum=0.2)


@pytest.fixture()
def api_server() -> Iterator[EmulatorThread]:
    with EmulatorThread() as server:
        yield server


@pytest.fixture(params=["memory", "kube"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        memory = FlakyMemoryCluster()
        yield Backend("memory", memory, memory.compact, memory.watch_outage)
        return
    with EmulatorThread() as server:
        cluster = KubeCluster.from_url(server.url, backoff=FAST_BACKOFF)
        try:
            yield Backend("kube", cluster, server.emulator.compact, server.emulator.watch_outage, server.emulator)
        finally:
            cluster.close()
