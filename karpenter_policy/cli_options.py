"""The click options of a command made from its option set (`optionspec`): one `click.option` (or `click.argument`)
per field, in the field order, with the field's default, help text and spelling; the command function receives the
option set. A
value the option set refuses (`optionspec.OptionValueError`) is one line on stderr and exit 2, as a bad flag."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from functools import update_wrapper
from typing import Any, TypeVar

import click

from karpenter_policy.optionspec import Flag, OptionValueError, command_line_default, flags, from_flags

Options = TypeVar("Options")


def click_type(flag: Flag) -> click.ParamType[Any] | None:
    """The click type of a flag (None: text, or a flag without a value)."""
    if flag.choices is not None:
        return click.Choice(flag.choices, case_sensitive=flag.case_sensitive)
    if flag.int_range is not None:
        return click.IntRange(*flag.int_range)
    if flag.float_range is not None:
        return click.FloatRange(*flag.float_range, min_open=flag.min_open)
    if flag.path == "file":
        return click.Path(dir_okay=False, exists=flag.exists)
    if flag.path == "dir":
        return click.Path(file_okay=False, exists=flag.exists)
    if flag.path == "any":
        return click.Path(exists=flag.exists)
    return None


def _argument(field: dataclasses.Field[Any], flag: Flag) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A positional argument: its name is the field's."""
    return click.argument(
        field.name, type=click_type(flag), nargs=flag.nargs, metavar=flag.metavar, required=flag.required
    )


def with_options(
    options_type: type[Options], command: str
) -> Callable[[Callable[[Options], None]], Callable[..., None]]:
    """Decorate a command function taking `options_type`: click gets its options, the function the option set."""

    def decorate(function: Callable[[Options], None]) -> Callable[..., None]:
        def callback(**given: Any) -> None:
            try:
                options = from_flags(options_type, given)
            except OptionValueError as error:
                click.echo(f"karpenter-policy {command}: {error}", err=True)
                sys.exit(2)
            function(options)

        decorated: Callable[..., None] = update_wrapper(callback, function, updated=())  # its name and --help
        for field, flag in reversed(flags(options_type)):
            if flag.argument:
                decorated = _argument(field, flag)(decorated)
                continue
            settings: dict[str, Any] = {
                "type": click_type(flag),
                "help": flag.help,
                "metavar": flag.metavar,
                "multiple": flag.multiple,
                "required": flag.required,
                "show_default": flag.show_default,
            }
            if flag.is_flag:
                settings["is_flag"] = True
            default = command_line_default(field, flag)
            if default not in (None, ()) and not flag.required:
                settings["default"] = default
            decorated = click.option(*flag.names, field.name, **settings)(decorated)
        return decorated

    return decorate


__all__ = ["click_type", "with_options"]
