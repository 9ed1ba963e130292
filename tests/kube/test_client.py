"""What only the HTTP adapter does: configuration from a kubeconfig, authentication, retries of reads,
and failures mapped onto the package's errors — over real HTTP to the API emulator, nothing patched."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import ClusterError, Unavailable
from karpenter_policy.kube.objects import CONFIG_MAP, EC2_NODE_CLASS, MACHINE, NODE_CLAIM, POD

from .emulator import EmulatorThread
from .support import pod

FAST_BACKOFF = Backoff(initial=0.01, maximum=0.05)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _kubeconfig(path: Path, server: str, other_server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "emulated", "cluster": {"server": server}},
            {"name": "elsewhere", "cluster": {"server": other_server}},
        ],
        "users": [{"name": "reconciler", "user": {"token": "s3cret-token"}}],
        "contexts": [
            {"name": "emulated", "context": {"cluster": "emulated", "user": "reconciler"}},
            {"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "reconciler"}},
        ],
        "current-context": "elsewhere",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_kubeconfig_context_selects_the_server_and_its_token(api_server: EmulatorThread, tmp_path: Path) -> None:
    config = _kubeconfig(tmp_path / "kubeconfig", api_server.url, f"http://127.0.0.1:{_closed_port()}")

    cluster = KubeCluster.from_kubeconfig(str(config), context="emulated")
    cluster.create(POD, pod("web"))

    assert [p["metadata"]["name"] for p in cluster.list(POD).items] == ["web"]
    assert cluster.host == api_server.url
    tokens = {request.headers.get("Authorization") for request in api_server.emulator}
    assert tokens == {"Bearer s3cret-token"}


def test_a_bad_kubeconfig_is_a_cluster_error_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n")

    with pytest.raises(ClusterError, match=str(config)):
        KubeCluster.from_kubeconfig(str(config), context="missing")
    with pytest.raises(ClusterError, match="nowhere"):
        KubeCluster.from_kubeconfig(str(tmp_path / "nowhere"))


def test_an_unreachable_server_is_unavailable_and_no_client_exception_escapes() -> None:
    cluster = KubeCluster.from_url(f"http://127.0.0.1:{_closed_port()}", retries=2, backoff=FAST_BACKOFF)

    for call in (lambda: cluster.list(POD), lambda: cluster.create(POD, pod("web")),
                 lambda: cluster.watch(POD, "1"), lambda: cluster.get(POD, "web")):
        with pytest.raises(Unavailable) as raised:
            call()
        assert type(raised.value).__module__ == "karpenter_policy.kube.errors"


def test_reads_are_retried_through_transient_server_errors(api_server: EmulatorThread) -> None:
    cluster = KubeCluster.from_url(api_server.url, retries=3, backoff=FAST_BACKOFF)
    cluster.create(CONFIG_MAP, {"metadata": {"name": "cm"}, "data": {"v": "1"}})

    api_server.emulator.fail_next(2)
    listed = cluster.list(CONFIG_MAP)
    api_server.emulator.fail_next(2)
    fetched = cluster.get(CONFIG_MAP, "cm")

    assert [item["data"] for item in listed.items] == [{"v": "1"}]
    assert fetched is not None and fetched["data"] == {"v": "1"}


def test_reads_give_up_after_their_retries(api_server: EmulatorThread) -> None:
    cluster = KubeCluster.from_url(api_server.url, retries=1, backoff=FAST_BACKOFF)

    api_server.emulator.fail_next(2)
    with pytest.raises(Unavailable) as raised:
        cluster.list(CONFIG_MAP)

    assert raised.value.status == 503


def test_writes_are_not_retried(api_server: EmulatorThread) -> None:
    cluster = KubeCluster.from_url(api_server.url, retries=3, backoff=FAST_BACKOFF)

    api_server.emulator.fail_next(1)
    with pytest.raises(Unavailable):
        cluster.create(CONFIG_MAP, {"metadata": {"name": "cm"}})

    assert cluster.get(CONFIG_MAP, "cm") is None


def test_a_list_is_read_in_pages_of_one_snapshot(api_server: EmulatorThread) -> None:
    cluster = KubeCluster.from_url(api_server.url, page_size=50)
    for i in range(120):
        cluster.create(POD, pod(f"web-{i:03}"))
    expected = sorted(f"web-{i:03}" for i in range(120))
    before = api_server.emulator.list_requests

    listed = cluster.list(POD)

    assert [p["metadata"]["name"] for p in listed.items] == expected
    assert api_server.emulator.list_requests - before == 3  # 50 + 50 + 20
    limits = [r.params.get("limit") for r in list(api_server.emulator)[-3:]]
    assert limits == ["50", "50", "50"]
    watched = cluster.watch(POD, listed.resource_version, timeout_seconds=1)
    cluster.create(POD, pod("late"))
    assert next(watched).object["metadata"]["name"] == "late", "the pages' version is where the watch resumes"
    watched.close()


def test_a_snapshot_expired_between_pages_is_read_again_whole(api_server: EmulatorThread) -> None:
    cluster = KubeCluster.from_url(api_server.url, page_size=2)
    for i in range(5):
        cluster.create(POD, pod(f"web-{i}"))
    emulator = api_server.emulator
    emulator.expire_pages(after=1)

    listed = cluster.list(POD)

    assert [p["metadata"]["name"] for p in listed.items] == [f"web-{i}" for i in range(5)]
    assert [r.params.get("limit") for r in list(emulator)[-3:]] == ["2", "2", None], "page, 410, whole list"


def test_a_watch_cut_mid_stream_just_ends(api_server: EmulatorThread) -> None:
    cluster = KubeCluster.from_url(api_server.url, backoff=FAST_BACKOFF)
    start = cluster.list(POD).resource_version
    stream = cluster.watch(POD, start, timeout_seconds=60)
    cluster.create(POD, pod("a"))
    first = next(stream)

    api_server.emulator.drop_watches()

    assert first.type == "ADDED"
    assert list(stream) == []  # the caller watches again from first.resource_version


def test_served_tells_a_kind_the_server_lacks_by_discovery_as_kubectl_does() -> None:
    with EmulatorThread(crds=frozenset({NODE_CLAIM})) as server:
        cluster = KubeCluster.from_url(server.url, backoff=FAST_BACKOFF)
        try:
            served = {kind.plural: cluster.served(kind) for kind in (POD, NODE_CLAIM, MACHINE, EC2_NODE_CLASS)}
        finally:
            cluster.close()

    assert served == {"pods": True, "nodeclaims": True, "machines": False, "ec2nodeclasses": False}
