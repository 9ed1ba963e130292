"""AMI drift of Karpenter v1 NodeClaims, where the policy repository alone decides it.

Karpenter v1.14.1 (aws `pkg/cloudprovider/drift.go`, `isAMIDrifted`) drifts a NodeClaim whose `status.imageID` is
not the AMI its EC2NodeClass maps to the NodeClaim's instance type (`amifamily.MapToInstanceTypes` over the class's
`status.amis`, which the AMI provider resolves from `spec.amiSelectorTerms` through EC2). Of those terms, only one
kind is resolved without EC2: **`id` terms** name the AMIs themselves. So, for HEAD's EC2NodeClass whose every
`amiSelectorTerms` entry is an `id` term:

* a NodeClaim whose `status.imageID` is none of those ids drifts (`AMIDrift`), whatever its architecture — the
  mapped AMI is always one of them (`suite_test.go` "should return drifted if the AMI is not valid", "… no longer
  matches the existing NodeClaims instance type");
* one whose `status.imageID` is among them does not. That is exact for one id per architecture; with several ids
  that fit the same instance type, Karpenter keeps the newest (EC2's creation dates, `compareAMI`), which the plan
  cannot see, and assumes the node's;
* a NodeClaim without `status.imageID` is not assessed (counted, a note): Karpenter's check errors ("no ami ID
  found in nodeClaim status", drift.go:98) and decides nothing — neither drift nor no drift — until it has one.

**With the EC2 and SSM answers the user saved** (`--instances`, `--images`, `--ssm-parameters`: `ec2answers`), HEAD's
`amiSelectorTerms` are resolved as v1.14.1's AMI provider resolves them (`cloud/amiselection.resolve_terms`: an
alias through its SSM parameters, named exactly as v1.14.1 names them; ids; `ssmParameter`; name, tags and owner
against `--images`; newest per requirement set, deprecated images last) and the node's AMI — its NodeClaim's
`status.imageID`; for a node whose NodeClaim the snapshot lacks, its instance's `ImageId` (`--instances`, by
`spec.providerID`: the id the NodeClaim's status copies at launch) — drifts when it is not the
AMI they map to its instance type (`MapToInstanceTypes`; none mapped drifts too, as `lo.Contains` of no keys is
false). An instance type the catalog does not know, or terms that resolve to nothing (Karpenter: "no amis exist"),
drift nothing. A node whose answers are missing (an SSM parameter in neither `Parameters` nor `InvalidParameters`,
an image an alias's parameter, an id or an `ssmParameter` names that is not in `--images`, name/tags/owner terms
without `--images`, no AMI of its own — a NodeClaim without `status.imageID` whatever its instance runs) is
counted, and a note names what to give.

Without answers for a class, where the snapshot holds the cluster's EC2NodeClass of that name with the very terms
HEAD keeps, its `status.amis` is what they resolve to (the AMI provider sorts it newest first): the AMI mapped to a
NodeClaim is the first whose `requirements` its labels meet (`MapToInstanceTypes`; a key the labels lack meets only
`NotIn` and `DoesNotExist`, as an instance type without a GPU has no GPU count), and a NodeClaim on another one
drifts — a new release of `al2023@latest` the cluster has already resolved — as does one no AMI fits. Otherwise
their AMI drift is not planned, and when BASE → HEAD changes those terms (`amiSelectorTerms` is outside the class's
hash, so nothing else would show it) a note says how many nodes that leaves unassessed.
Security-group and subnet drift, which Karpenter checks after this one, are `networkdrift`'s; capacity-reservation and
placement-group drift compare the EC2 *instance* with the class's resolved status: neither is in a snapshot, so they
are not planned.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.catalog import Catalog
from karpenter_policy.cloud.amiselection import TermResolution, ami_for, resolve_terms, term_text
from karpenter_policy.commands.plan.drift import AMI_DRIFT, PolicySide
from karpenter_policy.commands.plan.ec2answers import Ec2Answers, kubernetes_version
from karpenter_policy.commands.plan.fleet import Claim, FleetNode
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.requirements import Requirements

__all__ = ["AMI_DRIFT", "AmiDriftRules", "mapped_ami", "selected_ami_ids"]

#: Why a NodeClaim without `status.imageID` is not assessed: v1.14.1's `isAMIDrifted` errors for it (drift.go:98).
NO_IMAGE_ID: Final = ("its NodeClaim has no status.imageID: Karpenter's check errors (\"no ami ID found in nodeClaim "
                      "status\") and decides nothing until the NodeClaim is launched (snapshot it again: `kubectl get "
                      "nodeclaims -o json`)")


def _terms(node_class: Mapping[str, Any]) -> list[Any]:
    spec = node_class.get("spec")
    terms = spec.get("amiSelectorTerms") if isinstance(spec, Mapping) else None
    return terms if isinstance(terms, list) else []


def selected_ami_ids(node_class: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The AMIs a class's `amiSelectorTerms` name when every term is an `id` term (in their order), else None."""
    terms = _terms(node_class)
    ids = [term.get("id") for term in terms if isinstance(term, Mapping) and set(term) == {"id"}]
    if not terms or len(ids) != len(terms) or not all(isinstance(i, str) and i for i in ids):
        return None
    return tuple(str(i) for i in ids)


def mapped_ami(amis: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> str | None:
    """The first of a class's resolved `amis` (its `status.amis`) whose requirements `labels` meet, or None."""
    offered = Requirements.from_labels(dict(labels))
    for ami in amis:
        try:
            wanted = Requirements.from_node_selector(ami.get("requirements") or [])
        except ValueError:
            continue
        if offered.admits(wanted, frozenset()):
            return str(ami["id"])
    return None


class AmiDriftRules:
    """AMI drift (the module docstring) of one BASE → HEAD change, each class's terms read once; `cluster` holds
    the snapshot's EC2NodeClasses (their `status.amis`); `answers` the saved EC2 and SSM answers, `instance_ids`
    each node's instance (by the plan's name for it), `start` the time deprecation is judged at; `redact`: reasons
    name no AMI id, and `claim_images` holds each node's NodeClaim's `status.imageID`, read before the redaction
    dropped it."""

    def __init__(self, base: PolicySide, head: PolicySide, cluster: Sequence[Obj] = (),
                 answers: Ec2Answers | None = None, catalog: Catalog | None = None,
                 instance_ids: Mapping[str, str] | None = None, start: dt.datetime | None = None,
                 *, redact: bool = False, claim_images: Mapping[str, str] | None = None) -> None:
        self.base, self.head = base, head
        self.claim_images = claim_images or {}
        self.cluster = {objects.name(c): c for c in cluster}
        self.answers = answers if answers is not None else Ec2Answers()
        self.catalog, self.instance_ids, self.redact = catalog, instance_ids or {}, redact
        self.now = int((start or dt.datetime.now(dt.UTC)).timestamp())
        self.version = kubernetes_version([*(self.answers.parameters or {}), *self.answers.absent])
        self._resolved: dict[str, TermResolution] = {}
        self._known_ids: frozenset[str] | None = None
        #: EC2NodeClass → its terms as text, where the saved answers resolved them
        self._answered_terms: dict[str, str] = {}
        #: EC2NodeClass → nodes whose AMI drift could not be assessed (HEAD changed its non-id terms)
        self.unassessed: Counter[str] = Counter()
        #: (EC2NodeClass, why) → nodes the saved answers could not assess
        self.missing: Counter[tuple[str, str]] = Counter()
        #: EC2NodeClass → what to give: SSM parameter names, image ids
        self.parameters: defaultdict[str, set[str]] = defaultdict(set)
        self.image_ids: defaultdict[str, set[str]] = defaultdict(set)

    def notes(self) -> list[str]:
        out = [f"{count} node{'s' if count != 1 else ''} of EC2NodeClass {name}: HEAD changes spec.amiSelectorTerms, "
               "which EC2 resolves (alias, tags, name, owner): their AMI drift is not planned (give what EC2 and SSM "
               "answer: --instances, --images, --ssm-parameters)"
               for name, count in sorted(self.unassessed.items())]
        out += [f"{count} node{'s' if count != 1 else ''} of EC2NodeClass {name}: AMI drift not assessed: {why}"
                for (name, why), count in sorted(self.missing.items())]
        out += [f"EC2NodeClass {name}'s spec.amiSelectorTerms: give `aws ssm get-parameters --names "
                f"{' '.join(sorted(names))} --output json` as --ssm-parameters"
                for name, names in sorted(self.parameters.items())]
        out += [f"EC2NodeClass {name}'s spec.amiSelectorTerms: give `aws ec2 describe-images --image-ids "
                f"{' '.join(sorted(ids))} --output json` as --images"
                for name, ids in sorted(self.image_ids.items())]
        return out

    def field(self, node_class: str) -> str:
        """What changed for the plan's table of fields, when a node of `node_class` drifted on its AMI."""
        terms = self._answered_terms.get(node_class)
        if terms is None:
            return f"EC2NodeClass {node_class}: {AMI_DRIFT} (status.imageID not the AMI it resolves to)"
        shown = "" if self.redact else f" ({terms})"
        return f"EC2NodeClass {node_class}: {AMI_DRIFT} (not the AMI spec.amiSelectorTerms{shown} resolve to)"

    def _record(self, node_class: str, unanswered: _Unanswered) -> None:
        for why in unanswered.whys:
            self.missing[(node_class, why)] += 1
        if unanswered.parameters:
            self.parameters[node_class].update(unanswered.parameters)
        if unanswered.images:
            self.image_ids[node_class].update(unanswered.images)

    def _images_known(self, ids: Sequence[str]) -> bool:
        """Whether `--images` describes every one of `ids` (else a class of id terms is judged by its ids alone)."""
        if self._known_ids is None:
            self._known_ids = frozenset(image.id for image in self.answers.images or ())
        return all(i in self._known_ids for i in ids)

    def _resolution(self, node_class: str, head: Mapping[str, Any]) -> TermResolution:
        if node_class not in self._resolved:
            terms = [t for t in _terms(head) if isinstance(t, Mapping)]
            self._resolved[node_class] = resolve_terms(terms, self.answers.images, self.answers.parameters,
                                                       self.answers.absent, self.version, self.now)
        return self._resolved[node_class]

    def _answered(self, node_class: str, head: Mapping[str, Any], claim: Claim | None,
                  node: FleetNode) -> str | _Unanswered | None:
        """The AMIDrift reason from the saved answers (None: no drift; :class:`_Unanswered`: they do not tell)."""
        resolution = self._resolution(node_class, head)
        if resolution.error is not None:
            self.missing[(node_class, f"Karpenter resolves no AMI: {resolution.error}")] += 1
            return None
        if not resolution.complete:
            whys = (["its terms' SSM parameters are not in --ssm-parameters"] if resolution.missing_parameters else [])
            whys += ["its terms' images are not in --images"] if resolution.missing_images else []
            whys += ["its name, tags or owner terms need --images (`aws ec2 describe-images --owners self amazon "
                     "--output json`)"] if resolution.needs_images else []
            return _Unanswered(tuple(whys), resolution.missing_parameters, resolution.missing_images)
        instance_type = self.catalog.get(node.instance_type) if self.catalog is not None else None
        if not resolution.amis or instance_type is None:
            return None  # Karpenter: "no amis exist given constraints" / "finding node instance type": no drift
        running: str | None = claim.image_id if claim is not None else None
        if claim is not None and not running:
            running = self.claim_images.get(node.name)
        if claim is not None:
            if not running:  # Karpenter errors (drift.go:98): its instance's image is no answer
                return _Unanswered((NO_IMAGE_ID,))
            whose = f"NodeClaim {claim.name}'s status.imageID"
        else:
            instance = self.instance_ids.get(node.name)
            running = (self.answers.image_of or {}).get(instance) if instance is not None else None
            whose = f"node {node.name}'s instance (--instances)"
            if running is None:
                return _Unanswered(("no NodeClaim status.imageID and its instance's ImageId is not in --instances "
                                    "(found by the node's spec.providerID)",))
        mapped = ami_for(resolution.amis, instance_type)
        if mapped is not None and mapped.id == running:
            return None
        terms = "; ".join(term_text(t) for t in _terms(head) if isinstance(t, Mapping))
        self._answered_terms[node_class] = terms
        if self.redact:
            return (f"{AMI_DRIFT}: {whose} is not the AMI EC2NodeClass {node_class}'s spec.amiSelectorTerms resolve "
                    f"to for {node.instance_type}")
        if mapped is None:
            return (f"{AMI_DRIFT}: {whose} {running}: EC2NodeClass {node_class}'s spec.amiSelectorTerms ({terms}) "
                    f"resolve to no AMI for {node.instance_type}")
        return (f"{AMI_DRIFT}: {whose} {running} is not {mapped.id}, the AMI EC2NodeClass {node_class}'s "
                f"spec.amiSelectorTerms resolve to for {node.instance_type} ({mapped.term})")

    def __call__(self, node_class: str, claim: Claim | None, node: FleetNode | None = None) -> str | None:
        """The AMIDrift reason of a node (`node`, its NodeClaim `claim`) of `node_class` (None: no AMI drift the
        plan can tell)."""
        head = self.head.node_classes.get(node_class)
        if head is None or (claim is None and node is None):
            return None
        ids = selected_ami_ids(head)
        unanswered = None
        if node is not None and self.answers.given and not (ids is not None and not self._images_known(ids)):
            answered = self._answered(node_class, head, claim, node)
            if not isinstance(answered, _Unanswered):
                return answered
            unanswered = answered
        resolved = self.cluster.get(node_class)
        amis = ((resolved.get("status") or {}).get("amis") or []) if resolved is not None else []
        from_status = bool(amis) and _terms(resolved or {}) == _terms(head)
        if unanswered is not None and (claim is None or (ids is None and not from_status)):
            self._record(node_class, unanswered)
        if claim is None:
            return None
        own = claim.image_id or (self.claim_images.get(node.name) if node is not None else None)
        if (ids is not None or from_status) and not own:
            self.missing[(node_class, NO_IMAGE_ID)] += 1  # Karpenter's check errors: no verdict (drift.go:98)
            return None
        if ids is not None:
            if claim.image_id in ids:
                return None
            return (f"{AMI_DRIFT}: NodeClaim {claim.name}'s status.imageID {claim.image_id} is not among "
                    f"EC2NodeClass {node_class}'s spec.amiSelectorTerms ids ({', '.join(ids)})")
        if from_status:
            mapped = mapped_ami(amis, claim.labels)
            if claim.image_id == mapped:
                return None
            if mapped is None:
                return (f"{AMI_DRIFT}: NodeClaim {claim.name}'s status.imageID {claim.image_id}: EC2NodeClass "
                        f"{node_class}'s status.amis in the snapshot map no AMI to its instance type")
            return (f"{AMI_DRIFT}: NodeClaim {claim.name}'s status.imageID {claim.image_id} is not {mapped}, the AMI "
                    f"EC2NodeClass {node_class}'s status.amis maps to its instance type in the snapshot")
        base = self.base.node_classes.get(node_class)
        if base is not None and _terms(base) != _terms(head) and not (node is not None and self.answers.given):
            self.unassessed[node_class] += 1
        return None


@dataclass(frozen=True, slots=True)
class _Unanswered:
    """What `_answered` returns when the saved answers cannot tell (the snapshot's status may): why, and the SSM
    parameters and images to give."""

    whys: tuple[str, ...]
    parameters: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
