"""Pinning rules (`kind: PinningPolicy`): which workloads must carry which nodeSelector entries and tolerations.

A `PinningPolicy` (apiVersion `karpenter-policy.dev/v1alpha1`, schema `schemas/pinningpolicy.v1alpha1.json`)
holds rules in order; a rule *matches* a pod template when every criterion of its `match` holds:

* `namespaces` — the workload's namespace is listed (a manifest without `metadata.namespace` is in `default`,
  where `kubectl apply` without `-n` puts it);
* `labels` — matchLabels on the pod template's labels (a Pod's own labels: what the pod will carry);
* `kinds` — the kind of the object that holds the template (Pod, Deployment, CronJob, ...);
* `name` — a shell glob on the workload's `metadata.name` (a template without a name never matches a glob);
  `names` — a list of such globs, one of which must match;
* `sparkRole` — `driver` / `executor`: the pod's `spark-role` label, which Spark sets when it creates the pod,
  or, for a pod template file that has no such label (EMR on EKS, `spark.kubernetes.*.podTemplateFile`), the
  role of its `spark-kubernetes-driver` / `spark-kubernetes-executor` container (Spark's container names).

A rule may name a `provisioner` of the policies instead of (or as well as) spelling the pins: it then pins
`karpenter.sh/provisioner-name` to it and tolerates each of its taints (`bind_provisioners`). Or a Karpenter v1
`nodePool`: then `karpenter.sh/nodepool` — the label v1 puts on a NodePool's nodes; v1 ignores
`karpenter.sh/provisioner-name` (aws/karpenter-provider-aws#5645) — and a toleration of each of the NodePool's
`spec.template.spec.taints`. A rule names one of the two, never both.

Every matching rule applies: its nodeSelector entries must be in the template's `spec.nodeSelector` with that
value, its tolerations must be covered by the template's `spec.tolerations` (an equal toleration, or a broader
one that tolerates every taint it does). When two matching rules want different values for one key, the first
(policies in file order, rules in order) wins and the clash is a `pinning-conflict`.

A pin never overrides the workload's own required node affinity: when every term of
`requiredDuringSchedulingIgnoredDuringExecution` rejects a value the pins would set (a Spark driver that requires
`capacity-type In [spot]`, pinned to `on-demand`), pinning would make the pod unschedulable. That is a
`pinning-conflict` (`affinity_conflict`): `pin` writes nothing and the webhook admits the pod unpinned with a
warning — one verdict, from this one function.

Everything here but `check_pinning` (which reads the workload files) is pure over plain mappings: `resolve` is
what the webhook calls for a pod, `changes_for` what `pin` writes and `check --workloads` reports
as `pinning-violation`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from karpenter_policy.api.kinds import PINNING_POLICY_KIND, PROVISIONER_KIND, object_ref
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.v1.static import LEFT_OUT
from karpenter_policy.api.violations import (
    ERROR,
    INVALID_SPEC,
    PINNING_CONFLICT,
    PINNING_VIOLATION,
    Path,
    Violation,
)
from karpenter_policy.api.workloads import get_path, labels_of, template_path_of
from karpenter_policy.checks.findings import Finding, Location
from karpenter_policy.checks.source.files import load_file
from karpenter_policy.checks.source.loader import Document, LoadError, discover
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import SUPPORTED_OPERATORS, Requirement
from karpenter_policy.model.taints import Taint

__all__ = [
    "AffinityConflict",
    "Change",
    "Conflict",
    "Pins",
    "Rule",
    "SPARK_ROLE_LABEL",
    "PinTarget",
    "affinity_conflict",
    "apply_changes",
    "bind_provisioners",
    "check_pinning",
    "changes_for",
    "covers",
    "is_pinning_policy",
    "pinning_findings",
    "target_findings",
    "resolve",
    "rules_from_documents",
    "rules_of",
    "spark_role",
    "toleration_for",
    "validate_pinning_policy",
    "workload_of",
    "workloads_in",
]

SPARK_ROLE_LABEL = "spark-role"
SPARK_DRIVER_CONTAINER = "spark-kubernetes-driver"
SPARK_EXECUTOR_CONTAINER = "spark-kubernetes-executor"
DEFAULT_NAMESPACE = "default"

# --- rules --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a PinningPolicy. `at` is where the rule is written (None for rules built from plain data)."""

    policy: str
    name: str
    namespaces: frozenset[str] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    kinds: frozenset[str] | None = None
    name_glob: str | None = None
    name_globs: tuple[str, ...] | None = None
    spark_role: str | None = None
    provisioner: str | None = None
    #: A Karpenter v1 NodePool to pin to (`karpenter.sh/nodepool`), instead of a provisioner.
    nodepool: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    at: Location | None = field(default=None, compare=False)

    @property
    def ref(self) -> str:
        """`PinningPolicy/emr-spark rule drivers-on-demand` — how messages name the rule."""
        return f"{object_ref(PINNING_POLICY_KIND, self.policy)} rule {self.name}"

    def matches(
        self, kind: str, namespace: str | None, name: str | None, labels: Mapping[str, str], role: str | None
    ) -> bool:
        """Whether the rule applies to a workload of this kind, namespace (default `default`), name, labels and role."""
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.namespaces is not None and (namespace or DEFAULT_NAMESPACE) not in self.namespaces:
            return False
        if self.name_glob is not None and (not name or not fnmatch.fnmatchcase(name, self.name_glob)):
            return False
        if self.name_globs is not None and (not name or not any(fnmatch.fnmatchcase(name, g) for g in self.name_globs)):
            return False
        if self.spark_role is not None and role != self.spark_role:
            return False
        return all(labels.get(key) == value for key, value in self.labels.items())


def rules_of(document: Mapping[str, Any], at: Sequence[Location | None] = ()) -> list[Rule]:
    """The rules of one (valid) PinningPolicy document; `at[i]` is where rule i is written, if known."""
    metadata = document.get("metadata") or {}
    policy = str(metadata.get("name") or "?")
    rules: list[Rule] = []
    for index, raw in enumerate((document.get("spec") or {}).get("rules") or []):
        match = raw.get("match") or {}
        rules.append(
            Rule(
                policy=policy,
                name=str(raw.get("name") or f"rules[{index}]"),
                namespaces=frozenset(match["namespaces"]) if "namespaces" in match else None,
                labels={str(k): str(v) for k, v in (match.get("labels") or {}).items()},
                kinds=frozenset(match["kinds"]) if "kinds" in match else None,
                name_glob=match.get("name"),
                name_globs=tuple(match["names"]) if "names" in match else None,
                spark_role=match.get("sparkRole"),
                provisioner=raw.get("provisioner"),
                nodepool=raw.get("nodePool"),
                node_selector={str(k): str(v) for k, v in (raw.get("nodeSelector") or {}).items()},
                tolerations=tuple(_canonical_toleration(t) for t in raw.get("tolerations") or []),
                at=at[index] if index < len(at) else None,
            )
        )
    return rules


def rules_from_documents(documents: Iterable[Document]) -> list[Rule]:
    """The rules of every PinningPolicy document given (others are ignored), in order, with their positions."""
    rules: list[Rule] = []
    for doc in documents:
        if not isinstance(doc.data, Mapping) or doc.data.get("kind") != PINNING_POLICY_KIND:
            continue
        count = len((doc.data.get("spec") or {}).get("rules") or [])
        at = [Location(doc.file, *doc.position(("spec", "rules", i))) for i in range(count)]
        rules += rules_of(doc.data, at)
    return rules


def bind_provisioners(
    rules: Sequence[Rule],
    taints: Mapping[str, Sequence[Taint]],
    nodepool_taints: Mapping[str, Sequence[Taint]] | None = None,
    static_nodepools: Collection[str] = (),
) -> tuple[list[Rule], list[Finding]]:
    """Rules that name a `provisioner` (or a `nodePool`), with its pins spelt out (`karpenter.sh/provisioner-name`,
    or `karpenter.sh/nodepool`, and a toleration of each of its taints, before the rule's own); `taints` maps each
    Provisioner of the policies to its spec.taints, `nodepool_taints` each NodePool to its template's taints. One
    that is not among them is a `pinning-conflict` error (the rule then pins nothing more than it spells); so is a
    NodePool of `static_nodepools` (`spec.replicas`): Karpenter v1.14.1 with its StaticCapacity gate off (the default,
    `api.v1.static`) provisions no pod to it, so the pods pinned there would stay pending."""
    bound: list[Rule] = []
    findings: list[Finding] = []
    pools: Mapping[str, Sequence[Taint]] = nodepool_taints or {}
    for rule in rules:
        named = rule.provisioner if rule.provisioner is not None else rule.nodepool
        if named is None:
            bound.append(rule)
            continue
        v1 = rule.provisioner is None
        known_taints = pools if v1 else taints
        if v1 and named in static_nodepools:
            at = rule.at or Location("", 0, 0)
            message = f"{rule.ref} names NodePool {named!r}, a {LEFT_OUT}: the pods it pins would stay pending"
            findings.append(Finding(PINNING_CONFLICT, ERROR, message, at.file, at.line, at.column))
            bound.append(rule)
            continue
        if named not in known_taints:
            known = ", ".join(sorted(known_taints)) or "none"
            at = rule.at or Location("", 0, 0)
            noun = "NodePool" if v1 else "provisioner"
            message = f"{rule.ref} names {noun} {named!r}, which the policies do not define (known: {known})"
            if v1 and named in taints:
                message += f"; {named} is a Provisioner: name it with `provisioner`"
            elif not v1 and named in pools:
                message += f"; {named} is a NodePool: name it with `nodePool` (v1 labels its nodes {wk.NODEPOOL})"
            findings.append(Finding(PINNING_CONFLICT, ERROR, message, at.file, at.line, at.column))
            bound.append(rule)
            continue
        selector = {wk.NODEPOOL if v1 else wk.PROVISIONER_NAME: named, **rule.node_selector}
        tolerations: list[Mapping[str, Any]] = [toleration_for(t) for t in known_taints[named]]
        tolerations += [t for t in rule.tolerations if not any(covers(have, t) for have in tolerations)]
        bound.append(replace(rule, node_selector=selector, tolerations=tuple(tolerations)))
    return bound, findings


def toleration_for(taint: Taint) -> dict[str, str]:
    """The toleration of exactly `taint` (Exists when the taint has no value)."""
    if taint.value:
        return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}


def validate_pinning_policy(document: Mapping[str, Any]) -> list[Violation]:
    """The rules a schema cannot express, for a schema-valid PinningPolicy document."""
    found: list[Violation] = []
    name = (document.get("metadata") or {}).get("name")
    if isinstance(name, str) and not wk.is_dns1123_subdomain(name):
        found.append(
            Violation(INVALID_SPEC, ("metadata", "name"), f"name {name!r} must be a lowercase DNS subdomain (RFC 1123)")
        )
    seen: dict[str, int] = {}
    for index, rule in enumerate((document.get("spec") or {}).get("rules") or []):
        path: Path = ("spec", "rules", index)
        rule_name = rule.get("name")
        if isinstance(rule_name, str):
            if rule_name in seen:
                found.append(
                    Violation(
                        INVALID_SPEC,
                        (*path, "name"),
                        f"rule name {rule_name!r} is used twice (first by rules[{seen[rule_name]}])",
                        related=(("spec", "rules", seen[rule_name], "name"),),
                    )
                )
            seen.setdefault(rule_name, index)
        if not any(rule.get(key) for key in ("nodeSelector", "tolerations", "provisioner", "nodePool")):
            found.append(
                Violation(
                    INVALID_SPEC,
                    path,
                    "the rule pins nothing: give nodeSelector entries, tolerations, a provisioner or a nodePool",
                )
            )
        if rule.get("provisioner") and rule.get("nodePool"):
            found.append(
                Violation(
                    INVALID_SPEC,
                    (*path, "nodePool"),
                    "the rule names a provisioner and a nodePool: a pod lands on one of them; give one",
                    at_key=True,
                )
            )
        for owner, label in (("provisioner", wk.PROVISIONER_NAME), ("nodePool", wk.NODEPOOL)):
            if rule.get(owner) and label in (rule.get("nodeSelector") or {}):
                found.append(
                    Violation(
                        INVALID_SPEC,
                        (*path, "nodeSelector", label),
                        f"the rule names a {owner}: it already pins {label}",
                        at_key=True,
                    )
                )
        match = rule.get("match") or {}
        found += _label_violations(match.get("labels") or {}, (*path, "match", "labels"), "match.labels")
        found += _label_violations(rule.get("nodeSelector") or {}, (*path, "nodeSelector"), "nodeSelector")
        for t_index, toleration in enumerate(rule.get("tolerations") or []):
            found += _toleration_violations(toleration, (*path, "tolerations", t_index))
    return found


def _label_violations(labels: Mapping[str, Any], path: Path, what: str) -> Iterator[Violation]:
    for key, value in labels.items():
        if problems := wk.qualified_name_errors(str(key)):
            yield Violation(INVALID_SPEC, (*path, key), f"{what} key {key!r}: {'; '.join(problems)}", at_key=True)
        if problems := wk.label_value_errors(str(value)):
            yield Violation(INVALID_SPEC, (*path, key), f"{what} {key}={value!r}: {'; '.join(problems)}")


def _toleration_violations(toleration: Mapping[str, Any], path: Path) -> Iterator[Violation]:
    """Kubernetes' ValidateTolerations: Exists takes no value; an empty key needs Exists."""
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists" and toleration.get("value"):
        yield Violation(INVALID_SPEC, (*path, "value"), "a toleration with operator Exists must not have a value")
    if not toleration.get("key") and operator != "Exists":
        yield Violation(INVALID_SPEC, path, "a toleration without a key must have operator Exists (it tolerates all)")
    if toleration.get("key") and (problems := wk.qualified_name_errors(str(toleration["key"]))):
        yield Violation(INVALID_SPEC, (*path, "key"), f"toleration key {toleration['key']!r}: {'; '.join(problems)}")
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and toleration.get("effect") != "NoExecute":
        yield Violation(
            INVALID_SPEC, (*path, "tolerationSeconds"), "tolerationSeconds only applies to effect NoExecute"
        )


# --- tolerations --------------------------------------------------------------------------------------------

_TOLERATION_ORDER = ("key", "operator", "value", "effect", "tolerationSeconds")


def _canonical_toleration(toleration: Mapping[str, Any]) -> dict[str, Any]:
    """The toleration with its fields in the API's order, defaults left out (operator Equal is written)."""
    out: dict[str, Any] = {}
    for name in _TOLERATION_ORDER:
        value = toleration.get(name)
        if name == "operator":
            value = value or ("Exists" if not toleration.get("key") else "Equal")
        if value is None or (value == "" and name != "operator"):
            continue
        out[name] = value
    return out


def _toleration_fields(t: Mapping[str, Any]) -> tuple[str, str, str, str, int | None]:
    seconds = t.get("tolerationSeconds")
    return (
        str(t.get("key") or ""),
        str(t.get("operator") or "Equal"),
        str(t.get("value") or ""),
        str(t.get("effect") or ""),
        seconds if isinstance(seconds, int) and not isinstance(seconds, bool) else None,
    )


def covers(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """True when toleration `have` tolerates every taint that `want` tolerates, at least as long."""
    h_key, h_op, h_value, h_effect, h_seconds = _toleration_fields(have)
    w_key, w_op, w_value, w_effect, w_seconds = _toleration_fields(want)
    if h_effect and h_effect != w_effect:
        return False
    if h_op == "Exists":
        if h_key and h_key != w_key:
            return False
    elif h_op != "Equal" or w_op != "Equal" or h_key != w_key or h_value != w_value:
        return False
    if h_seconds is None:
        return True
    return w_seconds is not None and h_seconds >= w_seconds


def describe_toleration(t: Mapping[str, Any]) -> str:
    """`nvidia.com/gpu=true:NoSchedule`, `dedicated:NoSchedule (Exists)`, `every taint (Exists)`."""
    key, op, value, effect, seconds = _toleration_fields(t)
    if not key:
        text = f"every taint{f' with effect {effect}' if effect else ''} (Exists)"
    else:
        text = f"{key}={value}" if op == "Equal" else key
        text += f":{effect}" if effect else " (any effect)"
        text += " (Exists)" if op == "Exists" else ""
    return text + (f" for {seconds}s" if seconds is not None else "")


# --- workloads ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PinTarget:
    """An object that holds a pod template, and where: `template_path` leads to the template (`()` for a Pod),
    whose `metadata` and `spec` it has."""

    kind: str
    namespace: str | None
    name: str | None
    template_path: Path
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]

    @property
    def spec_path(self) -> Path:
        """The path of the pod spec in the document."""
        return (*self.template_path, "spec")

    @property
    def labels(self) -> Mapping[str, str]:
        """The labels of its pod template."""
        return labels_of(self.metadata)

    @property
    def object_ref(self) -> str:
        """`Kind/name` (`(unnamed)` for a template without a name)."""
        return object_ref(self.kind, self.name or "(unnamed)")

    def ref_in(self, file: str) -> str:
        """`Pod/karpenter-driver-pod-template`: an unnamed template is named after its file, as `policy.workloads`
        names it."""
        return object_ref(self.kind, self.name or PurePath(file).name.split(".")[0] or "(unnamed)")


def workload_of(data: Any) -> PinTarget | None:
    """The workload a manifest is (a Pod, a bare pod template file, a controller or a CronJob — the kinds and
    apiVersions `policy.workloads` reads), else None; a Pod already bound to a node (`spec.nodeName`) is not
    pinned (it is placed already)."""
    path = template_path_of(data)
    if path is None:
        return None
    template = get_path(data, path)
    if not isinstance(template, Mapping) or not isinstance(template.get("spec", {}), Mapping):
        return None
    spec = template.get("spec") or {}
    if spec.get("nodeName"):
        return None
    raw_metadata, raw_template_metadata = data.get("metadata"), template.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
    template_metadata: Mapping[str, Any] = raw_template_metadata if isinstance(raw_template_metadata, Mapping) else {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    return PinTarget(
        kind=str(data["kind"]),
        namespace=namespace if isinstance(namespace, str) and namespace else None,
        name=name if isinstance(name, str) and name else None,
        template_path=path,
        metadata=template_metadata,
        spec=spec,
    )


def workloads_in(documents: Iterable[Document]) -> Iterator[tuple[Document, PinTarget]]:
    """Each document holding a pod template, with the template to pin."""
    for doc in documents:
        workload = workload_of(doc.data)
        if workload is not None:
            yield doc, workload


def spark_role(metadata: Mapping[str, Any], pod_spec: Mapping[str, Any] | None = None) -> str | None:
    """`driver` / `executor`: the `spark-role` label, else the role of a Spark-named container of the spec."""
    labels = metadata.get("labels")
    if isinstance(labels, Mapping) and isinstance(labels.get(SPARK_ROLE_LABEL), str):
        return str(labels[SPARK_ROLE_LABEL])
    containers = (pod_spec or {}).get("containers")
    names = [c.get("name") for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []
    if SPARK_DRIVER_CONTAINER in names:
        return "driver"
    if SPARK_EXECUTOR_CONTAINER in names:
        return "executor"
    return None


# --- resolving and applying ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two matching rules want different values for one nodeSelector key; `first` wins."""

    key: str
    first: Rule
    second: Rule

    def message(self) -> str:
        """The conflict in words: the two rules and the nodeSelector values they disagree on."""
        return (
            f"{self.first.ref} pins nodeSelector {self.key}={self.first.node_selector[self.key]} but "
            f"{self.second.ref} pins {self.key}={self.second.node_selector[self.key]}; the first applies — make the "
            "rules' matches disjoint or agree"
        )


@dataclass(frozen=True, slots=True)
class Pins:
    """What the matching rules require of one pod template, and which rule requires each part."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    rules: tuple[Rule, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    node_selector_rule: Mapping[str, Rule] = field(default_factory=dict, repr=False)
    toleration_rule: tuple[Rule, ...] = field(default=(), repr=False)


def resolve(
    rules: Sequence[Rule],
    metadata: Mapping[str, Any],
    kind: str,
    namespace: str | None,
    name: str | None,
    pod_spec: Mapping[str, Any] | None = None,
) -> Pins:
    """The pins of every rule that matches a pod template (see the module's doc for the matching)."""
    raw_labels = metadata.get("labels")
    labels = {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, Mapping) else {}
    role = spark_role(metadata, pod_spec)
    matching = tuple(r for r in rules if r.matches(kind, namespace, name, labels, role))
    selector: dict[str, str] = {}
    selector_rule: dict[str, Rule] = {}
    tolerations: list[Mapping[str, Any]] = []
    toleration_rule: list[Rule] = []
    conflicts: list[Conflict] = []
    for rule in matching:
        for key, value in rule.node_selector.items():
            if key not in selector:
                selector[key], selector_rule[key] = value, rule
            elif selector[key] != value:
                conflicts.append(Conflict(key, selector_rule[key], rule))
        for toleration in rule.tolerations:
            if not any(covers(have, toleration) for have in tolerations):
                tolerations.append(toleration)
                toleration_rule.append(rule)
    return Pins(selector, tuple(tolerations), matching, tuple(conflicts), selector_rule, tuple(toleration_rule))


@dataclass(frozen=True, slots=True)
class Change:
    """One thing a pod template lacks: a nodeSelector entry (`current`: its present different value, if any) or
    a toleration."""

    field: str  # "nodeSelector" | "tolerations"
    rule: Rule
    key: str = ""
    value: str = ""
    current: str | None = None
    toleration: Mapping[str, Any] | None = None

    def message(self) -> str:
        """What the template lacks and which rule requires it, in words."""
        if self.field == "tolerations":
            assert self.toleration is not None
            return f"tolerations lack {describe_toleration(self.toleration)}, required by {self.rule.ref}"
        if self.current is None:
            return f"nodeSelector lacks {self.key}: {self.value}, required by {self.rule.ref}"
        return f"nodeSelector {self.key} is {self.current!r}; {self.rule.ref} requires {self.value!r}"

    def to_json(self) -> dict[str, object]:
        """The change as `pin --output json` writes it."""
        data: dict[str, object] = {"field": self.field, "rule": self.rule.name, "policy": self.rule.policy}
        if self.field == "tolerations":
            data["toleration"] = dict(self.toleration or {})
        else:
            data.update(key=self.key, value=self.value, current=self.current)
        return data


def changes_for(pod_spec: Mapping[str, Any], pins: Pins) -> list[Change]:
    """What the pod spec lacks of `pins`, nodeSelector entries first (in the rules' order)."""
    changes: list[Change] = []
    selector = pod_spec.get("nodeSelector")
    selector = selector if isinstance(selector, Mapping) else {}
    for key, value in pins.node_selector.items():
        current = selector.get(key)
        if current is None or str(current) != value or not isinstance(current, str):
            shown = None if current is None else str(current)
            changes.append(Change("nodeSelector", pins.node_selector_rule[key], key, value, shown))
    have = pod_spec.get("tolerations")
    have = [t for t in have if isinstance(t, Mapping)] if isinstance(have, list) else []
    for toleration, rule in zip(pins.tolerations, pins.toleration_rule, strict=True):
        if not any(covers(h, toleration) for h in have):
            changes.append(Change("tolerations", rule, toleration=toleration))
    return changes


@dataclass(frozen=True, slots=True)
class AffinityConflict:
    """Pinning would make a pod unschedulable: each term of its required node affinity has an expression that
    rejects a pinned nodeSelector value. `rejections` pairs each term's rejecting expression (as text) with the
    pin it rejects."""

    rejections: tuple[tuple[str, Change], ...]

    def message(self) -> str:
        """Which required node-affinity expressions reject which pinned nodeSelector entries, in words."""
        shown: dict[str, Change] = dict(self.rejections)  # one line per distinct expression, in term order
        parts = [
            f"({expression}) rejects nodeSelector {change.key}={change.value} of {change.rule.ref}"
            for expression, change in shown.items()
        ]
        terms = "the pod's required node affinity" if len(shown) == 1 else "every term of the pod's node affinity"
        return f"{terms} {'; '.join(parts)}: pinned, it could never be scheduled"


def _required_terms(pod_spec: Mapping[str, Any]) -> list[Any]:
    node_affinity: Any = pod_spec.get("affinity")
    for key in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        node_affinity = node_affinity.get(key) if isinstance(node_affinity, Mapping) else None
    terms = node_affinity.get("nodeSelectorTerms") if isinstance(node_affinity, Mapping) else None
    return terms if isinstance(terms, list) else []


def _rejecting(term: Any, pinned: Mapping[str, Change]) -> tuple[str, Change] | None:
    """The first expression of a node-selector term that rejects a pinned value (as text), with that pin."""
    expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
    for expression in expressions if isinstance(expressions, list) else []:
        if not isinstance(expression, Mapping):
            continue
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if not (isinstance(key, str) and isinstance(operator, str) and isinstance(values, list)):
            continue  # malformed: the API server's validation, not pinning, answers for it
        if operator not in SUPPORTED_OPERATORS:
            continue  # malformed: the API server's validation, not pinning, answers for it
        change = pinned.get(wk.normalize_key(key))
        if change is None:
            continue
        try:
            requirement = Requirement.new(key, str(operator), [str(v) for v in values])
        except ValueError:
            continue
        if not requirement.has(change.value):
            listed = f" [{', '.join(str(v) for v in values)}]" if values else ""
            return f"{key} {operator}{listed}", change
    return None


def affinity_conflict(pod_spec: Mapping[str, Any], changes: Sequence[Change]) -> AffinityConflict | None:
    """The conflict between `changes` and the pod's required node affinity, if pinning would leave no term of it
    satisfiable (see the module doc); None when some term still may be, or the pod has no required affinity."""
    pinned = {wk.normalize_key(c.key): c for c in changes if c.field == "nodeSelector"}
    terms = _required_terms(pod_spec)
    if not pinned or not terms:
        return None
    rejections: list[tuple[str, Change]] = []
    for term in terms:
        rejection = _rejecting(term, pinned)
        if rejection is None:
            return None
        rejections.append(rejection)
    return AffinityConflict(tuple(rejections))


def apply_changes(pod_spec: MutableMapping[str, Any], changes: Iterable[Change]) -> None:
    """Apply `changes` to a pod spec in place (plain dicts; new keys go last)."""
    for change in changes:
        if change.field == "nodeSelector":
            selector = pod_spec.get("nodeSelector")
            if not isinstance(selector, MutableMapping):
                selector = pod_spec["nodeSelector"] = {}
            selector[change.key] = change.value
        else:
            tolerations = pod_spec.get("tolerations")
            if not isinstance(tolerations, list):
                tolerations = pod_spec["tolerations"] = []
            tolerations.append(dict(change.toleration or {}))


# --- findings (check --workloads) ---------------------------------------------------------------------------


def target_findings(doc: Document, workload: PinTarget, rules: Sequence[Rule]) -> list[Finding]:
    """`pinning-violation` (one per missing or wrong pin) and `pinning-conflict` findings for one workload."""
    pins = resolve(rules, workload.metadata, workload.kind, workload.namespace, workload.name, workload.spec)
    if not pins.rules:
        return []
    findings: list[Finding] = []
    spec_path = workload.spec_path
    ref = workload.ref_in(doc.file)
    for conflict in pins.conflicts:
        related = tuple(r.at for r in (conflict.first, conflict.second) if r.at is not None)
        line, column = doc.position(spec_path, at_key=True)
        findings.append(Finding(PINNING_CONFLICT, ERROR, conflict.message(), doc.file, line, column, ref, related))
    changes = changes_for(workload.spec, pins)
    if (affinity := affinity_conflict(workload.spec, changes)) is not None:
        related = tuple(dict.fromkeys(c.rule.at for _, c in affinity.rejections if c.rule.at is not None))
        line, column = doc.position((*spec_path, "affinity"), at_key=True)
        message = f"{affinity.message()}; pin --write refuses it"
        findings.append(Finding(PINNING_CONFLICT, ERROR, message, doc.file, line, column, ref, related))
    for change in changes:
        if change.field == "nodeSelector" and change.current is not None:
            line, column = doc.position((*spec_path, "nodeSelector", change.key))
        elif isinstance(workload.spec.get(change.field), (Mapping, list)):
            line, column = doc.position((*spec_path, change.field), at_key=True)
        else:
            line, column = doc.position(spec_path, at_key=True)
        related = (change.rule.at,) if change.rule.at is not None else ()
        fix = "sets it" if change.current is not None else "adds it"
        message = f"{change.message()} (karpenter-policy pin --write {fix})"
        findings.append(Finding(PINNING_VIOLATION, ERROR, message, doc.file, line, column, ref, related))
    return findings


def pinning_findings(rules: Sequence[Rule], documents: Iterable[Document]) -> list[Finding]:
    """Every workload among `documents` that lacks what a matching rule requires, or that rules conflict on."""
    findings: list[Finding] = []
    if not rules:
        return findings
    for doc, workload in workloads_in(documents):
        findings += target_findings(doc, workload, rules)
    return findings


def is_pinning_policy(doc: Document) -> bool:
    """Whether the document is a PinningPolicy."""
    return isinstance(doc.data, Mapping) and doc.data.get("kind") == PINNING_POLICY_KIND


def check_pinning(
    policy_documents: Sequence[Document], provisioners: Iterable[Any], workload_paths: Sequence[str]
) -> list[Finding]:
    """`check --workloads`: the pinning findings of the workloads under `workload_paths` against the rules of the
    valid PinningPolicy documents given (a rule naming a provisioner is bound to the proven `provisioners`, as
    `CheckedProvisioner`s). Files that cannot be read are skipped: reading the workloads reports them."""
    documents = [doc for doc in policy_documents if is_pinning_policy(doc)]
    if not documents:
        return []
    provisioners = list(provisioners)
    taints = {p.name: list(p.provisioner.taints) for p in provisioners if p.kind == PROVISIONER_KIND}
    pools = {p.name: list(p.provisioner.taints) for p in provisioners if p.kind == NODEPOOL_KIND}
    static = {p.name for p in provisioners if p.kind == NODEPOOL_KIND and p.static}
    rules, findings = bind_provisioners(rules_from_documents(documents), taints, pools, static)
    files, _ = discover(workload_paths)
    for file in files:
        try:
            loaded = load_file(file)
        except LoadError:
            continue
        findings += pinning_findings(rules, loaded)
    return findings
