"""What the controller's launcher still cannot carry out of an EC2NodeClass is refused with the field and why
(`LaunchSettingsError`: the NodePool is left out, its pods pending, docs/reconcile.md "Not modelled yet"), never
launched differently — every field of v1.14.1's `EC2NodeClassSpec` (aws pkg/apis/v1/ec2nodeclass.go) is either
carried or refused; what it now carries is not refused (issue #26): `ipPrefixCount`, `connectionTracking` and
`ssmParameter` AMI terms since s13-amiterms; `placementGroupSelector`, `networkInterfaces` and `cpuOptions` since
s14-ec2launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

import karpenter_policy
from karpenter_policy.api.v1.launchsettings import NOT_CARRIED, LaunchSettingsError, launch_settings
from karpenter_policy.cloud.networkselection import SUBNET_ID, filter_sets

BASE: dict[str, Any] = {
    "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "blue"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "blue"}}],
}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("amiSelectorTerms", [{"ssmParameter": "/my/ami", "region": "x"}], r"amiSelectorTerms\[0\]: selects by region"),
])
def test_what_is_not_launched_is_refused_naming_the_field(field: str, value: Any, message: str) -> None:
    with pytest.raises(LaunchSettingsError, match=message):
        launch_settings({**BASE, field: value})


@pytest.mark.parametrize(("field", "value"), [
    ("associatePublicIPAddress", False),
    ("associatePublicIPAddress", True),
    ("ipPrefixCount", 2),
    ("ipPrefixCount", 0),
    ("connectionTracking", {"tcpEstablishedTimeout": 86400}),
    ("amiSelectorTerms", [{"ssmParameter": "/my/ami"}]),
    ("amiSelectorTerms", [{"tags": {"team": "red,blue"}}, {"id": "ami-1"}, {"name": "eks-*", "owner": "self"}]),
    ("instanceStorePolicy", "RAID0"),
    ("placementGroupSelector", {"name": "pg"}),
    ("placementGroupSelector", {"id": "pg-0123456789abcdef0"}),
    ("networkInterfaces", [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                           {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}]),
    ("cpuOptions", {"nestedVirtualization": "enabled"}),
    ("context", "arn:aws:ec2:us-east-1:123456789012:context/x"),
    ("capacityReservationSelectorTerms", [{"id": "cr-123"}, {"tags": {"team": "a"}, "ownerID": "123456789012"}]),
    ("subnetSelectorTerms", [{"tags": {"Name": "a"}}, {"tags": {"Name": "b"}}]),
])
def test_what_is_launched_now_is_carried(field: str, value: Any) -> None:
    settings = launch_settings({**BASE, field: value})
    assert settings[field] == value


_SAMPLES: dict[str, Any] = {
    "amiFamily": "AL2023", "amiSelectorTerms": [{"alias": "al2023@latest"}], "associatePublicIPAddress": True,
    "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "40Gi"}}], "detailedMonitoring": True,
    "instanceProfile": "nodes", "instanceStorePolicy": "RAID0", "ipPrefixCount": 2,
    "connectionTracking": {"udpTimeout": 45}, "placementGroupSelector": {"name": "pg"},
    "networkInterfaces": [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}],
    "cpuOptions": {"nestedVirtualization": "disabled"}, "context": "context-1234",
    "capacityReservationSelectorTerms": [{"id": "cr-1"}],
    "metadataOptions": {"httpTokens": "required"}, "securityGroupSelectorTerms": [{"id": "sg-1"}],
    "subnetSelectorTerms": [{"id": "subnet-1"}], "tags": {"team": "a"}, "userData": "echo hi",
}
#: Read elsewhere: the class's kubelet goes into the constraint set's node arithmetic and bootstrap, its role is
#: documented as not carried (the controller creates no instance profile from it).
_ELSEWHERE = frozenset({"kubelet", "role"})


def test_every_field_of_the_v1_14_1_spec_is_carried_or_refused() -> None:
    """No field of v1.14.1's EC2NodeClass spec (its CRD, aws pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml,
    as this project ships it) is dropped without a word: each is carried into the launch settings or refused."""
    crd = yaml.safe_load((Path(karpenter_policy.__file__).parent / "schemas" / "crds"
                          / "karpenter.k8s.aws_ec2nodeclasses.yaml").read_text())
    (v1,) = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
    fields = set(v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
    assert fields - _ELSEWHERE == set(_SAMPLES) | set(NOT_CARRIED)
    for field, value in _SAMPLES.items():
        assert field in launch_settings({**BASE, field: value}), field


_TAGS = st.dictionaries(st.sampled_from(["Name", "tier", "karpenter.sh/discovery"]),
                        st.sampled_from(["a", "b", "a,b", "*"]), min_size=1, max_size=2)
_TERMS = st.lists(st.one_of(st.builds(lambda tags: {"tags": tags}, _TAGS),
                            st.builds(lambda n: {"id": f"subnet-{n}"}, st.integers(0, 3))), min_size=1, max_size=5)


@deterministic(200)
@given(terms=_TERMS)
def test_subnet_terms_are_asked_as_get_filter_sets_builds_them(terms: list[dict[str, Any]]) -> None:
    """`getFilterSets` (aws pkg/providers/subnet/subnet.go at v1.14.1): each tag term its own set, in order, its
    values literal (`a,b` is one value), then every id together — what the controller asks EC2, however many terms."""
    found = filter_sets(launch_settings({**BASE, "subnetSelectorTerms": terms}), SUBNET_ID)
    expected = [[{"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]}
                 for k, v in sorted(t["tags"].items())] for t in terms if "tags" in t]
    ids = [str(t["id"]) for t in terms if "id" in t]
    expected += [[{"Name": "subnet-id", "Values": ids}]] if ids else []
    assert found == expected
