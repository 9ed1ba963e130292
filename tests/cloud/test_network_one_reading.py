"""One reading of an EC2NodeClass's subnet and security-group terms (issue #26): whatever the terms, the subnets and
security groups the controller's discovery selects are those `plan` reads of the same described resources —
`networkselection.select(term_filter_sets(...))`, Karpenter v1.14.1's `getFilterSets` (aws
pkg/providers/subnet/subnet.go, securitygroup/securitygroup.go). EC2 is a fake here that answers each Describe* call
with the resources `networkselection.matches` (EC2's reading of a filter set, checked against moto in
test_aws_selector_terms.py); the property is about which calls the controller makes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.launchsettings import launch_settings
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.discovery import Discovery
from karpenter_policy.cloud.networkselection import GROUP_ID, SUBNET_ID, Described, matches, select, term_filter_sets

from .conftest import FakeClock

_ZONES = ("us-east-1a", "us-east-1b")


class _Ec2(AwsApi):
    """DescribeSubnets / DescribeSecurityGroups over a fixed set of resources; the calls are recorded."""

    def __init__(self, subnets: list[Described], groups: list[Described]) -> None:  # no connection: no SDK
        self.subnets, self.groups = subnets, groups
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []

    def paginate(self, service: str, operation: str, key: str, *, max_attempts: int | None = None,
                 **kwargs: Any) -> Iterator[Any]:
        filters = kwargs["Filters"]
        self.calls.append((operation, filters))
        if operation == "describe_subnets":
            for n, subnet in enumerate(self.subnets):
                if matches(filters, subnet, SUBNET_ID):
                    yield {"SubnetId": subnet.id, "AvailabilityZone": _ZONES[n % 2], "AvailableIpAddressCount": 9,
                           "Tags": [{"Key": k, "Value": v} for k, v in subnet.tags.items()]}
        else:
            yield from ({"GroupId": g.id, "GroupName": g.name} for g in self.groups if matches(filters, g, GROUP_ID))


_KEYS = st.sampled_from(["Name", "tier", "karpenter.sh/discovery"])
_VALUES = st.sampled_from(["a", "b", "a,b", "*"])
_RESOURCE_TAGS = st.dictionaries(_KEYS, st.sampled_from(["a", "b", "a,b", "c"]), max_size=3)


def _resources(prefix: str) -> st.SearchStrategy[list[Described]]:
    return st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3"]), _RESOURCE_TAGS), max_size=6).map(
        lambda found: [Described(f"{prefix}-{i}", name if prefix == "sg" else "", tags)
                       for i, (name, tags) in enumerate(found)])


def _terms(prefix: str, names: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    term = st.one_of(
        st.builds(lambda tags: {"tags": tags}, st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=2)),
        st.builds(lambda n: {"id": f"{prefix}-{n}"}, st.integers(0, 6)),
        *([st.builds(lambda n: {"name": n}, st.sampled_from(["n1", "n2", "n4"]))] if names else []),
    )
    return st.lists(term, min_size=1, max_size=4)


@deterministic(300)
@given(subnets=_resources("subnet"), groups=_resources("sg"), subnet_terms=_terms("subnet", False),
       group_terms=_terms("sg", True))
def test_the_controller_selects_what_plan_reads_of_the_same_terms(
    subnets: list[Described], groups: list[Described], subnet_terms: list[dict[str, Any]],
    group_terms: list[dict[str, Any]],
) -> None:
    spec: Mapping[str, Any] = {"amiSelectorTerms": [{"alias": "al2@latest"}], "subnetSelectorTerms": subnet_terms,
                               "securityGroupSelectorTerms": group_terms}
    discovery = Discovery(_Ec2(subnets, groups), FakeClock())
    settings = launch_settings(spec)
    assert tuple(s.id for s in discovery.subnets(settings)) == select(
        term_filter_sets(subnet_terms, SUBNET_ID), subnets, SUBNET_ID)
    assert discovery.security_groups(settings) == select(
        term_filter_sets(group_terms, GROUP_ID), groups, GROUP_ID)


def test_the_controller_asks_ec2_the_filter_sets_of_get_filter_sets() -> None:
    """The calls themselves, one per filter set of subnet.go `getFilterSets` at v1.14.1 (`a,b` one value)."""
    ec2 = _Ec2([], [])
    terms = [{"tags": {"Name": "a,b"}}, {"id": "subnet-1"}, {"tags": {"tier": "*"}}]
    Discovery(ec2, FakeClock()).subnets(launch_settings({"amiSelectorTerms": [{"alias": "al2@latest"}],
                                                         "subnetSelectorTerms": terms,
                                                         "securityGroupSelectorTerms": [{"id": "sg-1"}]}))
    assert ec2.calls == [("describe_subnets", f) for f in term_filter_sets(terms, SUBNET_ID)] == [
        ("describe_subnets", [{"Name": "tag:Name", "Values": ["a,b"]}]),
        ("describe_subnets", [{"Name": "tag-key", "Values": ["tier"]}]),
        ("describe_subnets", [{"Name": "subnet-id", "Values": ["subnet-1"]}]),
    ]
