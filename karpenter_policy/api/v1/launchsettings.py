"""An EC2NodeClass's spec as the launch settings the controller's cloud provider reads (the AWSNodeTemplate shape).

The controller launches with one provider (`cloud.aws`), which reads a v1alpha5 AWSNodeTemplate's fields. A NodePool's
constraint set carries its EC2NodeClass's stored spec; `launch_settings` says the same in those fields — the
inverse of what `compile --api v1` writes (commands/compile/manifests.py):

  subnetSelectorTerms / securityGroupSelectorTerms   the same fields, each term as the controller reads it: {id},
                                                     a security group's {name} (its tags not read, as v1.14.1's
                                                     `getFilterSets` queries the name alone; admission refuses a
                                                     class whose every term has both), or {tags}. The controller
                                                     asks EC2 with `cloud.networkselection.filter_sets` of them —
                                                     v1.14.1's `getFilterSets` (aws pkg/providers/subnet/subnet.go,
                                                     securitygroup/securitygroup.go), a tag value literal — the one
                                                     reading `plan` shares
  amiSelectorTerms                                   `{alias: <family>@latest}` → amiFamily (the family's latest
                                                     EKS-optimised AMI, as v1 resolves an alias: `AMIFamilyFromAlias`,
                                                     aws pkg/apis/v1/ec2nodeclass.go at v1.14.1); `<family>@<version>`
                                                     (AL2, AL2023, Bottlerocket) → amiFamily and `amiVersion`, the
                                                     release the SSM parameters of that version name; other terms
                                                     ORed (`DescribeImageQueries`, amifamily/ami.go): each
                                                     {tags}/{name}/{owner} term → a selector of tags, `aws::name`,
                                                     `aws::owners`, the {id} terms → one `aws-ids`; one →
                                                     `amiSelector`, several → `amiSelectors`
  amiFamily, instanceProfile, userData, tags,
  blockDeviceMappings, metadataOptions,
  detailedMonitoring, associatePublicIPAddress,
  instanceStorePolicy                                the same fields
  role                                               not carried: the controller launches with the class's
                                                     instanceProfile, else its --default-instance-profile (it does
                                                     not create instance profiles as Karpenter v1 does from a role)

Every family an alias names is booted (`LAUNCHED_FAMILIES`; AL2023 with nodeadm, whose NodeConfig needs the
cluster's service CIDR: the cloud provider asks EKS for it, and leaves the set out until it knows,
`CloudProvider.unlaunchable`). What those fields cannot say is refused with the reason (`LaunchSettingsError`),
never launched differently: a capacity reservation, `ipPrefixCount`, an AMI term by
`ssmParameter`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.api.v1.objects import AMI_ALIAS_FAMILIES

#: Fields the launch settings keep as they are.
_SAME_FIELDS: Final = (
    "amiFamily", "instanceProfile", "userData", "tags", "blockDeviceMappings", "metadataOptions", "detailedMonitoring",
    "associatePublicIPAddress", "instanceStorePolicy",
)  # fmt: skip
#: Whether the primary network interface gets a public IPv4 address (unset: the subnet's setting decides).
PUBLIC_IP: Final = "associatePublicIPAddress"
#: Fields the controller does not launch with: a value (other than Karpenter's default) is refused.
_NOT_CARRIED: Final = (
    "capacityReservationSelectorTerms", "ipPrefixCount"
)  # fmt: skip
#: The alias version that means the family's latest AMI.
LATEST: Final = "latest"
#: The launch settings' key of an alias's pinned version (`al2023@v20240807` → `v20240807`).
AMI_VERSION: Final = "amiVersion"
#: The launch settings' key of several AMI selectors (an EC2NodeClass's terms, ORed) beside v0.31's key of one.
SELECTORS: Final = {"amiSelector": "amiSelectors"}
#: The EC2NodeClass fields the launch settings carry as terms (`cloud.networkselection.filter_sets` reads them).
NETWORK_TERMS: Final = ("subnetSelectorTerms", "securityGroupSelectorTerms")
#: The families whose alias may name a version (v1.14.1's CEL rule keeps Windows to `latest`).
PINNED_FAMILIES: Final = frozenset({"AL2", "AL2023", "Bottlerocket"})
#: The AMI families the launcher boots (`cloud.aws.userdata`: bootstrap.sh, nodeadm's NodeConfig for AL2023 as
#: `Nodeadm.getNodeConfigYAML` in aws pkg/providers/amifamily/bootstrap/nodeadm.go at v1.14.1, Bottlerocket's TOML,
#: Windows' script).
LAUNCHED_FAMILIES: Final = frozenset(
    {"AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Windows2025", "Custom"}
)


class LaunchSettingsError(ValueError):
    """An EC2NodeClass spec the controller's launcher cannot carry out as Karpenter v1 would: ``field: why``."""


def _terms(terms: Any, field: str) -> list[Mapping[str, Any]]:
    if not isinstance(terms, list) or not terms or not all(isinstance(term, Mapping) for term in terms):
        raise LaunchSettingsError(f"{field}: must be a non-empty list of terms")
    return terms


def _or(selectors: list[dict[str, str]], ids: list[str]) -> list[dict[str, str]]:
    """The selectors of the terms (in their order, a repeated one once), then one of every {id} term's id
    (`getFilterSets` queries the ids together, after the other terms)."""
    if ids:
        selectors.append({"aws-ids": ",".join(dict.fromkeys(ids))})
    unique: list[dict[str, str]] = []
    for selector in selectors:
        if selector not in unique:
            unique.append(selector)
    return unique


def _network_terms(terms: Any, field: str) -> list[dict[str, Any]]:
    """The subnet or security-group terms of `field` as the controller reads them (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for index, term in enumerate(_terms(terms, field)):
        if term.get("id"):
            out.append({"id": str(term["id"])})
            continue
        by_name = field == "securityGroupSelectorTerms" and isinstance(term.get("name"), str) and bool(term["name"])
        known = {"tags", "name"} if by_name else {"tags"}
        if not term or set(term) - known or not isinstance(term.get("tags", {}), Mapping):
            read = "id, name or tags" if field == "securityGroupSelectorTerms" else "id or tags"
            raise LaunchSettingsError(
                f"{field}[{index}]: selects by {', '.join(sorted(term))}; the controller reads {read}"
            )
        if by_name:  # `getFilterSets` asks by the name alone: a name term's tags are not read
            out.append({"name": str(term["name"])})
            continue
        out.append({"tags": {str(key): str(value) for key, value in sorted((term.get("tags") or {}).items())}})
    return out


def _put(settings: dict[str, Any], key: str, selectors: list[dict[str, str]]) -> None:
    """One selector under `key` (v0.31's field), several under its `SELECTORS` key."""
    if len(selectors) == 1:
        settings[key] = selectors[0]
    else:
        settings[SELECTORS[key]] = selectors


def selectors(settings: Mapping[str, Any] | None, key: str) -> tuple[Mapping[str, str], ...]:
    """The selectors of `key` (an AWSNodeTemplate's `subnetSelector`, `securityGroupSelector`, `amiSelector`; an
    EC2NodeClass's `amiSelector(s)`) the launch settings carry, ORed: the several of an EC2NodeClass's AMI terms, or
    the one selector; () when none."""
    several = (settings or {}).get(SELECTORS[key]) if key in SELECTORS else None
    spec = settings or {}
    if isinstance(several, list):
        return tuple(several)
    one = spec.get(key)
    return (one,) if isinstance(one, Mapping) and one else ()


def described(key: str, found: Sequence[Mapping[str, str]]) -> str:
    """Selectors as a reason names them: ``amiSelector {…}``, or ``any of amiSelectors [{…}, {…}]``."""
    if len(found) == 1:
        return f"{key} {dict(found[0])}"
    return f"any of {SELECTORS[key]} {[dict(one) for one in found]}"


def _ami(terms: Any, family: Any) -> dict[str, Any]:
    """amiFamily and amiSelector for `amiSelectorTerms` (see the module docstring)."""
    terms = _terms(terms, "amiSelectorTerms")
    alias = terms[0].get("alias")
    if alias is not None:
        name, _, version = str(alias).partition("@")
        aliased = AMI_ALIAS_FAMILIES.get(name.lower())
        if aliased is None:
            raise LaunchSettingsError(f"amiSelectorTerms[0].alias: {alias!r} names no AMI family")
        family = _launched(aliased, "amiSelectorTerms[0].alias")
        if version.lower() == LATEST:
            return {"amiFamily": family}
        if family not in PINNED_FAMILIES:
            raise LaunchSettingsError(
                f"amiSelectorTerms[0].alias: {alias!r} pins an AMI version; {family} has its latest AMI only"
            )
        return {"amiFamily": family, AMI_VERSION: version}
    out: dict[str, Any] = {} if family is None else {"amiFamily": _launched(str(family), "amiFamily")}
    ids: list[str] = []
    found: list[dict[str, str]] = []
    for index, term in enumerate(terms):
        if term.get("id"):
            ids.append(str(term["id"]))
            continue
        unknown = sorted(set(term) - {"tags", "name", "owner"})
        if unknown or not term:
            raise LaunchSettingsError(f"amiSelectorTerms[{index}]: selects by {', '.join(unknown) or 'nothing'}; "
                                      "the controller reads id, name, owner or tags")
        selector = {str(key): str(value) for key, value in sorted((term.get("tags") or {}).items())}
        if term.get("name") is not None:
            selector["aws::name"] = str(term["name"])
        if term.get("owner") is not None:
            selector["aws::owners"] = str(term["owner"])
        found.append(selector)
    _put(out, "amiSelector", _or(found, ids))
    return out


def _launched(family: str, field: str) -> str:
    if family not in LAUNCHED_FAMILIES:
        raise LaunchSettingsError(
            f"{field}: the controller does not boot {family} nodes (it boots {', '.join(sorted(LAUNCHED_FAMILIES))})"
        )
    return family


def launch_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The launch settings of an (admitted, stored) EC2NodeClass spec; LaunchSettingsError says what cannot be
    carried (see the module docstring)."""
    for field in _NOT_CARRIED:
        value = spec.get(field)
        if value not in (None, [], False):
            raise LaunchSettingsError(f"{field}: the controller does not launch with it")
    settings: dict[str, Any] = {field: spec[field] for field in _SAME_FIELDS if spec.get(field) is not None}
    for field in NETWORK_TERMS:
        settings[field] = _network_terms(spec.get(field), field)
    settings.update(_ami(spec.get("amiSelectorTerms"), spec.get("amiFamily")))
    return settings


__all__ = [
    "AMI_VERSION",
    "LATEST",
    "LAUNCHED_FAMILIES",
    "NETWORK_TERMS",
    "PINNED_FAMILIES",
    "PUBLIC_IP",
    "SELECTORS",
    "LaunchSettingsError",
    "described",
    "launch_settings",
    "selectors",
]
