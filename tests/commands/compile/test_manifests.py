"""Manifests: v1alpha5 as defaulted, the v1 NodePool / EC2NodeClass conversion field by field, the ConfigMap,
Flux protection and byte-stable YAML."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from karpenter_policy.commands.compile.manifests import (
    FLUX_SUBSTITUTE_ANNOTATION,
    Issue,
    V1Options,
    configmap,
    dump_yaml,
    duration,
    invalid_name,
    node_template_manifest,
    protect_from_flux,
    provisioner_manifest,
    to_v1,
    yaml_stream,
)

# Patterns and rules of the v1 CRDs (aws/karpenter-provider-aws pkg/apis/crds) that the conversion must meet.
V1_DURATION = re.compile(r"^(([0-9]+(s|m|h))+)|(Never)$")
V1_VOLUME_SIZE = re.compile(
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}"
    r"|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)
NODEPOOL_SPEC_FIELDS = {"template", "disruption", "limits", "weight"}
TEMPLATE_SPEC_FIELDS = {"requirements", "nodeClassRef", "taints", "startupTaints", "expireAfter",
                        "terminationGracePeriod"}
NODECLASS_SPEC_FIELDS = {"amiFamily", "amiSelectorTerms", "associatePublicIPAddress", "blockDeviceMappings", "context",
                         "detailedMonitoring", "instanceProfile", "instanceStorePolicy", "kubelet", "metadataOptions",
                         "role", "securityGroupSelectorTerms", "subnetSelectorTerms", "tags", "userData"}
KUBELET_FIELDS = {"clusterDNS", "cpuCFSQuota", "evictionHard", "evictionMaxPodGracePeriod", "evictionSoft",
                  "evictionSoftGracePeriod", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
                  "kubeReserved", "maxPods", "podsPerCore", "systemReserved"}


def assert_valid_v1(obj: dict[str, Any]) -> None:
    """The structural rules of the v1 CRDs (required fields, patterns, CEL rules) for one object."""
    spec = obj["spec"]
    if obj["kind"] == "NodePool":
        assert obj["apiVersion"] == "karpenter.sh/v1"
        assert set(spec) <= NODEPOOL_SPEC_FIELDS
        template = spec["template"]["spec"]
        assert set(template) <= TEMPLATE_SPEC_FIELDS
        assert {"requirements", "nodeClassRef"} <= set(template)
        assert set(template["nodeClassRef"]) == {"group", "kind", "name"}
        assert V1_DURATION.fullmatch(template["expireAfter"])
        assert V1_DURATION.fullmatch(spec["disruption"]["consolidateAfter"])
        assert spec["disruption"]["consolidationPolicy"] in ("WhenEmpty", "WhenEmptyOrUnderutilized")
        assert "weight" not in spec or 1 <= spec["weight"] <= 100
        for requirement in template["requirements"]:
            if requirement["operator"] == "In":
                assert requirement["values"]
            if requirement["operator"] in ("Gt", "Lt"):
                assert len(requirement["values"]) == 1 and int(requirement["values"][0]) >= 0
            if requirement["operator"] in ("Exists", "DoesNotExist"):
                assert "values" not in requirement
            assert not requirement["key"].startswith(("beta.kubernetes.io/", "failure-domain.beta."))
    else:
        assert (obj["apiVersion"], obj["kind"]) == ("karpenter.k8s.aws/v1", "EC2NodeClass")
        assert set(spec) <= NODECLASS_SPEC_FIELDS
        assert {"amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"} <= set(spec)
        assert ("role" in spec) != ("instanceProfile" in spec)
        for field in ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms"):
            assert 1 <= len(spec[field]) <= 30
            for term in spec[field]:
                assert "id" not in term or len(term) == 1
                assert "alias" not in term or len(term) == 1
        aliases = [t for t in spec["amiSelectorTerms"] if "alias" in t]
        assert not aliases or len(spec["amiSelectorTerms"]) == 1
        assert aliases or spec.get("amiFamily") in ("AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019",
                                                     "Windows2022")
        assert set(spec.get("kubelet", {})) <= KUBELET_FIELDS
        for mapping in spec.get("blockDeviceMappings", []):
            size = mapping.get("ebs", {}).get("volumeSize")
            assert size is None or V1_VOLUME_SIZE.match(size)


def provisioner(name: str = "web", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name}, "spec": spec}


def node_template(name: str = "default", **spec: Any) -> dict[str, Any]:
    base = {"subnetSelector": {"karpenter.sh/discovery": "demo"},
            "securityGroupSelector": {"karpenter.sh/discovery": "demo"}, "instanceProfile": "NodeProfile"}
    return {"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "metadata": {"name": name},
            "spec": {**base, **spec}}


def convert(provisioners: list[dict[str, Any]], templates: list[dict[str, Any]],
            options: V1Options | None = None) -> tuple[dict[tuple[str, str], dict[str, Any]], list[Issue]]:
    objects, issues = to_v1(provisioners, {t["metadata"]["name"]: t for t in templates}, options)
    for obj in objects:
        assert_valid_v1(obj)
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}, issues


# --- v1alpha5 -----------------------------------------------------------------------------------------------


def test_v1alpha5_provisioner_is_defaulted_and_cleaned() -> None:
    data = provisioner(providerRef={"name": "default"}, requirements=[
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}])
    data["status"] = {"resources": {}}
    data["metadata"]["resourceVersion"] = "42"
    out = provisioner_manifest(data)
    assert "status" not in out and "resourceVersion" not in out["metadata"]
    assert [r["key"] for r in out["spec"]["requirements"]] == [
        "karpenter.k8s.aws/instance-family", "kubernetes.io/os", "kubernetes.io/arch", "karpenter.sh/capacity-type"]
    assert data["spec"]["requirements"] == [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                             "values": ["m5"]}], "the input is not modified"
    assert node_template_manifest(node_template()) == node_template()


# --- v1: NodePool -------------------------------------------------------------------------------------------


def test_nodepool_field_by_field() -> None:
    data = provisioner(
        "batch",
        requirements=[
            {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5", "m5"]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
            {"key": "team", "operator": "Exists", "values": ["ignored"]},
        ],
        labels={"workload": "batch", "team": "data"},
        annotations={"example.com/owner": "data"},
        taints=[{"key": "workload", "value": "batch", "effect": "NoSchedule"}],
        startupTaints=[{"key": "example.com/agent", "effect": "NoExecute"}],
        ttlSecondsAfterEmpty=30,
        ttlSecondsUntilExpired=2592000,
        limits={"resources": {"cpu": "2k", "memory": "4000Gi"}},
        weight=50,
        providerRef={"name": "default"},
    )
    data["metadata"]["annotations"] = {"karpenter-policy/version": "1.2.3"}
    objects, issues = convert([data], [node_template()])
    assert issues == []
    assert objects[("NodePool", "batch")] == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "batch", "annotations": {"karpenter-policy/version": "1.2.3"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"workload": "batch", "team": "data"},
                             "annotations": {"example.com/owner": "data"}},
                "spec": {
                    "requirements": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5", "m5"]},
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
                        {"key": "team", "operator": "Exists"},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    ],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "taints": [{"key": "workload", "value": "batch", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": "example.com/agent", "effect": "NoExecute"}],
                    "expireAfter": "720h",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
            "limits": {"cpu": "2k", "memory": "4000Gi"},
            "weight": 50,
        },
    }


@pytest.mark.parametrize(
    ("spec", "disruption", "expire"),
    [
        ({"consolidation": {"enabled": True}}, {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                                "consolidateAfter": "0s"}, "Never"),
        ({"ttlSecondsAfterEmpty": 300, "ttlSecondsUntilExpired": 90},
         {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"}, "1m30s"),
        ({}, {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}, "Never"),
        ({"consolidation": {"enabled": False}, "ttlSecondsAfterEmpty": 0},
         {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}, "Never"),
    ],
)
def test_disruption_and_expiry(spec: dict[str, Any], disruption: dict[str, str], expire: str) -> None:
    objects, _ = convert([provisioner(providerRef={"name": "default"}, **spec)], [node_template()])
    pool = objects[("NodePool", "web")]["spec"]
    assert pool["disruption"] == disruption
    assert pool["template"]["spec"]["expireAfter"] == expire
    assert "weight" not in pool and "limits" not in pool and "metadata" not in pool["template"]


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (30, "30s"), (60, "1m"), (3661, "1h1m1s"),
                                               (2592000, "720h"), (604800, "168h")])
def test_duration(seconds: int, text: str) -> None:
    assert duration(seconds) == text and V1_DURATION.fullmatch(text)


# --- v1: EC2NodeClass ---------------------------------------------------------------------------------------


def test_ec2nodeclass_field_by_field() -> None:
    template = node_template(
        "platform",
        amiFamily="Bottlerocket",
        subnetSelector={"karpenter.sh/discovery": "prod", "tier": "private,internal"},
        securityGroupSelector={"aws-ids": "sg-0123456789abcdef0, sg-0123456789abcdef1"},
        tags={"team": "platform"},
        userData="[settings.kubernetes]\nmax-pods = 110\n",
        metadataOptions={"httpTokens": "optional"},
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi", "volumeType": "gp3", "encrypted": True}},
            {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "107374182400", "volumeType": "gp3"}},
            {"deviceName": "/dev/xvdc", "ebs": {"volumeSize": "1500M", "volumeType": "gp3"}},
        ],
        detailedMonitoring=True,
    )
    users = [provisioner(providerRef={"name": "platform"}, kubeletConfiguration={"maxPods": 110})]
    objects, issues = convert(users, [template])
    assert objects[("EC2NodeClass", "platform")] == {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "platform"},
        "spec": {
            "subnetSelectorTerms": [
                {"tags": {"karpenter.sh/discovery": "prod", "tier": "private"}},
                {"tags": {"karpenter.sh/discovery": "prod", "tier": "internal"}},
            ],
            "securityGroupSelectorTerms": [{"id": "sg-0123456789abcdef0"}, {"id": "sg-0123456789abcdef1"}],
            "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
            "instanceProfile": "NodeProfile",
            "userData": "[settings.kubernetes]\nmax-pods = 110\n",
            "detailedMonitoring": True,
            "tags": {"team": "platform"},
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 2, "httpTokens": "optional"},
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi", "volumeType": "gp3", "encrypted": True}},
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}},
                {"deviceName": "/dev/xvdc", "ebs": {"volumeSize": "2Gi", "volumeType": "gp3"}},
            ],
            "kubelet": {"maxPods": 110},
        },
    }
    assert [(i.kind, i.name, i.violation.severity, i.violation.path) for i in issues] == [
        ("AWSNodeTemplate", "platform", "warning", ("spec", "blockDeviceMappings", 2, "ebs", "volumeSize"))]


def test_ami_selector_terms() -> None:
    by_name = node_template("named", amiFamily="AL2",
                            amiSelector={"aws::name": "eks-node-*", "aws::owners": "self,123456789012", "env": "p"})
    by_id = node_template("ids", amiFamily="Custom", amiSelector={"aws::ids": "ami-0123456789abcdef0,ami-0123abcd"})
    by_tag = node_template("tagged", amiSelector={"team": "platform"})
    objects, issues = convert([], [by_name, by_id, by_tag])
    assert issues == []
    named = objects[("EC2NodeClass", "named")]["spec"]
    assert named["amiFamily"] == "AL2"
    assert named["amiSelectorTerms"] == [
        {"owner": "self", "name": "eks-node-*", "tags": {"env": "p"}},
        {"owner": "123456789012", "name": "eks-node-*", "tags": {"env": "p"}},
    ]
    ids = objects[("EC2NodeClass", "ids")]["spec"]
    assert ids["amiSelectorTerms"] == [{"id": "ami-0123456789abcdef0"}, {"id": "ami-0123abcd"}]
    assert ids["amiFamily"] == "Custom"
    tagged = objects[("EC2NodeClass", "tagged")]["spec"]  # v0.31 searched owners self and amazon by default
    assert tagged["amiSelectorTerms"] == [{"owner": "self", "tags": {"team": "platform"}},
                                          {"owner": "amazon", "tags": {"team": "platform"}}]
    assert tagged["amiFamily"] == "AL2"


@pytest.mark.parametrize(("family", "alias"), [(None, "al2@latest"), ("AL2", "al2@latest"),
                                               ("Windows2022", "windows2022@latest")])
def test_ami_family_alias(family: str | None, alias: str) -> None:
    template = node_template() if family is None else node_template(amiFamily=family)
    objects, _ = convert([], [template])
    spec = objects[("EC2NodeClass", "default")]["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": alias}] and "amiFamily" not in spec


def test_ubuntu() -> None:
    with_selector = node_template("with", amiFamily="Ubuntu", amiSelector={"aws::ids": "ami-0123456789abcdef0"})
    objects, issues = convert([], [with_selector])
    assert objects[("EC2NodeClass", "with")]["spec"]["amiFamily"] == "AL2"
    assert [(i.violation.severity, i.violation.path) for i in issues] == [("warning", ("spec", "amiFamily"))]
    _, issues = to_v1([], {"without": node_template("without", amiFamily="Ubuntu")})
    assert [(i.violation.severity, i.violation.rule) for i in issues] == [("error", "v1-conversion")]
    assert "Ubuntu" in issues[0].violation.message


def test_what_v1_cannot_express_is_an_error() -> None:
    template = node_template(launchTemplate="lt-nodes", tags={"karpenter.sh/nodepool": "x"})
    del template["spec"]["securityGroupSelector"], template["spec"]["instanceProfile"]
    _, issues = to_v1([], {"default": template})
    paths = sorted((i.violation.path, i.violation.severity) for i in issues)
    assert paths == [
        (("spec",), "error"),  # neither role nor instanceProfile
        (("spec", "launchTemplate"), "error"),
        (("spec", "tags", "karpenter.sh/nodepool"), "error"),
    ]


@pytest.mark.parametrize(
    ("options", "expected"),
    [(V1Options(default_instance_profile="Fallback"), {"instanceProfile": "Fallback"}),
     (V1Options(node_role="KarpenterNodeRole-prod"), {"role": "KarpenterNodeRole-prod"})],
)
def test_role_or_instance_profile_from_options(options: V1Options, expected: dict[str, str]) -> None:
    template = node_template()
    del template["spec"]["instanceProfile"]
    objects, issues = convert([], [template], options)
    spec = objects[("EC2NodeClass", "default")]["spec"]
    assert issues == [] and {k: spec[k] for k in ("role", "instanceProfile") if k in spec} == expected
    objects, _ = convert([], [node_template()], options)  # the template's own profile wins
    assert objects[("EC2NodeClass", "default")]["spec"]["instanceProfile"] == "NodeProfile"


def test_kubelet_moves_to_the_node_class_and_splits_when_provisioners_differ() -> None:
    same = [provisioner("a", providerRef={"name": "default"}, kubeletConfiguration={"maxPods": 50}),
            provisioner("b", providerRef={"name": "default"}, kubeletConfiguration={"maxPods": 50})]
    objects, _ = convert(same, [node_template()])
    assert objects[("EC2NodeClass", "default")]["spec"]["kubelet"] == {"maxPods": 50}
    assert {k for k in objects if k[0] == "EC2NodeClass"} == {("EC2NodeClass", "default")}

    differ = [provisioner("a", providerRef={"name": "default"}),
              provisioner("b", providerRef={"name": "default"},
                          kubeletConfiguration={"maxPods": 50, "containerRuntime": "dockerd"})]
    objects, issues = convert(differ, [node_template()])
    assert "kubelet" not in objects[("EC2NodeClass", "default")]["spec"]
    assert objects[("EC2NodeClass", "default-b")]["spec"]["kubelet"] == {"maxPods": 50}
    assert objects[("NodePool", "a")]["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    assert objects[("NodePool", "b")]["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default-b"
    assert [(i.kind, i.name, i.violation.severity) for i in issues] == [("Provisioner", "b", "warning")]


def test_inline_provider_becomes_a_node_class_named_after_the_provisioner() -> None:
    inline = provisioner("inline", provider={"subnetSelector": {"karpenter.sh/discovery": "demo"},
                                             "securityGroupSelector": {"karpenter.sh/discovery": "demo"},
                                             "instanceProfile": "P", "apiVersion": "extensions.karpenter.sh/v1alpha1",
                                             "kind": "AWS"})
    objects, issues = convert([inline], [])
    assert issues == []
    assert objects[("NodePool", "inline")]["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "inline"
    spec = objects[("EC2NodeClass", "inline")]["spec"]
    assert "apiVersion" not in spec and "kind" not in spec and spec["instanceProfile"] == "P"


def test_unresolved_reference_keeps_the_name() -> None:
    objects, issues = convert([provisioner(providerRef={"name": "elsewhere"})], [])
    assert objects[("NodePool", "web")]["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "elsewhere"
    assert issues == [] and len(objects) == 1


# --- ConfigMap, Flux, YAML ----------------------------------------------------------------------------------


def test_configmap() -> None:
    cm = configmap("platform", "constraints", {"b.json": "{}", "a.json": "{}", "index.json": "{}"})
    assert cm["metadata"] == {"name": "constraints", "namespace": "platform",
                              "labels": {"app.kubernetes.io/part-of": "karpenter-policy"}}
    assert list(cm["data"]) == ["a.json", "b.json", "index.json"]


@pytest.mark.parametrize(("value", "namespace", "ok"), [
    ("karpenter-policy", True, True), ("a.b", True, False), ("a.b", False, True), ("Upper", False, False),
    ("x" * 64, True, False), ("-x", False, False)])
def test_configmap_names(value: str, namespace: bool, ok: bool) -> None:
    assert (invalid_name(value, namespace) is None) == ok


def test_flux_protection() -> None:
    template = node_template(userData="#!/bin/bash\necho ${HOME}\n")
    annotated = protect_from_flux(template)
    assert annotated["metadata"]["annotations"] == {FLUX_SUBSTITUTE_ANNOTATION: "disabled"}
    assert annotated["spec"]["userData"] == "#!/bin/bash\necho ${HOME}\n"
    escaped = protect_from_flux(template, escape=True)
    assert "annotations" not in escaped["metadata"] and escaped["spec"]["userData"] == "#!/bin/bash\necho $${HOME}\n"
    plain = node_template()
    assert protect_from_flux(plain) == plain and protect_from_flux(plain, escape=True) == plain
    assert "annotations" not in template["metadata"], "the input is not modified"


def test_yaml_is_stable_and_round_trips() -> None:
    obj = node_template(userData="line one\nline two\n", tags={"b": "2", "a": "'quoted'", "long": "x" * 300})
    text = dump_yaml(obj)
    assert text == dump_yaml(yaml.safe_load(text))
    assert yaml.safe_load(text) == obj
    assert "userData: |\n    line one\n    line two\n" in text
    assert text.index("apiVersion") < text.index("kind") < text.index("metadata") < text.index("spec")
    assert "\r" not in text and "x" * 300 in text  # no folding
    stream = yaml_stream([obj, node_template("other")])
    assert stream.startswith("---\n") and [d["metadata"]["name"] for d in yaml.safe_load_all(stream)] == [
        "default", "other"]
