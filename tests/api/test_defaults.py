"""Karpenter's Provisioner defaulting (AWS webhook, v0.31), as `fmt` and `compile` apply it.

Each default is appended only when the key is absent from the requirements (beta keys count as present), in
Karpenter's order: os, arch, capacity-type, then instance-category and instance-generation when no
instance-type/family/category/generation is constrained.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpenter_policy.api.defaults import default_provisioner, default_requirements
from karpenter_policy.api.provisionerrules import validate_provisioner
from karpenter_policy.model.requirements import Requirements

OS = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
ARCH = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
CAPACITY = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
CATEGORY = {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}
GENERATION = {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]}
ALL_DEFAULTS = [OS, ARCH, CAPACITY, CATEGORY, GENERATION]


def provisioner(requirements: list[dict[str, Any]] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "labels": {"team": "payments"},
        "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}],
        "consolidation": {"enabled": True},
        "providerRef": {"name": "default"},
    }
    if requirements is not None:
        spec["requirements"] = requirements
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "default"},
        "spec": spec,
    }


def req(key: str, operator: str = "In", *values: str) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def test_empty_requirements_get_every_default_in_karpenters_order() -> None:
    assert default_requirements([]) == ALL_DEFAULTS


def test_missing_requirements_field_is_created_with_every_default() -> None:
    defaulted = default_provisioner(provisioner(None))
    assert defaulted["spec"]["requirements"] == ALL_DEFAULTS


@pytest.mark.parametrize(
    ("present", "added"),
    [
        (req("kubernetes.io/os", "In", "windows"), [ARCH, CAPACITY, CATEGORY, GENERATION]),
        (req("kubernetes.io/arch", "In", "arm64"), [OS, CAPACITY, CATEGORY, GENERATION]),
        (req("karpenter.sh/capacity-type", "In", "spot"), [OS, ARCH, CATEGORY, GENERATION]),
        (req("node.kubernetes.io/instance-type", "In", "m5.large"), [OS, ARCH, CAPACITY]),
        (req("karpenter.k8s.aws/instance-family", "In", "c6g"), [OS, ARCH, CAPACITY]),
        (req("karpenter.k8s.aws/instance-category", "In", "g"), [OS, ARCH, CAPACITY]),
        (req("karpenter.k8s.aws/instance-generation", "Gt", "5"), [OS, ARCH, CAPACITY]),
        # other instance labels do not stop the category/generation default
        (req("karpenter.k8s.aws/instance-size", "NotIn", "metal"), [OS, ARCH, CAPACITY, CATEGORY, GENERATION]),
        (req("karpenter.k8s.aws/instance-cpu", "Lt", "33"), [OS, ARCH, CAPACITY, CATEGORY, GENERATION]),
        (req("topology.kubernetes.io/zone", "In", "us-east-1a"), [OS, ARCH, CAPACITY, CATEGORY, GENERATION]),
        (req("example.com/team", "Exists"), [OS, ARCH, CAPACITY, CATEGORY, GENERATION]),
    ],
    ids=lambda value: value["key"] if isinstance(value, dict) else None,
)
def test_each_default_is_added_only_when_its_key_is_absent(
    present: dict[str, Any], added: list[dict[str, Any]]
) -> None:
    assert default_requirements([present]) == added
    assert default_provisioner(provisioner([present]))["spec"]["requirements"] == [present, *added]


@pytest.mark.parametrize("operator", ["In", "NotIn", "Exists", "DoesNotExist"])
def test_any_operator_on_the_key_counts_as_present(operator: str) -> None:
    values = ("arm64",) if operator in ("In", "NotIn") else ()
    added = default_requirements([req("kubernetes.io/arch", operator, *values)])
    assert ARCH not in added
    assert [r["key"] for r in added] == [
        "kubernetes.io/os",
        "karpenter.sh/capacity-type",
        "karpenter.k8s.aws/instance-category",
        "karpenter.k8s.aws/instance-generation",
    ]


@pytest.mark.parametrize(
    ("beta", "added"),
    [
        (req("beta.kubernetes.io/arch", "In", "arm64"), [OS, CAPACITY, CATEGORY, GENERATION]),
        (req("beta.kubernetes.io/os", "In", "linux"), [ARCH, CAPACITY, CATEGORY, GENERATION]),
        (req("beta.kubernetes.io/instance-type", "In", "m5.large"), [OS, ARCH, CAPACITY]),
    ],
    ids=lambda value: value["key"] if isinstance(value, dict) else None,
)
def test_beta_keys_count_as_their_stable_key(beta: dict[str, Any], added: list[dict[str, Any]]) -> None:
    assert default_requirements([beta]) == added


def test_fully_specified_requirements_get_nothing() -> None:
    requirements = [
        req("kubernetes.io/os", "In", "linux"),
        req("kubernetes.io/arch", "In", "arm64"),
        req("karpenter.sh/capacity-type", "In", "spot", "on-demand"),
        req("karpenter.k8s.aws/instance-family", "In", "m7g", "c7g"),
    ]
    assert default_requirements(requirements) == []
    assert default_provisioner(provisioner(requirements))["spec"]["requirements"] == requirements


def test_user_requirements_stay_first_and_unchanged() -> None:
    user = [req("example.com/team", "In", "payments"), req("kubernetes.io/arch", "In", "arm64")]
    defaulted = default_provisioner(provisioner(copy.deepcopy(user)))["spec"]["requirements"]
    assert defaulted[: len(user)] == user
    assert defaulted[len(user):] == [OS, CAPACITY, CATEGORY, GENERATION]


def test_other_fields_are_kept() -> None:
    doc = provisioner([req("kubernetes.io/arch", "In", "arm64")])
    defaulted = default_provisioner(doc)
    assert {k: v for k, v in defaulted["spec"].items() if k != "requirements"} == {
        k: v for k, v in doc["spec"].items() if k != "requirements"
    }
    assert {k: v for k, v in defaulted.items() if k != "spec"} == {k: v for k, v in doc.items() if k != "spec"}


REQUIREMENT_SETS = [
    [],
    [req("kubernetes.io/arch", "In", "arm64")],
    [req("beta.kubernetes.io/instance-type", "In", "m5.large")],
    [req("karpenter.sh/capacity-type", "In", "spot"), req("karpenter.k8s.aws/instance-size", "NotIn", "metal")],
]


@pytest.mark.parametrize("requirements", REQUIREMENT_SETS)
def test_defaulting_is_idempotent(requirements: list[dict[str, Any]]) -> None:
    once = default_provisioner(provisioner(requirements))
    assert default_provisioner(once) == once
    assert default_requirements(once["spec"]["requirements"]) == []


@pytest.mark.parametrize("requirements", REQUIREMENT_SETS)
def test_the_input_is_not_modified(requirements: list[dict[str, Any]]) -> None:
    doc = provisioner(requirements)
    before = copy.deepcopy(doc)
    defaulted = default_provisioner(doc)
    assert doc == before
    # nothing is shared either: editing the result leaves the input alone
    defaulted["spec"]["requirements"].append(req("example.com/x", "Exists"))
    defaulted["spec"]["labels"]["team"] = "other"
    defaulted["metadata"]["name"] = "other"
    assert doc == before


def test_default_requirements_does_not_modify_its_argument() -> None:
    requirements = [req("kubernetes.io/arch", "In", "arm64")]
    before = copy.deepcopy(requirements)
    default_requirements(requirements)
    assert requirements == before


def test_missing_requirements_field_is_not_added_to_the_input() -> None:
    doc = provisioner(None)
    default_provisioner(doc)
    assert "requirements" not in doc["spec"]


@pytest.mark.parametrize("requirements", REQUIREMENT_SETS)
def test_defaulted_provisioner_is_valid_and_parses(requirements: list[dict[str, Any]]) -> None:
    defaulted = default_provisioner(provisioner(requirements))
    assert [v for v in validate_provisioner(defaulted) if v.severity == "error"] == []
    parsed = Requirements.from_node_selector(defaulted["spec"]["requirements"])
    for key in ("kubernetes.io/os", "kubernetes.io/arch", "karpenter.sh/capacity-type"):
        assert key in parsed


def test_defaulted_empty_provisioner_has_no_violations_and_admits_the_defaults() -> None:
    defaulted = default_provisioner(provisioner([]))
    assert validate_provisioner(defaulted) == []
    parsed = Requirements.from_node_selector(defaulted["spec"]["requirements"])
    assert parsed["kubernetes.io/os"].has("linux")
    assert not parsed["kubernetes.io/os"].has("windows")
    assert parsed["karpenter.k8s.aws/instance-category"].has("m")
    assert not parsed["karpenter.k8s.aws/instance-category"].has("t")
    assert parsed["karpenter.k8s.aws/instance-generation"].has("3")
    assert not parsed["karpenter.k8s.aws/instance-generation"].has("2")
