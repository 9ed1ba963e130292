"""`karpenter-policy catalog show [TYPE...]`: what the catalog of a region holds — without types, its date, counts,
zones and the regions of the embedded catalog; with types, each type's facts, its node labels, zones and price,
and where each fact came from (or why the region lacks it)."""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.catalog import OFFERINGS_SOURCE
from karpenter_policy.catalog.embedded import embedded_regions
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.proof.absence import known_name
from karpenter_policy.model.instancetypes import InstanceType, price_text
from karpenter_policy.model.spelling import nearest_name

#: What the `[inferred: ...]` tag of a type's zones means (the legend's line for it).
INFERRED_LEGEND = (
    "zones the offerings lack for this type, given by a rule: the type is priced in the region but not in its "
    "offerings, or missing from the offerings of every region (a hole in the source); its family's zones there, "
    "else those of its category and generation, else of its category, else every zone"
)


def show_catalog(catalog: Catalog, names: Sequence[str], embedded: bool) -> CommandOutput:
    """The text of `catalog show`; exit 1 when a named type is not in the catalog."""
    if not names:
        return CommandOutput(0, "\n".join(_summary(catalog, embedded)) + "\n", "")
    lines: list[str] = []
    missing = 0
    used: set[str] = set()
    for name in names:
        it = catalog.get(name)
        if it is None:
            missing += 1
            lines.append(f"{name}: {_absent(catalog, name)}")
        else:
            lines += _describe(catalog, it, used)
    legend = [f"  [{key}] {_source(catalog, key)}" for key in sorted(used) if key in catalog.sources]
    if "inferred" in used:
        legend.append(f"  [inferred: ...] {INFERRED_LEGEND}")
    if legend:
        lines += ["sources:", *legend]
    return CommandOutput(1 if missing else 0, "\n".join(lines) + "\n", "")


def _absent(catalog: Catalog, name: str) -> str:
    """Why `catalog` has no type `name`: a known type it lacks (previous generation, other regions), or a typo
    with the nearest name, as `check` says it."""
    known = known_name(catalog, name)
    if known is not None:
        return known.text
    text = f"there is no instance type {name} in {catalog.region} (not in the {catalog.types_description})"
    guess = nearest_name(name, catalog.names())
    return text + (f", did you mean {guess}?" if guess else "")


def _source(catalog: Catalog, key: str) -> str:
    """A source's description, with its date when the catalog knows it."""
    date = catalog.dates.get(key)
    return f"of {date}: {catalog.sources[key]}" if date else catalog.sources[key]


def _summary(catalog: Catalog, embedded: bool) -> list[str]:
    priced = sum(1 for it in catalog if it.price_on_demand is not None)
    previous = sum(1 for it in catalog if it.previous_generation)
    head = f"{catalog.description}, {catalog.region}: {len(catalog)} instance types"
    if previous:
        head += f" ({previous} of them previous-generation)"
    lines = [head, f"zones: {' '.join(catalog.zones())}"]
    lines.append(f"on-demand prices: {priced} types" if priced else f"prices: no price data for {catalog.region}")
    inferred = sorted(n for n, p in catalog.provenance.items() if p.zones.startswith("inferred") and n in catalog)
    if inferred:
        lines.append(f"inferred zones ({len(inferred)}): {' '.join(inferred)}")
    if embedded:
        counts = [f"{r} ({len(load_catalog(region=r))})" for r in embedded_regions()]
        lines.append(f"embedded regions ({len(counts)}): {', '.join(counts)}")
    if catalog.sources:
        lines += ["sources:", *(f"  [{key}] {_source(catalog, key)}" for key in sorted(catalog.sources))]
    return lines


def _describe(catalog: Catalog, it: InstanceType, used: set[str]) -> list[str]:
    """The lines about one type; the source ids they cite are added to `used`."""
    provenance = catalog.provenance.get(it.name)

    def source(key: str) -> str:
        used.add(key)
        return f" [{key or 'unknown'}]"

    lines = [f"{it.name}{' (previous generation)' if it.previous_generation else ''}"]
    facts = f"  {it.vcpu} vCPU, {it.memory_mib} MiB, {'/'.join(it.architectures)}, hypervisor {it.hypervisor or '-'}"
    if it.gpu_count:
        facts += f", {it.gpu_count} × {it.gpu_manufacturer} {it.gpu_name} ({it.gpu_memory_mib} MiB)"
    if it.accelerator_count:
        facts += f", {it.accelerator_count} × {it.accelerator_manufacturer} {it.accelerator_name}"
    lines.append(facts + (source(provenance.facts) if provenance else ""))
    pods = it.eni_limited_pods()
    network = f"  {it.max_enis} ENIs (default network card) × {it.ipv4_per_eni} IPv4"
    network += f" (max pods {pods if pods is not None else 'unknown'})"
    network += f", {it.branch_enis} branch ENIs" if it.branch_enis else ""
    lines.append(network + (source(provenance.network) if provenance else ""))
    cards = len(it.network_cards)
    launch = [f"{cards} network card{'s' if cards > 1 else ''} ({', '.join(map(str, it.network_cards))} interfaces)"
              if cards else "network cards unknown"]
    launch.append(f"EFA: {it.efa_interfaces} interfaces" if it.efa_interfaces else "no EFA")
    launch += ["ENA unsupported"] * it.ena_unsupported + ["nested virtualization"] * it.nested_virtualization
    lines.append("  " + ", ".join(launch))
    zones = ", ".join(f"{z} ({'/'.join(_capacity_types(it, z))})" for z in it.zones())
    if provenance:
        used.add(OFFERINGS_SOURCE if provenance.zones == OFFERINGS_SOURCE else "inferred")
    lines.append(f"  zones: {zones}" + (f" [{provenance.zones}]" if provenance else ""))
    price = price_text(it.price_on_demand, catalog.region)
    lines.append(f"  on-demand: {price}" + (source(provenance.price) if provenance and provenance.price else ""))
    lines.append("  labels: " + ", ".join(f"{k}={v}" for k, v in it.labels().items()))
    return lines


def _capacity_types(it: InstanceType, zone: str) -> list[str]:
    return sorted({o.capacity_type for o in it.offerings if o.zone == zone and o.available})


__all__ = ["show_catalog"]
