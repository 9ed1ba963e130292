"""The shared table: every document of examples/ sent to the webhook over HTTPS, judged against the CLI.

For each document the webhook's `/validate/provisioners` admits exactly what `karpenter-policy check` accepts
(the CLI run in-process on a file holding only that document), denies with the CLI's error messages (one line
each in `status.message`), and admits with the CLI's warnings (each cut to 120 characters).
`/mutate/provisioners` denies what `validate` rejects and otherwise patches: the JSONPatch applied with the
`jsonpatch` library gives exactly `default_provisioner(doc)`, and patching the result again is a no-op.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from karpenter_policy.api.defaults import default_provisioner
from karpenter_policy.webhook.review import MAX_WARNING_CHARS, shorten

from .support import Case, Client, cases, cli_verdict, patch_of

CASES = cases()


def test_the_table_covers_both_verdicts() -> None:
    verdicts = [cli_verdict(case.data, solve=False) for case in CASES]
    assert len(CASES) >= 60
    assert sum(1 for v in verdicts if v.errors) >= 30
    assert sum(1 for v in verdicts if not v.errors and v.is_provisioner) >= 15


def _lines(response: dict[str, Any]) -> list[str]:
    return str(response.get("status", {}).get("message", "")).split("\n")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_validate_decides_as_the_cli(case: Case, client: Client) -> None:
    expected = cli_verdict(case.data)
    response = client.review("/validate/provisioners", case.data)
    should_admit = expected.is_provisioner and not expected.errors
    assert response["allowed"] is should_admit, (expected, response)
    if expected.errors:
        lines = _lines(response)
        assert response["status"]["code"] == 403
        assert len(lines) == len(expected.errors), lines
        for (message, rule), line in zip(expected.errors, lines, strict=True):
            assert line.endswith(f"{message} [{rule}]"), (line, message)
    elif not should_admit:  # an object of another kind: denied with a reason, not checked
        assert _lines(response) == [
            f"expected a karpenter.sh/v1alpha5 Provisioner, not {case.data.get('apiVersion')} {case.data.get('kind')}"
        ]
    expected_warnings = [shorten(f"{m} [{r}]") for m, r in expected.warnings]
    assert response.get("warnings", []) == expected_warnings
    assert all(len(w) <= MAX_WARNING_CHARS for w in response.get("warnings", []))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_mutate_patches_to_the_defaulted_object(case: Case, client: Client) -> None:
    expected = cli_verdict(case.data, solve=False)
    response = client.review("/mutate/provisioners", case.data)
    if expected.errors or not expected.is_provisioner:
        assert response["allowed"] is False
        assert "patch" not in response
        return
    assert response["allowed"] is True
    original = copy.deepcopy(case.data)
    patched = jsonpatch.apply_patch(case.data, patch_of(response))
    assert case.data == original  # apply_patch copies
    assert patched == default_provisioner(case.data)
    again = client.review("/mutate/provisioners", patched)
    assert again["allowed"] is True and patch_of(again) == []  # idempotent: safe with reinvocationPolicy IfNeeded


def test_a_defaulted_object_is_admitted_as_the_original(client: Client) -> None:
    """Mutation runs first: the validating webhook then sees the defaulted object, and must decide the same."""
    for case in CASES:
        expected = cli_verdict(case.data, solve=False)
        if expected.errors or not expected.is_provisioner:
            continue
        original = client.review("/validate/provisioners", case.data)["allowed"]
        defaulted = client.review("/validate/provisioners", default_provisioner(case.data))["allowed"]
        assert original == defaulted, case.id


def test_update_checks_the_new_object_and_delete_passes(client: Client) -> None:
    good = next(c.data for c in CASES if c.id == "check/positive/gpu-a10g.yaml#0")
    bad = next(c.data for c in CASES if c.id == "check/negative/conflict-gt-vs-lt.yaml#0")
    assert client.review("/validate/provisioners", bad, operation="UPDATE", oldObject=good)["allowed"] is False
    assert client.review("/validate/provisioners", good, operation="UPDATE", oldObject=bad)["allowed"] is True
    assert client.review("/validate/provisioners", None, operation="DELETE", oldObject=bad)["allowed"] is True
    assert client.review("/mutate/provisioners", None, operation="DELETE", oldObject=bad)["allowed"] is True


def test_denial_names_the_field(client: Client) -> None:
    bad = next(c.data for c in CASES if c.id == "negative/invalid-requirement-unsupported-operator.yaml#0")
    response = client.review("/validate/provisioners", bad)
    assert response["allowed"] is False
    assert _lines(response)[0].startswith("spec.requirements[0].operator: key karpenter.sh/capacity-type has an ")


def test_an_object_as_the_api_server_sends_it(client: Client) -> None:
    """Server-set metadata, managedFields and status are accepted; the verdict is the one on the bare object."""
    bare = next(c.data for c in CASES if c.id == "check/positive/gpu-a10g.yaml#0")
    stored = copy.deepcopy(bare)
    stored["metadata"].update(
        uid="6f1c9a8e-0d1e-4f57-9a53-3f0b1f8d2c11",
        resourceVersion="123456",
        generation=3,
        creationTimestamp="2026-11-22T01:02:03Z",
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        managedFields=[
            {
                "manager": "kubectl",
                "operation": "Apply",
                "apiVersion": "karpenter.sh/v1alpha5",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}},
            }
        ],
    )
    stored["status"] = {"resources": {"cpu": "12", "memory": "48Gi"}}
    for path in ("/validate/provisioners", "/mutate/provisioners"):
        response = client.review(path, stored, operation="UPDATE", oldObject=stored, dryRun=True)
        assert response["allowed"] is True


def test_a_provisioner_being_deleted_is_admitted(client: Client) -> None:
    """Issue #8, item 11: the UPDATE that removes the last finalizer of an invalid Provisioner with a
    deletionTimestamp goes through on both endpoints (unchecked, undefaulted), so it can be deleted; the same
    object without a deletionTimestamp is still denied."""
    invalid = next(c.data for c in CASES if c.id == "negative/invalid-requirement-unsupported-operator.yaml#0")
    assert cli_verdict(invalid, solve=False).errors
    old = copy.deepcopy(invalid)
    old["metadata"].update(deletionTimestamp="2026-11-22T10:00:00Z", finalizers=["karpenter.sh/termination"])
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    for path in ("/validate/provisioners", "/mutate/provisioners"):
        response = client.review(path, new, operation="UPDATE", oldObject=old)
        assert response["allowed"] is True and "patch" not in response, response
        alive = client.review(path, invalid, operation="UPDATE", oldObject=invalid)
        assert alive["allowed"] is False


def test_an_inline_provider_is_admitted_with_the_deprecation_on_one_line(client: Client) -> None:
    provisioner = {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "legacy"},
        "spec": {"provider": {"subnetSelector": {"karpenter.sh/discovery": "prod"},
                              "securityGroupSelector": {"karpenter.sh/discovery": "prod"}}},
    }

    response = client.review("/validate/provisioners", provisioner)

    assert response["allowed"] is True
    assert response["warnings"] == [
        "spec.provider is deprecated: use an AWSNodeTemplate and providerRef: {name: legacy} [deprecated-provider]"
    ]
