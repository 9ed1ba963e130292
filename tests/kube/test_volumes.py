"""`kube.volumes`: what node termination reads of storage (VolumeAttachments, a PersistentVolumeClaim's volume),
over HTTP from the test API server and checked at the edge: an answer of another shape is Malformed, a refusal
(403 where the role lacks the verb) a ClusterError — the caller's "unknown", never an empty list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.errors import ClusterError, Malformed
from karpenter_policy.kube.objects import PERSISTENT_VOLUME_CLAIM, VOLUME_ATTACHMENT, Obj
from karpenter_policy.kube.volumes import Attachment, attachment, attachments_on, bound_volume

from .emulator import EmulatorThread


def _va(name: str, node: Any, volume: Any = None) -> Obj:
    source = {"persistentVolumeName": volume} if volume is not None else {"inlineVolumeSpec": {"csi": {}}}
    return {"metadata": {"name": name}, "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": source}}


@pytest.fixture()
def server() -> Iterator[EmulatorThread]:
    with EmulatorThread(seed_namespaces=True, authorize=True) as running:
        yield running


def _client(config: Path) -> KubeCluster:
    return KubeCluster.from_kubeconfig(str(config), backoff=Backoff(0.01, 0.05))


def test_attachments_are_read_by_node_and_a_claims_volume_by_name(server: EmulatorThread, tmp_path: Path) -> None:
    client = _client(server.write_kubeconfig(tmp_path / "admin"))
    try:
        for made in (_va("a", "n1", "pv-a"), _va("b", "n2", "pv-b"), _va("inline", "n1")):
            client.create(VOLUME_ATTACHMENT, made)
        client.create(PERSISTENT_VOLUME_CLAIM, {"metadata": {"name": "data", "namespace": "default"},
                                                "spec": {"volumeName": "pv-a", "accessModes": ["ReadWriteOnce"]}})
        client.create(PERSISTENT_VOLUME_CLAIM, {"metadata": {"name": "unbound", "namespace": "default"},
                                                "spec": {"accessModes": ["ReadWriteOnce"]}})
        assert attachments_on(client, {"n1", "n3"}) == {
            "n1": [Attachment("a", "n1", "pv-a"), Attachment("inline", "n1", None)]}
        assert bound_volume(client, "default", "data") == "pv-a"
        assert bound_volume(client, "default", "unbound") is None
        assert bound_volume(client, "default", "missing") is None
    finally:
        client.close()


def test_a_role_without_the_verbs_is_an_error_never_no_attachments(server: EmulatorThread, tmp_path: Path) -> None:
    admin = _client(server.write_kubeconfig(tmp_path / "admin"))
    try:
        admin.create(VOLUME_ATTACHMENT, _va("a", "n1", "pv-a"))
    finally:
        admin.close()
    token = server.emulator._bearer_tokens.issue("default", "controller")
    client = _client(server.write_kubeconfig(tmp_path / "sa", token=token))  # a ServiceAccount bound to no role
    try:
        with pytest.raises(ClusterError) as refused:
            attachments_on(client, {"n1"})
        assert refused.value.status == 403
        with pytest.raises(ClusterError):
            bound_volume(client, "default", "data")
    finally:
        client.close()


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
