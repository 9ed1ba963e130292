"""Subnet and security-group drift of Karpenter's nodes: the EC2 instance's network against what HEAD's node class
resolves to.

Karpenter v1.14.1 (aws `pkg/cloudprovider/drift.go`, `isNodeClassDrifted`) — after static drift and AMI drift, which
return first — drifts a NodeClaim whose instance's security-group ids are not exactly the ids of its EC2NodeClass's
`status.securityGroups` (`areSecurityGroupsDrifted`, as sets: one more or one fewer drifts), reason
`SecurityGroupDrift`, else whose instance's `SubnetId` is not among its `status.subnets` (`isSubnetDrifted`),
reason `SubnetDrift` — security groups before subnets (`lo.FindOrElse` over both). A class whose status lists no
subnet or no security group makes the check error: neither drifts (a note counts the nodes). Karpenter v0.31.1
does the same for a Machine's AWSNodeTemplate (its `status.subnets` / `status.securityGroups`; AMI, then security
groups, then subnets, all computed before any is returned, so that error discards its AMI drift too), but never
drifts security groups of a template with `launchTemplate` (`launchTemplateName`), which decides them.

What the class resolves to, for HEAD:

* **v1, terms unchanged**: where the snapshot holds the cluster's EC2NodeClass of that name with the very
  `subnetSelectorTerms` / `securityGroupSelectorTerms` HEAD keeps, its `status.subnets` / `status.securityGroups`;
* **else, from the saved answers**: HEAD's terms (or a template's `subnetSelector` / `securityGroupSelector`; the
  snapshot does not read AWSNodeTemplates, so always so for v0.31) applied to `--subnets` / `--security-groups`
  as EC2 applies their filters (`cloud/networkselection.py`, the one reading the controller's discovery sends);
* **else** the plan cannot tell: the node is counted and a note gives the exact `aws ec2 describe-… --filters …`
  calls whose answers to give, never a verdict.

The node's side is its instance's `SubnetId` and `SecurityGroups[].GroupId` from `--instances` (by its
`spec.providerID`); without them the node is counted, not judged. A v1 NodeClaim without `status.imageID` is not
judged either: v1.14.1's AMI check, which runs first, errors for it ("no ami ID found in nodeClaim status") and
nothing after it is checked (a note counts it). The check runs when any of `--instances`,
`--subnets`, `--security-groups` is given, or when BASE → HEAD changes a class's selector (the terms are outside
the class's hash: nothing else would show it); otherwise it stays silent, as before. With `--redact`, subnet and
security-group ids are named by a stable hash (`subnet-…`, `sg-…`, `redact.hashed`). Capacity-reservation drift,
which v1.14.1 checks next, is `reservationdrift`'s (called from here, so that an earlier error stops it too).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.cloud.networkselection import (
    GROUP_ID,
    SUBNET_ID,
    Described,
    describe_command,
    filter_sets,
    select,
    term_filter_sets,
)
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.ec2answers import Ec2Answers
from karpenter_policy.commands.plan.fleet import FleetNode
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.commands.plan.reservationdrift import ReservationDriftRules
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj

__all__ = ["SECURITY_GROUP_DRIFT", "SUBNET_DRIFT", "NetworkDriftRules"]

#: Karpenter's drift reasons (aws v1.14.1 and v0.31.1 `pkg/cloudprovider/drift.go`).
SUBNET_DRIFT: Final = "SubnetDrift"
SECURITY_GROUP_DRIFT: Final = "SecurityGroupDrift"


@dataclass(frozen=True, slots=True)
class _Kind:
    """Subnets or security groups: the names each side gives them."""

    drift: str
    id_filter: str
    terms: str  # the EC2NodeClass field
    selector: str  # the AWSNodeTemplate field
    status: str  # the status field both classes resolve into
    flag: str
    what: str
    hash_kind: str
    answers: Callable[[Ec2Answers], tuple[Described, ...] | None]


_SECURITY_GROUPS: Final = _Kind(SECURITY_GROUP_DRIFT, GROUP_ID, "securityGroupSelectorTerms", "securityGroupSelector",
                                "securityGroups", "--security-groups", "security-group", "sg",
                                lambda a: a.security_groups)
_SUBNETS: Final = _Kind(SUBNET_DRIFT, SUBNET_ID, "subnetSelectorTerms", "subnetSelector", "subnets", "--subnets",
                        "subnet", "subnet", lambda a: a.subnets)
#: Karpenter's order: security groups, then subnets.
_KINDS: Final = (_SECURITY_GROUPS, _SUBNETS)


@dataclass(frozen=True, slots=True)
class _Resolution:
    """What HEAD's selector resolves to: `ids` (None: the plan cannot tell; then `commands` save the answer), where
    they come from (`source`), and whether BASE → HEAD changes the selector."""

    ids: tuple[str, ...] | None
    source: str
    changed: bool
    commands: tuple[str, ...] = ()


def _spec(document: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (document or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _terms(document: Mapping[str, Any] | None, field: str) -> list[Mapping[str, Any]]:
    terms = _spec(document).get(field)
    return [t for t in terms if isinstance(t, Mapping)] if isinstance(terms, list) else []


def _plural(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


class NetworkDriftRules:
    """The module docstring's checks for one BASE → HEAD change, each class's selectors resolved once; `cluster`
    holds the snapshot's EC2NodeClasses, `instance_ids` each node's instance (by the plan's name for it)."""

    def __init__(self, base: PolicySide, head: PolicySide, cluster: Sequence[Obj], answers: Ec2Answers,
                 instance_ids: Mapping[str, str], *, redact: bool = False,
                 reservations: ReservationDriftRules | None = None) -> None:
        self.base, self.head, self.answers, self.instance_ids = base, head, answers, instance_ids
        self.cluster = {objects.name(c): c for c in cluster}
        self.redact = redact
        self._resolved: dict[tuple[str, str], _Resolution | None] = {}
        #: (owner, what, why) → nodes whose drift of that kind the plan cannot tell
        self.unassessed: Counter[tuple[str, str, str]] = Counter()
        #: (owner, field, flag) → the Describe* calls whose answers would tell
        self.commands: defaultdict[tuple[str, str, str], set[str]] = defaultdict(set)
        #: (owner, what, source) → nodes of a class whose selector resolves to nothing (Karpenter's check errors)
        self.empty: Counter[tuple[str, str, str]] = Counter()
        #: (owner, why) → nodes whose AMI check errors first (v1.14.1 checks nothing after it)
        self.skipped: Counter[tuple[str, str]] = Counter()
        #: CapacityReservationDrift, checked after both (v1.14.1 drift.go:68-81)
        self.reservations = reservations if reservations is not None else ReservationDriftRules(
            base, head, cluster, redact=redact, answers=answers, instance_ids=instance_ids)

    def notes(self) -> list[str]:
        out = [f"{_plural(count)} of {owner}: {what} drift not assessed: {why}"
               for (owner, what, why), count in sorted(self.unassessed.items())]
        out += [f"{owner}'s {field}: give {' and '.join(f'`{c}`' for c in sorted(calls))} as {flag}"
                for (owner, field, flag), calls in sorted(self.commands.items())]
        out += [f"{_plural(count)} of {owner}: it resolves no {what} ({source}): Karpenter's drift check errors "
                "and drifts nothing" for (owner, what, source), count in sorted(self.empty.items())]
        out += [f"{_plural(count)} of {owner}: {why}: Karpenter's AMI drift check errors before security groups and "
                "subnets are compared: no drift of either" for (owner, why), count in sorted(self.skipped.items())]
        return out + self.reservations.notes()

    def _show(self, kind: _Kind, ids: Sequence[str]) -> str:
        shown = [hashed(kind.hash_kind, i) for i in ids] if self.redact else list(ids)
        return ", ".join(shown) or "none"

    # --- what HEAD's class resolves to ---------------------------------------------------------------------------

    def _class_resolution(self, name: str, kind: _Kind) -> _Resolution | None:
        key = (f"EC2NodeClass {name}", kind.what)
        if key not in self._resolved:
            head = self.head.node_classes.get(name)
            self._resolved[key] = None if head is None else self._resolve_class(name, head, kind)
        return self._resolved[key]

    def _resolve_class(self, name: str, head: Mapping[str, Any], kind: _Kind) -> _Resolution:
        terms = _terms(head, kind.terms)
        base = self.base.node_classes.get(name)
        changed = base is not None and _terms(base, kind.terms) != terms
        cluster = self.cluster.get(name)
        status = (cluster or {}).get("status")
        listed = status.get(kind.status) if isinstance(status, Mapping) else None
        if cluster is not None and isinstance(listed, list) and _terms(cluster, kind.terms) == terms:
            ids = sorted({str(item["id"]) for item in listed if isinstance(item, Mapping) and item.get("id")})
            return _Resolution(tuple(ids), f"status.{kind.status}", changed)
        return self._from_answers(kind, term_filter_sets(terms, kind.id_filter), changed)

    def _template_resolution(self, name: str, kind: _Kind) -> _Resolution | None:
        key = (f"AWSNodeTemplate {name}", kind.what)
        if key not in self._resolved:
            head = self.head.node_templates.get(name)
            spec = _spec(head)
            selector = spec.get(kind.selector)
            if head is None or not isinstance(selector, Mapping) or not selector or (
                    kind is _SECURITY_GROUPS and spec.get("launchTemplate")):
                self._resolved[key] = None  # v0.31.1: a launch template's security groups never drift
            else:
                base = _spec(self.base.node_templates.get(name)).get(kind.selector)
                changed = name in self.base.node_templates and base != selector
                sets = filter_sets(spec, kind.id_filter)  # the template's one selector, as the controller asks
                self._resolved[key] = self._from_answers(kind, sets, changed)
        return self._resolved[key]

    def _from_answers(self, kind: _Kind, sets: list[list[dict[str, Any]]], changed: bool) -> _Resolution:
        described = kind.answers(self.answers)
        if described is None:
            return _Resolution(None, "", changed, tuple(describe_command(s, kind.id_filter) for s in sets))
        return _Resolution(select(sets, described, kind.id_filter), kind.flag, changed)

    # --- the nodes -----------------------------------------------------------------------------------------------

    def node_class(self, name: str, node: FleetNode, *, ami_error: str | None = None) -> list[tuple[str, str]]:
        """The (field, reason) pairs of a node of EC2NodeClass `name`, in Karpenter's order — security groups,
        subnets, capacity reservation (none: no drift); `ami_error`: why v1.14.1's AMI check, which runs first,
        errors for it (then nothing else is checked)."""
        found = self._check(f"EC2NodeClass {name}", node, lambda kind: self._class_resolution(name, kind),
                            lambda kind: f"spec.{kind.terms}", ami_error)
        if found is None or ami_error is not None:
            return found or []  # an earlier check errors: v1.14.1 returns before it compares reservations
        reservation = self.reservations.node_class(name, node)
        return found + ([reservation] if reservation is not None else [])

    def template(self, name: str | None, node: FleetNode) -> list[tuple[str, str]] | None:
        """The same for a node of a Provisioner referencing AWSNodeTemplate `name`; None when Karpenter v0.31.1's
        check errors (a selector resolving nothing), which discards the node's AMI drift too: v0.31.1 computes AMI,
        security-group and subnet drift before it returns any."""
        if name is None:
            return []
        return self._check(f"AWSNodeTemplate {name}", node, lambda kind: self._template_resolution(name, kind),
                           lambda kind: f"spec.{kind.selector}")

    def _check(self, owner: str, node: FleetNode, resolve: Callable[[_Kind], _Resolution | None],
               field: Callable[[_Kind], str], ami_error: str | None = None) -> list[tuple[str, str]] | None:
        out: list[tuple[str, str]] = []
        instance = self.instance_ids.get(node.name)
        network = (self.answers.network_of or {}).get(instance) if instance is not None else None
        checked = [(kind, r) for kind in _KINDS if (r := resolve(kind)) is not None
                   and (self.answers.network_given or r.changed)]
        if checked and ami_error is not None:
            self.skipped[(owner, ami_error)] += 1
            return out
        errored = [(kind, r) for kind, r in checked if r.ids == ()]
        for kind, resolution in errored:
            self.empty[(owner, kind.what, resolution.source)] += 1
        if errored:
            return None  # Karpenter's check errors ("no subnets are discovered"): neither kind drifts
        for kind, resolution in checked:
            if resolution.ids is None:
                verb = "changes" if resolution.changed else "keeps"
                self.unassessed[(owner, kind.what, f"HEAD {verb} {field(kind)}, not resolved without {kind.flag}")] += 1
                self.commands[(owner, field(kind), kind.flag)].update(resolution.commands)
            if network is None:
                self.unassessed[(owner, kind.what, "its instance's network is not in --instances (`aws ec2 "
                                 "describe-instances --output json`, found by the node's spec.providerID)")] += 1
            if resolution.ids is None or network is None:
                continue
            found = self._reason(owner, kind, node, network.subnet_id, network.security_group_ids, resolution,
                                 field(kind))
            if found is not None:
                out.append(found)
        return out

    def _reason(self, owner: str, kind: _Kind, node: FleetNode, subnet: str, groups: tuple[str, ...],
                resolution: _Resolution, field: str) -> tuple[str, str] | None:
        ids = resolution.ids or ()
        now = self._show(kind, ids)
        if kind is _SUBNETS:
            if subnet in ids:
                return None
            have = f"subnet {self._show(kind, [subnet])}" if subnet else "no subnet"
            if resolution.changed:
                why = f"{owner}'s {field} changed → {have} of node {node.name} is no longer selected (now: {now})"
            else:
                why = f"{have} of node {node.name} is not among {owner}'s {field} ({resolution.source}: {now})"
        else:
            if set(groups) == set(ids):
                return None
            have = f"the security groups of node {node.name} ({self._show(kind, groups)})"
            if resolution.changed:
                why = f"{owner}'s {field} changed → {have} are not the ones selected (now: {now})"
            else:
                why = f"{have} are not {owner}'s {field} ({resolution.source}: {now})"
        changed = f"{field} changed" if resolution.changed else f"{field} ({resolution.source})"
        return f"{owner}: {kind.drift} ({changed})", f"{kind.drift}: {why}"
