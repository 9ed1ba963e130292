"""The flags of the policy commands — validate, check, test, compile, pin, fmt, diff, catalog and rules — one frozen
dataclass per command (`optionspec`: each field's default, help text and spelling, in the order of --help), from
which `cli_options.with_options` makes the click options and arguments and which the command receives. A flag several
commands take is declared once: `PolicyOptions`' (the options check and test run with) through `optionspec.like`,
the report's flags (`--strict`, `--exclude`, `--disable`, `--quiet`) by the functions here. What the CLI makes of
some flags is not here: `--exclude` and `--disable` become a `Selection`, `--scale` a mapping, and check's and test's
flags a `PolicyOptions` (:func:`policy_options`).

Light on purpose (no solver, no YAML reader): the CLI imports it to build its commands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from karpenter_policy.catalog import DEFAULT_REGION
from karpenter_policy.checks.jobs import AUTO_THRESHOLD, read_jobs, show_jobs
from karpenter_policy.checks.options import BudgetView, PolicyOptions
from karpenter_policy.checks.reporters import FORMATS
from karpenter_policy.checks.selection import Selection
from karpenter_policy.optionspec import argument, flags, like, option, required

#: The report formats of check and test (validate's and a pull-request comment).
CHECK_FORMATS = (*FORMATS, "markdown")
API_VERSIONS = ("v1alpha5", "v1")
#: Where compile puts the constraint sets the controller reads (`--configmap-namespace`, `--configmap-name`).
DEFAULT_CONFIGMAP_NAMESPACE = "karpenter-policy"
DEFAULT_CONFIGMAP_NAME = "karpenter-policy-constraints"
#: What `rules` prints.
RULE_OUTPUTS = ("text", "json", "markdown")


def paths_argument(**flag: Any) -> Any:
    """PATHS: files or directories, any number (the command's default when none: policies/)."""
    return argument((), "paths", nargs=-1, path="any", **flag)


def fail_on_warn_option() -> Any:
    """`--strict` (or its older name `--fail-on-warn`)."""
    return option(
        False, "--strict", "--fail-on-warn", is_flag=True, help="Exit 1 on warnings too (also --fail-on-warn)."
    )


def exclude_option(
    help: str = "Leave out files and directories matching GLOB (repeatable): a name anywhere (values*.yaml, charts) "
    "or a path from the current directory (envs/*/values.yaml, **/kustomization.yaml).",
) -> Any:
    """`--exclude GLOB`, repeatable."""
    return option((), "--exclude", multiple=True, metavar="GLOB", help=help)


def disable_option() -> Any:
    """`--disable RULE`, repeatable or comma-separated (the field is `disabled`)."""
    return option(
        (),
        "--disable",
        multiple=True,
        metavar="RULE",
        help="Do not report this rule's findings (repeatable, or comma-separated). One finding: the comment "
        "'# karpenter-policy: disable=RULE' on its line or the line above.",
    )


def quiet_option() -> Any:
    """`-q/--quiet`."""
    return option(
        False, "-q", "--quiet", is_flag=True, help="Print the findings and nothing else (text and github output)."
    )


def scale_option(help: str) -> Any:
    """`--scale KIND/NAME=N`, repeatable, as given (the CLI reads it into a mapping)."""
    return option((), "--scale", multiple=True, metavar="KIND/NAME=N", help=help)


def time_zone(name: str) -> str:
    """`--timezone NAME`: an IANA time zone (tzdata's), else ValueError."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone (an IANA name: UTC, Europe/Paris)") from None
    return name


def day(text: str) -> date:
    """`--budget-week YYYY-MM-DD`: a day, else ValueError."""
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise ValueError(f"{text!r} is not a day (YYYY-MM-DD)") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateFlags:
    """`karpenter-policy validate`."""

    paths: tuple[str, ...] = paths_argument()
    output: str = option(
        "text",
        "--output",
        choices=FORMATS,
        show_default=True,
        help="Report format: text, json, sarif (code scanning), github (workflow annotations), junit.",
    )
    fail_on_warn: bool = fail_on_warn_option()
    values_file: str | None = like(PolicyOptions, "values_file")
    exclude: tuple[str, ...] = exclude_option()
    disabled: tuple[str, ...] = disable_option()
    quiet: bool = quiet_option()
    jobs: int = option(
        0,
        "-j",
        "--jobs",
        metavar="N|auto",
        read=read_jobs,
        show=show_jobs,
        show_default=True,
        help=f"Check the files in N processes; auto: one per usable CPU when there are more than {AUTO_THRESHOLD} "
        "files, else one. The report is the same whatever N.",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckFlags:
    """`karpenter-policy check`: PolicyOptions' flags (their help is check's) and the report's."""

    paths: tuple[str, ...] = paths_argument()
    output: str = option(
        "text",
        "--output",
        choices=CHECK_FORMATS,
        show_default=True,
        help="Report format: text, json, sarif, github, junit, or markdown (a pull-request comment).",
    )
    fail_on_warn: bool = fail_on_warn_option()
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(PolicyOptions, "region")
    timeout_ms: int = like(PolicyOptions, "timeout_ms")
    values_file: str | None = like(PolicyOptions, "values_file")
    workload_paths: tuple[str, ...] = like(PolicyOptions, "workload_paths")
    scale: tuple[str, ...] = scale_option(
        "Replicas of a workload for the capacity plan (e.g. deployment/inflate=10; repeatable)."
    )
    spot_prices_file: str | None = like(PolicyOptions, "spot_prices_file")
    budget_nodes: int | None = option(
        None,
        "--nodes",
        int_range=(0, None),
        help="Disruption budgets: node count of a v1 NodePool without spec.replicas or spec.limits.nodes "
        "(default: 10).",
    )
    budget_timezone: str = option(
        "UTC",
        "--timezone",
        show_default=True,
        read=time_zone,
        help="Disruption budgets: the time zone of the markdown timeline (IANA name; Karpenter reads schedules in "
        "UTC).",
    )
    budget_week: date | None = option(
        None,
        "--budget-week",
        metavar="YYYY-MM-DD",
        read=day,
        help="Disruption budgets: check and show the week holding this day (default: this week).",
    )
    exclude: tuple[str, ...] = exclude_option()
    disabled: tuple[str, ...] = disable_option()
    quiet: bool = quiet_option()
    previous_generation: bool = like(PolicyOptions, "previous_generation")
    min_values_policy: str = like(PolicyOptions, "min_values_policy")
    feature_gates: str = like(PolicyOptions, "feature_gates")


@dataclass(frozen=True, slots=True, kw_only=True)
class TestFlags:
    """`karpenter-policy test`: check's flags, --workloads required."""

    __test__ = False  # not a test class, for pytest

    paths: tuple[str, ...] = paths_argument()
    workload_paths: tuple[str, ...] = like(
        PolicyOptions,
        "workload_paths",
        required=True,
        help="Workload files or directories the tests name workloads of (repeatable), as check --workloads.",
    )
    output: str = option(
        "text",
        "--output",
        choices=CHECK_FORMATS,
        show_default=True,
        help="Report format: text, json, sarif, github, junit (a test case per PlacementTest file), or markdown.",
    )
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(PolicyOptions, "region")
    timeout_ms: int = like(PolicyOptions, "timeout_ms", help="Solver time limit.")
    values_file: str | None = like(PolicyOptions, "values_file")
    scale: tuple[str, ...] = scale_option("Replicas of a workload, as check's.")
    spot_prices_file: str | None = like(PolicyOptions, "spot_prices_file", help="As check's --spot-prices.")
    exclude: tuple[str, ...] = exclude_option()
    disabled: tuple[str, ...] = disable_option()
    quiet: bool = quiet_option()
    previous_generation: bool = like(PolicyOptions, "previous_generation")
    min_values_policy: str = like(PolicyOptions, "min_values_policy")
    feature_gates: str = like(PolicyOptions, "feature_gates")


def policy_options(given: CheckFlags | TestFlags, scale: Mapping[str, int], selection: Selection) -> PolicyOptions:
    """What check and test run with: their PolicyOptions flags, and what the CLI made of `--scale` and of
    `--exclude` / `--disable`; check's `--nodes`, `--timezone`, `--budget-week` as its BudgetView."""
    shared = {field.name: getattr(given, field.name) for field, _ in flags(PolicyOptions)}
    budgets = (
        BudgetView(given.budget_nodes, given.budget_timezone, given.budget_week)
        if isinstance(given, CheckFlags)
        else BudgetView()
    )
    return PolicyOptions(**shared, scale=scale, selection=selection, budgets=budgets)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrateFlags:
    """`karpenter-policy migrate` (docs/migrate.md; `commands.migrate.command.MigrateOptions` is what it runs with)."""

    paths: tuple[str, ...] = paths_argument()
    to: str = option(
        "v1", "--to", choices=("v1", "v1beta1"), show_default=True,
        help="The Karpenter API to migrate to (v1beta1: NodePool and EC2NodeClass for Karpenter v0.32–v0.37).",
    )
    out: str | None = option(None, "-o", "--out", metavar="DIR", help="Write the migrated tree into DIR (same layout).")
    write: bool = option(False, "--write", is_flag=True, help="Rewrite the files in place (default: print a diff).")
    budget: str = option(
        "1", "--budget", show_default=True, metavar="NODES",
        help='Each NodePool\'s disruption budget, nodes: a count or a percentage ("1": v0.31\'s one node at a time).',
    )
    default_instance_profile: str | None = option(
        None, "--default-instance-profile", metavar="NAME", help="Instance profile for node templates without one."
    )
    node_role: str | None = option(
        None, "--node-role", metavar="ROLE", help="IAM role for node templates without an instance profile."
    )
    workloads: tuple[str, ...] = option(
        (), "--workloads", multiple=True, path="any", metavar="APPS",
        help="Workload files or directories: karpenter.sh/provisioner-name selectors and node affinities of migrated "
        "Provisioners become karpenter.sh/nodepool (repeatable; with --write or the diff).",
    )
    values_file: str | None = like(PolicyOptions, "values_file")
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(PolicyOptions, "region")
    output: str = option(
        "text",
        "--output",
        choices=FORMATS,
        show_default=True,
        help="Report format: text, json, sarif (code scanning), github (workflow annotations), junit.",
    )
    fail_on_warn: bool = fail_on_warn_option()
    exclude: tuple[str, ...] = exclude_option()
    disabled: tuple[str, ...] = disable_option()
    quiet: bool = quiet_option()


@dataclass(frozen=True, slots=True, kw_only=True)
class CompileFlags:
    """`karpenter-policy compile` (`commands.compile.compiler.compile_command` takes it)."""

    paths: tuple[str, ...] = paths_argument()
    out: str = required("-o", "--out", metavar="DIR|-", help="Output directory, or - for a YAML stream.")
    api: str = option(
        API_VERSIONS[0],
        "--api",
        choices=API_VERSIONS,
        show_default=True,
        help="Manifests as v1alpha5 Provisioner/AWSNodeTemplate or v1 NodePool/EC2NodeClass.",
    )
    values_file: str | None = like(PolicyOptions, "values_file")
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(PolicyOptions, "region")
    previous_generation: bool = like(PolicyOptions, "previous_generation")
    configmap_namespace: str = option(DEFAULT_CONFIGMAP_NAMESPACE, "--configmap-namespace", show_default=True)
    configmap_name: str = option(DEFAULT_CONFIGMAP_NAME, "--configmap-name", show_default=True)
    flux_escape: bool = option(
        False,
        "--flux-escape",
        is_flag=True,
        help="Write ${...} as $${...} for Flux post-build substitution instead of annotating the object "
        "kustomize.toolkit.fluxcd.io/substitute: disabled (the default).",
    )
    default_instance_profile: str | None = option(
        None,
        "--default-instance-profile",
        metavar="NAME",
        help="--api v1: instance profile for node templates without one (v1alpha5's aws.defaultInstanceProfile).",
    )
    node_role: str | None = option(
        None, "--node-role", metavar="ROLE", help="--api v1: IAM role for node templates without an instance profile."
    )
    report_format: str = option(
        "text",
        "--output",
        choices=FORMATS,
        show_default=True,
        help="Report format (stdout with -o DIR, stderr with -o -).",
    )
    policy_version: str | None = option(
        None,
        "--policy-version",
        metavar="VERSION",
        help="Version of the constraint sets whose Provisioner has no karpenter-policy/version annotation (default: "
        "`git describe --always` of the repository holding PATHS, -dirty when the policies read are not HEAD's, else "
        "'unversioned'); git is not run then.",
    )
    fail_on_warn: bool = fail_on_warn_option()
    exclude: tuple[str, ...] = exclude_option()
    disabled: tuple[str, ...] = disable_option()
    quiet: bool = quiet_option()


@dataclass(frozen=True, slots=True, kw_only=True)
class PinFlags:
    """`karpenter-policy pin`."""

    paths: tuple[str, ...] = paths_argument(required=True)
    policy_paths: tuple[str, ...] = option(
        (),
        "--policies",
        multiple=True,
        path="any",
        help="Policy files or directories with the PinningPolicy rules and the Provisioners (repeatable; default: "
        "policies/).",
    )
    write: bool = option(
        False, "--write", is_flag=True, help="Rewrite the manifests in place (default: print a diff, exit 1 if any)."
    )
    output: str = option("text", "--output", choices=("text", "json"), show_default=True)
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(
        PolicyOptions, "region", help="Region of the embedded catalog (default us-east-1); must match --catalog's."
    )
    values_file: str | None = like(PolicyOptions, "values_file")
    no_prove: bool = option(
        False, "--no-prove", is_flag=True, help="Do not prove the pinned workloads schedulable (no solver)."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class FmtFlags:
    """`karpenter-policy fmt`."""

    paths: tuple[str, ...] = paths_argument()
    write: bool = option(False, "--write", is_flag=True, help="Rewrite the files in place (default: print a diff).")
    check: bool = option(
        False, "--check", is_flag=True, help="Exit 1 when a file is not formatted (or, with --write, was not)."
    )
    exclude: tuple[str, ...] = exclude_option(
        "Leave out files and directories matching GLOB (repeatable), as in validate."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffFlags:
    """`karpenter-policy diff` (`commands.diff.diff_command` takes it)."""

    base: str = argument(name="base")
    head: str = argument(name="head")
    paths: tuple[str, ...] = paths_argument()
    output: str = option(
        "text",
        "--output",
        choices=("text", "json", "markdown"),
        show_default=True,
        help="text (a table per provisioner), json, or markdown (a pull-request comment).",
    )
    workload_paths: tuple[str, ...] = like(
        PolicyOptions,
        "workload_paths",
        help="Workload files or directories to place on both sides (repeatable; read as of each revision).",
    )
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(PolicyOptions, "region")
    timeout_ms: int = like(PolicyOptions, "timeout_ms", help="Per solver call.")
    values_file: str | None = like(PolicyOptions, "values_file")
    exit_code_on_diff: bool = option(
        False, "--exit-code", is_flag=True, help="Exit 1 when anything differs (as git diff)."
    )
    equivalent: bool = option(
        False,
        "--equivalent",
        is_flag=True,
        help="Prove that no workload's landing set (instance type x zone x capacity type, node labels and taints) "
        "changes: exit 0 with a summary, or 1 with a counter-example per workload. Needs --workloads.",
    )
    scale: tuple[str, ...] = scale_option(
        "Replicas of a workload for the cost comparison (e.g. deployment/inflate=10; repeatable)."
    )
    previous_generation: bool = like(PolicyOptions, "previous_generation")
    min_values_policy: str = like(PolicyOptions, "min_values_policy")


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogRefreshFlags:
    """`karpenter-policy catalog refresh`."""

    region: str = option(DEFAULT_REGION, "--region", show_default=True, help="EC2 region to describe.")
    endpoint_url: str | None = option(
        None, "--endpoint-url", metavar="URL", help="AWS endpoint (default: AWS's; e.g. a local moto server)."
    )
    prices_file: str | None = option(
        None,
        "--prices",
        path="file",
        help="On-demand price table, JSON: {\"prices\": {TYPE: USD per hour}} (default: the Price List API's prices, "
        "GetProducts).",
    )
    spot_prices: bool = option(
        True,
        "--spot-prices/--no-spot-prices",
        show_default=True,
        help="Price spot offerings from DescribeSpotPriceHistory (else at the on-demand price).",
    )
    out: str = required("-o", "--out", path="file", help="Catalog file to write.")
    timeout: float = option(
        300.0,
        "--timeout",
        float_range=(0, 86400),
        min_open=True,
        show_default=True,
        help="Seconds the whole refresh may take, every answer included; nothing is written when it runs out.",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogShowFlags:
    """`karpenter-policy catalog show`."""

    names: tuple[str, ...] = argument((), "names", nargs=-1, metavar="[TYPE]...")
    catalog_file: str | None = like(PolicyOptions, "catalog_file")
    region: str | None = like(PolicyOptions, "region")
    previous_generation: bool = like(PolicyOptions, "previous_generation")


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogBuildFlags:
    """`karpenter-policy catalog build`."""

    sources_dir: str = required(
        "--sources",
        path="dir",
        exists=True,
        help="Directory of the reference tables (Karpenter's instance types and VPC limits, price tables, moto.json): "
        "the repository's catalog-sources/.",
    )
    moto_dir: str | None = option(
        None,
        "--moto",
        path="dir",
        exists=True,
        help="moto's EC2 resources directory (DescribeInstanceTypes and its offerings; default: the installed moto's).",
    )
    out_dir: str | None = option(
        None,
        "-o",
        "--out",
        path="dir",
        exists=True,
        help="Where to write the embedded catalog (default: this package's karpenter_policy/catalog/data).",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RulesFlags:
    """`karpenter-policy rules`."""

    rule_id: str | None = argument(None, "rule_id", metavar="[RULE]")
    output: str = option(
        "text",
        "--output",
        choices=RULE_OUTPUTS,
        show_default=True,
        help="text (a line per rule, or one rule in full), json, or markdown (the table of docs/rules/).",
    )


__all__ = [
    "API_VERSIONS", "CHECK_FORMATS", "DEFAULT_CONFIGMAP_NAME", "DEFAULT_CONFIGMAP_NAMESPACE", "RULE_OUTPUTS",
    "CatalogBuildFlags", "CatalogRefreshFlags", "CatalogShowFlags", "CheckFlags",
    "CompileFlags", "DiffFlags", "FmtFlags", "PinFlags", "RulesFlags", "TestFlags", "ValidateFlags", "policy_options",
]
