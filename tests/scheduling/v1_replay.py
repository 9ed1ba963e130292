"""Replaying a v0.31 suite test on Karpenter v1.14.1's rules: the suites' cluster on `TopologyRules.V1_14`, its
templates NodePools (nodes labelled `karpenter.sh/nodepool`; the default one v1.14.1's `test.NodePool` as the v1
suites' `BeforeEach` makes it), and a failure named by the v1.14.1 Go file and line it stands for."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import NodeClaimTemplate, TopologyRules

from . import cluster as world_module
from .cluster import requirement
from .test_karpenter_v1_topology import nodepool


def v1_nodepool(name: str = "default", *terms: dict[str, Any], **options: Any) -> NodeClaimTemplate:
    """`test.NodePool` as the v1.14.1 suites make it: without terms, `karpenter.sh/capacity-type Exists`."""
    return nodepool(name, *(terms or (requirement(wk.CAPACITY_TYPE, "Exists"),)), **options)


def v1_cluster(strategy: str, *templates: NodeClaimTemplate, **options: Any) -> world_module.Cluster:
    """The suites' cluster on v1.14.1's rules, its default template :func:`v1_nodepool`'s."""
    options.setdefault("topology", TopologyRules.V1_14)
    return world_module.cluster(strategy, *(templates or (v1_nodepool(),)), **options)


def on_v1_rules(monkeypatch: pytest.MonkeyPatch, suite: ModuleType) -> None:
    """Make `suite`'s tests build v1.14.1 clusters and NodePools where they build v0.31 clusters and Provisioners."""
    monkeypatch.setattr(suite, "cluster", v1_cluster)
    monkeypatch.setattr(suite, "provisioner", v1_nodepool)


def replay(suite: ModuleType, name: str, *args: Any, strategy: str, where: str) -> None:
    """Run `suite`'s test `name`; a failed assertion names `where` (the Go file, line and `It`)."""
    test: Callable[..., None] = getattr(suite, name)
    try:
        test(strategy, *args)
    except AssertionError as error:
        raise AssertionError(f"{where}: {error}") from error


def parametrized_arguments(test: Callable[..., None]) -> list[tuple[Any, ...]]:
    """The argument tuples (after `strategy`) of a test's one `pytest.mark.parametrize` that is not on `strategy`,
    in the order written; `[()]` for a test without one."""
    marks: list[pytest.Mark] = getattr(test, "pytestmark", [])
    found = [mark for mark in marks if mark.name == "parametrize" and mark.args[0] != "strategy"]
    if not found:
        return [()]
    (mark,) = found
    single = isinstance(mark.args[0], str) and "," not in mark.args[0]
    values = [getattr(value, "values", value) for value in mark.args[1]]
    return [(value,) if single else tuple(value) for value in values]


def strategies_of(test: Callable[..., None]) -> tuple[str, ...] | None:
    """The packing strategies a test is parametrized on itself (`KARPENTER_ONLY`), or None: the fixture's."""
    marks: list[pytest.Mark] = getattr(test, "pytestmark", [])
    found = [tuple(mark.args[1]) for mark in marks if mark.name == "parametrize" and mark.args[0] == "strategy"]
    return found[0] if found else None
