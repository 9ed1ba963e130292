"""`karpenter-policy catalog show [TYPE...]`: what the catalog of a region holds — without types, its date, counts,
zones and the regions of the embedded catalog; with types, each type's facts, its node labels, zones and price,
and where each fact came from (or why the region lacks it)."""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.embedded import embedded_regions
from karpenter_policy.model.instancetypes import InstanceType, price_text
from karpenter_policy.policy.findings import CommandOutput
from karpenter_policy.policy.proof.absence import known_name


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
            known = known_name(catalog, name)
            lines.append(f"{name}: {known.text if known else f'not in the {catalog.description} ({catalog.region})'}")
        else:
            lines += _describe(catalog, it, used)
    legend = [f"  [{key}] {catalog.sources[key]}" for key in sorted(used) if key in catalog.sources]
    if legend:
        lines += ["sources:", *legend]
    return CommandOutput(1 if missing else 0, "\n".join(lines) + "\n", "")


def _summary(catalog: Catalog, embedded: bool) -> list[str]:
    priced = sum(1 for it in catalog if it.price_on_demand is not None)
    left_out = sum(
        1 for k in catalog.known.values() if k.previous_generation and k.described and catalog.region in k.regions
    )
    head = f"{catalog.description}, {catalog.region}: {len(catalog)} instance types"
    if not catalog.previous_generation_admitted and left_out:
        head += f" ({left_out} previous-generation left out: --allow-previous-generation)"
    lines = [head, f"zones: {' '.join(catalog.zones())}"]
    lines.append(f"on-demand prices: {priced} types" if priced else f"prices: no price data for {catalog.region}")
    inferred = sorted(n for n, p in catalog.provenance.items() if p.zones.startswith("inferred") and n in catalog)
    if inferred:
        lines.append(f"inferred zones ({len(inferred)}): {' '.join(inferred)}")
    if embedded:
        counts = [f"{r} ({len(load_catalog(region=r))})" for r in embedded_regions()]
        lines.append(f"embedded regions ({len(counts)}): {', '.join(counts)}")
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
    network = f"  {it.max_enis} ENIs × {it.ipv4_per_eni} IPv4 (max pods {pods if pods is not None else 'unknown'})"
    network += f", {it.branch_enis} branch ENIs" if it.branch_enis else ""
    lines.append(network + (source(provenance.network) if provenance else ""))
    zones = ", ".join(f"{z} ({'/'.join(_capacity_types(it, z))})" for z in it.zones())
    lines.append(f"  zones: {zones}" + (f" [{provenance.zones}]" if provenance else ""))
    price = price_text(it.price_on_demand, catalog.region)
    lines.append(f"  on-demand: {price}" + (source(provenance.price) if provenance and provenance.price else ""))
    lines.append("  labels: " + ", ".join(f"{k}={v}" for k, v in it.labels().items()))
    return lines


def _capacity_types(it: InstanceType, zone: str) -> list[str]:
    return sorted({o.capacity_type for o in it.offerings if o.zone == zone and o.available})


__all__ = ["show_catalog"]
