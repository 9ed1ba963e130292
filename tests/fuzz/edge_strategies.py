"""Hypothesis strategies for the inputs beyond policy files, with numbers and structures at the edges.

- `quantity_values`: Kubernetes quantities as a careless or hostile author writes them: the grammar's every part
  (sign, digits by the thousand, fraction, binary and decimal suffixes, exponents at the int32 and int64 edges,
  white space), wrong suffixes, and non-strings (ints beyond int64, floats, inf, nan, booleans, lists).
- `workload_cases`: workload manifests (every kind `check --workloads` reads, and others) around pod specs with
  edge values in node selectors, affinity terms, tolerations, container and init-container resources and
  overhead; then damaged with the policy fuzzer's `mutate`.
- `limit_cases`: Provisioners (and AWSNodeTemplates) whose limits, kube/system reserved, eviction thresholds and
  volume sizes are edge quantities.
- `values_cases` / `catalog_cases`: `--values` YAML files and `--catalog` JSON files: random and realistic data,
  alias bombs, deep nesting, huge numbers and strings, broken text.
- `review_bodies`: AdmissionReview request bodies for the webhook's three endpoints: the policy fuzzer's
  Provisioners and the pod specs above, with edge numbers and structures in the envelope and the object.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from .strategies import (
    BOOLEANS,
    DOCUMENTS,
    SPECIAL_STRINGS,
    Case,
    _dump,
    integers,
    mutate,
    node_template,
    pick,
    provisioner,
    weird_keys,
    weird_values,
)

# --------------------------------------------------------------------------------------------------------
# Numbers and quantities

EDGE_INTS: tuple[int, ...] = (
    0, 1, -1, 7, 100, 1000, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**53, 2**63 - 1, 2**63, -(2**63),
    -(2**63) - 1, 2**64, 10**18, 10**19, 10**30, -(10**30), 10**300, 10**1000, 10**4000,
)  # fmt: skip
EDGE_FLOATS: tuple[float, ...] = (
    0.0, -0.0, 5e-324, 1e-10, 1e-9, 0.5, 1.5, -2.5, 1e16, 9.3e18, 1e19, 1e308, -1e308, float("inf"), float("-inf"),
    float("nan"),
)  # fmt: skip
#: Exponents around Go's int32 (what Kubernetes reads) and int64 (what its parser scans) and the nano scale.
EDGE_EXPONENTS: tuple[int, ...] = (
    0, 1, 3, -3, -9, -10, 9, 18, 19, 20, 308, 4300, 99999999, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1,
    2**63, 10**30,
)  # fmt: skip
SUFFIXES = (
    "", "", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",  # valid
    "K", "i", "kk", "KI", "mi", "e", "E+", "e-", "Ei5", "ki", "b", "%", "Gb", " Gi", "e1.5", "e_3",  # not
)  # fmt: skip
SPACES = ("", "", "", " ", "\t", "\n", "\u00a0", "\u2028", "\u3000", "\x1c")
DIGIT_COUNTS = (0, 1, 1, 2, 3, 9, 18, 19, 20, 30, 400, 5000)

edge_ints = st.sampled_from(EDGE_INTS)
#: The edge ints below 10^4000, above 0 or from 0, and within int32: drawn from per example, computed once (each
#: comparison with 10**4000 made the bigint anew).
EDGE_INTS_BELOW_4000_DIGITS = tuple(i for i in EDGE_INTS if 0 <= i < 10**4000)
POSITIVE_EDGE_INTS_BELOW_4000_DIGITS = tuple(i for i in EDGE_INTS if 0 < i < 10**4000)
EDGE_INT32S = tuple(i for i in EDGE_INTS if 0 <= i < 2**31)
edge_floats = st.sampled_from(EDGE_FLOATS)


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    """A string in (or near) the quantity grammar."""
    sign = pick(draw, ("", "", "", "+", "-", "--", "+-"))
    whole = "".join(pick(draw, "0123456789") for _ in range(min(pick(draw, DIGIT_COUNTS), 40))) * (
        1 if draw(integers(0, 9)) else pick(draw, (1, 100, 125))  # long runs of the same digits
    )
    fraction = ""
    if draw(integers(0, 2)) == 0:
        fraction = "." + "".join(pick(draw, "0123456789") for _ in range(pick(draw, (0, 1, 3, 9, 10, 30))))
    if draw(integers(0, 2)) == 0:
        suffix = f"{pick(draw, ('e', 'E'))}{pick(draw, EDGE_EXPONENTS)}"
        if draw(integers(0, 4)) == 0:
            suffix = suffix.replace("e", "e+") if "-" not in suffix else suffix
    else:
        suffix = pick(draw, SUFFIXES)
    text = sign + whole + fraction + suffix
    if draw(integers(0, 9)) == 0:
        text = text.replace(pick(draw, "0123456789"), pick(draw, ("٣", "３", "_", "x")))
    return pick(draw, SPACES) + text + pick(draw, SPACES)


@st.composite
def valid_quantities(draw: st.DrawFn) -> Any:
    """A quantity the schema and Kubernetes accept: the edges are in its size (beyond int64, nano, exponents up to
    int32's bound), not its spelling."""
    if draw(integers(0, 3)) == 0:
        return pick(draw, (*EDGE_INTS_BELOW_4000_DIGITS, 0.5, 1.5, 1e16, 1e308, 5e-324))
    whole = pick(draw, ("0", "1", "2", "100", "4000", "9223372036854775807", "9223372036854775808", "9" * 30,
                        "9" * 4400, "1" + "0" * 25))
    fraction = pick(draw, ("", "", ".5", ".000000001", ".0000000001", "." + "3" * 40))
    suffix = pick(draw, ("", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                         "e3", "e-9", "e18", "e19", "e99999999", "e2147483647", "e-2147483648", "e2147483648"))
    return pick(draw, ("", "", "+")) + whole + fraction + suffix


VALID_QUANTITIES = valid_quantities()
quantity_values = st.one_of(
    VALID_QUANTITIES,
    VALID_QUANTITIES,
    quantity_strings(),
    quantity_strings(),
    quantity_strings(),
    edge_ints,
    st.integers(),
    edge_floats,
    st.floats(),
    st.sampled_from(SPECIAL_STRINGS),
    weird_values,
)


def _resource_map(draw: st.DrawFn, tame: bool = False) -> dict[str, Any]:
    names = ("cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron",
             "habana.ai/gaudi", "example.com/foo", "hugepages-2Mi")
    values = VALID_QUANTITIES if tame else quantity_values
    return {pick(draw, names): draw(values) for _ in range(draw(integers(0, 4)))}


# --------------------------------------------------------------------------------------------------------
# Workloads

#: kind → apiVersions that are it (first one the usual), and the path of the pod template.
WORKLOAD_SHAPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Deployment": (("apps/v1", "apps/v1beta2", "extensions/v1beta1"), ("spec", "template")),
    "StatefulSet": (("apps/v1",), ("spec", "template")),
    "DaemonSet": (("apps/v1",), ("spec", "template")),
    "ReplicaSet": (("apps/v1",), ("spec", "template")),
    "Job": (("batch/v1",), ("spec", "template")),
    "CronJob": (("batch/v1", "batch/v1beta1"), ("spec", "jobTemplate", "spec", "template")),
    "Pod": (("v1",), ()),
    "PodTemplate": (("v1",), ("template",)),
    "ReplicationController": (("v1",), ("spec", "template")),
    "ConfigMap": (("v1",), ("data",)),
}
LABEL_KEYS = (
    "kubernetes.io/arch", "karpenter.sh/capacity-type", "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-cpu",
    "karpenter.sh/provisioner-name", "team", "example.com/pool", "",
)  # fmt: skip
LABEL_VALUES = ("amd64", "arm64", "spot", "on-demand", "us-east-1a", "m5.large", "c5", "4", "default", "spark", "")
ODD_VALUES: tuple[Any, ...] = ([], {}, None, {"a": 1}, [1], True, 1.5, -1, "", 2**64)
OPERATOR_VALUES: tuple[Any, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in", "Equal", *ODD_VALUES)
TOLERATION_OPERATORS: tuple[Any, ...] = ("Equal", "Exists", "", "In", *ODD_VALUES)
EFFECTS: tuple[Any, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute", "", "Never", *ODD_VALUES)


def _edge(draw: st.DrawFn) -> Any:
    """Any scalar or small structure at the edges."""
    return pick(draw, (*ODD_VALUES, *EDGE_INTS[:12], *EDGE_FLOATS, *SPECIAL_STRINGS[:30]))


def _odd(draw: st.DrawFn, tame: bool, one_in: int) -> bool:
    """Whether to put an odd value here: one time in `one_in`, never in a tame spec."""
    return not tame and draw(integers(0, one_in - 1)) == 0


def _label_value(draw: st.DrawFn, tame: bool) -> Any:
    return _edge(draw) if _odd(draw, tame, 5) else pick(draw, LABEL_VALUES[:-1] if tame else LABEL_VALUES)


def _expression(draw: st.DrawFn, tame: bool) -> Any:
    if _odd(draw, tame, 10):
        return _edge(draw)
    operators = OPERATOR_VALUES[:6] if tame else OPERATOR_VALUES
    expression: dict[str, Any] = {"key": pick(draw, LABEL_KEYS[:-1]), "operator": pick(draw, operators)}
    if expression["operator"] in ("Gt", "Lt") and tame:
        expression["values"] = [pick(draw, ("0", "4", "2147483647", "9223372036854775807"))]
    elif expression["operator"] not in ("Exists", "DoesNotExist") or not tame:
        values = [_label_value(draw, tame) for _ in range(draw(integers(1 if tame else 0, 3)))]
        expression["values"] = _edge(draw) if _odd(draw, tame, 8) else values
    return expression


def _term(draw: st.DrawFn, tame: bool) -> Any:
    if _odd(draw, tame, 10):
        return _edge(draw)
    return {"matchExpressions": [_expression(draw, tame) for _ in range(draw(integers(0, 3)))]}


def _affinity(draw: st.DrawFn, tame: bool) -> Any:
    node: dict[str, Any] = {}
    if draw(BOOLEANS):
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [_term(draw, tame) for _ in range(draw(integers(0, 3)))]
        }
    if draw(BOOLEANS):
        weights = (1, 50, 100) if tame else (1, 50, 100, 0, -1, 101, 2**63, "1", None, 1.5)
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": pick(draw, weights), "preference": _term(draw, tame)} for _ in range(draw(integers(0, 3)))
        ]
    return _edge(draw) if _odd(draw, tame, 10) else {"nodeAffinity": node}


def _toleration(draw: st.DrawFn, tame: bool) -> Any:
    if _odd(draw, tame, 10):
        return _edge(draw)
    operators = ("Equal", "Exists") if tame else TOLERATION_OPERATORS
    toleration = {"key": pick(draw, ("dedicated", "nvidia.com/gpu", "workload", "", None, 1)[: 3 if tame else 6]),
                  "operator": pick(draw, operators), "effect": pick(draw, EFFECTS[:3] if tame else EFFECTS)}
    if draw(BOOLEANS) and toleration["operator"] != "Exists":
        toleration["value"] = _label_value(draw, tame)
    if draw(integers(0, 4)) == 0:
        toleration["tolerationSeconds"] = pick(draw, EDGE_INTS)
    return toleration


def _container(draw: st.DrawFn, index: int, tame: bool) -> Any:
    if _odd(draw, tame, 15):
        return _edge(draw)
    container: dict[str, Any] = {"name": f"c{index}"}
    if draw(integers(0, 4)):
        resources: dict[str, Any] = {}
        for part in ("requests", "limits"):
            if draw(BOOLEANS):
                resources[part] = _edge(draw) if _odd(draw, tame, 10) else _resource_map(draw, tame)
        container["resources"] = _edge(draw) if _odd(draw, tame, 10) else resources
    if draw(integers(0, 3)) == 0:
        container["restartPolicy"] = pick(draw, ("Always", "Never", None, 1)[: 2 if tame else 4])
    return container


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A pod spec: half of them tame (only the quantities' sizes at the edges: they reach the scheduler), half
    with odd values anywhere."""
    tame = draw(BOOLEANS)
    spec: dict[str, Any] = {"containers": [_container(draw, i, tame) for i in range(draw(integers(0, 3)))]}
    if draw(BOOLEANS):
        spec["initContainers"] = [_container(draw, i, tame) for i in range(draw(integers(0, 3)))]
    if draw(BOOLEANS):
        spec["nodeSelector"] = {
            pick(draw, LABEL_KEYS[:-1]): _label_value(draw, tame) for _ in range(draw(integers(0, 3)))
        }
    if draw(BOOLEANS):
        spec["affinity"] = _affinity(draw, tame)
    if draw(BOOLEANS):
        spec["tolerations"] = [_toleration(draw, tame) for _ in range(draw(integers(0, 3)))]
    if draw(integers(0, 4)) == 0:
        spec["overhead"] = _resource_map(draw, tame)
    if draw(integers(0, 14)) == 0:
        spec["nodeName"] = pick(draw, ("node-1", "", None, 1))
    for key in list(spec):
        if _odd(draw, tame, 20):
            spec[key] = _edge(draw)
    return spec


POD_SPECS = pod_specs()


def _nest(path: tuple[str, ...], leaf: Any) -> Any:
    for part in reversed(path):
        leaf = {part: leaf}
    return leaf


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    kind = pick(draw, sorted(WORKLOAD_SHAPES))
    versions, path = WORKLOAD_SHAPES[kind]
    api_version: Any = versions[0] if draw(integers(0, 4)) else pick(draw, (*versions, "apps/v2", "v2", *ODD_VALUES))
    doc: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    if draw(integers(0, 5)):
        doc["metadata"] = {"name": pick(draw, ("web", "spark-driver", "a" * 300, "x"))}
        if draw(BOOLEANS):
            doc["metadata"]["namespace"] = pick(draw, ("default", "spark", ""))
    template = {"spec": draw(POD_SPECS)}
    if draw(BOOLEANS):
        template["metadata"] = {"labels": {"app": pick(draw, ("web", "spark")), "team": _label_value(draw, False)}}
    if path:
        doc.update(_nest(path, template))
    else:
        doc.update(template)
    if kind == "Pod" and draw(integers(0, 3)) == 0:
        doc.pop("apiVersion")
        doc.pop("metadata", None)  # a bare pod template (a Spark driver/executor file)
    return doc


WORKLOADS = workloads()


@st.composite
def workload_cases(draw: st.DrawFn) -> Case:
    # Copies: mutate() edits in place, and a drawn value may share nested objects with module constants, which
    # would make later draws depend on earlier ones (hypothesis reports that as a flaky strategy).
    docs: list[Any] = [copy.deepcopy(draw(WORKLOADS)) for _ in range(pick(draw, (1, 1, 2, 3)))]
    described = [f"{d.get('kind')}" for d in docs if isinstance(d, dict)]
    for _ in range(draw(integers(0, 3)) if draw(integers(0, 2)) == 0 else 0):
        described.append(mutate(draw, docs))
    if draw(integers(0, 9)) == 0:
        docs = [{"apiVersion": "v1", "kind": "List", "items": docs}]
        described.append("kind: List")
    return Case(_dump(draw, docs), "; ".join(described))


# --------------------------------------------------------------------------------------------------------
# Limits and quantities in policies


@st.composite
def limit_cases(draw: st.DrawFn) -> Case:
    docs: list[Any] = []
    tame = draw(BOOLEANS)  # schema-valid spellings: the sizes reach validation's and the scheduler's arithmetic
    values = VALID_QUANTITIES if tame else quantity_values
    for index in range(pick(draw, (1, 1, 2))):
        doc = provisioner(draw, f"p{index}")
        spec = doc["spec"]
        spec["limits"] = {"resources": _resource_map(draw, tame)}
        spec.pop("provider", None)
        spec["providerRef"] = {"name": "default"}
        kubelet = spec.setdefault("kubeletConfiguration", {})
        for field in ("kubeReserved", "systemReserved"):
            if draw(BOOLEANS):
                kubelet[field] = {pick(draw, ("cpu", "memory", "ephemeral-storage", "pid")): draw(values)}
        for field in ("evictionHard", "evictionSoft"):
            if draw(BOOLEANS):
                threshold: Any = str(draw(values))
                if draw(integers(0, 2)) == 0:
                    threshold = f"{pick(draw, (*EDGE_FLOATS, *EDGE_INTS[:10], 'x', ''))}%"
                kubelet[field] = {pick(draw, ("memory.available", "nodefs.available")): threshold}
                if field == "evictionSoft":
                    kubelet["evictionSoftGracePeriod"] = {k: "1m" for k in kubelet[field]}
        if draw(integers(0, 3)) == 0:
            kubelet["maxPods"] = pick(draw, EDGE_INT32S if tame else EDGE_INTS)
        if draw(integers(0, 3)) == 0:
            kubelet["podsPerCore"] = pick(draw, EDGE_INT32S if tame else EDGE_INTS)
        docs.append(doc)
    if draw(integers(0, 3)):
        template = node_template(draw, "default")
        template["spec"]["blockDeviceMappings"] = [
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": draw(values), "volumeType": "gp3"}}
        ]
        template["spec"].pop("launchTemplate", None)
        template["spec"].setdefault("securityGroupSelector", {"karpenter.sh/discovery": "x"})
        docs.append(template)
    described = ["tame limits" if tame else "limits"]
    if not tame and draw(integers(0, 4)) == 0:
        described.append(mutate(draw, docs))
    return Case(_dump(draw, docs), "; ".join(described))


# --------------------------------------------------------------------------------------------------------
# --values and --catalog files

values_data = st.recursive(
    st.one_of(edge_ints, edge_floats, st.booleans(), st.none(), st.text(max_size=20),
              st.sampled_from(SPECIAL_STRINGS), st.integers(1, 200_000).map(lambda n: "v" * n)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)),
    max_leaves=20,
)


def _nested(depth: int, flow: bool) -> str:
    if flow:
        return "a: " + "[" * depth + "]" * depth + "\n"
    return "".join("  " * i + "- \n" for i in range(depth)) if depth < 2000 else "a: " + "{a: " * depth + "}" * depth


def _laughs(levels: int, fan: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * fan)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@st.composite
def values_cases(draw: st.DrawFn) -> Case:
    shape = pick(draw, ("data", "data", "data", "top", "nested", "laughs", "raw", "anchors"))
    if shape == "data":
        names = st.sampled_from(("a", "b", "zones", "cpu", "n", "s"))
        data: Any = draw(st.dictionaries(names, values_data, max_size=6))
        for name in ("a", "b"):
            if draw(integers(0, 4)):
                data[name] = pick(draw, (*EDGE_INTS[:-1], 3, 64, 100, 100_000, -5)) if draw(BOOLEANS) else (
                    draw(values_data)
                )
        text = _dump(draw, [data]).decode("utf-8")
    elif shape == "top":
        text = _dump(draw, [draw(values_data)]).decode("utf-8")
    elif shape == "nested":
        text = _nested(pick(draw, (10, 499, 501, 3000, 50_000)), draw(BOOLEANS))
    elif shape == "laughs":
        text = _laughs(pick(draw, (3, 6, 9, 12)), pick(draw, (2, 9, 30)))
    elif shape == "anchors":
        text = "base: &b {a: 1, n: 100000}\n<<: *b\nb: *b\nc: [*b, *b]\n"
    else:
        text = pick(draw, ("a: !!python/object:os.system x\n", "a: 1\na: 2\n", "? [a]\n: b\n", "a: [1\n", "\t a: 1\n",
                           "---\na: 1\n---\nb: 2\n", "%YAML 1.1\n---\na: 0x_\n", "a: !!int 99999999999\n",
                           "a: " + "9" * 5000 + "\n", "1: a\n", "a: !!binary AAAA\n", "a: 2001-12-14\n"))
    raw = text.encode("utf-8")
    if draw(integers(0, 7)) == 0:
        raw = raw[: draw(integers(0, len(raw)))] + pick(draw, (b"", b"\xff", b"\x00", b"\t", b"&a", b"*a"))
    return Case(raw, shape)


#: Templates that use values in every way the sandbox bounds: loops, arithmetic, text building, filters.
VALUE_TEMPLATES = (
    "a: {{ a }}\nb: {{ b|default('x') }}\n",
    "{% for k in a %}- {{ k }}\n{% endfor %}",
    "x: {{ 'x' * a }}\ny: {{ a ** b }}\n",
    "x: '{{ 'x'|center(a) }}{{ '%0*d' % (a, 1) }}{{ '{:>{}}'.format(1, a) }}'\n",
    "{% for i in range(a) %}{{ i }}{% endfor %}\n",
    "x: {{ a|join(b) }}\ny: {{ a|sum }}\nz: {{ a ~ b ~ a }}\n",
    "x: {{ lipsum(a) }}\ny: {{ a|indent(b) }}\nz: {{ a|tojson }}\n",
    "{% set ns = namespace(s=a) %}{% for i in range(b) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}x: {{ ns.s }}\n",
    "x: {{ a|batch(b)|list }}\ny: {{ a|slice(b)|list }}\nz: {{ a|replace(b, a) }}\n",
)


# Catalog files: a few real types, damaged.
INSTANCE_TYPE = {
    "accelerator_count": 0, "accelerator_manufacturer": "", "accelerator_name": "", "architectures": ["x86_64"],
    "bare_metal": False, "encryption_in_transit": True, "gpu_count": 0, "gpu_manufacturer": "", "gpu_memory_mib": 0,
    "gpu_name": "", "hypervisor": "nitro", "ipv4_per_eni": 10, "local_nvme_gib": 0, "max_enis": 3,
    "memory_mib": 8192, "name": "m5.large", "network_bandwidth_mbps": 750,
    "offerings": [["us-east-1a", "on-demand", 0.096, True], ["us-east-1b", "spot", 0.04, True]],
    "price_on_demand": 0.096, "vcpu": 2,
}  # fmt: skip
CATALOG_EDGE: tuple[Any, ...] = (*EDGE_INTS[:-2], *EDGE_FLOATS, *ODD_VALUES, "", "x", [], [[]], {"a": {"b": []}})


@st.composite
def catalog_cases(draw: st.DrawFn) -> Case:
    types = []
    tame = draw(integers(0, 2)) > 0  # valid types, their numbers at the edges: they reach the consumers
    big = POSITIVE_EDGE_INTS_BELOW_4000_DIGITS
    for index in range(draw(integers(1 if tame else 0, 5))):
        entry = copy.deepcopy(INSTANCE_TYPE)
        entry["name"] = f"t{index}.{pick(draw, ('nano', 'large', 'metal'))}" if tame else pick(
            draw, ("m5.large", "c5.xlarge", "g5.2xlarge", "x", "", f"t{index}.nano")
        )
        for _ in range(draw(integers(0, 3))):
            field = pick(draw, sorted(INSTANCE_TYPE))
            if tame and isinstance(INSTANCE_TYPE[field], int) and not isinstance(INSTANCE_TYPE[field], bool):
                entry[field] = pick(draw, big)
            elif tame and field == "price_on_demand":
                entry[field] = pick(draw, (5e-324, 1e308, 0.0, None))
            elif tame:
                continue
            elif draw(integers(0, 5)) == 0:
                entry.pop(field, None)
            else:
                entry[field] = pick(draw, CATALOG_EDGE)
        if draw(integers(0, 5)) == 0:
            entry["offerings"] = [[pick(draw, ("us-east-1a", "", 1)), pick(draw, ("spot", "on-demand", None)),
                                   pick(draw, EDGE_FLOATS), pick(draw, (True, False, 1))]]
        types.append(entry)
    document: Any = {"format": 1, "region": "us-east-1", "types": types}
    if not tame:
        document.update(format=pick(draw, (1, 1, 2, "1", None)), region=pick(draw, ("us-east-1", "", 1)))
    if not tame and draw(integers(0, 9)) == 0:
        document = draw(weird_values)
    text = json.dumps(document, allow_nan=True)
    choice = draw(integers(0, 9)) if not tame else 9
    if choice == 0:
        text = "[" * pick(draw, (100, 999, 5000, 100_000)) + "]" * draw(integers(0, 3))
    elif choice == 1:
        text = text[: draw(integers(0, len(text)))]
    elif choice == 2:
        text = text.replace("2,", "9" * pick(draw, (30, 4299, 4301, 10_000)) + ",", 1)
    raw = text.encode("utf-8")
    if draw(integers(0, 14)) == 0:
        raw = pick(draw, (b"\xff\xfe", b"\x00", b"")) + raw
    return Case(raw, f"{len(types)} {'tame ' if tame else ''}types")


# --------------------------------------------------------------------------------------------------------
# Webhook bodies

ENDPOINTS = ("/validate/provisioners", "/mutate/provisioners", "/mutate/pods")


def _pod(draw: st.DrawFn) -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "spec": draw(POD_SPECS)}
    metadata: dict[str, Any] = {"name": pick(draw, ("spark-exec-1", "web-abc", "", None, 1))}
    if draw(BOOLEANS):
        metadata["namespace"] = pick(draw, ("spark", "default", "", 1))
    if draw(BOOLEANS):
        metadata["labels"] = {"spark-role": pick(draw, ("driver", "executor", 1)), "pod-template-hash": "abc"}
    if draw(BOOLEANS):
        metadata["ownerReferences"] = pick(draw, ([{"kind": "ReplicaSet", "controller": True}], [1], {}, None))
    pod["metadata"] = metadata if draw(integers(0, 9)) else _edge(draw)
    return pod


@st.composite
def review_bodies(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(endpoint, body, description)."""
    endpoint = pick(draw, ENDPOINTS)
    if endpoint == "/mutate/pods":
        obj: Any = _pod(draw)
    else:
        docs = draw(DOCUMENTS)
        for _ in range(draw(integers(0, 3))):
            mutate(draw, docs)
        obj = docs[0]
        if isinstance(obj, dict) and isinstance(obj.get("spec"), dict) and draw(BOOLEANS):
            obj["spec"]["limits"] = {"resources": _resource_map(draw)}
    request: dict[str, Any] = {"uid": pick(draw, ("0000-1111", "x" * 1000, "ü")), "operation": "CREATE", "object": obj}
    for key in ("operation", "uid", "dryRun", "namespace", "name", "oldObject"):
        if draw(integers(0, 39)) == 0:
            request[key] = pick(draw, (*ODD_VALUES, "UPDATE", "DELETE", "CONNECT", "PATCH", *EDGE_INTS[:10]))
    review: Any = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    if draw(integers(0, 39)) == 0:
        review[pick(draw, ("apiVersion", "kind", "request"))] = draw(weird_values)
    if draw(integers(0, 9)) == 0:
        _at_random_place(draw, obj, draw(st.one_of(edge_ints, edge_floats, weird_values, st.just(_deep()))))
    try:
        body = json.dumps(review, allow_nan=True, default=str).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):  # an int of more than 4,300 digits, a structure json cannot nest
        body = b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": ' + b"9" * 5000 + b"}"
    choice = draw(integers(0, 29))
    if choice == 0:
        body = body[: draw(integers(0, len(body)))]
    elif choice == 1:
        body = b'{"a": ' * 100_000
    elif choice == 2:
        body = body.replace(b'"0000-1111"', b"1e999", 1)
    return endpoint, body, f"{endpoint} {type(obj).__name__}"


def _deep(depth: int = 5000) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _at_random_place(draw: st.DrawFn, data: Any, value: Any) -> None:
    """Put `value` under a random key of a random mapping inside `data`."""
    mappings = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            mappings.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    if mappings:
        pick(draw, mappings)[draw(weird_keys) if draw(BOOLEANS) else "spec"] = value


__all__ = [
    "ENDPOINTS",
    "VALUE_TEMPLATES",
    "catalog_cases",
    "limit_cases",
    "quantity_strings",
    "quantity_values",
    "review_bodies",
    "values_cases",
    "workload_cases",
]
