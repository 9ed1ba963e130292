"""Why a node claim template cannot launch a node for a pod, in the words `check --workloads` and the controller's
Events use.

A :class:`Refusal` has a `kind` — `unavailable` (the template admits no instance type), `taint`, `requirements`
(incompatible requirements or an undefined custom label), `topology`, `host-ports`, `limits`, `instance-types`
(no type satisfies the requirements together), `resources` (no type has room), `min-values` (the types left
carry fewer distinct values than a v1 NodePool's minValues asks: `nodes.min_values_refusal`) — and a message
worked out on first use (a plan keeps the refusals of every template tried before the one that takes a pod, most
never read).

The `instance-types` and `resources` messages name a deletion-minimal set of the merged requirements (and the
limits) that leaves no type: "no instance type has 96 vCPU and 2 GPUs under karpenter.k8s.aws/instance-size In
[2xlarge, 4xlarge]".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from karpenter_policy.model import labels as wk
from karpenter_policy.model.pods import describe_quantity, describe_requests, format_bytes
from karpenter_policy.model.pools import pools_noun
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.resources import CPU, MEMORY, PODS, format_quantity
from karpenter_policy.model.spelling import nearest_name
from karpenter_policy.model.taints import Taint, Toleration, untolerated
from karpenter_policy.scheduling.instances import OFFERING_KEYS, indices
from karpenter_policy.scheduling.pods import Attempt
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.vectors import INDEX, PODS_I, RESOURCES, STORAGE_I, Vector, add, as_resources

_SHOWN = 3
_LIMITS = "(limits)"


class Refusal:
    """Why one template cannot take a pod (see the module docstring). `about`: the template and the pod's attempt
    it was refused at, when the refusal may carry a `fix` (the one change to the pod that makes the template take
    it) and tell whether the pod `targets` the template; `karpenter`: Karpenter's own sentence, when the message
    puts it in other words."""

    __slots__ = ("kind", "_message", "_make", "_about", "_fix", "_karpenter")

    def __init__(
        self,
        kind: str,
        message: str | Callable[[], str],
        about: tuple[NodeClaimTemplate, Attempt, Vector] | None = None,
        karpenter: Callable[[], str] | None = None,
    ) -> None:
        self.kind = kind
        self._message: str | None = message if isinstance(message, str) else None
        self._make: Callable[[], str] | None = None if isinstance(message, str) else message
        self._about = about
        self._fix: str | None | bool = False  # False: not worked out yet
        self._karpenter = karpenter

    @property
    def message(self) -> str:
        """The refusal in words (made the first time it is asked for, then kept)."""
        if self._message is None:
            assert self._make is not None
            self._message, self._make = self._make(), None
        return self._message

    @property
    def fix(self) -> str | None:
        """The one change to the pod spec that makes this template take the pod (`fix_for`), None when there is
        none (or the refusal is not about the pod's taints or requirements)."""
        if self._fix is False:
            self._fix = fix_for(self.kind, *self._about) if self._about is not None else None
        return self._fix if isinstance(self._fix, str) else None

    @property
    def targeted(self) -> bool:
        """Whether the pod aims at this template: it tolerates one of its taints, or its requirements name a label
        the template defines that is not a well-known one (or its provisioner name)."""
        if self._about is None:
            return False
        template, attempt, _ = self._about
        return targets(template, attempt)

    @property
    def karpenter(self) -> str | None:
        """Karpenter's sentence for this refusal when the message says it in other words (for people who search
        Karpenter's code or issues for it), else None."""
        return self._karpenter() if self._karpenter is not None else None

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"Refusal({self.kind!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Refusal) and (self.kind, self.message) == (other.kind, other.message)

    def __hash__(self) -> int:
        return hash((self.kind, self.message))


def format_resource(name: str, value: Decimal) -> str:
    """An amount as the reasons write it: memory in bytes units (`Gi`, `Mi`), others as quantities."""
    return format_bytes(value) if name == MEMORY else format_quantity(value)


def limits_text(template: NodeClaimTemplate, short: bool = False) -> str:
    """Why a template's limits refuse every type (`short`: the limits alone)."""
    limits = ", ".join(f"{name}: {format_resource(name, value)}" for name, value in sorted(template.limits.items()))
    if short:
        return f"limits.resources ({limits})"
    return f"every instance type exceeds its limits.resources ({limits})"


def untolerated_text(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> str:
    """The taints the tolerations leave untolerated, in words."""
    missing = untolerated(taints, tolerations)
    return f"taint{'s' if len(missing) > 1 else ''} {', '.join(str(t) for t in missing)} not tolerated"


# --- the pod's requirements against a template's, in the user's words ----------------------------------------


def requirements_text(mine: Requirements, pod: Requirements, well_known: frozenset[str] = wk.WELL_KNOWN_LABELS) -> str:
    """Why a pod with requirements `pod` cannot run on a node with requirements `mine`, one phrase per key joined
    by " and " — Karpenter's rules (`Requirements.incompatibilities`), told in the user's terms: a label the pod
    requires that the nodes never have is said so, with Karpenter's own sentence in quotes after it (`label team
    does not have known values`, from `scheduling.Requirements.Compatible`, karpenter-core
    pkg/scheduling/requirements.go); a value the nodes do not have names the nearest one they have. `well_known`:
    the labels the nodes' pool lets a pod leave undefined (`NodeClaimTemplate.well_known`)."""
    phrases: list[str] = []
    for key in sorted(pod.keys() - well_known):
        if key in mine or pod[key].operator() in (Operator.NOT_IN, Operator.DOES_NOT_EXIST):
            continue
        karpenter = f"label {key} does not have known values{wk.typo_hint(key, mine)}"
        phrases.append(
            f'the pod requires label {key}, which its nodes never have (Karpenter: "{karpenter}")'
        )
    for key in mine.disjoint(pod):
        conflict = f"{pod[key]} not in {mine[key].describe_values()}"
        guess = _nearest_value(mine, pod, key)
        phrases.append(f"{conflict} (did you mean {key}: {guess}?)" if guess is not None else conflict)
    return " and ".join(phrases)


def _nearest_value(mine: Requirements, pod: Requirements, key: str) -> str | None:
    """The value of a custom label `key` the nodes may have nearest to the pod's one value (a typo: `gpus` for
    `gpu`), if any."""
    if key in wk.WELL_KNOWN_LABELS or key not in mine or key not in pod:
        return None  # a well-known value the nodes lack is a real choice (arm64), not a typo: `unknown-label-value`
    theirs, wanted = mine[key], pod[key]
    if theirs.complement or wanted.operator() != Operator.IN or len(wanted.values) != 1:
        return None
    return nearest_name(next(iter(wanted.values)), sorted(theirs.values))


def requirements_refusal(template: NodeClaimTemplate, attempt: Attempt, requests: Vector) -> Refusal:
    """`requirements`: the template's requirements and the attempt's are incompatible (`requirements_text`)."""
    mine, pod, well_known = template.requirements, attempt.requirements, template.well_known
    return Refusal(
        "requirements",
        lambda: requirements_text(mine, pod, well_known),
        (template, attempt, requests),
        lambda: " and ".join(mine.incompatibilities(pod, well_known)),
    )


def taint_refusal(template: NodeClaimTemplate, attempt: Attempt, requests: Vector) -> Refusal:
    """`taint`: the template taints its nodes with what the attempt does not tolerate."""
    taints, tolerations = template.taints, attempt.tolerations
    return Refusal("taint", lambda: untolerated_text(taints, tolerations), (template, attempt, requests))


# --- what to change in the pod ------------------------------------------------------------------------------


def targets(template: NodeClaimTemplate, attempt: Attempt) -> bool:
    """Whether a pod aims at `template`: it tolerates one of the template's taints, or its requirements name the
    provisioner or a label the template defines that is not well known (`workload-type`, `team`)."""
    tolerations = attempt.tolerations
    if tolerations and any(t.tolerates(taint) for taint in template.taints for t in tolerations):
        return True
    return any(
        key == wk.PROVISIONER_NAME or (key in template.requirements and key not in template.well_known)
        for key in attempt.requirements
    )


def _takes(template: NodeClaimTemplate, requirements: Requirements, requests: Vector) -> bool:
    """Whether a new node of `template` could hold a pod with `requirements` and `requests` (taints aside): the
    requirements are compatible and some admitted type satisfies them with room for the pod and the DaemonSets."""
    if not template.requirements.admits(requirements, template.well_known):
        return False
    merged = template.requirements.intersection(requirements)
    fitting = template.shapes.fitting(add(template.overhead, requests))
    return bool(template.types & fitting & template.table.mask_of(merged, None, template.os, template.type_keys))


def _yaml_scalar(value: str) -> str:
    """A value as YAML flow text: quoted when YAML would read it as something else than that string."""
    plain = value and value.replace("-", "").replace(".", "").replace("/", "").replace("_", "").isalnum()
    special = value.lower() in ("true", "false", "yes", "no", "on", "off", "null", "y", "n", "~")
    if plain and not special and not value[0].isdigit():
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toleration_text(taint: Taint) -> str:
    """`{key: nvidia.com/gpu, operator: Equal, value: "true", effect: NoSchedule}`: the toleration of one taint."""
    if taint.value:
        return (
            f"{{key: {_yaml_scalar(taint.key)}, operator: Equal, value: {_yaml_scalar(taint.value)}, "
            f"effect: {taint.effect}}}"
        )
    return f"{{key: {_yaml_scalar(taint.key)}, operator: Exists, effect: {taint.effect}}}"


def fix_for(kind: str, template: NodeClaimTemplate, attempt: Attempt, requests: Vector) -> str | None:
    """The one change to the pod spec that makes `template` take it, in words, None when there is none:
    a `taint` refusal — the tolerations of the untolerated taints (and the template's labels as a nodeSelector
    that keeps the pod on its nodes); a `requirements` refusal whose every conflict is a value the nodes spell
    otherwise — the nodeSelector with the nearest values; `this provisioner then takes it` (`this NodePool …`).
    Checked: with the change the requirements are compatible and an admitted type has room for the pod (limits and
    topology aside)."""
    if kind == "taint":
        missing = untolerated(template.taints, attempt.tolerations)
        if not missing or not _takes(template, attempt.requirements, requests):
            return None
        text = "add tolerations: [" + ", ".join(toleration_text(t) for t in missing) + "] to the pod spec"
        labels = {k: v for k, v in sorted(template.labels.items()) if k != wk.PROVISIONER_NAME}
        if labels:
            selector = ", ".join(f"{_yaml_scalar(k)}: {_yaml_scalar(v)}" for k, v in labels.items())
            text += f" (and nodeSelector: {{{selector}}} to keep it on these nodes)"
        return f"{text}; this {pools_noun((template.name,))} then takes it"
    if kind != "requirements":
        return None
    mine, pod = template.requirements, attempt.requirements
    conflicts = mine.disjoint(pod)
    undefined = [
        k for k in pod.keys() - template.well_known
        if k not in mine and pod[k].operator() not in (Operator.NOT_IN, Operator.DOES_NOT_EXIST)
    ]
    if not conflicts or undefined:
        return None  # a label the nodes never have: no selector the pod can write makes them have it
    replaced: dict[str, str] = {}
    for key in conflicts:
        guess = _nearest_value(mine, pod, key)
        if guess is None:
            return None
        replaced[key] = guess
    fixed = Requirements(
        Requirement.new(k, Operator.IN, [replaced[k]]) if k in replaced else r for k, r in pod.items()
    )
    if untolerated(template.taints, attempt.tolerations) or not _takes(template, fixed, requests):
        return None
    selector = ", ".join(f"{_yaml_scalar(k)}: {_yaml_scalar(v)}" for k, v in replaced.items())
    return f"set nodeSelector: {{{selector}}} in the pod spec; this {pools_noun((template.name,))} then takes it"


def explain(
    template: NodeClaimTemplate,
    pod_requirements: Requirements,
    total: Vector | None,
    within_limits: int,
) -> str:
    """A deletion-minimal set of the merged requirements (and the limits, when `within_limits` is not every type)
    that leaves no type — with the requests `total`, when given — in words."""
    table = template.table
    merged = template.requirements.intersection(pod_requirements)
    relevant = [k for k in merged if table.is_type_key(k, template.type_keys) or k in OFFERING_KEYS]
    limited = within_limits != table.everything
    # Deleted first: the template's own keys, then the limits, then the keys the pod constrains.
    members: list[str] = [k for k in relevant if k not in pod_requirements] + [_LIMITS] * limited
    members += [k for k in relevant if k in pod_requirements]
    fit = template.shapes.fitting(total) if total is not None else -1

    def admitted(subset: Sequence[str]) -> int:
        mask = table.mask_of(merged, [k for k in subset if k != _LIMITS], template.os, template.type_keys) & fit
        return mask & within_limits if _LIMITS in subset else mask

    core = list(members)
    position = 0
    while position < len(core):
        candidate = core[:position] + core[position + 1 :]
        if not admitted(candidate):
            core = candidate
        else:
            position += 1
    phrases = [limits_text(template, short=True) if k == _LIMITS else str(merged[k]) for k in core]
    under = " and ".join(phrases)
    if total is None:
        return f"no instance type satisfies {under}" if under else "no instance type is offered"
    without_fit = table.mask_of(merged, [k for k in core if k != _LIMITS], template.os, template.type_keys)
    if _LIMITS in core:
        without_fit &= within_limits
    needs = _needs(template, total, without_fit)
    reserved = _reserved_away(template, total, without_fit)
    if not under:
        return f"no instance type in {table.region or 'the catalog'} has {needs}{reserved}"
    return f"no instance type has {needs} under {under}{reserved}"


def _needs(template: NodeClaimTemplate, total: Vector, candidates: int) -> str:
    """The requests in words (room for the pods too when that is what is missing), DaemonSets named."""
    requests = as_resources(total)
    shown = [n for n in (CPU, MEMORY, wk.NVIDIA_GPU, wk.AMD_GPU, wk.AWS_NEURON, wk.HABANA_GAUDI) if requests.get(n)]
    shown += [n for n in RESOURCES if n not in shown and n != PODS and requests.get(n)]
    without_pods = tuple(0 if r == PODS_I else x for r, x in enumerate(total))
    if candidates & template.shapes.fitting(without_pods):
        shown.append(PODS)
    text = describe_requests(requests, shown) if shown else describe_quantity(PODS, requests.get(PODS, Decimal(1)))
    storage = total[STORAGE_I]
    room = template.shapes.most(STORAGE_I, template.types)
    if storage and storage > room:
        text += (
            f" (ephemeral storage comes from the node template's root volume: {format_bytes(Decimal(max(room, 0)))}"
            " allocatable; blockDeviceMappings sets its size)"
        )
    overhead = template.overhead
    if template.daemon_sets and any(overhead[r] for r in range(len(RESOURCES)) if r != INDEX[PODS]):
        daemons = as_resources(overhead)
        daemons.pop(PODS, None)
        names = ", ".join(template.daemon_sets[:_SHOWN]) + (
            f" and {len(template.daemon_sets) - _SHOWN} others" if len(template.daemon_sets) > _SHOWN else ""
        )
        text += f" (of which DaemonSets {names} take {describe_requests(daemons)})"
    return text


def _reserved_away(template: NodeClaimTemplate, total: Vector, candidates: int) -> str:
    """When some of the `candidates` have the capacity for `total` but not the allocatable: the kubelet's
    reservations are what is missing (a large kubeReserved, systemReserved or eviction threshold), not the types."""
    capacity = template.shapes.capacity
    roomy = [
        i for i in indices(candidates & template.types)
        if all(c >= t for c, t in zip(capacity[i], total, strict=True))
    ]
    if not roomy:
        return ""
    example = template.table.names[roomy[0]]
    count = f"{len(roomy):,} type{'s' if len(roomy) != 1 else ''} ({example}{', …' if len(roomy) > 1 else ''})"
    return (
        f"; {count} {'have' if len(roomy) != 1 else 'has'} that capacity, but less allocatable once the kubelet's"
        " reservations are taken (kube-reserved, system-reserved, eviction thresholds: Karpenter's defaults or the"
        " kubelet settings')"
    )


def no_type_refusal(
    template: NodeClaimTemplate, pod_requirements: Requirements, requests: Vector | None, within_limits: int
) -> Refusal:
    """`instance-types` (requests None: the requirements alone leave no type) or `resources`."""
    if requests is None:
        return Refusal("instance-types", lambda: explain(template, pod_requirements, None, within_limits))
    return Refusal("resources", lambda: explain(template, pod_requirements, requests, within_limits))

