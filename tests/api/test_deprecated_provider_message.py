"""`deprecated-provider`'s message is remembered per provider content (`api/provisionerrules.py`): the same text as
rendering it afresh, whatever the provider holds, and the YAML rendered once for a provider seen again.

The webhook reviews the same Provisioner on every update; rendering the AWSNodeTemplate the message shows costs
about 2 ms a review.
"""

from __future__ import annotations

import datetime
from typing import Any
from unittest import mock

import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api import provisionerrules
from karpenter_policy.api.provisionerrules import (
    MESSAGE_CACHE_SIZE,
    deprecated_provider_message,
    validate_provisioner,
)

PROVIDER = {
    "apiVersion": "extensions.karpenter.sh/v1alpha1",
    "kind": "AWS",
    "subnetSelector": {"karpenter.sh/discovery": "demo"},
    "securityGroupSelector": {"karpenter.sh/discovery": "demo"},
    "tags": {"team": "payments"},
}

json_scalars = (
    st.text(max_size=12)
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.none()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)
providers = st.dictionaries(st.text(max_size=10), json_values, max_size=6)


def rendered_afresh(provider: Any, name: str) -> str:
    """The message as rendered without the cache (the YAML of the AWSNodeTemplate every time)."""
    return provisionerrules._render_message(provider, name)


@deterministic(300)
@given(provider=providers, name=st.sampled_from(["default", "gpu", "NAME", "ünïcode"]))
def test_the_remembered_message_is_the_rendered_one(provider: dict[str, Any], name: str) -> None:
    expected = rendered_afresh(provider, name)
    assert deprecated_provider_message(provider, name) == expected
    assert deprecated_provider_message(provider, name) == expected  # from the cache this time


def test_a_provider_seen_again_is_not_rendered_again() -> None:
    """A copy of a provider seen before (a new review of the same Provisioner) renders no YAML; a provider changed in
    any value, or the same under another name, is rendered and says so."""
    provisionerrules._remembered_message.cache_clear()
    dumps = mock.Mock(wraps=yaml.safe_dump)
    with mock.patch.object(provisionerrules.yaml, "safe_dump", dumps):
        first = deprecated_provider_message(dict(PROVIDER), "legacy")
        again = deprecated_provider_message({**PROVIDER, "tags": {"team": "payments"}}, "legacy")
        assert dumps.call_count == 1
        changed = deprecated_provider_message({**PROVIDER, "tags": {"team": "search"}}, "legacy")
        renamed = deprecated_provider_message(dict(PROVIDER), "other")
        assert dumps.call_count == 3
    assert again == first
    assert first.splitlines()[0] == (
        "spec.provider is deprecated: use an AWSNodeTemplate and providerRef: {name: legacy}"
    )
    assert "      team: payments" in first.splitlines()
    assert "      team: search" in changed.splitlines()
    assert "    name: other" in renamed.splitlines()


def test_values_json_would_blur_are_rendered_every_time() -> None:
    """Values JSON has no type of its own for (a date a YAML file holds, an integer key) and ones it would make
    equal to others (1 and "1" as keys) are never taken from the cache: each message is its own provider's."""
    dated = {**PROVIDER, "tags": {"since": datetime.date(2024, 1, 2)}}
    assert deprecated_provider_message(dated, "d") == rendered_afresh(dated, "d")
    assert "      since: 2024-01-02" in deprecated_provider_message(dated, "d").splitlines()
    by_int = {**PROVIDER, "tags": {1: "a"}}
    by_text = {**PROVIDER, "tags": {"1": "a"}}
    assert deprecated_provider_message(by_int, "k") == rendered_afresh(by_int, "k")
    assert deprecated_provider_message(by_text, "k") == rendered_afresh(by_text, "k")
    assert deprecated_provider_message(by_int, "k") != deprecated_provider_message(by_text, "k")


def test_the_cache_is_bounded() -> None:
    """Many distinct providers (a stream of reviews) keep at most MESSAGE_CACHE_SIZE messages."""
    provisionerrules._remembered_message.cache_clear()
    for n in range(MESSAGE_CACHE_SIZE + 50):
        deprecated_provider_message({**PROVIDER, "tags": {"n": str(n)}}, "p")
    assert provisionerrules._remembered_message.cache_info().currsize == MESSAGE_CACHE_SIZE


def test_the_finding_carries_the_message() -> None:
    """The warning of a Provisioner with an inline provider, reviewed twice, is the rendered message both times."""
    provisioner = {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "legacy"},
        "spec": {"provider": dict(PROVIDER)},
    }
    messages = [
        v.message for _ in range(2) for v in validate_provisioner(provisioner) if v.rule == "deprecated-provider"
    ]
    assert messages == [rendered_afresh(PROVIDER, "legacy")] * 2
