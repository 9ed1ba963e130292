"""The simulated AWS account: what the constraint sets' node templates select, created in moto's EC2.

For every node template (a set's AWSNodeTemplate or inline `provider`):

* its subnets, for each filter set the controller asks EC2 (`cloud.networkselection.filter_sets`: an
  AWSNodeTemplate's `subnetSelector`, an EC2NodeClass's `subnetSelectorTerms`): one subnet per availability zone of
  the region, tagged to match (a `tag-key` filter gets the tag with the value `simulated`; a list of values, its
  first). All subnets are /22s of one VPC, 10.0.0.0/16;
* its security groups, for each such filter set: one security group in that VPC, tagged to match (one per name of
  a `group-name` filter, named so);
* `amiSelector` with tags: the two images the account uses (an x86-64 and an Arm64 image of moto's) get the
  tags (a value split at commas: its first); the default-AMI SSM parameters name those same images (see `server`);
  an EC2NodeClass's `amiSelectorTerms` (`api.v1.launchsettings.ami_terms`): a tags term so (a value literal), an
  `ssmParameter` term's parameter put in moto's SSM naming the x86-64 image (a public `/aws/service/` one is the
  server's);
* `launchTemplate`: a launch template of that name, on the x86-64 image;
* `instanceProfile` (and the controller's default one): an IAM instance profile of that name;
* an EC2NodeClass's `placementGroupSelector` by name: a placement group of that name (CreatePlacementGroup, served by
  the stand-in `placementgroups` in front of moto) as `simulate --placement-group` declares it (`declaredgroups`:
  partition with its partition count, cluster or spread); one not declared a `partition` group of 7 partitions,
  EC2's most per zone (the class does not say the strategy; a partition group shows the most: its nodes'
  partitions).

Selectors by id (`aws-ids`, a placement group's `id`), AMI names and owners cannot be reproduced (moto makes its own
ids): they are reported as notes, and launches from such a template fail as they would against an account without
them.
The calls go through the AWS provider's own API wrapper, to the loopback server only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.constraintset import ConstraintSet, canonical_json
from karpenter_policy.api.v1.launchsettings import (
    PLACEMENT_GROUP,
    LaunchSettingsError,
    ami_terms,
    selectors,
)
from karpenter_policy.cloud.amiselection import ID_KEYS
from karpenter_policy.cloud.aws.amis import NAME_KEY, OWNERS_KEY
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.networkselection import GROUP_ID, SUBNET_ID, filter_sets
from karpenter_policy.model.instancetypes import EC2_TO_KUBE_ARCHITECTURES
from karpenter_policy.simulate.declaredgroups import DEFAULT, PARTITION, DeclaredGroup
from karpenter_policy.simulate.server import PUBLIC_PARAMETERS

VPC_CIDR = "10.0.0.0/16"
SUBNET_PREFIX = 22
MATCH_ANY_VALUE = "simulated"
NAME_TAG = "Name"


@dataclass(slots=True)
class Account:
    """What was created: subnets by (selector, zone), security groups by selector, the images by architecture,
    launch templates by name, instance profiles, and notes about what could not be reproduced."""

    vpc: str = ""
    zones: tuple[str, ...] = ()
    subnets: dict[tuple[str, str], str] = field(default_factory=dict)
    security_groups: dict[str, str] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    launch_templates: dict[str, str] = field(default_factory=dict)
    instance_profiles: set[str] = field(default_factory=set)
    placement_groups: dict[str, str] = field(default_factory=dict)  # name → id
    notes: list[str] = field(default_factory=list)


def matching_tags(selector: Mapping[str, Any]) -> dict[str, str] | None:
    """Tags that make a resource match `selector` (None: it selects by id, which cannot be reproduced)."""
    if any(key in ID_KEYS for key in selector):
        return None
    tags = {}
    for key, value in sorted(selector.items()):
        values = [part.strip() for part in str(value).split(",") if part.strip()]
        tags[str(key)] = MATCH_ANY_VALUE if str(value) == "*" or not values else values[0]
    return tags


def _filter_tags(filters: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """Tags that make a resource match a filter set's tag filters (None: it selects by id, which cannot be
    reproduced)."""
    tags = {}
    for f in filters:
        name, values = str(f["Name"]), [str(v) for v in f["Values"]]
        if name in (SUBNET_ID, GROUP_ID):
            return None
        if name == "tag-key":
            tags.update(dict.fromkeys(values, MATCH_ANY_VALUE))
        elif name.startswith("tag:"):
            tags[name[4:]] = values[0] if values else MATCH_ANY_VALUE
    return dict(sorted(tags.items()))


def _tag_specification(resource: str, tags: Mapping[str, str], name: str) -> list[dict[str, Any]]:
    listed = [{"Key": NAME_TAG, "Value": name}] if NAME_TAG not in tags else []
    listed += [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    return [{"ResourceType": resource, "Tags": listed}]


def node_template_specs(sets: Iterable[ConstraintSet]) -> list[tuple[str, Mapping[str, Any]]]:
    """(pool, node template spec as the launcher reads it) of every set that has one, by pool key (a NodePool's
    EC2NodeClass that the launcher cannot carry out is left out: the controller leaves its set out too)."""
    found = []
    for constraint_set in sorted(sets, key=lambda s: s.pool):
        try:
            spec = constraint_set.launch_spec
        except LaunchSettingsError:
            continue
        if spec is not None:
            found.append((constraint_set.pool, spec))
    return found


class AccountBuilder:
    """Creates the account's resources (see the module docstring) with `api` (the loopback server's)."""

    def __init__(
        self, api: AwsApi, default_instance_profile: str | None = None,
        placement_groups: Mapping[str, DeclaredGroup] | None = None,
    ) -> None:
        self.api = api
        self.account = Account()
        self.default_instance_profile = default_instance_profile
        self.placement_groups = dict(placement_groups or {})
        self._blocks = iter(ipaddress.ip_network(VPC_CIDR).subnets(new_prefix=SUBNET_PREFIX))

    def build(self, sets: Sequence[ConstraintSet]) -> Account:
        """The VPC and the images (once), then what the node templates of `sets` select (see :meth:`add`)."""
        account = self.account
        if not account.vpc:
            zones = self.api.call("ec2", "describe_availability_zones")["AvailabilityZones"]
            available = (str(z["ZoneName"]) for z in zones if z.get("State", "available") == "available")
            account.zones = tuple(sorted(available))
            account.vpc = self.api.call("ec2", "create_vpc", CidrBlock=VPC_CIDR)["Vpc"]["VpcId"]
            account.images = self._images()
            self._instance_profile(self.default_instance_profile)
        return self.add(sets)

    def add(self, sets: Sequence[ConstraintSet]) -> Account:
        """What the node templates of `sets` select, beside what is already there (a selector seen before reuses
        its resources): a policy that changes mid-scenario finds its subnets and security groups."""
        account = self.account
        for provisioner, spec in node_template_specs(sets):
            for filters in filter_sets(spec, SUBNET_ID):
                self._subnets(provisioner, filters)
            for filters in filter_sets(spec, GROUP_ID):
                self._security_groups(provisioner, filters)
            for selector in selectors(spec, "amiSelector"):
                self._ami_tags(provisioner, selector)
            for term in ami_terms(spec):
                self._ami_term(provisioner, term)
            self._launch_template(spec.get("launchTemplate"))
            self._instance_profile(spec.get("instanceProfile"))
            self._placement_group(provisioner, spec.get(PLACEMENT_GROUP))
        if not node_template_specs(sets):
            account.notes.append("no constraint set names a node template: nothing can be launched")
        return account

    def _placement_group(self, provisioner: str, selector: object) -> None:
        """The placement group an EC2NodeClass's `placementGroupSelector` names (by name; an id is a note)."""
        if not isinstance(selector, Mapping) or not selector:
            return
        name = selector.get("name")
        if not isinstance(name, str) or not name:
            self.account.notes.append(
                f"{provisioner}: placementGroupSelector selects by id: the simulated account's groups have their own")
            return
        if name in self.account.placement_groups:
            return
        group = self.placement_groups.get(name, DEFAULT)
        asked: dict[str, Any] = {"GroupName": name, "Strategy": group.strategy}
        if group.strategy == PARTITION:
            asked["PartitionCount"] = group.partition_count
        made = self.api.call("ec2", "create_placement_group", **asked)
        self.account.placement_groups[name] = str((made.get("PlacementGroup") or {}).get("GroupId") or "")

    def _instance_profile(self, name: object) -> None:
        """The IAM instance profile of that name (the node templates' `instanceProfile`, the default one)."""
        if not isinstance(name, str) or not name or name in self.account.instance_profiles:
            return
        self.api.call("iam", "create_instance_profile", InstanceProfileName=name)
        self.account.instance_profiles.add(name)

    def _images(self) -> dict[str, str]:
        """An image of moto's per architecture (the first by id: reproducible)."""
        filters = [{"Name": "architecture", "Values": sorted(EC2_TO_KUBE_ARCHITECTURES)}]
        images = self.api.call("ec2", "describe_images", Owners=["amazon"], Filters=filters)["Images"]
        chosen: dict[str, str] = {}
        for image in sorted(images, key=lambda i: str(i["ImageId"])):
            arch = EC2_TO_KUBE_ARCHITECTURES.get(str(image.get("Architecture", "")))
            if arch and arch not in chosen:
                chosen[arch] = str(image["ImageId"])
        return chosen

    def _subnets(self, provisioner: str, filters: Sequence[Mapping[str, Any]]) -> None:
        if not filters:
            return
        tags = _filter_tags(filters)
        if tags is None:
            self.account.notes.append(f"{provisioner}: its subnets are selected by id: no subnet can match them")
            return
        key = canonical_json([dict(f) for f in filters])
        for zone in self.account.zones:
            if (key, zone) in self.account.subnets:
                continue
            block = next(self._blocks, None)
            if block is None:
                self.account.notes.append(f"{provisioner}: no room left in {VPC_CIDR} for a subnet in {zone}")
                return
            subnet = self.api.call(
                "ec2",
                "create_subnet",
                VpcId=self.account.vpc,
                CidrBlock=str(block),
                AvailabilityZone=zone,
                TagSpecifications=_tag_specification("subnet", tags, f"simulated-{zone}"),
            )
            self.account.subnets[(key, zone)] = str(subnet["Subnet"]["SubnetId"])

    def _security_groups(self, provisioner: str, filters: Sequence[Mapping[str, Any]]) -> None:
        if not filters:
            return
        names: list[str | None] = [str(v) for f in filters if f["Name"] == "group-name" for v in f["Values"]]
        tags = _filter_tags(filters)
        if tags is None:
            self.account.notes.append(f"{provisioner}: its security groups are selected by id: no group can match")
            return
        key = canonical_json([dict(f) for f in filters])
        for named in names or [None]:
            at = f"{key}/{named}" if named else key
            if at in self.account.security_groups:
                continue
            name = named or f"simulated-nodes-{len(self.account.security_groups) + 1}"
            group = self.api.call(
                "ec2",
                "create_security_group",
                GroupName=name,
                Description="nodes of the simulation",
                VpcId=self.account.vpc,
                TagSpecifications=_tag_specification("security-group", tags, name),
            )
            self.account.security_groups[at] = str(group["GroupId"])

    def _ami_tags(self, provisioner: str, selector: Mapping[str, Any] | None) -> None:
        if not selector:
            return
        tags = matching_tags({k: v for k, v in selector.items() if k not in (NAME_KEY, OWNERS_KEY)})
        if tags is None or NAME_KEY in selector or OWNERS_KEY in selector:
            self.account.notes.append(
                f"{provisioner}: amiSelector selects by id, name or owner: moto's images do not match it"
            )
            return
        if tags and self.account.images:
            resources = sorted(self.account.images.values())
            pairs = [{"Key": k, "Value": v} for k, v in tags.items()]
            self.api.call("ec2", "create_tags", Resources=resources, Tags=pairs)

    def _ami_term(self, provisioner: str, term: Mapping[str, Any]) -> None:
        """What makes an `amiSelectorTerms` entry select the account's images (an alias: the server's parameters)."""
        tags, parameter = term.get("tags"), str(term.get("ssmParameter") or "")
        if parameter and not parameter.startswith(PUBLIC_PARAMETERS) and "amd64" in self.account.images:
            self.api.call("ssm", "put_parameter", Name=parameter, Value=self.account.images["amd64"], Type="String",
                          Overwrite=True)
        elif term.get("id") or term.get("name") or term.get("owner"):
            self.account.notes.append(
                f"{provisioner}: amiSelectorTerms selects by id, name or owner: moto's images do not match it")
        elif isinstance(tags, Mapping) and tags and self.account.images:
            pairs = [{"Key": str(k), "Value": MATCH_ANY_VALUE if v == "*" else str(v)} for k, v in sorted(tags.items())]
            self.api.call("ec2", "create_tags", Resources=sorted(self.account.images.values()), Tags=pairs)

    def _launch_template(self, name: Any) -> None:
        if not name or str(name) in self.account.launch_templates:
            return
        data: dict[str, Any] = {}
        if "amd64" in self.account.images:
            data["ImageId"] = self.account.images["amd64"]
        created = self.api.call("ec2", "create_launch_template", LaunchTemplateName=str(name), LaunchTemplateData=data)
        self.account.launch_templates[str(name)] = str(created["LaunchTemplate"]["LaunchTemplateId"])


__all__ = ["Account", "AccountBuilder", "matching_tags", "node_template_specs"]
