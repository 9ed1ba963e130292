"""`api/v1`'s own behaviour, beyond Karpenter's ported cases: what the API server stores (defaults, pruning), the
order of its checks (a type or enum error keeps the CEL rules from running; transition rules only on updates), the
Kubernetes CEL functions, RuntimeValidate's messages, and that every rule of the shipped CRDs compiles."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.admission import RULES_NOT_CHECKED, admit, check, crd_of
from karpenter_policy.api.v1.cel import cel_violations, compiled_rule
from karpenter_policy.api.v1.crds import CRD_FILES, CRD_SOURCE_TAG, crd_version
from karpenter_policy.api.v1.nodepool import requirement_errors, runtime_violations
from karpenter_policy.api.v1.structural import defaulted
from karpenter_policy.api.violations import CEL_RULE, RUNTIME_VALIDATION, SCHEMA, render_path
from tests.profiles import deterministic


def nodepool(**spec: Any) -> dict[str, Any]:
    template_spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
    }
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": template_spec}, **spec}}


def ec2nodeclass(**spec: Any) -> dict[str, Any]:
    base = {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {**base, **spec}}


def test_the_crds_are_v1_14_1_and_each_kind_has_one() -> None:
    assert CRD_SOURCE_TAG == "v1.14.1"
    for api_version, kind in CRD_FILES:
        crd = crd_version(api_version, kind)
        assert crd is not None and crd.kind == kind and crd.status_subresource
    assert crd_of({"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner"}) is None


def _rules(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield from schema.get("x-kubernetes-validations") or ()
    for sub in (schema.get("properties") or {}).values():
        yield from _rules(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield from _rules(schema[key])


def test_every_rule_of_the_shipped_crds_compiles_with_karpenters_message() -> None:
    crds = [crd_version(api_version, kind) for api_version, kind in CRD_FILES]
    rules = [rule for crd in crds if crd is not None for rule in _rules(crd.schema)]
    assert len(rules) > 60
    for rule in rules:
        compiled = compiled_rule(rule["rule"], rule.get("message", ""))
        assert compiled.message == rule["message"]


def test_the_api_server_defaults_a_nodepool() -> None:
    stored = admit(nodepool()).stored
    assert stored["spec"]["disruption"] == {
        "consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]}
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_defaults_fill_inside_a_partial_object_and_keep_what_is_set() -> None:
    stored = admit(nodepool(disruption={"consolidateAfter": "1m", "budgets": [{"schedule": "@daily",
                                                                             "duration": "1h"}]})).stored
    assert stored["spec"]["disruption"] == {"consolidateAfter": "1m", "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                            "budgets": [{"schedule": "@daily", "duration": "1h", "nodes": "10%"}]}


def test_the_api_server_defaults_an_ec2nodeclass_metadata_options() -> None:
    stored = admit(ec2nodeclass()).stored
    assert stored["spec"]["metadataOptions"] == {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                                 "httpPutResponseHopLimit": 1, "httpTokens": "required"}


def test_an_unknown_field_is_refused_at_its_key_and_pruned_from_what_is_stored() -> None:
    doc = nodepool(wieght=10)
    admission = admit(doc)
    assert not admission.admitted
    [problem] = admission.refusals
    assert (problem.rule, render_path(problem.path), problem.at_key) == (SCHEMA, "spec.wieght", True)
    assert "wieght" not in admission.stored["spec"]


def test_status_is_ignored_as_the_status_subresource_is() -> None:
    admission = admit({**nodepool(), "status": {"nodes": "many", "bogus": True}})
    assert admission.admitted and "status" not in admission.stored


def test_a_null_without_a_default_is_pruned_and_with_one_defaulted() -> None:
    stored = admit(nodepool(weight=None, disruption=None)).stored
    assert "weight" not in stored["spec"]
    assert stored["spec"]["disruption"]["consolidateAfter"] == "0s"


def test_an_enum_error_keeps_the_cel_rules_from_running_as_the_api_server_does() -> None:
    doc = nodepool(disruption={"consolidateAfter": "0s", "consolidationPolicy": "Sometimes"})
    doc["spec"]["template"]["metadata"] = {"labels": {"karpenter.sh/custom": "x"}}  # a CEL refusal, not run
    refusals = admit(doc).refusals
    assert [(r.rule, r.severity) for r in refusals] == [(SCHEMA, "error"), (SCHEMA, "error")]
    assert refusals[0].message.startswith('Unsupported value: "Sometimes": supported values: "WhenEmpty"')
    assert refusals[1].message == RULES_NOT_CHECKED


def test_a_cel_refusal_carries_karpenters_message_at_the_rules_node() -> None:
    doc = nodepool()
    doc["spec"]["template"]["metadata"] = {"labels": {"team.karpenter.sh/owner": "x"}}
    [refusal] = admit(doc).refusals
    assert refusal.rule == CEL_RULE
    assert render_path(refusal.path) == "spec.template.metadata.labels"
    assert refusal.message == 'label domain "karpenter.sh" is restricted'


def test_the_aws_domain_rule_of_the_providers_crd_applies() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-colour", "operator": "In", "values": ["blue"]}]
    [refusal] = admit(doc).refusals
    assert render_path(refusal.path) == "spec.template.spec.requirements[0].key"
    assert refusal.message == 'label domain "karpenter.k8s.aws" is restricted'


def test_transition_rules_run_on_updates_only() -> None:
    old = nodepool()
    changed = copy.deepcopy(old)
    changed["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "example.com"
    assert admit(changed).admitted  # a create: no old object, no transition rule
    messages = [r.message for r in admit(changed, old).refusals]
    assert messages == ["nodeClassRef.group is immutable"]
    assert admit(old, old).admitted


def test_a_rule_that_cannot_be_evaluated_refuses_with_its_message_and_the_error() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [{"key": "example.com/size", "operator": "Gt", "values": ["x"]}]
    [refusal] = admit(doc).refusals
    assert refusal.message.startswith("requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive "
                                      "integer value (evaluation error:")


@pytest.mark.parametrize(("value", "passes"), [
    ("al2023@latest", True), ("al2023@v20240625", True), ("ubuntu@latest", False), ("al2023", False)])
def test_the_kubernetes_split_and_find_functions_as_the_alias_rules_use_them(value: str, passes: bool) -> None:
    doc = ec2nodeclass(amiSelectorTerms=[{"alias": value}], amiFamily="Custom")
    assert admit(doc).admitted is passes


def test_find_returns_the_empty_string_without_a_match_and_split_splits_characters_on_empty() -> None:
    schema = {"x-kubernetes-validations": [
        {"rule": "self.find('[0-9]+') == ''", "message": "no digits"},
        {"rule": "self.split('') == ['a', 'b']", "message": "characters"},
        {"rule": "self.split('@') == ['ab']", "message": "no separator"}]}
    assert cel_violations("ab", schema) == []
    assert [v.message for v in cel_violations("a1", schema)] == ["no digits", "characters", "no separator"]


def test_runtime_validation_refuses_an_invalid_label_key_the_crd_admits() -> None:
    doc = nodepool()
    doc["spec"]["template"]["metadata"] = {"labels": {"spaces are not allowed": "x"}}
    problems = check(doc)
    assert {p.rule for p in problems} == {RUNTIME_VALIDATION}
    assert all(p.path == ("spec", "template", "metadata", "labels", "spaces are not allowed") and p.at_key
               for p in problems)
    assert problems[0].message.startswith('invalid key name "spaces are not allowed" in labels, "name part must')


def test_runtime_validation_names_the_well_known_values() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["xspot"]}]
    [problem] = check(doc)
    assert problem.message == ("invalid value: no valid values found in [xspot] for karpenter.sh/capacity-type, "
                               "expected one of: [on-demand reserved spot], got: [xspot] in requirements, restricted")


def test_runtime_validation_reads_a_deprecated_key_as_its_ga_key() -> None:
    assert requirement_errors({"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In",
                               "values": ["a"]}) == []
    assert requirement_errors({"key": "beta.kubernetes.io/instance-type", "operator": "Gte", "values": ["1"]}) == []
    assert requirement_errors({"key": "example.com/size", "operator": "Lt", "values": ["1.5"]}) == [
        "key example.com/size with operator Lt must have a single positive integer value"]


def test_a_refused_nodepool_is_not_runtime_validated_too() -> None:
    doc = nodepool(weight=0)
    doc["spec"]["template"]["metadata"] = {"labels": {"spaces are not allowed": "x"}}
    assert [p.rule for p in check(doc)] == [SCHEMA]
    assert runtime_violations(doc)  # what the controller would say, once admitted


def test_taints_duplicated_across_taints_and_startup_taints_are_refused_at_run_time() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["taints"] = [{"key": "a", "effect": "NoSchedule"}]
    doc["spec"]["template"]["spec"]["startupTaints"] = [{"key": "a", "effect": "NoSchedule"}]
    [problem] = check(doc)
    assert (render_path(problem.path), problem.message) == (
        "spec.template.spec.startupTaints[0]", "duplicate taint Key/Effect pair a=NoSchedule")


_label_keys = st.sampled_from(["team", "example.com/tier", "karpenter.sh/capacity-type", "kubernetes.io/os"])
_nodepools = st.fixed_dictionaries({}, optional={
    "weight": st.integers(min_value=-5, max_value=120),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory", "nodes"]), st.sampled_from(["10", "1Gi", "x"]),
                              max_size=2),
    "disruption": st.fixed_dictionaries({}, optional={
        "consolidateAfter": st.sampled_from(["0s", "5m", "Never", "soon"]),
        "consolidationPolicy": st.sampled_from(["WhenEmpty", "WhenEmptyOrUnderutilized", "Sometimes"]),
        "budgets": st.lists(st.fixed_dictionaries({"nodes": st.sampled_from(["10%", "5", "101%"])}), max_size=2)}),
    "labels": st.dictionaries(_label_keys, st.sampled_from(["a", "b c"]), max_size=2),
})


@deterministic(60)
@given(_nodepools)
def test_what_the_api_server_stores_is_a_fixed_point(fields: dict[str, Any]) -> None:
    """Admitting the stored object again stores it unchanged and gives the same verdict: defaulting is idempotent
    and the checks read what is stored."""
    labels = fields.pop("labels", None)
    doc = nodepool(**fields)
    if labels is not None:
        doc["spec"]["template"]["metadata"] = {"labels": labels}
    first = admit(doc)
    again = admit(first.stored)
    crd = crd_of(doc)
    assert crd is not None
    assert again.stored == first.stored == defaulted(first.stored, crd.schema)
    if first.admitted:
        assert again.refusals == ()


_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                     st.floats(allow_nan=True), st.text(max_size=8), st.dates())
_hostile = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(["template", "spec", "requirements", "labels", "disruption",
                                               "budgets", "nodeClassRef", "key", "values", "taints", "limits"]),
                              st.integers(), st.text(max_size=4)), inner, max_size=4)), max_leaves=20)


@deterministic(200)
@given(_hostile, st.sampled_from([("karpenter.sh/v1", "NodePool"), ("karpenter.sh/v1", "NodeClaim"),
                                  ("karpenter.k8s.aws/v1", "EC2NodeClass")]))
def test_any_shape_is_refused_or_admitted_never_an_exception(spec: Any, kind: tuple[str, str]) -> None:
    """Whatever a file holds where a spec should be — wrong types, integer keys, dates, NaN, huge integers — the
    checks answer with findings (or none), each with a message, and never raise."""
    doc = {"apiVersion": kind[0], "kind": kind[1], "metadata": {"name": "x"}, "spec": spec}
    for problem in check(doc):
        assert problem.message


def test_a_missing_required_field_or_a_list_over_its_maximum_also_keeps_the_cel_rules_from_running() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [
        {"key": f"example.com/k{i}", "operator": "In", "values": []} for i in range(101)]  # CEL: In needs values
    refusals = admit(doc).refusals
    assert [r.message for r in refusals] == ["Too many: 101: must have at most 100 items", RULES_NOT_CHECKED]
    del doc["spec"]["template"]["spec"]["nodeClassRef"]
    doc["spec"]["template"]["spec"]["requirements"] = [{"key": "example.com/k", "operator": "In", "values": []}]
    assert [r.message for r in admit(doc).refusals] == ["Required value", RULES_NOT_CHECKED]


@pytest.mark.parametrize(("value", "admitted"), [
    ("5", True), ("+5", True), ("0", True), (" 5", False), ("5 ", False), ("5_0", False), ("0x10", False),
    ("٣", False), ("-1", False), ("99999999999999999999", False)])
def test_a_gt_value_is_an_integer_as_cel_go_reads_one(value: str, admitted: bool) -> None:
    """The CRD's `int(x.values[0]) >= 0` reads the value as Go's strconv.ParseInt does (celpy alone would take
    Python's int: spaces, underscores, other scripts' digits)."""
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [{"key": "example.com/size", "operator": "Gt", "values": [value]}]
    assert admit(doc).admitted is admitted


def test_an_integer_beyond_int64_is_a_number_to_the_schema_as_apimachinery_decodes_it() -> None:
    doc = nodepool(weight=int("9" * 4000))  # the loader reads up to 4,300 digits; the API server has int64 only
    refusals = admit(doc).refusals
    assert [(r.rule, r.message) for r in refusals][0] == (
        SCHEMA, 'Invalid value: "number": spec.weight in body must be of type integer: "number"'
    )
    assert admit(nodepool(weight=2**63 - 1)).refusals[0].message.endswith("should be less than or equal to 100")


def test_a_gt_value_beyond_int64_is_refused_by_the_rule_not_a_crash() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["9" * 4000]}
    ]
    (refusal,) = admit(doc).refusals
    assert refusal.rule == CEL_RULE and "(evaluation error: overflow)" in refusal.message
