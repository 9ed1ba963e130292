"""Command-line options declared once: each command's option set is a frozen dataclass whose fields carry their one
default, their help text and how they are spelt on the command line (:func:`option`, a :class:`Flag` in the
field's metadata). `cli_options` makes the click options from the dataclass and hands the command the dataclass
built from what click parsed (:func:`from_flags`), so a renamed flag or a default changed in one place only cannot
be: there is one place. No click here: the dataclasses stay importable by the layers below the CLI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from karpenter_policy import logformat

#: The metadata key of a field's :class:`Flag`.
FLAG = "karpenter_policy.flag"

Options = TypeVar("Options")


class OptionValueError(ValueError):
    """A flag's value (or a combination of flags) cannot be used; the message names the flag. The command says
    so on stderr and exits 2."""


@dataclass(frozen=True, slots=True)
class Flag:
    """How a field is given on the command line. `names`: click's declarations (`--x`, `-o`, `--a/--no-a`);
    `read`: the command line's text to the field's value (ValueError: why not, after the flag's name); `show`: the
    default as the command line writes it (for `read` fields, e.g. a duration's `15m`)."""

    names: tuple[str, ...]
    help: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    case_sensitive: bool = True
    #: An int (or float) flag within [low, high]; None: unbounded on that side.
    int_range: tuple[int | None, int | None] | None = None
    float_range: tuple[float | None, float | None] | None = None
    #: The lower bound of `float_range` excluded.
    min_open: bool = False
    #: A path flag: "file" (not a directory), "dir" (not a file) or "any"; `exists`: it must exist.
    path: Literal["file", "dir", "any"] | None = None
    exists: bool = False
    #: A positional argument (its one name is the field's), not a flag; `nargs` -1: any number of them.
    argument: bool = False
    nargs: int = 1
    multiple: bool = False
    required: bool = False
    is_flag: bool = False
    show_default: bool = False
    read: Callable[[Any], Any] | None = None
    show: Callable[[Any], Any] | None = None

    @property
    def name(self) -> str:
        """The flag's long name, as messages give it (`--metrics-port`; an argument's name in capitals)."""
        if self.argument:
            return self.names[0].upper()
        longs = [n.split("/")[0] for n in self.names if n.startswith("--")]
        return longs[0] if longs else self.names[0]


def option(default: Any = dataclasses.MISSING, *names: str, **flag: Any) -> Any:
    """A dataclass field given on the command line as `names` (see :class:`Flag` for `flag`); no `default`: the
    flag is required."""
    required = bool(flag.pop("required", False)) or default is dataclasses.MISSING
    spec = Flag(names, required=required, **flag)
    return dataclasses.field(default=default, metadata={FLAG: spec})


def required(*names: str, **flag: Any) -> Any:
    """A dataclass field given on the command line as `names`, which must be given (no default)."""
    return option(dataclasses.MISSING, *names, **flag)


def argument(default: Any = dataclasses.MISSING, name: str = "", **flag: Any) -> Any:
    """A dataclass field given as a positional argument called `name` (`PATHS`, `BASE`; see :class:`Flag`); no
    `default`: it must be given."""
    return option(default, name, argument=True, **flag)


def like(options_type: type[Any], name: str, **changes: Any) -> Any:
    """The field `name` of another option set, declared there once, for a command that takes the same flag —
    with `changes` to its :class:`Flag` (another help text, required) or its default (`default=`)."""
    field = next(f for f in dataclasses.fields(options_type) if f.name == name)
    default = changes.pop("default", field.default)
    spec = dataclasses.replace(field.metadata[FLAG], **changes)
    return dataclasses.field(default=default, metadata={FLAG: spec})


def log_format_option() -> Any:
    """`--log-format`, as every long-running command (reconcile, webhook) spells it."""
    return option(logformat.TEXT, "--log-format", choices=logformat.FORMATS, show_default=True)


def log_level_option() -> Any:
    """`--log-level`, as every long-running command (reconcile, webhook) spells it: lines below it are not written."""
    return option(
        logformat.DEFAULT_LEVEL,
        "--log-level",
        choices=tuple(logformat.LEVELS),
        case_sensitive=False,
        show_default=True,
        read=logformat.level_name,
        help="Lines below it are not written.",
    )


def flags(options_type: type[Any]) -> list[tuple[dataclasses.Field[Any], Flag]]:
    """The fields of an option set that are flags, in declaration order (the order of --help)."""
    return [(f, f.metadata[FLAG]) for f in dataclasses.fields(options_type) if FLAG in f.metadata]


def command_line_default(field: dataclasses.Field[Any], flag: Flag) -> Any:
    """The default as the command line gives it (None for a required flag)."""
    if field.default is dataclasses.MISSING:
        return None
    return flag.show(field.default) if flag.show is not None else field.default


def from_flags(options_type: type[Options], given: Mapping[str, Any]) -> Options:
    """The option set from click's parsed values (by field name; a field not among them keeps its default), each
    read by its flag's `read`; a value that cannot be read, or an option set that refuses itself, is an
    OptionValueError naming the flag."""
    values: dict[str, Any] = {}
    for field, flag in flags(options_type):
        if field.name not in given:
            continue  # the field's default
        value = given[field.name]
        if flag.read is not None and value is not None:
            try:
                value = flag.read(value)
            except ValueError as error:
                raise OptionValueError(f"{flag.name} {error}") from None
        values[field.name] = value
    return options_type(**values)


__all__ = [
    "FLAG", "Flag", "OptionValueError", "argument", "command_line_default", "flags", "from_flags", "like",
    "log_format_option", "log_level_option", "option", "required",
]
