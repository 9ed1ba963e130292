"""AL2023 nodes boot with the cluster's service CIDR, which the AWS provider reads from EKS's DescribeCluster as
Karpenter v1.14.1 does (`ResolveClusterCIDR`, aws pkg/providers/launchtemplate/launchtemplate.go) — against moto's
server over HTTP, through the fault proxy for the answers moto cannot give. Any answer without a valid CIDR leaves
AL2023 node templates unlaunchable, with the reason, never an exception out of `unlaunchable`."""

from __future__ import annotations

import dataclasses
import email
import ipaddress
import json
from typing import Any

import boto3
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.cloud import ConfigurationError
from karpenter_policy.cloud.aws.api import AwsConnection
from karpenter_policy.cloud.aws.provider import AwsCloudProvider
from karpenter_policy.cloud.aws.servicecidr import RETRY, service_cidr_of
from karpenter_policy.cloud.aws.userdata import NODECONFIG_PART_TYPE

from .conftest import CLUSTER, K8S_VERSION, REGION, SMALL_CATALOG, SSM_AL2, AwsEnv, _ssm_stub, catalog_types
from .faultproxy import Answer, error_answer, json_answer
from .support import offer, request, user_data

SSM_AL2023 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023/x86_64/standard/recommended/image_id"
CIDR = "10.100.0.0/16"


def al2023(aws: AwsEnv) -> dict[str, Any]:
    aws.proxy.serve("GetParameter", _ssm_stub({SSM_AL2023: aws.ami_amd64, SSM_AL2: aws.ami_amd64}))
    return aws.spec(amiFamily="AL2023")


def eks_cluster(aws: AwsEnv, **network: str) -> None:
    """The cluster in moto's EKS (straight to moto, not through the proxy)."""
    eks = boto3.client("eks", region_name=REGION, endpoint_url=aws.moto_url)
    eks.create_cluster(
        name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={},
        kubernetesNetworkConfig=network or {"serviceIpv4Cidr": CIDR},
    )


def node_config(text: str) -> dict[str, Any]:
    parts = [p for p in email.message_from_string(text).walk() if p.get_content_type() == NODECONFIG_PART_TYPE]
    config: dict[str, Any] = yaml.safe_load(str(parts[-1].get_payload()))
    return config


def test_an_al2023_node_boots_with_the_service_cidr_eks_tells(aws: AwsEnv) -> None:
    eks_cluster(aws)
    provider = aws.provider()
    spec = al2023(aws)

    assert provider.unlaunchable(spec) is None
    instance = provider.create(request(spec, [offer("m5.large", "us-east-1a")]))

    cluster = node_config(user_data(aws.ec2, instance.id))["spec"]["cluster"]
    assert cluster["cidr"] == CIDR and cluster["name"] == CLUSTER
    assert cluster["apiServerEndpoint"] == "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
    provider.unlaunchable(spec)
    assert [c.params for c in aws.proxy.calls_to("DescribeCluster")] == [{"name": CLUSTER}]  # asked once, kept


def test_other_families_never_ask_eks(aws: AwsEnv) -> None:
    provider = aws.provider()
    assert provider.unlaunchable(aws.spec()) is None
    assert provider.unlaunchable(aws.spec(amiFamily="Bottlerocket")) is None
    provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    assert aws.proxy.calls_to("DescribeCluster") == []


def test_a_cluster_eks_does_not_know_leaves_al2023_out_and_is_asked_again_after_the_retry(aws: AwsEnv) -> None:
    provider = aws.provider()
    spec = al2023(aws)

    why = provider.unlaunchable(spec)
    assert why is not None and "DescribeCluster" in why and "No cluster found for name: blue" in why
    assert provider.unlaunchable(spec) == why
    assert len(aws.proxy.calls_to("DescribeCluster")) == 1  # the failure is remembered, not asked every pass
    with pytest.raises(ConfigurationError, match="service CIDR"):
        provider.create(request(spec, [offer("m5.large", "us-east-1a")]))
    assert aws.instances() == []

    eks_cluster(aws)
    aws.clock.advance(RETRY + 1)
    assert provider.unlaunchable(spec) is None
    assert len(aws.proxy.calls_to("DescribeCluster")) == 2


def test_an_ipv6_cluster_boots_with_its_ipv6_service_cidr(aws: AwsEnv) -> None:
    # moto's EKS keeps the kubernetesNetworkConfig it was created with and has no serviceIpv6Cidr of its own
    # (asking for ipFamily ipv6 gives back only {"ipFamily": "ipv6"}): EKS's IPv6 answer is served by the proxy.
    network = {"ipFamily": "ipv6", "serviceIpv6Cidr": "fd30:1c53:5f8a::/108"}
    aws.proxy.serve("DescribeCluster", lambda call: json_answer({"cluster": {"name": CLUSTER,
                                                                             "kubernetesNetworkConfig": network}}))
    provider = aws.provider()
    spec = al2023(aws)

    instance = provider.create(request(spec, [offer("m5.large", "us-east-1a")]))

    assert node_config(user_data(aws.ec2, instance.id))["spec"]["cluster"]["cidr"] == "fd30:1c53:5f8a::/108"


def _raw(status: int, body: bytes) -> Any:
    return lambda call: Answer(status, body, {"Content-Type": "application/json"})


MALFORMED = [
    ("no network config", json_answer({"cluster": {"name": CLUSTER}})),
    ("a number for the CIDR", json_answer({"cluster": {"kubernetesNetworkConfig": {"serviceIpv4Cidr": 42}}})),
    ("host bits set", json_answer({"cluster": {"kubernetesNetworkConfig": {"serviceIpv4Cidr": "10.100.0.1/16"}}})),
    ("IPv6 as IPv4", json_answer({"cluster": {"kubernetesNetworkConfig": {"serviceIpv4Cidr": "fd00::/108"}}})),
    ("not a CIDR", json_answer({"cluster": {"kubernetesNetworkConfig": {"serviceIpv4Cidr": "x" * 5000}}})),
    ("an empty CIDR", json_answer({"cluster": {"kubernetesNetworkConfig": {"serviceIpv4Cidr": ""}}})),
]


@pytest.mark.parametrize("answer", [a for _, a in MALFORMED], ids=[name for name, _ in MALFORMED])
def test_an_answer_without_a_valid_cidr_leaves_al2023_out_saying_so(aws: AwsEnv, answer: Answer) -> None:
    aws.proxy.serve("DescribeCluster", lambda call: answer)
    provider = aws.provider()
    spec = al2023(aws)

    why = provider.unlaunchable(spec)

    assert why is not None and "no service CIDR in the answer for cluster 'blue'" in why
    with pytest.raises(ConfigurationError, match="service CIDR"):
        provider.create(request(spec, [offer("m5.large", "us-east-1a")]))
    assert aws.instances() == []


@pytest.mark.parametrize(
    "respond",
    [
        _raw(200, b"<html>not json</html>"),
        _raw(200, b'{"cluster": '),
        _raw(200, b'{"cluster": []}'),  # botocore's parser fails on it with an AttributeError
        lambda call: error_answer(call, 403, "AccessDeniedException", "not authorized: eks:DescribeCluster"),
    ],
    ids=["html", "truncated", "a list for the cluster", "denied"],
)
def test_a_failed_or_unreadable_call_leaves_al2023_out_never_raising(aws: AwsEnv, respond: Any) -> None:
    aws.proxy.serve("DescribeCluster", respond)
    why = aws.provider(max_attempts=1).unlaunchable(al2023(aws))
    assert why is not None and "service CIDR" in why


def test_a_given_service_cidr_is_used_without_asking(aws: AwsEnv) -> None:
    cluster = dataclasses.replace(aws.provider().cluster, service_cidr=CIDR)
    provider = AwsCloudProvider(AwsConnection(REGION, endpoint_url=aws.proxy.url), cluster,
                                catalog_types(SMALL_CATALOG), clock=aws.clock, sleep=lambda _: None)
    instance = provider.create(request(al2023(aws), [offer("m5.large", "us-east-1a")]))
    assert node_config(user_data(aws.ec2, instance.id))["spec"]["cluster"]["cidr"] == CIDR
    assert aws.proxy.calls_to("DescribeCluster") == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30)
    | st.sampled_from(["10.100.0.0/16", "fd30::/108", "10.0.0.1/8", "0.0.0.0/0", "::/0"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["cluster", "kubernetesNetworkConfig", "serviceIpv4Cidr", "serviceIpv6Cidr", "x"]),
        inner, max_size=4),
    max_leaves=12,
)


@deterministic(300)
@given(answer=json_values)
def test_any_answer_gives_a_network_or_none(answer: Any) -> None:
    found = service_cidr_of(json.loads(json.dumps(answer)))
    assert found is None or ipaddress.ip_network(found, strict=True)
