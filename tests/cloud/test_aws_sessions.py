"""Each AwsApi's boto3 session is its own (region, credentials, endpoint, retries) on the process's one botocore
loader: EC2's JSON service model is parsed once per process, not once per AwsApi (#26), and the clients of several
AwsApi work against moto's server over HTTP at once from threads."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.loaders import JSONFileLoader

from karpenter_policy.cloud.aws.api import AwsApi, AwsConnection

from .conftest import REGION, ZONES, AwsEnv


@pytest.fixture()
def ec2_model_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The EC2 service models botocore reads from disk while the test runs."""
    reads: list[str] = []
    load_file = JSONFileLoader.load_file

    def counting(self: Any, file_path: str) -> Any:
        found = load_file(self, file_path)
        if found is not None and "/ec2/" in file_path and file_path.endswith("service-2"):
            reads.append(file_path)
        return found

    monkeypatch.setattr(JSONFileLoader, "load_file", counting)
    yield reads


def test_many_aws_apis_read_the_ec2_model_at_most_once_per_process(aws: AwsEnv, ec2_model_reads: list[str]) -> None:
    apis = [AwsApi(AwsConnection(REGION, endpoint_url=aws.moto_url, max_attempts=n)) for n in (1, 2, 3)]
    for api in apis:
        api.client("ec2")
        api.client("ec2", max_attempts=4)

    assert len(ec2_model_reads) <= 1  # once per process: none when an earlier test of this process read it


def test_each_api_keeps_its_own_region_credentials_and_retries(aws: AwsEnv) -> None:
    east = AwsApi(AwsConnection(REGION, endpoint_url=aws.moto_url, max_attempts=2, access_key_id="AKIDEAST",
                                secret_access_key="east"))
    west = AwsApi(AwsConnection("eu-west-1", endpoint_url=aws.moto_url, max_attempts=7, access_key_id="AKIDWEST",
                                secret_access_key="west"))

    assert east.client("ec2").meta.region_name == REGION
    assert west.client("ec2").meta.region_name == "eu-west-1"
    assert east.client("ec2").meta.config.retries["total_max_attempts"] == 2
    assert west.client("ec2").meta.config.retries["total_max_attempts"] == 7
    assert east._session.get_credentials().access_key == "AKIDEAST"  # noqa: SLF001
    assert west._session.get_credentials().access_key == "AKIDWEST"  # noqa: SLF001


def test_the_clients_of_several_apis_answer_from_threads_at_once(aws: AwsEnv) -> None:
    regions = [REGION, "eu-west-1", REGION, "eu-west-1"]
    apis = [AwsApi(AwsConnection(region, endpoint_url=aws.moto_url)) for region in regions]

    def zones(api: AwsApi) -> tuple[str, ...]:
        found = api.call("ec2", "describe_availability_zones")["AvailabilityZones"]
        return tuple(sorted(z["ZoneName"] for z in found))

    def subnets(api: AwsApi) -> set[str]:
        return {s["SubnetId"] for s in api.paginate("ec2", "describe_subnets", "Subnets")}

    with ThreadPoolExecutor(max_workers=8) as pool:
        answered = list(pool.map(zones, apis * 4))
        listed = list(pool.map(subnets, [apis[0], apis[2]] * 4))

    for api, found in zip(apis * 4, answered, strict=True):
        assert found and all(zone.startswith(api.connection.region) for zone in found)
    assert set(ZONES) <= set(answered[0])
    assert all(set(aws.subnets.values()) <= found for found in listed)


def test_the_shared_loader_searches_each_path_once_however_many_sessions() -> None:
    from karpenter_policy.cloud.aws.sessions import new_session  # noqa: PLC0415 - the file runs on the old code too

    sessions = [new_session(region_name=REGION) for _ in range(5)]
    loaders = {id(s._session.get_component("data_loader")) for s in sessions}  # noqa: SLF001
    paths = sessions[0]._session.get_component("data_loader").search_paths  # noqa: SLF001

    assert len(loaders) == 1
    assert len(paths) == len(set(paths))
    assert any(path.endswith("boto3/data") for path in paths)  # boto3's resource models are still found
