"""AL2023's user data (karpenter_policy.cloud.aws.userdata: `al2023`, `node_config`): nodeadm's NodeConfig as
Karpenter v1.14.1 writes it, checked against that release's goldens (tests/data/karpenter-v1.14.1-userdata)."""

from __future__ import annotations

import dataclasses
import email
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.cloud.aws.userdata import NODECONFIG_PART_TYPE, Bootstrap, render
from karpenter_policy.model.taints import Taint

GOLDEN = Path(__file__).parents[1] / "data" / "karpenter-v1.14.1-userdata"
NODE_CLASS, NODEPOOL_KEY, NODEPOOL = "default", "karpenter.sh/nodepool", "default"

#: What the goldens were made with (launchtemplate/suite_test.go at v1.14.1: test environment's cluster, the
#: kubelet's maxPods 110 of the table's BeforeEach, the unregistered taint and the labels its NodePool gives).
KARPENTER = Bootstrap(
    cluster_name="test-cluster",
    cluster_endpoint="https://test-cluster",
    ca_bundle="Y2EtYnVuZGxlCg==",
    cluster_cidr="10.100.0.0/16",
    dns_cluster_ip="10.0.100.10",
    max_pods=110,
    taints=(Taint("karpenter.sh/unregistered", "NoExecute"),),
    labels={
        "karpenter.k8s.aws/ec2nodeclass": NODE_CLASS,
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/do-not-sync-taints": "true",
        NODEPOOL_KEY: NODEPOOL,
        "testing/cluster": "unspecified",
    },
)


def golden(name: str) -> str:
    return (GOLDEN / f"{name}.golden").read_text()


def without_newlines(text: str) -> str:
    """`ExpectLaunchTemplatesCreatedWithUserData` (suite_test.go:3002) compares with every newline removed."""
    return text.replace("\n", "")


@pytest.mark.parametrize(
    ("custom", "merged"),
    [
        # launchtemplate/suite_test.go:2106-2109, "should merge custom user data" (AL2023)
        ("al2023_mime_userdata_input", "al2023_mime_userdata_merged"),
        ("al2023_yaml_userdata_input", "al2023_yaml_userdata_merged"),
        ("al2023_shell_userdata_input", "al2023_shell_userdata_merged"),
        (None, "al2023_userdata_unmerged"),
    ],
)
def test_al2023_user_data_is_karpenter_v1_14_1s(custom: str | None, merged: str) -> None:
    b = dataclasses.replace(KARPENTER, custom=golden(custom) if custom else None)
    expected = golden(merged) % (NODE_CLASS, NODEPOOL_KEY, NODEPOOL)

    text = render("AL2023", b)

    assert without_newlines(text) == without_newlines(expected)
    if custom is None:
        assert text == expected  # byte for byte where no template text is involved


def node_configs(text: str) -> list[dict[str, Any]]:
    message = email.message_from_string(text)
    return [
        yaml.safe_load(str(part.get_payload()))
        for part in message.walk()
        if not part.is_multipart() and part.get_content_type() == NODECONFIG_PART_TYPE
    ]


def test_al2023_kubelet_settings_taints_and_labels_are_in_the_node_config() -> None:
    # suite_test.go:1899 (taints in registerWithTaints), 1932 (labels in the kubelet's flags), 1985 (a
    # KubeletConfiguration field inline, systemReserved among them)
    b = dataclasses.replace(
        KARPENTER,
        taints=(Taint("test-taint-1", "NoSchedule"), Taint("dedicated", "NoExecute", "data")),
        labels={"test-label-1": "value-1", "test-label-2": "value-2"},
        kubelet={"systemReserved": {"cpu": "500m", "memory": "1Gi"}, "containerRuntime": "containerd"},
    )

    (config,) = node_configs(render("AL2023", b))

    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["registerWithTaints"] == [
        {"key": "test-taint-1", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "data", "effect": "NoExecute"},
    ]
    assert kubelet["config"]["systemReserved"] == {"cpu": "500m", "memory": "1Gi"}
    assert "containerRuntime" not in kubelet["config"]  # not a field of v1's KubeletConfiguration
    assert kubelet["flags"] == ['--node-labels="test-label-1=value-1,test-label-2=value-2"']


def test_al2023_without_the_service_cidr_is_refused_not_launched_without_it() -> None:
    # suite_test.go:2111 "should fail to create launch templates if cluster CIDR is unresolved"
    with pytest.raises(ValueError, match="service CIDR"):
        render("AL2023", dataclasses.replace(KARPENTER, cluster_cidr=None))


def test_al2023_with_a_ca_that_is_not_base64_is_refused() -> None:
    with pytest.raises(ValueError, match="not base64"):
        render("AL2023", dataclasses.replace(KARPENTER, ca_bundle="not base64!"))


def test_windows2025_boots_with_the_windows_script() -> None:
    b = dataclasses.replace(KARPENTER, custom="Write-Host hi")
    assert render("Windows2025", b) == render("Windows2022", b)
    assert "Start-EKSBootstrap.ps1" in render("Windows2025", b)


label_values = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._", min_size=1, max_size=20)


@deterministic(200)
@given(
    labels=st.dictionaries(st.from_regex(r"[a-z]([a-z0-9.-]{0,10}[a-z0-9])?/[a-z][a-z0-9]{0,8}", fullmatch=True),
                           label_values, max_size=6),
    max_pods=st.integers(min_value=1, max_value=737),
    custom=st.sampled_from([None, "#!/bin/bash\necho hi", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"]),
)
def test_al2023_user_data_reads_back_as_what_was_asked(
    labels: dict[str, str], max_pods: int, custom: str | None
) -> None:
    b = dataclasses.replace(KARPENTER, labels=labels, max_pods=max_pods, custom=custom)

    text = render("AL2023", b)

    configs = node_configs(text)
    ours = configs[-1]["spec"]
    assert ours["cluster"] == {
        "apiServerEndpoint": "https://test-cluster", "certificateAuthority": "Y2EtYnVuZGxlCg==",
        "cidr": "10.100.0.0/16", "name": "test-cluster",
    }
    assert ours["kubelet"]["config"]["maxPods"] == max_pods
    flags = ours["kubelet"].get("flags", [])
    expected = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    assert flags == ([f'--node-labels="{expected}"'] if labels else [])
    assert text == render("AL2023", b)  # the same settings, the same bytes: the same launch template
