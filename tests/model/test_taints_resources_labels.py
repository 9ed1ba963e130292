"""Taints/tolerations (Kubernetes' ToleratesTaint), quantities and label-key rules."""

from __future__ import annotations

from decimal import Decimal

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.model.resources import add, exceeding, format_quantity, maximum, parse_quantity
from karpenter_policy.model.taints import Taint, Toleration, untolerated

GPU = Taint("nvidia.com/gpu", "NoSchedule", "true")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        (Toleration(key="nvidia.com/gpu", operator="Equal", value="true", effect="NoSchedule"), True),
        (Toleration(key="nvidia.com/gpu", operator="Exists"), True),
        (Toleration(operator="Exists"), True),  # empty key + Exists tolerates everything
        (Toleration(key="nvidia.com/gpu", operator="Equal", value="false"), False),
        (Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoExecute"), False),
        (Toleration(key="other", operator="Exists"), False),
        (Toleration(key="nvidia.com/gpu", operator="Lt", value="true"), False),
        (Toleration(key="nvidia.com/gpu", operator="", value="true"), True),  # empty operator means Equal
    ],
)
def test_tolerates(toleration: Toleration, expected: bool) -> None:
    assert toleration.tolerates(GPU) is expected


def test_untolerated_lists_every_taint_not_tolerated() -> None:
    batch = Taint("dedicated", "NoSchedule", "batch")
    soft = Taint("dotori/server", "PreferNoSchedule", "true")
    assert untolerated([GPU, batch, soft], [Toleration.from_api({"key": "dedicated", "operator": "Exists"})]) == [
        GPU,
        soft,
    ]
    assert str(GPU) == "nvidia.com/gpu=true:NoSchedule"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2k", Decimal(2000)),
        (1000, Decimal(1000)),
        ("500m", Decimal("0.5")),
        ("1.5Gi", Decimal(1610612736)),
        ("1e3", Decimal(1000)),
        (0.5, Decimal("0.5")),
        ("64T", Decimal(64 * 10**12)),
    ],
)
def test_parse_quantity_matches_kubernetes(text: object, value: Decimal) -> None:
    from kubernetes.utils import parse_quantity as kubernetes_parse

    assert parse_quantity(text) == value
    if not isinstance(text, float):
        assert parse_quantity(text) == kubernetes_parse(text)


@pytest.mark.parametrize("bad", ["1 cpu", "", "abc", True, None, [1]])
def test_parse_quantity_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        parse_quantity(bad)


def test_resource_arithmetic() -> None:
    a = {"cpu": Decimal(1), "memory": Decimal(100)}
    b = {"cpu": Decimal(2)}
    assert add(a, b) == {"cpu": Decimal(3), "memory": Decimal(100)}
    assert maximum(a, b) == {"cpu": Decimal(2), "memory": Decimal(100)}
    assert exceeding({"cpu": Decimal(3), "nvidia.com/gpu": Decimal(1)}, {"cpu": Decimal(2)}) == [
        "cpu",
        "nvidia.com/gpu",
    ]
    assert format_quantity(Decimal("0.5")) == "500m" and format_quantity(Decimal(4)) == "4"


@pytest.mark.parametrize(
    ("key", "restricted"),
    [
        (wk.ARCH, False),
        (wk.INSTANCE_FAMILY, False),
        (wk.CAPACITY_TYPE, False),  # well-known
        ("kubernetes.io/foo", True),
        ("k8s.io/foo", True),
        ("sub.k8s.io/foo", True),
        ("karpenter.sh/foo", True),
        ("karpenter.k8s.aws/foo", True),
        ("kops.k8s.io/instancegroup", False),
        ("node.kubernetes.io/role", False),
        ("node-restriction.kubernetes.io/team", False),  # exceptions
        ("team", False),
        ("example.com/team", False),
        (wk.HOSTNAME, True),
        ("beta.kubernetes.io/arch", True),
    ],
)
def test_restricted_labels(key: str, restricted: bool) -> None:
    assert (wk.restricted_label_reason(key) is not None) is restricted


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("team", True),
        ("example.com/team", True),
        ("a/b/c", False),
        ("/x", False),
        ("Example.com/x", False),
        (" karpenter.sh/capacity-type", False),
        ("-x", False),
        ("x" * 64, False),
        ("a.b_c-d", True),
    ],
)
def test_qualified_names(key: str, ok: bool) -> None:
    assert (wk.qualified_name_errors(key) == ()) is ok


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("kspark", True), ("a b", False), ("-a", False), ("x" * 64, False)]
)
def test_label_values(value: str, ok: bool) -> None:
    assert (wk.label_value_errors(value) == ()) is ok
