"""Hypothesis strategies that produce hostile policy files for the fuzz test of `validate`.

Three families, each a `Case` (the bytes of one file plus what the generator knows about them):

- `mutated_cases`: realistic Provisioner / AWSNodeTemplate documents (and the odd ConfigMap) built as dicts,
  then mutated as a careless or malicious author would (fields deleted, misspelt, retyped; unknown keys;
  restricted labels; odd operators and Gt/Lt values; huge, negative, non-finite numbers; empty, unicode and
  very long strings), and dumped with PyYAML in a random style. A final "known-bad" mutation, when drawn,
  makes the file certainly invalid under Karpenter's rules, whatever else was done to it; with no mutation
  at all the file is certainly valid.
- `raw_cases`: byte-level damage to valid YAML text: flipped bytes, truncation, tabs, anchors and aliases,
  document separators, Python and binary tags, BOMs, NUL bytes, invalid UTF-8, duplicated or shuffled lines.
- `hostile_cases`: a fixed corpus of the nastiest files (`NASTY`: YAML bombs, deep nesting, 5 MB, ...),
  optionally damaged further.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import yaml
from hypothesis import strategies as st

PROVISIONER_API_VERSION = "karpenter.sh/v1alpha5"
NODE_TEMPLATE_API_VERSION = "karpenter.k8s.aws/v1alpha1"
PROVISIONER = "Provisioner"
NODE_TEMPLATE = "AWSNodeTemplate"
#: (apiVersion, kind) of the policy objects and their schema files in `schemas/`.
POLICY_SCHEMAS = {
    (PROVISIONER_API_VERSION, PROVISIONER): "provisioner.v1alpha5.json",
    (NODE_TEMPLATE_API_VERSION, NODE_TEMPLATE): "awsnodetemplate.v1alpha1.json",
}
POLICY_KINDS = frozenset({PROVISIONER, NODE_TEMPLATE})

#: Every rule id `validate` may report (the stable rule ids of `api.violations` that `validate` can find).
KNOWN_RULES = frozenset({
    "parse-error", "schema", "invalid-requirement", "restricted-label", "invalid-spec", "deprecated-label",
    "deprecated-provider",
    "duplicate-name", "unresolved-reference", "template-error", "quantity-out-of-range", "ttl-churn",
    "invalid-user-data", "placeholder", "aws-id-shape",
})

MAX_FILE_BYTES = 4 * 1024 * 1024
#: yaml.safe_dump's dumper, in C when libyaml is there (the pure-Python one is slow on long strings).
DUMPER: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


T = TypeVar("T")

# Drawing from strategies built once: building (and validating) a strategy per draw costs more than the draw.
BOOLEANS = st.booleans()
_INTEGERS: dict[tuple[int, int], st.SearchStrategy[int]] = {}


def integers(low: int, high: int) -> st.SearchStrategy[int]:
    strategy = _INTEGERS.get((low, high))
    if strategy is None:
        strategy = _INTEGERS[(low, high)] = st.integers(low, high)
    return strategy


def pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    """One of `options` (shrinks towards the first)."""
    return options[draw(integers(0, len(options) - 1))]


@dataclass(frozen=True)
class Case:
    """One generated file: its bytes, how it was made, and what is certain about it."""

    content: bytes
    description: str
    #: Why the file is certainly invalid (a known-bad mutation still in place), or "" when not known to be.
    must_fail: str = ""
    #: True when the file is certainly valid (realistic documents left untouched).
    expect_valid: bool = False

    def __repr__(self) -> str:  # shown by hypothesis on failure: keep it readable even for 5 MB files
        content = self.content if len(self.content) <= 2000 else self.content[:2000] + b"...(truncated)"
        return (f"Case(description={self.description!r}, must_fail={self.must_fail!r}, "
                f"expect_valid={self.expect_valid!r}, len={len(self.content)}, content={content!r})")


# --------------------------------------------------------------------------------------------------------
# Realistic documents

NAMES = ("default", "gpu", "spot-batch", "arm64", "team-a-workers", "emr-spark", "x", "a1-b2")
LABEL_VALUES = ("a", "team-a", "blue", "v1.2.3", "us_east", "x9", "platform", "Z")
WELL_KNOWN_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "kubernetes.io/arch": ("amd64", "arm64"),
    "kubernetes.io/os": ("linux", "windows"),
    "karpenter.sh/capacity-type": ("spot", "on-demand"),
    "node.kubernetes.io/instance-type": ("m5.large", "c6g.xlarge", "r5.2xlarge", "p3.8xlarge"),
    "topology.kubernetes.io/zone": ("us-east-1a", "us-east-1b", "us-east-1c"),
    "karpenter.k8s.aws/instance-family": ("c5", "m5", "r6i", "g5", "c7g"),
    "karpenter.k8s.aws/instance-category": ("c", "m", "r", "g", "p"),
    "karpenter.k8s.aws/instance-size": ("large", "xlarge", "metal", "2xlarge"),
    "karpenter.k8s.aws/instance-hypervisor": ("nitro", "xen"),
    "failure-domain.beta.kubernetes.io/zone": ("us-east-1a",),  # deprecated: a warning, not an error
}
INTEGER_REQUIREMENT_KEYS = (
    "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-memory",
    "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-pods",
)
CUSTOM_LABEL_KEYS = ("team", "example.com/pool", "node.kubernetes.io/role", "kops.k8s.io/ig", "cost-center")
TAINT_KEYS = ("dedicated", "nvidia.com/gpu", "example.com/spot", "node.cilium.io/agent-not-ready", "workload")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
EVICTION_SIGNALS = ("memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "pid.available")
AMI_FAMILIES = ("AL2", "Bottlerocket", "Ubuntu", "Windows2019", "Windows2022")
SUBNET_SELECTORS = (
    {"karpenter.sh/discovery": "my-cluster"},
    {"Name": "private-*", "kubernetes.io/role/internal-elb": "1"},
    {"aws-ids": "subnet-0123456789abcdef0,subnet-0fedcba9876543210"},
)
SECURITY_GROUP_SELECTORS = ({"karpenter.sh/discovery": "my-cluster"}, {"aws-ids": "sg-0123456789abcdef0"})

names = st.sampled_from(NAMES)
label_values = st.sampled_from(LABEL_VALUES)


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, Any]:
    kind = pick(draw, ("well-known", "integer", "custom", "exists"))
    if kind == "well-known":
        key = pick(draw, sorted(WELL_KNOWN_REQUIREMENTS))
        options = WELL_KNOWN_REQUIREMENTS[key]
        values = sorted({pick(draw, options) for _ in range(draw(integers(1, 3)))})
        return {"key": key, "operator": pick(draw, ("In", "NotIn")), "values": values}
    if kind == "integer":
        key = pick(draw, INTEGER_REQUIREMENT_KEYS)
        value = str(draw(integers(0, 4096)))
        return {"key": key, "operator": pick(draw, ("Gt", "Lt")), "values": [value]}
    if kind == "custom":
        key = pick(draw, CUSTOM_LABEL_KEYS)
        values = sorted({pick(draw, LABEL_VALUES) for _ in range(draw(integers(1, 3)))})
        return {"key": key, "operator": pick(draw, ("In", "NotIn")), "values": values}
    key = pick(draw, CUSTOM_LABEL_KEYS + tuple(WELL_KNOWN_REQUIREMENTS)[:3])
    return {"key": key, "operator": pick(draw, ("Exists", "DoesNotExist"))}


REQUIREMENTS = requirements()


@st.composite
def taint_lists(draw: st.DrawFn) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """`taints` and `startupTaints` with no key+effect pair repeated across both."""
    pairs = sorted({(pick(draw, TAINT_KEYS), pick(draw, TAINT_EFFECTS)) for _ in range(draw(integers(0, 4)))})
    taints: list[dict[str, str]] = []
    startup: list[dict[str, str]] = []
    for key, effect in pairs:
        taint = {"key": key, "effect": effect}
        if draw(BOOLEANS):
            taint["value"] = pick(draw, ("true", "gpu", "batch"))
        (taints if draw(BOOLEANS) else startup).append(taint)
    return taints, startup


TAINT_LISTS = taint_lists()


@st.composite
def kubelet_configurations(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if draw(BOOLEANS):
        config["maxPods"] = draw(integers(1, 737))
    if draw(BOOLEANS):
        config["podsPerCore"] = draw(integers(0, 110))
    if draw(BOOLEANS):
        config["clusterDNS"] = ["10.100.0.10"]
    if draw(BOOLEANS):
        config["containerRuntime"] = pick(draw, ("containerd", "dockerd"))
    if draw(BOOLEANS):
        config["systemReserved"] = {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"}
    if draw(BOOLEANS):
        config["kubeReserved"] = {"cpu": pick(draw, ("200m", "1", 0.5)), "memory": "512Mi"}
    if draw(BOOLEANS):
        config["evictionHard"] = {pick(draw, EVICTION_SIGNALS): pick(draw, ("5%", "100Mi", "10%"))}
    if draw(BOOLEANS):
        signal = pick(draw, EVICTION_SIGNALS)
        config["evictionSoft"] = {signal: "15%"}
        config["evictionSoftGracePeriod"] = {signal: pick(draw, ("1m", "30s", "1m30s"))}
        config["evictionMaxPodGracePeriod"] = 60
    if draw(BOOLEANS):
        low = draw(integers(0, 100))
        config["imageGCLowThresholdPercent"] = low
        config["imageGCHighThresholdPercent"] = draw(integers(low, 100))
    if draw(BOOLEANS):
        config["cpuCFSQuota"] = draw(BOOLEANS)
    return config


KUBELET_CONFIGURATIONS = kubelet_configurations()


@st.composite
def aws_specs(draw: st.DrawFn, inline: bool) -> dict[str, Any]:
    """A valid inline `provider` (inline) or AWSNodeTemplate `spec`."""
    spec: dict[str, Any] = {"subnetSelector": dict(pick(draw, SUBNET_SELECTORS))}
    if not inline and draw(integers(0, 5)) == 0:
        spec["launchTemplate"] = "my-launch-template"
        return spec
    spec["securityGroupSelector"] = dict(pick(draw, SECURITY_GROUP_SELECTORS))
    if draw(BOOLEANS):
        spec["amiFamily"] = pick(draw, AMI_FAMILIES if inline else (*AMI_FAMILIES, "Custom"))
        if spec["amiFamily"] == "Custom" or (not inline and draw(BOOLEANS)):
            spec["amiSelector"] = dict(pick(draw, ({"aws-ids": "ami-0123456789abcdef0"}, {"Name": "my-ami-*"})))
    if draw(BOOLEANS):
        spec["instanceProfile"] = "KarpenterNodeInstanceProfile"
    if draw(BOOLEANS):
        spec["tags"] = {"team": draw(label_values), "cost-center": "1234"}
    if draw(BOOLEANS):
        spec["metadataOptions"] = {
            "httpEndpoint": pick(draw, ("enabled", "disabled")),
            "httpProtocolIPv6": pick(draw, ("enabled", "disabled")),
            "httpPutResponseHopLimit": draw(integers(1, 64)),
            "httpTokens": pick(draw, ("required", "optional")),
        }
    if draw(BOOLEANS):
        ebs: dict[str, Any] = {
            "volumeSize": pick(draw, ("20Gi", "100Gi", "1T", "2000G", "64T")),
            "volumeType": pick(draw, ("gp2", "gp3", "io2", "st1")),
        }
        if draw(BOOLEANS):
            ebs.update({"encrypted": True, "deleteOnTermination": True, "iops": 3000, "throughput": 125})
        spec["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "ebs": ebs}]
    if not inline and draw(BOOLEANS):  # what the family reads: Bottlerocket TOML, else a script (#19)
        toml = spec.get("amiFamily") == "Bottlerocket"
        spec["userData"] = "[settings.kubernetes]\nkube-api-qps = 30\n" if toml else "#!/bin/bash\necho 'hello'\n"
    if not inline and draw(BOOLEANS):
        spec["detailedMonitoring"] = draw(BOOLEANS)
    return spec


INLINE_PROVIDERS = aws_specs(inline=True)
NODE_TEMPLATE_SPECS = aws_specs(inline=False)


def metadata(draw: st.DrawFn, name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if draw(BOOLEANS):
        meta["labels"] = {"app.kubernetes.io/managed-by": "karpenter-policy"}
    if draw(BOOLEANS):
        meta["annotations"] = {"karpenter-policy/version": "2026.11.1"}
    return meta


def provisioner(draw: st.DrawFn, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    reqs = [draw(REQUIREMENTS) for _ in range(draw(integers(0, 5)))]
    if reqs:
        spec["requirements"] = reqs
    if draw(BOOLEANS):
        spec["labels"] = {pick(draw, CUSTOM_LABEL_KEYS): pick(draw, LABEL_VALUES) for _ in range(draw(integers(1, 3)))}
    taints, startup = draw(TAINT_LISTS)
    if taints:
        spec["taints"] = taints
    if startup:
        spec["startupTaints"] = startup
    if draw(BOOLEANS):
        spec["consolidation"] = {"enabled": True}
    elif draw(BOOLEANS):
        spec["ttlSecondsAfterEmpty"] = draw(integers(0, 86400))
        if draw(BOOLEANS):
            spec["consolidation"] = {"enabled": False}
    if draw(BOOLEANS):
        spec["ttlSecondsUntilExpired"] = draw(integers(0, 2592000))
    if draw(BOOLEANS):
        spec["weight"] = draw(integers(1, 100))
    if draw(BOOLEANS):
        spec["limits"] = {"resources": {"cpu": pick(draw, (1000, "1000", "500m", 2.5)), "memory": "4000Gi"}}
    if draw(BOOLEANS):
        spec["kubeletConfiguration"] = draw(KUBELET_CONFIGURATIONS)
    if draw(integers(0, 3)) == 0:
        spec["provider"] = draw(INLINE_PROVIDERS)
    else:
        spec["providerRef"] = {"name": draw(names)}
    if draw(BOOLEANS):
        spec["annotations"] = {"example.com/owner": "team-a"}
    return {"apiVersion": PROVISIONER_API_VERSION, "kind": PROVISIONER, "metadata": metadata(draw, name), "spec": spec}


def node_template(draw: st.DrawFn, name: str) -> dict[str, Any]:
    return {
        "apiVersion": NODE_TEMPLATE_API_VERSION, "kind": NODE_TEMPLATE, "metadata": metadata(draw, name),
        "spec": draw(NODE_TEMPLATE_SPECS),
    }


def other_kind(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}


@st.composite
def documents(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1-3 realistic documents with distinct names per kind (a valid stream)."""
    count = pick(draw, (1, 1, 1, 2, 3))
    docs: list[dict[str, Any]] = []
    for index in range(count):
        name = f"{draw(names)}-{index}"
        maker = pick(draw, ("provisioner", "provisioner", "node-template", "other"))
        if maker == "provisioner":
            docs.append(provisioner(draw, name))
        elif maker == "node-template":
            docs.append(node_template(draw, name))
        else:
            docs.append(other_kind(name))
    return docs


DOCUMENTS = documents()


# --------------------------------------------------------------------------------------------------------
# Weird values

SPECIAL_STRINGS = (
    "", " ", "\n", "\t", "~", "null", "Null", "NULL", "yes", "No", "on", "OFF", "y", "n", "true", "False",
    "0x1F", "0o17", "0b101", "1e3", "1_000", ".inf", "-.inf", ".nan", "12:30:00", "190:20:30", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "=", "<<", "*a", "&a", "!!int", "- a", "a: b", "{", "[", "]", "}", "#x", "%",
    "@", "`", "'", '"', "\\", "|", ">", "\x85", "\u2028", "\u2029", "\ufeff", "\u202e", "\U0001f642", "ß", "İ",
    "ﬀ", "\x7f", "\x01", "\x1b[31m", "\r", "a\n", "a\nb", " a", "a ", "a" * 70, "a" * 300, "In", "in", "Gt", "Lt",
    "NoSchedule", "kubernetes.io/arch", "karpenter.sh/provisioner-name", "kubernetes.io/hostname", "-1", "+1",
    "0", "00", "1.5", "9" * 30, "١٢٣", "１２", "Ⅻ", "-0", "+0", "1Gi", "-5Gi", "1Ki", "100Ti", "1e999", "NaN",
    "%0A::error::x", "::error file=x::y", "</failure>", "]]>", "<![CDATA[", "&amp;", "a,b", "a:b", "a/b/c", "/",
)
HUGE_NUMBERS = (0, -1, 1, 2**31, 2**31 - 1, 2**63, -(2**63), 2**64, 10**30, -(10**30), 10**400, 1e308, -1e308,
                5e-324, -0.0, 0.1, 1.5, -2.5, 1e16)

scalar_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(HUGE_NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=80),
    st.sampled_from(SPECIAL_STRINGS),
    st.integers(1, 20_000).map(lambda n: "x" * n),
)
weird_values = st.recursive(
    scalar_values,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(SPECIAL_STRINGS), st.text(max_size=10)), inner, max_size=4),
    ),
    max_leaves=8,
)
#: Mapping keys, not only strings: YAML allows ints, bools, nulls and floats as keys.
#: A new document in place of one: a scalar or collection, or the document wrapped in a list or mapping.
replacement_documents = st.one_of(weird_values, st.just("list"), st.just("items"))
unicode_text = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=30)
weird_keys = st.one_of(
    st.sampled_from(SPECIAL_STRINGS),
    st.text(max_size=15),
    st.sampled_from(("spec", "metadata", "kind", "apiVersion", "requirements", "labels", "key", "values", "name")),
    st.sampled_from((0, 1, -1, True, False, None, 1.5, float("inf"))),
    st.integers(1, 300).map(lambda n: "k" * n),
)

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in", "notin", "IN", "Equals", "", " In", "Gte",
             "NotExists", "Between", "!=", "==")
random_operators = st.one_of(st.sampled_from(OPERATORS), st.text(max_size=8), weird_values)
random_numbers = st.one_of(st.sampled_from(HUGE_NUMBERS), st.integers(), st.floats())
GT_LT_VALUES: tuple[Any, ...] = (
    [], ["0"], ["1"], ["-1"], ["+1"], ["1.5"], ["abc"], ["1", "2"], [""], ["0x10"], ["1e3"], [" 1"], ["١"],
    ["99999999999999999999999999"], [1], [None], "5", 5, None, ["4\n"],
)

#: Restricted label keys Karpenter refuses in `spec.labels`.
RESTRICTED_LABEL_KEYS = (
    "kubernetes.io/custom", "karpenter.sh/provisioner-name", "karpenter.sh/custom", "karpenter.k8s.aws/custom",
    "foo.k8s.io/x", "kubernetes.io/hostname", "karpenter.sh/emptiness-timestamp", "sub.kubernetes.io/x",
)


def _typo(draw: st.DrawFn, key: Any) -> Any:
    """A misspelling of `key` (a string), or a new key of another type."""
    if not isinstance(key, str) or not key:
        return draw(weird_keys)
    how = pick(draw, ("swap", "drop", "double", "case", "insert", "space", "unicode"))
    i = draw(integers(0, len(key) - 1))
    if how == "swap" and len(key) > 1:
        j = min(i + 1, len(key) - 1)
        chars = list(key)
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)
    if how == "drop":
        return key[:i] + key[i + 1:]
    if how == "double":
        return key[:i] + key[i] + key[i:]
    if how == "case":
        return key.swapcase()
    if how == "space":
        return pick(draw, (" ", "\t")) + key if i % 2 else key + " "
    if how == "unicode":
        return key[:i] + pick(draw, ("\u0435", "\u200b", "\u00e9", "\u0131")) + key[i + 1:]
    return key[:i] + pick(draw, "abcxyz-_./") + key[i:]


def _retype(draw: st.DrawFn, value: Any) -> Any:
    """`value` as another type: int↔str↔list↔dict↔None↔bool↔float (incl. inf and nan)."""
    target = pick(draw, ("str", "int", "float", "list", "dict", "none", "bool", "nan", "inf", "empty"))
    if target == "str":
        return str(value) if not isinstance(value, str) else pick(draw, ("", value * 2, f"'{value}'"))
    if target == "int":
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) < 100:
            return int(value)
        return pick(draw, (0, 1, -1, 2**63, len(str(value))))
    if target == "float":
        return pick(draw, (0.5, -1.0, 1.0, 1e300, 3.0))
    if target == "list":
        return [value] if not isinstance(value, list) else value[:1]
    if target == "dict":
        if isinstance(value, list):
            return {str(i): v for i, v in enumerate(value)}
        return {"value": value}
    if target == "none":
        return None
    if target == "bool":
        return draw(BOOLEANS)
    if target == "nan":
        return float("nan")
    if target == "inf":
        return pick(draw, (float("inf"), float("-inf")))
    if isinstance(value, dict):
        return {}
    return [] if isinstance(value, list) else ""


def _slots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, Any, tuple[Any, ...]]]:
    """Every (container, key-or-index, path) under `value`."""
    found: list[tuple[Any, Any, tuple[Any, ...]]] = []
    if isinstance(value, dict):
        for key in list(value):
            found.append((value, key, (*path, key)))
            found.extend(_slots(value[key], (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((value, index, (*path, index)))
            found.extend(_slots(item, (*path, index)))
    return found


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, tuple[Any, ...]]]:
    found: list[tuple[Any, tuple[Any, ...]]] = []
    if isinstance(value, (dict, list)):
        found.append((value, path))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found.extend(_containers(item, (*path, key)))
    return found


def _ensure_dict(parent: Any, key: Any) -> dict[Any, Any]:
    if not isinstance(parent.get(key), dict):
        parent[key] = {}
    result: dict[Any, Any] = parent[key]
    return result


def _ensure_list(parent: Any, key: Any) -> list[Any]:
    if not isinstance(parent.get(key), list):
        parent[key] = []
    result: list[Any] = parent[key]
    return result


def mutate(draw: st.DrawFn, docs: list[Any]) -> str:
    """Apply one random mutation to one of `docs` (in place); describe it."""
    index = draw(integers(0, len(docs) - 1))
    doc = docs[index]
    op = pick(draw, (
        "delete", "delete", "rename", "rename", "retype", "retype", "weird-value", "unknown-key", "restricted-label",
        "operator", "gt-lt", "number", "empty", "long-string", "unicode", "duplicate-item", "replace-document",
    ))
    slots = _slots(doc)
    if op == "replace-document" or not slots:
        replacement = draw(replacement_documents)
        docs[index] = [doc] if replacement == "list" else {"items": [doc]} if replacement == "items" else replacement
        return f"doc{index}: replaced by {type(docs[index]).__name__}"
    container, key, path = pick(draw, slots)
    where = f"doc{index}:{'.'.join(map(str, path))}"
    if op == "delete":
        del container[key]
        return f"{where}: deleted"
    if op == "rename":
        if isinstance(container, dict):
            new_key = _typo(draw, key)
            value = container.pop(key)
            container[new_key] = value
            return f"{where}: renamed to {new_key!r}"
        container[key] = _retype(draw, container[key])
        return f"{where}: retyped"
    if op == "retype":
        container[key] = _retype(draw, container[key])
        return f"{where}: retyped to {type(container[key]).__name__}"
    if op == "weird-value":
        container[key] = draw(weird_values)
        return f"{where}: weird value"
    if op == "unknown-key":
        target, target_path = pick(draw, _containers(doc))
        value = draw(weird_values)
        if isinstance(target, dict):
            target[draw(weird_keys)] = value
        else:
            target.append(value)
        return f"doc{index}:{'.'.join(map(str, target_path))}: unknown key or item"
    if op == "restricted-label" and isinstance(doc, dict) and isinstance(doc.get("spec"), dict):
        label_key = pick(draw, RESTRICTED_LABEL_KEYS)
        if draw(BOOLEANS):
            _ensure_dict(doc["spec"], "labels")[label_key] = draw(label_values)
        else:
            _ensure_list(doc["spec"], "requirements").append({"key": label_key, "operator": "Exists"})
        return f"doc{index}: restricted label {label_key}"
    if op == "operator":
        requirement = _find_requirement(doc)
        if requirement is not None:
            requirement["operator"] = draw(random_operators)
            return f"doc{index}: operator {requirement['operator']!r}"
    if op == "gt-lt":
        requirement = _find_requirement(doc)
        if requirement is not None:
            requirement["operator"] = pick(draw, ("Gt", "Lt"))
            requirement["values"] = copy.deepcopy(pick(draw, GT_LT_VALUES))
            return f"doc{index}: {requirement['operator']} {requirement['values']!r}"
    if op == "number":
        container[key] = draw(random_numbers)
        return f"{where}: number {container[key]!r}"[:200]
    if op == "empty":
        container[key] = copy.deepcopy(pick(draw, ("", [], {}, None, " ")))  # never share a mutable value
        return f"{where}: empty"
    if op == "long-string":
        container[key] = pick(draw, ("a", "é", "-", "\U0001f642", "ab/")) * draw(integers(64, 100_000))
        return f"{where}: long string"
    if op == "unicode":
        container[key] = draw(unicode_text)
        return f"{where}: unicode"
    if op == "duplicate-item" and isinstance(container[key], list) and container[key]:
        container[key].append(copy.deepcopy(container[key][0]))
        return f"{where}: duplicated first item"
    container[key] = draw(weird_values)
    return f"{where}: weird value (fallback for {op})"


def _find_requirement(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("spec"), dict):
        return None
    reqs = doc["spec"].get("requirements")
    if isinstance(reqs, list):
        for req in reqs:
            if isinstance(req, dict):
                return req
    reqs = _ensure_list(doc["spec"], "requirements")
    reqs.append({"key": "team", "operator": "In", "values": ["a"]})
    result: dict[str, Any] = reqs[-1]
    return result


# Known-bad mutations: each makes a Provisioner (P) or AWSNodeTemplate (T) invalid under Karpenter's rules
# whatever the rest of the document says. (kind, description, how) — `how` changes the document's spec.
def _bad_label(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: _ensure_dict(doc["spec"], "labels").__setitem__(key, "x")


def _bad_requirement(requirement: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda doc: _ensure_list(doc["spec"], "requirements").append(copy.deepcopy(requirement))


def _bad_field(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        target = doc
        for part in path[:-1]:
            target = _ensure_dict(target, part)
        target[path[-1]] = copy.deepcopy(value)
    return apply


def _bad_taint(effect: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: _ensure_list(doc["spec"], "taints").append({"key": "dedicated", "effect": effect})


def _both_provider_and_ref(doc: dict[str, Any]) -> None:
    doc["spec"]["providerRef"] = {"name": "default"}
    doc["spec"]["provider"] = {"subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}}


def _kubelet_gc(doc: dict[str, Any]) -> None:
    kubelet = _ensure_dict(doc["spec"], "kubeletConfiguration")
    kubelet.pop("imageGCHighThresholdPercent", None)
    kubelet.update({"imageGCHighThresholdPercent": 10, "imageGCLowThresholdPercent": 90})


def _launch_template_and_ami(doc: dict[str, Any]) -> None:
    doc["spec"]["launchTemplate"] = "lt"
    doc["spec"]["amiFamily"] = "AL2"


KNOWN_BAD: tuple[tuple[str, str, Callable[[dict[str, Any]], None]], ...] = (
    *((PROVISIONER, f"restricted label {k}", _bad_label(k)) for k in RESTRICTED_LABEL_KEYS),
    *((PROVISIONER, f"unsupported operator {op!r}", _bad_requirement({"key": "team", "operator": op, "values": ["a"]}))
      for op in ("in", "Equals", "", "Gte", "NotExists", "IN", " In", "In ")),
    *((PROVISIONER, f"Gt with values {v!r}",
       _bad_requirement({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": v}))
      for v in ([], ["-1"], ["1.5"], ["abc"], ["1", "2"], ["١"], [""], ["0x10"], ["1e3"], [" 1"])),
    (PROVISIONER, "In without values", _bad_requirement({"key": "team", "operator": "In"})),
    (PROVISIONER, "In with empty values", _bad_requirement({"key": "team", "operator": "In", "values": []})),
    (PROVISIONER, "requirement key not a qualified name",
     _bad_requirement({"key": "not a/qualified/name", "operator": "Exists"})),
    (PROVISIONER, "negative ttlSecondsAfterEmpty", _bad_field(("spec", "ttlSecondsAfterEmpty"), -1)),
    (PROVISIONER, "negative ttlSecondsUntilExpired", _bad_field(("spec", "ttlSecondsUntilExpired"), -(10**12))),
    *((PROVISIONER, f"taint effect {e!r}", _bad_taint(e)) for e in ("NoScheduled", "", "noschedule", "Always")),
    *((PROVISIONER, f"weight {w}", _bad_field(("spec", "weight"), w)) for w in (0, 101, -5)),
    *((PROVISIONER, f"name {n!r}", _bad_field(("metadata", "name"), n))
      for n in ("Default", "has space", "-lead", "a" * 254, "under_score", "trail.")),
    (PROVISIONER, "provider and providerRef", _both_provider_and_ref),
    (PROVISIONER, "imageGC high < low", _kubelet_gc),
    (PROVISIONER, "evictionSoft without grace period",
     _bad_field(("spec", "kubeletConfiguration", "evictionSoft"), {"memory.available": "1%", "pid.available": "5%"})),
    (PROVISIONER, "unknown eviction signal",
     _bad_field(("spec", "kubeletConfiguration", "evictionHard"), {"cpu": "1%"})),
    *((NODE_TEMPLATE, f"amiFamily {f!r}", _bad_field(("spec", "amiFamily"), f)) for f in ("Windows", "al2", "")),
    (NODE_TEMPLATE, "empty subnetSelector", _bad_field(("spec", "subnetSelector"), {})),
    (NODE_TEMPLATE, "httpTokens maybe", _bad_field(("spec", "metadataOptions", "httpTokens"), "maybe")),
    *((NODE_TEMPLATE, f"hop limit {h}", _bad_field(("spec", "metadataOptions", "httpPutResponseHopLimit"), h))
      for h in (0, 65, -1)),
    *((NODE_TEMPLATE, f"volumeSize {s!r}", _bad_field(("spec", "blockDeviceMappings"),
                                                        [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": s}}]))
      for s in ("1Ki", "100Ti", "-5Gi", "lots", 5)),
    *((NODE_TEMPLATE, f"restricted tag {t}", _bad_field(("spec", "tags"), {t: "x"}))
      for t in ("karpenter.sh/managed-by", "kubernetes.io/cluster/foo", "karpenter.sh/provisioner-name")),
    (NODE_TEMPLATE, "subnet id with the wrong prefix", _bad_field(("spec", "subnetSelector"), {"aws-ids": "sg-123"})),
    (NODE_TEMPLATE, "launchTemplate with amiFamily", _launch_template_and_ami),
)


def policy_identity(doc: dict[Any, Any]) -> tuple[str, str] | None:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    return (api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None


def _dump(draw: st.DrawFn, docs: list[Any]) -> bytes:
    """`docs` as a YAML stream in a random but valid style."""
    options: dict[str, Any] = {
        "sort_keys": False,
        "allow_unicode": draw(BOOLEANS),
        "default_flow_style": pick(draw, (False, None, True)),
        "indent": pick(draw, (2, 4)),
        "width": pick(draw, (80, 20, 10**6)),
        "explicit_start": draw(BOOLEANS),
    }
    text: str = yaml.dump_all(docs, Dumper=DUMPER, **options)
    prefix = pick(draw, ("", "# policies\n", "---\n# the first document is empty\n", "\n\n"))
    return (prefix + text).encode("utf-8")


@st.composite
def mutated_cases(draw: st.DrawFn) -> Case:
    docs: list[Any] = draw(DOCUMENTS)
    mutations = draw(integers(0, 5)) if draw(integers(0, 9)) else 0
    described = [mutate(draw, docs) for _ in range(mutations)]
    must_fail = ""
    if draw(integers(0, 2)) == 0:
        targets = [
            i for i, doc in enumerate(docs)
            if isinstance(doc, dict) and policy_identity(doc) in POLICY_SCHEMAS
        ]
        if targets:
            doc = docs[pick(draw, targets)]
            choices = [bad for bad in KNOWN_BAD if bad[0] == doc["kind"]]
            _, must_fail, apply = pick(draw, choices)
            if not isinstance(doc.get("spec"), dict):
                doc["spec"] = {}
            if not isinstance(doc.get("metadata"), dict):
                doc["metadata"] = {"name": "fixed"}
            apply(doc)
            described.append(f"known bad: {must_fail}")
    if draw(integers(0, 7)) == 0:
        docs = [{"apiVersion": "v1", "kind": "List", "items": docs}]
        described.append("wrapped in a kind: List")
    content = _dump(draw, docs)
    return Case(content, "; ".join(described) or "unmutated", must_fail, expect_valid=not described)


# --------------------------------------------------------------------------------------------------------
# Raw text

SEED_TEXTS = (
    """\
# General-purpose capacity.
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
  annotations:
    karpenter-policy/version: "2026.11.1"
spec:
  weight: 10
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["on-demand", "spot"]
    - key: karpenter.k8s.aws/instance-generation
      operator: Gt
      values: ["4"]
  labels: {team: platform}
  taints:
    - {key: dedicated, value: "true", effect: NoSchedule}
  limits:
    resources:
      cpu: 1000
      memory: 4000Gi
  consolidation:
    enabled: true
  ttlSecondsUntilExpired: 2592000 # 30 days
  providerRef:
    name: default
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  amiFamily: AL2
  subnetSelector:
    karpenter.sh/discovery: platform-prod
  securityGroupSelector:
    karpenter.sh/discovery: platform-prod
  metadataOptions:
    httpEndpoint: enabled
    httpPutResponseHopLimit: 2
    httpTokens: required
  blockDeviceMappings:
    - deviceName: /dev/xvda
      ebs:
        volumeSize: 100Gi
        volumeType: gp3
        encrypted: true
  userData: |
    #!/bin/bash
    echo "hello"
  tags:
    team: platform
""",
    """\
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1alpha5
  kind: Provisioner
  metadata: {name: gpu}
  spec:
    requirements: [{key: karpenter.k8s.aws/instance-family, operator: In, values: [g5, p3]}]
    taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
    ttlSecondsAfterEmpty: 30
    kubeletConfiguration: {maxPods: 110, evictionHard: {memory.available: 5%}}
    provider:
      subnetSelector: {karpenter.sh/discovery: demo}
      securityGroupSelector: {karpenter.sh/discovery: demo}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: other}
  data: {key: value}
""",
)

RAW_INSERTS = (
    b"\t", b"  ", b"&a ", b"*a", b"*b", b"&a [*a]", b"\n---\n", b"---", b"...", b"!!python/object:os.system ",
    b"!!python/object/apply:os.system [\"id\"] ", b"!!python/name:os.system ", b"!!binary ", b"!!int ", b"!!float ",
    b"!!bool ", b"!!null ", b"!!str ", b"!!set ", b"!!omap ", b"!!timestamp ", b"!!map ", b"!!seq ", b"!custom ",
    b"!<tag:x,2000:y> ", b"\xef\xbb\xbf", b"\x00", b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82",
    b"{", b"[", b"]", b"}", b": ", b"- ", b"? ", b"|", b">", b"|-\n", b"%YAML 1.1\n", b"%TAG ! tag:x,2000:\n", b"#",
    b'"', b"'", b"\r", b"\r\n", b"\xc2\x85", b"\xe2\x80\xa8", b"<<: *a\n", b"0x_", b"0b_", b"._", b"~", b",",
    b"9" * 5000, b"\\", b'"\\x01"', b'"\\uFFFE"', b'"\\ud800"', b'"\\U0010FFFF"', b"\x7f", b"\x1b", b"@", b"`",
)
raw_inserts = st.one_of(st.sampled_from(RAW_INSERTS), st.binary(min_size=1, max_size=4))
LINE_INSERTS = (b"\t", b"  ", b"# comment", b"---", b"...", b"- x", b"? [a]\n: b", b"&a x: y", b"*a : z", b"%YAML 1.2")


def raw_mutate(draw: st.DrawFn, data: bytearray) -> str:
    """Damage `data` in place; describe how."""
    op = pick(draw, (
        "flip", "truncate", "insert", "insert", "insert", "line-insert", "duplicate-line", "delete-line",
        "swap-lines", "indent", "dedent",
    ))
    if op in ("flip", "truncate", "insert") or not data:
        pos = draw(integers(0, len(data)))
        if op == "flip" and pos < len(data):
            mask = draw(integers(1, 255))
            data[pos] ^= mask
            return f"flip byte {pos} ^ {mask:#x}"
        if op == "truncate":
            del data[pos:]
            return f"truncate at {pos}"
        insert = draw(raw_inserts)
        data[pos:pos] = insert
        return f"insert {insert[:20]!r} at {pos}"
    lines = bytes(data).split(b"\n")
    i = draw(integers(0, len(lines) - 1))
    if op == "line-insert":
        insert = pick(draw, LINE_INSERTS)
        column = draw(integers(0, len(lines[i])))
        lines[i] = lines[i][:column] + insert + lines[i][column:] if draw(BOOLEANS) else insert + b"\n" + lines[i]
        description = f"line {i + 1}: insert {insert!r}"
    elif op == "duplicate-line":
        lines.insert(i, lines[i])
        description = f"line {i + 1}: duplicated"
    elif op == "delete-line":
        del lines[i]
        description = f"line {i + 1}: deleted"
    elif op == "swap-lines":
        j = draw(integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        description = f"lines {i + 1} and {j + 1}: swapped"
    elif op == "indent":
        lines[i] = b" " * draw(integers(1, 5)) + lines[i]
        description = f"line {i + 1}: indented"
    else:
        lines[i] = lines[i].lstrip(b" ")
        description = f"line {i + 1}: dedented"
    data[:] = b"\n".join(lines)
    return description


@st.composite
def raw_cases(draw: st.DrawFn) -> Case:
    if draw(BOOLEANS):
        base = pick(draw, SEED_TEXTS).encode("utf-8")
        origin = "seed"
    else:
        docs = draw(DOCUMENTS)
        style = pick(draw, (False, None))
        base = yaml.dump_all(docs, Dumper=DUMPER, sort_keys=False, default_flow_style=style).encode()
        origin = "generated"
    data = bytearray(base)
    described = [raw_mutate(draw, data) for _ in range(draw(integers(1, 4)))]
    return Case(bytes(data), f"{origin}: " + "; ".join(described))


# --------------------------------------------------------------------------------------------------------
# The nastiest files

PROVISIONER_HEAD = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: nasty
"""
VALID_PROVISIONER = PROVISIONER_HEAD + "spec:\n  providerRef:\n    name: default\n"


def _nest(depth: int, open_: str, close: str, inner: str = "") -> str:
    return open_ * depth + inner + close * depth


def _billion_laughs(levels: int = 9, fan_out: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        aliases = ", ".join([f"*a{level - 1}"] * fan_out)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + f"\nbomb: *a{levels - 1}\n"


def _block_nesting(depth: int) -> str:
    return "".join(" " * (2 * level) + "- \n" for level in range(depth)) + " " * (2 * depth) + "x\n"


def _five_megabytes() -> bytes:
    line = b"# " + b"x" * 97 + b"\n"
    return VALID_PROVISIONER.encode() + line * (5 * 1024 * 1024 // len(line) + 1)


def _many_documents(count: int) -> str:
    return "".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n" for i in range(count))


#: name → file content. The subprocess test runs the CLI on them; the in-process test mixes them with damage.
NASTY: dict[str, Callable[[], bytes | str]] = {
    "empty": lambda: b"",
    "whitespace-only": lambda: b"  \n\n \n   ",
    "tab-only-line": lambda: b"  \n\t\n",
    "comments-only": lambda: "# just a comment\n   # another one\n#",
    "separators-only": lambda: "---\n---\n...\n---\n",
    "top-level-list": lambda: "- a\n- b\n- {c: d}\n",
    "top-level-scalar": lambda: "hello world\n",
    "top-level-int": lambda: "42\n",
    "top-level-list-of-provisioners": lambda: "- " + VALID_PROVISIONER.replace("\n", "\n  "),
    "kind-list-items-scalar": lambda: "apiVersion: v1\nkind: List\nitems: 5\n",
    "kind-list-items-mapping": lambda: "apiVersion: v1\nkind: List\nitems: {a: b}\n",
    "kind-list-odd-items": lambda: "apiVersion: v1\nkind: List\nitems: [1, a, null, [], {}, {kind: Provisioner}, "
                                   "{apiVersion: karpenter.sh/v1alpha5, kind: Provisioner, spec: [1]}]\n",
    "kind-list-nested-list": lambda: "apiVersion: v1\nkind: List\nitems:\n"
                                     "- apiVersion: v1\n  kind: List\n  items: [1]\n",
    "kind-list-of-kind-not-string": lambda: "kind: [List]\nitems: [1]\n",
    "deep-flow-sequence-3000": lambda: _nest(3000, "[", "]"),
    "deep-flow-mapping-2000": lambda: _nest(2000, "{a: ", "}", "1"),
    "deep-block-sequence-800": lambda: _block_nesting(800),
    "deep-in-labels-300": lambda: VALID_PROVISIONER + "  labels: " + _nest(300, "[", "]") + "\n",
    "deep-in-status-200": lambda: VALID_PROVISIONER + "status: " + _nest(200, "{a: ", "}", "1") + "\n",
    "deep-in-unknown-field-150": lambda: VALID_PROVISIONER + "  extra: " + _nest(150, "[", "]") + "\n",
    "billion-laughs": _billion_laughs,
    "billion-laughs-in-spec": lambda: _billion_laughs().replace("bomb:", "spec:")
                                      .replace("a0:", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\na0:"),
    "long-string-aliased": lambda: "a: &a " + "x" * 100_000 + "\nb: [" + ", ".join(["*a"] * 5000) + "]\n",
    "recursive-alias-sequence": lambda: "a: &a [*a]\n",
    "recursive-alias-mapping": lambda: "a: &a {b: *a}\n",
    "recursive-alias-in-spec": lambda: PROVISIONER_HEAD + "spec: &s\n  providerRef: {name: x}\n  labels: *s\n",
    "undefined-alias": lambda: "a: *nope\n",
    "alias-as-key": lambda: "a: &k key\n*k : v\n",
    "alias-to-mapping-as-key": lambda: "a: &k {x: y}\n? *k\n: v\n",
    "duplicate-keys-top": lambda: VALID_PROVISIONER + "kind: Provisioner\n",
    "duplicate-keys-nested": lambda: VALID_PROVISIONER + "  providerRef:\n    name: other\n",
    "duplicate-keys-quoted": lambda: 'a: 1\n"a": 2\n',
    "non-scalar-key-sequence": lambda: "? [a]\n: b\n",
    "non-scalar-key-mapping": lambda: "? {a: b}\n: c\n",
    "non-scalar-key-flow": lambda: "{[a]: b}\n",
    "merge-key": lambda: "base: &b {x: 1}\nthing:\n  <<: *b\n  y: 2\n",
    "bom": lambda: b"\xef\xbb\xbf" + VALID_PROVISIONER.encode(),
    "double-bom": lambda: b"\xef\xbb\xbf\xef\xbb\xbf" + VALID_PROVISIONER.encode(),
    "bom-mid-file": lambda: VALID_PROVISIONER.encode() + b"\xef\xbb\xbf  labels: {a: b}\n",
    "nul-byte": lambda: VALID_PROVISIONER.encode() + b"\x00",
    "invalid-utf8": lambda: VALID_PROVISIONER.encode() + b"  labels: {a: \xff\xfe}\n",
    "overlong-utf8": lambda: b"a: \xc0\xaf\n",
    "utf8-surrogate": lambda: b"a: \xed\xa0\x80\n",
    "truncated-utf8": lambda: b"a: caf\xc3",
    "utf16-with-bom": lambda: VALID_PROVISIONER.encode("utf-16"),
    "latin1": lambda: "a: caf\xe9\n".encode("latin-1"),
    "five-megabytes": _five_megabytes,
    "one-long-line": lambda: "a: " + "x" * 1_000_000 + "\n",
    "huge-int-5000-digits": lambda: "a: " + "9" * 5000 + "\n",
    "huge-int-in-ttl": lambda: VALID_PROVISIONER + "  ttlSecondsAfterEmpty: " + "9" * 5000 + "\n",
    "python-object-tag": lambda: "a: !!python/object/apply:os.system [\"echo pwned\"]\n",
    "python-object-tag-on-spec": lambda: PROVISIONER_HEAD + "spec: !!python/object:os.system\n"
                                                            "  providerRef: {name: x}\n",
    "python-name-tag": lambda: "a: !!python/name:os.system\n",
    "binary-tag": lambda: "a: !!binary aGVsbG8=\n",
    "explicit-int-not-a-number": lambda: "a: !!int abc\n",
    "explicit-float-not-a-number": lambda: "a: !!float abc\n",
    "explicit-bool-maybe": lambda: "a: !!bool maybe\n",
    "explicit-int-empty": lambda: 'a: !!int ""\n',
    "implicit-hex-underscore": lambda: "a: 0x_\n",
    "implicit-binary-underscore": lambda: "a: 0b_\n",
    "set-and-omap-tags": lambda: "a: !!set {x, y}\nb: !!omap [{x: 1}]\n",
    "local-tag": lambda: "a: !custom {x: 1}\nb: !other y\n",
    "tab-indentation": lambda: VALID_PROVISIONER.replace("  providerRef", "\tproviderRef"),
    "yaml-directive": lambda: "%YAML 1.1\n%TAG ! tag:example.com,2000:\n---\n" + VALID_PROVISIONER,
    "bad-yaml-directive": lambda: "%YAML 2.0\n---\na: b\n",
    "repeated-yaml-directive": lambda: "%YAML 1.1\n%YAML 1.1\n---\na: b\n",
    "many-documents-2000": lambda: _many_documents(2000),
    "many-duplicate-names": lambda: "".join("---\n" + VALID_PROVISIONER for _ in range(50)),
    "crlf": lambda: VALID_PROVISIONER.replace("\n", "\r\n"),
    "cr-only": lambda: VALID_PROVISIONER.replace("\n", "\r"),
    "spec-is-a-list": lambda: PROVISIONER_HEAD + "spec: [1]\n",
    "spec-is-a-string": lambda: PROVISIONER_HEAD + "spec: hello\n",
    "spec-is-true": lambda: PROVISIONER_HEAD + "spec: true\n",
    "metadata-is-a-list": lambda: VALID_PROVISIONER.replace("  name: nasty\n", "  - nasty\n"),
    "name-is-a-mapping": lambda: VALID_PROVISIONER.replace("name: nasty", "name: {a: b}"),
    "control-chars-in-keys": lambda: VALID_PROVISIONER + '  "a\\x01b": 1\n  "\\x1b[31mred": 2\n',
    "noncharacter-in-key": lambda: VALID_PROVISIONER + '  "\\uFFFE": 1\n',
    "github-command-injection": lambda: VALID_PROVISIONER + '  "x\\n::error file=evil::pwned": 1\n',
    "xml-injection": lambda: VALID_PROVISIONER + '  "</failure><x>": 1\n  "]]>&amp;": 2\n',
    "label-value-trailing-newline": lambda: VALID_PROVISIONER + '  labels: {team: "a\\n"}\n',
    "every-field-null": lambda: PROVISIONER_HEAD + "spec:\n  requirements:\n  labels:\n  taints:\n  provider:\n"
                                                   "  providerRef:\n  limits:\n  kubeletConfiguration:\n",
    "requirements-of-nulls": lambda: VALID_PROVISIONER + "  requirements: "
                                                         "[null, ~, {key: ~, operator: ~, values: ~}]\n",
    "gt-huge": lambda: VALID_PROVISIONER + "  requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gt, "
                                           "values: ['" + "9" * 400 + "']}]\n",
    "non-finite-numbers": lambda: VALID_PROVISIONER + "  weight: .nan\n  ttlSecondsAfterEmpty: .inf\n"
                                                      "  limits: {resources: {cpu: -.inf, memory: .nan}}\n",
}

#: Too dangerous to run in-process (a crash would take the test runner down): only through the CLI.
SUBPROCESS_ONLY: dict[str, Callable[[], bytes | str]] = {
    "deep-flow-sequence-50000": lambda: _nest(50_000, "[", "]"),
}


@cache
def nasty_bytes(name: str) -> bytes:
    content = (NASTY | SUBPROCESS_ONLY)[name]()
    return content if isinstance(content, bytes) else content.encode("utf-8")


@st.composite
def hostile_cases(draw: st.DrawFn) -> Case:
    name = pick(draw, sorted(NASTY))
    data = nasty_bytes(name)
    described = [name]
    if len(data) < 200_000 and draw(BOOLEANS):
        buffer = bytearray(data)
        described += [raw_mutate(draw, buffer) for _ in range(draw(integers(1, 3)))]
        data = bytes(buffer)
    return Case(data, "; ".join(described))


#: File names that reporters must carry intact (or escape): spaces, unicode, GitHub and XML metacharacters.
FILE_STEMS = ("policy", "with space", "ünïcødé", "a,b:c%25", "<&'\">", "new\nline", "tab\there", "-dash", "x" * 200)
FOLDERS = ("", "sub", "sub/deeper", "ünï")


@st.composite
def file_sets(draw: st.DrawFn) -> list[tuple[str, Case]]:
    """2-4 files in a folder tree, checked together (cross-file duplicate names and references), from every
    family, each as (relative path, case)."""
    cases = draw(st.lists(st.one_of(mutated_cases(), raw_cases(), hostile_cases()), min_size=2, max_size=4))
    files = []
    for index, case in enumerate(cases):
        name = f"{pick(draw, FILE_STEMS)}-{index}{pick(draw, ('.yaml', '.yml'))}"
        files.append((f"{pick(draw, FOLDERS)}/{name}".lstrip("/"), case))
    return files
