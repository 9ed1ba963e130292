"""userData per AMI family (karpenter_policy.cloud.aws.userdata): what the node runs to join the cluster."""

from __future__ import annotations

import dataclasses
import email
import tomllib

import pytest

from karpenter_policy.cloud.aws.userdata import Bootstrap, bootstrap_labels, render
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.taints import Taint

BASE = Bootstrap(
    cluster_name="blue",
    cluster_endpoint="https://api.blue.example",
    ca_bundle="Q0EK",
    labels={"karpenter.sh/provisioner-name": "default", "team": "data"},
    taints=(Taint("dedicated", "NoSchedule", "data"),),
    kubelet={"kubeReserved": {"cpu": "100m", "memory": "1Gi"}, "evictionHard": {"memory.available": "5%"}},
    max_pods=29,
    dns_cluster_ip="10.100.0.10",
)


def test_al2_runs_the_template_script_first_then_bootstrap_with_kubelet_flags() -> None:
    text = render("AL2", dataclasses.replace(BASE, custom="#!/bin/bash\necho custom"))

    message = email.message_from_string(text)
    parts = [part.get_payload() for part in message.walk() if not part.is_multipart()]
    assert parts[0].strip() == "#!/bin/bash\necho custom"
    assert "/etc/eks/bootstrap.sh blue" in parts[1]
    assert "--b64-cluster-ca Q0EK" in parts[1]
    assert "--use-max-pods false" in parts[1]
    flags = (
        "'--node-labels=karpenter.sh/provisioner-name=default,team=data"
        " --register-with-taints=dedicated=data:NoSchedule --max-pods=29"
        " --kube-reserved=cpu=100m,memory=1Gi --eviction-hard=memory.available<5%'"
    )
    assert f"--kubelet-extra-args {flags}" in parts[1]
    assert render("AL2", BASE) == render("AL2", BASE)  # same settings, same bytes (same launch template)


def test_al2_keeps_the_parts_of_a_mime_template() -> None:
    custom = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
        '--BOUNDARY\nContent-Type: text/cloud-config; charset="us-ascii"\n\nruncmd:\n- echo hi\n--BOUNDARY--\n'
    )
    message = email.message_from_string(render("AL2", dataclasses.replace(BASE, custom=custom)))
    parts = [part for part in message.walk() if not part.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/cloud-config", "text/x-shellscript"]
    assert "echo hi" in parts[0].get_payload()


def test_bottlerocket_merges_its_settings_over_the_template_toml() -> None:
    custom = '[settings.host-containers.admin]\nenabled = true\n[settings.kubernetes]\nmax-pods = 3\nfoo = "kept"\n'
    document = tomllib.loads(render("Bottlerocket", dataclasses.replace(BASE, custom=custom)))
    assert document["settings"]["host-containers"] == {"admin": {"enabled": True}}
    kubernetes = document["settings"]["kubernetes"]
    assert kubernetes["foo"] == "kept"
    assert kubernetes["max-pods"] == 29
    assert kubernetes["cluster-name"] == "blue"
    assert kubernetes["api-server"] == "https://api.blue.example"
    assert kubernetes["cluster-dns-ip"] == "10.100.0.10"
    assert kubernetes["node-labels"] == {"karpenter.sh/provisioner-name": "default", "team": "data"}
    assert kubernetes["node-taints"] == {"dedicated": ["data:NoSchedule"]}
    assert kubernetes["kube-reserved"] == {"cpu": "100m", "memory": "1Gi"}


def test_bottlerocket_refuses_a_template_that_is_not_toml() -> None:
    with pytest.raises(ValueError, match="userData is not valid TOML for Bottlerocket"):
        render("Bottlerocket", dataclasses.replace(BASE, custom="#!/bin/bash\necho hi"))


def test_windows_calls_the_eks_bootstrap_script_after_the_template_script() -> None:
    text = render("Windows2022", dataclasses.replace(BASE, custom="<powershell>Write-Host hi</powershell>"))
    lines = text.splitlines()
    assert lines[0] == "<powershell>" and lines[-1] == "</powershell>"
    assert lines[1] == "Write-Host hi"
    assert "Start-EKSBootstrap.ps1" in lines[2]
    assert "-EKSClusterName 'blue'" in lines[3]
    assert "-KubeletExtraArgs '--node-labels=" in lines[3]
    assert "-DNSClusterIP '10.100.0.10'" in lines[3]


def test_custom_family_passes_the_template_user_data_verbatim() -> None:
    assert render("Custom", dataclasses.replace(BASE, custom="anything")) == "anything"


def test_node_labels_leave_out_what_depends_on_the_offering_or_the_kubelet_may_not_set() -> None:
    requirements = Requirements(
        [
            Requirement.new("topology.kubernetes.io/zone", "In", ["us-east-1a"]),
            Requirement.new("karpenter.sh/capacity-type", "In", ["spot"]),
            Requirement.new("node.kubernetes.io/instance-type", "In", ["m5.large"]),
            Requirement.new("kubernetes.io/arch", "In", ["amd64"]),
            Requirement.new("node-restriction.kubernetes.io/pool", "In", ["a"]),
            Requirement.new("node.kubernetes.io/lifecycle", "In", ["normal"]),
            Requirement.new("example.com/tier", "In", ["gold"]),
            Requirement.new("example.com/any", "Exists"),
        ]
    )
    assert bootstrap_labels("default", {"team": "data"}, requirements) == {
        "example.com/tier": "gold",
        "karpenter.sh/provisioner-name": "default",
        "node.kubernetes.io/lifecycle": "normal",
        "team": "data",
    }
