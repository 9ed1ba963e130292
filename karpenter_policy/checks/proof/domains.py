"""The values each well-known label can take in a region's catalog, and what to say of a value none carries.

Shared by the Provisioner checks (`provisioners`: `unknown-instance-type`, `unknown-label-value`) and the workload
checks (`workloadhints`), so a typo gets the same words and the same nearest value wherever it is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from karpenter_policy.catalog.embedded import embedded_regions, region_of_zone
from karpenter_policy.catalog.table import CatalogTable
from karpenter_policy.model import labels as wk
from karpenter_policy.model.spelling import nearest_name

#: Keys whose values name things of the catalog (`unknown-instance-type`), and what to call those things.
NAMED_KEYS: dict[str, str] = {
    wk.INSTANCE_TYPE: "instance type",
    wk.INSTANCE_FAMILY: "instance family",
    wk.INSTANCE_SIZE: "instance size",
    wk.ZONE: "zone",
}

#: Other well-known keys with a closed domain (`unknown-label-value`), and what to call their values.
DOMAIN_KEYS: dict[str, str] = {
    wk.CAPACITY_TYPE: "capacity type",
    wk.ARCH: "architecture",
    wk.OS: "operating system",
    wk.REGION: "region",
    wk.INSTANCE_CATEGORY: "instance category",
    wk.INSTANCE_GENERATION: "instance generation",
    wk.INSTANCE_HYPERVISOR: "hypervisor",
    wk.INSTANCE_GPU_NAME: "GPU name",
    wk.INSTANCE_GPU_MANUFACTURER: "GPU manufacturer",
    wk.INSTANCE_ACCELERATOR_NAME: "accelerator name",
    wk.INSTANCE_ACCELERATOR_MANUFACTURER: "accelerator manufacturer",
    wk.INSTANCE_ENCRYPTION_IN_TRANSIT: "value",
}

#: The operating systems Karpenter launches (a Linux node template's catalog holds linux alone: windows is no typo).
_OPERATING_SYSTEMS = ("linux", "windows")
_LISTED = 12


def known_values(key: str, table: CatalogTable) -> Sequence[str] | None:
    """Every value `key` can take in `table`'s region, sorted (None: a key without a known domain)."""
    if key == wk.ZONE:
        return table.zones
    if key == wk.CAPACITY_TYPE:
        return tuple(sorted({*table.capacity_types, *wk.CAPACITY_TYPES}))
    if key == wk.OS:
        return _OPERATING_SYSTEMS
    if key == wk.REGION:
        return tuple(sorted({*embedded_regions(), table.region}))
    if key in NAMED_KEYS or key in DOMAIN_KEYS:
        return table.domains.get(key, ())
    return None


def shown(value: str) -> str:
    """A value as a message shows it (`""` for the empty one: the hypervisor of bare-metal types)."""
    return value if value else '""'


def listing(values: Iterable[str], conjunction: str = "or") -> str:
    """`a, b or c`, each value `shown`."""
    ordered = [shown(v) for v in values]
    if len(ordered) <= 1:
        return "".join(ordered)
    return ", ".join(ordered[:-1]) + f" {conjunction} {ordered[-1]}"


def zone_elsewhere(key: str, value: str, table: CatalogTable) -> str | None:
    """The other region of the catalog whose zone `value` is (for a zone value the checked region lacks)."""
    if key != wk.ZONE:
        return None
    region = region_of_zone(value)
    return region if region is not None and region != table.region else None


def unknown_value_message(key: str, value: str, table: CatalogTable, *, hint: bool = True) -> str:
    """`karpenter.sh/capacity-type ondemand: no offering in us-east-1 has capacity type ondemand (capacity types:
    on-demand or spot), did you mean on-demand?` — for a value of `key` that `known_values` lacks; without the
    "did you mean" when not `hint` (each costs a scan of the names, ~15 ms among instance types)."""
    known = known_values(key, table) or ()
    elsewhere = zone_elsewhere(key, value, table)
    if elsewhere is not None:
        return (
            f"{key} {value}: {value} is a zone of {elsewhere}, not of {table.region} (the region checked); "
            f"for {elsewhere}'s policies, check with --region {elsewhere}."
        )
    suggestion = nearest_name(value, known) if hint else None
    if key == wk.ZONE:
        message = f"{key} {value}: not a zone of region {table.region} (zones: {', '.join(known)})"
    elif key in NAMED_KEYS:
        what = NAMED_KEYS[key]
        where = f"{table.region} (not in the {table.catalog.types_description})"
        message = f"{key} {value}: there is no {what} {value} in {where}"
    else:
        what = DOMAIN_KEYS[key]
        if key == wk.REGION:
            message = f"{key} {value}: not an AWS region of the catalog"
        elif key == wk.OS:
            message = f"{key} {value}: not an operating system Karpenter launches ({listing(known)})"
        else:
            carrier = "offering" if key == wk.CAPACITY_TYPE else "instance type"
            message = f"{key} {value}: no {carrier} in {table.region} has {what} {shown(value)}"
            if len(known) <= _LISTED:
                message += f" ({listing(known)})"
    return message + (f", did you mean {suggestion}?" if suggestion else "")
