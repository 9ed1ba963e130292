"""What findings say about an instance type or family that a region's catalog lacks but knows (one offered only in
other regions, naming the offerings' date; a previous-generation name no source describes), and about a
previous-generation type or family a requirement names (a warning, never a typo with a far-fetched suggestion). A
name the catalog does not know at all is a typo: those get the nearest name instead
(`model.spelling.nearest_name`)."""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_policy.catalog import Catalog

#: How many other regions a message lists before "and N more".
_REGIONS_SHOWN = 5
PREVIOUS_GENERATION_FLAG = "--allow-previous-generation"


@dataclass(frozen=True, slots=True)
class KnownName:
    """A known name the catalog lacks: the sentence about it, and whether it is previous-generation (a warning)."""

    text: str
    previous_generation: bool


def known_name(catalog: Catalog, value: str, family: bool = False) -> KnownName | None:
    """The sentence about instance type (or `family`) `value` when `catalog` knows it yet lacks it; None otherwise."""
    absence = catalog.absence(value, family)
    if absence is None:
        return None
    kind = "family" if family else "type"
    if absence.previous_generation and not absence.described:
        text = (
            f"{value} is a previous-generation {kind} the {catalog.types_description} know only by name (a price, "
            "no facts to check)"
        )
        return KnownName(text, True)
    subject = f"{value} is a previous-generation {kind}" if absence.previous_generation else f"{value} is"
    where = catalog.offerings_description
    if not absence.regions:
        return KnownName(f"{subject} not offered in any region of the {where}", False)
    shown = ", ".join(absence.regions[:_REGIONS_SHOWN])
    if len(absence.regions) > _REGIONS_SHOWN:
        shown += f" and {len(absence.regions) - _REGIONS_SHOWN} more"
    return KnownName(f"{subject} not offered in {catalog.region} ({where}; offered in {shown})", False)


_PREVIOUS = "previous-generation-names"


def _previous(catalog: Catalog) -> frozenset[str]:
    """The previous-generation types of `catalog` and the families all of whose types are."""
    names = {it.name for it in catalog if it.previous_generation}
    current_families = {it.family for it in catalog if not it.previous_generation}
    return frozenset(names | {it.family for it in catalog if it.previous_generation} - current_families)


def previous_generation_text(catalog: Catalog, value: str, family: bool = False) -> str | None:
    """The warning about a requirement that names previous-generation type (or `family`) `value` of `catalog`; None
    when it is not one (or the catalog acknowledges them: ``--allow-previous-generation``)."""
    if catalog.previous_generation_acknowledged or value not in catalog.derived(_PREVIOUS, lambda: _previous(catalog)):
        return None
    kind = "family" if family else "type"
    return (
        f"{value} is a previous-generation {kind}: Karpenter v0.31 launches it and AWS still sells it, but "
        f"Karpenter's current instance-type table no longer lists it (its facts are Karpenter v0.31's); "
        f"{PREVIOUS_GENERATION_FLAG} acknowledges it"
    )


__all__ = ["PREVIOUS_GENERATION_FLAG", "KnownName", "known_name", "previous_generation_text"]
