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
import dataclasses
import gc
import inspect
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click

from karpenter_policy import installed_version
from karpenter_policy.api.v1.featuregates import static_capacity
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.jobs import WorkerFailed
from karpenter_policy.checks.reporters import displayable, render
from karpenter_policy.checks.selection import Selection
from karpenter_policy.cli_help import EPILOGS, version_line
from karpenter_policy.cli_options import with_options
from karpenter_policy.commands.flags import (
    CatalogBuildFlags,
    CatalogRefreshFlags,
    CatalogShowFlags,
    CheckFlags,
    CompileFlags,
    DiffFlags,
    FmtFlags,
    MigrateFlags,
    PinFlags,
    RulesFlags,
    TestFlags,
    ValidateFlags,
    policy_options,
)
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.rules import rules_command
from karpenter_policy.reconcile.flags import ReconcileOptions
from karpenter_policy.simulate.flags import SimulateOptions
from karpenter_policy.webhook.flags import WebhookFlags

if TYPE_CHECKING:
    from karpenter_policy.catalog import Catalog

DEFAULT_PATHS = ("policies/",)
#: The commands that serve until stopped: they keep Python's default collector settings (short pauses).
SERVING_COMMANDS = frozenset({"webhook", "reconcile", "simulate"})
#: Allocations between two young-generation collections in a one-shot command (Python's default is 700).
BATCH_GC_THRESHOLD = 100_000

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


def _print_version(ctx: click.Context, _param: click.Parameter, asked: bool) -> None:
    """`--version`: click's `version_option` prints the same line, but takes the version when the module is
    imported — reading the distribution's metadata on every start-up; here it is read only when asked for."""
    if not asked or ctx.resilient_parsing:
        return
    click.echo(version_line(installed_version()), color=ctx.color)
    ctx.exit()


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": _HELP_WIDTH},
    epilog=EPILOGS["main"],
)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, help="Show the version and exit.",
              callback=_print_version)
def main() -> None:
    """Validate, prove and compile Karpenter node policies kept in Git: v1 NodePools and EC2NodeClasses, v1alpha5
    Provisioners and AWSNodeTemplates."""
    if click.get_current_context().invoked_subcommand not in SERVING_COMMANDS:
        _collect_for_batch()


def _collect_for_batch() -> None:
    """A one-shot command keeps every file's node tree until its report is written: the cyclic collector's
    default young-generation threshold then rescans that growing heap thousands of times (about a third of
    `check`'s CPU on 2,000 Provisioners, benchmarks/README.md). What was imported is frozen out of its scans and
    young collections are made rarer; the output is the same, cycles are still collected."""
    gc.freeze()
    gc.set_threshold(BATCH_GC_THRESHOLD, *gc.get_threshold()[1:])


@main.command(epilog=EPILOGS["validate"])
@with_options(ValidateFlags, "validate")
def validate(flags: ValidateFlags) -> None:
    """Parse, schema-check and apply Karpenter's defaulting and validation rules (no solver).

    PATHS are files or directories (searched recursively for *.yaml, *.yml and *.yaml.j2), or - for standard input
    (helm template ... | karpenter-policy validate -); default: policies/. YAML that is not a Kubernetes object
    (values files, workflows) and objects of other kinds are skipped and counted.
    """
    selection = _selection(flags.exclude, flags.disabled)
    paths = flags.paths or DEFAULT_PATHS
    _read_paths("validate", paths, selection)
    from karpenter_policy.checks.validation.policies import validate_paths

    values = None
    if flags.values_file is not None:  # jinja2 only when there are templates to render
        from karpenter_policy.checks.source.templating import ValuesError, load_values

        try:
            values = load_values(flags.values_file)
        except ValuesError as error:
            click.echo(f"karpenter-policy validate: {error}", err=True)
            sys.exit(2)
    try:
        report = validate_paths(paths, values=values, selection=selection, jobs=flags.jobs)
    except WorkerFailed as error:  # a bug met in a worker process: the same exit as one met here
        _finish(CommandOutput(2, "", f"karpenter-policy: internal error: {error}\n"))
    _finish(CommandOutput(report.exit_code(flags.fail_on_warn), render(report, flags.output, quiet=flags.quiet), ""))


@main.command(epilog=EPILOGS["check"])
@with_options(CheckFlags, "check")
def check(flags: CheckFlags) -> None:
    """Validate, then prove each NodePool and Provisioner satisfiable against the instance-type catalog (Z3).

    Reports conflicting requirements (with the minimal set of lines), requirements no instance type meets, and
    unknown instance types, families, sizes and zones; lists the instance types of each satisfiable Provisioner.
    With --workloads: which provisioner launches a node for each workload and on which instance types, why none
    can (workload-unschedulable), equal-weight provisioners that both match (overlap), provisioners no workload
    reaches (shadowed), and the nodes every replica needs with the fleet's $/h (the capacity plan). PATHS are
    files or directories, or - for standard input; default: policies/.
    """
    from karpenter_policy.commands.check import check_command

    selection = _selection(flags.exclude, flags.disabled)
    paths = flags.paths or DEFAULT_PATHS
    _read_paths("check", paths, selection)
    options = policy_options(flags, _scale_option(flags.scale), selection)
    _finish(check_command(paths, flags.output, options, fail_on_warn=flags.fail_on_warn, quiet=flags.quiet))


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
@with_options(TestFlags, "test")
def test(flags: TestFlags) -> None:
    """Run the PlacementTests among PATHS against where check --workloads places the workloads.

    PATHS hold the policies and the PlacementTest files; default: policies/. Each
    expectation that does not hold is a placement-test-failed error at its line: exit 1. No PlacementTest among
    PATHS: exit 2.
    """
    from karpenter_policy.commands.test import test_command

    selection = _selection(flags.exclude, flags.disabled)
    paths = flags.paths or DEFAULT_PATHS
    _read_paths("test", paths, selection)
    options = policy_options(flags, _scale_option(flags.scale), selection)
    _finish(test_command(paths, options, flags.output, quiet=flags.quiet))


@main.command("compile", epilog=EPILOGS["compile"])
@with_options(CompileFlags, "compile")
def compile_(flags: CompileFlags) -> None:
    """Check, then write constraint sets and manifests into DIR, or stream the manifests with -o -.

    PATHS are files or directories (*.yaml, *.yml, *.yaml.j2), or - for standard input; default: policies/.
    Nothing is written when any error is found; with -o - stdout then stays empty and the report goes to stderr.
    In DIR, only files compile wrote there before are replaced or removed (listed in DIR/.karpenter-policy-output);
    others are left alone.
    """
    from karpenter_policy.commands.compile.compiler import compile_command
    from karpenter_policy.commands.compile.manifests import invalid_name

    selection = _selection(flags.exclude, flags.disabled)
    if flags.default_instance_profile and flags.node_role:
        raise click.UsageError("give --default-instance-profile or --node-role, not both")
    for hint, value, is_namespace in (
        ("--configmap-namespace", flags.configmap_namespace, True),
        ("--configmap-name", flags.configmap_name, False),
    ):
        if problem := invalid_name(value, is_namespace):
            raise click.BadParameter(problem, param_hint=hint)
    version = flags.policy_version
    if version is not None and not (version.strip() and version.isprintable()):
        raise click.BadParameter("give a non-empty version of printable characters", param_hint="--policy-version")
    paths = flags.paths or DEFAULT_PATHS
    _read_paths("compile", paths, selection)
    _finish(compile_command(dataclasses.replace(flags, paths=paths), selection))


@main.command(epilog=EPILOGS["pin"])
@with_options(PinFlags, "pin")
def pin(flags: PinFlags) -> None:
    """Write what the PinningPolicy rules require (nodeSelector entries, tolerations) into workload manifests.

    PATHS are workload files or directories (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs,
    Pods, pod template files). Without --write: print a unified diff and exit 1 when a manifest needs a change.
    With --write: rewrite them in place (atomically); every line no rule changes stays byte-identical. The pinned
    workloads are proven schedulable on the policies' provisioners before anything is written.
    """
    from karpenter_policy.commands.pin import load_policies, pin_command, schedulability_prover

    prove = not flags.no_prove
    values, catalog_ = _values_and_catalog("pin", flags.values_file, flags.catalog_file, flags.region, load=prove)
    policies = load_policies(flags.policy_paths or DEFAULT_PATHS, solve=prove, catalog=catalog_, values=values)
    prover, notes = schedulability_prover(policies, flags.paths)
    _finish(pin_command(flags.paths, policies, write=flags.write, output=flags.output, prove=prover, notes=notes))


@main.command("fmt", epilog=EPILOGS["fmt"])
@with_options(FmtFlags, "fmt")
def fmt(flags: FmtFlags) -> None:
    """Make Karpenter's defaults explicit and put keys in canonical order in Karpenter's policy objects.

    Provisioners and AWSNodeTemplates (v1alpha5), NodePools and EC2NodeClasses (v1: their CRDs' defaults).
    Comments, quoting and every other document stay as they are; formatting a formatted file changes nothing.
    PATHS are files or directories (*.yaml, *.yml; templates are not formatted); default: policies/. Without
    --write: print a unified diff. With --write: rewrite the files in place, all or none.
    """
    from karpenter_policy.commands.fmt.command import fmt_command

    _finish(fmt_command(flags.paths or DEFAULT_PATHS, write=flags.write, check=flags.check, exclude=flags.exclude))


@main.command("migrate", epilog=EPILOGS["migrate"])
@with_options(MigrateFlags, "migrate")
def migrate(flags: MigrateFlags) -> None:
    """Rewrite v1alpha5 Provisioners and AWSNodeTemplates as Karpenter v1 NodePools and EC2NodeClasses, each proven.

    PATHS are files or directories (*.yaml, *.yml); default: policies/. Each NodePool is proven with Z3 to admit
    exactly the instance types, zones, capacity types, labels and taints its Provisioner did, or the
    counter-example is printed and the Provisioner stays as it is. Comments and the file layout are kept; what
    v1 changes (budgets, expiry, drift, kubelet, AMI aliases) is reported with its mitigation. Without -o or
    --write: print a diff. --to v1beta1 writes Karpenter v0.32-v0.37's v1beta1 NodePools and EC2NodeClasses.
    """
    import re

    from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command

    if flags.default_instance_profile and flags.node_role:
        raise click.UsageError("give --default-instance-profile or --node-role, not both")
    if flags.out is not None and flags.write:
        raise click.UsageError("give -o DIR or --write, not both")
    if flags.out is not None and flags.workloads:
        raise click.UsageError("--workloads rewrites the workload files in place: use it with --write or without -o")
    if not re.fullmatch(r"((100|[0-9]{1,2})%|[0-9]+)", flags.budget):
        raise click.BadParameter("a count (1) or a percentage (10%), as v1's budgets take", param_hint="--budget")
    selection = _selection(flags.exclude, flags.disabled)
    paths = flags.paths or DEFAULT_PATHS
    _read_paths("migrate", paths, selection)
    values, catalog_ = _values_and_catalog(
        "migrate", flags.values_file, flags.catalog_file, flags.region, load=flags.to in ("v1", "v1beta1")
    )
    options = MigrateOptions(
        to=flags.to,
        out=flags.out,
        write=flags.write,
        budget=flags.budget,
        default_instance_profile=flags.default_instance_profile,
        node_role=flags.node_role,
        output=flags.output,
        fail_on_warn=flags.fail_on_warn,
        quiet=flags.quiet,
        selection=selection,
        values=values,
        workloads=flags.workloads,
    )
    _finish(migrate_command(paths, options, catalog_))


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
@with_options(DiffFlags, "diff")
def diff(flags: DiffFlags) -> None:
    """Semantic diff of the policies of BASE and HEAD: what HEAD admits that BASE did not, and the reverse.

    BASE and HEAD are git revisions (read from git, nothing is checked out) or directories. PATHS default to
    policies/ (for a directory: the whole directory, PATHS being relative to it). Per provisioner: offerings
    (instance type x zone x capacity type), instance types, zones, capacity types, architectures, taints, limits,
    custom node labels and weight, each offering difference with a witness the solver proves on both sides.
    With --workloads, also the cost and node count of the workloads' nodes on each side, and which workloads
    move to other instance types. Exit 1 when HEAD has errors or a workload becomes unschedulable (with
    --exit-code: when anything differs). With --equivalent (and --workloads): prove that every workload may land on
    the same nodes on both sides, whatever the pools are named.
    """
    from karpenter_policy.commands.diff import diff_command

    values, catalog_ = _values_and_catalog(
        "diff", flags.values_file, flags.catalog_file, flags.region, previous_generation=flags.previous_generation
    )
    assert catalog_ is not None
    if flags.equivalent:
        from karpenter_policy.commands.equivalent import equivalent_command

        _finish(equivalent_command(flags, catalog_, values=values))
    _finish(diff_command(flags, catalog_, values=values, scale=_scale_option(flags.scale)))


@main.command("plan", epilog=EPILOGS["plan"])
@with_options(PlanOptions, "plan")
def plan(options: PlanOptions) -> None:
    """What merging HEAD does to the running fleet: from a cluster snapshot (kubectl get
    nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json), the nodes that drift or expire and why, the
    replacement waves and their timing, the PDBs that block, the pods left pending, and the fleet's $/month before, at
    the peak and after (NodePools as Karpenter v1.14.1, Provisioners as v0.31.1); with BASE = HEAD, what consolidation
    would do now. Exit 1 when pods would be stranded or the rollout never finishes."""
    from karpenter_policy.commands.plan.command import plan_command
    from karpenter_policy.simulate.consolidation import consolidate_now

    values, catalog_ = _values_and_catalog("plan", options.values_file, options.catalog_file, options.region)
    assert catalog_ is not None
    _finish(plan_command(options, catalog_, values, consolidate=consolidate_now))


@main.group(cls=_Group)
def catalog() -> None:
    """The EC2 instance-type catalog the solver and the compiler use (embedded: 30 regions)."""


@catalog.command("refresh", epilog=EPILOGS["catalog refresh"])
@with_options(CatalogRefreshFlags, "catalog refresh")
def catalog_refresh(flags: CatalogRefreshFlags) -> None:
    """Rebuild the catalog from DescribeInstanceTypes and DescribeInstanceTypeOfferings, priced from the Price List
    API (or --prices) and DescribeSpotPriceHistory; written atomically. Answers are bounded (8 MiB each, 96 MiB
    in all, --timeout); an answer without instance types or offerings is refused: the file is left as it was."""
    from pathlib import Path

    from karpenter_policy.catalog import CatalogError
    from karpenter_policy.cloud import CloudError
    from karpenter_policy.cloud.aws.catalog_refresh import refresh_region

    try:
        built, notes = refresh_region(
            flags.region,
            Path(flags.out),
            endpoint_url=flags.endpoint_url,
            prices_file=Path(flags.prices_file) if flags.prices_file else None,
            spot_prices=flags.spot_prices,
            timeout=flags.timeout,
        )
    except (CatalogError, CloudError) as error:
        click.echo(f"karpenter-policy catalog refresh: {error}", err=True)
        sys.exit(2)
    for note in notes:
        click.echo(f"karpenter-policy catalog refresh: {note}", err=True)
    zones = sorted({o.zone for it in built for o in it.offerings})
    priced = sum(1 for it in built if it.price_on_demand is not None)
    wrote = f"wrote {flags.out}: {len(built)} instance types in {built.region} ({len(zones)} zones), {priced} priced"
    click.echo(wrote)


@catalog.command("show", epilog=EPILOGS["catalog show"])
@with_options(CatalogShowFlags, "catalog show")
def catalog_show(flags: CatalogShowFlags) -> None:
    """What the catalog of a region holds: its date, counts, zones and regions; with TYPEs, their facts, labels,
    zones and price, and the source of each fact. Exit 1 when a TYPE is not in it."""
    from karpenter_policy.commands.catalog import show_catalog

    _, catalog_ = _values_and_catalog(
        "catalog show", None, flags.catalog_file, flags.region, previous_generation=flags.previous_generation
    )
    assert catalog_ is not None
    _finish(show_catalog(catalog_, flags.names, embedded=flags.catalog_file is None))


@catalog.command("build", epilog=EPILOGS["catalog build"])
@with_options(CatalogBuildFlags, "catalog build")
def catalog_build(flags: CatalogBuildFlags) -> None:
    """Regenerate the embedded catalog: join the sources (each fact from the most authoritative one), write the
    shared types file, one offerings file per region and the price tables; print what the join found."""
    from pathlib import Path

    from karpenter_policy.catalog import CatalogError
    from karpenter_policy.catalog.build import build_embedded, default_moto_resources
    from karpenter_policy.catalog.catalog import embedded_data_file

    moto = Path(flags.moto_dir) if flags.moto_dir else default_moto_resources()
    if moto is None:
        raise click.UsageError("moto is not installed: give --moto DIR (moto's moto/ec2/resources)")
    out = Path(flags.out_dir) if flags.out_dir else Path(str(embedded_data_file("")))
    try:
        lines = build_embedded(Path(flags.sources_dir), moto, out)
    except CatalogError as error:
        click.echo(f"karpenter-policy catalog build: {error}", err=True)
        sys.exit(2)
    click.echo("\n".join(lines))


@main.command("rules", epilog=EPILOGS["rules"])
@with_options(RulesFlags, "rules")
def rules(flags: RulesFlags) -> None:
    """List the rules, or explain one: its severity, whether it can be silenced, what it catches, the Karpenter
    source it follows and its page.

    Every rule id a report names (`[rule]`, SARIF's ruleId, `--disable RULE`) is one of these; an unknown RULE exits
    2 with the id meant.
    """
    _finish(rules_command(flags.rule_id, flags.output))


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
    from karpenter_policy.simulate import declaredgroups
    from karpenter_policy.simulate.command import overwritten_input, simulate_command

    report, constraints = options.report, options.constraints
    if report is not None and (why := overwritten_input(report, [constraints, *options.workload_paths])) is not None:
        raise click.BadParameter(f"{report}: {why}; write the report elsewhere", param_hint="--report")
    steps = [(ref, count) for value in options.scale for ref, count in _scale_option([value]).items()]
    try:
        groups = declaredgroups.parse_all(options.placement_groups)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--placement-group") from None
    found = read_workloads(list(options.workload_paths))
    if any(f.severity == "error" for f in found.findings) or not found.files:
        if not found.files:
            click.echo("karpenter-policy simulate: no workload manifests found", err=True)
        report_ = Report(findings=list(found.findings), files=len(found.files))
        click.echo(render(report_, "text"), nl=False, err=True)
        sys.exit(2)
    result = simulate_command(
        constraints, found.workloads, steps, report, strategy=options.strategy,
        min_values_policy=options.min_values_policy, volume_objects=found.volume_objects,
        static_capacity=static_capacity(options.feature_gates), placement_groups=groups,
    )
    click.echo(result.stdout, nl=False)
    click.echo(result.stderr, nl=False, err=True)
    sys.exit(result.code)


if __name__ == "__main__":
    main()
