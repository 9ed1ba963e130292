"""`karpenter-policy` command line: parses flags, calls the commands, maps results to exit codes.

Exit codes (docs/cli.md, "Exit codes"; each command's --help, from cli_help.py): 0 no errors; 1 findings of severity
error (warnings too with --strict, or its older name --fail-on-warn); 2 usage error or the tool could not run (a
missing or unreadable path, a bad flag). When the reader of the output goes away (`| head`, `| true`), the process
ends quietly as Unix tools do: killed by SIGPIPE (shell status 141). The group's --help lists each command's whole
first paragraph.

Reports and logs are written as UTF-8 whatever the locale, with the undecodable bytes of file names escaped
(`reporters.displayable`), so that JSON, SARIF and JUnit output stay valid.
"""

from __future__ import annotations

import contextlib
import datetime
import inspect
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click

from karpenter_policy import __version__
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.reporters import FORMATS, displayable, render
from karpenter_policy.checks.selection import Selection
from karpenter_policy.cli_help import EPILOGS, version_line
from karpenter_policy.cli_options import with_options
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.rules import OUTPUTS as RULE_OUTPUTS
from karpenter_policy.commands.rules import rules_command
from karpenter_policy.reconcile.flags import ReconcileOptions
from karpenter_policy.simulate.flags import SimulateOptions
from karpenter_policy.webhook.flags import WebhookFlags

if TYPE_CHECKING:
    from karpenter_policy.catalog import Catalog

DEFAULT_PATHS = ("policies/",)

_output_option = click.option(
    "--output",
    "output",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Report format: text, json, sarif (code scanning), github (workflow annotations), junit.",
)
_fail_on_warn_option = click.option(
    "--strict", "--fail-on-warn", "fail_on_warn", is_flag=True, help="Exit 1 on warnings too (also --fail-on-warn)."
)
_previous_generation_option = click.option(
    "--allow-previous-generation",
    "previous_generation",
    is_flag=True,
    help="Acknowledge the previous-generation instance types (p2, p3, g3, ...: Karpenter v0.31 launches them): a "
    "requirement that names one gets no previous-generation warning.",
)
_REGION_HELP = "Region of the embedded catalog (default us-east-1; `catalog show` lists them); must match --catalog's."


def _selection_options(command: Callable[..., None]) -> Callable[..., None]:
    """--exclude, --disable and --quiet: the flags of validate, check and compile."""
    command = click.option(
        "-q", "--quiet", is_flag=True, help="Print the findings and nothing else (text and github output)."
    )(command)
    command = click.option(
        "--disable",
        "disabled",
        multiple=True,
        metavar="RULE",
        help="Do not report this rule's findings (repeatable, or comma-separated). One finding: the comment "
        "'# karpenter-policy: disable=RULE' on its line or the line above.",
    )(command)
    return click.option(
        "--exclude",
        "exclude",
        multiple=True,
        metavar="GLOB",
        help="Leave out files and directories matching GLOB (repeatable): a name anywhere (values*.yaml, charts) "
        "or a path from the current directory (envs/*/values.yaml, **/kustomization.yaml).",
    )(command)


def _selection(exclude: Sequence[str], disabled: Sequence[str]) -> Selection:
    """--exclude and --disable; a rule the catalog (`api/rules`) does not declare, or declares not silenceable, is a
    usage error (exit 2)."""
    from karpenter_policy.api.rules import rule_named, unknown_rule_message, unsilenceable

    rules = {rule.strip() for value in disabled for rule in value.split(",") if rule.strip()}
    for rule in sorted(rules):
        declared = rule_named(rule)
        if declared is None:
            raise click.BadParameter(unknown_rule_message(rule), param_hint="--disable")
        if not declared.silenceable:
            raise click.BadParameter(
                f"{rule} cannot be disabled: the object it is about can be neither checked further nor applied "
                f"(rules that cannot be disabled: {', '.join(sorted(unsilenceable()))})",
                param_hint="--disable",
            )
    return Selection(tuple(exclude), frozenset(rules))


def _read_paths(command: str, paths: Sequence[str], selection: Selection) -> None:
    """Say which named PATHS --exclude leaves out; exit 2 when no policy file is left to read (a run that reads
    nothing must not pass)."""
    from karpenter_policy.checks.source.loader import exclusion_notes

    notes, error = exclusion_notes(paths, selection.exclude, command)
    for line in [*notes, *([error] if error else [])]:
        click.echo(f"karpenter-policy {command}: {line}", err=True)
    if error:
        sys.exit(2)


_HELP_WIDTH = 120


def _summary(command: click.Command) -> str:
    """A command's whole first paragraph, for the group's list (click cuts it at the terminal's width with '...')."""
    text = inspect.cleandoc(command.help or "").split("\n\n", 1)[0]
    return " ".join(text.split())


class _Group(click.Group):
    """Usage errors exit 2 (click's default), other unexpected failures print one line and exit 2. Its --help lists
    each command with the whole first paragraph of its description."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, _summary(command))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except BrokenPipeError:
            _end_on_closed_pipe()
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as error:  # the last line of defence: a bug must not become a traceback
            click.echo(f"karpenter-policy: internal error: {type(error).__name__}: {error}", err=True)
            sys.exit(2)


def _end_on_closed_pipe() -> NoReturn:
    """The reader of stdout (or stderr) went away: end without a word, killed by SIGPIPE as Unix tools are."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            os.dup2(devnull, stream.fileno())  # so that the interpreter's last flush does not fail again
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + 13)  # no SIGPIPE (Windows): the status a shell shows for it


def _write(stream: TextIO | None, text: str) -> None:
    """`text` as UTF-8, undecodable file-name bytes escaped; raises BrokenPipeError when the reader is gone."""
    if not text or stream is None:
        return
    buffer = getattr(stream, "buffer", None)
    stream.flush()
    if buffer is None:
        stream.write(displayable(text))
    else:
        buffer.write(displayable(text).encode("utf-8"))
        buffer.flush()


def _finish(result: CommandOutput) -> NoReturn:
    """Print a command's report (stdout) and logs (stderr), and exit with its code."""
    try:
        _write(sys.stderr, result.stderr)
        _write(sys.stdout, result.stdout)
    except BrokenPipeError:
        _end_on_closed_pipe()
    sys.exit(result.exit_code)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": _HELP_WIDTH},
    epilog=EPILOGS["main"],
)
@click.version_option(__version__, prog_name="karpenter-policy", message=version_line(__version__))
def main() -> None:
    """Validate, prove and compile Karpenter Provisioner policies kept in Git."""


@main.command(epilog=EPILOGS["validate"])
@click.argument("paths", nargs=-1, type=click.Path())
@_output_option
@_fail_on_warn_option
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@_selection_options
def validate(
    paths: tuple[str, ...],
    output: str,
    fail_on_warn: bool,
    values_file: str | None,
    exclude: tuple[str, ...],
    disabled: tuple[str, ...],
    quiet: bool,
) -> None:
    """Parse, schema-check and apply Karpenter's defaulting and validation rules (no solver).

    PATHS are files or directories (searched recursively for *.yaml, *.yml and *.yaml.j2), or - for standard input
    (helm template ... | karpenter-policy validate -); default: policies/. YAML that is not a Kubernetes object
    (values files, workflows) and objects of other kinds are skipped and counted.
    """
    selection = _selection(exclude, disabled)
    _read_paths("validate", paths or DEFAULT_PATHS, selection)
    from karpenter_policy.checks.validation.policies import validate_paths

    values = None
    if values_file is not None:  # jinja2 only when there are templates to render
        from karpenter_policy.checks.source.templating import ValuesError, load_values

        try:
            values = load_values(values_file)
        except ValuesError as error:
            click.echo(f"karpenter-policy validate: {error}", err=True)
            sys.exit(2)
    report = validate_paths(paths or DEFAULT_PATHS, values=values, selection=selection)
    _finish(CommandOutput(report.exit_code(fail_on_warn), render(report, output, quiet=quiet), ""))


@main.command(epilog=EPILOGS["check"])
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--output",
    "output",
    type=click.Choice((*FORMATS, "markdown")),
    default="text",
    show_default=True,
    help="Report format: text, json, sarif, github, junit, or markdown (a pull-request comment).",
)
@_fail_on_warn_option
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help=_REGION_HELP)
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=1),
    default=5000,
    show_default=True,
    help="Time limit of each solver call; a provisioner the solver cannot decide is a warning.",
)
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option(
    "--workloads",
    "workload_paths",
    multiple=True,
    type=click.Path(),
    help="Workload files or directories (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs, Pods, "
    "pod template files) to place on the provisioners (repeatable).",
)
@click.option(
    "--scale",
    "scale",
    multiple=True,
    metavar="KIND/NAME=N",
    help="Replicas of a workload for the capacity plan (e.g. deployment/inflate=10; repeatable).",
)
@click.option(
    "--spot-prices",
    "spot_prices_file",
    type=click.Path(dir_okay=False),
    help="Price spot capacity from this `aws ec2 describe-spot-price-history` JSON (else: at on-demand prices).",
)
@click.option(
    "--nodes",
    "budget_nodes",
    type=click.IntRange(min=0),
    help="Disruption budgets: node count of a v1 NodePool without spec.replicas or spec.limits.nodes (default: 10).",
)
@click.option(
    "--timezone",
    "budget_timezone",
    default="UTC",
    show_default=True,
    help="Disruption budgets: the time zone of the markdown timeline (IANA name; Karpenter reads schedules in UTC).",
)
@click.option(
    "--budget-week",
    "budget_week",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Disruption budgets: check and show the week holding this day (YYYY-MM-DD; default: this week).",
)
@_selection_options
@_previous_generation_option
def check(
    paths: tuple[str, ...],
    output: str,
    fail_on_warn: bool,
    catalog_file: str | None,
    region: str | None,
    timeout_ms: int,
    values_file: str | None,
    workload_paths: tuple[str, ...],
    scale: tuple[str, ...],
    spot_prices_file: str | None,
    budget_nodes: int | None,
    budget_timezone: str,
    budget_week: datetime.datetime | None,
    exclude: tuple[str, ...],
    disabled: tuple[str, ...],
    quiet: bool,
    previous_generation: bool,
) -> None:
    """Validate, then prove each Provisioner satisfiable against the instance-type catalog (Z3).

    Reports conflicting requirements (with the minimal set of lines), requirements no instance type meets, and
    unknown instance types, families, sizes and zones; lists the instance types of each satisfiable Provisioner.
    With --workloads: which provisioner launches a node for each workload and on which instance types, why none
    can (workload-unschedulable), equal-weight provisioners that both match (overlap), provisioners no workload
    reaches (shadowed), and the nodes every replica needs with the fleet's $/h (the capacity plan). PATHS are
    files or directories, or - for standard input; default: policies/.
    """
    from karpenter_policy.checks.options import BudgetView, PolicyOptions
    from karpenter_policy.commands.check import check_command

    selection = _selection(exclude, disabled)
    _read_paths("check", paths or DEFAULT_PATHS, selection)
    options = PolicyOptions(
        budgets=BudgetView(budget_nodes, _time_zone(budget_timezone), budget_week.date() if budget_week else None),
        catalog_file=catalog_file,
        region=region,
        timeout_ms=timeout_ms,
        values_file=values_file,
        workload_paths=workload_paths,
        scale=_scale_option(scale),
        spot_prices_file=spot_prices_file,
        selection=selection,
        previous_generation=previous_generation,
    )
    _finish(check_command(paths or DEFAULT_PATHS, output, options, fail_on_warn=fail_on_warn, quiet=quiet))


def _time_zone(name: str) -> str:
    """`--timezone NAME`: an IANA time zone (tzdata's), else a usage error (exit 2)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"{name!r} is not a time zone (an IANA name: UTC, Europe/Paris)",
                                 param_hint="--timezone") from None
    return name


def _scale_option(values: Sequence[str]) -> dict[str, int]:
    """`--scale KIND/NAME=N` values as a mapping; a malformed one, or N beyond the pods of one workload the tool
    plans (`MAX_REPLICAS`), is a usage error (exit 2)."""
    scale: dict[str, int] = {}
    for value in values:
        ref, _, count = value.partition("=")
        shown = repr(value) if len(value) <= 60 else repr(value[:57] + "...")
        if "/" not in ref or not (count.isascii() and count.isdigit()):
            raise click.BadParameter(f"{shown} is not KIND/NAME=N (e.g. deployment/inflate=10)", param_hint="--scale")
        from karpenter_policy.api.workloads import replicas_problem  # only when --scale is given

        problem = replicas_problem(int(count) if len(count) <= 20 else 10**20)  # int() reads ≤ 4,300 digits
        if problem is not None:
            raise click.BadParameter(f"{shown}: N {problem}", param_hint="--scale")
        scale[ref] = int(count)
    return scale


@main.command("test", epilog=EPILOGS["test"])
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--workloads",
    "workload_paths",
    multiple=True,
    required=True,
    type=click.Path(),
    help="Workload files or directories the tests name workloads of (repeatable), as check --workloads.",
)
@click.option(
    "--output",
    "output",
    type=click.Choice((*FORMATS, "markdown")),
    default="text",
    show_default=True,
    help="Report format: text, json, sarif, github, junit (a test case per PlacementTest file), or markdown.",
)
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help=_REGION_HELP)
@click.option("--timeout-ms", type=click.IntRange(min=1), default=5000, show_default=True, help="Solver time limit.")
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option("--scale", "scale", multiple=True, metavar="KIND/NAME=N", help="Replicas of a workload, as check's.")
@click.option("--spot-prices", "spot_prices_file", type=click.Path(dir_okay=False), help="As check's --spot-prices.")
@_selection_options
@_previous_generation_option
def test(
    paths: tuple[str, ...],
    workload_paths: tuple[str, ...],
    output: str,
    catalog_file: str | None,
    region: str | None,
    timeout_ms: int,
    values_file: str | None,
    scale: tuple[str, ...],
    spot_prices_file: str | None,
    exclude: tuple[str, ...],
    disabled: tuple[str, ...],
    quiet: bool,
    previous_generation: bool,
) -> None:
    """Run the PlacementTests among PATHS against where check --workloads places the workloads.

    PATHS hold the policies and the PlacementTest files; default: policies/. Each
    expectation that does not hold is a placement-test-failed error at its line: exit 1. No PlacementTest among
    PATHS: exit 2.
    """
    from karpenter_policy.checks.options import PolicyOptions
    from karpenter_policy.commands.test import test_command

    selection = _selection(exclude, disabled)
    _read_paths("test", paths or DEFAULT_PATHS, selection)
    options = PolicyOptions(
        catalog_file=catalog_file,
        region=region,
        timeout_ms=timeout_ms,
        values_file=values_file,
        workload_paths=workload_paths,
        scale=_scale_option(scale),
        spot_prices_file=spot_prices_file,
        selection=selection,
        previous_generation=previous_generation,
    )
    _finish(test_command(paths or DEFAULT_PATHS, options, output, quiet=quiet))


@main.command("compile", epilog=EPILOGS["compile"])
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("-o", "--out", "out", required=True, metavar="DIR|-", help="Output directory, or - for a YAML stream.")
@click.option(
    "--api",
    type=click.Choice(("v1alpha5", "v1")),
    default="v1alpha5",
    show_default=True,
    help="Manifests as v1alpha5 Provisioner/AWSNodeTemplate or v1 NodePool/EC2NodeClass.",
)
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help=_REGION_HELP)
@_previous_generation_option
@click.option("--configmap-namespace", default="karpenter-policy", show_default=True)
@click.option("--configmap-name", default="karpenter-policy-constraints", show_default=True)
@click.option(
    "--flux-escape",
    is_flag=True,
    help="Write ${...} as $${...} for Flux post-build substitution instead of annotating the object "
    "kustomize.toolkit.fluxcd.io/substitute: disabled (the default).",
)
@click.option(
    "--default-instance-profile",
    metavar="NAME",
    help="--api v1: instance profile for node templates without one (v1alpha5's aws.defaultInstanceProfile).",
)
@click.option("--node-role", metavar="ROLE", help="--api v1: IAM role for node templates without an instance profile.")
@click.option(
    "--output",
    "report_format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Report format (stdout with -o DIR, stderr with -o -).",
)
@click.option(
    "--policy-version",
    metavar="VERSION",
    help="Version of the constraint sets whose Provisioner has no karpenter-policy/version annotation (default: "
    "`git describe --always` of the repository holding PATHS, -dirty when the policies read are not HEAD's, else "
    "'unversioned'); git is not run then.",
)
@_fail_on_warn_option
@_selection_options
def compile_(
    paths: tuple[str, ...],
    out: str,
    api: str,
    values_file: str | None,
    catalog_file: str | None,
    region: str | None,
    previous_generation: bool,
    configmap_namespace: str,
    configmap_name: str,
    flux_escape: bool,
    default_instance_profile: str | None,
    node_role: str | None,
    report_format: str,
    policy_version: str | None,
    fail_on_warn: bool,
    exclude: tuple[str, ...],
    disabled: tuple[str, ...],
    quiet: bool,
) -> None:
    """Check, then write constraint sets and manifests into DIR, or stream the manifests with -o -.

    PATHS are files or directories (*.yaml, *.yml, *.yaml.j2), or - for standard input; default: policies/.
    Nothing is written when any error is found; with -o - stdout then stays empty and the report goes to stderr.
    In DIR, only files compile wrote there before are replaced or removed (listed in DIR/.karpenter-policy-output);
    others are left alone.
    """
    from karpenter_policy.commands.compile.compiler import compile_command
    from karpenter_policy.commands.compile.manifests import invalid_name

    selection = _selection(exclude, disabled)
    if default_instance_profile and node_role:
        raise click.UsageError("give --default-instance-profile or --node-role, not both")
    for hint, value, is_namespace in (
        ("--configmap-namespace", configmap_namespace, True),
        ("--configmap-name", configmap_name, False),
    ):
        if problem := invalid_name(value, is_namespace):
            raise click.BadParameter(problem, param_hint=hint)
    if policy_version is not None and not (policy_version.strip() and policy_version.isprintable()):
        raise click.BadParameter("give a non-empty version of printable characters", param_hint="--policy-version")
    _read_paths("compile", paths or DEFAULT_PATHS, selection)
    result = compile_command(
        paths or DEFAULT_PATHS,
        out,
        api=api,
        values_file=values_file,
        catalog_file=catalog_file,
        region=region,
        previous_generation=previous_generation,
        configmap_namespace=configmap_namespace,
        configmap_name=configmap_name,
        flux_escape=flux_escape,
        default_instance_profile=default_instance_profile,
        node_role=node_role,
        report_format=report_format,
        fail_on_warn=fail_on_warn,
        policy_version=policy_version,
        selection=selection,
        quiet=quiet,
    )
    _finish(result)


@main.command(epilog=EPILOGS["pin"])
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--policies",
    "policy_paths",
    multiple=True,
    type=click.Path(),
    help="Policy files or directories with the PinningPolicy rules and the Provisioners (repeatable; default: "
    "policies/).",
)
@click.option("--write", is_flag=True, help="Rewrite the manifests in place (default: print a diff, exit 1 if any).")
@click.option("--output", "output", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help="Region of the embedded catalog (default us-east-1); must match --catalog's.")
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option("--no-prove", is_flag=True, help="Do not prove the pinned workloads schedulable (no solver).")
def pin(
    paths: tuple[str, ...],
    policy_paths: tuple[str, ...],
    write: bool,
    output: str,
    catalog_file: str | None,
    region: str | None,
    values_file: str | None,
    no_prove: bool,
) -> None:
    """Write what the PinningPolicy rules require (nodeSelector entries, tolerations) into workload manifests.

    PATHS are workload files or directories (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs,
    Pods, pod template files). Without --write: print a unified diff and exit 1 when a manifest needs a change.
    With --write: rewrite them in place (atomically); every line no rule changes stays byte-identical. The pinned
    workloads are proven schedulable on the policies' provisioners before anything is written.
    """
    from karpenter_policy.commands.pin import load_policies, pin_command, schedulability_prover

    values, catalog_ = _values_and_catalog("pin", values_file, catalog_file, region, load=not no_prove)
    policies = load_policies(policy_paths or DEFAULT_PATHS, solve=not no_prove, catalog=catalog_, values=values)
    prover, notes = schedulability_prover(policies, paths)
    result = pin_command(paths, policies, write=write, output=output, prove=prover, notes=notes)
    _finish(result)


@main.command("fmt", epilog=EPILOGS["fmt"])
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--write", is_flag=True, help="Rewrite the files in place (default: print a diff).")
@click.option("--check", is_flag=True, help="Exit 1 when a file is not formatted (or, with --write, was not).")
@click.option(
    "--exclude",
    "exclude",
    multiple=True,
    metavar="GLOB",
    help="Leave out files and directories matching GLOB (repeatable), as in validate.",
)
def fmt(paths: tuple[str, ...], write: bool, check: bool, exclude: tuple[str, ...]) -> None:
    """Make Karpenter's defaults explicit and put keys in canonical order in Provisioners and AWSNodeTemplates.

    Comments, quoting and every other document stay as they are; formatting a formatted file changes nothing.
    PATHS are files or directories (*.yaml, *.yml; templates are not formatted); default: policies/. Without
    --write: print a unified diff. With --write: rewrite the files in place, all or none.
    """
    from karpenter_policy.commands.fmt.command import fmt_command

    _finish(fmt_command(paths or DEFAULT_PATHS, write=write, check=check, exclude=exclude))


@main.command("migrate", epilog=EPILOGS["migrate"])
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--to",
    "to",
    type=click.Choice(("v1", "v1beta1")),
    default="v1",
    show_default=True,
    help="The Karpenter API to migrate to (v1beta1: not supported yet).",
)
@click.option("-o", "--out", "out", metavar="DIR", help="Write the migrated tree into DIR (same layout).")
@click.option("--write", is_flag=True, help="Rewrite the files in place (default: print a diff).")
@click.option(
    "--budget",
    default="1",
    show_default=True,
    metavar="NODES",
    help='Each NodePool\'s disruption budget, nodes: a count or a percentage ("1": v0.31\'s one node at a time).',
)
@click.option("--default-instance-profile", metavar="NAME", help="Instance profile for node templates without one.")
@click.option("--node-role", metavar="ROLE", help="IAM role for node templates without an instance profile.")
@click.option(
    "--workloads",
    "workloads",
    multiple=True,
    type=click.Path(),
    metavar="APPS",
    help="Workload files or directories: karpenter.sh/provisioner-name selectors and node affinities of migrated "
    "Provisioners become karpenter.sh/nodepool (repeatable; with --write or the diff).",
)
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help=_REGION_HELP)
@_output_option
@_fail_on_warn_option
@_selection_options
def migrate(
    paths: tuple[str, ...],
    to: str,
    out: str | None,
    write: bool,
    budget: str,
    default_instance_profile: str | None,
    node_role: str | None,
    workloads: tuple[str, ...],
    values_file: str | None,
    catalog_file: str | None,
    region: str | None,
    output: str,
    fail_on_warn: bool,
    exclude: tuple[str, ...],
    disabled: tuple[str, ...],
    quiet: bool,
) -> None:
    """Rewrite v1alpha5 Provisioners and AWSNodeTemplates as Karpenter v1 NodePools and EC2NodeClasses, each proven.

    PATHS are files or directories (*.yaml, *.yml); default: policies/. Each NodePool is proven with Z3 to admit
    exactly the instance types, zones, capacity types, labels and taints its Provisioner did, or the
    counter-example is printed and the Provisioner stays as it is. Comments and the file layout are kept; what
    v1 changes (budgets, expiry, drift, kubelet, AMI aliases) is reported with its mitigation. Without -o or
    --write: print a diff.
    """
    import re

    from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command

    if default_instance_profile and node_role:
        raise click.UsageError("give --default-instance-profile or --node-role, not both")
    if out is not None and write:
        raise click.UsageError("give -o DIR or --write, not both")
    if out is not None and workloads:
        raise click.UsageError("--workloads rewrites the workload files in place: use it with --write or without -o")
    if not re.fullmatch(r"((100|[0-9]{1,2})%|[0-9]+)", budget):
        raise click.BadParameter("a count (1) or a percentage (10%), as v1's budgets take", param_hint="--budget")
    selection = _selection(exclude, disabled)
    _read_paths("migrate", paths or DEFAULT_PATHS, selection)
    values, catalog_ = _values_and_catalog("migrate", values_file, catalog_file, region, load=to == "v1")
    options = MigrateOptions(
        to=to,
        out=out,
        write=write,
        budget=budget,
        default_instance_profile=default_instance_profile,
        node_role=node_role,
        output=output,
        fail_on_warn=fail_on_warn,
        quiet=quiet,
        selection=selection,
        values=values,
        workloads=workloads,
    )
    _finish(migrate_command(paths or DEFAULT_PATHS, options, catalog_))


def _values_and_catalog(
    command: str,
    values_file: str | None,
    catalog_file: str | None,
    region: str | None,
    load: bool = True,
    previous_generation: bool = False,
) -> tuple[dict[str, Any] | None, Catalog | None]:
    """--values and --catalog/--region, loaded (policy.options); a problem with either exits 2."""
    from karpenter_policy.checks.options import OptionError, catalog_option, values_option

    try:
        values = values_option(values_file)
        return values, catalog_option(catalog_file, region, previous_generation) if load else None
    except OptionError as error:
        click.echo(f"karpenter-policy {command}: {error}", err=True)
        sys.exit(2)


@main.command(epilog=EPILOGS["diff"])
@click.argument("base")
@click.argument("head")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--output",
    "output",
    type=click.Choice(("text", "json", "markdown")),
    default="text",
    show_default=True,
    help="text (a table per provisioner), json, or markdown (a pull-request comment).",
)
@click.option(
    "--workloads",
    "workload_paths",
    multiple=True,
    type=click.Path(),
    help="Workload files or directories to place on both sides (repeatable; read as of each revision).",
)
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help=_REGION_HELP)
@click.option("--timeout-ms", type=click.IntRange(min=1), default=5000, show_default=True, help="Per solver call.")
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option("--exit-code", "exit_code_on_diff", is_flag=True, help="Exit 1 when anything differs (as git diff).")
@click.option(
    "--scale",
    "scale",
    multiple=True,
    metavar="KIND/NAME=N",
    help="Replicas of a workload for the cost comparison (e.g. deployment/inflate=10; repeatable).",
)
@_previous_generation_option
def diff(
    base: str,
    head: str,
    paths: tuple[str, ...],
    output: str,
    workload_paths: tuple[str, ...],
    catalog_file: str | None,
    region: str | None,
    timeout_ms: int,
    values_file: str | None,
    exit_code_on_diff: bool,
    scale: tuple[str, ...],
    previous_generation: bool,
) -> None:
    """Semantic diff of the policies of BASE and HEAD: what HEAD admits that BASE did not, and the reverse.

    BASE and HEAD are git revisions (read from git, nothing is checked out) or directories. PATHS default to
    policies/ (for a directory: the whole directory, PATHS being relative to it). Per provisioner: offerings
    (instance type x zone x capacity type), instance types, zones, capacity types, architectures, taints, limits,
    custom node labels and weight, each offering difference with a witness the solver proves on both sides.
    With --workloads, also the cost and node count of the workloads' nodes on each side, and which workloads
    move to other instance types. Exit 1 when HEAD has errors or a workload becomes unschedulable (with
    --exit-code: when anything differs).
    """
    from karpenter_policy.commands.diff import diff_command

    values, catalog_ = _values_and_catalog(
        "diff", values_file, catalog_file, region, previous_generation=previous_generation
    )
    assert catalog_ is not None
    result = diff_command(
        base,
        head,
        paths,
        catalog_,
        output=output,
        timeout_ms=timeout_ms,
        values=values,
        workload_paths=workload_paths,
        exit_code_on_diff=exit_code_on_diff,
        scale=_scale_option(scale),
    )
    _finish(result)


@main.command("plan", epilog=EPILOGS["plan"])
@click.argument("base")
@click.argument("head")
@click.argument("paths", nargs=-1, type=click.Path())
@with_options(PlanOptions, "plan")
def plan(options: PlanOptions) -> None:
    """What merging HEAD does to the running fleet: from a cluster snapshot (kubectl get
    nodes,pods,pdb,daemonsets,nodeclaims -A -o json), the nodes that drift or expire and why, the replacement waves
    and their timing, the PDBs that block, the pods left pending, and the fleet's $/month before, at the peak and
    after (Karpenter v0.31, v1alpha5). Exit 1 when pods would be stranded or the rollout never finishes."""
    import dataclasses

    from karpenter_policy.commands.plan.command import plan_command

    given = click.get_current_context().params  # the arguments, which the option set does not declare
    options = dataclasses.replace(options, base=given["base"], head=given["head"], paths=tuple(given["paths"]))
    values, catalog_ = _values_and_catalog("plan", options.values_file, options.catalog_file, options.region)
    assert catalog_ is not None
    _finish(plan_command(options, catalog_, values))


@main.group(cls=_Group)
def catalog() -> None:
    """The EC2 instance-type catalog the solver and the compiler use (embedded: 30 regions)."""


@catalog.command("refresh", epilog=EPILOGS["catalog refresh"])
@click.option("--region", default="us-east-1", show_default=True, help="EC2 region to describe.")
@click.option("--endpoint-url", metavar="URL", help="AWS endpoint (default: AWS's; e.g. a local moto server).")
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(dir_okay=False),
    help="On-demand price table, JSON: {\"prices\": {TYPE: USD per hour}} (default: the Price List API's prices, "
    "GetProducts).",
)
@click.option(
    "--spot-prices/--no-spot-prices",
    default=True,
    show_default=True,
    help="Price spot offerings from DescribeSpotPriceHistory (else at the on-demand price).",
)
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False), help="Catalog file to write.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True, max=86400),
    default=300.0,
    show_default=True,
    help="Seconds the whole refresh may take, every answer included; nothing is written when it runs out.",
)
def catalog_refresh(
    region: str, endpoint_url: str | None, prices_file: str | None, spot_prices: bool, out: str, timeout: float
) -> None:
    """Rebuild the catalog from DescribeInstanceTypes and DescribeInstanceTypeOfferings, priced from the Price List
    API (or --prices) and DescribeSpotPriceHistory; written atomically. Answers are bounded (8 MiB each, 96 MiB
    in all, --timeout); an answer without instance types or offerings is refused: the file is left as it was."""
    from pathlib import Path

    from karpenter_policy.catalog import CatalogError
    from karpenter_policy.cloud import CloudError
    from karpenter_policy.cloud.aws.catalog_refresh import refresh_region

    try:
        built, notes = refresh_region(
            region,
            Path(out),
            endpoint_url=endpoint_url,
            prices_file=Path(prices_file) if prices_file else None,
            spot_prices=spot_prices,
            timeout=timeout,
        )
    except (CatalogError, CloudError) as error:
        click.echo(f"karpenter-policy catalog refresh: {error}", err=True)
        sys.exit(2)
    for note in notes:
        click.echo(f"karpenter-policy catalog refresh: {note}", err=True)
    zones = sorted({o.zone for it in built for o in it.offerings})
    priced = sum(1 for it in built if it.price_on_demand is not None)
    click.echo(f"wrote {out}: {len(built)} instance types in {built.region} ({len(zones)} zones), {priced} priced")


@catalog.command("show", epilog=EPILOGS["catalog show"])
@click.argument("names", nargs=-1, metavar="[TYPE]...")
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help=_REGION_HELP)
@_previous_generation_option
def catalog_show(
    names: tuple[str, ...], catalog_file: str | None, region: str | None, previous_generation: bool
) -> None:
    """What the catalog of a region holds: its date, counts, zones and regions; with TYPEs, their facts, labels,
    zones and price, and the source of each fact. Exit 1 when a TYPE is not in it."""
    from karpenter_policy.commands.catalog import show_catalog

    _, catalog_ = _values_and_catalog(
        "catalog show", None, catalog_file, region, previous_generation=previous_generation
    )
    assert catalog_ is not None
    _finish(show_catalog(catalog_, names, embedded=catalog_file is None))


@catalog.command("build", epilog=EPILOGS["catalog build"])
@click.option(
    "--sources",
    "sources_dir",
    required=True,
    type=click.Path(file_okay=False, exists=True),
    help="Directory of the reference tables (Karpenter's instance types and VPC limits, price tables, moto.json): "
    "the repository's catalog-sources/.",
)
@click.option(
    "--moto",
    "moto_dir",
    type=click.Path(file_okay=False, exists=True),
    help="moto's EC2 resources directory (DescribeInstanceTypes and its offerings; default: the installed moto's).",
)
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, exists=True),
    help="Where to write the embedded catalog (default: this package's karpenter_policy/catalog/data).",
)
def catalog_build(sources_dir: str, moto_dir: str | None, out_dir: str | None) -> None:
    """Regenerate the embedded catalog: join the sources (each fact from the most authoritative one), write the
    shared types file, one offerings file per region and the price tables; print what the join found."""
    from pathlib import Path

    from karpenter_policy.catalog import CatalogError
    from karpenter_policy.catalog.build import build_embedded, default_moto_resources
    from karpenter_policy.catalog.catalog import embedded_data_file

    moto = Path(moto_dir) if moto_dir else default_moto_resources()
    if moto is None:
        raise click.UsageError("moto is not installed: give --moto DIR (moto's moto/ec2/resources)")
    out = Path(out_dir) if out_dir else Path(str(embedded_data_file("")))
    try:
        lines = build_embedded(Path(sources_dir), moto, out)
    except CatalogError as error:
        click.echo(f"karpenter-policy catalog build: {error}", err=True)
        sys.exit(2)
    click.echo("\n".join(lines))


@main.command("rules", epilog=EPILOGS["rules"])
@click.argument("rule_id", metavar="[RULE]", required=False)
@click.option("--output", type=click.Choice(RULE_OUTPUTS), default="text", show_default=True,
              help="text (a line per rule, or one rule in full), json, or markdown (the table of docs/rules/).")
def rules(rule_id: str | None, output: str) -> None:
    """List the rules, or explain one: its severity, whether it can be silenced, what it catches, the Karpenter
    source it follows and its page.

    Every rule id a report names (`[rule]`, SARIF's ruleId, `--disable RULE`) is one of these; an unknown RULE exits
    2 with the id meant.
    """
    _finish(rules_command(rule_id, output))


@main.command(epilog=EPILOGS["webhook"])
@with_options(WebhookFlags, "webhook")
def webhook(options: WebhookFlags) -> None:
    """Serve the admission webhook over HTTPS: /mutate/provisioners, /validate/provisioners, /validate/nodepools,
    /validate/ec2nodeclasses, /mutate/pods, /healthz, /readyz, /metrics. It runs the checks of `check`."""
    from karpenter_policy.webhook.command import main as webhook_main

    sys.exit(webhook_main(options))


@main.command(epilog=EPILOGS["reconcile"])
@with_options(ReconcileOptions, "reconcile")
def reconcile(options: ReconcileOptions) -> None:
    """Launch EC2 nodes for pending pods from compiled constraint sets: watch, batch, schedule (the code of
    `check --workloads`), CreateFleet, register the node, bind."""
    from karpenter_policy.reconcile.command import main as reconcile_main

    sys.exit(reconcile_main(options))


@main.command("simulate", epilog=EPILOGS["simulate"])
@with_options(SimulateOptions, "simulate")
def simulate(options: SimulateOptions) -> None:
    """Run the controller on an in-memory cluster against EC2 served by moto in this process (no cluster, no AWS
    account): the workloads are created, then scaled step by step; prints the controller's log, the nodes
    (type, zone, capacity type, pods, cpu/memory use, $/h) and the fleet's $/h. Exit 1 when pods stay pending."""
    from karpenter_policy.checks.findings import Report
    from karpenter_policy.checks.reporters import render
    from karpenter_policy.checks.source.workloads import read_workloads
    from karpenter_policy.simulate.command import overwritten_input, simulate_command

    report, constraints = options.report, options.constraints
    if report is not None and (why := overwritten_input(report, [constraints, *options.workload_paths])) is not None:
        raise click.BadParameter(f"{report}: {why}; write the report elsewhere", param_hint="--report")
    steps = [(ref, count) for value in options.scale for ref, count in _scale_option([value]).items()]
    found = read_workloads(list(options.workload_paths))
    if any(f.severity == "error" for f in found.findings) or not found.files:
        if not found.files:
            click.echo("karpenter-policy simulate: no workload manifests found", err=True)
        report_ = Report(findings=list(found.findings), files=len(found.files))
        click.echo(render(report_, "text"), nl=False, err=True)
        sys.exit(2)
    result = simulate_command(constraints, found.workloads, steps, report, strategy=options.strategy)
    click.echo(result.stdout, nl=False)
    click.echo(result.stderr, nl=False, err=True)
    sys.exit(result.code)


if __name__ == "__main__":
    main()
