"""`karpenter-policy simulate`: compiled constraint sets and workloads in, the controller's log, the node table and
the fleet's $/h out (and, with a report path, the HTML report, written atomically)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from karpenter_policy.api.workloads import Workload, scale_key
from karpenter_policy.catalog import Catalog, CatalogError, load_catalog
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded, SourceError
from karpenter_policy.simulate.declaredgroups import DeclaredGroup
from karpenter_policy.simulate.driver import (
    Simulation,
    SimulationError,
    SimulationOptions,
    SimulationUnavailable,
    Step,
    launch_region,
)
from karpenter_policy.simulate.report import render_report
from karpenter_policy.simulate.table import node_table


@dataclass(frozen=True, slots=True)
class SimulateOutput:
    code: int
    stdout: str
    stderr: str


def _load(constraints: str) -> Loaded:
    if not Path(constraints).is_dir():
        raise SimulationError(f"{constraints}: not a directory of compiled constraint sets (compile -o DIR)")
    try:
        loaded = DirectorySource(constraints).poll()
    except SourceError as error:
        raise SimulationError(str(error)) from None
    if not isinstance(loaded, Loaded):  # a refusal names the file under `constraints` (and the field) itself
        raise SimulationError(loaded.message if loaded is not None else f"{constraints}: nothing to read")
    return loaded


def overwritten_input(report: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]]) -> str | None:
    """Why writing a report at `report` would change an input of the run — it is one of `inputs` (the same path, a
    symbolic or hard link to it) or lies inside one that is a directory (the constraint sets, a folder of
    workloads) — or None when it would not. Paths are compared resolved, so `./x`, `../d/x` and links all count."""
    target = Path(report).resolve()
    for given in inputs:
        source = Path(given).resolve()
        if target == source or (target.exists() and source.exists() and os.path.samefile(target, source)):
            return f"it is the input {given}"
        if not source.is_file() and target.is_relative_to(source):  # a directory (or one a run creates)
            return f"it is inside the input directory {given}"
    return None


def _write_atomically(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def simulate_command(
    constraints: str,
    workloads: Sequence[Workload],
    scale: Sequence[tuple[str, int]],
    report: str | None = None,
    catalog: Catalog | None = None,
    strategy: str | None = None,
    min_values_policy: str | None = None,
    volume_objects: Sequence[Mapping[str, Any]] = (),
    static_capacity: bool = False,
    placement_groups: Mapping[str, DeclaredGroup] | None = None,
) -> SimulateOutput:
    """Run the scenario: the workloads as their manifests say (with the claims, PersistentVolumes and
    StorageClasses among its files, `volume_objects`), then each `--scale` in order (one step each);
    `static_capacity`: Karpenter's StaticCapacity feature gate (`--feature-gates StaticCapacity=true`);
    `placement_groups`: the account's placement groups by name (`--placement-group`, `declaredgroups`)."""
    try:
        loaded = _load(constraints)
        region = launch_region(loaded)
        if catalog is None:
            try:
                catalog = load_catalog(region=region)
            except CatalogError as error:
                raise SimulationError(f"no catalog for {region}: {error}") from None
        if not any(not w.is_daemon_set for w in workloads):
            raise SimulationError("no workload to simulate (Deployments, StatefulSets, Jobs, Pods …)")
        known = {scale_key(w.ref) for w in workloads}
        for key, _ in scale:
            if scale_key(key) not in known:
                raise SimulationError(f"--scale {key}: no such workload (found: {', '.join(sorted(known))})")
        steps = [Step("create the workloads")]
        steps += [Step(f"scale {key} to {count}", {scale_key(key): count}) for key, count in scale]
        options = SimulationOptions()
        if strategy is not None:
            options.strategy = strategy
        if min_values_policy is not None:
            options.min_values_policy = min_values_policy
        options.static_capacity = static_capacity
        options.placement_groups = dict(placement_groups or {})
        with Simulation(loaded, workloads, catalog, options, volume_objects) as simulation:
            result = simulation.run(steps)
    except (SimulationError, SimulationUnavailable) as error:
        return SimulateOutput(2, "", f"karpenter-policy simulate: {error}\n")
    out = result.log + "\n" + node_table(result)
    if report is not None:
        title = f"karpenter-policy simulate: {', '.join(w.ref for w in workloads if not w.is_daemon_set)}"
        try:
            _write_atomically(Path(report), render_report(result, title))
        except OSError as error:
            return SimulateOutput(2, out, f"karpenter-policy simulate: cannot write {report}: {error.strerror}\n")
        out += f"report: {report}\n"
    return SimulateOutput(1 if result.pending or result.errors else 0, out, "")


__all__ = ["SimulateOutput", "overwritten_input", "simulate_command"]
