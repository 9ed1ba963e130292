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
  amiSelectorTerms                                   the same field, each term's alias, id, ssmParameter, name,
                                                     owner and tags as they are (`AMI_TERMS`), and amiFamily: the
                                                     alias's family (`AMIFamilyFromAlias`, aws
                                                     pkg/apis/v1/ec2nodeclass.go at v1.14.1), else the class's. The
                                                     controller resolves the terms with
                                                     `cloud.amiselection.resolve_terms` — v1.14.1's
                                                     `DescribeImageQueries` and `amis` (amifamily/ami.go): an
                                                     alias's SSM parameters, ssmParameter terms' GetParameter, ids
                                                     together, a name/owner/tags term its own DescribeImages query
                                                     (a tag value literal) — the one reading `plan` shares
  amiFamily, instanceProfile, userData, tags,
  blockDeviceMappings, metadataOptions,
  detailedMonitoring, associatePublicIPAddress,
  ipPrefixCount, connectionTracking,
  instanceStorePolicy, placementGroupSelector,
  networkInterfaces, cpuOptions                      the same fields (the last three as v1.14.1's launch template
                                                     builds them: `cloud.aws.launchtemplates`, docs/cloud.md)
  context                                            the same field: CreateFleet's `Context` (an ODCR context),
                                                     as v1.14.1's `CreateFleetInputBuilder.WithContextID`
  kubelet                                            not here: the constraint set's kubelet settings (node
                                                     arithmetic and bootstrap)
  role                                               not carried: the controller launches with the class's
                                                     instanceProfile, else its --default-instance-profile (it does
                                                     not create instance profiles as Karpenter v1 does from a role)

Every family an alias names is booted (`LAUNCHED_FAMILIES`; AL2023 with nodeadm, whose NodeConfig needs the
cluster's service CIDR: the cloud provider asks EKS for it, and leaves the set out until it knows,
`CloudProvider.unlaunchable`). What those fields cannot say is refused with the reason (`LaunchSettingsError`),
never launched differently (`NOT_CARRIED`, docs/reconcile.md: none today).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.api.v1.objects import AMI_ALIAS_FAMILIES
from karpenter_policy.model import labels as wk

#: Fields the launch settings keep as they are.
_SAME_FIELDS: Final = (
    "amiFamily", "instanceProfile", "userData", "tags", "blockDeviceMappings", "metadataOptions", "detailedMonitoring",
    "associatePublicIPAddress", "ipPrefixCount", "connectionTracking", "instanceStorePolicy",
    "placementGroupSelector", "networkInterfaces", "cpuOptions", "context", "capacityReservationSelectorTerms",
)  # fmt: skip
#: Whether the primary network interface gets a public IPv4 address (unset: the subnet's setting decides).
PUBLIC_IP: Final = "associatePublicIPAddress"
#: The placement group the nodes launch into: {name} or {id} (`cloud.aws.placementgroups` resolves it).
PLACEMENT_GROUP: Final = "placementGroupSelector"
#: The most partitions a partition placement group has in a zone (EC2's limit).
MAX_PARTITIONS: Final = 7
#: The network interfaces (network card, device index, `interface` or `efa-only`) the launch template carries.
NETWORK_INTERFACES: Final = "networkInterfaces"
#: The CPU options (`nestedVirtualization`) the launch template carries.
CPU_OPTIONS: Final = "cpuOptions"
#: The ODCR context CreateFleet carries (`Context`), unless the claim's minValues were relaxed (v1.14.1).
CONTEXT: Final = "context"
#: How many IPv4 prefixes (/28) EC2 assigns the primary network interface (unset: none).
IP_PREFIX_COUNT: Final = "ipPrefixCount"
#: The primary network interface's connection-tracking timeouts (unset: EC2's defaults).
CONNECTION_TRACKING: Final = "connectionTracking"
#: Fields the controller does not launch with, and why: a value (other than Karpenter's default) is refused.
NOT_CARRIED: Final[dict[str, str]] = {}
#: The launch settings' key of an EC2NodeClass's AMI terms (`cloud.amiselection.resolve_terms` reads them).
AMI_TERMS: Final = "amiSelectorTerms"
#: The fields of an AMI term the controller reads (v1.14.1's `AMISelectorTerm`).
_AMI_TERM_FIELDS: Final = ("alias", "id", "ssmParameter", "name", "owner", "tags")
#: The alias version that means the family's latest AMI.
LATEST: Final = "latest"
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


def selectors(settings: Mapping[str, Any] | None, key: str) -> tuple[Mapping[str, str], ...]:
    """The one v0.31 selector of `key` (an AWSNodeTemplate's `subnetSelector`, `securityGroupSelector`,
    `amiSelector`) the launch settings carry; () when none (an EC2NodeClass's settings carry terms instead)."""
    one = (settings or {}).get(key)
    return (one,) if isinstance(one, Mapping) and one else ()


def ami_terms(settings: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], ...]:
    """The `amiSelectorTerms` an EC2NodeClass's launch settings carry; () for an AWSNodeTemplate's."""
    terms = (settings or {}).get(AMI_TERMS)
    return tuple(t for t in terms if isinstance(t, Mapping)) if isinstance(terms, list) else ()


def alias_version(terms: Sequence[Mapping[str, Any]]) -> str | None:
    """The version an `alias` term names (`al2023@v20240807` → `v20240807`, `…@latest` → `latest`); None: no alias."""
    alias = next((str(t["alias"]) for t in terms if t.get("alias")), None)
    if alias is None:
        return None
    return alias.partition("@")[2] or None


def _ami(terms: Any, family: Any) -> dict[str, Any]:
    """amiFamily and amiSelectorTerms (see the module docstring)."""
    terms = _terms(terms, AMI_TERMS)
    carried = []
    for index, term in enumerate(terms):
        unknown = sorted(set(term) - set(_AMI_TERM_FIELDS))
        if unknown or not any(term.get(key) for key in _AMI_TERM_FIELDS):
            raise LaunchSettingsError(f"{AMI_TERMS}[{index}]: selects by {', '.join(unknown) or 'nothing'}; "
                                      f"the controller reads {', '.join(_AMI_TERM_FIELDS)}")
        kept: dict[str, Any] = {key: str(term[key]) for key in _AMI_TERM_FIELDS[:-1] if term.get(key)}
        if term.get("tags"):
            kept["tags"] = {str(key): str(value) for key, value in sorted(term["tags"].items())}
        carried.append(kept)
    alias = terms[0].get("alias")
    if alias is None:
        out: dict[str, Any] = {} if family is None else {"amiFamily": _launched(str(family), "amiFamily")}
        return {**out, AMI_TERMS: carried}
    name, _, version = str(alias).partition("@")
    aliased = AMI_ALIAS_FAMILIES.get(name.lower())
    if aliased is None:
        raise LaunchSettingsError(f"{AMI_TERMS}[0].alias: {alias!r} names no AMI family")
    family = _launched(aliased, f"{AMI_TERMS}[0].alias")
    if version.lower() != LATEST and family not in PINNED_FAMILIES:
        raise LaunchSettingsError(
            f"{AMI_TERMS}[0].alias: {alias!r} pins an AMI version; {family} has its latest AMI only"
        )
    return {"amiFamily": family, AMI_TERMS: carried}


def _launched(family: str, field: str) -> str:
    if family not in LAUNCHED_FAMILIES:
        raise LaunchSettingsError(
            f"{field}: the controller does not boot {family} nodes (it boots {', '.join(sorted(LAUNCHED_FAMILIES))})"
        )
    return family


def launch_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The launch settings of an (admitted, stored) EC2NodeClass spec; LaunchSettingsError says what cannot be
    carried (see the module docstring)."""
    for field, why in NOT_CARRIED.items():
        if spec.get(field) not in (None, [], {}, "", False):
            raise LaunchSettingsError(f"{field}: {why}")
    settings: dict[str, Any] = {field: spec[field] for field in _SAME_FIELDS if spec.get(field) is not None}
    for field in NETWORK_TERMS:
        settings[field] = _network_terms(spec.get(field), field)
    settings.update(_ami(spec.get("amiSelectorTerms"), spec.get("amiFamily")))
    return settings


__all__ = [
    "MAX_PARTITIONS",
    "offline_placement_offerings",
    "AMI_TERMS",
    "CONNECTION_TRACKING",
    "CONTEXT",
    "CPU_OPTIONS",
    "IP_PREFIX_COUNT",
    "LATEST",
    "LAUNCHED_FAMILIES",
    "NETWORK_INTERFACES",
    "NETWORK_TERMS",
    "NOT_CARRIED",
    "PINNED_FAMILIES",
    "PLACEMENT_GROUP",
    "PUBLIC_IP",
    "LaunchSettingsError",
    "alias_version",
    "ami_terms",
    "launch_settings",
    "selectors",
]


def offline_placement_offerings(spec: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """What a class's placement group adds to its types' topology domains when no cloud is asked (`check
    --workloads`, `plan`): the partitions `1` … :data:`MAX_PARTITIONS` of `karpenter.k8s.aws/placement-group-partition`
    when the class has a `placementGroupSelector`, since the group's strategy and partition count are EC2's to say
    (the controller asks: `AwsCloudProvider.placement_requirements`); nothing without one. Its id is not known
    offline, so `placement-group-id` is no domain here."""
    if spec is None or not isinstance(spec.get(PLACEMENT_GROUP), Mapping) or not spec[PLACEMENT_GROUP]:
        return {}
    return {wk.PLACEMENT_GROUP_PARTITION: tuple(str(i) for i in range(1, MAX_PARTITIONS + 1))}
