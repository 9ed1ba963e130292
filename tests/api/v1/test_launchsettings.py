"""What the controller's launcher still cannot carry out of an EC2NodeClass is refused with the field and why
(`LaunchSettingsError`: the NodePool is left out, its pods pending, docs/reconcile.md "Not modelled yet"), never
launched differently; what it now carries is not refused (issue #26)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.v1.launchsettings import LaunchSettingsError, launch_settings
from karpenter_policy.cloud.networkselection import SUBNET_ID, filter_sets

BASE: dict[str, Any] = {
    "amiSelectorTerms": [{"alias": "al2023@latest"}],
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "blue"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "blue"}}],
}


@pytest.mark.parametrize(("field", "value", "message"), [
    ("capacityReservationSelectorTerms", [{"id": "cr-123"}], "capacityReservationSelectorTerms: the controller"),
    ("ipPrefixCount", 1, "ipPrefixCount: the controller does not launch with it"),
    ("amiSelectorTerms", [{"ssmParameter": "/my/ami"}], r"amiSelectorTerms\[0\]: selects by ssmParameter"),
])
def test_what_is_not_launched_is_refused_naming_the_field(field: str, value: Any, message: str) -> None:
    with pytest.raises(LaunchSettingsError, match=message):
        launch_settings({**BASE, field: value})


@pytest.mark.parametrize(("field", "value"), [
    ("associatePublicIPAddress", False),
    ("associatePublicIPAddress", True),
    ("instanceStorePolicy", "RAID0"),
    ("subnetSelectorTerms", [{"tags": {"Name": "a"}}, {"tags": {"Name": "b"}}]),
])
def test_what_is_launched_now_is_carried(field: str, value: Any) -> None:
    settings = launch_settings({**BASE, field: value})
    assert settings[field] == value


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
