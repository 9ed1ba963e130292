"""What `schema_violations` tells the user about a Provisioner that does not match its JSON Schema.

The messages must say what to do (the nearest known field, the expected type, the missing field, the range),
at the path of the offending node, and the fast validator must agree with the reference one on every document.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import examples

from karpenter_policy.api.schema import load_schema, schema_violations
from karpenter_policy.api.violations import SCHEMA, Path, Violation

SCHEMA_FILE = "provisioner.v1alpha5.json"

VALID: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {
        "name": "default",
        "labels": {"app.kubernetes.io/managed-by": "argocd"},
        "annotations": {"karpenter-policy/version": "1.4.0"},
        "creationTimestamp": None,
    },
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
            {"key": "example.com/pool", "operator": "Exists"},
        ],
        "labels": {"team": "payments"},
        "annotations": {"example.com/owner": "payments"},
        "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}],
        "limits": {"resources": {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": 8}},
        "kubeletConfiguration": {
            "clusterDNS": ["10.100.0.10"],
            "containerRuntime": "containerd",
            "maxPods": 110,
            "podsPerCore": 10,
            "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "kubeReserved": {"cpu": "200m", "memory": "1.5Gi", "ephemeral-storage": "3Gi"},
            "evictionHard": {"memory.available": "5%"},
            "evictionSoft": {"memory.available": "500Mi"},
            "evictionSoftGracePeriod": {"memory.available": "1m30s"},
            "evictionMaxPodGracePeriod": 60,
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "cpuCFSQuota": True,
        },
        "consolidation": {"enabled": True},
        "ttlSecondsUntilExpired": 2592000,
        "weight": 10,
        "providerRef": {"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "name": "default"},
    },
}

REFERENCE = jsonschema.Draft202012Validator(load_schema(SCHEMA_FILE))


def changed(path: Path, value: Any) -> dict[str, Any]:
    """A copy of VALID with `path` set to `value`."""
    doc = copy.deepcopy(VALID)
    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return doc


def removed(path: Path) -> dict[str, Any]:
    """A copy of VALID without `path`."""
    doc = copy.deepcopy(VALID)
    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return doc


def only(doc: Mapping[str, Any]) -> Violation:
    violations = schema_violations(doc, SCHEMA_FILE)
    assert len(violations) == 1, violations
    [violation] = violations
    assert violation.rule == SCHEMA
    assert violation.severity == "error"
    return violation


def test_valid_provisioner_has_no_violations() -> None:
    assert REFERENCE.is_valid(VALID)
    assert schema_violations(VALID, SCHEMA_FILE) == []


def test_minimal_provisioner_has_no_violations() -> None:
    doc = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "m"}, "spec": {}}
    assert schema_violations(doc, SCHEMA_FILE) == []


# --- unknown fields -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parent", "typo", "nearest"),
    [
        (("spec",), "ttlSecondsAfterEmty", "ttlSecondsAfterEmpty"),
        (("spec",), "requirement", "requirements"),
        (("spec",), "startuptaints", "startupTaints"),  # case only
        (("spec", "requirements", 0), "valuse", "values"),
        (("spec", "kubeletConfiguration"), "maxpods", "maxPods"),
        (("spec", "consolidation"), "enable", "enabled"),
        (("spec", "taints", 0), "efect", "effect"),
        (("metadata",), "lables", "labels"),
    ],
)
def test_unknown_field_suggests_the_nearest_known_one_at_the_key(parent: Path, typo: str, nearest: str) -> None:
    doc = changed((*parent, typo), "x")
    violation = only(doc)
    assert violation.path == (*parent, typo)
    assert violation.at_key is True
    assert f"did you mean {nearest}?" in violation.message
    assert typo in violation.message


def test_unknown_field_without_a_near_match_lists_the_known_fields() -> None:
    violation = only(changed(("spec", "providerRef", "zzz"), "x"))
    assert violation.path == ("spec", "providerRef", "zzz")
    assert violation.at_key is True
    assert "did you mean" not in violation.message
    assert "known fields: apiVersion, kind, name" in violation.message


def test_each_unknown_field_is_reported_at_its_own_key() -> None:
    doc = changed(("spec", "wieght"), 10)
    doc["spec"]["ttlSecondsAfterEmty"] = 30
    violations = schema_violations(doc, SCHEMA_FILE)
    assert sorted((v.path, v.at_key) for v in violations) == [
        (("spec", "ttlSecondsAfterEmty"), True),
        (("spec", "wieght"), True),
    ]
    assert any("did you mean weight?" in v.message for v in violations)


# --- wrong types --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "fragments"),
    [
        (("spec", "weight"), "10", ["spec.weight", "integer", 'string "10"']),
        (("spec", "ttlSecondsAfterEmpty"), "30s", ["integer", 'string "30s"']),
        (("spec", "weight"), True, ["integer", "boolean true"]),
        (("spec", "consolidation", "enabled"), "yes", ["boolean", 'string "yes"']),
        (("spec", "labels", "team"), 5, ["spec.labels.team must be a string", "number 5"]),
        (("spec", "requirements"), {"key": "a"}, ["must be a list", 'mapping {"key": "a"}']),
        (("spec", "requirements", 0, "values"), "spot", ["must be a list", 'string "spot"']),
        (("spec", "taints", 0), "dedicated=payments:NoSchedule", ["must be a mapping", "string"]),
        (("metadata", "creationTimestamp"), 5, ["string or null", "number 5"]),
    ],
)
def test_wrong_type_names_the_expected_type_and_the_actual_value(
    path: Path, value: Any, fragments: list[str]
) -> None:
    violation = only(changed(path, value))
    assert violation.path == path
    assert violation.at_key is False
    for fragment in fragments:
        assert fragment in violation.message


def test_type_message_uses_the_right_article() -> None:
    assert "must be an integer, not" in only(changed(("spec", "weight"), "10")).message
    assert "must be a boolean, not" in only(changed(("spec", "consolidation", "enabled"), "yes")).message


def test_long_values_are_shortened_in_the_message() -> None:
    violation = only(changed(("spec", "weight"), "x" * 500))
    assert len(violation.message) < 150
    assert "..." in violation.message


# --- missing required fields --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "missing"),
    [
        (("spec", "requirements", 0, "operator"), "operator"),
        (("spec", "requirements", 1, "key"), "key"),
        (("spec", "taints", 0, "effect"), "effect"),
        (("metadata", "name"), "name"),
        (("spec", "providerRef", "name"), "name"),
        (("spec",), "spec"),
        (("kind",), "kind"),
    ],
)
def test_missing_required_field_is_named_at_its_parent(path: Path, missing: str) -> None:
    violation = only(removed(path))
    assert violation.path == path[:-1]
    assert f"missing required field {missing!r}" in violation.message


# --- ranges and quantities ----------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [0, 101, -1])
def test_weight_out_of_range_says_the_range(weight: int) -> None:
    violation = only(changed(("spec", "weight"), weight))
    assert violation.path == ("spec", "weight")
    assert f"{weight} is out of range: it must be between 1 and 100" in violation.message


@pytest.mark.parametrize("weight", [1, 100])
def test_weight_bounds_are_valid(weight: int) -> None:
    assert schema_violations(changed(("spec", "weight"), weight), SCHEMA_FILE) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "limits", "resources", "cpu"), "1 core"),
        (("spec", "limits", "resources", "memory"), "1GB"),
        (("spec", "limits", "resources", "memory"), "Gi"),
        (("spec", "kubeletConfiguration", "kubeReserved", "memory"), "100 Mi"),
        (("spec", "kubeletConfiguration", "systemReserved", "cpu"), "0.1cpu"),
        (("spec", "limits", "resources", "cpu"), True),
    ],
)
def test_bad_quantity_says_it_is_not_a_kubernetes_quantity(path: Path, value: Any) -> None:
    violation = only(changed(path, value))
    assert violation.path == path
    assert "is not a Kubernetes quantity" in violation.message


@pytest.mark.parametrize("value", ["500m", "1.5Gi", "2k", "1e3", "+1", 2, 0.5, "64Ti"])
def test_good_quantities_pass(value: Any) -> None:
    assert schema_violations(changed(("spec", "limits", "resources", "cpu"), value), SCHEMA_FILE) == []


def test_every_error_of_a_document_is_reported() -> None:
    doc = changed(("spec", "weight"), 0)
    doc["spec"]["limits"]["resources"]["cpu"] = "lots"
    del doc["spec"]["taints"][0]["effect"]
    paths = sorted(v.path for v in schema_violations(doc, SCHEMA_FILE))
    assert paths == sorted([("spec", "weight"), ("spec", "limits", "resources", "cpu"), ("spec", "taints", 0)])


# --- the fast path agrees with the reference validator ------------------------------------------------------

REPLACEMENT_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 100, 101, 1.0, 2.5, 1e20, float("inf"), "", "x", "In", "10Gi", "5%", "1m",
    "1 core", "1Gi\n", "1m\n", "\u0663", "1\u0663Gi", [], ["a"], [1], [{"key": "a", "operator": "In"}], {},
    {"a": "b"}, {"a": 1}, {"name": "x"}, {"enabled": "yes"},
]  # fmt: skip

#: Names a renamed field may get: near misses and real field names from elsewhere in the schema.
REPLACEMENT_NAMES = [
    "name", "key", "values", "value", "effect", "weight", "wieght", "labels", "Labels", "taints", "spec",
    "requirements", "requirement", "enabled", "resources", "cpu", "maxPods", "provider", "providerRef", "status",
    "x", "",
]  # fmt: skip


def _paths(node: Any, prefix: Path = ()) -> list[Path]:
    """Every mapping entry and list item below `node`, in document order."""
    found: list[Path] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((*prefix, key))
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.append((*prefix, index))
            found += _paths(value, (*prefix, index))
    return found


def _resolves(doc: Any, path: Path) -> bool:
    node = doc
    for part in path:
        in_mapping = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_mapping or in_list):
            return False
        node = node[part]
    return True


@st.composite
def mutated_provisioners(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        operation = draw(st.sampled_from(["drop", "rename", "retype"]))
        if operation == "drop":
            del parent[last]
        elif operation == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(REPLACEMENT_NAMES))] = parent.pop(last)
        else:
            parent[last] = copy.deepcopy(draw(st.sampled_from(REPLACEMENT_VALUES)))
    return doc


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_provisioners())
def test_fast_path_and_reference_validator_agree(doc: dict[str, Any]) -> None:
    violations = schema_violations(doc, SCHEMA_FILE)
    assert (violations == []) == REFERENCE.is_valid(doc), violations
    for violation in violations:
        assert violation.rule == SCHEMA
        # the path becomes the finding's file:line, so it must name a node that is really there
        assert _resolves(doc, violation.path), violation
