"""Karpenter v1.14.1's own examples (tests/data/karpenter-v1.14.1-examples, aws/karpenter-provider-aws
examples/v1) checked by `api/v1`: every NodePool and EC2NodeClass is admitted and passes RuntimeValidate — but one.
windows-custom-userdata.yaml's NodePool names its class's group `karpenter.k8s.aws/v1`, which the v1.14.1 NodePool
CRD refuses (nodeClassRef.group must match `^[^/]*$`): an upstream mistake in the example, reported as the API
server would."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from karpenter_policy.api.v1.admission import check
from karpenter_policy.api.violations import SCHEMA, render_path

EXAMPLES = Path(__file__).parent.parent.parent / "data" / "karpenter-v1.14.1-examples"
REFUSED = {("windows-custom-userdata.yaml", "NodePool")}


def _documents() -> list[object]:
    params = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                params.append(pytest.param(path.name, doc, id=f"{path.name}[{index}]-{doc['kind']}"))
    return params


@pytest.mark.parametrize(("file_name", "doc"), _documents())
def test_karpenter_example(file_name: str, doc: dict[str, object]) -> None:
    problems = check(doc)
    if (file_name, doc["kind"]) in REFUSED:
        assert [(p.rule, render_path(p.path)) for p in problems] == [(SCHEMA, "spec.template.spec.nodeClassRef.group")]
        assert "should match '^[^/]*$'" in problems[0].message
    else:
        assert problems == []


def test_examples_cover_both_kinds() -> None:
    kinds = {doc["kind"] for path in EXAMPLES.glob("*.yaml") for doc in yaml.safe_load_all(path.read_text()) if doc}
    assert kinds == {"NodePool", "EC2NodeClass"}
    assert len(list(EXAMPLES.glob("*.yaml"))) == 22
