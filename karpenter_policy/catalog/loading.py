"""Loading a catalog: a catalog file, or the embedded catalog of a region (cached per file, region and flag).

Above the catalog model (:mod:`karpenter_policy.catalog.catalog`) and the embedded data
(:mod:`karpenter_policy.catalog.embedded`, read lazily per region, so the tool works offline); what the package
exports as ``load_catalog``.
"""

from __future__ import annotations

import functools
from importlib.resources.abc import Traversable
from pathlib import Path

from karpenter_policy.catalog.catalog import DEFAULT_REGION, Catalog, CatalogError, catalog_from_json
from karpenter_policy.catalog.embedded import load_region


def _read_bytes(source: Path | Traversable, label: str) -> bytes:
    try:
        if not source.is_file():
            raise CatalogError(label, "no such file" if not source.is_dir() else "is a directory, not a file")
        return source.read_bytes()
    except OSError as exc:
        raise CatalogError(label, exc.strerror or str(exc)) from None


@functools.lru_cache(maxsize=16)
def _load_cached(path: str | None, region: str, previous_generation: bool) -> Catalog:
    if previous_generation:  # the same types: share them (and what is derived from them)
        return _load_cached(path, region, False).acknowledging_previous_generation()
    if path is None:
        return load_region(region)  # the embedded data is read on first use
    return catalog_from_json(_read_bytes(Path(path), path), path)


def load_catalog(
    path: Path | None = None, region: str = DEFAULT_REGION, *, previous_generation: bool = False
) -> Catalog:
    """Load a catalog file, or the embedded one for ``region`` without a path. Cached per (path, region, flag).

    With an explicit path the file's own region is authoritative. Previous-generation types are in either way;
    ``previous_generation`` (``--allow-previous-generation``) acknowledges them: a requirement naming one gets no
    warning. Raises :class:`CatalogError`.
    """
    return _load_cached(None if path is None else str(path), region, previous_generation)


def clear_catalog_cache() -> None:
    _load_cached.cache_clear()


__all__ = ["clear_catalog_cache", "load_catalog"]
