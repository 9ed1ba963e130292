"""The options the policy commands share — check, test, diff and compile — declared once in :class:`PolicyOptions`
(each flag's default, help text and spelling; a test holds every command's click option of the same name to it),
and loaded in one place: `--values` (template values), `--catalog` / `--region` (the instance-type catalog) and
`--spot-prices` (DescribeSpotPriceHistory output). A problem with any of them is an :class:`OptionError` whose
message names the file and the reason — the command exits 2 with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from karpenter_policy.api.v1.featuregates import POLICY_FEATURE_GATES_HELP, read_policy_feature_gates
from karpenter_policy.catalog import DEFAULT_REGION, Catalog, CatalogError, load_catalog
from karpenter_policy.catalog.embedded import embedded_regions
from karpenter_policy.catalog.prices import latest_spot_prices, with_spot_prices
from karpenter_policy.checks.selection import EVERYTHING, Selection
from karpenter_policy.model.minvalues import POLICIES, STRICT
from karpenter_policy.model.spelling import nearest_name
from karpenter_policy.optionspec import option

REGION_HELP = "Region of the embedded catalog (default us-east-1; `catalog show` lists them); must match --catalog's."


@dataclass(frozen=True, slots=True)
class BudgetView:
    """How `check` looks at Karpenter v1 disruption budgets (docs/budgets.md; `--nodes`, `--timezone`,
    `--budget-week`, read by the CLI): the node count of a NodePool without `limits.nodes` (None: assumed), the
    time zone the timeline is shown in (the checks and Karpenter are UTC), and a day of the week to show and check
    from (its Monday 00:00 in `timezone`; None: the current week)."""

    nodes: int | None = None
    timezone: str = "UTC"
    week_of: date | None = None


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """What `check` and `test` run with besides PATHS and the report's format and verbosity (diff and compile take
    some of the same flags). The flags' help is `check`'s; `scale` (`--scale KIND/NAME=N`, read by the CLI),
    `selection` (`--exclude`, `--disable`) and `budgets` (`--nodes`, `--timezone`, `--budget-week`) are what the
    CLI made of their flags."""

    catalog_file: str | None = option(None, "--catalog", path="file", help="Instance-type catalog file.")
    region: str | None = option(None, "--region", help=REGION_HELP)
    #: The solver's time limit (`proof.solver.DEFAULT_TIMEOUT_MS`; a test holds the two equal).
    timeout_ms: int = option(
        5000,
        "--timeout-ms",
        int_range=(1, None),
        show_default=True,
        help="Time limit of each solver call; a provisioner the solver cannot decide is a warning.",
    )
    values_file: str | None = option(None, "--values", path="file", help="Template values (YAML mapping).")
    workload_paths: tuple[str, ...] = option(
        (),
        "--workloads",
        multiple=True,
        path="any",
        help="Workload files or directories (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs, "
        "Pods, pod template files) to place on the provisioners (repeatable).",
    )
    scale: Mapping[str, int] = field(default_factory=dict)
    spot_prices_file: str | None = option(
        None,
        "--spot-prices",
        path="file",
        help="Price spot capacity from this `aws ec2 describe-spot-price-history` JSON (else: at on-demand prices).",
    )
    selection: Selection = EVERYTHING
    budgets: BudgetView = BudgetView()
    min_values_policy: str = option(
        STRICT,
        "--min-values-policy",
        choices=POLICIES,
        show_default=True,
        help="How the scheduler keeps a v1 NodePool's minValues, as Karpenter's operator flag: Strict (no node "
        "whose instance types miss it) or BestEffort (lowered to what is left; the node says so).",
    )
    feature_gates: str = option(
        "", "--feature-gates", metavar="NAME=BOOL,...", read=read_policy_feature_gates, help=POLICY_FEATURE_GATES_HELP
    )
    previous_generation: bool = option(
        False,
        "--allow-previous-generation",
        is_flag=True,
        help="Acknowledge the previous-generation instance types (p2, p3, g3, ...: Karpenter v0.31 launches them): a "
        "requirement that names one gets no previous-generation warning.",
    )


class OptionError(Exception):
    """An option's file cannot be used (the command cannot run: exit 2)."""


def values_option(values_file: str | None) -> dict[str, Any] | None:
    """The `--values` file as a mapping (None without one)."""
    if values_file is None:
        return None
    from karpenter_policy.checks.source.templating import ValuesError, load_values  # jinja2 only when asked

    try:
        return load_values(values_file)
    except ValuesError as error:
        raise OptionError(str(error)) from None


def catalog_option(catalog_file: str | None, region: str | None, previous_generation: bool = False) -> Catalog:
    """The `--catalog` file, or the embedded catalog of `--region` (default us-east-1); both given, they must
    agree; a region the embedded catalog lacks is refused with the nearest one it has. `previous_generation`
    (`--allow-previous-generation`) acknowledges the previous-generation types (no warning naming them)."""
    try:
        if catalog_file is None:
            region = region or DEFAULT_REGION
            _check_embedded_region(region)
            return load_catalog(region=region, previous_generation=previous_generation)
        catalog = load_catalog(Path(catalog_file), previous_generation=previous_generation)
    except CatalogError as error:
        raise OptionError(f"cannot load the catalog: {error}") from None
    if region is not None and region != catalog.region:
        raise OptionError(f"--region {region} does not match the region of {catalog_file} ({catalog.region})")
    return catalog


def _check_embedded_region(region: str) -> None:
    """A `--region` the embedded catalog lacks is a usage error naming the nearest region it has (`us-west2`)."""
    regions = embedded_regions()
    if region in regions:
        return
    guess = nearest_name(region, regions)
    hint = f"; did you mean {guess}?" if guess else ""
    raise OptionError(
        f"--region {region}: no embedded catalog for region {region!r}{hint} (embedded: {', '.join(regions)}; for "
        "another region, build a catalog with `catalog refresh --region R -o FILE` and pass --catalog FILE)"
    )


@dataclass(frozen=True, slots=True)
class Pricing:
    """The catalog to price with, and how its prices were known (for reports)."""

    catalog: Catalog
    description: str
    estimated: bool


def spot_prices_option(catalog: Catalog, spot_prices_file: str | None) -> Pricing:
    """The catalog with the spot offerings priced from `--spot-prices` (the JSON `aws ec2
    describe-spot-price-history` prints; the latest price per type and zone), else as it is (spot at the on-demand
    price: an estimate)."""
    if spot_prices_file is None:
        return Pricing(catalog, "", True)
    try:
        data = json.loads(Path(spot_prices_file).read_bytes())
    except OSError as error:
        raise OptionError(f"{spot_prices_file}: cannot read: {error.strerror or error}") from None
    except ValueError as error:
        raise OptionError(f"{spot_prices_file}: not JSON: {error}") from None
    history = data.get("SpotPriceHistory") if isinstance(data, Mapping) else data
    if not isinstance(history, list):
        raise OptionError(f"{spot_prices_file}: expected DescribeSpotPriceHistory output (a SpotPriceHistory list)")
    try:
        prices = latest_spot_prices(history)
    except (KeyError, TypeError, ValueError) as error:
        raise OptionError(f"{spot_prices_file}: malformed spot price entry: {error}") from None
    priced, missing = with_spot_prices(catalog, prices)
    description = f"spot prices from {spot_prices_file}"
    if missing:
        description += f" ({missing} spot offerings without a price: at the on-demand price)"
    return Pricing(priced, description, missing > 0)
