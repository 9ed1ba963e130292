"""Integration test of ``catalog refresh``: boto3 talks HTTP to moto's server (a subprocess on a free loopback
port), nothing is mocked in-process; and to a hostile local endpoint (`hostile_ec2`: empty, malformed, huge,
silent and trickling answers) through the real CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.refresh import build_catalog, load_on_demand_prices, refresh_catalog
from karpenter_policy.cloud import CloudError
from karpenter_policy.cloud.aws.ec2_catalog_source import Ec2CatalogSource

from .hostile_ec2 import HostileEc2

REGION = "us-east-1"
US_EAST_1_ZONES = {f"us-east-1{z}" for z in "abcdef"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def aws_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fake credentials, and no host AWS configuration or instance metadata lookups."""
    nowhere = tmp_path_factory.mktemp("aws") / "absent"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_SESSION_TOKEN", "testing")
        mp.setenv("AWS_DEFAULT_REGION", REGION)
        mp.setenv("AWS_CONFIG_FILE", str(nowhere))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        yield


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if server.poll() is not None:
                pytest.fail(f"moto server exited with {server.returncode}: {log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"moto server did not listen on port {port}: {log.read_text()}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class RecordingSource:
    """Delegates to the boto3 source once per call and remembers the answers (DescribeInstanceTypes is slow
    on moto), so several catalogs can be built from one set of HTTP answers."""

    def __init__(self, source: Ec2CatalogSource) -> None:
        self._source = source
        self._answers: dict[str, list[dict[str, Any]]] = {}

    def describe_instance_types(self) -> list[dict[str, Any]]:
        if "types" not in self._answers:
            self._answers["types"] = self._source.describe_instance_types()
        return self._answers["types"]

    def describe_instance_type_offerings(self, location_type: str = "availability-zone") -> list[dict[str, Any]]:
        key = f"offerings/{location_type}"
        if key not in self._answers:
            self._answers[key] = self._source.describe_instance_type_offerings(location_type)
        return self._answers[key]

    def describe_spot_price_history(self) -> list[dict[str, Any]]:
        if "spot" not in self._answers:
            self._answers["spot"] = self._source.describe_spot_price_history()
        return self._answers["spot"]


@pytest.fixture(scope="module")
def source(aws_env: None, moto_endpoint: str) -> RecordingSource:
    return RecordingSource(Ec2CatalogSource(REGION, moto_endpoint))


@pytest.fixture(scope="module")
def refreshed(aws_env: None, moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Catalog, Path]:
    """The real path: refresh_catalog on the boto3 source for the endpoint URL (what the CLI passes it)."""
    out = tmp_path_factory.mktemp("refresh") / "instance-types-us-east-1.json"
    catalog = refresh_catalog(REGION, Ec2CatalogSource(REGION, moto_endpoint), None, out)
    return catalog, out


def test_count_is_described_minus_excluded_architectures(
    refreshed: tuple[Catalog, Path], source: RecordingSource
) -> None:
    catalog, _ = refreshed
    described = source.describe_instance_types()
    excluded = {
        info["InstanceType"]
        for info in described
        if not {"x86_64", "arm64"} & set(info["ProcessorInfo"]["SupportedArchitectures"])
    }
    assert excluded and all(name.startswith("mac") for name in excluded)
    assert len(catalog) == len(described) - len(excluded)
    assert not excluded & set(catalog.names())


def test_m5_large(refreshed: tuple[Catalog, Path]) -> None:
    catalog, _ = refreshed
    m5 = catalog.get("m5.large")
    assert m5 is not None
    assert (m5.vcpu, m5.memory_mib, m5.architectures) == (2, 8192, ("amd64",))
    assert m5.zones() and set(m5.zones()) <= US_EAST_1_ZONES
    assert m5.capacity_types() == ("on-demand", "spot")
    assert m5.max_pods == 29
    assert m5.price_on_demand == load_on_demand_prices(None, REGION)["m5.large"]


def test_graviton_is_arm64_and_gpu_has_gpus(refreshed: tuple[Catalog, Path]) -> None:
    catalog, _ = refreshed
    graviton = catalog.get("m6g.large")
    assert graviton is not None and graviton.architectures == ("arm64",)
    assert graviton.labels()["kubernetes.io/arch"] == "arm64"
    gpu = catalog.get("g5.xlarge")
    assert gpu is not None and gpu.gpu_count > 0
    assert (gpu.gpu_name, gpu.gpu_manufacturer) == ("a10g", "nvidia")


def test_refresh_reads_the_network_facts(refreshed: tuple[Catalog, Path]) -> None:
    """The network cards, EFA interfaces, ENA and nested virtualization, as EC2 (moto over HTTP) describes them:
    what `check`/`plan` narrow an EC2NodeClass's types by (#26)."""
    catalog, out = refreshed
    p4d, t2, m8i = catalog.get("p4d.24xlarge"), catalog.get("t2.micro"), catalog.get("m8i.large")
    assert p4d is not None and t2 is not None and m8i is not None
    assert (p4d.network_cards, p4d.efa_interfaces) == ((15, 15, 15, 15), 4)
    assert t2.ena_unsupported and not p4d.ena_unsupported
    assert m8i.nested_virtualization and not p4d.nested_virtualization
    assert load_catalog(out).get("p4d.24xlarge") == p4d


def test_refresh_matches_the_embedded_catalog_shape(refreshed: tuple[Catalog, Path]) -> None:
    catalog, out = refreshed
    assert out.read_text().startswith('{"format":1,"region":"us-east-1","types":[\n')
    assert load_catalog(out) == catalog
    # No spot price is stored: spot offerings carry the on-demand price (None where the type has no price).
    for it in catalog:
        assert all(o.price == it.price_on_demand for o in it.offerings), it.name


def test_spot_prices_when_asked(source: RecordingSource) -> None:
    prices = load_on_demand_prices(None, REGION)
    catalog = build_catalog(source, prices, REGION, with_spot_prices=True)
    history = source.describe_spot_price_history()
    m5 = catalog.get("m5.large")
    assert m5 is not None
    spot = {o.zone: o.price for o in m5.offerings if o.capacity_type == "spot"}
    moto_prices = {h["AvailabilityZone"]: float(h["SpotPrice"]) for h in history if h["InstanceType"] == "m5.large"}
    assert spot and all(spot[zone] == moto_prices.get(zone, prices["m5.large"]) for zone in spot)
    on_demand = {o.price for o in m5.offerings if o.capacity_type == "on-demand"}
    assert on_demand == {prices["m5.large"]}


def test_unreachable_endpoint_is_a_cloud_error(aws_env: None, tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "catalog.json"
    with pytest.raises(CloudError) as caught:
        refresh_catalog(REGION, Ec2CatalogSource(REGION, endpoint), None, out)
    assert caught.value.endpoint.rstrip("/") == endpoint
    assert endpoint in str(caught.value) and "cannot connect" in caught.value.reason
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_missing_credentials_are_a_cloud_error(aws_env: None, moto_endpoint: str, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            mp.delenv(name)
        with pytest.raises(CloudError) as caught:
            refresh_catalog(REGION, Ec2CatalogSource(REGION, moto_endpoint), None, tmp_path / "catalog.json")
    assert "credentials" in caught.value.reason
    assert caught.value.operation == "DescribeInstanceTypes"


def test_bad_endpoint_url_is_a_cloud_error(aws_env: None) -> None:
    with pytest.raises(CloudError, match="Invalid endpoint"):
        Ec2CatalogSource(REGION, "not a url")


def test_refresh_module_does_not_import_boto3() -> None:
    code = (
        "import sys, karpenter_policy.catalog.refresh, karpenter_policy.catalog;"
        "print('boto3' in sys.modules or 'botocore' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert result.stdout.strip() == "False"


@pytest.mark.slow
def test_cli_refresh_against_moto_writes_a_catalog_check_can_use(
    aws_env: None, moto_endpoint: str, tmp_path: Path
) -> None:
    """`karpenter-policy catalog refresh` over HTTP, then `check --catalog` with the file it wrote."""
    out = tmp_path / "catalog.json"
    cli = [sys.executable, "-m", "karpenter_policy.cli"]
    refresh = subprocess.run(
        [*cli, "catalog", "refresh", "--region", "us-east-1", "--endpoint-url", moto_endpoint, "-o", str(out)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )
    assert refresh.returncode == 0, refresh.stderr
    assert refresh.stdout.startswith(f"wrote {out}: ") and "instance types in us-east-1" in refresh.stdout
    checked = subprocess.run(
        [*cli, "check", "policies/", "--catalog", str(out), "--region", "us-east-1"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    unreachable = subprocess.run(
        [*cli, "catalog", "refresh", "--endpoint-url", "http://127.0.0.1:9", "-o", str(tmp_path / "x.json")],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr
    assert not (tmp_path / "x.json").exists()


# --- an endpoint that is not EC2 (issue #19) -----------------------------------------------------------------

HOSTILE = {  # mode → what the refresh says (exit 2, the catalog file left as it was)
    "empty": "DescribeInstanceTypes: described no instance type of us-east-1 that Kubernetes can run: refusing to "
    "write an empty catalog",
    "nan": "the answer is not EC2's: <sizeInMiB> holds 'NaN' (instance type m5.large), not a number",
    "cards": "DescribeInstanceTypes: m5.large: NetworkCards[].NetworkCardIndex must be 0..1, got [0, 2]",
    "huge": "an answer larger than 8 MiB: not what EC2 answers; refused",
    "silent": "no complete answer within 3 s (--timeout): the endpoint is too slow or silent",
    "trickle": "no complete answer within 3 s (--timeout): the endpoint is too slow or silent",
}


@pytest.fixture(scope="module")
def good_catalog(aws_env: None, moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A catalog `catalog refresh` wrote from moto's EC2: what a bad answer must not replace."""
    out = tmp_path_factory.mktemp("good") / "catalog.json"
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "catalog", "refresh", "--endpoint-url", moto_endpoint,
         "-o", str(out)],
        capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


@pytest.mark.parametrize("mode", sorted(HOSTILE))
@pytest.mark.slow
def test_a_bad_answer_is_refused_and_the_catalog_left_as_it_was(
    aws_env: None, good_catalog: bytes, tmp_path: Path, mode: str
) -> None:
    """An empty answer used to replace a good catalog by one of 0 instance types, `<sizeInMiB>NaN` ended in
    `internal error: ValueError`, a 200 MB answer took 1.3 GB and wrote a catalog of 389,400 types offered
    nowhere, and a silent endpoint made the refresh wait for ever. Each is now a one-line error (exit 2) that
    leaves the file as it was."""
    out = tmp_path / "catalog.json"
    out.write_bytes(good_catalog)
    hostile = HostileEc2(mode)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "karpenter_policy.cli", "catalog", "refresh", "--endpoint-url", hostile.url,
             "-o", str(out), "--timeout", "3"],
            capture_output=True, text=True, env=dict(os.environ), timeout=120, check=False,
        )  # fmt: skip
    finally:
        hostile.stop()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[-1].startswith("karpenter-policy catalog refresh: ") and HOSTILE[mode] in lines[-1], done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert out.read_bytes() == good_catalog
    assert [p.name for p in tmp_path.iterdir()] == ["catalog.json"]  # no temporary file left either
