"""PinningPolicy: schema, validation rules, matching, resolving, what a workload lacks, check's findings."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import pytest

from karpenter_policy.checks.options import PolicyOptions
from karpenter_policy.checks.pinning import (
    apply_changes,
    bind_provisioners,
    changes_for,
    covers,
    describe_toleration,
    pinning_findings,
    resolve,
    rules_from_documents,
    rules_of,
    spark_role,
    validate_pinning_policy,
    workload_of,
)
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.model.taints import Taint

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "schemas" / "pinningpolicy.v1alpha1.json"
SCHEMA = json.loads(SCHEMA_FILE.read_text())

POLICY: dict[str, Any] = {
    "apiVersion": "karpenter-policy.dev/v1alpha1",
    "kind": "PinningPolicy",
    "metadata": {"name": "emr-spark"},
    "spec": {
        "rules": [
            {
                "name": "drivers",
                "description": "drivers never on spot",
                "match": {"sparkRole": "driver", "namespaces": ["emr"], "labels": {"app": "spark"}},
                "nodeSelector": {"app": "kspark", "karpenter.sh/capacity-type": "on-demand"},
            },
            {
                "name": "executors",
                "match": {"sparkRole": "executor", "kinds": ["Pod"], "name": "exec-*", "names": ["*-1", "*-2"]},
                "nodeSelector": {"app": "kspark", "karpenter.sh/capacity-type": "spot"},
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            },
            {"name": "gpu", "match": {}, "provisioner": "gpu"},
        ]
    },
}


# --- the schema ---------------------------------------------------------------------------------------------


def test_schema_is_valid_and_written_like_the_others() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA_FILE.read_text() == json.dumps(SCHEMA, indent=2) + "\n"
    assert SCHEMA["$id"] == "urn:karpenter-policy:schema:pinningpolicy.v1alpha1"
    assert SCHEMA["required"] == ["apiVersion", "kind", "metadata", "spec"]
    allowed = {
        "$schema", "$id", "$defs", "$ref", "title", "description", "type", "properties", "additionalProperties",
        "required", "items", "enum", "const", "minimum", "maximum", "minLength", "pattern", "minItems", "anyOf",
        "oneOf",
    }  # fmt: skip

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        assert set(node) <= allowed, path
        if "properties" in node:
            assert node.get("additionalProperties") is False, path
            for key, sub in node["properties"].items():
                assert sub.get("title") and sub.get("description"), f"{path}/{key}"
                walk(sub, f"{path}/{key}")
        for keyword in ("items", "additionalProperties"):
            walk(node.get(keyword), f"{path}/{keyword}")
        for key, sub in node.get("$defs", {}).items():
            walk(sub, f"{path}/$defs/{key}")

    walk(SCHEMA, "#")


BAD = {
    "unknown rule field": (("spec", "rules", 0, "nodeSelectors"), {"a": "b"}),
    "unknown spark role": (("spec", "rules", 0, "match", "sparkRole"), "coordinator"),
    "unknown kind": (("spec", "rules", 0, "match", "kinds"), ["Rollout"]),
    "no rules": (("spec", "rules"), []),
    "non-string selector value": (("spec", "rules", 0, "nodeSelector", "app"), 1),
    "bad toleration effect": (("spec", "rules", 1, "tolerations", 0, "effect"), "NoEvict"),
    "empty name glob": (("spec", "rules", 0, "match", "name"), ""),
}


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize("case", BAD, ids=BAD)
def test_both_validators_reject_bad_documents(case: str) -> None:
    bad = _set(POLICY, *BAD[case])
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(bad))
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        fastjsonschema.compile(SCHEMA)(bad)


def test_both_validators_accept_the_policy() -> None:
    assert not list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(POLICY))
    fastjsonschema.compile(SCHEMA)(POLICY)


def test_validate_schema_checks_pinning_policies(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: karpenter-policy.dev/v1alpha1\nkind: PinningPolicy\nmetadata: {name: p}\nspec:\n  rules:\n"
        "  - match: {sparkRole: coordinator}\n    nodeSelector: {a: b}\n"
    )
    (tmp_path / "wrong-version.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: PinningPolicy\nmetadata: {name: q}\nspec: {rules: []}\n"
    )
    (tmp_path / "misspelt.yaml").write_text(
        "apiVersion: karpenter-policy.dev/v1alpha1\nkind: PiningPolicy\nmetadata: {name: r}\nspec: {rules: []}\n"
    )
    report = validate_paths([str(tmp_path)])
    found = sorted((Path(f.file).name, f.line, f.rule, f.message) for f in report.findings)
    assert [(file, line, rule) for file, line, rule, _ in found] == [
        ("misspelt.yaml", 2, "schema"),
        ("p.yaml", 6, "schema"),
        ("wrong-version.yaml", 1, "schema"),
    ]
    assert [message for *_, message in found] == [
        "unknown kind 'PiningPolicy' in karpenter-policy.dev/v1alpha1; did you mean PinningPolicy?",
        'spec.rules[0].match.sparkRole "coordinator" is not one of driver, executor',
        "PinningPolicy must have apiVersion karpenter-policy.dev/v1alpha1, not karpenter.sh/v1alpha5",
    ]


def test_the_rules_a_schema_cannot_express() -> None:
    doc = copy.deepcopy(POLICY)
    doc["metadata"]["name"] = "Emr_Spark"
    rules = doc["spec"]["rules"]
    rules[1]["name"] = "drivers"
    rules[0]["match"]["labels"] = {"bad key!": "x", "ok": "bad value!"}
    rules[1]["tolerations"] = [
        {"key": "spot", "operator": "Exists", "value": "x"},
        {"operator": "Equal", "value": "y"},
        {"key": "t", "effect": "NoSchedule", "tolerationSeconds": 5},
    ]
    rules.append({"name": "empty", "match": {}})
    rules.append(
        {"name": "both", "match": {}, "provisioner": "p", "nodeSelector": {"karpenter.sh/provisioner-name": "q"}}
    )
    messages = sorted((v.path, v.message.split(":")[0]) for v in validate_pinning_policy(doc))
    assert [path for path, _ in messages] == sorted(
        [
            ("metadata", "name"),
            ("spec", "rules", 0, "match", "labels", "bad key!"),
            ("spec", "rules", 0, "match", "labels", "ok"),
            ("spec", "rules", 1, "name"),
            ("spec", "rules", 1, "tolerations", 0, "value"),
            ("spec", "rules", 1, "tolerations", 1),
            ("spec", "rules", 1, "tolerations", 2, "tolerationSeconds"),
            ("spec", "rules", 3),
            ("spec", "rules", 4, "nodeSelector", "karpenter.sh/provisioner-name"),
        ]
    )
    assert validate_pinning_policy(POLICY) == []


def test_the_emr_example_validates() -> None:
    report = validate_paths([str(ROOT / "examples/pinning/policies")])
    assert (report.errors, report.warnings, dict(report.kinds)) == (0, 0, {
        "AWSNodeTemplate": 1, "PinningPolicy": 1, "Provisioner": 1
    })


# --- matching -----------------------------------------------------------------------------------------------

RULES = rules_of(POLICY)


def test_spark_role_from_the_label_or_the_container() -> None:
    assert spark_role(
        {"labels": {"spark-role": "executor"}}, {"containers": [{"name": "spark-kubernetes-driver"}]}
    ) == ("executor")
    assert spark_role({}, {"containers": [{"name": "sidecar"}, {"name": "spark-kubernetes-driver"}]}) == "driver"
    assert spark_role({}, {"containers": [{"name": "spark-kubernetes-executor"}]}) == "executor"
    assert spark_role({}, {"containers": [{"name": "app"}]}) is None
    assert spark_role({}, None) is None


@pytest.mark.parametrize(
    ("metadata", "kind", "namespace", "name", "spec", "expected"),
    [
        ({"labels": {"spark-role": "driver", "app": "spark"}}, "Pod", "emr", "d", None, ["drivers", "gpu"]),
        ({"labels": {"spark-role": "driver", "app": "spark"}}, "Pod", None, "d", None, ["gpu"]),  # default namespace
        ({"labels": {"spark-role": "driver"}}, "Pod", "emr", "d", None, ["gpu"]),  # matchLabels
        ({}, "Pod", None, "exec-1", {"containers": [{"name": "spark-kubernetes-executor"}]}, ["executors", "gpu"]),
        ({}, "Pod", None, "exec-3", {"containers": [{"name": "spark-kubernetes-executor"}]}, ["gpu"]),  # names
        ({}, "Pod", None, "other-1", {"containers": [{"name": "spark-kubernetes-executor"}]}, ["gpu"]),  # name glob
        ({}, "Pod", None, None, {"containers": [{"name": "spark-kubernetes-executor"}]}, ["gpu"]),  # no name
        ({}, "Job", None, "exec-1", {"containers": [{"name": "spark-kubernetes-executor"}]}, ["gpu"]),  # kinds
    ],
)
def test_matching(
    metadata: dict[str, Any], kind: str, namespace: str | None, name: str | None, spec: Any, expected: list[str]
) -> None:
    pins = resolve(RULES, metadata, kind, namespace, name, spec)
    assert [r.name for r in pins.rules] == expected


def test_resolve_gives_the_pins_the_webhook_sets() -> None:
    pins = resolve(RULES, {"labels": {"spark-role": "executor"}}, "Pod", "emr", "exec-2")
    assert dict(pins.node_selector) == {"app": "kspark", "karpenter.sh/capacity-type": "spot"}
    assert [dict(t) for t in pins.tolerations] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    nothing = resolve(RULES, {}, "Deployment", "web", "web")
    assert (dict(nothing.node_selector), list(nothing.tolerations)) == ({}, [])


def test_conflicts_resolve_to_the_first_rule() -> None:
    rules = rules_of(
        {
            "metadata": {"name": "p"},
            "spec": {
                "rules": [
                    {"name": "a", "match": {}, "nodeSelector": {"tier": "one", "x": "1"}},
                    {"name": "b", "match": {"kinds": ["Pod"]}, "nodeSelector": {"tier": "two", "x": "1"}},
                ]
            },
        }
    )
    pins = resolve(rules, {}, "Pod", None, "p")
    assert pins.node_selector == {"tier": "one", "x": "1"}
    [conflict] = pins.conflicts
    assert conflict.key == "tier" and conflict.message().startswith(
        "PinningPolicy/p rule a pins nodeSelector tier=one but PinningPolicy/p rule b pins tier=two"
    )


@pytest.mark.parametrize(
    ("have", "want", "expected"),
    [
        ({"key": "a", "operator": "Equal", "value": "1", "effect": "NoSchedule"},
         {"key": "a", "value": "1", "effect": "NoSchedule"}, True),
        ({"key": "a", "value": "1"}, {"key": "a", "value": "1", "effect": "NoSchedule"}, True),  # any effect
        ({"key": "a", "value": "1", "effect": "NoSchedule"}, {"key": "a", "value": "1"}, False),
        ({"key": "a", "operator": "Exists"}, {"key": "a", "value": "1", "effect": "NoExecute"}, True),
        ({"operator": "Exists"}, {"key": "b", "operator": "Exists"}, True),
        ({"key": "a", "value": "2"}, {"key": "a", "value": "1"}, False),
        ({"key": "a", "value": "1"}, {"key": "a", "operator": "Exists"}, False),
        ({"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
         {"key": "a", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "a", "operator": "Exists", "effect": "NoExecute"},
         {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}, True),
    ],
)  # fmt: skip
def test_covers(have: dict[str, Any], want: dict[str, Any], expected: bool) -> None:
    assert covers(have, want) is expected


def test_describe_toleration() -> None:
    assert describe_toleration({"key": "a", "value": "1", "effect": "NoSchedule"}) == "a=1:NoSchedule"
    assert describe_toleration({"key": "a", "operator": "Exists"}) == "a (any effect) (Exists)"
    assert describe_toleration({"operator": "Exists"}) == "every taint (Exists)"


def test_changes_and_applying_them() -> None:
    spec: dict[str, Any] = {
        "nodeSelector": {"karpenter.sh/capacity-type": "on-demand", "app": 1},
        "tolerations": [{"key": "other", "operator": "Exists"}],
    }
    pins = resolve(RULES, {"labels": {"spark-role": "executor"}}, "Pod", None, "exec-1")
    changes = changes_for(spec, pins)
    assert [(c.field, c.key, c.value, c.current) for c in changes] == [
        ("nodeSelector", "app", "kspark", "1"),
        ("nodeSelector", "karpenter.sh/capacity-type", "spot", "on-demand"),
        ("tolerations", "", "", None),
    ]
    apply_changes(spec, changes)
    assert spec["nodeSelector"] == {"karpenter.sh/capacity-type": "spot", "app": "kspark"}
    assert changes_for(spec, pins) == []


def test_bind_provisioners() -> None:
    rules, findings = bind_provisioners(
        RULES, {"gpu": [Taint("nvidia.com/gpu", "NoSchedule", "true"), Taint("d", "NoExecute")]}
    )
    gpu = rules[-1]
    assert gpu.node_selector == {"karpenter.sh/provisioner-name": "gpu"}
    assert list(gpu.tolerations) == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "d", "operator": "Exists", "effect": "NoExecute"},
    ]
    assert findings == []
    _, findings = bind_provisioners(RULES, {"default": []})
    assert [f.rule for f in findings] == ["pinning-conflict"]
    assert "names provisioner 'gpu', which the policies do not define (known: default)" in findings[0].message


def test_workload_of_every_kind() -> None:
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "n", "namespace": "ops"},
        "spec": {
            "jobTemplate": {"spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}}
        },
    }
    workload = workload_of(cron)
    assert workload is not None
    assert (workload.kind, workload.namespace, workload.name, dict(workload.labels)) == (
        "CronJob",
        "ops",
        "n",
        {"a": "b"},
    )
    assert workload.spec_path == ("spec", "jobTemplate", "spec", "template", "spec")
    assert workload_of({"apiVersion": "v1", "kind": "Service", "spec": {}}) is None
    assert workload_of({"apiVersion": "v1", "kind": "Pod", "spec": {"nodeName": "n1"}}) is None  # placed already
    bare = workload_of({"kind": "Pod", "spec": {"containers": [{"name": "spark-kubernetes-driver"}]}})
    assert bare is not None and bare.name is None and bare.ref_in("apps/driver.yaml") == "Pod/driver"


# --- check's findings ---------------------------------------------------------------------------------------


def test_pinning_findings_point_at_the_pod_spec() -> None:
    text = (ROOT / "examples/pinning/apps/karpenter-executor-pod-template.yaml").read_text()
    policy = (ROOT / "examples/pinning/policies/spark-pinning.yaml").read_text()
    rules = rules_from_documents(parse("policies/spark-pinning.yaml", policy))
    findings = pinning_findings(rules, parse("apps/executor.yaml", text))
    assert [(f.rule, f.line, f.column, f.message) for f in findings] == [
        (
            "pinning-violation",
            7,
            5,
            "nodeSelector lacks app: kspark, required by PinningPolicy/emr-spark rule spark-executors-on-spot "
            "(karpenter-policy pin --write adds it)",
        ),
        (
            "pinning-violation",
            9,
            39,
            "nodeSelector karpenter.sh/capacity-type is 'on-demand'; PinningPolicy/emr-spark rule "
            "spark-executors-on-spot requires 'spot' (karpenter-policy pin --write sets it)",
        ),
    ]
    assert all(f.related and f.related[0].file == "policies/spark-pinning.yaml" for f in findings)
    assert findings[0].related[0].line == 17


def test_a_pinning_policy_does_not_hide_a_node_template_of_the_same_name(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: win}\nspec:\n"
        "  requirements: [{key: kubernetes.io/os, operator: In, values: [windows]}]\n  providerRef: {name: win}\n---\n"
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: win}\nspec:\n"
        "  amiFamily: Windows2022\n  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n---\n"
        "apiVersion: karpenter-policy.dev/v1alpha1\nkind: PinningPolicy\nmetadata: {name: win}\nspec:\n"
        "  rules: [{match: {}, nodeSelector: {kubernetes.io/os: windows}}]\n"
    )
    report, [checked] = check_paths([str(tmp_path)])
    assert report.errors == 0, report.findings
    assert checked.verdict.value == "sat"  # the nodes run Windows: the template's AMI family, not the policy's


def test_check_reports_unpinned_workloads_until_they_are_pinned(tmp_path: Path) -> None:
    from karpenter_policy.commands.check import check_command
    from karpenter_policy.commands.pin import pin_paths, write_atomically

    apps = tmp_path / "apps"
    apps.mkdir()
    for source in (ROOT / "examples/pinning/apps").iterdir():
        (apps / source.name).write_text(source.read_text())
    policies = str(ROOT / "examples/pinning/policies")
    before = json.loads(check_command([policies], "json", PolicyOptions(workload_paths=(str(apps),))).stdout)
    violations = [(Path(f["file"]).name, f["line"]) for f in before["findings"] if f["rule"] == "pinning-violation"]
    assert violations == [
        ("karpenter-driver-pod-template.yaml", 6),
        ("karpenter-driver-pod-template.yaml", 6),
        ("karpenter-executor-pod-template.yaml", 7),
        ("karpenter-executor-pod-template.yaml", 9),
    ]
    assert {f["object"] for f in before["findings"]} == {
        "Pod/karpenter-driver-pod-template",
        "Pod/karpenter-executor-pod-template",
    }
    rules = rules_from_documents(parse("p.yaml", (ROOT / "examples/pinning/policies/spark-pinning.yaml").read_text()))
    for plan in pin_paths([str(apps)], rules).changed:
        write_atomically(plan.file, plan.updated)
    after = check_command([policies], "json", PolicyOptions(workload_paths=(str(apps),)))
    assert after.exit_code == 0, after.stdout
    placed = {w["object"]: w["launch"]["capacity_type"] for w in json.loads(after.stdout)["workloads"]}
    assert placed == {"Pod/karpenter-driver-pod-template": "on-demand", "Pod/karpenter-executor-pod-template": "spot"}
