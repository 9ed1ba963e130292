"""`karpenter-policy catalog build`: how the sources are joined (each fact from the most authoritative source that
has it, provenance recorded, inferred zones marked), that the output is deterministic, and that the shipped catalog
is exactly what the build makes of the reference data."""

from __future__ import annotations

import gzip
import json
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from clirun import run_cli as cli

from karpenter_policy.catalog.build import default_moto_resources, installed_moto_version
from karpenter_policy.catalog.embedded import COLUMNS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = Path(str(resources.files("karpenter_policy.catalog").joinpath("data")))


def labels(name: str, cpu: int, memory: int, arch: str = "amd64", **extra: str) -> dict[str, Any]:
    family, size = name.split(".")
    values = {
        "node.kubernetes.io/instance-type": name,
        "kubernetes.io/arch": arch,
        "karpenter.k8s.aws/instance-cpu": str(cpu),
        "karpenter.k8s.aws/instance-memory": str(memory),
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-size": size,
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
        "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
        **{f"karpenter.k8s.aws/{k.replace('_', '-')}": v for k, v in extra.items()},
    }
    return {"labels": values, "resources": {}}


def described(name: str, arch: str, cpu: int, memory: int, usage: list[str]) -> dict[str, Any]:
    return {
        "InstanceType": name,
        "ProcessorInfo": {"SupportedArchitectures": [arch]},
        "VCpuInfo": {"DefaultVCpus": cpu},
        "MemoryInfo": {"SizeInMiB": memory},
        "NetworkInfo": {"MaximumNetworkInterfaces": 4, "Ipv4AddressesPerInterface": 15},
        "SupportedUsageClasses": usage,
        "Hypervisor": "nitro",
    }


def write_json(path: Path, document: Any) -> None:
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


@pytest.fixture()
def sources(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny set of sources that disagree at the edges as the real ones do."""
    shared, moto = tmp_path / "shared", tmp_path / "moto"
    zones_dir = moto / "instance_type_offerings" / "availability-zone"
    zones_dir.mkdir(parents=True)
    shared.mkdir()
    write_json(
        shared / "karpenter-instance-types-2031-02.json",
        {
            "source": "Karpenter's table",
            "types": {
                "m9.large": labels("m9.large", 2, 8192),
                "m9n.48xlarge": labels("m9n.48xlarge", 192, 786432),
                "g9ad.xlarge": labels(
                    "g9ad.xlarge", 4, 16384, instance_gpu_count="1", instance_gpu_name="radeon",
                    instance_gpu_manufacturer="amd", instance_gpu_memory="8192",
                ),  # fmt: skip
                "g9dn.xlarge": labels("g9dn.xlarge", 4, 16384),
                "trn1.2xlarge": labels(
                    "trn1.2xlarge", 8, 32768, instance_accelerator_name="trainium",
                    instance_accelerator_manufacturer="aws", instance_accelerator_count="1",
                ),  # fmt: skip
            },
        },
    )
    write_json(
        shared / "karpenter-v0.31-instance-types.json",
        {"source": "v0.31's table", "types": {"p1.xlarge": labels("p1.xlarge", 4, 62464)}},
    )
    write_json(
        shared / "karpenter-vpc-limits-2031-03.json",
        {
            "source": "VPC limits",
            "types": {
                "m9.large": {"interfaces": 3, "ipv4PerInterface": 10, "trunking": True, "branchInterfaces": 9},
                "m9n.48xlarge": {  # two network cards: max pods counts the default one's ENIs only
                    "interfaces": 24, "ipv4PerInterface": 50, "trunking": True, "branchInterfaces": 107,
                    "defaultNetworkCardIndex": 1,
                    "networkCards": [
                        {"maximumNetworkInterfaces": 16, "networkCardIndex": 0},
                        {"maximumNetworkInterfaces": 8, "networkCardIndex": 1},
                    ],
                },
                "g9ad.xlarge": {"interfaces": 2, "ipv4PerInterface": 4, "trunking": False, "branchInterfaces": 0},
            },
        },
    )
    prices = {"m9.large": 0.1, "g9ad.xlarge": 0.5, "p1.xlarge": 0.9, "zz1.huge": 1.0}
    write_json(shared / "ec2-on-demand-prices-xx-test-1.json", {"region": "xx-test-1", "prices": prices})
    write_json(
        moto / "instance_types.json.gz",
        {
            "m9.large": described("m9.large", "x86_64", 2, 8192, ["on-demand"]),  # facts from the table win
            "n9.large": described("n9.large", "arm64", 2, 4096, ["on-demand", "spot"]),
            "mac9.metal": described("mac9.metal", "x86_64_mac", 12, 32768, ["on-demand"]),
        },
    )
    write_json(
        zones_dir / "xx-test-1.json.gz",
        [
            {"InstanceType": "m9.large", "Location": "xx-test-1a"},
            {"InstanceType": "m9.large", "Location": "xx-test-1b"},
            {"InstanceType": "m9n.48xlarge", "Location": "xx-test-1b"},
            {"InstanceType": "g9dn.xlarge", "Location": "xx-test-1b"},
            {"InstanceType": "n9.large", "Location": "xx-test-1c"},
            {"InstanceType": "mac9.metal", "Location": "xx-test-1a"},
        ],
    )
    write_json(zones_dir / "yy-test-2.json.gz", [{"InstanceType": "m9.large", "Location": "yy-test-2a"}])
    return shared, moto


def build(shared: Path, moto: Path, out: Path) -> subprocess.CompletedProcess[str]:
    out.mkdir(exist_ok=True)
    return cli("catalog", "build", "--sources", str(shared), "--moto", str(moto), "-o", str(out))


def rows(out: Path) -> dict[str, dict[str, Any]]:
    document = json.loads((out / "types.json").read_text())
    return {row[0]: dict(zip(COLUMNS, row, strict=True)) for row in document["types"]}


def test_each_fact_comes_from_the_most_authoritative_source(sources: tuple[Path, Path], tmp_path: Path) -> None:
    result = build(*sources, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    types = rows(tmp_path / "out")
    assert set(types) == {
        "m9.large", "m9n.48xlarge", "g9ad.xlarge", "g9dn.xlarge", "trn1.2xlarge", "p1.xlarge", "n9.large"
    }  # fmt: skip
    m9 = types["m9.large"]  # facts: the table; ENIs: the VPC limits; spot support: DescribeInstanceTypes
    assert (m9["facts"], m9["network"], m9["max_enis"], m9["branch_enis"], m9["spot"]) == (
        "karpenter", "vpc-limits", 3, 9, 0)  # fmt: skip
    assert types["m9n.48xlarge"]["max_enis"] == 8  # the default card's (index 1), not the 24 of both cards
    assert types["g9ad.xlarge"]["gpu_manufacturer"] == "amd" and types["g9ad.xlarge"]["branch_enis"] == 0
    assert types["trn1.2xlarge"]["accelerator_name"] == "inferentia"  # Karpenter v0.31's hard-coded trn1
    n9 = types["n9.large"]  # in no Karpenter table: DescribeInstanceTypes
    assert (n9["facts"], n9["network"], n9["architectures"], n9["max_enis"]) == ("ec2", "ec2", "arm64", 4)
    p1 = types["p1.xlarge"]  # only v0.31's table: previous generation, no ENI data anywhere
    assert (p1["facts"], p1["previous_generation"], p1["network"], p1["max_enis"]) == ("karpenter-v0.31", 1, "", 0)
    document = json.loads((tmp_path / "out" / "types.json").read_text())
    assert document["date"] == "2031-02" and document["regions"] == ["xx-test-1", "yy-test-2"]
    assert document["names_only"] == {"zz1.huge": 1}  # priced in xx-test-1, described nowhere
    assert "left out (no Kubernetes architecture): mac9.metal" in result.stdout


def test_zones_the_offerings_lack_are_inferred_and_marked(sources: tuple[Path, Path], tmp_path: Path) -> None:
    result = build(*sources, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    offerings = json.loads((tmp_path / "out" / "offerings-xx-test-1.json").read_text())
    assert offerings["zones"] == ["xx-test-1a", "xx-test-1b", "xx-test-1c"]
    assert offerings["offered"]["m9"] == {"3": "large"}  # observed: zones a and b
    assert offerings["inferred"] == {
        "g9ad.xlarge": [2, "zones of g9dn"],  # priced there, not offered: its category and generation's zones
        "p1.xlarge": [7, "every zone of the region"],
        "trn1.2xlarge": [7, "every zone of the region"],  # unpriced, but offered in no region: a hole
    }
    assert (tmp_path / "out" / "ec2-on-demand-prices-xx-test-1.json").is_file()
    # g9ad, p1 and trn1 are in no region's offerings: a hole in the source, filled in every region, priced or not
    other = json.loads((tmp_path / "out" / "offerings-yy-test-2.json").read_text())
    assert other["inferred"] == {
        name: [1, "every zone of the region"] for name in ("g9ad.xlarge", "p1.xlarge", "trn1.2xlarge")
    }
    assert "missing from the offerings of every region, zones inferred: g9ad.xlarge p1.xlarge trn1.2xlarge" in (
        result.stdout)  # fmt: skip
    assert "xx-test-1: 7 types, 3 zones, 3 with inferred zones" in result.stdout


def test_the_build_is_deterministic_and_removes_stale_regions(sources: tuple[Path, Path], tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    second.mkdir()
    (second / "offerings-gone-1.json").write_text("{}")
    (second / "unrelated.txt").write_text("kept")
    assert build(*sources, first).returncode == 0
    assert build(*sources, second).returncode == 0
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in second.iterdir() if p.suffix == ".json")
    for path in first.iterdir():
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name
    assert (second / "unrelated.txt").read_text() == "kept"


def test_a_broken_source_is_an_error_naming_the_file(sources: tuple[Path, Path], tmp_path: Path) -> None:
    shared, moto = sources
    (shared / "karpenter-v0.31-instance-types.json").write_text('{"types": [')
    result = build(shared, moto, tmp_path / "out")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "karpenter-v0.31-instance-types.json" in result.stderr and "not valid" in result.stderr
    assert list((tmp_path / "out").iterdir()) == []


REFERENCE = ROOT / "catalog-sources"


def _recorded_moto() -> bool:
    """Whether the installed moto is the release catalog-sources/moto.json records (another copies other offerings)."""
    moto = default_moto_resources()
    recorded = json.loads((REFERENCE / "moto.json").read_text())["version"]
    return moto is not None and installed_moto_version(moto) == recorded


@pytest.mark.skipif(not _recorded_moto(), reason="the installed moto is not the release catalog-sources records")
def test_the_shipped_catalog_is_what_the_build_makes_of_the_reference_data(tmp_path: Path) -> None:
    reference, moto = REFERENCE, default_moto_resources()
    assert moto is not None
    result = build(reference, moto, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    built = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert built == sorted(p.name for p in SHIPPED.iterdir() if p.suffix == ".json")
    for name in built:
        assert (tmp_path / "out" / name).read_bytes() == (SHIPPED / name).read_bytes(), name
    assert "EC2 catalog of 2026-07: 1412 instance types in 30 regions" in result.stdout
