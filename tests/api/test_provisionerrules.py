"""Karpenter's core Provisioner rules (v0.31's webhook validation), one table row per behaviour.

Every case starts from a realistic, valid Provisioner, applies a small change and expects either no
violations at all or exactly the listed ones: rule, path (it becomes the file:line of the finding), severity,
whether the mapping key itself is at fault, and a fragment of the message the user reads.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpenter_policy.api.provisionerrules import validate_provisioner
from karpenter_policy.api.violations import (
    DEPRECATED_LABEL,
    DEPRECATED_PROVIDER,
    DURATION_OVERFLOW,
    INVALID_REQUIREMENT,
    INVALID_SPEC,
    RESTRICTED_LABEL,
    TTL_CHURN,
    WARNING,
    Path,
)

from .support import DELETE, Case, Expect, apply, assert_violations, ids

BASE: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "default", "labels": {"app.kubernetes.io/managed-by": "argocd"}},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
        ],
        "labels": {"team": "payments", "example.com/tier": "backend"},
        "annotations": {"example.com/owner": "payments@example.com"},
        "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}],
        "limits": {"resources": {"cpu": "1000", "memory": "1000Gi"}},
        "kubeletConfiguration": {
            "maxPods": 110,
            "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
            "kubeReserved": {"cpu": "200m", "memory": "100Mi", "ephemeral-storage": "3Gi", "pid": "1000"},
            "evictionHard": {"memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "10%"},
            "evictionSoft": {"memory.available": "500Mi", "nodefs.available": "15%"},
            "evictionSoftGracePeriod": {"memory.available": "1m", "nodefs.available": "1m30s"},
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
        },
        "consolidation": {"enabled": True},
        "ttlSecondsUntilExpired": 2592000,
        "weight": 10,
        "providerRef": {"name": "default"},
    },
}

#: The value that removes a field instead of setting it.

REQ = ("spec", "requirements")
NEW_REQ: Path = (*REQ, 4)  # the index a requirement appended to BASE gets
LABELS = ("spec", "labels")
TAINTS = ("spec", "taints")
STARTUP = ("spec", "startupTaints")
KUBELET = ("spec", "kubeletConfiguration")


def add_requirement(key: str, operator: str, values: list[str] | None = None) -> dict[Path, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        requirement["values"] = values
    return {NEW_REQ: requirement}


def set_labels(labels: dict[str, str]) -> dict[Path, Any]:
    return {LABELS: labels}


def set_kubelet(**fields: Any) -> dict[Path, Any]:
    return {(*KUBELET, name): value for name, value in fields.items()}


def run(case: Case) -> None:
    assert_violations(validate_provisioner(apply(BASE, case.changes)), case.expected)


def test_base_provisioner_is_valid() -> None:
    assert validate_provisioner(BASE) == []


# --- requirements: operators and values -------------------------------------------------------------------

REQUIREMENT_CASES = [
    # positive
    Case("in-one-value", add_requirement("karpenter.k8s.aws/instance-family", "In", ["c5"])),
    Case("notin-values", add_requirement("topology.kubernetes.io/zone", "NotIn", ["us-east-1e"])),
    Case("notin-no-values", add_requirement("topology.kubernetes.io/zone", "NotIn", [])),
    Case("exists-no-values", add_requirement("example.com/pool", "Exists")),
    Case("does-not-exist-no-values", add_requirement("karpenter.k8s.aws/instance-gpu-count", "DoesNotExist")),
    Case("gt-3", add_requirement("karpenter.k8s.aws/instance-cpu", "Gt", ["3"])),
    Case("lt-0", add_requirement("karpenter.k8s.aws/instance-cpu", "Lt", ["0"])),
    Case("lt-large", add_requirement("karpenter.k8s.aws/instance-memory", "Lt", ["262145"])),
    Case("custom-key", add_requirement("example.com/team", "In", ["payments", "billing"])),
    # negative: In needs at least one value
    Case(
        "in-empty-values", {(*REQ, 0, "values"): []},
        (Expect(INVALID_REQUIREMENT, (*REQ, 0), "operator In must have at least one value"),),
    ),
    Case(
        "in-values-absent", {(*REQ, 0, "values"): DELETE},
        (Expect(INVALID_REQUIREMENT, (*REQ, 0), "operator In must have at least one value"),),
    ),
    # negative: Gt/Lt need exactly one integer >= 0
    Case(
        "gt-no-values", add_requirement("karpenter.k8s.aws/instance-cpu", "Gt"),
        (Expect(INVALID_REQUIREMENT, NEW_REQ, "must have a single integer value ≥ 0"),),
    ),
    Case(
        "gt-empty-values", add_requirement("karpenter.k8s.aws/instance-cpu", "Gt", []),
        (Expect(INVALID_REQUIREMENT, NEW_REQ, "must have a single integer value ≥ 0"),),
    ),
    Case(
        "lt-two-values", add_requirement("karpenter.k8s.aws/instance-cpu", "Lt", ["4", "8"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "must have a single integer value ≥ 0"),),
    ),
    Case(
        "gt-letter", add_requirement("karpenter.k8s.aws/instance-cpu", "Gt", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "must have a single integer value ≥ 0, got ['a']"),),
    ),
    Case(
        "gt-decimal", add_requirement("karpenter.k8s.aws/instance-cpu", "Gt", ["3.5"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "must have a single integer value ≥ 0"),),
    ),
    Case(
        # "-1" is negative and, starting with '-', not even a label value: Karpenter reports both
        "gt-negative", add_requirement("karpenter.k8s.aws/instance-cpu", "Gt", ["-1"]),
        (
            Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values", 0), "invalid value '-1'"),
            Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "must have a single integer value ≥ 0"),
        ),
    ),
    Case(
        # strconv.Atoi takes "+3", but a label value cannot start with '+'
        "lt-plus-sign", add_requirement("karpenter.k8s.aws/instance-cpu", "Lt", ["+3"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values", 0), "invalid value '+3'"),),
    ),
    # negative: operators
    Case(
        "operator-equals", add_requirement("example.com/team", "Equals", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "operator"), "unsupported operator 'Equals'"),),
    ),
    Case(
        "operator-lowercase-in", add_requirement("example.com/team", "in", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "operator"), "unsupported operator 'in'"),),
    ),
    Case(
        "operator-empty", add_requirement("example.com/team", "", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "operator"), "unsupported operator"),),
    ),
    # values on Exists / DoesNotExist are ignored: a warning
    Case(
        "exists-with-values", add_requirement("example.com/pool", "Exists", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "ignores its values", WARNING),),
    ),
    Case(
        "does-not-exist-with-values", add_requirement("example.com/pool", "DoesNotExist", ["a", "b"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "ignores its values", WARNING),),
    ),
    # syntax of keys and values
    Case(
        "key-with-space", add_requirement("example.com/my team", "In", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "key"), "not a qualified name"),),
    ),
    Case(
        "key-uppercase-prefix", add_requirement("Example.COM/team", "In", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "key"), "prefix part must be a lowercase DNS subdomain"),),
    ),
    Case(
        "key-two-slashes", add_requirement("example.com/team/a", "In", ["a"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "key"), "at most one '/'"),),
    ),
    Case(
        "value-with-space", add_requirement("topology.kubernetes.io/zone", "In", ["us-east-1a", "us east 1b"]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values", 1), "invalid value 'us east 1b'"),),
    ),
    Case(
        "value-64-chars", add_requirement("example.com/team", "In", ["a" * 64]),
        (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values", 0), "no more than 63 characters"),),
    ),
]


@pytest.mark.parametrize("case", REQUIREMENT_CASES, ids=ids(REQUIREMENT_CASES))
def test_requirement_rules(case: Case) -> None:
    run(case)


def test_gt_value_beyond_int64_is_rejected_like_strconv_atoi() -> None:
    run(
        Case(
            "gt-beyond-int64", add_requirement("karpenter.k8s.aws/instance-memory", "Gt", ["99999999999999999999"]),
            (Expect(INVALID_REQUIREMENT, (*NEW_REQ, "values"), "0 to 9223372036854775807: Karpenter reads it as a"),),
        )
    )


# --- restricted label domains, exceptions, well-known labels ------------------------------------------------

RESTRICTED_KEYS = [
    "kubernetes.io/role",
    "k8s.io/team",
    "sub.k8s.io/team",
    "karpenter.sh/pool",
    "team.karpenter.sh/pool",
    "karpenter.k8s.aws/pool",
    "kubernetes.io/hostname",
    "beta.kubernetes.io/fluentd-ds-ready",
]

ALLOWED_DOMAIN_KEYS = [
    "kops.k8s.io/instancegroup",
    "node.kubernetes.io/pool",
    "node-restriction.kubernetes.io/team",
    "team.node-restriction.kubernetes.io/pool",  # suffix match on the exception too
    "example.com/kubernetes.io",  # the domain is example.com, the name is irrelevant
]

#: Karpenter v0.31's WellKnownLabels (core + AWS provider), written out rather than imported from the code.
WELL_KNOWN = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation",
    "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-pods",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
]


@pytest.mark.parametrize("key", RESTRICTED_KEYS)
def test_restricted_domain_in_requirement_is_rejected_at_its_key(key: str) -> None:
    run(Case(key, add_requirement(key, "Exists"), (Expect(RESTRICTED_LABEL, (*NEW_REQ, "key"), "is restricted"),)))


@pytest.mark.parametrize("key", RESTRICTED_KEYS)
def test_restricted_domain_in_labels_is_rejected_at_the_key(key: str) -> None:
    run(Case(key, {(*LABELS, key): "x"}, (Expect(RESTRICTED_LABEL, (*LABELS, key), "is restricted", at_key=True),)))


@pytest.mark.parametrize("key", ALLOWED_DOMAIN_KEYS)
def test_allowed_domains_pass_in_requirements_and_labels(key: str) -> None:
    run(Case(key, {**add_requirement(key, "In", ["a"]), (*LABELS, key): "a"}))


@pytest.mark.parametrize("key", WELL_KNOWN)
def test_well_known_labels_are_always_allowed_in_requirements(key: str) -> None:
    run(Case(key, add_requirement(key, "Exists")))


def test_well_known_label_is_allowed_in_labels() -> None:
    run(Case("zone-label", {(*LABELS, "topology.kubernetes.io/zone"): "us-east-1a"}))


def test_restricted_message_names_the_domain_and_the_way_out() -> None:
    [violation] = validate_provisioner(apply(BASE, add_requirement("sub.k8s.io/team", "Exists")))
    assert "sub.k8s.io" in violation.message
    assert "well-known label" in violation.message


PROVISIONER_NAME_AND_BETA_CASES = [
    Case(
        "provisioner-name-requirement", add_requirement("karpenter.sh/provisioner-name", "In", ["default"]),
        (Expect(RESTRICTED_LABEL, (*NEW_REQ, "key"), "karpenter.sh/provisioner-name is restricted"),),
    ),
    Case(
        "provisioner-name-label", {(*LABELS, "karpenter.sh/provisioner-name"): "default"},
        (Expect(RESTRICTED_LABEL, (*LABELS, "karpenter.sh/provisioner-name"), "is restricted", at_key=True),),
    ),
    Case(
        "beta-zone-requirement", add_requirement("failure-domain.beta.kubernetes.io/zone", "In", ["us-east-1a"]),
        (Expect(DEPRECATED_LABEL, (*NEW_REQ, "key"), "Karpenter reads it as topology.kubernetes.io/zone", WARNING),),
    ),
    Case(
        "beta-arch-requirement", {(*REQ, 1, "key"): "beta.kubernetes.io/arch"},
        (Expect(DEPRECATED_LABEL, (*REQ, 1, "key"), "Karpenter reads it as kubernetes.io/arch", WARNING),),
    ),
    Case(
        "beta-instance-type-requirement", add_requirement("beta.kubernetes.io/instance-type", "In", ["m5.large"]),
        (Expect(DEPRECATED_LABEL, (*NEW_REQ, "key"), "node.kubernetes.io/instance-type", WARNING),),
    ),
    Case(
        # labels are not normalised: the beta key is just a key in a restricted domain
        "beta-zone-label", {(*LABELS, "failure-domain.beta.kubernetes.io/zone"): "us-east-1a"},
        (
            Expect(
                RESTRICTED_LABEL, (*LABELS, "failure-domain.beta.kubernetes.io/zone"), "is restricted", at_key=True
            ),
        ),
    ),
]


@pytest.mark.parametrize("case", PROVISIONER_NAME_AND_BETA_CASES, ids=ids(PROVISIONER_NAME_AND_BETA_CASES))
def test_provisioner_name_and_beta_keys(case: Case) -> None:
    run(case)


# --- labels: syntax -----------------------------------------------------------------------------------------

LABEL_CASES = [
    Case("empty-value", set_labels({"team": ""})),
    Case("dotted-value", set_labels({"example.com/version": "v1.2_3-rc.1"})),
    Case(
        "key-two-slashes", set_labels({"example.com/a/b": "x"}),
        (Expect(INVALID_SPEC, (*LABELS, "example.com/a/b"), "not a qualified name", at_key=True),),
    ),
    Case(
        "key-leading-dash", set_labels({"-team": "x"}),
        (Expect(INVALID_SPEC, (*LABELS, "-team"), "must start and end with an alphanumeric", at_key=True),),
    ),
    Case(
        "key-uppercase-prefix", set_labels({"Example.com/team": "x"}),
        (Expect(INVALID_SPEC, (*LABELS, "Example.com/team"), "lowercase DNS subdomain", at_key=True),),
    ),
    Case(
        "key-name-64-chars", set_labels({"example.com/" + "n" * 64: "x"}),
        (Expect(INVALID_SPEC, (*LABELS, "example.com/" + "n" * 64), "no more than 63", at_key=True),),
    ),
    Case(
        "value-with-space", set_labels({"team": "pay ments"}),
        (Expect(INVALID_SPEC, (*LABELS, "team"), "invalid value 'pay ments'"),),
    ),
    Case(
        "value-leading-dash", set_labels({"team": "-payments"}),
        (Expect(INVALID_SPEC, (*LABELS, "team"), "invalid value '-payments'"),),
    ),
    Case(
        "value-64-chars", set_labels({"team": "p" * 64}),
        (Expect(INVALID_SPEC, (*LABELS, "team"), "no more than 63 characters"),),
    ),
]


@pytest.mark.parametrize("case", LABEL_CASES, ids=ids(LABEL_CASES))
def test_label_rules(case: Case) -> None:
    run(case)


# --- TTLs and consolidation ---------------------------------------------------------------------------------

AFTER_EMPTY: Path = ("spec", "ttlSecondsAfterEmpty")
CONSOLIDATION: Path = ("spec", "consolidation")

TTL_CASES = [
    Case("ttl-after-empty-without-consolidation", {CONSOLIDATION: DELETE, AFTER_EMPTY: 30}),
    Case("ttl-after-empty-consolidation-false", {(*CONSOLIDATION, "enabled"): False, AFTER_EMPTY: 30}),
    Case("consolidation-without-enabled", {CONSOLIDATION: {}, AFTER_EMPTY: 30}),
    Case(
        "ttl-until-expired-zero", {("spec", "ttlSecondsUntilExpired"): 0},
        (Expect(TTL_CHURN, ("spec", "ttlSecondsUntilExpired"), "expires 0 s after its launch", WARNING),),
    ),
    Case(
        "ttl-until-expired-under-an-hour", {("spec", "ttlSecondsUntilExpired"): 3599},
        (Expect(TTL_CHURN, ("spec", "ttlSecondsUntilExpired"), "without end; use hours or days", WARNING),),
    ),
    Case("ttl-until-expired-an-hour", {("spec", "ttlSecondsUntilExpired"): 3600}),
    Case(
        "ttl-after-empty-with-consolidation", {("spec", "ttlSecondsAfterEmpty"): 30},
        (Expect(INVALID_SPEC, ("spec", "ttlSecondsAfterEmpty"), "mutually exclusive"),),
    ),
    Case(
        "ttl-after-empty-zero-with-consolidation", {("spec", "ttlSecondsAfterEmpty"): 0},
        (Expect(INVALID_SPEC, ("spec", "ttlSecondsAfterEmpty"), "mutually exclusive"),),
    ),
    Case(
        "ttl-after-empty-negative",
        {("spec", "consolidation", "enabled"): False, ("spec", "ttlSecondsAfterEmpty"): -1},
        (Expect(INVALID_SPEC, ("spec", "ttlSecondsAfterEmpty"), "cannot be negative (-1)"),),
    ),
    Case(
        "ttl-until-expired-negative", {("spec", "ttlSecondsUntilExpired"): -30},
        (Expect(INVALID_SPEC, ("spec", "ttlSecondsUntilExpired"), "cannot be negative (-30)"),),
    ),
    # core v0.31.1 pkg/utils/nodepool/nodepool.go New: lo.Must(time.ParseDuration("<n>s")) panics past int64 ns
    Case("ttl-until-expired-go-max", {("spec", "ttlSecondsUntilExpired"): 9_223_372_036}),
    Case(
        "ttl-until-expired-past-go-max", {("spec", "ttlSecondsUntilExpired"): 9_223_372_037},
        (Expect(DURATION_OVERFLOW, ("spec", "ttlSecondsUntilExpired"), "lo.Must, which panics"),),
    ),
    Case(
        "ttl-until-expired-int64-max", {("spec", "ttlSecondsUntilExpired"): 2**63 - 1},
        (Expect(DURATION_OVERFLOW, ("spec", "ttlSecondsUntilExpired"), "holds (9223372036, about 292 years)"),),
    ),
    Case("ttl-after-empty-go-max", {CONSOLIDATION: DELETE, AFTER_EMPTY: 9_223_372_036}),
    Case(
        "ttl-after-empty-past-go-max", {CONSOLIDATION: DELETE, AFTER_EMPTY: 9_223_372_037},
        (Expect(DURATION_OVERFLOW, AFTER_EMPTY, "ttlSecondsAfterEmpty 9223372037 is more seconds"),),
    ),
    Case(  # with consolidation Karpenter never converts ttlSecondsAfterEmpty: only the webhook's own refusal
        "ttl-after-empty-past-go-max-with-consolidation", {AFTER_EMPTY: 9_223_372_037},
        (Expect(INVALID_SPEC, AFTER_EMPTY, "mutually exclusive"),),
    ),
]


@pytest.mark.parametrize("case", TTL_CASES, ids=ids(TTL_CASES))
def test_ttl_rules(case: Case) -> None:
    run(case)


def test_consolidation_conflict_points_back_at_consolidation_enabled() -> None:
    [violation] = validate_provisioner(apply(BASE, {("spec", "ttlSecondsAfterEmpty"): 30}))
    assert violation.related == (("spec", "consolidation", "enabled"),)


# --- provider / providerRef ---------------------------------------------------------------------------------

INLINE_PROVIDER = {
    "subnetSelector": {"karpenter.sh/discovery": "prod"},
    "securityGroupSelector": {"karpenter.sh/discovery": "prod"},
}

#: What an inline provider alone gets: the deprecation warning on the `provider` key.
DEPRECATED = Expect(DEPRECATED_PROVIDER, ("spec", "provider"), "spec.provider is deprecated", WARNING, at_key=True)

PROVIDER_CASES = [
    Case("provider-ref-alone", {}),
    Case("provider-alone", {("spec", "providerRef"): DELETE, ("spec", "provider"): INLINE_PROVIDER}, (DEPRECATED,)),
    Case(
        "both", {("spec", "provider"): INLINE_PROVIDER},
        (Expect(INVALID_SPEC, ("spec", "providerRef"), "mutually exclusive"),),
    ),
    Case(
        "neither", {("spec", "providerRef"): DELETE},
        (Expect(INVALID_SPEC, ("spec",), "exactly one of provider or providerRef is required"),),
    ),
]


@pytest.mark.parametrize("case", PROVIDER_CASES, ids=ids(PROVIDER_CASES))
def test_provider_rules(case: Case) -> None:
    run(case)


def test_inline_provider_is_checked_with_the_aws_rules_under_spec_provider() -> None:
    provider = {**INLINE_PROVIDER, "amiFamily": "AL3"}
    run(
        Case(
            "inline-bad-ami-family", {("spec", "providerRef"): DELETE, ("spec", "provider"): provider},
            (Expect(INVALID_SPEC, ("spec", "provider", "amiFamily"), "amiFamily 'AL3' is not one of"), DEPRECATED),
        )
    )


def test_inline_provider_warns_with_the_aws_node_template_to_write_instead() -> None:
    provider = {"apiVersion": "extensions.karpenter.sh/v1alpha1", "kind": "AWS", **INLINE_PROVIDER,
                "tags": {"team": "payments"}}
    found = validate_provisioner(apply(BASE, {("spec", "providerRef"): DELETE, ("spec", "provider"): provider}))

    [warning] = [v for v in found if v.rule == DEPRECATED_PROVIDER]
    head, *template = warning.message.split("\n")
    assert head == "spec.provider is deprecated: use an AWSNodeTemplate and providerRef: {name: default}"
    assert template == [
        "  apiVersion: karpenter.k8s.aws/v1alpha1",
        "  kind: AWSNodeTemplate",
        "  metadata:",
        "    name: default",
        "  spec:",
        "    subnetSelector:",
        "      karpenter.sh/discovery: prod",
        "    securityGroupSelector:",
        "      karpenter.sh/discovery: prod",
        "    tags:",
        "      team: payments",
    ]  # the provider's own apiVersion and kind are not AWSNodeTemplate fields: dropped


def test_the_template_of_a_huge_inline_provider_is_cut() -> None:
    provider = {**INLINE_PROVIDER, "tags": {f"tag-{i}": "x" for i in range(5_000)}}
    found = validate_provisioner(apply(BASE, {("spec", "providerRef"): DELETE, ("spec", "provider"): provider}))

    [warning] = [v for v in found if v.rule == DEPRECATED_PROVIDER]
    lines = warning.message.split("\n")
    assert len(lines) == 42
    assert lines[-1].endswith("more lines: every field of spec.provider)")


# --- taints -------------------------------------------------------------------------------------------------

TAINT_CASES = [
    *(
        Case(f"effect-{effect}", {(*TAINTS, 0, "effect"): effect, (*STARTUP, 0, "effect"): effect})
        for effect in ("NoSchedule", "PreferNoSchedule", "NoExecute")
    ),
    Case("no-value", {(*TAINTS, 0, "value"): DELETE}),
    Case("prefixed-key", {(*TAINTS, 0, "key"): "example.com/dedicated"}),
    Case(
        "same-key-other-effect-in-taints",
        {(*TAINTS, 1): {"key": "dedicated", "value": "payments", "effect": "NoExecute"}},
    ),
    Case(
        "same-key-other-effect-across", {(*STARTUP, 1): {"key": "dedicated", "effect": "PreferNoSchedule"}},
    ),
    Case(
        "effect-typo", {(*TAINTS, 0, "effect"): "NoSchedul"},
        (Expect(INVALID_SPEC, (*TAINTS, 0, "effect"), "'NoSchedul' is not one of NoSchedule"),),
    ),
    Case(
        "effect-lowercase-startup", {(*STARTUP, 0, "effect"): "noexecute"},
        (Expect(INVALID_SPEC, (*STARTUP, 0, "effect"), "'noexecute' is not one of"),),
    ),
    Case(
        "key-with-space", {(*TAINTS, 0, "key"): "dedi cated"},
        (Expect(INVALID_SPEC, (*TAINTS, 0, "key"), "not a qualified name"),),
    ),
    Case(
        "key-empty", {(*TAINTS, 0, "key"): ""},
        (Expect(INVALID_SPEC, (*TAINTS, 0, "key"), "needs a key"),),
    ),
    Case(
        "value-with-space", {(*TAINTS, 0, "value"): "pay ments"},
        (Expect(INVALID_SPEC, (*TAINTS, 0, "value"), "taint value 'pay ments' is invalid"),),
    ),
    Case(
        "duplicate-in-taints", {(*TAINTS, 1): {"key": "dedicated", "value": "other", "effect": "NoSchedule"}},
        (Expect(INVALID_SPEC, (*TAINTS, 1), "duplicate taint dedicated:NoSchedule"),),
    ),
    Case(
        "duplicate-across-taints-and-startup-taints", {(*STARTUP, 1): {"key": "dedicated", "effect": "NoSchedule"}},
        (Expect(INVALID_SPEC, (*STARTUP, 1), "already appear at taints[0]"),),
    ),
    Case(
        "duplicate-in-startup-taints",
        {(*STARTUP, 1): {"key": "node.cilium.io/agent-not-ready", "value": "false", "effect": "NoExecute"}},
        (Expect(INVALID_SPEC, (*STARTUP, 1), "already appear at startupTaints[0]"),),
    ),
]


@pytest.mark.parametrize("case", TAINT_CASES, ids=ids(TAINT_CASES))
def test_taint_rules(case: Case) -> None:
    run(case)


def test_duplicate_taint_points_back_at_the_first() -> None:
    doc = apply(BASE, {(*STARTUP, 1): {"key": "dedicated", "effect": "NoSchedule"}})
    [violation] = validate_provisioner(doc)
    assert violation.related == ((*TAINTS, 0),)


# --- metadata.name ------------------------------------------------------------------------------------------

NAME_CASES = [
    Case("simple", {("metadata", "name"): "gpu-spot"}),
    Case("digits", {("metadata", "name"): "pool-2"}),
    *(
        Case(
            f"bad-{name}", {("metadata", "name"): name},
            (Expect(INVALID_SPEC, ("metadata", "name"), f"name {name!r} must be a DNS-1035 label"),),
        )
        for name in ("Default", "gpu_spot", "-gpu", "gpu-", "gpu spot", "gpu..spot")
    ),
]


@pytest.mark.parametrize("case", NAME_CASES, ids=ids(NAME_CASES))
def test_metadata_name(case: Case) -> None:
    run(case)


@pytest.mark.parametrize("name", ["team-a.prod", "1gpu", "a" * 64], ids=["dot", "leading-digit", "64-characters"])
def test_metadata_name_must_be_a_dns_1035_label_like_karpenter(name: str) -> None:
    violations = validate_provisioner(apply(BASE, {("metadata", "name"): name}))
    assert [(v.rule, v.path) for v in violations] == [(INVALID_SPEC, ("metadata", "name"))]


# --- kubeletConfiguration -----------------------------------------------------------------------------------

EVICTION_HARD = (*KUBELET, "evictionHard")
EVICTION_SOFT = (*KUBELET, "evictionSoft")
GRACE = (*KUBELET, "evictionSoftGracePeriod")

KUBELET_CASES = [
    Case("hard-0-percent", {(*EVICTION_HARD, "memory.available"): "0%"}),
    Case("hard-100-percent", {(*EVICTION_HARD, "memory.available"): "100%"}),
    Case("hard-fractional-percent", {(*EVICTION_HARD, "memory.available"): "7.5%"}),
    Case("hard-quantity", {(*EVICTION_HARD, "imagefs.available"): "10Gi"}),
    Case("hard-every-signal", set_kubelet(evictionHard={
        "memory.available": "1%", "nodefs.available": "1%", "nodefs.inodesFree": "1%",
        "imagefs.available": "1%", "imagefs.inodesFree": "1%", "pid.available": "1%",
    })),
    Case("soft-with-grace", {(*EVICTION_SOFT, "imagefs.available"): "20%", (*GRACE, "imagefs.available"): "2m"}),
    Case("gc-equal", set_kubelet(imageGCHighThresholdPercent=80, imageGCLowThresholdPercent=80)),
    Case("gc-high-only", {(*KUBELET, "imageGCLowThresholdPercent"): DELETE}),
    Case("reserved-pid", {(*KUBELET, "systemReserved", "pid"): "500"}),
    Case("reserved-zero", {(*KUBELET, "systemReserved", "cpu"): "0"}),
    Case(
        "hard-unsupported-signal", {(*EVICTION_HARD, "memory.free"): "1Gi"},
        (Expect(INVALID_SPEC, (*EVICTION_HARD, "memory.free"), "eviction signal 'memory.free'", at_key=True),),
    ),
    Case(
        "hard-120-percent", {(*EVICTION_HARD, "memory.available"): "120%"},
        (Expect(INVALID_SPEC, (*EVICTION_HARD, "memory.available"), "'120%' is not a percentage between 0% and 100%"),),
    ),
    Case(
        "hard-negative-percent", {(*EVICTION_HARD, "nodefs.available"): "-5%"},
        (Expect(INVALID_SPEC, (*EVICTION_HARD, "nodefs.available"), "not a percentage"),),
    ),
    Case(
        "hard-garbage-percent", {(*EVICTION_HARD, "nodefs.available"): "ten%"},
        (Expect(INVALID_SPEC, (*EVICTION_HARD, "nodefs.available"), "not a percentage"),),
    ),
    Case(
        "hard-not-a-quantity", {(*EVICTION_HARD, "nodefs.available"): "10 GB"},
        (Expect(INVALID_SPEC, (*EVICTION_HARD, "nodefs.available"), "neither a percentage nor a quantity"),),
    ),
    Case(
        "soft-unsupported-signal",
        {(*EVICTION_SOFT, "memory.free"): "1Gi", (*GRACE, "memory.free"): "1m"},
        (
            Expect(INVALID_SPEC, (*EVICTION_SOFT, "memory.free"), "eviction signal 'memory.free'", at_key=True),
            Expect(INVALID_SPEC, (*GRACE, "memory.free"), "eviction signal 'memory.free'", at_key=True),
        ),
    ),
    Case(
        "soft-without-grace", {(*EVICTION_SOFT, "imagefs.available"): "20%"},
        (
            Expect(
                INVALID_SPEC, (*EVICTION_SOFT, "imagefs.available"),
                "needs a matching evictionSoftGracePeriod.imagefs.available", at_key=True,
            ),
        ),
    ),
    Case(
        "grace-without-soft", {(*GRACE, "imagefs.available"): "2m"},
        (
            Expect(
                INVALID_SPEC, (*GRACE, "imagefs.available"),
                "has no matching evictionSoft.imagefs.available", at_key=True,
            ),
        ),
    ),
    Case(
        "gc-high-below-low", set_kubelet(imageGCHighThresholdPercent=70, imageGCLowThresholdPercent=80),
        (Expect(INVALID_SPEC, (*KUBELET, "imageGCHighThresholdPercent"), "(70) must be greater than"),),
    ),
    Case(
        "kube-reserved-unsupported-resource", {(*KUBELET, "kubeReserved", "nvidia.com/gpu"): "1"},
        (
            Expect(
                INVALID_SPEC, (*KUBELET, "kubeReserved", "nvidia.com/gpu"), "'nvidia.com/gpu' is not one of",
                at_key=True,
            ),
        ),
    ),
    Case(
        "system-reserved-pods", {(*KUBELET, "systemReserved", "pods"): "10"},
        (Expect(INVALID_SPEC, (*KUBELET, "systemReserved", "pods"), "'pods' is not one of", at_key=True),),
    ),
    Case(
        "system-reserved-negative", {(*KUBELET, "systemReserved", "memory"): "-100Mi"},
        (Expect(INVALID_SPEC, (*KUBELET, "systemReserved", "memory"), "systemReserved.memory cannot be negative"),),
    ),
    Case(
        "kube-reserved-negative-millicores", {(*KUBELET, "kubeReserved", "cpu"): "-500m"},
        (Expect(INVALID_SPEC, (*KUBELET, "kubeReserved", "cpu"), "kubeReserved.cpu cannot be negative"),),
    ),
]


@pytest.mark.parametrize("case", KUBELET_CASES, ids=ids(KUBELET_CASES))
def test_kubelet_rules(case: Case) -> None:
    run(case)


def test_unsupported_signal_in_grace_period_is_reported_there_too() -> None:
    doc = apply(BASE, {(*EVICTION_SOFT, "memory.free"): "1Gi", (*GRACE, "memory.free"): "1m"})
    paths = {v.path for v in validate_provisioner(doc)}
    assert (*GRACE, "memory.free") in paths


# --- several problems at once -------------------------------------------------------------------------------


def test_every_problem_of_a_document_is_reported_not_just_the_first() -> None:
    doc = apply(
        BASE,
        {
            ("metadata", "name"): "Payments",
            (*REQ, 0, "operator"): "Equals",
            (*LABELS, "kubernetes.io/role"): "worker",
            (*TAINTS, 0, "effect"): "Never",
            ("spec", "ttlSecondsAfterEmpty"): 30,
        },
    )
    assert_violations(
        validate_provisioner(doc),
        [
            Expect(INVALID_SPEC, ("metadata", "name"), "lowercase"),
            Expect(INVALID_REQUIREMENT, (*REQ, 0, "operator"), "unsupported operator"),
            Expect(RESTRICTED_LABEL, (*LABELS, "kubernetes.io/role"), "restricted", at_key=True),
            Expect(INVALID_SPEC, (*TAINTS, 0, "effect"), "'Never'"),
            Expect(INVALID_SPEC, ("spec", "ttlSecondsAfterEmpty"), "mutually exclusive"),
        ],
    )


def test_validation_does_not_modify_the_document() -> None:
    doc = apply(BASE, add_requirement("failure-domain.beta.kubernetes.io/zone", "In", ["us-east-1a"]))
    before = copy.deepcopy(doc)
    validate_provisioner(doc)
    assert doc == before
