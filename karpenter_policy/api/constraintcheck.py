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

A NodePool's set (`origin` NodePool, for a reader that runs them: `api.constraintset`) is checked the same way by
`nodepool_set_problems`: its own fields (`nodePool` for the TTLs and consolidation, a `nodeClassRef` provider), then
the NodePool it stands for (`nodepool_document`) and the EC2NodeClass it carries, each through what Karpenter
v1.14.1 refuses (the CRD's schema and CEL rules, NodePool's RuntimeValidate: `api.v1.admission.check`).

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
#: A NodePool's set: the EC2NodeClass its nodeClassRef names.
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


def _own_field_problems(data: Mapping[str, Any], fields: frozenset[str] = CONTENT_FIELDS) -> Iterator[str]:
    """The set's own fields (`fields`: a Provisioner's set's, or a NodePool's), its provider aside."""
    unknown = sorted(str(k) for k in data if k not in fields | FILE_FIELDS)
    if unknown:
        yield f"unknown field {show_value(unknown[0])}"
    for field in sorted(fields - data.keys()):
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


def set_problems(data: Mapping[str, Any]) -> list[str]:
    """Why the content of a constraint set (a JSON object, wire or file form, `admitted` as names) cannot be used,
    first problem first; empty when it can (see the module docstring)."""
    problems = [*_own_field_problems(data), *_provider_problems(data.get("provider"))]
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


# --- a NodePool's set ----------------------------------------------------------------------------------------

#: A NodePool's set has no v1alpha5 TTLs or consolidation (v1 says the same in `nodePool`), and has these two.
V1ALPHA5_ONLY_FIELDS = frozenset({"ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "consolidation"})
NODEPOOL_CONTENT_FIELDS = (CONTENT_FIELDS - V1ALPHA5_ONLY_FIELDS) | {"origin", "nodePool"}
NODEPOOL_FIELDS = frozenset({"minValues", "disruption", "expireAfter", "terminationGracePeriod"})
#: The `nodePool` field only a static NodePool's set has (`spec.replicas`): a dynamic NodePool's set is as before.
NODEPOOL_OPTIONAL_FIELDS = frozenset({"replicas"})
#: The NodePool fields a set keeps as its own (the others are mapped in `_nodepool_set_path`).
_TEMPLATE_SPEC_FIELDS = frozenset({"requirements", "taints", "startupTaints"})


def _nodepool_set_path(path: Path) -> Path:
    """The set field at a path of the rebuilt NodePool document."""
    if path[:2] == ("metadata", "name"):
        return ("name", *path[2:])
    if path[:3] == ("spec", "template", "metadata") and len(path) > 3:
        return path[3:]  # labels, annotations
    if path[:3] == ("spec", "template", "spec") and len(path) > 3:
        field, rest = path[3], path[4:]
        if field in _TEMPLATE_SPEC_FIELDS:
            return (field, *rest)
        return ("provider", "name") if field == "nodeClassRef" else ("nodePool", field, *rest)
    if path[:2] in (("spec", "disruption"), ("spec", "replicas")):
        return ("nodePool", *path[1:])
    return path[1:] if path[:1] == ("spec",) and len(path) > 1 else ("nodePool",)


def nodepool_document(data: Mapping[str, Any]) -> dict[str, Any]:
    """The NodePool a NodePool set's content stands for: its scheduling view's requirements (labels folded in, as
    compile writes them, each with the `minValues` of its key), labels, annotations, taints, startup taints, the
    nodeClassRef, limits (`nodes` included), weight, and `nodePool`'s disruption, expireAfter,
    terminationGracePeriod and replicas (values as they are: the CRD's schema and CEL rules judge them)."""
    extra = data.get("nodePool")
    extra = extra if isinstance(extra, Mapping) else {}
    wanted = extra.get("minValues")
    minimum = wanted if isinstance(wanted, Mapping) else {}
    requirements = data.get("requirements")
    if isinstance(requirements, list):
        requirements = [
            {**term, "minValues": minimum[wk.normalize_key(term["key"])]}
            if isinstance(term, Mapping) and isinstance(term.get("key"), str)
            and wk.normalize_key(term["key"]) in minimum
            else term
            for term in requirements
        ]  # fmt: skip
    template_spec: dict[str, Any] = {
        "requirements": requirements,
        "taints": data.get("taints"),
        "startupTaints": data.get("startupTaints"),
    }
    provider = data.get("provider")
    if isinstance(provider, Mapping):
        template_spec["nodeClassRef"] = {
            "group": EC2NODECLASS_API_VERSION.split("/")[0],
            "kind": EC2NODECLASS_KIND,
            "name": provider.get("name"),
        }
    for field in ("expireAfter", "terminationGracePeriod"):
        if extra.get(field) is not None:
            template_spec[field] = extra[field]
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": data.get("labels"), "annotations": data.get("annotations")},
            "spec": template_spec,
        },
        "limits": data.get("limits"),
    }
    if "disruption" in extra:
        spec["disruption"] = extra["disruption"]
    if "replicas" in extra:
        spec["replicas"] = extra["replicas"]
    weight = data.get("weight")
    if not (type(weight) is int and weight == 0):  # compile writes 0 for a NodePool without a weight
        spec["weight"] = weight
    return {
        "apiVersion": NODEPOOL_API_VERSION,
        "kind": NODEPOOL_KIND,
        "metadata": {"name": data.get("name")},
        "spec": spec,
    }


def _v1_errors(doc: Mapping[str, Any], to_set: Callable[[Path], Path]) -> Iterator[str]:
    """Each error Karpenter v1.14.1 has with `doc` (the API server's schema and CEL rules, NodePool's
    RuntimeValidate: `api.v1.admission.check`), naming set fields. Imported here, not at the top: cel-python costs
    the controller's start-up a second, and only a reader of NodePool sets needs it."""
    from karpenter_policy.api.v1.admission import check

    for violation in check(doc):
        if violation.severity == ERROR:
            yield f"{render_path(to_set(violation.path))}: {violation.message}".removeprefix(": ")


def _nodepool_own_problems(data: Mapping[str, Any]) -> Iterator[str]:
    """`nodePool` and the provider of a NodePool's set (its EC2NodeClass)."""
    extra = data.get("nodePool")
    allowed = NODEPOOL_FIELDS | NODEPOOL_OPTIONAL_FIELDS
    if not isinstance(extra, Mapping) or not NODEPOOL_FIELDS <= extra.keys() <= allowed:
        yield (f"nodePool must be a mapping of {', '.join(sorted(NODEPOOL_FIELDS))} (and, for a static NodePool, "
               f"{', '.join(sorted(NODEPOOL_OPTIONAL_FIELDS))})")
    elif not isinstance(extra["minValues"], Mapping) or not all(
        isinstance(key, str) and type(count) is int for key, count in extra["minValues"].items()
    ):
        yield f"nodePool.minValues must map label keys to integers, not {show_value(extra['minValues'])}"
    provider = data.get("provider")
    if not isinstance(provider, Mapping) or provider.keys() != PROVIDER_FIELDS:
        yield "provider must be a mapping of source, name and spec"
        return
    if provider["source"] != PROVIDER_NODE_CLASS:
        yield f"provider.source must be {PROVIDER_NODE_CLASS} in a NodePool's set, not {show_value(provider['source'])}"
    if not isinstance(provider["name"], str):
        yield f"provider.name must be the EC2NodeClass's name, not {type_name(provider['name'])}"
    if provider["spec"] is not None and not isinstance(provider["spec"], Mapping):
        spec = provider["spec"]
        yield f"provider.spec must be a mapping or null, not {type_name(spec)} {show_value(spec)}"


def nodepool_set_problems(data: Mapping[str, Any]) -> list[str]:
    """Why the content of a NodePool's set cannot be used, first problem first; empty when it can: its own fields
    (as a Provisioner set's, with `origin` and `nodePool` for the TTLs and consolidation), then the NodePool it
    stands for (`nodepool_document`) and the EC2NodeClass its provider carries, each as Karpenter v1.14.1 admits it."""
    problems = [*_own_field_problems(data, NODEPOOL_CONTENT_FIELDS), *_nodepool_own_problems(data)]
    if problems:
        return problems
    problems = list(_v1_errors(nodepool_document(data), _nodepool_set_path))
    if problems:
        return problems
    provider = data["provider"]
    if provider["spec"] is not None:
        doc = {
            "apiVersion": EC2NODECLASS_API_VERSION,
            "kind": EC2NODECLASS_KIND,
            "metadata": {"name": provider["name"]},
            "spec": provider["spec"],
        }
        return list(
            _v1_errors(doc, lambda path: ("provider", *path) if path[:1] == ("spec",) else ("provider", "name"))
        )
    return []


__all__ = [
    "CONTENT_FIELDS", "NODEPOOL_CONTENT_FIELDS", "PROVIDER_INLINE", "PROVIDER_NODE_CLASS", "PROVIDER_REF",
    "nodepool_document", "nodepool_set_problems", "provisioner_document", "set_problems",
]  # fmt: skip
