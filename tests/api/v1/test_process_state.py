"""Checking a Karpenter v1 object leaves the process as it found it: celpy raises the interpreter's recursion
limit when its environment is built, and the YAML loader's refusal of a document nested too deeply must not
depend on whether a NodePool was checked before it in the same run (validate, check, the webhook)."""

from __future__ import annotations

import sys

from karpenter_policy.api.v1.admission import admit
from karpenter_policy.api.v1.cel import _environment
from karpenter_policy.checks.source.loader import LoadError, parse


def _nodepool() -> dict[str, object]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                        "name": "default"}, "requirements": []}}},
    }


def test_building_the_cel_environment_keeps_the_recursion_limit() -> None:
    before = sys.getrecursionlimit()
    _environment.cache_clear()
    admit(_nodepool())
    assert sys.getrecursionlimit() == before


def test_a_deep_document_is_refused_after_a_nodepool_was_checked_as_before() -> None:
    _environment.cache_clear()
    admit(_nodepool())
    text = "".join("  " * level + "-\n" for level in range(800)) + "  " * 800 + "x\n"
    try:
        parse("deep.yaml", text)
    except LoadError as error:
        assert "nests" in str(error)
    else:
        raise AssertionError("a document nested 800 levels deep was read")
