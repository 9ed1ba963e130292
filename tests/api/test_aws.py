"""Karpenter's AWS provider rules (v0.31): AWSNodeTemplate specs and a Provisioner's inline `provider`.

Table-driven like test_provisionerrules.py: a realistic valid AWSNodeTemplate, one small change per case, and the
exact violations expected (rule, path, severity, at_key, message fragment) or none.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from karpenter_policy.api.aws import validate_node_template
from karpenter_policy.api.provisionerrules import validate_provisioner
from karpenter_policy.api.violations import (
    AWS_ID_SHAPE,
    DEPRECATED_PROVIDER,
    INVALID_SPEC,
    INVALID_USER_DATA,
    WARNING,
    Path,
)

from .support import DELETE, Case, Expect, apply, assert_violations, ids

BASE: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1alpha1",
    "kind": "AWSNodeTemplate",
    "metadata": {"name": "default"},
    "spec": {
        "subnetSelector": {"karpenter.sh/discovery": "prod"},
        "securityGroupSelector": {"karpenter.sh/discovery": "prod"},
        "amiFamily": "AL2",
        "instanceProfile": "KarpenterNodeInstanceProfile-prod",
        "tags": {"team": "payments", "cost-center": "1234", "karpenter.sh/discovery": "prod"},
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 2,
            "httpTokens": "required",
        },
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True},
            }
        ],
        "userData": "#!/bin/bash\necho 'vm.max_map_count=262144' >> /etc/sysctl.conf\n",
        "detailedMonitoring": True,
    },
}

#: A launch-template based node template: nothing the launch template decides may appear beside it.
LAUNCH_TEMPLATE_BASE: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1alpha1",
    "kind": "AWSNodeTemplate",
    "metadata": {"name": "from-launch-template"},
    "spec": {"subnetSelector": {"karpenter.sh/discovery": "prod"}, "launchTemplate": "prod-nodes", "tags": {"a": "b"}},
}


SPEC: Path = ("spec",)
SUBNETS: Path = ("spec", "subnetSelector")
GROUPS: Path = ("spec", "securityGroupSelector")
AMIS: Path = ("spec", "amiSelector")
TAGS: Path = ("spec", "tags")
METADATA: Path = ("spec", "metadataOptions")
BDM: Path = ("spec", "blockDeviceMappings", 0)
EBS: Path = (*BDM, "ebs")

GOOD_SUBNET_IDS = "subnet-0123456789abcdef0,subnet-0fedcba9876543210"


def run(case: Case, base: Mapping[str, Any] = BASE) -> None:
    assert_violations(validate_node_template(apply(base, case.changes)), case.expected)


def test_base_node_template_is_valid() -> None:
    assert validate_node_template(BASE) == []


def test_launch_template_base_is_valid_without_security_groups() -> None:
    assert validate_node_template(LAUNCH_TEMPLATE_BASE) == []


# --- launchTemplate excludes what it decides ----------------------------------------------------------------

EXCLUDED_BY_LAUNCH_TEMPLATE = {
    "securityGroupSelector": {"karpenter.sh/discovery": "prod"},
    "amiFamily": "Bottlerocket",
    "instanceProfile": "KarpenterNodeInstanceProfile-prod",
    "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}],
    "userData": "#!/bin/bash\n",
    "amiSelector": {"Name": "my-ami-*"},
    "metadataOptions": {"httpTokens": "required"},
}


@pytest.mark.parametrize(("name", "value"), list(EXCLUDED_BY_LAUNCH_TEMPLATE.items()))
def test_field_next_to_launch_template_is_rejected_at_its_key(name: str, value: Any) -> None:
    case = Case(
        name, {("spec", name): value},
        (Expect(INVALID_SPEC, ("spec", name), f"{name} and launchTemplate are mutually exclusive", at_key=True),),
    )
    run(case, LAUNCH_TEMPLATE_BASE)


def test_launch_template_conflict_points_back_at_launch_template() -> None:
    [violation] = validate_node_template(apply(LAUNCH_TEMPLATE_BASE, {("spec", "amiFamily"): "AL2"}))
    assert violation.related == (("spec", "launchTemplate"),)


def test_every_field_next_to_launch_template_is_reported() -> None:
    doc = apply(LAUNCH_TEMPLATE_BASE, {("spec", name): value for name, value in EXCLUDED_BY_LAUNCH_TEMPLATE.items()})
    paths = sorted(v.path for v in validate_node_template(doc) if "launchTemplate" in v.message)
    assert paths == sorted(("spec", name) for name in EXCLUDED_BY_LAUNCH_TEMPLATE)


# --- selectors ----------------------------------------------------------------------------------------------

SELECTOR_CASES = [
    Case("tag-selector-any-value-wildcard", {SUBNETS: {"Name": "*private*"}}),
    Case("several-tags", {SUBNETS: {"karpenter.sh/discovery": "prod", "tier": "private"}}),
    Case(
        "subnet-selector-missing", {SUBNETS: DELETE},
        (Expect(INVALID_SPEC, SPEC, "subnetSelector is required"),),
    ),
    Case(
        "subnet-selector-empty", {SUBNETS: {}},
        (Expect(INVALID_SPEC, SUBNETS, "subnetSelector must not be empty"),),
    ),
    Case(
        "subnet-selector-empty-key", {(*SUBNETS, ""): "prod"},
        (Expect(INVALID_SPEC, (*SUBNETS, ""), "keys and values must be non-empty", at_key=True),),
    ),
    Case(
        "subnet-selector-empty-value", {(*SUBNETS, "karpenter.sh/discovery"): ""},
        (Expect(INVALID_SPEC, (*SUBNETS, "karpenter.sh/discovery"), "keys and values must be non-empty"),),
    ),
    Case(
        "security-group-selector-missing", {GROUPS: DELETE},
        (Expect(INVALID_SPEC, SPEC, "securityGroupSelector is required (or use launchTemplate)"),),
    ),
    Case(
        "security-group-selector-empty", {GROUPS: {}},
        (Expect(INVALID_SPEC, GROUPS, "securityGroupSelector must not be empty"),),
    ),
    Case(
        "security-group-selector-empty-value", {GROUPS: {"Name": ""}},
        (Expect(INVALID_SPEC, (*GROUPS, "Name"), "keys and values must be non-empty"),),
    ),
    Case(
        "ami-selector-empty-key", {AMIS: {"": "x"}},
        (Expect(INVALID_SPEC, (*AMIS, ""), "keys and values must be non-empty", at_key=True),),
    ),
]


@pytest.mark.parametrize("case", SELECTOR_CASES, ids=ids(SELECTOR_CASES))
def test_selector_rules(case: Case) -> None:
    run(case)


def test_security_groups_are_not_required_with_a_launch_template() -> None:
    assert "securityGroupSelector" not in LAUNCH_TEMPLATE_BASE["spec"]
    assert validate_node_template(LAUNCH_TEMPLATE_BASE) == []


AWS_IDS_CASES = [
    Case("subnet-ids", {SUBNETS: {"aws-ids": GOOD_SUBNET_IDS}}),
    Case("subnet-ids-with-spaces", {SUBNETS: {"aws-ids": "subnet-0123456789abcdef0, subnet-0fedcba9876543210"}}),
    Case("subnet-short-id", {SUBNETS: {"aws-ids": "subnet-0a1b2c3d"}}),
    Case(
        "subnet-name-containing-an-id-shape", {SUBNETS: {"aws-ids": "my-subnet-a"}},
        (Expect(AWS_ID_SHAPE, (*SUBNETS, "aws-ids"), "'my-subnet-a' does not have EC2's shape", WARNING),),
    ),
    Case("subnet-ids-double-colon-key", {SUBNETS: {"aws::ids": GOOD_SUBNET_IDS}}),
    Case("security-group-ids", {GROUPS: {"aws-ids": "sg-0123456789abcdef0,sg-0fedcba9876543210"}}),
    Case("ami-ids", {AMIS: {"aws-ids": "ami-0123456789abcdef0"}}),
    Case(
        "subnet-id-not-hex", {SUBNETS: {"aws-ids": "subnet-0123456789abcdefg"}},
        # Karpenter's webhook admits it (`subnet-[0-9a-z]+` somewhere in it): a warning of its own rule
        (Expect(AWS_ID_SHAPE, (*SUBNETS, "aws-ids"), "'subnet-0123456789abcdefg' does not have EC2's shape", WARNING),),
    ),
    Case(
        "subnet-name-instead-of-id", {SUBNETS: {"aws-ids": "subnet-0123456789abcdef0,private-a"}},
        (Expect(INVALID_SPEC, (*SUBNETS, "aws-ids"), "'private-a' is not an id"),),
    ),
    Case(
        "security-group-id-in-subnet-selector", {SUBNETS: {"aws-ids": "sg-0123456789abcdef0"}},
        (Expect(INVALID_SPEC, (*SUBNETS, "aws-ids"), "'sg-0123456789abcdef0' is not an id: Karpenter requires"),),
    ),
    Case(
        "subnet-id-in-security-group-selector", {GROUPS: {"aws-ids": "subnet-0123456789abcdef0"}},
        (Expect(INVALID_SPEC, (*GROUPS, "aws-ids"), "is not an id: Karpenter requires sg- and letters or digits"),),
    ),
    Case(
        "ami-id-uppercase", {AMIS: {"aws-ids": "ami-0123456789ABCDEF0"}},
        (Expect(AWS_ID_SHAPE, (*AMIS, "aws-ids"), "does not have EC2's shape (ami- and 8 or 17", WARNING),),
    ),
    Case(
        "ids-combined-with-a-tag", {SUBNETS: {"aws-ids": GOOD_SUBNET_IDS, "karpenter.sh/discovery": "prod"}},
        (Expect(INVALID_SPEC, (*SUBNETS, "aws-ids"), "cannot be combined with other filters", at_key=True),),
    ),
]


@pytest.mark.parametrize("case", AWS_IDS_CASES, ids=ids(AWS_IDS_CASES))
def test_aws_ids_rules(case: Case) -> None:
    run(case)


# --- tags ---------------------------------------------------------------------------------------------------

RESTRICTED_TAGS = [
    "kubernetes.io/cluster/prod",
    "kubernetes.io/cluster/Prod_cluster-1",
    "karpenter.sh/provisioner-name",
    "karpenter.sh/managed-by",
]
ALLOWED_TAGS = [
    "Name",
    "kubernetes.io/cluster",
    "kubernetes.io/cluster/",
    "karpenter.sh/discovery",
    "karpenter.sh/managed-by-team",
    "team/karpenter.sh/provisioner-name",
    "kubernetes.io/role",
]


@pytest.mark.parametrize("tag", RESTRICTED_TAGS)
def test_restricted_tag_is_rejected_at_its_key(tag: str) -> None:
    run(Case(tag, {(*TAGS, tag): "x"}, (Expect(INVALID_SPEC, (*TAGS, tag), f"tag {tag} is restricted", at_key=True),)))


@pytest.mark.parametrize("tag", ALLOWED_TAGS)
def test_other_tags_are_allowed(tag: str) -> None:
    run(Case(tag, {(*TAGS, tag): "x"}))


def test_empty_tag_key_is_rejected() -> None:
    run(Case("empty-tag-key", {(*TAGS, ""): "x"}, (Expect(INVALID_SPEC, TAGS, "empty tag keys are not supported"),)))


# --- metadataOptions ----------------------------------------------------------------------------------------

METADATA_CASES = [
    *(
        Case(f"{name}-{value}", {(*METADATA, name): value})
        for name, values in {
            "httpEndpoint": ("enabled", "disabled"),
            "httpProtocolIPv6": ("enabled", "disabled"),
            "httpTokens": ("required", "optional"),
        }.items()
        for value in values
    ),
    Case("hop-limit-1", {(*METADATA, "httpPutResponseHopLimit"): 1}),
    Case("hop-limit-64", {(*METADATA, "httpPutResponseHopLimit"): 64}),
    Case("only-one-option", {METADATA: {"httpTokens": "optional"}}),
    Case(
        "hop-limit-0", {(*METADATA, "httpPutResponseHopLimit"): 0},
        (Expect(INVALID_SPEC, (*METADATA, "httpPutResponseHopLimit"), "0 is out of range: it must be between 1 and"),),
    ),
    Case(
        "hop-limit-65", {(*METADATA, "httpPutResponseHopLimit"): 65},
        (Expect(INVALID_SPEC, (*METADATA, "httpPutResponseHopLimit"), "65 is out of range"),),
    ),
    Case(
        "http-endpoint-capitalised", {(*METADATA, "httpEndpoint"): "Enabled"},
        (Expect(INVALID_SPEC, (*METADATA, "httpEndpoint"), "'Enabled' is not one of enabled, disabled"),),
    ),
    Case(
        "http-protocol-ipv6-on", {(*METADATA, "httpProtocolIPv6"): "on"},
        (Expect(INVALID_SPEC, (*METADATA, "httpProtocolIPv6"), "'on' is not one of enabled, disabled"),),
    ),
    Case(
        "http-tokens-yes", {(*METADATA, "httpTokens"): "yes"},
        (Expect(INVALID_SPEC, (*METADATA, "httpTokens"), "'yes' is not one of required, optional"),),
    ),
]


@pytest.mark.parametrize("case", METADATA_CASES, ids=ids(METADATA_CASES))
def test_metadata_options_rules(case: Case) -> None:
    run(case)


# --- amiFamily ----------------------------------------------------------------------------------------------

AMI_FAMILY_CASES = [
    *(Case(family, {("spec", "amiFamily"): family}) for family in ("AL2", "Ubuntu", "Windows2019", "Windows2022")),
    Case("Bottlerocket", {("spec", "amiFamily"): "Bottlerocket", ("spec", "userData"): "[settings.kubernetes]\n"}),
    Case(
        "bottlerocket-with-a-shell-script", {("spec", "amiFamily"): "Bottlerocket"},  # BASE's userData: not TOML
        (Expect(INVALID_USER_DATA, ("spec", "userData"), "userData (Bottlerocket: TOML) line 2: not valid TOML"),),
    ),
    Case("no-family", {("spec", "amiFamily"): DELETE}),
    Case("custom-with-ami-selector", {("spec", "amiFamily"): "Custom", AMIS: {"Name": "my-golden-ami-*"}}),
    Case("ami-selector-without-family", {AMIS: {"aws-ids": "ami-0123456789abcdef0"}}),
    Case(
        "lowercase-al2", {("spec", "amiFamily"): "al2"},
        (Expect(INVALID_SPEC, ("spec", "amiFamily"), "amiFamily 'al2' is not one of AL2, Bottlerocket"),),
    ),
    Case(
        "windows-without-version", {("spec", "amiFamily"): "Windows"},
        (Expect(INVALID_SPEC, ("spec", "amiFamily"), "'Windows' is not one of"),),
    ),
    Case(
        "custom-without-ami-selector", {("spec", "amiFamily"): "Custom"},
        (Expect(INVALID_SPEC, ("spec", "amiFamily"), "amiFamily Custom needs amiSelector"),),
    ),
]


@pytest.mark.parametrize("case", AMI_FAMILY_CASES, ids=ids(AMI_FAMILY_CASES))
def test_ami_family_rules(case: Case) -> None:
    run(case)


# --- blockDeviceMappings ------------------------------------------------------------------------------------

BLOCK_DEVICE_CASES = [
    *(
        Case(f"volume-type-{t}", {(*EBS, "volumeType"): t})
        for t in ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
    ),
    *(Case(f"volume-size-{size}", {(*EBS, "volumeSize"): size}) for size in ("1Gi", "1G", "64T", "20Gi", "16Ti")),
    Case("snapshot-without-size", {EBS: {"snapshotID": "snap-0123456789abcdef0", "volumeType": "gp3"}}),
    Case("snapshot-with-size", {(*EBS, "snapshotID"): "snap-0123456789abcdef0"}),
    Case(
        "second-mapping",
        {("spec", "blockDeviceMappings", 1): {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "200Gi"}}},
    ),
    Case(
        "device-name-missing", {(*BDM, "deviceName"): DELETE},
        (Expect(INVALID_SPEC, BDM, "deviceName is required"),),
    ),
    Case("ebs-missing", {EBS: DELETE}, (Expect(INVALID_SPEC, BDM, "ebs is required"),)),
    Case(
        "volume-type-gp4", {(*EBS, "volumeType"): "gp4"},
        (Expect(INVALID_SPEC, (*EBS, "volumeType"), "volumeType 'gp4' is not one of standard, io1"),),
    ),
    Case(
        "volume-type-uppercase", {(*EBS, "volumeType"): "GP3"},
        (Expect(INVALID_SPEC, (*EBS, "volumeType"), "'GP3' is not one of"),),
    ),
    *(
        Case(
            f"volume-size-{size}", {(*EBS, "volumeSize"): size},
            (Expect(INVALID_SPEC, (*EBS, "volumeSize"), f"volumeSize {size} is out of range: it must be between 1G"),),
        )
        # 64Ti is 70.4e12 bytes: more than 64T (64e12); 0.5Gi and 999M are less than 1G
        for size in ("0.5Gi", "999M", "64Ti", "65Ti", "65T")
    ),
    Case(
        "no-size-no-snapshot", {EBS: {"volumeType": "gp3", "encrypted": True}},
        (Expect(INVALID_SPEC, EBS, "volumeSize is required unless snapshotID is given"),),
    ),
    Case(
        "second-mapping-is-checked-at-its-own-index",
        {("spec", "blockDeviceMappings", 1): {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Ti"}}},
        (Expect(INVALID_SPEC, ("spec", "blockDeviceMappings", 1, "ebs", "volumeSize"), "out of range"),),
    ),
]


@pytest.mark.parametrize("case", BLOCK_DEVICE_CASES, ids=ids(BLOCK_DEVICE_CASES))
def test_block_device_mapping_rules(case: Case) -> None:
    run(case)


# --- the same rules on a Provisioner's inline provider ------------------------------------------------------

PROVISIONER: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "inline"},
    "spec": {
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
        "provider": {
            "subnetSelector": {"karpenter.sh/discovery": "prod"},
            "securityGroupSelector": {"karpenter.sh/discovery": "prod"},
            "amiFamily": "Bottlerocket",
            "tags": {"team": "payments"},
        },
    },
}
PROVIDER: Path = ("spec", "provider")

INLINE_CASES = [
    Case("valid", {}),
    Case("launch-template-without-security-groups", {PROVIDER: {"subnetSelector": {"a": "b"}, "launchTemplate": "lt"}}),
    Case(
        # an inline provider has no amiSelector: Custom always needs an AWSNodeTemplate
        "custom-ami-family", {(*PROVIDER, "amiFamily"): "Custom"},
        (Expect(INVALID_SPEC, (*PROVIDER, "amiFamily"), "amiFamily Custom needs an AWSNodeTemplate with amiSelector"),),
    ),
    Case(
        "subnet-selector-missing", {(*PROVIDER, "subnetSelector"): DELETE},
        (Expect(INVALID_SPEC, PROVIDER, "subnetSelector is required"),),
    ),
    Case(
        "launch-template-and-ami-family",
        {(*PROVIDER, "launchTemplate"): "lt", (*PROVIDER, "securityGroupSelector"): DELETE},
        (Expect(INVALID_SPEC, (*PROVIDER, "amiFamily"), "mutually exclusive", at_key=True),),
    ),
    Case(
        "restricted-tag", {(*PROVIDER, "tags", "karpenter.sh/managed-by"): "me"},
        (Expect(INVALID_SPEC, (*PROVIDER, "tags", "karpenter.sh/managed-by"), "is restricted", at_key=True),),
    ),
    Case(
        "hop-limit", {(*PROVIDER, "metadataOptions"): {"httpPutResponseHopLimit": 65}},
        (Expect(INVALID_SPEC, (*PROVIDER, "metadataOptions", "httpPutResponseHopLimit"), "out of range"),),
    ),
    Case(
        "block-device-size",
        {(*PROVIDER, "blockDeviceMappings"): [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "0.5Gi"}}]},
        (Expect(INVALID_SPEC, (*PROVIDER, "blockDeviceMappings", 0, "ebs", "volumeSize"), "out of range"),),
    ),
]


@pytest.mark.parametrize("case", INLINE_CASES, ids=ids(INLINE_CASES))
def test_inline_provider_rules(case: Case) -> None:
    # every inline provider is also the deprecation warning (docs/rules/deprecated-provider.md), whatever else
    deprecated = Expect(DEPRECATED_PROVIDER, PROVIDER, "spec.provider is deprecated", WARNING, at_key=True)
    assert_violations(validate_provisioner(apply(PROVISIONER, case.changes)), (*case.expected, deprecated))


def test_validation_does_not_modify_the_document() -> None:
    doc = apply(BASE, {SUBNETS: {}, ("spec", "amiFamily"): "Custom"})
    before = copy.deepcopy(doc)
    validate_node_template(doc)
    assert doc == before
