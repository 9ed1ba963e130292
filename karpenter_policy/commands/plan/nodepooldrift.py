"""Which nodes of Karpenter v1 NodePools a policy change drifts or expires, and why — Karpenter v1.14.1's rules,
stated so that a snapshot and the two revisions suffice.

* **static drift** (core `pkg/controllers/nodeclaim/disruption/drift.go`, `areStaticFieldsDrifted`): the NodePool's
  hash (`pkg/apis/v1/nodepool.go`, `NodePool.Hash`: `hashstructure` of `spec.template`, slices as sets, zero values
  as absent) differs from the one the NodeClaim was launched with. It covers the template but its `hash:"ignore"`
  field — `spec.template.spec.requirements` —: `metadata.labels`, `metadata.annotations`, `spec.taints`,
  `spec.startupTaints`, `spec.nodeClassRef`, `spec.expireAfter` and `spec.terminationGracePeriod`; `disruption`,
  `limits` and `weight` are outside the template. Durations hash as their value (`1h` is `60m`), `expireAfter:
  Never` as absent.
* **EC2NodeClass drift** (aws `pkg/cloudprovider/drift.go`, `areStaticFieldsDrifted`; `pkg/apis/v1/ec2nodeclass.go`,
  `EC2NodeClass.Hash`): the class the NodeClaim's `nodeClassRef` names, its spec hashed but the `hash:"ignore"`
  fields `subnetSelectorTerms`, `securityGroupSelectorTerms`, `capacityReservationSelectorTerms`, `ipPrefixCount`,
  `amiSelectorTerms` and `amiFamily` — with the AMI family it resolves to (`amiFamily`, else the alias's) hashed
  instead, so `amiFamily: AL2023` added beside the alias `al2023@latest` drifts nothing, a new alias family does.
* **the plan compares, it does not hash.** Go's `hashstructure` is not reimplemented: the plan compares those fields
  of BASE's and HEAD's objects as the API server stores them (defaults applied: `expireAfter` 720h) and names each
  that differs — equal fields hash equal, and a differing field is the reason the hash differs. It does not see
  what the policies do not hold (the cluster's CA bundle, hashed into the class's hash).
* **hash versions** (`nodepool/hash/controller.go`, `updateNodeClaimHash`; aws `nodeclass/hash/controller.go`): a
  NodeClaim must carry the hash and a hash version equal to the running Karpenter's (:data:`NODEPOOL_HASH_VERSION`,
  :data:`EC2NODECLASS_HASH_VERSION`, defined in `api.v1.statichash` with the annotations' names, which the
  controller stamps on its NodePool nodes): a missing or stale one means no static drift — Karpenter re-annotates
  such a NodeClaim with the current hash instead — and a note says how many.
* **requirement drift** (`areRequirementsDrifted`): the NodeClaim's labels (the Node's without a NodeClaim in the
  snapshot) no longer compatible with HEAD's `spec.template.spec.requirements` — v1 passes no option to
  `Compatible`, so a key the node lacks drifts it, well-known or not (v0.31 allowed the well-known ones).
* **expiry** (`nodeclaim/expiration/controller.go`): the NodeClaim's own `spec.expireAfter` (copied from the
  NodePool at launch; BASE's NodePool's without a NodeClaim) from its creation. Past it at the start, or within the
  plan's horizon after it (the controller requeues to the expiry time), the NodeClaim is deleted at that time —
  forcefully: no budget, no replacement first (`nodepoolwaves`).
* **terminationGracePeriod**: the NodeClaim's own (BASE's NodePool's without a NodeClaim), carried to the waves.
* **already drifted**: a NodeClaim whose `Drifted` condition is true in the snapshot is replaced whatever the change.
* **removed**: a NodePool BASE has and HEAD does not — its NodeClaims go with it (owner references), at once.
* **not the AWS provider's**: a node whose NodeClaim's `spec.nodeClassRef`, else whose NodePool's (HEAD's, else
  BASE's), is not `karpenter.k8s.aws`/`EC2NodeClass` is left alone, as Karpenter's AWS provider leaves it (core
  `pkg/utils/nodepool/nodepool.go` `IsManaged`; `api.v1.managed`), with a note — never drifted by an EC2NodeClass
  that has the name of the other provider's class.

* **AMI drift** (aws `pkg/cloudprovider/drift.go`, `isAMIDrifted`): HEAD's EC2NodeClass's `amiSelectorTerms`
  resolved from the EC2 and SSM answers the user saved, else its `id` terms or the cluster's `status.amis`
  (`amidrift`).
* **security-group and subnet drift** (`areSecurityGroupsDrifted`, `isSubnetDrifted`): the instance's security
  groups and subnet (`--instances`) against what HEAD's class resolves to — the cluster's `status.securityGroups` /
  `status.subnets` when HEAD keeps its terms, else its terms applied to `--security-groups` / `--subnets`
  (`networkdrift`). Karpenter checks them after AMI drift, security groups first; the plan lists every reason found
  in that order.

Drift has no feature gate in v1: `--drift-disabled` (v0.31's gate) leaves these nodes alone. The rest of cloud drift
(capacity reservations, placement groups) is not planned.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration
from karpenter_policy.api.v1.managed import not_managed
from karpenter_policy.api.v1.objects import AMI_ALIAS_FAMILIES, NodeClassRef
from karpenter_policy.api.v1.statichash import (
    EC2NODECLASS_HASH,
    EC2NODECLASS_HASH_VERSION,
    EC2NODECLASS_HASH_VERSION_KEY,
    NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION_KEY,
    UNHASHED_CLASS_FIELDS,
)
from karpenter_policy.cloud.capacityreservations import EXPIRATION_PERIOD
from karpenter_policy.commands.plan.amidrift import AmiDriftRules
from karpenter_policy.commands.plan.capacityblocks import CapacityBlocks
from karpenter_policy.commands.plan.drift import NodeDrift, PolicySide, expiry_word, hashed_changes, is_expiry
from karpenter_policy.commands.plan.fleet import NEVER, Claim, FleetNode
from karpenter_policy.commands.plan.networkdrift import NetworkDriftRules
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.requirements import Requirements

__all__ = [
    "EC2NODECLASS_HASH",
    "EC2NODECLASS_HASH_VERSION",
    "NODEPOOL_HASH",
    "NODEPOOL_HASH_VERSION",
    "NodePoolDriftRules",
    "node_class_changes",
    "nodepool_changes",
]

#: The template spec fields whose values are durations (hashed as their value).
_DURATIONS: Final = frozenset({"expireAfter", "terminationGracePeriod"})
_UNHASHED_CLASS_FIELDS: Final = UNHASHED_CLASS_FIELDS


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _duration_value(value: Any) -> Any:
    """A duration as Go hashes it (its length in seconds); `Never` and unparsable text as they are (absent / text)."""
    if not isinstance(value, str) or value == NEVER:
        return None if value == NEVER else value
    try:
        return parse_go_duration(value).total_seconds()
    except GoDurationError:
        return value


def _template(nodepool: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(nodepool.get("spec")).get("template"))


def nodepool_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """The hashed fields of a NodePool's template that differ between BASE's and HEAD's stored forms, each named
    by its path (`spec.template.metadata.labels.team changed`)."""
    before, after = _template(base), _template(head)
    out: list[str] = []
    for name in ("labels", "annotations"):
        out += hashed_changes(f"spec.template.metadata.{name}", _mapping(before.get("metadata")).get(name),
                              _mapping(after.get("metadata")).get(name))
    old, new = _mapping(before.get("spec")), _mapping(after.get("spec"))
    for name in sorted((set(old) | set(new)) - {"requirements"}):
        was, now = old.get(name), new.get(name)
        if name in _DURATIONS:
            was, now = _duration_value(was), _duration_value(now)
        out += hashed_changes(f"spec.template.spec.{name}", was, now)
    return out


def ami_family(node_class: Mapping[str, Any]) -> str:
    """The AMI family a class resolves to (`EC2NodeClass.AMIFamily`): `amiFamily`, else its alias's, else Custom."""
    spec = _mapping(node_class.get("spec"))
    if isinstance(spec.get("amiFamily"), str):
        return str(spec["amiFamily"])
    for term in spec.get("amiSelectorTerms") or []:
        alias = _mapping(term).get("alias")
        if isinstance(alias, str) and alias:
            family = alias.split("@", 1)[0]
            return AMI_ALIAS_FAMILIES.get(family.lower(), family)
    return "Custom"


def node_class_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """The hashed fields of an EC2NodeClass that differ between BASE's and HEAD's stored forms."""
    before = {k: v for k, v in _mapping(base.get("spec")).items() if k not in _UNHASHED_CLASS_FIELDS}
    after = {k: v for k, v in _mapping(head.get("spec")).items() if k not in _UNHASHED_CLASS_FIELDS}
    out = [c for key in sorted(set(before) | set(after))
           for c in hashed_changes(f"spec.{key}", before.get(key), after.get(key))]
    old_family, new_family = ami_family(base), ami_family(head)
    if old_family != new_family:
        out.append(f"AMI family {old_family} → {new_family} (spec.amiFamily / spec.amiSelectorTerms alias)")
    return out


def _requirements(nodepool: Mapping[str, Any]) -> Requirements:
    terms = _mapping(_template(nodepool).get("spec")).get("requirements") or []
    return Requirements.from_node_selector([t for t in terms if isinstance(t, Mapping)])


class NodePoolDriftRules:
    """The rules of the module docstring for one BASE → HEAD change, what they compare of each NodePool and
    EC2NodeClass computed once."""

    def __init__(self, base: PolicySide, head: PolicySide, start: dt.datetime,
                 cluster_classes: Sequence[Obj] = (), *, horizon: dt.timedelta = dt.timedelta(0),
                 ami: AmiDriftRules | None = None, network: NetworkDriftRules | None = None,
                 blocks: CapacityBlocks | None = None) -> None:
        self.base, self.head, self.start = base, head, start
        #: NodeClaims expiring until `start + horizon` are planned (at their expiry time)
        self.horizon = horizon
        self._static: dict[str, list[str]] = {}
        self._class: dict[str, list[str]] = {}
        self._requirements: dict[str, Requirements] = {}
        #: (nodepool, why) → nodes whose hashed fields changed but that cannot drift statically
        self.skipped: Counter[tuple[str, str]] = Counter()
        #: (nodepool, why) → nodes Karpenter's AWS provider does not manage (another provider's node class): left out
        self.unmanaged: Counter[tuple[str, str]] = Counter()
        #: AMI drift (`amidrift`; given with the saved EC2 and SSM answers, or from the snapshot alone)
        self.ami = ami if ami is not None else AmiDriftRules(base, head, cluster_classes, start=start)
        #: security-group and subnet drift (`networkdrift`; None: not assessed)
        self.network = network
        #: capacity blocks' ends (`capacityblocks`): their nodes expire 40 minutes before
        self.blocks = blocks if blocks is not None else CapacityBlocks(cluster_classes)

    def notes(self) -> list[str]:
        """What the reader should know of the nodes static drift skipped, of those not the AWS provider's (left
        out), and what AMI, network and capacity-block drift could not assess."""
        return [f"{count} node{'s' if count != 1 else ''} of nodepool {pool}: {why}: Karpenter does not drift "
                f"{'them' if count != 1 else 'it'} statically (it re-annotates the NodeClaim with the current hash)"
                for (pool, why), count in sorted(self.skipped.items())] + [
                    f"{count} node{'s' if count != 1 else ''} of nodepool {pool} not planned: {why}"
                    for (pool, why), count in sorted(self.unmanaged.items())] + self.ami.notes() + (
                    self.network.notes() if self.network is not None else []) + self.blocks.notes()

    def _static_changes(self, name: str, base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
        if name not in self._static:
            self._static[name] = nodepool_changes(base, head)
        return self._static[name]

    def _class_changes(self, name: str) -> list[str]:
        if name not in self._class:
            old, new = self.base.node_classes.get(name), self.head.node_classes.get(name)
            changes = node_class_changes(old, new) if old is not None and new is not None else []
            self._class[name] = [f"EC2NodeClass {name}: {c}" for c in changes]
        return self._class[name]

    def _head_requirements(self, name: str, head: Mapping[str, Any]) -> Requirements:
        if name not in self._requirements:
            self._requirements[name] = _requirements(head)
        return self._requirements[name]

    def _hash_current(self, annotations: Mapping[str, str], pool: str, hash_key: str, version_key: str,
                      version: str, changed: bool) -> bool:
        """Whether the NodeClaim's hash can be compared (Karpenter's checks); notes why not when it matters."""
        found = annotations.get(version_key)
        if hash_key in annotations and found == version:
            return True
        if changed:
            why = (f"no {hash_key} annotation" if hash_key not in annotations else
                   f"{version_key} {found!r}, not {version!r}" if found is not None else f"no {version_key}")
            self.skipped[(pool, why)] += 1
        return False

    def __call__(self, node: FleetNode) -> NodeDrift:
        """What BASE → HEAD does to a node of a NodePool (`node.nodepool` is set)."""
        name = node.nodepool or ""
        head_doc, base_doc = self.head.nodepools.get(name), self.base.nodepools.get(name)
        claim = node.claim
        grace = claim.termination_grace if claim is not None else (
            self._base_duration(base_doc, "terminationGracePeriod"))
        seconds = None if grace is None else grace.total_seconds()
        if (why := self._not_managed(claim, head_doc or base_doc)) is not None:
            self.unmanaged[(name, why)] += 1
            return NodeDrift(unknown=True, termination_grace=seconds)
        if head_doc is None:
            if base_doc is None:
                return NodeDrift(unknown=True, termination_grace=seconds)
            return NodeDrift(reasons=(f"nodepool {name} removed",), removed=True, termination_grace=seconds)
        annotations = claim.annotations if claim is not None else node.annotations
        reasons: list[str] = []
        fields: list[str] = []
        if claim is not None and claim.drifted:
            reasons.append(f"already drifted: NodeClaim {claim.name}'s Drifted condition is true in the snapshot")
        if base_doc is not None:
            changed = self._static_changes(name, base_doc, head_doc)
            if self._hash_current(annotations, name, NODEPOOL_HASH, NODEPOOL_HASH_VERSION_KEY,
                                  NODEPOOL_HASH_VERSION, bool(changed)):
                fields += changed
                reasons += [f"{c} (nodepool {name})" for c in changed]
        node_class = claim.node_class if claim is not None and claim.node_class else self._class_of(base_doc)
        if node_class is not None:
            changed = self._class_changes(node_class)
            if self._hash_current(annotations, name, EC2NODECLASS_HASH, EC2NODECLASS_HASH_VERSION_KEY,
                                  EC2NODECLASS_HASH_VERSION, bool(changed)):
                fields += changed
                reasons += changed
            ami = self.ami(node_class, claim, node)
            if ami is not None:
                fields.append(self.ami.field(node_class))
                reasons.append(ami)
            imaged = claim is None or bool(claim.image_id or self.ami.claim_images.get(node.name))
            error = None if imaged else "no NodeClaim status.imageID"
            for field, reason in self.network.node_class(node_class, node, ami_error=error) if self.network else ():
                fields.append(field)
                reasons.append(reason)
        labels = claim.labels if claim is not None else node.labels
        requirements = self._head_requirements(name, head_doc)
        for why in Requirements.from_labels(dict(labels)).incompatibilities(requirements, frozenset()):
            reasons.append(f"requirement drift: {why} (nodepool {name}'s spec.template.spec.requirements)")
        expires_at, expire_after = self._expiry(node, base_doc)
        block = self.blocks.expiry(node)
        if block is not None and (expires_at is None or block[1] < expires_at):
            expires_at, expire_after = block[1], None
        expires = expires_at is not None and expires_at <= self.start + self.horizon
        if block is not None and expires_at == block[1] and expires:
            reasons.append(f"{expiry_word(expires_at, self.start)}: capacity block {block[0]} ends "
                           f"{block[1] + EXPIRATION_PERIOD:%Y-%m-%dT%H:%M:%SZ}, its nodes deleted 40 minutes before "
                           "(the expiration controller; forceful: no budget, no replacement first)")
        elif expires_at is not None and expires and expire_after is not None:
            created = (claim.created if claim is not None and claim.created else node.created) or self.start
            reasons.append(f"{expiry_word(expires_at, self.start)}: created {created:%Y-%m-%dT%H:%M:%SZ} + expireAfter "
                           f"{_go_text(expire_after)} (forceful: no budget, no replacement first)")
        drifted = any(not is_expiry(r) for r in reasons)
        return NodeDrift(drifted=drifted, reasons=tuple(reasons), expires=expires, expires_at=expires_at,
                         fields=tuple(fields), termination_grace=seconds)

    @staticmethod
    def _not_managed(claim: Claim | None, nodepool: Mapping[str, Any] | None) -> str | None:
        """Why Karpenter's AWS provider leaves a node alone — its NodeClaim's, else its NodePool's (HEAD's, else
        BASE's) nodeClassRef is not an EC2NodeClass: `IsManaged` —; None: it is the provider's node."""
        if claim is not None and claim.not_managed is not None:
            return f"its NodeClaim {claim.name}: {claim.not_managed}"
        return not_managed(nodepool) if nodepool is not None else None

    def _class_of(self, nodepool: Mapping[str, Any] | None) -> str | None:
        ref = NodeClassRef.of_nodepool(nodepool or {})
        return ref.name if ref is not None and ref.name and ref.is_ec2_node_class else None

    def _base_duration(self, nodepool: Mapping[str, Any] | None, name: str) -> dt.timedelta | None:
        value = _mapping(_template(nodepool or {}).get("spec")).get(name)
        if not isinstance(value, str) or value == NEVER:
            return None
        try:
            return parse_go_duration(value)
        except GoDurationError:
            return None

    def _expiry(self, node: FleetNode, base_doc: Mapping[str, Any] | None
                ) -> tuple[dt.datetime | None, dt.timedelta | None]:
        claim = node.claim
        after = claim.expire_after if claim is not None else self._base_duration(base_doc, "expireAfter")
        created = claim.created if claim is not None and claim.created is not None else node.created
        if after is None or created is None:
            return None, after
        try:
            return created + after, after
        except OverflowError:  # past year 9999: never, as far as a plan can see
            return None, after


def _go_text(duration: dt.timedelta) -> str:
    """A duration as Go prints one (`720h0m0s`)."""
    total = int(duration.total_seconds())
    sign = "-" if total < 0 else ""
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours}h{minutes}m{seconds}s"
