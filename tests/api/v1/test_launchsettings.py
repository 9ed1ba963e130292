"""What the controller's launcher still cannot carry out of an EC2NodeClass is refused with the field and why
(`LaunchSettingsError`: the NodePool is left out, its pods pending, docs/reconcile.md "Not modelled yet"), never
launched differently; what it now carries is not refused (issue #26)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.api.v1.launchsettings import LaunchSettingsError, launch_settings

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
    assert settings.get(field, settings.get("subnetSelectors")) == (
        value if field != "subnetSelectorTerms" else [{"Name": "a"}, {"Name": "b"}])
