"""Which provisioner would launch a node for each workload, on which instance types — or why none can.

`schedule_workloads(checked_provisioners, workloads)` replays Karpenter v0.31's decision for a new node
(`scheduler.add` → `addToNewMachine`) on the proven provisioners of a `check` run:

1. Provisioners are tried by weight, highest first (Karpenter's `OrderByWeight`; equal weights: by name here,
   arbitrary in Karpenter — which is what the `overlap` warning is about).
2. A provisioner takes the pod when its taints are all tolerated (startupTaints need not be), its requirements
   (with its labels and `karpenter.sh/provisioner-name`) are compatible with the pod's (a custom label the pod
   asks for must be defined by the provisioner unless NotIn/DoesNotExist; well-known labels may be left open),
   and one of its instance types — within its `limits.resources` — satisfies the pod's requirements, has an
   available offering in the zones and capacity types both allow, and has room for the pod's requests plus
   the DaemonSet overhead (the requests of the DaemonSets found whose pods would run on that provisioner's
   nodes, and one pod slot each).
3. When no provisioner takes the pod, Karpenter relaxes it (see `model.pods`: other nodeSelectorTerms,
   lighter preferred terms, PreferNoSchedule taints) and tries again; the first variant that fits decides.

**Allocatable** (what a pod can use of a type) is estimated as Karpenter v0.31's AWS provider does:

* capacity: cpu = vCPUs; memory = MiB − ⌈7.5 % of MiB⌉ (`VM_MEMORY_OVERHEAD_PERCENT`); pods = the
  kubelet's `maxPods`, else the ENI-limited density (ENIs × (IPv4 per ENI − 1) + 2; 110 without ENI data),
  capped by `podsPerCore` × vCPUs; GPUs (`nvidia.com/gpu`, `amd.com/gpu`, `habana.ai/gaudi`) and
  `aws.amazon.com/neuron` (AWS accelerators) by count;
* minus kube-reserved: cpu 6 % of the first core, 1 % of the second, 0.5 % of the third and fourth, 0.25 %
  of every further core; memory 11 MiB × ENI-limited pods + 255 MiB (the AL2 rule) — each overridden by the
  provisioner's `kubeletConfiguration.kubeReserved`; minus `systemReserved`; minus the memory eviction
  threshold: 100 Mi, or the larger of `evictionHard` / `evictionSoft` `memory.available` (a quantity or a
  percentage of memory).

Not modelled: ephemeral-storage (it depends on the node template's volumes) and other extended resources
(e.g. `vpc.amazonaws.com/pod-eni`): requests of those are not checked. Host ports, pod (anti-)affinity and
topology spread are not modelled either: they decide how many nodes, not whether one can launch.

The bulk decision is set algebra over the catalog: every instance type is a bit of a Python integer, each
requirement a mask of the types it accepts (cached), each provisioner a mask of its proven types, each
resource a table of "types with at least x free" masks; a (provisioner, pod) pair is a handful of big-integer
ANDs. Identical pod templates are decided once. The explanations (`no instance type has 96 vCPU and 2 GPUs
under karpenter.k8s.aws/instance-size In [2xlarge, 4xlarge]`) come from the same masks: a deletion-minimal
set of the requirements that, with the requests, leave no type.

Findings (DESIGN.md §4): `workload-unschedulable` (error, at the pod template), `overlap` (warning: equal-weight
provisioners that both take a workload), `shadowed` (warning: a provisioner every workload it could take goes
to a higher-weight one), `limits` (warning: `limits.resources` below the smallest instance type, from
`limits_findings`, run by every `check`).
"""

from __future__ import annotations

import bisect
import math
import operator
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from karpenter_policy.api.kinds import PROVISIONER_KIND, object_ref
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.api.violations import ERROR, LIMITS, OVERLAP, SHADOWED, WARNING, WORKLOAD_UNSCHEDULABLE
from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType
from karpenter_policy.model.pods import (
    HABANA_GAUDI,
    Attempt,
    PodScheduling,
    describe_quantity,
    describe_requests,
    format_bytes,
)
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.resources import (
    AMD_GPU,
    AWS_NEURON,
    CPU,
    MEMORY,
    NVIDIA_GPU,
    PODS,
    ResourceList,
    format_quantity,
    parse_quantity,
)
from karpenter_policy.model.taints import PREFER_NO_SCHEDULE, Taint, untolerated
from karpenter_policy.policy.findings import Finding, Location, Report
from karpenter_policy.policy.loader import Document
from karpenter_policy.policy.solver import CatalogTable, Verdict, table_for
from karpenter_policy.policy.workloads import Workload, read_workloads

if TYPE_CHECKING:  # check imports this module: no cycle at run time
    from karpenter_policy.policy.check import CheckedProvisioner

#: The resources checked, in the order of a resource vector (cpu in millicores, memory in bytes, counts).
RESOURCES: tuple[str, ...] = (CPU, MEMORY, PODS, NVIDIA_GPU, AMD_GPU, AWS_NEURON, HABANA_GAUDI)
_INDEX = {name: i for i, name in enumerate(RESOURCES)}
_POD = (0, 0, 1, 0, 0, 0, 0)

VM_MEMORY_OVERHEAD_PERCENT = Decimal("0.075")
DEFAULT_EVICTION_MEMORY = 100 * 2**20
DEFAULT_MAX_PODS = 110
_MIB = 2**20
#: kube-reserved cpu: (from millicores, to millicores, share), Karpenter's ranges (from Bottlerocket).
_CPU_RESERVED_RANGES = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))
#: Keys checked against offerings (zone x capacity type) rather than the type's labels; keys never checked.
_OFFERING_KEYS = (wk.ZONE, wk.CAPACITY_TYPE)
_NOT_TYPE_KEYS = frozenset({wk.OS, wk.REGION})
_SHOWN = 3

Vector = tuple[int, ...]


# --- reasons and placements ---------------------------------------------------------------------------------


class Refusal:
    """Why one provisioner cannot take a workload. `kind`: `unproven` (the provisioner admits no instance
    type), `taint`, `requirements` (incompatible requirements or an undefined custom label), `limits`,
    `instance-types` (no type satisfies the requirements together), `resources` (no type has room).
    `message` says it in words; it is worked out on first use (a placement keeps the refusals of every
    provisioner tried before the one that takes the workload, most of which nobody reads)."""

    __slots__ = ("kind", "_message", "_make")

    def __init__(self, kind: str, message: str | Callable[[], str]) -> None:
        self.kind = kind
        self._message: str | None = message if isinstance(message, str) else None
        self._make: Callable[[], str] | None = None if isinstance(message, str) else message

    @property
    def message(self) -> str:
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


#: The cheapest offering of a fitting type: what Karpenter would launch first.
Launch = ChosenOffering


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a workload goes.

    `provisioner`: the one that launches a node for it (None: unschedulable). `instance_types`: the types of
    that provisioner that fit it (sorted by name). `reasons`: provisioner name → why it refused the workload,
    for every provisioner tried before the chosen one (all of them when unschedulable), at the deciding
    variant of the pod. `candidates`: every provisioner that could take it at that variant, in Karpenter's
    order; `alternatives`: the candidates of the chosen one's weight (Karpenter picks among them arbitrarily).
    `relaxed`: what Karpenter relaxed before it fit (or, unschedulable, everything it tried relaxing).
    `requests`: the pod's requests; `overhead`: the DaemonSet requests on the chosen provisioner's nodes.
    """

    workload: Workload
    provisioner: str | None
    instance_types: tuple[str, ...] = ()
    reasons: Mapping[str, Refusal] = field(default_factory=dict)
    candidates: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    relaxed: tuple[str, ...] = ()
    launch: Launch | None = None
    requests: ResourceList = field(default_factory=dict)
    overhead: ResourceList = field(default_factory=dict)
    daemon_sets: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return self.workload.ref

    @property
    def file(self) -> str:
        return self.workload.file

    @property
    def line(self) -> int:
        return self.workload.line

    @property
    def column(self) -> int:
        return self.workload.column

    @property
    def schedulable(self) -> bool:
        return self.provisioner is not None

    def message(self) -> str:
        """The `workload-unschedulable` message (only meaningful when not schedulable)."""
        if not self.reasons:
            return "no provisioner can launch a node for it: there is no proven Provisioner among the policies"
        parts = [f"provisioner {name}: {reason}" for name, reason in self.reasons.items()]
        text = "no provisioner can launch a node for it: " + "; ".join(parts)
        if self.relaxed:
            text += f" (after Karpenter relaxed the pod: {', '.join(self.relaxed)})"
        return text

    def summary(self) -> str:
        """`Deployment/inflate → Provisioner/default: 412 instance types, e.g. c5.large (us-east-1a, spot)`."""
        if self.provisioner is None:
            return f"{self.ref}: unschedulable"
        count = len(self.instance_types)
        text = f"{self.ref} → {object_ref(PROVISIONER_KIND, self.provisioner)}: {count} instance type"
        text += "s" if count != 1 else ""
        if self.launch is not None:
            text += f", e.g. {self.launch.instance_type} ({self.launch.zone}, {self.launch.capacity_type})"
        if self.relaxed:
            text += f" (relaxed as Karpenter does: {', '.join(self.relaxed)})"
        if self.alternatives:
            text += f"; also matches {', '.join(self.alternatives)} of the same weight"
        return text

    def to_json(self) -> dict[str, object]:
        data = self.workload.to_json()
        data.update(
            {
                "provisioner": self.provisioner,
                "schedulable": self.schedulable,
                "count": len(self.instance_types),
                "instance_types": list(self.instance_types),
                "candidates": list(self.candidates),
                "alternatives": list(self.alternatives),
                "relaxed": list(self.relaxed),
                "requests": {k: _format_resource(k, v) for k, v in sorted(self.requests.items())},
            }
        )
        if self.schedulable:  # the kinds only: the words are worked out on demand (`reasons[name].message`)
            data["refused_by"] = {name: r.kind for name, r in self.reasons.items()}
        else:
            data["reasons"] = {name: {"kind": r.kind, "message": r.message} for name, r in self.reasons.items()}
        if self.overhead:
            data["daemonset_overhead"] = {k: _format_resource(k, v) for k, v in sorted(self.overhead.items())}
            data["daemonsets"] = list(self.daemon_sets)
        if self.launch is not None:
            data["launch"] = self.launch.to_json()
        return data


# --- the catalog as bit masks -------------------------------------------------------------------------------


def _bits(indices: Iterable[int]) -> int:
    mask = 0
    for index in indices:
        mask |= 1 << index
    return mask


def _indices(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def vector(resources: Mapping[str, Decimal]) -> Vector:
    """A resource list as a vector (cpu in millicores, rounded up; the rest rounded up); unmodelled resources
    are left out."""
    out = [0] * len(RESOURCES)
    for name, value in resources.items():
        index = _INDEX.get(name)
        if index is not None:
            out[index] = _ceil(value * 1000) if name == CPU else _ceil(value)
    return tuple(out)


def _add(a: Vector, b: Vector) -> Vector:
    return tuple(map(operator.add, a, b))


def _resource_list(v: Vector) -> ResourceList:
    return {name: (Decimal(x) / 1000 if name == CPU else Decimal(x)) for name, x in zip(RESOURCES, v, strict=True) if x}


class _Index:
    """One catalog as bit masks: the types accepted by a requirement, offered in a zone x capacity type."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.table: CatalogTable = table_for(catalog)
        table = self.table
        self.types: tuple[InstanceType, ...] = table.types
        self.names = tuple(t.name for t in self.types)
        self.position = {name: i for i, name in enumerate(self.names)}
        self.value_masks: dict[str, list[int]] = {}
        for key, column in table.value_index.items():
            masks = [0] * (len(table.domains[key]) + 1)
            for i, value in enumerate(column):
                masks[value] |= 1 << i
            self.value_masks[key] = masks
        pairs: dict[tuple[int, int], int] = defaultdict(int)
        for i, offers in enumerate(table.offerings):
            for _, z, c in offers:
                pairs[(z, c)] |= 1 << i
        self.pair_masks = dict(pairs)
        self.offered = 0
        for mask in self.pair_masks.values():
            self.offered |= mask
        self._requirement_masks: dict[Requirement, int] = {}
        self._offering_masks: dict[tuple[Requirement, Requirement], int] = {}
        self._allocatable: dict[str, _Resources] = {}
        self._names: dict[int, tuple[str, ...]] = {}
        self._ranked: dict[
            tuple[frozenset[int], frozenset[int]], tuple[list[tuple[float, int, int, int]], list[int]]
        ] = {}
        self._launches: dict[tuple[int, frozenset[int], frozenset[int]], Launch | None] = {}

    def mask_of_names(self, names: Iterable[str]) -> int:
        return _bits(self.position[n] for n in names if n in self.position)

    def names_of(self, mask: int) -> tuple[str, ...]:
        """The names of the types of a mask, sorted (cached: many workloads fit the same types)."""
        cached = self._names.get(mask)
        if cached is None:
            if len(self._names) > 4096:
                self._names.clear()
            names = self.names
            cached = self._names[mask] = tuple(names[i] for i in _indices(mask))
        return cached

    def cheapest(self, mask: int, zone: Requirement, capacity_type: Requirement) -> Launch | None:
        """The cheapest available offering of a type of `mask` in a zone and capacity type allowed (ties: by
        price, then type name, zone, capacity type)."""
        table = self.table
        zones = frozenset(z for z, name in enumerate(table.zones) if zone.has(name))
        capacities = frozenset(c for c, name in enumerate(table.capacity_types) if capacity_type.has(name))
        launch_key = (mask, zones, capacities)
        if launch_key in self._launches:
            return self._launches[launch_key]
        found = self._ranked.get((zones, capacities))
        if found is None:  # each type's cheapest allowed offering, cheapest first, and the masks of the first j
            best: list[tuple[float, int, int, int]] = []
            for i, offers in enumerate(table.offerings):
                for price, z, c in offers:  # sorted by price
                    if z in zones and c in capacities:
                        best.append((price, i, z, c))
                        break
            ranked = sorted(best)
            prefixes = []
            running = 0
            for entry in ranked:
                running |= 1 << entry[1]
                prefixes.append(running)
            found = self._ranked[(zones, capacities)] = (ranked, prefixes)
        ranked, prefixes = found
        launch = None
        if ranked and mask & prefixes[-1]:
            low, high = 0, len(ranked) - 1  # the first j whose prefix meets the mask
            while low < high:
                middle = (low + high) // 2
                if mask & prefixes[middle]:
                    high = middle
                else:
                    low = middle + 1
            price, i, z, c = ranked[low]
            launch = Launch(self.names[i], table.zones[z], table.capacity_types[c], price)
        if len(self._launches) > 4096:
            self._launches.clear()
        self._launches[launch_key] = launch
        return launch

    def is_type_key(self, key: str) -> bool:
        return key in self.value_masks and key not in _NOT_TYPE_KEYS

    def requirement_mask(self, requirement: Requirement) -> int:
        """The types whose label value the requirement accepts (an absent label: only NotIn/DoesNotExist)."""
        cached = self._requirement_masks.get(requirement)
        if cached is None:
            masks = self.value_masks[requirement.key]
            domain = self.table.domains[requirement.key]
            cached = 0
            for i, value in enumerate(domain):
                if requirement.has(value):
                    cached |= masks[i]
            if requirement.operator() in (Operator.NOT_IN, Operator.DOES_NOT_EXIST):
                cached |= masks[-1]
            self._requirement_masks[requirement] = cached
        return cached

    def offering_mask(self, zone: Requirement, capacity_type: Requirement) -> int:
        """The types with an available offering in a zone and capacity type both requirements accept."""
        key = (zone, capacity_type)
        cached = self._offering_masks.get(key)
        if cached is None:
            table = self.table
            cached = 0
            for (z, c), mask in self.pair_masks.items():
                if zone.has(table.zones[z]) and capacity_type.has(table.capacity_types[c]):
                    cached |= mask
            self._offering_masks[key] = cached
        return cached

    def mask_of(self, requirements: Requirements, keys: Iterable[str] | None = None) -> int:
        """The offered types that satisfy `requirements` (only `keys` of them, when given)."""
        mask = self.offered
        wanted = list(requirements) if keys is None else list(keys)
        for key in wanted:
            if self.is_type_key(key):
                mask &= self.requirement_mask(requirements[key])
        if any(k in _OFFERING_KEYS for k in wanted):
            zone = (
                requirements[wk.ZONE] if wk.ZONE in wanted and wk.ZONE in requirements else Requirement.exists(wk.ZONE)
            )
            capacity = (
                requirements[wk.CAPACITY_TYPE]
                if wk.CAPACITY_TYPE in wanted and wk.CAPACITY_TYPE in requirements
                else Requirement.exists(wk.CAPACITY_TYPE)
            )
            mask &= self.offering_mask(zone, capacity)
        return mask

    def resources(self, kubelet: Mapping[str, Any] | None) -> _Resources:
        """The capacity and allocatable tables of every type under a kubelet configuration (cached)."""
        key = repr(sorted((kubelet or {}).items()))
        cached = self._allocatable.get(key)
        if cached is None:
            cached = self._allocatable[key] = _Resources(self.types, kubelet or {})
        return cached


_INDEXES: dict[int, tuple[weakref.ref[Catalog], _Index]] = {}


def _index_for(catalog: Catalog) -> _Index:
    entry = _INDEXES.get(id(catalog))
    if entry is not None and entry[0]() is catalog:
        return entry[1]
    index = _Index(catalog)
    key = id(catalog)
    indexes = _INDEXES  # the callback may run while the interpreter tears the module's globals down

    def forget(_: object) -> None:
        indexes.pop(key, None)

    _INDEXES[key] = (weakref.ref(catalog, forget), index)
    return index


# --- capacity and allocatable -------------------------------------------------------------------------------


def _quantity(value: object) -> Decimal | None:
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _signal(threshold: object, capacity: int) -> int | None:
    """An eviction threshold (`100Mi` or `10%`) in bytes of `capacity`."""
    if isinstance(threshold, str) and threshold.endswith("%"):
        try:
            share = Decimal(threshold[:-1])
        except ArithmeticError:
            return None
        if not share.is_finite() or not 0 <= share <= 100:  # validation refuses it; never compute with it
            return None
        return _ceil(Decimal(capacity) * share / 100)
    quantity = _quantity(threshold)
    return None if quantity is None else _ceil(quantity)


def kube_reserved_cpu_millis(vcpu: int) -> int:
    """Karpenter's kube-reserved cpu for a type with `vcpu` cores (millicores)."""
    cpu = vcpu * 1000
    reserved = 0
    for start, end, share in _CPU_RESERVED_RANGES:
        if cpu >= start:
            reserved += int((min(cpu, end) - start) * share)
    return reserved


def eni_limited_pods(it: InstanceType) -> int:
    return it.max_pods if it.max_pods > 0 else DEFAULT_MAX_PODS


def capacity_of(it: InstanceType, kubelet: Mapping[str, Any]) -> Vector:
    """What a node of the type has (Karpenter's capacity: memory after the VM overhead)."""
    memory = it.memory_mib - math.ceil(it.memory_mib * VM_MEMORY_OVERHEAD_PERCENT)
    max_pods = kubelet.get("maxPods")
    pods = max_pods if isinstance(max_pods, int) and not isinstance(max_pods, bool) else eni_limited_pods(it)
    per_core = kubelet.get("podsPerCore")
    if isinstance(per_core, int) and not isinstance(per_core, bool) and per_core > 0:
        pods = min(pods, per_core * it.vcpu)
    gpu = it.gpu_manufacturer.lower()
    return (
        it.vcpu * 1000,
        memory * _MIB,
        pods,
        it.gpu_count if gpu == "nvidia" else 0,
        it.gpu_count if gpu == "amd" else 0,
        it.accelerator_count if it.accelerator_manufacturer.lower() == "aws" else 0,
        it.gpu_count if gpu == "habana" else 0,
    )


def allocatable_of(it: InstanceType, kubelet: Mapping[str, Any]) -> Vector:
    """What pods can request on a node of the type: capacity − kube-reserved − system-reserved − eviction."""
    capacity = capacity_of(it, kubelet)
    reserved = {CPU: kube_reserved_cpu_millis(it.vcpu), MEMORY: (11 * eni_limited_pods(it) + 255) * _MIB}
    for source, override in (("kubeReserved", True), ("systemReserved", False)):
        configured = kubelet.get(source)
        if not isinstance(configured, Mapping):
            continue
        for name in (CPU, MEMORY):
            quantity = _quantity(configured.get(name)) if name in configured else None
            if quantity is None:
                continue
            amount = _ceil(quantity * 1000) if name == CPU else _ceil(quantity)
            reserved[name] = amount if override else reserved[name] + amount
    eviction = DEFAULT_EVICTION_MEMORY
    signals = [
        _signal(s.get("memory.available"), capacity[1])
        for s in (kubelet.get("evictionHard"), kubelet.get("evictionSoft"))
        if isinstance(s, Mapping) and "memory.available" in s
    ]
    if any(s is not None for s in signals):
        eviction = max(s for s in signals if s is not None)
    out = list(capacity)
    out[0] = capacity[0] - reserved[CPU]
    out[1] = capacity[1] - reserved[MEMORY] - eviction
    return tuple(out)


class _Resources:
    """Per type: capacity and allocatable vectors; per resource, the masks of "types with at least x"."""

    def __init__(self, types: Sequence[InstanceType], kubelet: Mapping[str, Any]) -> None:
        self.capacity = [capacity_of(it, kubelet) for it in types]
        self.allocatable = [allocatable_of(it, kubelet) for it in types]
        self._thresholds = [self._table([a[r] for a in self.allocatable]) for r in range(len(RESOURCES))]
        self._capacities = [self._table([c[r] for c in self.capacity]) for r in range(len(RESOURCES))]
        self._everything = (1 << len(types)) - 1
        self._fit_cache: dict[Vector, int] = {}

    @staticmethod
    def _table(values: Sequence[int]) -> tuple[list[int], list[int]]:
        """Sorted distinct values and, for each, the mask of the types with at least that value."""
        by_value: dict[int, int] = defaultdict(int)
        for i, value in enumerate(values):
            by_value[value] |= 1 << i
        ordered = sorted(by_value)
        masks = [0] * len(ordered)
        running = 0
        for j in range(len(ordered) - 1, -1, -1):
            running |= by_value[ordered[j]]
            masks[j] = running
        return ordered, masks

    def at_least(self, resource: int, amount: int) -> int:
        values, masks = self._thresholds[resource]
        j = bisect.bisect_left(values, amount)
        return masks[j] if j < len(values) else 0

    def fitting(self, requests: Vector) -> int:
        """The types with room for `requests` (all of them)."""
        cached = self._fit_cache.get(requests)
        if cached is None:
            cached = -1
            for r, amount in enumerate(requests):
                if amount > 0:
                    cached &= self.at_least(r, amount)
            if len(self._fit_cache) > 65536:
                self._fit_cache.clear()
            self._fit_cache[requests] = cached
        return cached

    def within(self, limits: Vector, limited: Sequence[int]) -> int:
        """The types whose capacity is within `limits` on each `limited` resource."""
        mask = self._everything
        for r in limited:
            values, masks = self._capacities[r]
            j = bisect.bisect_right(values, limits[r])  # the types with more than the limit: masks[j]
            mask &= ~masks[j] if j < len(values) else -1
        return mask


# --- provisioners -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Provisioner:
    index: int
    checked: CheckedProvisioner
    spec: Provisioner
    requirements: Requirements  # with its labels and karpenter.sh/provisioner-name
    by_key: dict[str, Requirement]
    taints: tuple[Taint, ...]
    types: int  # the proven instance types
    resources: _Resources
    limits: Vector | None
    limited: tuple[int, ...]
    within_limits: int  # every catalog type whose capacity is within the limits (-1: no limits)
    base: int  # the proven types within the limits
    zone: Requirement
    capacity_type: Requirement
    overhead: Vector = (0,) * len(RESOURCES)  # the DaemonSets' requests and pod slots
    daemon_sets: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def weight(self) -> int:
        return self.spec.weight


def _limits(provisioner: Provisioner) -> tuple[Vector | None, tuple[int, ...]]:
    limited = tuple(sorted(_INDEX[n] for n in provisioner.limits if n in _INDEX))
    if not limited:
        return None, ()
    return vector(provisioner.limits), limited


def _prepare(checked: Sequence[CheckedProvisioner], index: _Index) -> list[_Provisioner]:
    prepared: list[_Provisioner] = []
    for checked_provisioner in checked:
        spec = checked_provisioner.provisioner
        requirements = spec.requirements.add(Requirement.new(wk.PROVISIONER_NAME, Operator.IN, [spec.name]))
        resources = index.resources(spec.kubelet)
        if checked_provisioner.verdict == Verdict.SAT:
            types = index.mask_of_names(checked_provisioner.instance_types)
        else:
            types = 0
        limits, limited = _limits(spec)
        within = resources.within(limits, limited) if limits is not None else -1
        prepared.append(
            _Provisioner(
                index=len(prepared),
                checked=checked_provisioner,
                spec=spec,
                requirements=requirements,
                by_key=dict(requirements.items()),
                taints=spec.taints,
                types=types,
                resources=resources,
                limits=limits,
                limited=limited,
                within_limits=within,
                base=types & within,
                zone=requirements.get_or_exists(wk.ZONE),
                capacity_type=requirements.get_or_exists(wk.CAPACITY_TYPE),
            )
        )
    prepared.sort(key=lambda p: (-p.weight, p.name))
    return prepared


@dataclass(frozen=True, slots=True)
class _Variant:
    """A pod variant's requirements, interned: what every (provisioner, pod) check needs of them."""

    id: int
    requirements: Requirements
    compatible: int  # the provisioners (bits by index) whose requirements are compatible with these
    type_mask: int  # the offered types that satisfy the pod's requirements on type labels
    zone: Requirement | None
    capacity_type: Requirement | None


_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)


class _Scheduler:
    def __init__(self, provisioners: list[_Provisioner], index: _Index) -> None:
        self.provisioners = provisioners
        self.index = index
        self.tolerate_prefer_no_schedule = any(t.effect == PREFER_NO_SCHEDULE for p in provisioners for t in p.taints)
        self._all = (1 << len(provisioners)) - 1
        self._variants: dict[Requirements, _Variant] = {}
        self._compatible_with: dict[Requirement, int] = {}
        self._tolerating: dict[tuple[Any, ...], int] = {}
        self._offers: dict[tuple[Requirement, Requirement, int], int] = {}

    def variant(self, requirements: Requirements) -> _Variant:
        found = self._variants.get(requirements)
        if found is None:
            compatible = self._all
            for requirement in requirements.values():
                compatible &= self._compatible_mask(requirement)
            type_keys = [k for k in requirements if k not in _OFFERING_KEYS]
            found = _Variant(
                len(self._variants),
                requirements,
                compatible,
                self.index.mask_of(requirements, type_keys),
                requirements.get(wk.ZONE),
                requirements.get(wk.CAPACITY_TYPE),
            )
            self._variants[requirements] = found
        return found

    def _compatible_mask(self, requirement: Requirement) -> int:
        """The provisioners Karpenter's Compatible lets a pod requirement through: the key is defined by the
        provisioner and the two intersect (or both only exclude), or the key is undefined and well-known or
        the pod only excludes values."""
        cached = self._compatible_with.get(requirement)
        if cached is None:
            key = requirement.key
            negative = requirement.operator() in _NEGATIVE
            cached = 0
            for p in self.provisioners:
                existing = p.by_key.get(key)
                if existing is None:
                    ok = negative or key in wk.WELL_KNOWN_LABELS
                else:
                    ok = not existing.intersection(requirement).is_empty() or (
                        negative and existing.operator() in _NEGATIVE
                    )
                if ok:
                    cached |= 1 << p.index
            self._compatible_with[requirement] = cached
        return cached

    def tolerating(self, tolerations: tuple[Any, ...]) -> int:
        """The provisioners (bits by index) every taint of which the tolerations tolerate."""
        cached = self._tolerating.get(tolerations)
        if cached is None:
            cached = 0
            for p in self.provisioners:
                if not p.taints or not untolerated(p.taints, tolerations):
                    cached |= 1 << p.index
            self._tolerating[tolerations] = cached
        return cached

    def daemon_overhead(self, daemon_sets: Sequence[Workload]) -> None:
        """Each provisioner's DaemonSet overhead: the DaemonSets whose pods its nodes would run (their taints
        tolerated, their requirements compatible with the provisioner's: Karpenter's `getDaemonOverhead`)."""
        for p in self.provisioners:
            total: Vector = (0,) * len(RESOURCES)
            names = []
            for ds in daemon_sets:
                attempt = ds.pod.attempts()[0]
                if untolerated(p.taints, attempt.tolerations):
                    continue
                if not (self.variant(attempt.requirements).compatible >> p.index) & 1:
                    continue
                total = _add(total, _add(vector(ds.pod.resource_requests), _POD))
                names.append(ds.name)
            p.overhead = total
            p.daemon_sets = tuple(names)

    def _offer_mask(self, p: _Provisioner, variant: _Variant) -> int:
        """The types with an offering in a zone and capacity type both the provisioner and the pod allow."""
        if variant.zone is None and variant.capacity_type is None:
            return -1
        key = (p.zone, p.capacity_type, variant.id)
        cached = self._offers.get(key)
        if cached is None:
            zone = p.zone if variant.zone is None else p.zone.intersection(variant.zone)
            capacity = (
                p.capacity_type
                if variant.capacity_type is None
                else p.capacity_type.intersection(variant.capacity_type)
            )
            cached = self._offers[key] = self.index.offering_mask(zone, capacity)
        return cached

    def fit(self, p: _Provisioner, admitted: int, variant: _Variant, requests: Vector) -> int:
        """The types of `p` that take the pod variant (0: none). `admitted`: the provisioners whose taints the
        variant tolerates and whose requirements it is compatible with (bits by index)."""
        if not (admitted >> p.index) & 1:
            return 0
        mask = p.base & variant.type_mask
        if not mask:
            return 0
        mask &= self._offer_mask(p, variant)
        if not mask:
            return 0
        return mask & p.resources.fitting(_add(requests, p.overhead))

    def refusal(
        self, p: _Provisioner, attempt: Attempt, variant: _Variant, requests: Vector, tolerated: int
    ) -> Refusal:
        """Why `p` does not take the pod variant (the first check it fails, in Karpenter's order). `tolerated`:
        the provisioners whose taints the variant tolerates (bits by index)."""
        if not p.types:
            if p.checked.verdict == Verdict.UNKNOWN:
                return Refusal("unproven", "the solver could not prove its requirements satisfiable (solver-timeout)")
            return Refusal("unproven", "its requirements admit no instance type (see its findings)")
        if not (tolerated >> p.index) & 1:
            return Refusal("taint", lambda: _untolerated_text(p.taints, attempt.tolerations))
        if not (variant.compatible >> p.index) & 1:
            requirements = variant.requirements
            return Refusal("requirements", lambda: " and ".join(p.requirements.compatible(requirements)))
        if not p.base:
            return Refusal("limits", _limits_text(p))
        if not p.base & variant.type_mask & self._offer_mask(p, variant):
            return Refusal("instance-types", lambda: self.explain(p, variant, None))
        total = _add(requests, p.overhead)
        return Refusal("resources", lambda: self.explain(p, variant, total))

    def explain(self, p: _Provisioner, variant: _Variant, total: Vector | None) -> str:
        """A deletion-minimal set of the merged requirements (and the limits) that leaves no type — with the
        requests `total`, when given — in words."""
        index = self.index
        pod = variant.requirements
        merged = p.requirements.intersection(pod)
        relevant = [k for k in merged if index.is_type_key(k) or k in _OFFERING_KEYS]
        # Deleted first: the provisioner's own keys, then the limits, then the keys the pod constrains.
        members: list[str] = [k for k in relevant if k not in pod] + ["(limits)"] * (p.limits is not None)
        members += [k for k in relevant if k in pod]
        fit = p.resources.fitting(total) if total is not None else -1

        def admitted(subset: Sequence[str]) -> int:
            mask = index.mask_of(merged, [k for k in subset if k != "(limits)"]) & fit
            return mask & p.within_limits if "(limits)" in subset else mask

        core = list(members)
        position = 0
        while position < len(core):
            candidate = core[:position] + core[position + 1 :]
            if not admitted(candidate):
                core = candidate
            else:
                position += 1
        phrases = [_limits_text(p, short=True) if k == "(limits)" else str(merged[k]) for k in core]
        under = " and ".join(phrases)
        if total is None:
            return f"no instance type satisfies {under}" if under else "no instance type is offered"
        without_fit = index.mask_of(merged, [k for k in core if k != "(limits)"])
        if "(limits)" in core:
            without_fit &= p.within_limits
        needs = self._needs(p, total, without_fit)
        if not under:
            return f"no instance type in {index.catalog.region} has {needs}"
        return f"no instance type has {needs} under {under}"

    def _needs(self, p: _Provisioner, total: Vector, candidates: int) -> str:
        """The requests in words (room for the pods too when that is what is missing), DaemonSets named."""
        requests = _resource_list(total)
        shown = [n for n in (CPU, MEMORY, NVIDIA_GPU, AMD_GPU, AWS_NEURON, HABANA_GAUDI) if requests.get(n)]
        without_pods = tuple(0 if r == _INDEX[PODS] else x for r, x in enumerate(total))
        if candidates & p.resources.fitting(without_pods):
            shown.append(PODS)
        text = describe_requests(requests, shown) if shown else describe_quantity(PODS, requests.get(PODS, Decimal(1)))
        if p.daemon_sets and any(p.overhead[r] for r in range(len(RESOURCES)) if r != _INDEX[PODS]):
            daemons = _resource_list(p.overhead)
            daemons.pop(PODS, None)
            names = ", ".join(p.daemon_sets[:_SHOWN]) + (
                f" and {len(p.daemon_sets) - _SHOWN} others" if len(p.daemon_sets) > _SHOWN else ""
            )
            text += f" (of which DaemonSets {names} take {describe_requests(daemons)})"
        return text

    def launch(self, p: _Provisioner, variant: _Variant, fit: int) -> Launch | None:
        """The cheapest offering of a fitting type in the zones and capacity types allowed."""
        zone = p.zone if variant.zone is None else p.zone.intersection(variant.zone)
        capacity = (
            p.capacity_type if variant.capacity_type is None else p.capacity_type.intersection(variant.capacity_type)
        )
        return self.index.cheapest(fit, zone, capacity)

    def place(self, pod: PodScheduling, workload: Workload) -> tuple[Placement, dict[int, int]]:
        """The placement of one pod template, and the mask of every provisioner (by index) that could take it
        at the deciding variant."""
        attempts = pod.attempts(self.tolerate_prefer_no_schedule)
        requests = _add(vector(pod.resource_requests), _POD)
        reasons: dict[str, Refusal] = {}
        fits: dict[int, int] = {}
        attempt = attempts[0]
        variant = self.variant(attempt.requirements)
        for attempt in attempts:
            variant = self.variant(attempt.requirements)
            tolerated = self.tolerating(attempt.tolerations)
            admitted = variant.compatible & tolerated
            reasons, fits = {}, {}
            for p in self.provisioners:
                mask = self.fit(p, admitted, variant, requests)
                if mask:
                    fits[p.index] = mask
                elif not fits and p.name not in reasons:
                    reasons[p.name] = self.refusal(p, attempt, variant, requests, tolerated)
            if fits:
                break
        if not fits:
            return Placement(
                workload, None, reasons=reasons, relaxed=attempt.relaxed, requests=pod.resource_requests
            ), fits
        order = [p for p in self.provisioners if p.index in fits]
        chosen = order[0]
        mask = fits[chosen.index]
        placement = Placement(
            workload,
            chosen.name,
            instance_types=self.index.names_of(mask),
            reasons=reasons,
            candidates=tuple(p.name for p in order),
            alternatives=tuple(p.name for p in order[1:] if p.weight == chosen.weight),
            relaxed=attempt.relaxed,
            launch=self.launch(chosen, variant, mask),
            requests=pod.resource_requests,
            overhead=_resource_list(chosen.overhead),
            daemon_sets=chosen.daemon_sets,
        )
        return placement, fits


def _untolerated_text(taints: Sequence[Taint], tolerations: Sequence[Any]) -> str:
    missing = untolerated(taints, tolerations)
    return f"taint{'s' if len(missing) > 1 else ''} {', '.join(str(t) for t in missing)} not tolerated"


def _format_resource(name: str, value: Decimal) -> str:
    return format_bytes(value) if name == MEMORY else format_quantity(value)


def _limits_text(p: _Provisioner, short: bool = False) -> str:
    limits = ", ".join(f"{name}: {_format_resource(name, value)}" for name, value in sorted(p.spec.limits.items()))
    if short:
        return f"limits.resources ({limits})"
    return f"every instance type exceeds its limits.resources ({limits})"


@dataclass(slots=True)
class Schedule:
    """The placements of a set of workloads, with what the overlap and shadowed findings need: for each
    workload (by position), the provisioners (by name) that could take it at its deciding variant."""

    placements: list[Placement]
    could_take: list[tuple[str, ...]]
    provisioners: list[CheckedProvisioner]


def schedule(
    checked: Sequence[CheckedProvisioner],
    workloads: Sequence[Workload],
    catalog: Catalog | None = None,
) -> Schedule:
    """`schedule_workloads`, with what the findings need besides the placements."""
    index = _index_for(catalog if catalog is not None else load_catalog())
    provisioners = _prepare(checked, index)
    scheduler = _Scheduler(provisioners, index)
    scheduler.daemon_overhead([w for w in workloads if w.is_daemon_set])
    by_index = {p.index: p for p in provisioners}
    rank = {p.index: position for position, p in enumerate(provisioners)}
    placements: list[Placement] = []
    could_take: list[tuple[str, ...]] = []
    decided: dict[PodScheduling, tuple[Placement, tuple[str, ...]]] = {}
    for workload in workloads:
        if workload.is_daemon_set:
            continue
        known = decided.get(workload.pod)
        if known is None:
            placement, fits = scheduler.place(workload.pod, workload)
            names = tuple(by_index[i].name for i in sorted(fits, key=rank.__getitem__))
            decided[workload.pod] = (placement, names)
        else:
            template, names = known
            placement = _for(template, workload)
        placements.append(placement)
        could_take.append(names)
    return Schedule(placements, could_take, list(checked))


def _for(template: Placement, workload: Workload) -> Placement:
    """A copy of a placement for another workload with the same pod template."""
    return Placement(
        workload,
        template.provisioner,
        template.instance_types,
        template.reasons,
        template.candidates,
        template.alternatives,
        template.relaxed,
        template.launch,
        template.requests,
        template.overhead,
        template.daemon_sets,
    )


def schedule_workloads(
    checked_provisioners: Sequence[CheckedProvisioner],
    workloads: Sequence[Workload],
    catalog: Catalog | None = None,
) -> list[Placement]:
    """Where each workload (DaemonSets excepted: they only add overhead) would go, in the given order.

    `checked_provisioners` come from `check_paths` (only proven ones can take anything); `catalog` must be the
    one they were checked against (default: the embedded catalog).
    """
    return schedule(checked_provisioners, workloads, catalog).placements


# --- findings -----------------------------------------------------------------------------------------------


def _provisioner_location(checked: CheckedProvisioner) -> Location:
    return Location(checked.file, checked.line, checked.column)


def workload_findings(result: Schedule) -> list[Finding]:
    """`workload-unschedulable`, `overlap` and `shadowed` findings of a schedule."""
    findings: list[Finding] = []
    for placement in result.placements:
        if not placement.schedulable:
            w = placement.workload
            findings.append(
                Finding(WORKLOAD_UNSCHEDULABLE, ERROR, placement.message(), w.file, w.line, w.column, w.ref)
            )
    findings += _overlap_findings(result)
    findings += _shadowed_findings(result)
    return findings


def _overlap_findings(result: Schedule) -> list[Finding]:
    by_name = {c.name: c for c in result.provisioners}
    pairs: dict[tuple[str, str], list[Placement]] = defaultdict(list)
    for placement in result.placements:
        if placement.provisioner is None or not placement.alternatives:
            continue
        group = [placement.provisioner, *placement.alternatives]
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                ordered = sorted((a, b), key=lambda n: (by_name[n].file, by_name[n].line, n))
                pairs[(ordered[0], ordered[1])].append(placement)
    findings = []
    for (a, b), placements in sorted(pairs.items()):
        first, second = by_name[a], by_name[b]
        example = placements[0]
        others = len(placements) - 1
        also = f" (and {others} other workload{'s' if others != 1 else ''})" if others else ""
        weight = first.provisioner.weight
        message = (
            f"same weight ({weight}) as Provisioner/{b}, and both can launch a node for {example.ref}{also}: "
            "Karpenter picks either one; give one a higher weight or make their requirements exclusive"
        )
        related = (_provisioner_location(second), Location(example.file, example.line, example.column))
        findings.append(
            Finding(OVERLAP, WARNING, message, first.file, first.line, first.column, first.object_ref, related)
        )
    return findings


def _shadowed_findings(result: Schedule) -> list[Finding]:
    weights = {c.name: c.provisioner.weight for c in result.provisioners}
    by_name = {c.name: c for c in result.provisioners}
    could: dict[str, list[Placement]] = defaultdict(list)
    chosen: set[str] = set()
    for placement, names in zip(result.placements, result.could_take, strict=True):
        if placement.provisioner is not None:
            chosen.add(placement.provisioner)
        for name in names:
            could[name].append(placement)
    findings = []
    for checked in result.provisioners:
        name = checked.name
        taken = could.get(name, [])
        if not taken or name in chosen:
            continue
        weight = weights[name]
        if not all(p.provisioner is not None and weights[p.provisioner] > weight for p in taken):
            continue
        winners: dict[str, int] = defaultdict(int)
        for p in taken:
            assert p.provisioner is not None
            winners[p.provisioner] += 1
        ranked = sorted(winners.items(), key=lambda item: (-item[1], item[0]))
        listed = ", ".join(
            f"Provisioner/{winner} (weight {weights[winner]}) takes {count}" for winner, count in ranked[:_SHOWN]
        )
        if len(ranked) > _SHOWN:
            listed += f" and {len(ranked) - _SHOWN} others"
        count = len(taken)
        message = (
            f"no workload reaches this provisioner (weight {weight}): every workload it could launch a node for "
            f"({count}, e.g. {taken[0].ref}) goes to a higher-weight provisioner: {listed}"
        )
        related = tuple(_provisioner_location(by_name[w]) for w, _ in ranked[:_SHOWN])
        findings.append(
            Finding(SHADOWED, WARNING, message, checked.file, checked.line, checked.column, checked.object_ref, related)
        )
    return findings


def limits_findings(doc: Document, checked: CheckedProvisioner, catalog: Catalog | None = None) -> list[Finding]:
    """`limits` (warning): the provisioner's `limits.resources` are below the capacity of every instance type
    it can launch, so Karpenter never launches a node for it. At the limit that excludes its smallest type."""
    if checked.verdict != Verdict.SAT or not checked.instance_types:
        return []
    spec = checked.provisioner
    limits, limited = _limits(spec)
    if limits is None:
        return []
    index = _index_for(catalog if catalog is not None else load_catalog())
    resources = index.resources(spec.kubelet)
    types = [index.position[n] for n in checked.instance_types if n in index.position]
    if not types or any(all(resources.capacity[i][r] <= limits[r] for r in limited) for i in types):
        return []
    # The resource whose limit is below the smallest type (of that resource); else the first limited one.
    binding = next((r for r in limited if min(resources.capacity[i][r] for i in types) > limits[r]), limited[0])
    smallest = min(types, key=lambda i: (resources.capacity[i][binding], resources.capacity[i], index.names[i]))
    name = RESOURCES[binding]
    limit_text = _format_resource(name, spec.limits[name])
    have = _resource_list(resources.capacity[smallest]).get(name, Decimal(0))
    size = describe_quantity(name, have)
    if name == MEMORY:
        size += f" after the {(VM_MEMORY_OVERHEAD_PERCENT * 100).normalize()} % VM overhead"
    message = (
        f"limits.resources {name}: {limit_text} is smaller than the smallest instance type the provisioner can "
        f"launch ({index.names[smallest]}: {size}): Karpenter can never launch a node for it"
    )
    path: tuple[str | int, ...] = ("spec", "limits", "resources", name)
    line, column = doc.position(path)
    return [Finding(LIMITS, WARNING, message, doc.file, line, column, checked.object_ref)]


# --- the check ----------------------------------------------------------------------------------------------


def check_workloads(
    report: Report,
    checked: Sequence[CheckedProvisioner],
    paths: Sequence[str],
    catalog: Catalog | None = None,
    counted_files: Iterable[str] = (),
) -> list[Placement]:
    """`check --workloads PATHS`: read the workloads, place them, add the findings (and the files and kinds
    read, except `counted_files` already counted) to `report`; the placements, in file order."""
    found = read_workloads(paths)
    report.findings.extend(found.findings)
    report.could_not_run = report.could_not_run or found.could_not_run
    already = set(counted_files)
    report.files += sum(1 for f in found.files if f not in already)
    report.kinds.update(found.kinds)
    for workload in found.workloads:  # a file that is a policy file too: validate counted it as skipped
        if workload.file in already and report.skipped.get(workload.kind, 0) > 0:
            report.skipped[workload.kind] -= 1
            if not report.skipped[workload.kind]:
                del report.skipped[workload.kind]
    result = schedule(checked, found.workloads, catalog)
    report.findings.extend(workload_findings(result))
    return result.placements


def placements_json(placements: Sequence[Placement]) -> list[dict[str, object]]:
    return [p.to_json() for p in placements]


def placement_info_lines(placements: Sequence[Placement]) -> list[str]:
    """One `file:line:col: info: …` line per schedulable workload (the unschedulable ones are errors)."""
    return [f"{p.file}:{p.line}:{p.column}: info: {p.summary()}" for p in placements if p.schedulable]


__all__ = [
    "LIMITS",
    "OVERLAP",
    "SHADOWED",
    "WORKLOAD_UNSCHEDULABLE",
    "Launch",
    "Placement",
    "Refusal",
    "Schedule",
    "allocatable_of",
    "capacity_of",
    "check_workloads",
    "kube_reserved_cpu_millis",
    "limits_findings",
    "placement_info_lines",
    "placements_json",
    "schedule",
    "schedule_workloads",
    "workload_findings",
]
