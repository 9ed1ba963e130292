"""A node's capacity, overhead, allocatable, pods and labels must be Karpenter v0.31's (model/allocatable.py).

The reference is Karpenter v0.31.1's own instance-type table (tests/data/karpenter-v0.31-instance-types.json, from
website/content/en/docs/concepts/instance-types.md at tag v0.31.1: AL2, ENI-limited pod density, no
blockDeviceMappings): for every one of its 700 types, the allocatable cpu, memory, pods, ephemeral-storage and
accelerators, and the labels, must be equal. The unit tests cover what that table does not: kubelet overrides,
the other AMI families, block device mappings, settings and the max-pods fallback. Expected values are worked
out by hand from Karpenter's rules (types.go), not by calling the code under test.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import (
    DEFAULT_NODE,
    GlobalSettings,
    NodeConfiguration,
    allocatable,
    max_pods,
    node_labels,
    node_resources,
)
from karpenter_policy.model.amifamily import ami_family, instance_type_os, node_os
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.resources import parse_quantity

REFERENCE = Path(__file__).resolve().parent.parent / "data" / "karpenter-v0.31-instance-types.json"
MIB = 2**20
GIB = 2**30
AWS = "karpenter.k8s.aws/"
#: Not compared: pod-eni depends on the aws.enablePodENI setting and on Karpenter's ENI trunking table, which
#: the rows do not carry (it has its own unit test).
NOT_COMPARED = {wk.POD_ENI}


def _reference() -> dict[str, Any]:
    types: dict[str, Any] = json.loads(REFERENCE.read_text())["types"]
    return types


def from_row(name: str, labels: dict[str, str]) -> InstanceType:
    """The instance type a reference row describes, from its labels alone.

    The row gives the ENI-limited pod count (instance-pods), not the ENIs and addresses it came from; any pair
    with the same count gives the same node, so the type gets one ENI with count - 1 addresses.
    """

    def number(key: str) -> int:
        return int(labels.get(AWS + key, "0"))

    return InstanceType(
        name=name,
        vcpu=number("instance-cpu"),
        memory_mib=number("instance-memory"),
        architectures=(labels["kubernetes.io/arch"],),
        gpu_count=number("instance-gpu-count"),
        gpu_name=labels.get(AWS + "instance-gpu-name", ""),
        gpu_manufacturer=labels.get(AWS + "instance-gpu-manufacturer", ""),
        gpu_memory_mib=number("instance-gpu-memory"),
        accelerator_count=number("instance-accelerator-count"),
        accelerator_name=labels.get(AWS + "instance-accelerator-name", ""),
        accelerator_manufacturer=labels.get(AWS + "instance-accelerator-manufacturer", ""),
        local_nvme_gib=number("instance-local-nvme"),
        hypervisor=labels[AWS + "instance-hypervisor"],
        network_bandwidth_mbps=number("instance-network-bandwidth"),
        max_enis=1,
        ipv4_per_eni=number("instance-pods") - 1,
        encryption_in_transit=labels[AWS + "instance-encryption-in-transit-supported"] == "true",
    )


def expected_units(name: str, quantity: str) -> int:
    value = parse_quantity(quantity)
    return int(value * 1000) if name == "cpu" else int(value)


def test_allocatable_equals_karpenter_v031_for_every_reference_type() -> None:
    reference = _reference()
    assert len(reference) == 700
    mismatches: list[str] = []
    compared = 0
    for name, row in sorted(reference.items()):
        got = allocatable(from_row(name, row["labels"]))
        want = {r: expected_units(r, q) for r, q in row["resources"].items() if r not in NOT_COMPARED}
        ours = {r: v for r, v in got.items() if v and r not in NOT_COMPARED}
        for resource in sorted(want.keys() | ours.keys()):
            compared += 1
            if got.get(resource, 0) != want.get(resource, 0):
                mismatches.append(f"{name} {resource}: ours {got.get(resource, 0)}, Karpenter {want.get(resource, 0)}")
    assert not mismatches, f"{len(mismatches)} of {compared} values differ:\n" + "\n".join(mismatches)
    assert compared >= 700 * 4


def test_labels_equal_karpenter_v031_for_every_reference_type() -> None:
    mismatches = [
        f"{name}: {sorted(set(node_labels(from_row(name, row['labels'])).items()) ^ set(row['labels'].items()))}"
        for name, row in sorted(_reference().items())
        if node_labels(from_row(name, row["labels"])) != row["labels"]
    ]
    assert not mismatches, "\n".join(mismatches)


# --- one type, every setting ------------------------------------------------------------------------------------

# m5.large: 2 vCPU, 8 GiB, 3 ENIs x 10 IPv4 -> 3 x 9 + 2 = 29 pods. Capacity memory: 8192 MiB - ceil(7.5 % =
# 614.4) = 7577 MiB. Default overhead: cpu 60m + 10m, memory 11 x 29 + 255 = 574 MiB kube-reserved + 100 MiB
# eviction, ephemeral-storage 1Gi kube-reserved + 10 % of 20Gi.
M5_LARGE = InstanceType("m5.large", vcpu=2, memory_mib=8192, architectures=("amd64",), max_enis=3, ipv4_per_eni=10)
M5_MEMORY = 7577 * MIB
M6G_LARGE = InstanceType("m6g.large", vcpu=2, memory_mib=8192, architectures=("arm64",), max_enis=3, ipv4_per_eni=10)


def node(
    kubelet: dict[str, Any] | None = None,
    family: str | None = None,
    mappings: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> NodeConfiguration:
    return NodeConfiguration.of(kubelet, family, mappings, GlobalSettings(**settings))


def test_default_node_is_al2_with_karpenters_overhead() -> None:
    resources = node_resources(M5_LARGE, DEFAULT_NODE)
    assert resources.capacity == {
        "cpu": 2000,
        "memory": M5_MEMORY,
        "ephemeral-storage": 20 * GIB,
        "pods": 29,
        wk.POD_ENI: 0,
        "nvidia.com/gpu": 0,
        "amd.com/gpu": 0,
        "aws.amazon.com/neuron": 0,
        "habana.ai/gaudi": 0,
    }
    assert resources.kube_reserved == {"cpu": 70, "memory": 574 * MIB, "ephemeral-storage": GIB}
    assert resources.system_reserved == {}
    assert resources.eviction_threshold == {"memory": 100 * MIB, "ephemeral-storage": 2 * GIB}
    assert {k: v for k, v in resources.allocatable.items() if v} == {
        "cpu": 1930, "memory": 6903 * MIB, "ephemeral-storage": 17 * GIB, "pods": 29}


def test_graviton_loses_64_mib_of_cma_before_the_vm_overhead() -> None:
    # (8192 - 64) MiB - ceil(7.5 % of 8128 = 609.6) = 7518 MiB; the reference's m6g.large: 6844Mi allocatable.
    assert node_resources(M6G_LARGE).capacity["memory"] == 7518 * MIB
    assert allocatable(M6G_LARGE)["memory"] == 6844 * MIB


@pytest.mark.parametrize(
    ("vcpu", "reserved_millis"),
    [(1, 60), (2, 70), (3, 75), (4, 80), (8, 90), (64, 230), (96, 310), (448, 1190)],
)
def test_kube_reserved_cpu_by_range(vcpu: int, reserved_millis: int) -> None:
    it = InstanceType("x.test", vcpu=vcpu, memory_mib=8192, architectures=("amd64",), max_enis=3, ipv4_per_eni=10)
    assert node_resources(it).kube_reserved["cpu"] == reserved_millis


@pytest.mark.parametrize(
    ("kubelet", "family", "settings", "pods"),
    [
        (None, "AL2", {}, 29),
        ({"maxPods": 110}, "AL2", {}, 110),
        ({"maxPods": 0}, "AL2", {}, 0),
        ({"podsPerCore": 10}, "AL2", {}, 20),  # min(10 x 2 vCPU, 29)
        ({"podsPerCore": 20}, "AL2", {}, 29),
        ({"maxPods": 50, "podsPerCore": 10}, "AL2", {}, 20),
        ({"podsPerCore": 0}, "AL2", {}, 29),  # 0: no per-core limit
        ({"podsPerCore": 10}, "Bottlerocket", {}, 29),  # Bottlerocket ignores podsPerCore
        ({"podsPerCore": 10}, "Ubuntu", {}, 20),
        (None, "Windows2022", {}, 110),  # Windows has no ENI-limited pod density
        ({"podsPerCore": 10}, "Windows2019", {}, 20),
        (None, "Custom", {}, 29),
        (None, "AL2", {"enable_eni_limited_pod_density": False}, 110),
        (None, "AL2", {"reserved_enis": 1}, 20),  # 2 x 9 + 2
        (None, "AL2", {"reserved_enis": 3}, 0),  # no ENI left for pods
        ({"maxPods": 8}, "AL2", {"reserved_enis": 3}, 8),
    ],
)
def test_max_pods(kubelet: dict[str, Any] | None, family: str, settings: dict[str, Any], pods: int) -> None:
    configuration = node(kubelet, family, **settings)
    assert max_pods(M5_LARGE, configuration) == pods
    assert node_resources(M5_LARGE, configuration).capacity["pods"] == pods
    assert node_labels(M5_LARGE, configuration)["karpenter.k8s.aws/instance-pods"] == str(pods)


def test_max_pods_falls_back_to_110_without_eni_data() -> None:
    unknown = InstanceType("x.unknown", vcpu=4, memory_mib=16384, architectures=("amd64",))
    assert unknown.eni_limited_pods() is None and unknown.max_pods == 0
    assert max_pods(unknown) == 110
    # kube-reserved memory counts the same 110 pods: 11 x 110 + 255 MiB.
    assert node_resources(unknown).kube_reserved["memory"] == 1465 * MIB
    assert max_pods(unknown, node({"podsPerCore": 5})) == 20


def test_instance_type_eni_limited_pods() -> None:
    assert M5_LARGE.eni_limited_pods() == 29 == M5_LARGE.max_pods
    assert M5_LARGE.eni_limited_pods(reserved_enis=1) == 20
    assert M5_LARGE.eni_limited_pods(reserved_enis=5) == 0


def test_kube_reserved_memory_counts_eni_pods_on_al2_and_node_pods_on_bottlerocket() -> None:
    al2 = node_resources(M5_LARGE, node({"maxPods": 110}, "AL2"))
    assert al2.kube_reserved["memory"] == (11 * 29 + 255) * MIB
    bottlerocket = node_resources(M5_LARGE, node({"maxPods": 110}, "Bottlerocket"))
    assert bottlerocket.kube_reserved["memory"] == (11 * 110 + 255) * MIB
    assert bottlerocket.allocatable["memory"] == M5_MEMORY - 1465 * MIB - 100 * MIB
    windows = node_resources(M5_LARGE, node(None, "Windows2022"))
    assert windows.kube_reserved["memory"] == (11 * 110 + 255) * MIB


def test_kube_reserved_overrides_each_default_it_names() -> None:
    resources = node_resources(M5_LARGE, node({"kubeReserved": {"cpu": "200m", "memory": "1Gi"}}))
    assert resources.kube_reserved == {"cpu": 200, "memory": GIB, "ephemeral-storage": GIB}
    assert resources.allocatable["cpu"] == 1800
    assert resources.allocatable["memory"] == M5_MEMORY - GIB - 100 * MIB
    storage = node_resources(M5_LARGE, node({"kubeReserved": {"ephemeral-storage": "3Gi"}}))
    assert storage.kube_reserved["cpu"] == 70
    assert storage.allocatable["ephemeral-storage"] == 15 * GIB


def test_system_reserved_comes_on_top() -> None:
    kubelet = {"systemReserved": {"cpu": "0.1", "memory": "200Mi", "ephemeral-storage": "1Gi", "pid": "100"}}
    resources = node_resources(M5_LARGE, node(kubelet))
    assert resources.allocatable["cpu"] == 2000 - 70 - 100
    assert resources.allocatable["memory"] == 6903 * MIB - 200 * MIB
    assert resources.allocatable["ephemeral-storage"] == 16 * GIB
    assert "pid" not in resources.allocatable  # only what the node has capacity for


def test_reserved_fractions_round_up_to_a_millicore_and_a_byte() -> None:
    resources = node_resources(M5_LARGE, node({"kubeReserved": {"cpu": "0.0001", "memory": "0.5"}}))
    assert (resources.kube_reserved["cpu"], resources.kube_reserved["memory"]) == (1, 1)


HARD_100MI_SOFT_1GI = {"evictionHard": {"memory.available": "100Mi"}, "evictionSoft": {"memory.available": "1Gi"}}


def _ceil_percent(capacity: int, percent: int) -> int:
    return math.ceil(Fraction(capacity * percent, 100))


@pytest.mark.parametrize(
    ("kubelet", "family", "memory", "storage"),
    [
        ({"evictionHard": {"memory.available": "500Mi"}}, "AL2", 500 * MIB, 2 * GIB),
        ({"evictionHard": {"memory.available": "10%"}}, "AL2", _ceil_percent(M5_MEMORY, 10), 2 * GIB),
        ({"evictionHard": {"memory.available": "100%"}}, "AL2", 0, 2 * GIB),  # 100 % disables the threshold
        ({"evictionHard": {"memory.available": "0%"}}, "AL2", 0, 2 * GIB),
        ({"evictionHard": {"nodefs.available": "15%"}}, "AL2", 100 * MIB, _ceil_percent(20 * GIB, 15)),
        ({"evictionHard": {"nodefs.available": "5Gi"}}, "AL2", 100 * MIB, 5 * GIB),
        ({"evictionHard": {"nodefs.inodesFree": "5%"}}, "AL2", 100 * MIB, 2 * GIB),  # no effect on allocatable
        # The larger of hard and soft, where the AMI family honours evictionSoft (not Bottlerocket).
        (HARD_100MI_SOFT_1GI, "AL2", GIB, 2 * GIB),
        (
            {"evictionHard": {"memory.available": "1Gi"}, "evictionSoft": {"memory.available": "5%"}},
            "AL2",
            GIB,  # 1Gi > ceil(5 % of 7577 MiB)
            2 * GIB,
        ),
        (HARD_100MI_SOFT_1GI, "Bottlerocket", 100 * MIB, 2 * GIB),
        ({"evictionSoft": {"nodefs.available": "25%"}}, "Ubuntu", 100 * MIB, 5 * GIB),
        ({"evictionSoft": {"nodefs.available": "25%"}}, "Bottlerocket", 100 * MIB, 2 * GIB),
    ],
)
def test_eviction_thresholds(kubelet: dict[str, Any], family: str, memory: int, storage: int) -> None:
    resources = node_resources(M5_LARGE, node(kubelet, family))
    assert resources.eviction_threshold == {"memory": memory, "ephemeral-storage": storage}
    assert resources.allocatable["memory"] == M5_MEMORY - resources.kube_reserved["memory"] - memory


# --- AMI families ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "os", "build", "storage"),
    [
        ("AL2", "linux", None, 20 * GIB),
        ("Bottlerocket", "linux", None, 20 * GIB),  # its /dev/xvdb data volume, not the 4Gi OS volume
        ("Ubuntu", "linux", None, 20 * GIB),
        ("Windows2019", "windows", "10.0.17763", 50 * GIB),
        ("Windows2022", "windows", "10.0.20348", 50 * GIB),
        ("Custom", "linux", None, 20 * GIB),
        (None, "linux", None, 20 * GIB),  # no amiFamily: AL2
        ("AL2023", "linux", None, 20 * GIB),  # unknown to v0.31: AL2
    ],
)
def test_ami_family_os_and_storage(family: str | None, os: str, build: str | None, storage: int) -> None:
    assert node_os(family) == os
    assert instance_type_os(M5_LARGE, family) == (os,)
    configuration = node(None, family)
    resources = node_resources(M5_LARGE, configuration)
    assert resources.capacity["ephemeral-storage"] == storage
    # 1Gi kube-reserved and 10 % eviction: 17Gi of 20Gi, 44Gi of 50Gi.
    assert resources.allocatable["ephemeral-storage"] == storage - GIB - storage // 10
    labels = node_labels(M5_LARGE, configuration)
    assert labels["kubernetes.io/os"] == os
    assert labels.get("node.kubernetes.io/windows-build") == build
    assert (wk.PRIVATE_IPV4 in resources.capacity) is (os == "windows")


def test_windows_offers_no_os_on_arm64_and_private_ips_on_amd64() -> None:
    assert instance_type_os(M6G_LARGE, "Windows2022") == ()
    assert "kubernetes.io/os" not in node_labels(M6G_LARGE, node(None, "Windows2022"))
    assert instance_type_os(M6G_LARGE, "AL2") == ("linux",)
    assert node_resources(M5_LARGE, node(None, "Windows2022")).capacity[wk.PRIVATE_IPV4] == 9
    assert ami_family("Windows2019").is_windows and not ami_family("Bottlerocket").is_windows


@pytest.mark.parametrize(
    ("family", "mappings", "storage"),
    [
        ("AL2", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}}], 100 * GIB),
        ("AL2", [{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}}], 20 * GIB),  # not the root device
        ("AL2", [{"deviceName": "/dev/xvda", "ebs": {}}], 20 * GIB),  # no size given
        ("AL2", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100G"}}], 100 * 10**9),
        (
            "AL2",
            [
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "200Gi"}, "rootVolume": True},
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}},
            ],
            200 * GIB,
        ),
        (
            "Bottlerocket",
            [
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi"}},
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}},
            ],
            80 * GIB,
        ),
        ("Bottlerocket", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "50Gi"}}], 20 * GIB),
        ("Ubuntu", [{"deviceName": "/dev/sda1", "ebs": {"volumeSize": "40Gi"}}], 40 * GIB),
        ("Windows2022", [{"deviceName": "/dev/sda1", "ebs": {"volumeSize": "100Gi"}}], 100 * GIB),
        # Custom: Karpenter cannot know the root device and takes the last mapping.
        (
            "Custom",
            [
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "30Gi"}},
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "60Gi"}},
            ],
            60 * GIB,
        ),
        ("Custom", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "30Gi"}}, {"deviceName": "/dev/xvdb"}], 20 * GIB),
    ],
)
def test_block_device_mappings_set_the_ephemeral_storage(
    family: str, mappings: list[dict[str, Any]], storage: int
) -> None:
    resources = node_resources(M5_LARGE, node(None, family, mappings))
    assert resources.capacity["ephemeral-storage"] == storage
    assert resources.eviction_threshold["ephemeral-storage"] == _ceil_percent(storage, 10)


# --- extended resources ----------------------------------------------------------------------------------------


def test_pod_eni_only_when_the_setting_is_on() -> None:
    trunking = InstanceType("m5.large", vcpu=2, memory_mib=8192, architectures=("amd64",), branch_enis=9)
    assert node_resources(trunking).capacity[wk.POD_ENI] == 0  # aws.enablePodENI defaults to false
    assert allocatable(trunking, node(None, "AL2", enable_pod_eni=True))[wk.POD_ENI] == 9


def with_gpus(name: str, count: int, manufacturer: str) -> InstanceType:
    return InstanceType(name, 32, 131072, ("amd64",), gpu_count=count, gpu_manufacturer=manufacturer)


@pytest.mark.parametrize(
    ("it", "resource", "count"),
    [
        (with_gpus("p3.8xlarge", 4, "nvidia"), "nvidia.com/gpu", 4),
        (with_gpus("g4ad.xlarge", 1, "amd"), "amd.com/gpu", 1),
        (with_gpus("dl1.24xlarge", 8, "habana"), "habana.ai/gaudi", 8),
        (InstanceType("inf1.xlarge", 4, 8192, ("amd64",), accelerator_count=1), "aws.amazon.com/neuron", 1),
        # Karpenter v0.31 hard-codes Trainium's Neuron devices.
        (InstanceType("trn1.32xlarge", 128, 524288, ("amd64",)), "aws.amazon.com/neuron", 16),
    ],
)
def test_accelerators(it: InstanceType, resource: str, count: int) -> None:
    got = allocatable(it)
    assert got[resource] == count
    others = {"nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "aws.amazon.com/neuron"} - {resource}
    assert all(got[other] == 0 for other in others)


# --- bad configuration -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kubelet", "mappings", "message"),
    [
        ({"maxPods": "ten"}, None, "kubeletConfiguration.maxPods: expected a whole number >= 0, got 'ten'"),
        ({"podsPerCore": -1}, None, "kubeletConfiguration.podsPerCore: expected a whole number >= 0"),
        ({"kubeReserved": {"memory": "1x"}}, None, "kubeletConfiguration.kubeReserved.memory: '1x' is not a quantity"),
        ({"systemReserved": ["cpu"]}, None, "kubeletConfiguration.systemReserved: expected a mapping"),
        ({"systemReserved": {"memory": "-1Gi"}}, None, "kubeletConfiguration.systemReserved.memory: '-1Gi' cannot be"),
        ({"evictionHard": {"memory.available": "-5Mi"}}, None, "evictionHard.memory.available: '-5Mi' cannot be"),
        (
            {"evictionHard": {"memory.available": "150%"}},
            None,
            "kubeletConfiguration.evictionHard.memory.available: '150%' is not a percentage between 0% and 100%",
        ),
        ({"evictionSoft": {"nodefs.available": "x%"}}, None, "kubeletConfiguration.evictionSoft.nodefs.available"),
        (None, [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "big"}}], "blockDeviceMappings[0].ebs.volumeSize"),
        (None, [{"deviceName": "/dev/xvda", "rootVolume": "yes"}], "blockDeviceMappings[0].rootVolume"),
    ],
)
def test_bad_configuration_names_the_field(
    kubelet: dict[str, Any] | None, mappings: list[dict[str, Any]] | None, message: str
) -> None:
    with pytest.raises(ValueError) as error:
        NodeConfiguration.of(kubelet, "AL2", mappings)
    assert message in str(error.value)
