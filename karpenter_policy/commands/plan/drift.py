"""Which nodes a policy change drifts or expires, and why — Karpenter v0.31.1's rules, stated so that a snapshot
and the two revisions suffice.

* **static drift** (`pkg/controllers/nodeclaim/disruption/drift.go`, `areStaticFieldsDrifted`, core v0.31.1): a node
  whose Provisioner's hash changed. The hash (`pkg/apis/v1alpha5/provisioner.go`, `Provisioner.Hash`) covers the
  spec but its `hash:"ignore"` fields — requirements, provider, providerRef, the TTLs, limits, weight and
  consolidation —, so it covers `annotations`, `labels`, `taints`, `startupTaints` and `kubeletConfiguration`;
  slices as sets, zero values as absent (`SlicesAsSets`, `IgnoreZeroValue`, `ZeroNil`). The plan compares those
  fields of BASE's and HEAD's (defaulted) Provisioner and names each that differs (`spec.labels.team changed`). As
  Karpenter, only a node that carries the hash annotation (`karpenter.sh/provisioner-hash`, or this project's
  controller's `karpenter-policy/node-hash`) can drift so; one without it never drifts statically.
* **node template drift** (aws v0.31.1 `pkg/cloudprovider/drift.go`, `areStaticFieldsDrifted`;
  `pkg/apis/v1alpha1/awsnodetemplate.go`, `AWSNodeTemplate.Hash`): the same for the AWSNodeTemplate the node's
  Provisioner references, its spec hashed but `amiSelector`, `subnetSelector`, `securityGroupSelector` and
  `launchTemplate` (`hash:"ignore"`), on nodes carrying `karpenter.k8s.aws/nodetemplate-hash`.
* **requirement drift** (`areRequirementsDrifted`): the node's labels are no longer compatible with HEAD's
  requirements (`Requirements.incompatibilities`, Karpenter's `Compatible`: well-known keys the node lacks are
  allowed, custom ones are not).
* Karpenter v0.31 runs the three only with `featureGates.driftEnabled` (off by default); the plan models it on, as
  this project's controller runs, unless told the cluster keeps it off (`drift_enabled=False`).
* **expiry** (`pkg/controllers/deprovisioning/expiration.go`, `Expiration.ShouldDeprovision`; `GetExpirationTime`):
  HEAD's `ttlSecondsUntilExpired` from the node's creation — a node past it at the plan's start, or within the
  plan's horizon after it (`horizon`: `--horizon`), expires, drift or not; the waves take it at its time.
* **removed**: a node whose Provisioner BASE has and HEAD does not. Karpenter v0.31 deletes a Provisioner's Machines
  with it (their owner reference): every such node goes at once, whether drift is enabled or not.

* **AMI drift** (aws v0.31.1 `pkg/cloudprovider/drift.go`, `isAMIDrifted`): with the EC2 and SSM answers the user
  saved, a node whose instance's AMI is not the one HEAD's AWSNodeTemplate maps to its type (`templateamidrift`,
  given as `ami`).

* **security-group and subnet drift** (aws v0.31.1 `areSecurityGroupsDrifted`, `isSubnetDrifted`, after AMI
  drift, security groups first): the instance's network (`--instances`) against what HEAD's AWSNodeTemplate's
  `securityGroupSelector` / `subnetSelector` select of `--security-groups` / `--subnets` (`networkdrift`, given as
  `network`); a template with `launchTemplate` never drifts its security groups.

Karpenter v1 NodePools' nodes follow v1.14.1's rules instead (`nodepooldrift`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from karpenter_policy.api.defaults import default_provisioner
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.commands.plan.fleet import FleetNode
from karpenter_policy.model.requirements import Requirements

__all__ = [
    "AMI_DRIFT",
    "HASH_ANNOTATIONS",
    "AmiCheck",
    "NetworkCheck",
    "NODE_TEMPLATE_HASH_ANNOTATION",
    "DriftRules",
    "NodeDrift",
    "PolicySide",
    "expiry_word",
    "hashed_changes",
    "is_expiry",
    "node_drift",
    "provisioner_changes",
    "template_changes",
]

#: The annotations that carry the hash a node was launched with: Karpenter's, and this project's controller's.
#: Karpenter's drift reason for an instance that does not run the AMI its template or class selects (aws v0.31.1
#: and v1.14.1 `pkg/cloudprovider/drift.go`, `AMIDrift`).
AMI_DRIFT: Final = "AMIDrift"
HASH_ANNOTATIONS = ("karpenter.sh/provisioner-hash", "karpenter-policy/node-hash")
NODE_TEMPLATE_HASH_ANNOTATION = "karpenter.k8s.aws/nodetemplate-hash"
#: The Provisioner spec fields its hash covers (every field but those tagged `hash:"ignore"`).
HASHED_PROVISIONER_FIELDS = ("annotations", "labels", "taints", "startupTaints", "kubeletConfiguration")
#: The AWSNodeTemplate spec fields its hash ignores.
UNHASHED_TEMPLATE_FIELDS = frozenset({"amiSelector", "subnetSelector", "securityGroupSelector", "launchTemplate"})


class AmiCheck(Protocol):
    """A node's AMI drift (`templateamidrift.TemplateAmiDrift`): its reason, or None."""

    def __call__(self, node_name: str, instance_type: str, template_name: str | None) -> str | None: ...


class NetworkCheck(Protocol):
    """A node's security-group and subnet drift (`networkdrift.NetworkDriftRules`): (field, reason) pairs."""

    def template(self, name: str | None, node: FleetNode) -> list[tuple[str, str]] | None: ...


@dataclass(frozen=True, slots=True)
class PolicySide:
    """One revision's valid Provisioner and AWSNodeTemplate documents by name, and its Karpenter v1 NodePools and
    EC2NodeClasses by name as the API server stores them (defaults applied)."""

    label: str
    provisioners: Mapping[str, Mapping[str, Any]]
    node_templates: Mapping[str, Mapping[str, Any]]
    nodepools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    node_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeDrift:
    """What the change does to one node: `reasons` (each naming the field or label), whether it `drifted`,
    `expires` (past its TTL at the start or within the plan's horizon), its expiry time, `removed` (its Provisioner
    is gone in HEAD), and `unknown` (its Provisioner is in neither side: not this repository's, left alone)."""

    drifted: bool = False
    reasons: tuple[str, ...] = ()
    expires: bool = False
    expires_at: dt.datetime | None = None
    removed: bool = False
    unknown: bool = False
    fields: tuple[str, ...] = field(default=(), repr=False)  # the static fields that drift it, for the summary
    #: Karpenter v1: the NodeClaim's terminationGracePeriod (seconds; None: unset, a blocked drain waits for ever)
    termination_grace: float | None = None

    @property
    def disrupted(self) -> bool:
        return self.drifted or self.expires or self.removed


def expiry_word(expires_at: dt.datetime, start: dt.datetime) -> str:
    """How an expiry reason begins: `expired` at the start, `expires <time>` when it falls later in the horizon."""
    return "expired" if expires_at <= start else f"expires {expires_at:%Y-%m-%dT%H:%M:%SZ}"


def is_expiry(reason: str) -> bool:
    """Whether a reason is an expiry (:func:`expiry_word`), not a drift."""
    return reason.startswith(("expired:", "expires "))


def _zero(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value is False or value == {} or value == []


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def hashed_changes(path: str, base: Any, head: Any) -> list[str]:
    """The differences between two hashed values, each naming its path: maps key by key, lists as sets."""
    if _zero(base) and _zero(head):
        return []
    if _zero(base) or _zero(head):
        return [f"{path} {'added' if _zero(base) else 'removed'}"]
    if isinstance(base, Mapping) or isinstance(head, Mapping):
        if not isinstance(base, Mapping) or not isinstance(head, Mapping):
            return [f"{path} changed"]
        out: list[str] = []
        for key in sorted(set(base) | set(head), key=str):
            out.extend(hashed_changes(f"{path}.{key}", base.get(key), head.get(key)))
        return out
    if isinstance(base, list) and isinstance(head, list):
        before, after = {_canonical(v) for v in base}, {_canonical(v) for v in head}
        return [] if before == after else [f"{path} changed"]
    return [] if _canonical(base) == _canonical(head) else [f"{path} changed"]


def provisioner_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """The hashed fields of a Provisioner that differ between BASE's and HEAD's documents (defaulted)."""
    before = default_provisioner(base).get("spec") or {}
    after = default_provisioner(head).get("spec") or {}
    out: list[str] = []
    for name in HASHED_PROVISIONER_FIELDS:
        out.extend(hashed_changes(f"spec.{name}", before.get(name), after.get(name)))
    return out


def template_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """The hashed fields of an AWSNodeTemplate that differ between BASE's and HEAD's documents."""
    before = {k: v for k, v in (base.get("spec") or {}).items() if k not in UNHASHED_TEMPLATE_FIELDS}
    after = {k: v for k, v in (head.get("spec") or {}).items() if k not in UNHASHED_TEMPLATE_FIELDS}
    keys = sorted(set(before) | set(after))
    return [c for key in keys for c in hashed_changes(f"spec.{key}", before.get(key), after.get(key))]


def _provider_ref(document: Mapping[str, Any]) -> str | None:
    ref = (document.get("spec") or {}).get("providerRef")
    return str(ref["name"]) if isinstance(ref, Mapping) and ref.get("name") is not None else None


class DriftRules:
    """The rules of the module docstring for one BASE → HEAD change, what they compare of each provisioner computed
    once (a fleet has thousands of nodes and a few provisioners)."""

    def __init__(self, base: PolicySide, head: PolicySide, start: dt.datetime, *, drift_enabled: bool = True,
                 horizon: dt.timedelta = dt.timedelta(0), ami: AmiCheck | None = None,
                 network: NetworkCheck | None = None) -> None:
        self.base, self.head, self.start, self.drift_enabled = base, head, start, drift_enabled
        #: AMI drift from the user's EC2 and SSM answers (None: not assessed)
        self.ami = ami
        #: security-group and subnet drift from the user's EC2 answers (None: not assessed)
        self.network = network
        #: nodes expiring until `start + horizon` are planned (at their expiry time)
        self.horizon = horizon
        self._static: dict[str, list[str]] = {}
        self._template: dict[str, list[str]] = {}
        self._requirements: dict[str, Requirements] = {}
        #: nodes of a provisioner whose hashed fields changed that carry no hash annotation (no static drift)
        self.unhashed: dict[str, int] = {}

    def _static_changes(self, name: str, base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
        if name not in self._static:
            self._static[name] = provisioner_changes(base, head)
        return self._static[name]

    def notes(self) -> list[str]:
        """What the reader should know of the nodes static drift skipped."""
        return [
            (f"{count} nodes of provisioner {name} carry" if count != 1 else f"1 node of provisioner {name} carries")
            + f" no {HASH_ANNOTATIONS[0]} annotation: Karpenter does not drift {'them' if count != 1 else 'it'} "
            f"for {', '.join(self._static[name])}"
            for name, count in sorted(self.unhashed.items())
        ]

    def _template_changes(self, name: str, base: Mapping[str, Any]) -> list[str]:
        if name not in self._template:
            template = _provider_ref(base)
            old = self.base.node_templates.get(template) if template is not None else None
            new = self.head.node_templates.get(template) if template is not None else None
            changes = template_changes(old, new) if old is not None and new is not None else []
            self._template[name] = [f"AWSNodeTemplate {template}: {c}" for c in changes]
        return self._template[name]

    def _head_requirements(self, name: str, head: Mapping[str, Any]) -> Requirements:
        if name not in self._requirements:
            self._requirements[name] = Requirements.from_node_selector(Provisioner.from_document(head).node_selector)
        return self._requirements[name]

    def __call__(self, node: FleetNode) -> NodeDrift:
        """What BASE → HEAD does to `node`; a node not of a Provisioner is left alone."""
        name = node.provisioner
        if name is None:
            return NodeDrift()
        head_doc, base_doc = self.head.provisioners.get(name), self.base.provisioners.get(name)
        if head_doc is None:
            if base_doc is None:
                return NodeDrift(unknown=True)
            return NodeDrift(reasons=(f"provisioner {name} removed",), removed=True)
        reasons: list[str] = []
        fields: list[str] = []
        if self.drift_enabled:
            if base_doc is not None and any(a in node.annotations for a in HASH_ANNOTATIONS):
                changed = self._static_changes(name, base_doc, head_doc)
                fields += changed
                reasons += [f"{c} (provisioner {name})" for c in changed]
            elif base_doc is not None and self._static_changes(name, base_doc, head_doc):
                self.unhashed[name] = self.unhashed.get(name, 0) + 1
            if base_doc is not None and NODE_TEMPLATE_HASH_ANNOTATION in node.annotations:
                changed = self._template_changes(name, base_doc)
                fields += changed
                reasons += changed
            template = _provider_ref(head_doc)
            network = self.network.template(template, node) if self.network is not None else []
            if self.ami is not None and network is not None:  # None: v0.31.1's cloud drift check errors
                why = self.ami(node.name, node.instance_type, template)
                if why is not None:
                    fields.append(f"AWSNodeTemplate {template}: {why.split(':', 1)[0]}")
                    reasons.append(why)
            for which, why in network or ():
                fields.append(which)
                reasons.append(why)
            requirements = self._head_requirements(name, head_doc)
            for why in Requirements.from_labels(dict(node.labels)).incompatibilities(requirements):
                reasons.append(f"requirement drift: {why} (provisioner {name}'s spec.requirements)")
        ttl = (head_doc.get("spec") or {}).get("ttlSecondsUntilExpired")
        expires_at = None
        if isinstance(ttl, int) and not isinstance(ttl, bool) and node.created is not None:
            expires_at = node.created + dt.timedelta(seconds=ttl)
        expires = expires_at is not None and expires_at <= self.start + self.horizon
        if expires_at is not None and expires:
            reasons.append(f"{expiry_word(expires_at, self.start)}: created {node.created:%Y-%m-%dT%H:%M:%SZ} + "
                           f"ttlSecondsUntilExpired {ttl}s")
        drifted = any(not is_expiry(r) for r in reasons)
        return NodeDrift(drifted=drifted, reasons=tuple(reasons), expires=expires, expires_at=expires_at,
                         fields=tuple(fields))


def node_drift(
    node: FleetNode,
    base: PolicySide,
    head: PolicySide,
    start: dt.datetime,
    *,
    drift_enabled: bool = True,
) -> NodeDrift:
    """What BASE → HEAD does to one node (:class:`DriftRules` for many)."""
    return DriftRules(base, head, start, drift_enabled=drift_enabled)(node)
