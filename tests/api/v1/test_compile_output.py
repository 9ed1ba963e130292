"""What `compile --api v1` writes is what Karpenter v1.14.1 admits: every NodePool and EC2NodeClass it emits for
the repository's policies and for the templated example passes `api/v1` (the CRDs, their CEL rules and
RuntimeValidate) — the v1alpha5 → v1 conversion checked against Karpenter's own definition of v1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from karpenter_policy.api.v1.admission import check, crd_of

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.parametrize("source", [["policies"], ["examples/templates/policies", "--values",
                                                   "examples/templates/values/prod.yaml"]])
def test_compiled_v1_manifests_are_admitted_by_karpenter_v1(source: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", *source, "-o", "-", "--api", "v1",
         "--node-role", "KarpenterNodeRole"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    documents = [doc for doc in yaml.safe_load_all(result.stdout) if doc and crd_of(doc) is not None]
    assert {doc["kind"] for doc in documents} == {"NodePool", "EC2NodeClass"}
    for doc in documents:
        assert check(doc) == [], f"{doc['kind']}/{doc['metadata']['name']}"
