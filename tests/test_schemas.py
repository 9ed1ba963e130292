"""Tests for the JSON Schemas of Karpenter v0.31 Provisioner and AWSNodeTemplate documents.

The same schema text is run by two validators: ``jsonschema`` (precise errors) and ``fastjsonschema``
(fast path).  Besides checking that good documents pass and bad ones fail at the right JSON path, these
tests make sure both validators accept exactly the same documents.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import pytest
import yaml

SCHEMA_DIR = Path(__file__).parent.parent / "schemas"
PROVISIONER = "provisioner.v1alpha5"
NODE_TEMPLATE = "awsnodetemplate.v1alpha1"
SCHEMA_NAMES = (PROVISIONER, NODE_TEMPLATE)

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?(?!\n)$"
)

ALLOWED_KEYWORDS = {
    "$schema", "$id", "$defs", "$ref", "title", "description",
    "type", "properties", "additionalProperties", "required", "items",
    "enum", "const", "minimum", "maximum", "minLength", "pattern", "minItems", "anyOf", "oneOf",
}  # fmt: skip


@functools.cache
def _schema_text(name: str) -> str:
    return (SCHEMA_DIR / f"{name}.json").read_text()


def load_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(_schema_text(name))
    return schema


@functools.cache
def reference_validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(name))


@functools.cache
def fast_validator(name: str) -> Any:
    return fastjsonschema.compile(load_schema(name))


def errors_of(name: str, doc: Any) -> list[jsonschema.ValidationError]:
    return sorted(reference_validator(name).iter_errors(doc), key=lambda e: e.json_path)


def fast_accepts(name: str, doc: Any) -> bool:
    try:
        fast_validator(name)(doc)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def load(text: str) -> Any:
    return yaml.safe_load(text)


# --------------------------------------------------------------------------------------------------
# Realistic documents
# --------------------------------------------------------------------------------------------------

# The "default" spot provisioner of the Karpenter getting-started guide (inline provider era).
DEFAULT_SPOT = load(
    """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["spot"]
  limits:
    resources:
      cpu: 1000
  provider:
    subnetSelector:
      karpenter.sh/discovery: my-cluster
    securityGroupSelector:
      karpenter.sh/discovery: my-cluster
  ttlSecondsAfterEmpty: 30
"""
)

# A provisioner for EMR on EKS Spark jobs, as in the AWS big-data blog post on Karpenter.
EMR_SPARK = load(
    """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
  namespace: karpenter
spec:
  kubeletConfiguration:
    containerRuntime: dockerd
  requirements:
    - key: "topology.kubernetes.io/zone"
      operator: In
      values: ["us-west-2b"]
    - key: "karpenter.sh/capacity-type"
      operator: In
      values: ["spot", "on-demand"]
    - key: "karpenter.k8s.aws/instance-family"
      operator: In
      values: ["c5", "c5a", "c5d", "c5ad", "m5", "c6i"]
    - key: "karpenter.k8s.aws/instance-size"
      operator: In
      values: ["2xlarge", "4xlarge", "8xlarge", "9xlarge"]
  limits:
    resources:
      cpu: "2k"
  labels:
    app: kspark
  provider:
    launchTemplate: karpenter-emr-eks-spark
    subnetSelector:
      karpenter.sh/discovery: emr-eks-karpenter
  ttlSecondsAfterEmpty: 30
"""
)

# The full example of the v0.31 Provisioner docs: every spec field, every kubeletConfiguration field.
FULL_PROVISIONER = load(
    """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  providerRef:
    name: default
  taints:
    - key: example.com/special-taint
      effect: NoSchedule
  startupTaints:
    - key: example.com/another-taint
      effect: NoSchedule
  labels:
    billing-team: my-team
  annotations:
    example.com/owner: "my-team"
  requirements:
    - key: "karpenter.k8s.aws/instance-category"
      operator: In
      values: ["c", "m", "r"]
    - key: "karpenter.k8s.aws/instance-cpu"
      operator: In
      values: ["4", "8", "16", "32"]
    - key: "karpenter.k8s.aws/instance-hypervisor"
      operator: In
      values: ["nitro"]
    - key: "karpenter.k8s.aws/instance-generation"
      operator: Gt
      values: ["2"]
    - key: "topology.kubernetes.io/zone"
      operator: In
      values: ["us-west-2a", "us-west-2b"]
    - key: "kubernetes.io/arch"
      operator: In
      values: ["arm64", "amd64"]
    - key: "karpenter.sh/capacity-type"
      operator: In
      values: ["spot", "on-demand"]
  kubeletConfiguration:
    clusterDNS: ["10.0.1.100"]
    containerRuntime: containerd
    systemReserved:
      cpu: 100m
      memory: 100Mi
      ephemeral-storage: 1Gi
    kubeReserved:
      cpu: 200m
      memory: 100Mi
      ephemeral-storage: 3Gi
    evictionHard:
      memory.available: 5%
      nodefs.available: 10%
      nodefs.inodesFree: 10%
    evictionSoft:
      memory.available: 500Mi
      nodefs.available: 15%
      nodefs.inodesFree: 15%
    evictionSoftGracePeriod:
      memory.available: 1m
      nodefs.available: 1m30s
      nodefs.inodesFree: 2m
    evictionMaxPodGracePeriod: 60
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
    podsPerCore: 2
    maxPods: 20
  limits:
    resources:
      cpu: "1000"
      memory: 1000Gi
  consolidation:
    enabled: true
  ttlSecondsUntilExpired: 2592000
  weight: 10
"""
)

# A provisioner as `kubectl get -o yaml` prints it: server-set metadata, status, and an old-style inline
# provider carrying its own apiVersion/kind and every AWS provider field.
EXPORTED_PROVISIONER = load(
    """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: legacy
  generateName: legacy-
  uid: 2f1c7a6e-0d5b-4f5e-9a51-1f3e0c1c9b11
  resourceVersion: "123456"
  generation: 3
  creationTimestamp: "2023-09-01T12:00:00Z"
  deletionTimestamp: null
  deletionGracePeriodSeconds: 0
  labels:
    team: platform
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: "{}"
  finalizers: ["karpenter.sh/termination"]
  ownerReferences:
    - apiVersion: argoproj.io/v1alpha1
      kind: Application
      name: karpenter-config
      uid: 7d0c1a3e-3b7c-4e2a-8a0e-2c7a4f0b5d22
  managedFields:
    - manager: kubectl-client-side-apply
      operation: Update
      apiVersion: karpenter.sh/v1alpha5
  selfLink: /apis/karpenter.sh/v1alpha5/provisioners/legacy
spec:
  provider:
    apiVersion: extensions.karpenter.sh/v1alpha1
    kind: AWS
    amiFamily: Bottlerocket
    context: reserved
    instanceProfile: KarpenterNodeInstanceProfile-my-cluster
    subnetSelector:
      aws-ids: "subnet-0123456789abcdef0,subnet-0fedcba9876543210"
    securityGroupSelector:
      Name: "eks-cluster-sg-*"
    tags:
      team: platform
      cost-center: "1234"
    metadataOptions:
      httpEndpoint: enabled
      httpProtocolIPv6: disabled
      httpPutResponseHopLimit: 2
      httpTokens: required
    blockDeviceMappings:
      - deviceName: /dev/xvdb
        ebs:
          deleteOnTermination: true
          encrypted: true
          iops: 3000
          kmsKeyID: arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab
          snapshotID: snap-0123456789abcdef0
          throughput: 125
          volumeSize: 100Gi
          volumeType: gp3
  taints:
    - key: dedicated
      value: batch
      effect: NoExecute
      timeAdded: "2023-09-01T12:00:00Z"
status:
  resources:
    cpu: "96"
    memory: 384Gi
  conditions:
    - type: Active
      status: "True"
"""
)

# An AWSNodeTemplate in the style of the v0.31 node-template docs.
NODE_TEMPLATE_DOC = load(
    """
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector:
    karpenter.sh/discovery: my-cluster
  securityGroupSelector:
    karpenter.sh/discovery: my-cluster
  amiSelector:
    aws::name: "amazon-eks-node-1.27-*"
    aws::owners: "amazon"
  amiFamily: AL2
  instanceProfile: KarpenterNodeInstanceProfile-my-cluster
  userData: |
    MIME-Version: 1.0
    Content-Type: multipart/mixed; boundary="BOUNDARY"

    --BOUNDARY
    Content-Type: text/x-shellscript; charset="us-ascii"

    #!/bin/bash
    echo "Running custom user data script"

    --BOUNDARY--
  tags:
    team: team-a
    app: team-a-app
  metadataOptions:
    httpEndpoint: enabled
    httpProtocolIPv6: disabled
    httpPutResponseHopLimit: 2
    httpTokens: required
  blockDeviceMappings:
    - deviceName: /dev/xvda
      ebs:
        volumeSize: 100Gi
        volumeType: gp3
        iops: 10000
        encrypted: true
        kmsKeyID: "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
        deleteOnTermination: true
        throughput: 125
        snapshotID: snap-0123456789
  detailedMonitoring: true
  context: reserved
status:
  subnets:
    - id: subnet-0123456789abcdef0
      zone: us-west-2a
"""
)

VALID_DOCUMENTS: dict[str, tuple[str, Any]] = {
    "default-spot-provisioner": (PROVISIONER, DEFAULT_SPOT),
    "emr-spark-provisioner": (PROVISIONER, EMR_SPARK),
    "full-provisioner": (PROVISIONER, FULL_PROVISIONER),
    "exported-provisioner": (PROVISIONER, EXPORTED_PROVISIONER),
    "node-template": (NODE_TEMPLATE, NODE_TEMPLATE_DOC),
}


# --------------------------------------------------------------------------------------------------
# Values that Karpenter's own rules check: the schema must leave them alone.
# --------------------------------------------------------------------------------------------------

_DELETE = object()


def changed(doc: Any, path: tuple[str | int, ...], value: Any = _DELETE) -> Any:
    """A deep copy of ``doc`` with the value at ``path`` replaced (or deleted)."""
    new = copy.deepcopy(doc)
    *parents, last = path
    target = new
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return new


def renamed(doc: Any, path: tuple[str | int, ...], new_name: str) -> Any:
    """A deep copy of ``doc`` with the key at ``path`` renamed (keeping its value)."""
    *parents, last = path
    value = doc
    for key in path:
        value = value[key]
    return changed(changed(doc, path), (*parents, new_name), copy.deepcopy(value))


UNCHECKED_VALUES: dict[str, tuple[str, Any]] = {
    "unknown-operator": (
        PROVISIONER,
        changed(DEFAULT_SPOT, ("spec", "requirements", 0, "operator"), "Within"),
    ),
    "exists-without-values": (
        PROVISIONER,
        changed(DEFAULT_SPOT, ("spec", "requirements", 0), {"key": "example.com/gpu", "operator": "Exists"}),
    ),
    "unknown-taint-effect": (
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "taints", 0, "effect"), "NoRun"),
    ),
    "unknown-ami-family": (
        PROVISIONER,
        changed(EXPORTED_PROVISIONER, ("spec", "provider", "amiFamily"), "Gentoo"),
    ),
    "odd-http-tokens": (
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "metadataOptions", "httpTokens"), "sometimes"),
    ),
    "hop-limit-out-of-range": (
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "metadataOptions", "httpPutResponseHopLimit"), 65),
    ),
    "unknown-volume-type": (
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "blockDeviceMappings", 0, "ebs", "volumeType"), "gp9"),
    ),
    "huge-volume-size": (
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "blockDeviceMappings", 0, "ebs", "volumeSize"), "64Ti"),
    ),
    "negative-ttl": (PROVISIONER, changed(DEFAULT_SPOT, ("spec", "ttlSecondsAfterEmpty"), -1)),
    "negative-expiry": (PROVISIONER, changed(FULL_PROVISIONER, ("spec", "ttlSecondsUntilExpired"), -30)),
}

# Other documents the schemas accept on purpose.
ACCEPTED_EDGE_CASES: dict[str, tuple[str, Any]] = {
    "integral-float-weight": (PROVISIONER, changed(FULL_PROVISIONER, ("spec", "weight"), 5.0)),
    "fractional-cpu-limit": (PROVISIONER, changed(DEFAULT_SPOT, ("spec", "limits", "resources", "cpu"), 0.5)),
    "empty-spec": (PROVISIONER, changed(DEFAULT_SPOT, ("spec",), {})),
    "empty-node-template-spec": (NODE_TEMPLATE, changed(NODE_TEMPLATE_DOC, ("spec",), {})),
    "status-is-free-form": (PROVISIONER, changed(DEFAULT_SPOT, ("status",), {"anything": [1, {"x": None}]})),
}


# --------------------------------------------------------------------------------------------------
# Invalid documents and where the error must be reported
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    schema: str
    doc: Any
    json_path: str  # where jsonschema must report the (single) error
    keyword: str  # the failing schema keyword
    fragment: str = ""  # text the error message must contain


KUBELET = ("spec", "kubeletConfiguration")
EBS = ("spec", "blockDeviceMappings", 0, "ebs")

INVALID_DOCUMENTS: dict[str, Bad] = {
    # unknown fields
    "typo-at-top-of-spec": Bad(
        PROVISIONER,
        renamed(DEFAULT_SPOT, ("spec", "ttlSecondsAfterEmpty"), "ttlSecondAfterEmpty"),
        "$.spec",
        "additionalProperties",
        "'ttlSecondAfterEmpty' was unexpected",
    ),
    "unknown-field-in-requirement": Bad(
        PROVISIONER,
        renamed(DEFAULT_SPOT, ("spec", "requirements", 0, "values"), "value"),
        "$.spec.requirements[0]",
        "additionalProperties",
        "'value' was unexpected",
    ),
    "unknown-field-in-taint": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "taints", 0, "operator"), "Exists"),
        "$.spec.taints[0]",
        "additionalProperties",
        "'operator' was unexpected",
    ),
    "unknown-field-in-startup-taint": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "startupTaints", 0, "tolerationSeconds"), 30),
        "$.spec.startupTaints[0]",
        "additionalProperties",
        "'tolerationSeconds' was unexpected",
    ),
    "unknown-field-in-provider": Bad(
        PROVISIONER,
        renamed(DEFAULT_SPOT, ("spec", "provider", "subnetSelector"), "subnetSelectorTerms"),
        "$.spec.provider",
        "additionalProperties",
        "'subnetSelectorTerms' was unexpected",
    ),
    "unknown-field-in-provider-ebs": Bad(
        PROVISIONER,
        changed(EXPORTED_PROVISIONER, ("spec", "provider", "blockDeviceMappings", 0, "ebs", "size"), 20),
        "$.spec.provider.blockDeviceMappings[0].ebs",
        "additionalProperties",
        "'size' was unexpected",
    ),
    "unknown-field-in-kubelet-configuration": Bad(
        PROVISIONER,
        renamed(FULL_PROVISIONER, (*KUBELET, "maxPods"), "maxPod"),
        "$.spec.kubeletConfiguration",
        "additionalProperties",
        "'maxPod' was unexpected",
    ),
    "unknown-field-in-metadata": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("metadata", "label"), {"team": "a"}),
        "$.metadata",
        "additionalProperties",
        "'label' was unexpected",
    ),
    "unknown-top-level-field": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("specs",), {}),
        "$",
        "additionalProperties",
        "'specs' was unexpected",
    ),
    "node-template-unknown-spec-field": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "role"), "KarpenterNodeRole-my-cluster"),
        "$.spec",
        "additionalProperties",
        "'role' was unexpected",
    ),
    "node-template-unknown-ebs-field": Bad(
        NODE_TEMPLATE,
        renamed(NODE_TEMPLATE_DOC, (*EBS, "kmsKeyID"), "kmsKeyId"),
        "$.spec.blockDeviceMappings[0].ebs",
        "additionalProperties",
        "'kmsKeyId' was unexpected",
    ),
    "node-template-unknown-metadata-option": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "metadataOptions", "instanceMetadataTags"), "enabled"),
        "$.spec.metadataOptions",
        "additionalProperties",
        "'instanceMetadataTags' was unexpected",
    ),
    # wrong types
    "values-not-a-list": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("spec", "requirements", 0, "values"), "spot"),
        "$.spec.requirements[0].values",
        "type",
        "'spot' is not of type 'array'",
    ),
    "weight-as-string": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "weight"), "5"),
        "$.spec.weight",
        "type",
        "'5' is not of type 'integer'",
    ),
    "weight-as-boolean": Bad(
        PROVISIONER, changed(FULL_PROVISIONER, ("spec", "weight"), True), "$.spec.weight", "type"
    ),
    "weight-zero": Bad(
        PROVISIONER, changed(FULL_PROVISIONER, ("spec", "weight"), 0), "$.spec.weight", "minimum"
    ),
    "weight-101": Bad(
        PROVISIONER, changed(FULL_PROVISIONER, ("spec", "weight"), 101), "$.spec.weight", "maximum"
    ),
    "label-value-a-list": Bad(
        PROVISIONER,
        changed(EMR_SPARK, ("spec", "labels", "app"), ["kspark"]),
        "$.spec.labels.app",
        "type",
        "is not of type 'string'",
    ),
    "ttl-as-duration-string": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("spec", "ttlSecondsAfterEmpty"), "30s"),
        "$.spec.ttlSecondsAfterEmpty",
        "type",
    ),
    "max-pods-negative": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, (*KUBELET, "maxPods"), -1),
        "$.spec.kubeletConfiguration.maxPods",
        "minimum",
    ),
    "image-gc-high-above-100": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, (*KUBELET, "imageGCHighThresholdPercent"), 101),
        "$.spec.kubeletConfiguration.imageGCHighThresholdPercent",
        "maximum",
    ),
    "cluster-dns-not-a-list": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, (*KUBELET, "clusterDNS"), "10.0.1.100"),
        "$.spec.kubeletConfiguration.clusterDNS",
        "type",
    ),
    "bad-grace-period-duration": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, (*KUBELET, "evictionSoftGracePeriod", "memory.available"), "90"),
        "$.spec.kubeletConfiguration.evictionSoftGracePeriod['memory.available']",
        "pattern",
    ),
    "consolidation-enabled-as-string": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "consolidation", "enabled"), "true"),
        "$.spec.consolidation.enabled",
        "type",
    ),
    "provider-not-an-object": Bad(
        PROVISIONER, changed(DEFAULT_SPOT, ("spec", "provider"), "aws"), "$.spec.provider", "type"
    ),
    "metadata-name-not-a-string": Bad(
        PROVISIONER, changed(DEFAULT_SPOT, ("metadata", "name"), 42), "$.metadata.name", "type"
    ),
    "node-template-hop-limit-as-string": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "metadataOptions", "httpPutResponseHopLimit"), "2"),
        "$.spec.metadataOptions.httpPutResponseHopLimit",
        "type",
    ),
    "node-template-detailed-monitoring-as-string": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "detailedMonitoring"), "enabled"),
        "$.spec.detailedMonitoring",
        "type",
    ),
    "node-template-block-devices-not-a-list": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "blockDeviceMappings"), {"deviceName": "/dev/xvda"}),
        "$.spec.blockDeviceMappings",
        "type",
    ),
    "node-template-tag-value-a-number": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("spec", "tags", "cost-center"), 1234),
        "$.spec.tags['cost-center']",
        "type",
    ),
    # missing required fields
    "requirement-without-operator": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("spec", "requirements", 0, "operator")),
        "$.spec.requirements[0]",
        "required",
        "'operator' is a required property",
    ),
    "taint-without-effect": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "taints", 0, "effect")),
        "$.spec.taints[0]",
        "required",
        "'effect' is a required property",
    ),
    "provider-ref-without-name": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, ("spec", "providerRef"), {"kind": "AWSNodeTemplate"}),
        "$.spec.providerRef",
        "required",
        "'name' is a required property",
    ),
    "metadata-without-name": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("metadata",), {"labels": {"team": "a"}}),
        "$.metadata",
        "required",
        "'name' is a required property",
    ),
    "provisioner-without-spec": Bad(
        PROVISIONER, changed(DEFAULT_SPOT, ("spec",)), "$", "required", "'spec' is a required property"
    ),
    # wrong apiVersion / kind
    "provisioner-wrong-api-version": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("apiVersion",), "karpenter.sh/v1beta1"),
        "$.apiVersion",
        "const",
        "'karpenter.sh/v1alpha5' was expected",
    ),
    "provisioner-wrong-kind": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("kind",), "NodePool"),
        "$.kind",
        "const",
        "'Provisioner' was expected",
    ),
    "node-template-wrong-api-version": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("apiVersion",), "karpenter.k8s.aws/v1beta1"),
        "$.apiVersion",
        "const",
        "'karpenter.k8s.aws/v1alpha1' was expected",
    ),
    "node-template-wrong-kind": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, ("kind",), "EC2NodeClass"),
        "$.kind",
        "const",
        "'AWSNodeTemplate' was expected",
    ),
    # bad quantities
    "bad-quantity-in-limits": Bad(
        PROVISIONER,
        changed(DEFAULT_SPOT, ("spec", "limits", "resources", "cpu"), "1 cpu"),
        "$.spec.limits.resources.cpu",
        "anyOf",
        "'1 cpu' is not valid under any of the given schemas",
    ),
    "bad-quantity-in-system-reserved": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, (*KUBELET, "systemReserved", "memory"), "100MB"),
        "$.spec.kubeletConfiguration.systemReserved.memory",
        "anyOf",
    ),
    "boolean-quantity-in-kube-reserved": Bad(
        PROVISIONER,
        changed(FULL_PROVISIONER, (*KUBELET, "kubeReserved", "cpu"), True),
        "$.spec.kubeletConfiguration.kubeReserved.cpu",
        "anyOf",
    ),
    "node-template-bad-volume-size": Bad(
        NODE_TEMPLATE,
        changed(NODE_TEMPLATE_DOC, (*EBS, "volumeSize"), "100 GiB"),
        "$.spec.blockDeviceMappings[0].ebs.volumeSize",
        "anyOf",
    ),
}


# --------------------------------------------------------------------------------------------------
# The schemas themselves
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_header(name: str) -> None:
    schema = load_schema(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"urn:karpenter-policy:schema:{name}"
    assert schema["title"] and schema["description"]
    assert schema["required"] == ["apiVersion", "kind", "metadata", "spec"]


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_file_is_pretty_printed(name: str) -> None:
    text = _schema_text(name)
    assert text == json.dumps(json.loads(text), indent=2) + "\n"


def _subschemas(node: Any, path: str = "#") -> Any:
    """Yield (path, schema) for every schema object in ``node`` (not for property-name maps)."""
    if not isinstance(node, dict):
        return
    yield path, node
    for keyword, value in node.items():
        if keyword in ("properties", "$defs"):
            for key, sub in value.items():
                yield from _subschemas(sub, f"{path}/{keyword}/{key}")
        elif keyword in ("items", "additionalProperties"):
            yield from _subschemas(value, f"{path}/{keyword}")
        elif keyword in ("anyOf", "oneOf"):
            for i, sub in enumerate(value):
                yield from _subschemas(sub, f"{path}/{keyword}/{i}")


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_uses_only_allowed_keywords(name: str) -> None:
    for path, sub in _subschemas(load_schema(name)):
        unexpected = set(sub) - ALLOWED_KEYWORDS
        assert not unexpected, f"{path} uses {sorted(unexpected)}"
        if "$ref" in sub:
            assert sub["$ref"].startswith("#/$defs/"), path
            # Only annotations beside $ref: fastjsonschema ignores $ref siblings.
            assert set(sub) <= {"$ref", "title", "description"}, path


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_field_and_definition_is_documented(name: str) -> None:
    schema = load_schema(name)
    for path, sub in _subschemas(schema):
        for key, field in sub.get("properties", {}).items():
            assert field.get("title") and field.get("description"), f"{path}/properties/{key}"
    for key, definition in schema["$defs"].items():
        assert definition.get("title") and definition.get("description"), f"#/$defs/{key}"


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_objects_with_known_fields_are_closed(name: str) -> None:
    for path, sub in _subschemas(load_schema(name)):
        if "properties" in sub:
            assert sub.get("additionalProperties") is False, path


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_quantity_definition(name: str) -> None:
    assert load_schema(name)["$defs"]["quantity"]["anyOf"] == [
        {"type": "number"},
        {"type": "string", "pattern": QUANTITY_PATTERN},
    ]


def _field_paths(schema: dict[str, Any]) -> set[str]:
    """Dotted paths of every named property reachable from the root, following local $refs."""
    defs = schema["$defs"]
    paths: set[str] = set()

    def walk(node: dict[str, Any], prefix: str) -> None:
        while "$ref" in node:
            node = defs[node["$ref"].removeprefix("#/$defs/")]
        for key, field in node.get("properties", {}).items():
            paths.add(prefix + key)
            walk(field, prefix + key + ".")
        if isinstance(node.get("items"), dict):
            walk(node["items"], prefix.rstrip(".") + "[].")

    walk(schema, "")
    return paths


# Every spec field of the v0.31 CRDs (karpenter.sh_provisioners.yaml and
# karpenter.k8s.aws_awsnodetemplates.yaml), plus the inline AWS provider of the Provisioner.
_EBS_FIELDS = [
    "deleteOnTermination", "encrypted", "iops", "kmsKeyID", "snapshotID", "throughput", "volumeSize",
    "volumeType",
]  # fmt: skip
_AWS_FIELDS = [
    "amiFamily", "apiVersion", "context", "instanceProfile", "kind", "launchTemplate",
    "securityGroupSelector", "subnetSelector", "tags", "metadataOptions",
    "metadataOptions.httpEndpoint", "metadataOptions.httpProtocolIPv6",
    "metadataOptions.httpPutResponseHopLimit", "metadataOptions.httpTokens",
    "blockDeviceMappings", "blockDeviceMappings[].deviceName", "blockDeviceMappings[].ebs",
    *(f"blockDeviceMappings[].ebs.{field}" for field in _EBS_FIELDS),
]  # fmt: skip
_TAINT_FIELDS = ["key", "value", "effect", "timeAdded"]
CRD_SPEC_FIELDS = {
    PROVISIONER: {
        "annotations", "labels", "consolidation", "consolidation.enabled",
        "kubeletConfiguration",
        *(f"kubeletConfiguration.{field}" for field in [
            "clusterDNS", "containerRuntime", "cpuCFSQuota", "evictionHard", "evictionMaxPodGracePeriod",
            "evictionSoft", "evictionSoftGracePeriod", "imageGCHighThresholdPercent",
            "imageGCLowThresholdPercent", "kubeReserved", "maxPods", "podsPerCore", "systemReserved",
        ]),
        "limits", "limits.resources",
        "provider", *(f"provider.{field}" for field in _AWS_FIELDS),
        "providerRef", "providerRef.apiVersion", "providerRef.kind", "providerRef.name",
        "requirements", "requirements[].key", "requirements[].operator", "requirements[].values",
        "taints", *(f"taints[].{field}" for field in _TAINT_FIELDS),
        "startupTaints", *(f"startupTaints[].{field}" for field in _TAINT_FIELDS),
        "ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "weight",
    },
    NODE_TEMPLATE: {*_AWS_FIELDS, "amiSelector", "detailedMonitoring", "userData"},
}  # fmt: skip
OBJECT_META_FIELDS = {
    "name", "namespace", "generateName", "labels", "annotations", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers",
    "ownerReferences", "managedFields", "selfLink",
}  # fmt: skip


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_covers_exactly_the_crd_fields(name: str) -> None:
    paths = _field_paths(load_schema(name))
    assert {p for p in paths if "." not in p and "[" not in p} == {
        "apiVersion", "kind", "metadata", "spec", "status",
    }  # fmt: skip
    assert {p.removeprefix("metadata.") for p in paths if p.startswith("metadata.")} == OBJECT_META_FIELDS
    assert {p.removeprefix("spec.") for p in paths if p.startswith("spec.")} == CRD_SPEC_FIELDS[name]


# --------------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "doc"), VALID_DOCUMENTS.values(), ids=VALID_DOCUMENTS.keys())
def test_realistic_documents_are_valid(name: str, doc: Any) -> None:
    assert [e.message for e in errors_of(name, doc)] == []


def test_full_provisioner_sets_every_kubelet_field() -> None:
    kubelet_fields = set(load_schema(PROVISIONER)["$defs"]["kubeletConfiguration"]["properties"])
    assert set(FULL_PROVISIONER["spec"]["kubeletConfiguration"]) == kubelet_fields


@pytest.mark.parametrize(("name", "doc"), UNCHECKED_VALUES.values(), ids=UNCHECKED_VALUES.keys())
def test_values_checked_by_karpenter_rules_are_left_to_them(name: str, doc: Any) -> None:
    assert [e.message for e in errors_of(name, doc)] == []


@pytest.mark.parametrize(("name", "doc"), ACCEPTED_EDGE_CASES.values(), ids=ACCEPTED_EDGE_CASES.keys())
def test_accepted_edge_cases(name: str, doc: Any) -> None:
    assert [e.message for e in errors_of(name, doc)] == []


@pytest.mark.parametrize("bad", INVALID_DOCUMENTS.values(), ids=INVALID_DOCUMENTS.keys())
def test_invalid_documents_fail_at_the_right_path(bad: Bad) -> None:
    errors = errors_of(bad.schema, bad.doc)
    assert [(e.json_path, e.validator) for e in errors] == [(bad.json_path, bad.keyword)], [
        e.message for e in errors
    ]
    assert bad.fragment in errors[0].message


@pytest.mark.parametrize(
    "value",
    ["1", "100m", "1.5Gi", "2k", "1e3", "1E-3", ".5", "1.", "+1", "-1", "500Mi", "128974848", 1000, 0.5, 0],
)
def test_quantity_accepts(value: Any) -> None:
    doc = changed(DEFAULT_SPOT, ("spec", "limits", "resources", "cpu"), value)
    assert errors_of(PROVISIONER, doc) == []
    assert fast_accepts(PROVISIONER, doc)


@pytest.mark.parametrize("value", ["", "1 cpu", "1GB", "1ki", "Gi", "1.2.3", "0x10", "1e", "1m ", None, [1]])
def test_quantity_rejects(value: Any) -> None:
    doc = changed(DEFAULT_SPOT, ("spec", "limits", "resources", "cpu"), value)
    assert [(e.json_path, e.validator) for e in errors_of(PROVISIONER, doc)] == [
        ("$.spec.limits.resources.cpu", "anyOf")
    ]
    assert not fast_accepts(PROVISIONER, doc)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("1m30s", True), ("90s", True), ("2h", True), ("0", True), ("1.5h", True), ("300ms", True),
        ("-1s", True), ("10us", True), ("10\u00b5s", True), ("1h2m3s4ms", True),
        ("90", False), ("1d", False), ("", False), ("1 m", False), ("m", False), (".s", False), (90, False),
    ],
)  # fmt: skip
def test_grace_period_durations(value: Any, valid: bool) -> None:
    doc = changed(FULL_PROVISIONER, (*KUBELET, "evictionSoftGracePeriod", "memory.available"), value)
    assert (errors_of(PROVISIONER, doc) == []) is valid
    assert fast_accepts(PROVISIONER, doc) is valid


# --------------------------------------------------------------------------------------------------
# jsonschema and fastjsonschema agree
# --------------------------------------------------------------------------------------------------

AGREEMENT_CASES: dict[str, tuple[str, Any, bool]] = {
    **{f"valid:{key}": (name, doc, True) for key, (name, doc) in VALID_DOCUMENTS.items()},
    **{f"unchecked:{key}": (name, doc, True) for key, (name, doc) in UNCHECKED_VALUES.items()},
    **{f"edge:{key}": (name, doc, True) for key, (name, doc) in ACCEPTED_EDGE_CASES.items()},
    **{f"invalid:{key}": (bad.schema, bad.doc, False) for key, bad in INVALID_DOCUMENTS.items()},
}


@pytest.mark.parametrize(("name", "doc", "expected"), AGREEMENT_CASES.values(), ids=AGREEMENT_CASES.keys())
def test_fastjsonschema_agrees_with_jsonschema(name: str, doc: Any, expected: bool) -> None:
    assert reference_validator(name).is_valid(doc) is expected
    assert fast_accepts(name, doc) is expected


@pytest.mark.parametrize("bad", INVALID_DOCUMENTS.values(), ids=INVALID_DOCUMENTS.keys())
def test_fastjsonschema_reports_the_same_location(bad: Bad) -> None:
    (error,) = errors_of(bad.schema, bad.doc)
    with pytest.raises(fastjsonschema.JsonSchemaValueException) as raised:
        fast_validator(bad.schema)(bad.doc)
    # fastjsonschema names the failing value like "data.spec.requirements[0]" (keys are not quoted).
    expected = "data" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in error.absolute_path)
    assert raised.value.name == expected
    assert raised.value.rule == bad.keyword


def test_trailing_newline_in_quantity() -> None:
    # Python's '$' also matches before a final newline; the patterns end in '(?!\\n)$' so that both
    # validators (fastjsonschema turns '$' into '\\Z') reject "1\\n" as Kubernetes does.
    doc = changed(DEFAULT_SPOT, ("spec", "limits", "resources", "cpu"), "1\n")
    assert reference_validator(PROVISIONER).is_valid(doc) is fast_accepts(PROVISIONER, doc)
