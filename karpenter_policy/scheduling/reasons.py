"""Why a node claim template cannot launch a node for a pod, in the words `check --workloads` and the controller's
Events use.

A :class:`Refusal` has a `kind` — `unavailable` (the template admits no instance type), `taint`, `requirements`
(incompatible requirements or an undefined custom label), `topology`, `host-ports`, `limits`, `instance-types`
(no type satisfies the requirements together), `resources` (no type has room) — and a message worked out on first
use (a plan keeps the refusals of every template tried before the one that takes a pod, most never read).

The `instance-types` and `resources` messages name a deletion-minimal set of the merged requirements (and the
limits) that leaves no type: "no instance type has 96 vCPU and 2 GPUs under karpenter.k8s.aws/instance-size In
[2xlarge, 4xlarge]".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from karpenter_policy.model import labels as wk
from karpenter_policy.model.pods import describe_quantity, describe_requests, format_bytes
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.resources import CPU, MEMORY, PODS, format_quantity
from karpenter_policy.model.taints import Taint, Toleration, untolerated
from karpenter_policy.scheduling.instances import OFFERING_KEYS
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.vectors import INDEX, PODS_I, RESOURCES, STORAGE_I, Vector, as_resources

_SHOWN = 3
_LIMITS = "(limits)"


class Refusal:
    """Why one template cannot take a pod (see the module docstring)."""

    __slots__ = ("kind", "_message", "_make")

    def __init__(self, kind: str, message: str | Callable[[], str]) -> None:
        self.kind = kind
        self._message: str | None = message if isinstance(message, str) else None
        self._make: Callable[[], str] | None = None if isinstance(message, str) else message

    @property
    def message(self) -> str:
        """The refusal in words (made the first time it is asked for, then kept)."""
        if self._message is None:
            assert self._make is not None
            self._message, self._make = self._make(), None
        return self._message

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
    relevant = [k for k in merged if table.is_type_key(k) or k in OFFERING_KEYS]
    limited = within_limits != table.everything
    # Deleted first: the template's own keys, then the limits, then the keys the pod constrains.
    members: list[str] = [k for k in relevant if k not in pod_requirements] + [_LIMITS] * limited
    members += [k for k in relevant if k in pod_requirements]
    fit = template.shapes.fitting(total) if total is not None else -1

    def admitted(subset: Sequence[str]) -> int:
        mask = table.mask_of(merged, [k for k in subset if k != _LIMITS], template.os) & fit
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
    without_fit = table.mask_of(merged, [k for k in core if k != _LIMITS], template.os)
    if _LIMITS in core:
        without_fit &= within_limits
    needs = _needs(template, total, without_fit)
    if not under:
        return f"no instance type in {table.region or 'the catalog'} has {needs}"
    return f"no instance type has {needs} under {under}"


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


def no_type_refusal(
    template: NodeClaimTemplate, pod_requirements: Requirements, requests: Vector | None, within_limits: int
) -> Refusal:
    """`instance-types` (requests None: the requirements alone leave no type) or `resources`."""
    if requests is None:
        return Refusal("instance-types", lambda: explain(template, pod_requirements, None, within_limits))
    return Refusal("resources", lambda: explain(template, pod_requirements, requests, within_limits))

