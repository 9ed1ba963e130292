"""`karpenter-policy` command line: parses flags, calls the policy package, maps results to exit codes.

Exit codes (DESIGN.md §3): 0 no errors; 1 findings of severity error (warnings too with --fail-on-warn);
2 usage error or the tool could not run (a missing or unreadable path, a bad flag). When the reader of the output
goes away (`| head`, `| true`), the process ends quietly as Unix tools do: killed by SIGPIPE (shell status 141).

Reports and logs are written as UTF-8 whatever the locale, with the undecodable bytes of file names escaped
(`reporters.displayable`), so that JSON, SARIF and JUnit output stay valid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click

from karpenter_policy import __version__
from karpenter_policy.policy.findings import CommandOutput
from karpenter_policy.policy.reporters import FORMATS, displayable, render

if TYPE_CHECKING:
    from karpenter_policy.catalog import Catalog

DEFAULT_PATHS = ("policies/",)

_output_option = click.option(
    "--output",
    "output",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Report format: text, json (DESIGN.md §4), sarif (code scanning), github (workflow annotations), junit.",
)
_fail_on_warn_option = click.option("--fail-on-warn", is_flag=True, help="Exit 1 on warnings too.")


class _Group(click.Group):
    """Usage errors exit 2 (click's default), other unexpected failures print one line and exit 2."""

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


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="karpenter-policy")
def main() -> None:
    """Validate, prove and compile Karpenter Provisioner policies kept in Git."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@_output_option
@_fail_on_warn_option
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
def validate(paths: tuple[str, ...], output: str, fail_on_warn: bool, values_file: str | None) -> None:
    """Parse, schema-check and apply Karpenter's defaulting and validation rules (no solver).

    PATHS are files or directories (searched recursively for *.yaml, *.yml and *.yaml.j2); default: policies/.
    """
    from karpenter_policy.policy.source.templating import ValuesError, load_values
    from karpenter_policy.policy.validation.policies import validate_paths

    try:
        values = load_values(values_file) if values_file is not None else None
    except ValuesError as error:
        click.echo(f"karpenter-policy validate: {error}", err=True)
        sys.exit(2)
    report = validate_paths(paths or DEFAULT_PATHS, values=values)
    _finish(CommandOutput(report.exit_code(fail_on_warn), render(report, output), ""))


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--output",
    "output",
    type=click.Choice((*FORMATS, "markdown")),
    default="text",
    show_default=True,
    help="Report format: text, json (DESIGN.md §4), sarif, github, junit, or markdown (a pull-request comment).",
)
@_fail_on_warn_option
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help="Region of the embedded catalog (default us-east-1); must match --catalog's.")
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
) -> None:
    """Validate, then prove each Provisioner satisfiable against the instance-type catalog (Z3).

    Reports conflicting requirements (with the minimal set of lines), requirements no instance type meets, and
    unknown instance types, families, sizes and zones; lists the instance types of each satisfiable Provisioner.
    With --workloads: which provisioner launches a node for each workload and on which instance types, why none
    can (workload-unschedulable), equal-weight provisioners that both match (overlap), provisioners no workload
    reaches (shadowed), and the nodes every replica needs with the fleet's $/h (the capacity plan). PATHS are
    files or directories; default: policies/.
    """
    from karpenter_policy.policy.proof.check import check_command

    result = check_command(
        paths or DEFAULT_PATHS,
        output,
        fail_on_warn=fail_on_warn,
        catalog_file=catalog_file,
        region=region,
        timeout_ms=timeout_ms,
        values_file=values_file,
        workloads=workload_paths or None,
        scale=_scale_option(scale),
        spot_prices_file=spot_prices_file,
    )
    _finish(result)


def _scale_option(values: Sequence[str]) -> dict[str, int]:
    """`--scale KIND/NAME=N` values as a mapping; a malformed one is a usage error (exit 2)."""
    scale: dict[str, int] = {}
    for value in values:
        ref, _, count = value.partition("=")
        if "/" not in ref or not count.isdigit():
            raise click.BadParameter(f"{value!r} is not KIND/NAME=N (e.g. deployment/inflate=10)", param_hint="--scale")
        scale[ref] = int(count)
    return scale


@main.command("compile")
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
    "`git describe --always --dirty` of the repository holding PATHS, else 'unversioned'); git is not run then.",
)
@_fail_on_warn_option
def compile_(
    paths: tuple[str, ...],
    out: str,
    api: str,
    values_file: str | None,
    catalog_file: str | None,
    configmap_namespace: str,
    configmap_name: str,
    flux_escape: bool,
    default_instance_profile: str | None,
    node_role: str | None,
    report_format: str,
    policy_version: str | None,
    fail_on_warn: bool,
) -> None:
    """Check, then write constraint sets and manifests into DIR, or stream the manifests with -o -.

    PATHS are files or directories (*.yaml, *.yml, *.yaml.j2); default: policies/. Nothing is written when any
    error is found; with -o - stdout then stays empty and the report goes to stderr. In DIR, only files compile
    wrote there before are replaced or removed (listed in DIR/.karpenter-policy-output); others are left alone.
    """
    from karpenter_policy.policy.compilation.compiler import compile_command
    from karpenter_policy.policy.compilation.manifests import invalid_name

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
    result = compile_command(
        paths or DEFAULT_PATHS,
        out,
        api=api,
        values_file=values_file,
        catalog_file=catalog_file,
        configmap_namespace=configmap_namespace,
        configmap_name=configmap_name,
        flux_escape=flux_escape,
        default_instance_profile=default_instance_profile,
        node_role=node_role,
        report_format=report_format,
        fail_on_warn=fail_on_warn,
        policy_version=policy_version,
    )
    _finish(result)


@main.command()
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
    from karpenter_policy.policy.pinning.pin import load_policies, pin_command, schedulability_prover

    values, catalog_ = _values_and_catalog("pin", values_file, catalog_file, region, load=not no_prove)
    policies = load_policies(policy_paths or DEFAULT_PATHS, solve=not no_prove, catalog=catalog_, values=values)
    prover, notes = schedulability_prover(policies, paths)
    result = pin_command(paths, policies, write=write, output=output, prove=prover, notes=notes)
    _finish(result)


def _values_and_catalog(
    command: str, values_file: str | None, catalog_file: str | None, region: str | None, load: bool = True
) -> tuple[dict[str, Any] | None, Catalog | None]:
    """--values and --catalog/--region, loaded (policy.options); a problem with either exits 2."""
    from karpenter_policy.policy.options import OptionError, catalog_option, values_option

    try:
        values = values_option(values_file)
        return values, catalog_option(catalog_file, region) if load else None
    except OptionError as error:
        click.echo(f"karpenter-policy {command}: {error}", err=True)
        sys.exit(2)


@main.command()
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
@click.option("--region", help="Region of the embedded catalog (default us-east-1); must match --catalog's.")
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
    from karpenter_policy.catalog import load_catalog
    from karpenter_policy.policy.comparison.diff import diff_command

    values, catalog_ = _values_and_catalog("diff", values_file, catalog_file, region)
    result = diff_command(
        base,
        head,
        paths,
        catalog_ or load_catalog(),
        output=output,
        timeout_ms=timeout_ms,
        values=values,
        workload_paths=workload_paths,
        exit_code_on_diff=exit_code_on_diff,
        scale=_scale_option(scale),
    )
    _finish(result)


@main.group()
def catalog() -> None:
    """The EC2 instance-type catalog the solver and the compiler use (embedded: us-east-1)."""


@catalog.command("refresh")
@click.option("--region", default="us-east-1", show_default=True, help="EC2 region to describe.")
@click.option("--endpoint-url", metavar="URL", help="EC2 endpoint (default: AWS's; e.g. a local moto server).")
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(dir_okay=False),
    help="On-demand price table (default: the one shipped for the region).",
)
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False), help="Catalog file to write.")
def catalog_refresh(region: str, endpoint_url: str | None, prices_file: str | None, out: str) -> None:
    """Rebuild the catalog from DescribeInstanceTypes and DescribeInstanceTypeOfferings; written atomically."""
    from pathlib import Path

    from karpenter_policy.catalog import CatalogError
    from karpenter_policy.catalog.refresh import refresh_catalog
    from karpenter_policy.cloud import CloudError
    from karpenter_policy.cloud.aws.ec2_catalog_source import Ec2CatalogSource

    try:
        source = Ec2CatalogSource(region, endpoint_url)
        prices = Path(prices_file) if prices_file else None
        built = refresh_catalog(region, source, prices, Path(out), source_name=f"EC2 at {source.endpoint}")
    except (CatalogError, CloudError) as error:
        click.echo(f"karpenter-policy catalog refresh: {error}", err=True)
        sys.exit(2)
    zones = sorted({o.zone for it in built for o in it.offerings})
    click.echo(f"wrote {out}: {len(built)} instance types in {built.region} ({len(zones)} zones)")


@main.command()
@click.option("--tls-cert-file", type=click.Path(dir_okay=False), help="Serving certificate (PEM); reloaded on change.")
@click.option("--tls-private-key-file", type=click.Path(dir_okay=False), help="Its private key (PEM).")
@click.option(
    "--self-signed",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Make a CA and serving certificate in DIR (kept when present), print the caBundle, serve with them.",
)
@click.option("--generate-only", is_flag=True, help="With --self-signed: print the caBundle and exit.")
@click.option("--dns-name", "dns_names", multiple=True, help="With --self-signed: a name the certificate covers.")
@click.option("--address", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8443, show_default=True)
@click.option("--policies", multiple=True, type=click.Path(), help="Policy repository (templates, pinning rules).")
@click.option("--constraints", type=click.Path(file_okay=False), help="Compiled constraint sets (compile -o DIR).")
@click.option("--pinning", multiple=True, type=click.Path(), help="PinningPolicy files (default: from --policies).")
@click.option("--values", "values_file", type=click.Path(dir_okay=False), help="Template values (YAML mapping).")
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Instance-type catalog file.")
@click.option("--region", help="Region of the embedded catalog (default us-east-1).")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=1000, show_default=True, help="Solver time limit.")
@click.option("--solver-cache", type=click.IntRange(min=0), default=4096, show_default=True, help="Cached verdicts.")
@click.option("--max-body-bytes", type=click.IntRange(min=1024), default=4 * 1024 * 1024, show_default=True)
@click.option("--request-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True)
@click.option("--idle-timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True)
@click.option("--max-connections", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--handshake-timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
@click.option(
    "--admission-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Cap on a request's deadline (the API server's ?timeout= is used when shorter).",
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Worker processes.")
@click.option("--reload-interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
@click.option("--shutdown-delay", type=click.FloatRange(min=0), default=5.0, show_default=True)
def webhook(**options: object) -> None:
    """Serve the admission webhook over HTTPS: /mutate/provisioners, /validate/provisioners, /mutate/pods,
    /healthz, /readyz, /metrics. It runs the checks of `check` (see deploy/webhook/README.md)."""
    from karpenter_policy.webhook.command import main as webhook_main

    sys.exit(webhook_main(options))


@main.command()
@click.option("--constraints", required=True, metavar="DIR|configmap/NAMESPACE/NAME", help="Compiled constraint sets.")
@click.option("--cluster-name", required=True, help="The cluster's name (instance tags, node bootstrap).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Default: in-cluster, else ~/.kube/config.")
@click.option("--context", help="Kubeconfig context (default: the current one).")
@click.option("--region", help="EC2 region (default: the constraint sets').")
@click.option("--endpoint-url", metavar="URL", help="AWS endpoint for every service (e.g. a proxy).")
@click.option("--log-format", type=click.Choice(("text", "json")), default="text", show_default=True)
@click.option("--batch-idle-duration", default="1s", show_default=True, help="Batch closes after this idle.")
@click.option("--batch-max-duration", default="10s", show_default=True, help="Close a batch after this long at most.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: no metrics.")
@click.option("--metrics-address", default="0.0.0.0", show_default=True)
@click.option("--kubernetes-version", metavar="X.Y", help="The control plane's version (picks the EKS AMIs). Required.")
@click.option("--api-server-endpoint", metavar="URL", help="What nodes join (default: the kubeconfig's server).")
@click.option("--ca-bundle", metavar="BASE64", help="Cluster CA (default: kubeconfig's or in-cluster).")
@click.option("--dns-cluster-ip", help="Cluster DNS IP for the kubelet (default: the AMI's).")
@click.option("--default-instance-profile", help="For node templates that name no instanceProfile.")
@click.option("--catalog", "catalog_file", type=click.Path(dir_okay=False), help="Region's catalog.")
@click.option(
    "--provision-unschedulable-only/--provision-all-pending",
    "unschedulable_only",
    default=True,
    show_default=True,
    help="Wait for kube-scheduler's Unschedulable mark (a real cluster), or take every unbound pod and bind it.",
)
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True, help="One active replica (a Lease).")
@click.option("--leader-election-namespace", help="Namespace of the Lease (default: the pod's, else default).")
@click.option("--strategy", type=click.Choice(("cost", "karpenter")), default="cost", show_default=True)
@click.option("--interruption-queue", metavar="NAME", help="SQS queue of EventBridge interruption events.")
def reconcile(**options: object) -> None:
    """Launch EC2 nodes for pending pods from compiled constraint sets: watch, batch, schedule (the code of
    `check --workloads`), CreateFleet, register the node, bind (see docs/reconcile.md)."""
    from karpenter_policy.reconcile.command import main as reconcile_main

    sys.exit(reconcile_main(options))

if __name__ == "__main__":
    main()
