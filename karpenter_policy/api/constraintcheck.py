"""A constraint set read back from a file or a ConfigMap, checked as completely as compile checked its source.

A set is what `compile` made of a Provisioner (and of the AWSNodeTemplate it references), but by the time the
controller, `simulate` or the webhook reads it, it is a file or a ConfigMap someone else wrote: a hand edit that
also fixed the hash, a sync that mangled a field. Before a reader builds anything from it, `set_problems` checks:

* its own fields: exactly the fields of the format, `version` and `sources` strings, `region` a label value (it
  becomes a node label), `admitted` distinct instance-type names (label values), the audit listing
  `instanceTypes` (files only) of the shape compile writes, `provider` a `source`, `name` and `spec`;
* the Provisioner it stands for — name, requirements, labels, annotations, taints, startup taints, limits, TTLs,
  consolidation, weight, its inline provider or providerRef, kubelet settings — rebuilt as a Provisioner document
  and checked with the JSON Schema (`api.schema`) and Karpenter's webhook rules (`api.provisionerrules`) compile checks
  it with; the node template a providerRef carries with the AWSNodeTemplate schema and rules (`api.aws`). Errors
  refuse the set; warnings do not (compile lets them through);
* what the node arithmetic reads: the kubelet settings with the node template's AMI family and block devices
  (`model.allocatable.node_configuration`).

A set compiled from a Karpenter v1 NodePool (`origin: NodePool`, read only by the readers that run them:
`nodepool_set_problems`) has a Provisioner's fields less the TTLs and consolidation, plus `origin` and `nodePool`; the
NodePool it stands for (requirements with their `minValues`, template labels, annotations, taints, startup taints,
nodeClassRef, expireAfter, terminationGracePeriod, disruption, limits, weight) and its EC2NodeClass are rebuilt and
checked as the API server admits them against Karpenter v1.14.1's CRDs, with NodePool's RuntimeValidate
(`api.v1.admission.check`).

Each problem is ``field: why``, with the set's own field names (``requirements[0]: missing required field
'key'``, ``weight 500 is out of range: it must be between 1 and 100``), first problem first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from karpenter_policy.api.aws import validate_node_template
from karpenter_policy.api.kinds import (
    NODE_TEMPLATE_API_VERSION,
    NODE_TEMPLATE_KIND,
    PROVISIONER_API_VERSION,
    PROVISIONER_KIND,
    SCHEMA_FILES,
)
from karpenter_policy.api.provisionerrules import validate_provisioner
from karpenter_policy.api.schema import schema_violations, show_value, type_name
from karpenter_policy.api.v1.admission import check as check_v1
from karpenter_policy.api.v1.crds import (
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_KIND,
    NODEPOOL_API_VERSION,
    NODEPOOL_KIND,
)
from karpenter_policy.api.violations import ERROR, Path, Violation, render_path
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import node_configuration

#: Where the provider settings come from (the values of `provider.source`).
PROVIDER_REF = "providerRef"
PROVIDER_INLINE = "inline"
#: A NodePool's set: the EC2NodeClass its nodeClassRef names (`api.constraintset.nodepool_refusal`: no reader runs
#: such a set).
PROVIDER_NODE_CLASS = "nodeClassRef"

#: Every field of a set's wire content (what its hash covers), and of the file form besides.
CONTENT_FIELDS = frozenset(
    {
        "schemaVersion", "kind", "name", "version", "sources", "region", "requirements", "labels", "annotations",
        "taints", "startupTaints", "limits", "ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "consolidation",
        "weight", "provider", "kubelet", "admitted",
    }
)  # fmt: skip
FILE_FIELDS = frozenset({"hash", "instanceTypes"})
PROVIDER_FIELDS = frozenset({"source", "name", "spec"})
LISTING_FIELDS = frozenset({"name", "vcpu", "memoryMiB", "pods", "gpus", "priceOnDemand", "offerings"})

#: A set field that is the same field of the Provisioner's spec (the others are mapped in `_set_path`).
_SPEC_FIELDS = frozenset(
    {
        "requirements", "labels", "annotations", "taints", "startupTaints", "ttlSecondsAfterEmpty",
        "ttlSecondsUntilExpired", "consolidation", "weight",
    }
)  # fmt: skip

_PROVISIONER_SCHEMA = SCHEMA_FILES[(PROVISIONER_API_VERSION, PROVISIONER_KIND)]
_NODE_TEMPLATE_SCHEMA = SCHEMA_FILES[(NODE_TEMPLATE_API_VERSION, NODE_TEMPLATE_KIND)]


# --- the Provisioner a set stands for --------------------------------------------------------------------------


def _set_path(path: Path) -> Path:
    """The set field at a path of the rebuilt Provisioner document."""
    if path[:2] == ("metadata", "name"):
        return ("name", *path[2:])
    if path[:1] != ("spec",) or len(path) < 2:
        return ("provider",)  # "exactly one of provider or providerRef" is about the spec as a whole
    field, rest = path[1], path[2:]
    if field == "limits":
        return ("limits", *rest[1:])  # spec.limits.resources.cpu → limits.cpu
    if field == "provider":
        return ("provider", "spec", *rest)
    if field == "providerRef":
        return ("provider", "name")
    if field == "kubeletConfiguration":
        return ("kubelet", *rest)
    return (field, *rest) if field in _SPEC_FIELDS else path


def _template_path(path: Path) -> Path:
    """The set field at a path of the rebuilt AWSNodeTemplate document (the providerRef's template)."""
    if path[:1] == ("spec",):
        return ("provider", "spec", *path[1:])
    return ("provider", "name") if path[:2] == ("metadata", "name") else ("provider",)


def provisioner_document(data: Mapping[str, Any]) -> dict[str, Any]:
    """The Provisioner a set's content stands for (values as they are: the schema judges them)."""
    spec: dict[str, Any] = {field: data[field] for field in sorted(_SPEC_FIELDS) if field in data}
    for field in ("ttlSecondsAfterEmpty", "ttlSecondsUntilExpired"):
        if spec.get(field) is None:
            spec.pop(field, None)
    weight = spec.get("weight")
    if type(weight) is int and weight == 0:  # compile writes 0 for a Provisioner without a weight
        del spec["weight"]
    if "limits" in data:
        spec["limits"] = {"resources": data["limits"]}
    if data.get("kubelet") is not None:
        spec["kubeletConfiguration"] = data["kubelet"]
    provider = data.get("provider")
    if isinstance(provider, Mapping):
        if provider.get("source") == PROVIDER_INLINE:
            spec["provider"] = provider.get("spec")
        else:
            spec["providerRef"] = {"name": provider.get("name")}
    return {
        "apiVersion": PROVISIONER_API_VERSION,
        "kind": PROVISIONER_KIND,
        "metadata": {"name": data.get("name")},
        "spec": spec,
    }


def _errors(
    doc: Mapping[str, Any],
    schema: str,
    rules: Callable[[Mapping[str, Any]], list[Violation]],
    to_set: Callable[[Path], Path],
) -> Iterator[str]:
    """Each error of `doc` against its schema, else (the schema passes) against its rules, naming set fields."""
    violations = schema_violations(doc, schema, lambda path: render_path(to_set(path)))
    if violations:  # the schema's messages name the field themselves
        yield from (violation.message for violation in violations)
        return
    for violation in rules(doc):
        if violation.severity == ERROR:
            yield f"{render_path(to_set(violation.path))}: {violation.message}"


def _provisioner_problems(data: Mapping[str, Any]) -> Iterator[str]:
    yield from _errors(provisioner_document(data), _PROVISIONER_SCHEMA, validate_provisioner, _set_path)


def _node_template_problems(name: str, spec: Mapping[str, Any]) -> Iterator[str]:
    """The node template a providerRef set carries, as an AWSNodeTemplate of that name."""
    meta = {"name": name}
    doc = {"apiVersion": NODE_TEMPLATE_API_VERSION, "kind": NODE_TEMPLATE_KIND, "metadata": meta, "spec": spec}
    yield from _errors(doc, _NODE_TEMPLATE_SCHEMA, validate_node_template, _template_path)


# --- the set's own fields --------------------------------------------------------------------------------------


def _provider_problems(provider: Any) -> Iterator[str]:
    if provider is None:
        return  # the Provisioner check says that one of provider or providerRef is required
    if not isinstance(provider, Mapping):
        yield f"provider must be a mapping of source, name and spec, not {type_name(provider)} {show_value(provider)}"
        return
    unknown = sorted(str(k) for k in provider if k not in PROVIDER_FIELDS)
    missing = sorted(PROVIDER_FIELDS - provider.keys())
    if unknown or missing:
        yield f"provider must hold exactly source, name and spec (unknown: {show_value(unknown)}, missing: {missing})"
        return
    source, name, spec = provider["source"], provider["name"], provider["spec"]
    if source == PROVIDER_INLINE:
        if name is not None:
            yield f"provider.name must be null for an inline provider, not {show_value(name)}"
        if not isinstance(spec, Mapping):
            yield f"provider.spec must be a mapping for an inline provider, not {type_name(spec)} {show_value(spec)}"
    elif source == PROVIDER_REF:
        if not isinstance(name, str):
            yield f"provider.name must be the AWSNodeTemplate's name, not {type_name(name)} {show_value(name)}"
        if spec is not None and not isinstance(spec, Mapping):
            yield f"provider.spec must be a mapping or null, not {type_name(spec)} {show_value(spec)}"
        if isinstance(name, str) and isinstance(spec, Mapping):
            yield from _node_template_problems(name, spec)
        elif isinstance(name, str) and not wk.is_dns1035_label(name):
            yield f"provider.name {show_value(name)} is not a name an AWSNodeTemplate can have (a DNS-1035 label)"
    else:
        yield f"provider.source must be {PROVIDER_REF} or {PROVIDER_INLINE}, not {show_value(source)}"


def _strings(value: Any, field: str) -> Iterator[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        yield f"{field} must be a list of strings, not {type_name(value)} {show_value(value)}"


def _admitted_problems(admitted: Any) -> Iterator[str]:
    if not isinstance(admitted, list) or not all(isinstance(name, str) for name in admitted):
        yield f"admitted must be a list of instance-type names, not {type_name(admitted)} {show_value(admitted)}"
        return
    if len(set(admitted)) != len(admitted):
        yield "admitted lists an instance type twice"
    for index, name in enumerate(admitted):
        errors = wk.label_value_errors(name)
        if errors or not name:
            why = errors[0] if errors else "empty"
            yield f"admitted[{index}] {show_value(name)} is not an instance-type name: {why}"
            return


def _price(value: Any) -> bool:
    """A price as compile writes one: null (no price data) or a finite number ≥ 0."""
    if value is None:
        return True
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= 2**31 - 1


def _listing_problems(listing: Any) -> Iterator[str]:
    """The audit listing of a file: each admitted type with its offerings and prices."""
    if not isinstance(listing, list):
        yield f"instanceTypes must be a list, not {type_name(listing)} {show_value(listing)}"
        return
    for index, item in enumerate(listing):
        where = f"instanceTypes[{index}]"
        if not isinstance(item, Mapping) or item.keys() != LISTING_FIELDS:
            yield f"{where} must be a mapping of {', '.join(sorted(LISTING_FIELDS))}"
            return
        if not isinstance(item["name"], str):
            yield f"{where}.name must be a string, not {type_name(item['name'])}"
        for field in ("vcpu", "memoryMiB", "pods", "gpus"):
            if not _count(item[field]):
                yield f"{where}.{field} must be an integer of 0 to {2**31 - 1}, not {show_value(item[field])}"
        if not _price(item["priceOnDemand"]):
            yield f"{where}.priceOnDemand must be null or a price ≥ 0, not {show_value(item['priceOnDemand'])}"
        offerings = item["offerings"]
        if not isinstance(offerings, Mapping) or not all(
            isinstance(zones, Mapping) and all(isinstance(zone, str) and _price(p) for zone, p in zones.items())
            for zones in offerings.values()
        ):
            yield f"{where}.offerings must map capacity types to zones to prices (null or ≥ 0)"


def _own_field_problems(data: Mapping[str, Any]) -> Iterator[str]:
    unknown = sorted(str(k) for k in data if k not in CONTENT_FIELDS | FILE_FIELDS)
    if unknown:
        yield f"unknown field {show_value(unknown[0])}"
    for field in sorted(CONTENT_FIELDS - data.keys()):
        yield f"missing required field {field!r}"
    version = data.get("version")
    if "version" in data and (not isinstance(version, str) or not version):
        yield f"version must be a non-empty string, not {type_name(version)} {show_value(version)}"
    if "sources" in data:
        yield from _strings(data["sources"], "sources")
    region = data.get("region")
    if "region" in data:
        if not isinstance(region, str) or not region:
            yield f"region must be a non-empty string, not {type_name(region)} {show_value(region)}"
        elif errors := wk.label_value_errors(region):
            yield f"region {show_value(region)} is not a label value: {errors[0]}"
    if "admitted" in data:
        yield from _admitted_problems(data["admitted"])
    if "instanceTypes" in data:
        yield from _listing_problems(data["instanceTypes"])
    if "hash" in data and not isinstance(data["hash"], str):
        yield f"hash must be a string, not {type_name(data['hash'])} {show_value(data['hash'])}"
    yield from _provider_problems(data.get("provider"))


def set_problems(data: Mapping[str, Any]) -> list[str]:
    """Why the content of a constraint set (a JSON object, wire or file form, `admitted` as names) cannot be used,
    first problem first; empty when it can (see the module docstring)."""
    problems = list(_own_field_problems(data))
    if problems:
        return problems
    problems = list(_provisioner_problems(data))
    if problems:
        return problems
    provider = data.get("provider")
    spec = provider.get("spec") if isinstance(provider, Mapping) else None
    try:
        node_configuration(data.get("kubelet"), spec if isinstance(spec, Mapping) else None)
    except ValueError as error:
        where = "kubelet" if str(error).startswith("kubeletConfiguration") else "provider.spec"
        return [f"{where}: {error}"]
    return []


# --- a NodePool's set ---------------------------------------------------------------------------------------

#: The fields of a NodePool set's content: a Provisioner set's less the v1alpha5-only ones, with `origin`, `nodePool`.
V1ALPHA5_ONLY_FIELDS = frozenset({"ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "consolidation"})
NODEPOOL_CONTENT_FIELDS = (CONTENT_FIELDS - V1ALPHA5_ONLY_FIELDS) | {"origin", "nodePool"}
NODEPOOL_FIELDS = frozenset({"minValues", "disruption", "expireAfter", "terminationGracePeriod"})
#: Where a field of the rebuilt NodePool document is in the set.
_NODEPOOL_PATHS: tuple[tuple[Path, Path], ...] = (
    (("spec", "template", "spec", "requirements"), ("requirements",)),
    (("spec", "template", "metadata", "labels"), ("labels",)),
    (("spec", "template", "metadata", "annotations"), ("annotations",)),
    (("spec", "template", "spec", "taints"), ("taints",)),
    (("spec", "template", "spec", "startupTaints"), ("startupTaints",)),
    (("spec", "template", "spec", "nodeClassRef"), ("provider", "name")),
    (("spec", "template", "spec"), ("nodePool",)),
    (("spec", "disruption"), ("nodePool", "disruption")),
    (("spec", "limits"), ("limits",)),
    (("spec", "weight"), ("weight",)),
    (("metadata", "name"), ("name",)),
)


def _nodepool_set_path(path: Path) -> Path:
    for own, field in _NODEPOOL_PATHS:
        if path[: len(own)] == own:
            return field + path[len(own) :]
    return path


def nodepool_document(data: Mapping[str, Any]) -> dict[str, Any]:
    """The NodePool a NodePool set's content stands for (values as they are: admission judges them); each key's
    `minValues` on its first requirement."""
    nodepool = data.get("nodePool") if isinstance(data.get("nodePool"), Mapping) else {}
    assert isinstance(nodepool, Mapping)
    min_values = dict(nodepool.get("minValues") or {}) if isinstance(nodepool.get("minValues"), Mapping) else {}
    requirements = []
    for term in data.get("requirements") or []:
        if isinstance(term, Mapping) and term.get("key") in min_values:
            term = {**term, "minValues": min_values.pop(term.get("key"))}
        requirements.append(term)
    provider = data.get("provider")
    ref_name = provider.get("name") if isinstance(provider, Mapping) else None
    template_spec: dict[str, Any] = {
        "requirements": requirements,
        "nodeClassRef": {"group": EC2NODECLASS_API_VERSION.split("/")[0], "kind": EC2NODECLASS_KIND, "name": ref_name},
    }
    for field in ("taints", "startupTaints"):
        if data.get(field):
            template_spec[field] = data[field]
    for field in ("expireAfter", "terminationGracePeriod"):
        if nodepool.get(field) is not None:
            template_spec[field] = nodepool[field]
    metadata: dict[str, Any] = {}
    for field in ("labels", "annotations"):
        if data.get(field):
            metadata[field] = data[field]
    spec: dict[str, Any] = {"template": {"metadata": metadata, "spec": template_spec}}
    if nodepool.get("disruption") is not None:
        spec["disruption"] = nodepool["disruption"]
    if data.get("limits"):
        spec["limits"] = data["limits"]
    weight = data.get("weight")
    if not (type(weight) is int and weight == 0):  # compile writes 0 for a NodePool without a weight
        spec["weight"] = weight
    metadata_name = {"name": data.get("name")}
    return {"apiVersion": NODEPOOL_API_VERSION, "kind": NODEPOOL_KIND, "metadata": metadata_name, "spec": spec}


def _v1_errors(doc: Mapping[str, Any], to_set: Callable[[Path], Path]) -> Iterator[str]:
    for violation in check_v1(doc):
        if violation.severity == ERROR:
            yield f"{render_path(to_set(violation.path))}: {violation.message}"


def _nodepool_own_problems(data: Mapping[str, Any]) -> Iterator[str]:
    unknown = sorted(str(k) for k in data if k not in NODEPOOL_CONTENT_FIELDS | FILE_FIELDS)
    if unknown:
        yield f"unknown field {show_value(unknown[0])} (a NodePool's set has none)"
    for field in sorted(NODEPOOL_CONTENT_FIELDS - data.keys()):
        yield f"missing required field {field!r}"
    nodepool = data.get("nodePool")
    if not isinstance(nodepool, Mapping) or set(nodepool) != NODEPOOL_FIELDS:
        yield f"nodePool must be a mapping of {', '.join(sorted(NODEPOOL_FIELDS))}, not {show_value(nodepool)}"
    provider = data.get("provider")
    if not isinstance(provider, Mapping) or set(provider) != PROVIDER_FIELDS:
        yield f"provider must be a mapping of source, name and spec, not {show_value(provider)}"
    elif provider["source"] != PROVIDER_NODE_CLASS or not isinstance(provider["name"], str):
        yield f"provider must name the EC2NodeClass (source {PROVIDER_NODE_CLASS}), not {show_value(provider)}"
    elif provider["spec"] is not None and not isinstance(provider["spec"], Mapping):
        spec = provider["spec"]
        yield f"provider.spec must be a mapping or null, not {type_name(spec)} {show_value(spec)}"


def nodepool_set_problems(data: Mapping[str, Any]) -> list[str]:
    """Why the content of a NodePool's set cannot be used, first problem first (see the module docstring)."""
    problems = list(_nodepool_own_problems(data))
    kept = {k: v for k, v in data.items() if k not in ("origin", "nodePool", "provider")}
    problems += [p for p in _own_field_problems({**kept, **dict.fromkeys(V1ALPHA5_ONLY_FIELDS), "provider": None})
                 if "missing required field" not in p and "unknown field" not in p]
    if problems:
        return problems
    problems = list(_v1_errors(nodepool_document(data), _nodepool_set_path))
    provider = data["provider"]
    if provider["spec"] is None:  # the EC2NodeClass was not compiled with it: its nodes cannot be launched
        return problems
    node_class = {
        "apiVersion": EC2NODECLASS_API_VERSION,
        "kind": EC2NODECLASS_KIND,
        "metadata": {"name": provider["name"]},
        "spec": dict(provider["spec"]),
    }
    problems += _v1_errors(node_class, lambda path: ("provider", *path) if path[:1] == ("spec",) else ("provider",))
    return problems


__all__ = [
    "NODEPOOL_CONTENT_FIELDS",
    "nodepool_document",
    "nodepool_set_problems",
    "CONTENT_FIELDS", "PROVIDER_INLINE", "PROVIDER_NODE_CLASS", "PROVIDER_REF", "provisioner_document", "set_problems"
]  # fmt: skip
