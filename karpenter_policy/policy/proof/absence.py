"""What findings say about an instance type or family that a region's catalog lacks but knows: a previous-generation
one (a warning naming the flag that admits it, never a typo with a far-fetched suggestion), or one offered only in
other regions — naming the catalog's date. A name the catalog does not know at all is a typo: those get the
nearest name instead (`model.spelling.nearest_name`)."""

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
    where = catalog.description
    if absence.previous_generation and not absence.described:
        text = f"{value} is a previous-generation {kind} the {where} knows only by name (a price, no facts to check)"
        return KnownName(text, True)
    if absence.previous_generation and not catalog.previous_generation_admitted:
        text = (
            f"{value} is a previous-generation {kind} not launchable in this catalog ({where}); "
            f"{PREVIOUS_GENERATION_FLAG} admits it"
        )
        return KnownName(text, True)
    subject = f"{value} is a previous-generation {kind}" if absence.previous_generation else f"{value} is"
    if not absence.regions:
        return KnownName(f"{subject} not offered in any region of the {where}", False)
    shown = ", ".join(absence.regions[:_REGIONS_SHOWN])
    if len(absence.regions) > _REGIONS_SHOWN:
        shown += f" and {len(absence.regions) - _REGIONS_SHOWN} more"
    return KnownName(f"{subject} not offered in {catalog.region} ({where}; offered in {shown})", False)


__all__ = ["PREVIOUS_GENERATION_FLAG", "KnownName", "known_name"]
