"""Karpenter v1 objects in `validate` and `check`: a `karpenter.sh/v1` NodePool or NodeClaim, a
`karpenter.k8s.aws/v1` EC2NodeClass goes through `api.v1.admission.check` (the CRD's schema with its defaults, its
CEL rules, NodePool's RuntimeValidate: docs/v1.md); any other object of a Karpenter group — v1beta1, a v1alpha5
kind that does not exist, a misspelt kind — is an error naming what is checked, never a silent skip.

The v1alpha5 kinds (Provisioner, AWSNodeTemplate) are `policies`' own and never reach here. The violations carry
the field's path in the object, so `policies.place` puts each at its file:line:column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from karpenter_policy.api.kinds import (
    NODE_TEMPLATE_API_VERSION,
    NODE_TEMPLATE_KIND,
    PROVISIONER_API_VERSION,
    PROVISIONER_KIND,
)
from karpenter_policy.api.schema import nearest_field
from karpenter_policy.api.v1.crds import (
    CRD_FILES,
    CRD_SOURCE_TAG,
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_KIND,
    NODECLAIM_KIND,
    NODEPOOL_API_VERSION,
    NODEPOOL_KIND,
)
from karpenter_policy.api.violations import SCHEMA, Path, Violation, render_path

#: The API groups of Karpenter's own kinds (core's and the AWS provider's).
KARPENTER_GROUPS: Final = frozenset({NODEPOOL_API_VERSION.split("/")[0], EC2NODECLASS_API_VERSION.split("/")[0]})

#: Every Karpenter kind the tool checks, with its apiVersion: what an unchecked object's error lists.
CHECKED: Final = (
    f"{NODEPOOL_KIND} and {NODECLAIM_KIND} ({NODEPOOL_API_VERSION}), {EC2NODECLASS_KIND} ({EC2NODECLASS_API_VERSION}), "
    f"{PROVISIONER_KIND} ({PROVISIONER_API_VERSION}) and {NODE_TEMPLATE_KIND} ({NODE_TEMPLATE_API_VERSION})"
)

#: The v1 kinds and the apiVersion each must have.
V1_API_VERSIONS: Final[dict[str, str]] = {kind: api_version for api_version, kind in CRD_FILES}

#: A version Karpenter served once and no longer does: when it did.
_RETIRED_VERSIONS: Final = {"v1beta1": "v1beta1 was served by Karpenter v0.32 to v1.0 only"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of one object of a Karpenter group: `checked` (a v1 object, its violations Karpenter's) or an
    object of a version or kind the tool does not check (one violation that says so); `kind` is what the summary
    counts it as."""

    kind: str
    checked: bool
    violations: tuple[Violation, ...]


def karpenter_object(data: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Verdict | None:
    """The verdict on `data` (a mapping with a string apiVersion and kind) created, or with `old` updated from
    `old` (the CEL transition rules run then); None when its group is not Karpenter's (another project's kind, even
    one named NodePool: skipped and counted)."""
    api_version, kind = str(data.get("apiVersion")), str(data.get("kind"))
    if V1_API_VERSIONS.get(kind) == api_version:
        # api.v1 brings in cel-python (about half a second of imports): only when there is a v1 object to check
        from karpenter_policy.api.v1.admission import check

        found = [*_name_problems(data), *check(data, old)]
        return Verdict(kind, True, tuple(_named_field(violation) for violation in found))
    group, _, version = api_version.rpartition("/")
    if group not in KARPENTER_GROUPS:
        return None
    return Verdict("(invalid)", False, (_unchecked(api_version, kind, version),))


def _name_problems(data: Mapping[str, Any]) -> list[Violation]:
    """The one metadata check the API server makes that the rules across files need: a name. (`api.v1` leaves
    object metadata alone: docs/v1.md.) A `generateName` stands in for it, as in the API server."""
    metadata = data.get("metadata")
    metadata = metadata if type(metadata) is dict or isinstance(metadata, Mapping) else {}
    name, generate = metadata.get("name"), metadata.get("generateName")
    if isinstance(name, str) and name:
        return []
    if name is None and isinstance(generate, str) and generate:
        return []
    if name is None or name == "":
        return [Violation(SCHEMA, ("metadata", "name"), "Required value: name or generateName is required")]
    return [Violation(SCHEMA, ("metadata", "name"), f"Invalid value: {name!r}: must be a string")]


def _named_field(violation: Violation) -> Violation:
    """`violation` with its field's name before the message, as the API server prints a field error
    (`spec.disruption.consolidateAfter: Required value`): the finding's line is the nearest node the file has,
    which for a missing field is its parent. A message that names its field already is left as it is."""
    field = render_path(violation.path)
    if not field or field in violation.message:
        return violation
    return replace(violation, message=f"{field}: {violation.message}")


def _unchecked(api_version: str, kind: str, version: str) -> Violation:
    retired = f" ({_RETIRED_VERSIONS[version]})" if version in _RETIRED_VERSIONS else ""
    if kind in V1_API_VERSIONS:
        return Violation(
            SCHEMA, ("apiVersion",),
            f"{kind} {api_version} is not checked{retired}: {kind} must have apiVersion {V1_API_VERSIONS[kind]} "
            f"(Karpenter {CRD_SOURCE_TAG}); checked are {CHECKED}",
        )
    hint = nearest_field(kind, sorted(V1_API_VERSIONS)) if api_version in V1_API_VERSIONS.values() else None
    if hint is not None:
        return Violation(SCHEMA, ("kind",), f"unknown kind {kind!r} in {api_version}; did you mean {hint}?")
    return Violation(SCHEMA, ("kind",), f"{kind} {api_version} is not checked{retired}; checked are {CHECKED}")


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    """The EC2NodeClass a NodePool's `spec.template.spec.nodeClassRef` names, and where."""

    name: str
    path: Path


NODE_CLASS_REF_PATH: Final[Path] = ("spec", "template", "spec", "nodeClassRef")


def node_class_ref(data: Mapping[str, Any]) -> NodeClassRef | None:
    """The EC2NodeClass a v1 NodePool names (None for another kind, or a reference to another provider's class)."""
    if data.get("apiVersion") != NODEPOOL_API_VERSION or data.get("kind") != NODEPOOL_KIND:
        return None
    node: Any = data
    for part in NODE_CLASS_REF_PATH:
        node = node.get(part) if type(node) is dict or isinstance(node, Mapping) else None
    if not (type(node) is dict or isinstance(node, Mapping)) or not isinstance(node.get("name"), str):
        return None
    # api.v1.objects: here, not at the top — a v1 NodePool's admission has imported it already, v1alpha5 needs none
    from karpenter_policy.api.v1.objects import NodeClassRef as Reference

    if not Reference.from_api(node).is_ec2_node_class:
        return None  # `foreign-node-class` (api.v1.managed) is its error
    return NodeClassRef(node["name"], (*NODE_CLASS_REF_PATH, "name"))
