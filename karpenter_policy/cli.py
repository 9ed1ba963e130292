"""`karpenter-policy` command line: parses flags, calls the policy package, maps results to exit codes.

Exit codes (DESIGN.md §3): 0 no errors; 1 findings of severity error (warnings too with --fail-on-warn);
2 usage error or the tool could not run (a missing or unreadable path, a bad flag).
"""

from __future__ import annotations

import sys

import click

from karpenter_policy import __version__
from karpenter_policy.policy.reporters import FORMATS, render

DEFAULT_PATHS = ("policies/",)

_output_option = click.option(
    "--output",
    "-o",
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
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as error:  # the last line of defence: a bug must not become a traceback
            click.echo(f"karpenter-policy: internal error: {type(error).__name__}: {error}", err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="karpenter-policy")
def main() -> None:
    """Validate, prove and compile Karpenter Provisioner policies kept in Git."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@_output_option
@_fail_on_warn_option
def validate(paths: tuple[str, ...], output: str, fail_on_warn: bool) -> None:
    """Parse, schema-check and apply Karpenter's defaulting and validation rules (no solver).

    PATHS are files or directories (searched recursively for *.yaml and *.yml); default: policies/.
    """
    from karpenter_policy.policy.validate import validate_paths

    report = validate_paths(paths or DEFAULT_PATHS)
    click.echo(render(report, output), nl=False)
    sys.exit(report.exit_code(fail_on_warn))


if __name__ == "__main__":
    main()
