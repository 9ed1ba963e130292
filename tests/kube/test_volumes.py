"""`kube.volumes` and `kube.attachments`: what node termination reads of storage (VolumeAttachments by node, from an
informer started on demand; a PersistentVolumeClaim's volume), over HTTP from the test API server with RBAC, checked
at the edge: an answer of another shape is Malformed, a refusal (403 where the role lacks the verb) a ClusterError —
the caller's "unknown", never an empty list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.kube.attachments import InformedAttachments
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import ClusterError, Malformed
from karpenter_policy.kube.objects import PERSISTENT_VOLUME_CLAIM, VOLUME_ATTACHMENT, Obj
from karpenter_policy.kube.volumes import Attachment, attachment, bound_volume

from .apiserver.kinds import CLUSTER_ROLE, CLUSTER_ROLE_BINDING
from .emulator import EmulatorThread
from .support import eventually


def _va(name: str, node: Any, volume: Any = None) -> Obj:
    source = {"persistentVolumeName": volume} if volume is not None else {"inlineVolumeSpec": {"csi": {}}}
    return {"metadata": {"name": name}, "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": source}}


@pytest.fixture()
def server() -> Iterator[EmulatorThread]:
    with EmulatorThread(seed_namespaces=True, authorize=True) as running:
        yield running


def _client(config: Path) -> KubeCluster:
    return KubeCluster.from_kubeconfig(str(config), backoff=Backoff(0.01, 0.05))


def _grant(server: EmulatorThread, tmp_path: Path, *verbs: str) -> KubeCluster:
    """A client as a ServiceAccount whose ClusterRole grants `verbs` on volumeattachments (none: bound to nothing)
    and `get` on persistentvolumeclaims."""
    admin = _client(server.write_kubeconfig(tmp_path / "admin"))
    try:
        if verbs:
            rules = [{"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": list(verbs)},
                     {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"]}]
            admin.create(CLUSTER_ROLE, {"metadata": {"name": "volumes"}, "rules": rules})
            admin.create(CLUSTER_ROLE_BINDING, {
                "metadata": {"name": "volumes"}, "roleRef": {"kind": "ClusterRole", "name": "volumes"},
                "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": "default"}]})
    finally:
        admin.close()
    token = server.emulator._bearer_tokens.issue("default", "controller")
    return _client(server.write_kubeconfig(tmp_path / "sa", token=token))


def _attachment_lists(server: EmulatorThread) -> int:
    """The LISTs of volumeattachments the server was asked (watches not counted)."""
    return sum(1 for r in server.emulator._requests
               if "volumeattachments" in r.url.path and str(r.method.value) == "GET"
               and r.params.get("watch") not in ("true", "1"))


def test_attachments_are_read_by_node_and_a_claims_volume_by_name(server: EmulatorThread, tmp_path: Path) -> None:
    """The informer's index over HTTP, as the chart's role allows (list, watch): each node's attachments by name,
    an inline one (no PersistentVolume) kept with `volume` None; a claim's bound volume, None unbound or missing."""
    admin = _client(server.write_kubeconfig(tmp_path / "admin"))
    client = _grant(server, tmp_path, "list", "watch")
    index = InformedAttachments(client)
    try:
        for made in (_va("a", "n1", "pv-a"), _va("b", "n2", "pv-b"), _va("inline", "n1")):
            admin.create(VOLUME_ATTACHMENT, made)
        admin.create(PERSISTENT_VOLUME_CLAIM, {"metadata": {"name": "data", "namespace": "default"},
                                               "spec": {"volumeName": "pv-a", "accessModes": ["ReadWriteOnce"]}})
        admin.create(PERSISTENT_VOLUME_CLAIM, {"metadata": {"name": "unbound", "namespace": "default"},
                                               "spec": {"accessModes": ["ReadWriteOnce"]}})
        index.sync()
        assert index.informer.wait_synced(10)
        assert index.on("n1") == [Attachment("a", "n1", "pv-a"), Attachment("inline", "n1", None)]
        assert index.on("n3") == []
        assert bound_volume(client, "default", "data") == "pv-a"
        assert bound_volume(client, "default", "unbound") is None
        assert bound_volume(client, "default", "missing") is None
    finally:
        index.stop()
        client.close()
        admin.close()


def test_a_pass_over_many_terminating_nodes_lists_attachments_once_then_follows_the_watch(
    server: EmulatorThread, tmp_path: Path
) -> None:
    """Issue #26: termination asked the API for every VolumeAttachment at each pass; the index lists them once, when
    first asked, then follows the watch — 20 nodes looked up over 5 passes make one LIST, and a deletion made since
    is seen without another."""
    admin = _client(server.write_kubeconfig(tmp_path / "admin"))
    client = _grant(server, tmp_path, "list", "watch")
    index = InformedAttachments(client)
    nodes = [f"n{i}" for i in range(20)]
    try:
        for node in nodes:
            admin.create(VOLUME_ATTACHMENT, _va(f"va-{node}", node, f"pv-{node}"))
        assert _attachment_lists(server) == 0  # started on demand: nothing asked before the first sync
        for _ in range(5):  # five passes of termination, each asking every node
            index.sync()
            assert all(index.on(node) == [Attachment(f"va-{node}", node, f"pv-{node}")] for node in nodes)
        admin.delete(VOLUME_ATTACHMENT, "va-n0")
        assert index.informer.wait_until(lambda items: len(items) == len(nodes) - 1, 10)
        assert index.on("n0") == []
        assert _attachment_lists(server) == 1
    finally:
        index.stop()
        client.close()
        admin.close()


def test_an_index_stopped_before_its_first_sync_never_starts_its_informer(
    server: EmulatorThread, tmp_path: Path
) -> None:
    """Issue #26: `stop` is final — a controller closing while a termination pass is still under way must not have
    that pass start a watch nobody will stop (before: `stop` did nothing to an index not started yet, and the
    first `sync` after it started the informer for good). Nothing is listed; the attachments read as unknown."""
    client = _grant(server, tmp_path, "list", "watch")
    index = InformedAttachments(client)
    try:
        index.stop()
        index.sync()
        assert not index.informer.health().alive
        assert _attachment_lists(server) == 0
        with pytest.raises(ClusterError, match="have not been listed yet"):
            index.on("n1")
    finally:
        index.stop()
        client.close()


@pytest.mark.parametrize("verbs", [(), ("list",)], ids=["no-role", "list-without-watch"])
def test_a_role_without_the_verbs_is_unknown_never_no_attachments(
    server: EmulatorThread, tmp_path: Path, verbs: tuple[str, ...]
) -> None:
    """A ServiceAccount bound to no role (403 on the list), or allowed to list but not to watch (a chart of before
    the informer): the index never answers "none" — every node's attachments are unknown, the error naming the
    403; a claim's volume that cannot be read is an error too."""
    admin = _client(server.write_kubeconfig(tmp_path / "admin"))
    try:
        admin.create(VOLUME_ATTACHMENT, _va("a", "n1", "pv-a"))
    finally:
        admin.close()
    client = _grant(server, tmp_path, *verbs)
    index = InformedAttachments(client)
    try:
        index.sync()
        # a failure leaves the cache as it is: `wait_until`, woken by changes only, would sleep out its timeout
        eventually(lambda: index.informer.health().consecutive_failures > 0, what="the refused list or watch")
        for node in ("n1", "n2"):
            with pytest.raises(ClusterError, match="403|[Ff]orbidden"):
                index.on(node)
        if not verbs:
            with pytest.raises(ClusterError):
                bound_volume(client, "default", "data")
    finally:
        index.stop()
        client.close()


def test_an_attachment_of_another_shape_makes_its_node_unknown_or_every_node_when_its_node_is_unreadable(
    server: EmulatorThread, tmp_path: Path
) -> None:
    """Malformed attachments over the watch: one whose `spec.source` is not an object holds its own node as unknown
    (other nodes read as before); one whose `spec.nodeName` is not a name holds every node; each counted once by
    its problem; deleted, the index reads again."""
    admin = _client(server.write_kubeconfig(tmp_path / "admin"))
    client = _grant(server, tmp_path, "list", "watch")
    counted: list[str] = []
    index = InformedAttachments(client, lambda kind, problem: counted.append(f"{kind.plural}:{problem}"))
    try:
        admin.create(VOLUME_ATTACHMENT, _va("fine", "n2", "pv-b"))
        index.sync()
        assert index.informer.wait_synced(10)
        admin.create(VOLUME_ATTACHMENT, {"metadata": {"name": "odd"}, "spec": {"nodeName": "n1", "source": "pv"}})
        assert index.informer.wait_until(lambda items: len(items) == 2, 10)
        with pytest.raises(Malformed, match="volumeattachment odd: spec.source is not an object"):
            index.on("n1")
        assert index.on("n2") == [Attachment("fine", "n2", "pv-b")]
        admin.create(VOLUME_ATTACHMENT, {"metadata": {"name": "nameless"}, "spec": {"nodeName": 7, "source": {}}})
        assert index.informer.wait_until(lambda items: len(items) == 3, 10)
        with pytest.raises(Malformed, match="volumeattachment nameless: spec.nodeName"):
            index.on("n2")
        admin.delete(VOLUME_ATTACHMENT, "odd")
        admin.delete(VOLUME_ATTACHMENT, "nameless")
        assert index.informer.wait_until(lambda items: len(items) == 1, 10)
        assert index.on("n1") == [] and index.on("n2") == [Attachment("fine", "n2", "pv-b")]
        assert counted == ["volumeattachments:bad-spec", "volumeattachments:bad-spec"]
    finally:
        index.stop()
        client.close()
        admin.close()


@pytest.mark.parametrize(("spec", "field"), [
    (None, "spec is not an object"),
    ({"nodeName": 7, "source": {}}, "spec.nodeName"),
    ({"nodeName": "", "source": {}}, "spec.nodeName"),
    ({"nodeName": "n1", "source": ["pv"]}, "spec.source is not an object"),
    ({"nodeName": "n1", "source": {"persistentVolumeName": 3}}, "spec.source.persistentVolumeName"),
])
def test_an_attachment_of_another_shape_is_malformed_naming_its_field(spec: Any, field: str) -> None:
    with pytest.raises(Malformed, match=f"volumeattachment odd: {field}"):
        attachment({"metadata": {"name": "odd"}, "spec": spec})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@deterministic(300)
@given(spec=st.dictionaries(st.sampled_from(["nodeName", "source", "attacher"]), JSON | st.fixed_dictionaries(
    {"persistentVolumeName": JSON})))
def test_any_attachment_is_read_or_malformed_never_another_error(spec: dict[str, Any]) -> None:
    try:
        read = attachment({"metadata": {"name": "x"}, "spec": spec})
    except Malformed:
        return
    assert read.node == spec["nodeName"] and isinstance(read.node, str) and read.node
    assert read.volume == (spec["source"].get("persistentVolumeName") or None)
