"""Karpenter v1 objects at the webhook: `/validate/nodepools` and `/validate/ec2nodeclasses` over HTTPS.

Every v1 document of examples/v1 and of Karpenter v1.14.1's examples is judged as `karpenter-policy validate`
judges it alone in a file (denied with the CLI's error lines, admitted with its warnings); Karpenter's own update
cases (the CEL transition rules: `nodeClassRef.group is immutable`, …) are sent as UPDATEs with their old object
and decided as the Go tests expect; an update that leaves an existing refusal as it was is admitted with a warning
(the API server ratchets unchanged fields), one that introduces it is denied; caps, wrong kinds and deletions are
answered before any check.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.checks.source.files import load_file
from karpenter_policy.webhook.review import shorten
from tests.api.v1.test_karpenter_cel_cases import _expand, merge_patch

from .support import Client, cli_verdict

ROOT = Path(__file__).resolve().parents[2]
V1_DIRS = ("examples/v1/positive", "examples/v1/negative", "tests/data/karpenter-v1.14.1-examples")
ROUTES = {"NodePool": "/validate/nodepools", "EC2NodeClass": "/validate/ec2nodeclasses"}


def _v1_documents() -> list[Any]:
    found = []
    for directory in V1_DIRS:
        for file in sorted((ROOT / directory).glob("*.yaml")):
            for index, doc in enumerate(load_file(str(file))):
                data = doc.data
                is_v1 = isinstance(data, dict) and str(data.get("apiVersion")).endswith("/v1")
                if is_v1 and data.get("kind") in ROUTES:
                    found.append(pytest.param(data, id=f"{directory.rsplit('/', 1)[-1]}/{file.name}#{index}"))
    return found


DOCUMENTS = _v1_documents()


def _lines(response: dict[str, Any]) -> list[str]:
    return str(response.get("status", {}).get("message", "")).split("\n")


def test_the_table_holds_both_kinds_and_both_verdicts() -> None:
    kinds = {param.values[0]["kind"] for param in DOCUMENTS}
    assert kinds == set(ROUTES)
    verdicts = [cli_verdict(param.values[0], solve=False) for param in DOCUMENTS]
    assert sum(1 for v in verdicts if v.errors) >= 5
    assert sum(1 for v in verdicts if not v.errors) >= 30


@pytest.mark.parametrize("data", DOCUMENTS)
def test_the_webhook_decides_a_v1_object_as_validate(data: dict[str, Any], client: Client) -> None:
    expected = cli_verdict(data, solve=False)
    response = client.review(ROUTES[data["kind"]], data)
    assert response["allowed"] is (not expected.errors), (expected, response)
    if expected.errors:
        lines = _lines(response)
        assert response["status"]["code"] == 403
        assert len(lines) == len(expected.errors), lines
        for (message, rule), line in zip(expected.errors, lines, strict=True):
            assert line.endswith(f"{message} [{rule}]"), (line, message)
    assert response.get("warnings", []) == [shorten(f"{m} [{r}]") for m, r in expected.warnings]


def _update_cases() -> list[Any]:
    found = []
    data = ROOT / "tests" / "data" / "karpenter-v1-cel"
    for name in ("nodepool-core.yaml", "nodepool-aws.yaml", "ec2nodeclass-aws.yaml"):
        suite = yaml.safe_load((data / name).read_text())
        for case in suite["cases"]:
            if "old_patch" in case and "admit" in case:
                found.append(pytest.param(suite, case, id=f"{name}:{case['line']}"))
    return found


@pytest.mark.parametrize(("suite", "case"), _update_cases())
def test_karpenters_update_cases_are_decided_with_the_old_object(
    suite: dict[str, Any], case: dict[str, Any], client: Client
) -> None:
    old = merge_patch(_expand(suite["base"]), _expand(case["old_patch"]))
    new = merge_patch(old, _expand(case["patch"]))
    route = ROUTES[new["kind"]]
    response = client.review(route, new, operation="UPDATE", oldObject=old)
    refused_by_runtime = case.get("runtime") is False
    assert response["allowed"] is (case["admit"] and not refused_by_runtime), (case, response)


def test_update_cases_include_a_transition_rule() -> None:
    assert any(not param.values[1]["admit"] for param in _update_cases())


def _nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "web"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                }
            }
        },
    }


def test_a_nodepool_karpenter_would_never_make_ready_is_denied(client: Client) -> None:
    """The API server admits a capacity type Karpenter does not know; RuntimeValidate refuses it, so Karpenter
    would ignore the NodePool — the webhook says so at apply time."""
    broken = _nodepool()
    broken["spec"]["template"]["spec"]["requirements"][0]["values"] = ["xspot"]
    response = client.review("/validate/nodepools", broken)
    assert response["allowed"] is False
    assert all(line.endswith("[runtime-validation]") for line in _lines(response)), response
    assert "xspot" in response["status"]["message"]
    assert client.review("/validate/nodepools", _nodepool())["allowed"] is True


def test_an_update_that_leaves_a_refusal_unchanged_is_admitted_with_a_warning(client: Client) -> None:
    broken = _nodepool()
    broken["spec"]["template"]["spec"]["requirements"][0]["values"] = ["xspot"]
    relabelled = copy.deepcopy(broken)
    relabelled["spec"]["weight"] = 10
    response = client.review("/validate/nodepools", relabelled, operation="UPDATE", oldObject=broken)
    assert response["allowed"] is True, response
    assert any(w.startswith("kept by this update, admitted: ") and "xspot" in w for w in response["warnings"])
    # the same refusal introduced by the update is denied
    response = client.review("/validate/nodepools", relabelled, operation="UPDATE", oldObject=_nodepool())
    assert response["allowed"] is False


def test_a_nodepool_of_another_providers_node_class_is_denied_and_an_update_keeping_it_warned(client: Client) -> None:
    """Karpenter's AWS provider never manages it (core pkg/utils/nodepool/nodepool.go `IsManaged`)."""
    foreign = _nodepool()
    foreign["spec"]["template"]["spec"]["nodeClassRef"] = {"group": "karpenter.azure.com", "kind": "AKSNodeClass",
                                                           "name": "default"}
    response = client.review("/validate/nodepools", foreign)
    assert response["allowed"] is False
    (line,) = _lines(response)
    assert line.startswith("spec.template.spec.nodeClassRef.group: ") and line.endswith("[foreign-node-class]")
    relabelled = copy.deepcopy(foreign)
    relabelled["spec"]["weight"] = 10
    response = client.review("/validate/nodepools", relabelled, operation="UPDATE", oldObject=foreign)
    assert response["allowed"] is True, response
    assert any(w.startswith("kept by this update, admitted: ") and "names karpenter.azure.com/AKSNodeClass" in w
               for w in response["warnings"])  # shortened for the Warning header


def test_caps_wrong_kinds_and_deletions_are_answered_before_any_check(client: Client) -> None:
    over = _nodepool()
    over["spec"]["template"]["spec"]["requirements"] = [
        {"key": f"example.com/k{i}", "operator": "Exists"} for i in range(101)
    ]
    response = client.review("/validate/nodepools", over)
    assert response["allowed"] is False
    assert "spec.template.spec.requirements holds 101 requirements" in response["status"]["message"]

    tagged = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"tags": {f"t{i}": "x" for i in range(201)}},
    }
    response = client.review("/validate/ec2nodeclasses", tagged)
    assert response["allowed"] is False
    assert "spec holds 201 tags" in response["status"]["message"]

    provisioner = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "x"}}
    response = client.review("/validate/nodepools", provisioner)
    assert response["allowed"] is False
    assert "expected a karpenter.sh/v1 NodePool or karpenter.k8s.aws/v1 EC2NodeClass" in response["status"]["message"]

    beta = {**_nodepool(), "apiVersion": "karpenter.sh/v1beta1"}
    response = client.review("/validate/nodepools", beta)
    assert response["allowed"] is False
    assert "v1beta1 was served by Karpenter v0.32 to v1.0 only" in response["status"]["message"]

    leaving = copy.deepcopy(over)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    assert client.review("/validate/nodepools", leaving, operation="UPDATE", oldObject=leaving)["allowed"] is True
