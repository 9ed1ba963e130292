"""Test helpers over Karpenter's fake instance types (`karpenter_policy.scheduling.synthetic`): a template and a
pod in one call each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate, Pod, shape_of
from karpenter_policy.scheduling.synthetic import (  # noqa: F401 - re-exported for the tests
    GI,
    MI,
    OFFERINGS,
    SHAPE,
    ZONES,
    assorted_types,
    benchmark_types,
    fake_type,
    fake_types,
)


def template(
    table: InstanceTable, name: str = "default", requirements: Requirements | None = None, **options: Any
) -> NodeClaimTemplate:
    return NodeClaimTemplate.build(
        table, name=name, requirements=requirements or Requirements(), shape=SHAPE, **options
    )


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    order: int = 0,
    **spec: Any,
) -> Pod:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    body: dict[str, Any] = {"containers": [{"name": "app", "resources": {"requests": requests}}], **spec}
    return Pod(name, shape_of(body, namespace, labels or {}), order=order)
