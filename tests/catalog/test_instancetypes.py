"""Unit tests of the instance-type domain model: name parsing, pod density, Karpenter v0.31 labels, offerings."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.catalog import Catalog, catalog_from_json, catalog_to_json
from karpenter_policy.catalog.refresh import instance_type_from_ec2
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import (
    InstanceType,
    Offering,
    cheapest,
    instance_category,
    instance_family,
    instance_generation,
    instance_size,
    kube_architectures,
    lower_kebab_case,
)


def make(name: str, **kwargs: Any) -> InstanceType:
    defaults: dict[str, Any] = {"vcpu": 2, "memory_mib": 4096, "architectures": ("amd64",)}
    defaults.update(kwargs)
    return InstanceType(name=name, **defaults)


@pytest.mark.parametrize(
    ("name", "family", "size", "category", "generation"),
    [
        ("c5.large", "c5", "large", "c", 5),
        ("c5d.2xlarge", "c5d", "2xlarge", "c", 5),
        ("m7i-flex.large", "m7i-flex", "large", "m", 7),
        ("inf2.xlarge", "inf2", "xlarge", "inf", 2),
        ("trn1n.32xlarge", "trn1n", "32xlarge", "trn", 1),
        # Karpenter's instanceTypeScheme skips the "-6tb" of the high-memory families.
        ("u-6tb1.metal", "u-6tb1", "metal", "u", 1),
        ("u-12tb1.112xlarge", "u-12tb1", "112xlarge", "u", 1),
        ("u7i-12tb.224xlarge", "u7i-12tb", "224xlarge", "u", 7),
        ("p6-b200.48xlarge", "p6-b200", "48xlarge", "p", 6),
        ("x8aedz.metal-12xl", "x8aedz", "metal-12xl", "x", 8),
        ("im4gn.large", "im4gn", "large", "im", 4),
        ("g5.xlarge", "g5", "xlarge", "g", 5),
    ],
)
def test_name_parts(name: str, family: str, size: str, category: str, generation: int) -> None:
    assert (instance_family(name), instance_size(name)) == (family, size)
    assert (instance_category(name), instance_generation(name)) == (category, generation)
    it = make(name)
    assert (it.family, it.size, it.category, it.generation) == (family, size, category, generation)
    labels = it.labels()
    assert labels["karpenter.k8s.aws/instance-family"] == family
    assert labels["karpenter.k8s.aws/instance-size"] == size
    assert labels["karpenter.k8s.aws/instance-category"] == category
    assert labels["karpenter.k8s.aws/instance-generation"] == str(generation)


@pytest.mark.parametrize(
    ("ec2", "kube"),
    [
        (["x86_64"], ("amd64",)),
        (["arm64"], ("arm64",)),
        (["i386", "x86_64"], ("amd64",)),
        (["i386"], ()),
        (["x86_64_mac"], ()),
        (["arm64_mac"], ()),
    ],
)
def test_kube_architectures(ec2: list[str], kube: tuple[str, ...]) -> None:
    assert kube_architectures(ec2) == kube


@pytest.mark.parametrize(
    ("name", "enis", "ipv4", "pods"),
    [("m5.large", 3, 10, 29), ("t3.micro", 2, 2, 4), ("p4d.24xlarge", 15, 50, 737), ("x.none", 0, 0, 0)],
)
def test_max_pods(name: str, enis: int, ipv4: int, pods: int) -> None:
    it = make(name, max_enis=enis, ipv4_per_eni=ipv4)
    assert it.max_pods == pods
    assert it.labels()["karpenter.k8s.aws/instance-pods"] == str(pods)


def test_lower_kebab_case() -> None:
    assert lower_kebab_case("RTX PRO Server 6000") == "rtx-pro-server-6000"
    assert lower_kebab_case("NVIDIA") == "nvidia"


# --- from a DescribeInstanceTypes entry -------------------------------------------------------------------


def ec2_info(name: str, **overrides: Any) -> dict[str, Any]:
    """A DescribeInstanceTypes entry shaped like EC2's (and moto's), m5.large-like unless overridden."""
    info: dict[str, Any] = {
        "InstanceType": name,
        "SupportedUsageClasses": ["on-demand", "spot"],
        "BareMetal": False,
        "Hypervisor": "nitro",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel"},
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
        "InstanceStorageSupported": False,
        "NetworkInfo": {
            "MaximumNetworkInterfaces": 3,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3, "BaselineBandwidthInGbps": 0.75}],
            "Ipv4AddressesPerInterface": 10,
            "EncryptionInTransitSupported": False,
        },
    }
    info.update(overrides)
    return info


G5_XLARGE = ec2_info(
    "g5.xlarge",
    ProcessorInfo={"SupportedArchitectures": ["x86_64"], "Manufacturer": "AMD"},
    VCpuInfo={"DefaultVCpus": 4},
    MemoryInfo={"SizeInMiB": 16384},
    InstanceStorageSupported=True,
    InstanceStorageInfo={"TotalSizeInGB": 250, "NvmeSupport": "required"},
    GpuInfo={
        "Gpus": [{"Name": "A10G", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 22888}}],
        "TotalGpuMemoryInMiB": 22888,
    },
    NetworkInfo={
        "MaximumNetworkInterfaces": 4,
        "DefaultNetworkCardIndex": 0,
        "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 4, "BaselineBandwidthInGbps": 2.5}],
        "Ipv4AddressesPerInterface": 15,
        "EncryptionInTransitSupported": True,
    },
)


def test_g5_xlarge_gpu_labels() -> None:
    it = instance_type_from_ec2(G5_XLARGE, ["us-east-1b", "us-east-1a"], 1.006)
    assert it is not None
    assert (it.gpu_count, it.gpu_name, it.gpu_manufacturer, it.gpu_memory_mib) == (1, "a10g", "nvidia", 22888)
    assert it.labels() == {
        "karpenter.k8s.aws/instance-category": "g",
        "karpenter.k8s.aws/instance-cpu": "4",
        "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
        "karpenter.k8s.aws/instance-family": "g5",
        "karpenter.k8s.aws/instance-generation": "5",
        "karpenter.k8s.aws/instance-gpu-count": "1",
        "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
        "karpenter.k8s.aws/instance-gpu-memory": "22888",
        "karpenter.k8s.aws/instance-gpu-name": "a10g",
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
        "karpenter.k8s.aws/instance-local-nvme": "250",
        "karpenter.k8s.aws/instance-memory": "16384",
        "karpenter.k8s.aws/instance-network-bandwidth": "2500",
        "karpenter.k8s.aws/instance-pods": "58",
        "karpenter.k8s.aws/instance-size": "xlarge",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "g5.xlarge",
    }
    # Offerings: zone then capacity type, all priced on-demand when no spot price is given.
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in it.offerings] == [
        ("us-east-1a", "on-demand", 1.006, True),
        ("us-east-1a", "spot", 1.006, True),
        ("us-east-1b", "on-demand", 1.006, True),
        ("us-east-1b", "spot", 1.006, True),
    ]
    assert it.price_on_demand == 1.006


def test_m5_large_labels_have_no_optional_labels() -> None:
    it = instance_type_from_ec2(ec2_info("m5.large"), ["us-east-1a"], 0.096)
    assert it is not None
    labels = it.labels()
    assert it.max_pods == 29 and labels["karpenter.k8s.aws/instance-pods"] == "29"
    assert labels["karpenter.k8s.aws/instance-network-bandwidth"] == "750"
    for absent in ("local-nvme", "gpu-name", "gpu-count", "accelerator-name", "accelerator-count"):
        assert f"karpenter.k8s.aws/instance-{absent}" not in labels


def test_mac_and_i386_only_types_are_excluded() -> None:
    mac = ec2_info("mac2.metal", ProcessorInfo={"SupportedArchitectures": ["arm64_mac"]}, BareMetal=True)
    assert instance_type_from_ec2(mac, ["us-east-1a"], 0.65) is None
    mac1 = ec2_info("mac1.metal", ProcessorInfo={"SupportedArchitectures": ["x86_64_mac"]}, BareMetal=True)
    assert instance_type_from_ec2(mac1, ["us-east-1a"], 1.08) is None
    t2 = instance_type_from_ec2(
        ec2_info("t2.micro", ProcessorInfo={"SupportedArchitectures": ["i386", "x86_64"]}), [], 0.0116
    )
    assert t2 is not None and t2.architectures == ("amd64",)


def test_bare_metal_has_empty_hypervisor_label() -> None:
    info = ec2_info("a1.metal", BareMetal=True, ProcessorInfo={"SupportedArchitectures": ["arm64"]})
    del info["Hypervisor"]
    it = instance_type_from_ec2(info, ["us-east-1a"], 0.408)
    assert it is not None and it.bare_metal and it.hypervisor == ""
    assert it.labels()["karpenter.k8s.aws/instance-hypervisor"] == ""
    assert it.labels()["kubernetes.io/arch"] == "arm64"


def test_inferentia_and_trainium_accelerators() -> None:
    inf2 = ec2_info(
        "inf2.xlarge",
        InferenceAcceleratorInfo={"Accelerators": [{"Count": 1, "Name": "Inferentia2", "Manufacturer": "AWS"}]},
    )
    it = instance_type_from_ec2(inf2, ["us-east-1a"], 0.7582)
    assert it is not None
    assert it.labels()["karpenter.k8s.aws/instance-accelerator-name"] == "inferentia2"
    assert it.labels()["karpenter.k8s.aws/instance-accelerator-manufacturer"] == "aws"
    assert it.labels()["karpenter.k8s.aws/instance-accelerator-count"] == "1"
    # Karpenter v0.31 hard-codes trn1* as 'inferentia' by 'aws' with 1 / 16 devices.
    trn = ec2_info("trn1n.32xlarge", NeuronInfo={"NeuronDevices": [{"Count": 16, "Name": "Trainium"}]})
    it = instance_type_from_ec2(trn, ["us-east-1c"], 24.78)
    assert it is not None
    assert (it.accelerator_name, it.accelerator_manufacturer, it.accelerator_count) == ("inferentia", "aws", 16)
    assert it.category == "trn" and it.generation == 1


def test_two_architectures_have_no_arch_label() -> None:
    it = make("x1.large", architectures=("amd64", "arm64"))
    assert "kubernetes.io/arch" not in it.labels()
    assert it.labels()["kubernetes.io/os"] == "linux"


def test_unpriced_type_stays_launchable_at_an_unknown_price() -> None:
    it = instance_type_from_ec2(ec2_info("r9g.large"), ["us-east-1a"], None)
    assert it is not None
    assert it.price_on_demand is None
    assert it.offerings and all(o.available and o.price is None for o in it.offerings)
    cheapest = it.cheapest_offering()
    assert cheapest is not None and cheapest.price is None


def test_on_demand_only_types_get_no_spot_offering() -> None:
    info = ec2_info("u-6tb1.112xlarge", SupportedUsageClasses=["on-demand", "capacity-block"])
    it = instance_type_from_ec2(info, ["us-east-1a", "us-east-1b"], 54.6)
    assert it is not None and it.capacity_types() == ("on-demand",)


def test_spot_prices_override_spot_offerings_only() -> None:
    it = instance_type_from_ec2(ec2_info("m5.large"), ["us-east-1a", "us-east-1b"], 0.096, {"us-east-1a": 0.03})
    assert it is not None
    prices = {(o.zone, o.capacity_type): o.price for o in it.offerings}
    assert prices == {
        ("us-east-1a", "on-demand"): 0.096,
        ("us-east-1a", "spot"): 0.03,
        ("us-east-1b", "on-demand"): 0.096,
        ("us-east-1b", "spot"): 0.096,  # no spot price known: on-demand fallback
    }


def test_offerings_are_sorted_and_cheapest_offering() -> None:
    it = make(
        "m5.large",
        offerings=(
            Offering("us-east-1b", "spot", 0.03),
            Offering("us-east-1a", "spot", 0.02, available=False),
            Offering("us-east-1a", "on-demand", 0.096),
            Offering("us-east-1c", "spot", 0.03),
        ),
    )
    assert [(o.zone, o.capacity_type) for o in it.offerings] == [
        ("us-east-1a", "on-demand"),
        ("us-east-1a", "spot"),
        ("us-east-1b", "spot"),
        ("us-east-1c", "spot"),
    ]
    assert it.cheapest_offering() == Offering("us-east-1b", "spot", 0.03)  # unavailable skipped; tie by zone
    assert it.cheapest_offering(capacity_types=["on-demand"]) == Offering("us-east-1a", "on-demand", 0.096)
    assert it.cheapest_offering(zones=["us-east-1c"]) == Offering("us-east-1c", "spot", 0.03)
    assert it.cheapest_offering(zones=["us-east-1f"]) is None
    assert it.zones() == ("us-east-1a", "us-east-1b", "us-east-1c")
    assert it.zones("spot") == ("us-east-1b", "us-east-1c")


def test_cheapest_ranks_types() -> None:
    a = make("a.large", offerings=(Offering("z1", "on-demand", 0.2),))
    b = make("b.large", offerings=(Offering("z1", "on-demand", 0.1),))
    c = make("c.large", offerings=(Offering("z1", "on-demand", 0.05, available=False),))
    assert [it.name for it, _ in cheapest([a, b, c])] == ["b.large", "a.large"]


def test_label_keys_are_defined_once_in_model_labels() -> None:
    from karpenter_policy.model import instancetypes

    assert not [name for name in vars(instancetypes) if name.startswith(("LABEL_", "CAPACITY_TYPE"))]


def test_the_cpu_and_ebs_facts_of_a_description_are_read_as_karpenter_v1_reads_them() -> None:
    """aws/karpenter-provider-aws v1.14.1 `computeRequirements`: the maker in lower kebab case, the sustained clock
    in MHz rounded half away from zero, the EBS maximum bandwidth only of a type EBS-optimized by default; they are
    v1 labels (`v1_labels`), never v0.31's (`labels()`), and a catalog file keeps them."""
    info = ec2_info(
        "m5.large",
        ProcessorInfo={
            "SupportedArchitectures": ["x86_64"], "Manufacturer": "Intel", "SustainedClockSpeedInGhz": 3.1005
        },  # fmt: skip
        EbsInfo={"EbsOptimizedSupport": "default", "EbsOptimizedInfo": {"MaximumBandwidthInMbps": 4750}},
    )
    it = instance_type_from_ec2(info, ["us-east-1a"], 0.096)
    assert it is not None
    assert it.v1_labels == {
        wk.INSTANCE_CAPABILITY_FLEX: "false",
        wk.INSTANCE_CPU_MANUFACTURER: "intel",
        wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: "3101",
        wk.INSTANCE_EBS_BANDWIDTH: "4750",
    }
    assert not set(it.labels()) & wk.V1_INSTANCE_LABELS
    supported = ec2_info("m5.large", EbsInfo={"EbsOptimizedSupport": "supported", "EbsOptimizedInfo": {
        "MaximumBandwidthInMbps": 4750}})  # fmt: skip
    described = instance_type_from_ec2(supported, ["us-east-1a"], 0.096)
    assert described is not None and wk.INSTANCE_EBS_BANDWIDTH not in described.v1_labels
    catalog = Catalog(region="us-east-1", instance_types=(it,))
    assert catalog_from_json(catalog_to_json(catalog)) == catalog
    flex = instance_type_from_ec2(ec2_info("m7i-flex.large"), ["us-east-1a"], 0.1)
    assert flex is not None and flex.v1_labels[wk.INSTANCE_CAPABILITY_FLEX] == "true"
