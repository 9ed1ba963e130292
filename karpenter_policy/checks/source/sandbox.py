"""The Jinja2 sandbox policy templates render in, with what rendering may cost bounded.

Jinja2's `SandboxedEnvironment` keeps a template away from Python's internals, but not from resource bombs:
nested `range(100000)` loops, `(9**256)**256`, `'x'|center(10**10)`, `'%0999999999d'|format(1)` or a string
doubled with `~` forty times hang or exhaust memory. :class:`BoundedSandbox` adds, per rendering pass:

* a **step budget** (:data:`MAX_STEPS`): every loop iteration, call, filter, operator, attribute and item lookup
  is a step; a **deadline** (:data:`MAX_SECONDS` for the whole file, checked at every step);
* a **size bound on every value an operation builds** (:data:`MAX_LENGTH` characters or items, integers of at
  most :data:`MAX_INT_BITS` bits), checked *before* the operations that can build far more than their inputs
  (`*`, `**`, `~`, `%`, `format`, `center`, `indent`, `wordwrap`, `replace`, `join`, `batch`, `slice`, `sum`,
  `tojson`, `lipsum`, `str.center`/`ljust`/`rjust`/`zfill`/`expandtabs`/`replace`/`join`/`translate`,
  `str.format`) and after every other one;
* an **allocation budget** (:data:`MAX_BUILT`): the sizes of all the values operations build, added up;
* a **memory safety net**: rendering stops when the process's peak resident memory has grown by more than
  :data:`MAX_GROWTH_BYTES` since the pass began (what the bounds above cannot see, e.g. list literals kept in a
  loop).

Exceeding any bound raises :class:`TemplateTooCostly` (a `SecurityError`) from inside the template, so the
failure is reported at the template line that caused it. The output size is bounded by the caller
(`templating`), which renders through `generate()` and counts.

Loops are bounded by rewriting the parsed template before it is compiled (:func:`bound_template`): the iterable
of every `{% for %}` goes through :meth:`BoundedSandbox.iterate`, and every `~` through
:meth:`BoundedSandbox.join_text` (a string join, as `~` is without autoescaping, which policy templates never use).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sized
from functools import wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.filters import make_attrgetter
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment, SandboxedFormatter
from jinja2.utils import Namespace, generate_lorem_ipsum
from jinja2.visitor import NodeTransformer
from markupsafe import EscapeFormatter, Markup

MAX_STEPS = 1_000_000
MAX_SECONDS = 5.0
MAX_LENGTH = 1_000_000
MAX_INT_BITS = 4096
MAX_BUILT = 16_000_000
MAX_GROWTH_BYTES = 512 * 2**20
MAX_LIPSUM_PARAGRAPHS = 100
MAX_LIPSUM_WORDS = 1000
_MEMORY_EVERY = 256  # steps between two looks at the process's memory
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB elsewhere

_CONTAINERS = (str, bytes, list, tuple, dict, set, frozenset)
_MUTABLE = (list, dict, set)
#: %-directives: the width and precision, each a number or `*` (taken from the arguments).
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")
_NUMBER = re.compile(r"\d+")


class TemplateTooCostly(SecurityError):
    """Rendering would exceed one of the bounds; the message says which."""


# --- sizes --------------------------------------------------------------------------------------------------


def text_size(value: Any, limit: int = MAX_LENGTH) -> int:
    """About how many characters `str(value)` has (at least `limit + 1` once it is known to exceed `limit`),
    found without building it: a list of a million references to one long string is sized, not printed."""
    if isinstance(value, str):
        return len(value)
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, bytes):
            total += 4 * len(item) + 3
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() * 3 // 10 + 2
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, Namespace):
            stack.append(object.__getattribute__(item, "_Namespace__attrs"))
        else:  # numbers, callables, loop and undefined objects: short
            total += 32
        if total > limit:
            return total
    return total


# --- the budget of one rendering pass ------------------------------------------------------------------------


class Budget:
    """What one rendering pass has spent: steps, the sizes of the values built, time and memory."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.steps = 0
        self.built = 0
        self._memory_start = _peak_memory()

    def step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > MAX_STEPS:
            raise TemplateTooCostly(
                f"the template runs more than {MAX_STEPS:,} loop iterations and operations; is a loop running away?"
            )
        if time.monotonic() > self.deadline:
            raise TemplateTooCostly(f"rendering takes more than {MAX_SECONDS:g} s")
        if self.steps % _MEMORY_EVERY == 0:
            self.check_memory()

    def check_memory(self) -> None:
        now = _peak_memory()
        if now is not None and self._memory_start is not None and now - self._memory_start > MAX_GROWTH_BYTES:
            raise TemplateTooCostly(f"rendering needs more than {MAX_GROWTH_BYTES // 2**20} MiB of memory")

    def allow(self, length: int, what: str = "a value") -> None:
        """Refuse to build `what` of `length` characters or items."""
        if length > MAX_LENGTH:
            raise TemplateTooCostly(f"the template builds {what} of more than {MAX_LENGTH:,} characters or items")

    def built_value(self, value: Any) -> Any:
        """Account for a value an operation built; refuse one beyond the bounds."""
        if isinstance(value, _CONTAINERS):
            self.allow(len(value))
            self.spend(len(value))
        elif isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise TemplateTooCostly(f"the template builds an integer of more than {MAX_INT_BITS} bits")
        return value

    def spend(self, amount: int) -> None:
        self.built += amount
        if self.built > MAX_BUILT:
            raise TemplateTooCostly(
                f"the template builds more than {MAX_BUILT:,} characters or items in all; is a loop running away?"
            )
        if amount > MAX_LENGTH // 4:
            self.check_memory()


def _peak_memory() -> int | None:
    """The process's peak resident memory in bytes (None where the platform cannot tell: Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * _RSS_UNIT


# --- guards: what an operation would build, before it builds it --------------------------------------------


def _width(value: Any, what: str) -> None:
    if isinstance(value, int) and value > MAX_LENGTH:
        raise TemplateTooCostly(f"{what} {value:,} is more than {MAX_LENGTH:,}")


def _check_text(budget: Budget, values: Iterable[Any], extra: int = 0) -> None:
    """The values are about to be turned into text (and joined, with `extra` characters more): refuse what would
    be too long. Each value is sized only up to what is left, so the whole check costs at most the bound."""
    total = extra
    budget.allow(total, "a string")
    for value in values:
        total += text_size(value, MAX_LENGTH - total)
        budget.allow(total, "a string")


def _percent_format(budget: Budget, template: str, arguments: Any) -> None:
    """`template % arguments`: widths and precisions within bounds, the arguments' text too."""
    items = arguments if isinstance(arguments, tuple) else (arguments,)
    for match in _PERCENT.finditer(template):
        for number in match.group(1, 2):
            if number == "*":
                for item in items:
                    _width(item, "a %-format width")
            elif number is not None:
                _width(int(number), "a %-format width")
    _check_text(budget, (template, *items))


def _length(value: Any) -> int:
    return len(value) if isinstance(value, Sized) else 0


def _materialised(budget: Budget, value: Any) -> Collection[Any]:
    """An iterable as a list (counted as it is read), so that its size is known; collections as they are."""
    if isinstance(value, Collection):
        return value
    items: list[Any] = []
    for item in value:
        budget.step()
        items.append(item)
        budget.allow(len(items), "a list")
    return items


def _replacement(text: str, old: Any, new: Any, count: Any = -1) -> None:
    if isinstance(old, str) and isinstance(new, str):
        hits = text.count(old) if old else len(text) + 1
        if isinstance(count, int) and count >= 0:
            hits = min(hits, count)
        if len(text) + hits * (len(new) - len(old)) > MAX_LENGTH:
            raise TemplateTooCostly(f"replace would build a string of more than {MAX_LENGTH:,} characters")


def _joined(budget: Budget, separator: Any, items: Collection[Any]) -> None:
    """`separator.join(items)`."""
    _check_text(budget, items, len(str(separator)) * max(len(items) - 1, 0))


def _text_method(
    budget: Budget, text: str | bytes, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Guards for the methods of str and bytes that can build far more than their input; the arguments to call
    the method with (an iterator given to `join` is read into a list first, so that it can be sized)."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    if name in ("center", "ljust", "rjust", "zfill"):
        _width(first, f"{name} to a width of")
    elif name == "expandtabs":
        size = first if isinstance(first, int) else 8
        tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
        budget.allow(len(text) + tabs * size, "a string")
    elif name == "replace" and isinstance(text, str) and len(args) >= 2:
        _replacement(text, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count", -1))
    elif name == "join" and len(args) == 1:
        items = _materialised(budget, args[0])
        _joined(budget, text, items)
        return (items,)
    elif name == "translate" and isinstance(first, Mapping):
        longest = max((len(v) for v in first.values() if isinstance(v, (str, bytes))), default=1)
        budget.allow(len(text) * longest, "a string")
    return args


# --- bounded filters and globals -----------------------------------------------------------------------------

#: Filters that turn their value (and arguments) into text.
_TEXT_FILTERS = frozenset(
    {
        "capitalize", "center", "e", "escape", "forceescape", "indent", "lower", "pprint", "replace", "safe",
        "string", "striptags", "title", "tojson", "trim", "truncate", "upper", "urlencode", "urlize", "wordcount",
        "wordwrap", "xmlattr",
    }
)  # fmt: skip


def _filter_guard(budget: Budget, name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Check a filter's arguments before it runs; the value it should run on (an iterator read into a list)."""
    def argument(position: int, key: str, default: Any = None) -> Any:
        return args[position] if len(args) > position else kwargs.get(key, default)

    if name in _TEXT_FILTERS:
        _check_text(budget, (value, *args, *kwargs.values()))
    if name == "center":
        _width(argument(0, "width"), "center to a width of")
    elif name == "indent":
        width = argument(0, "width", 4)
        if isinstance(width, (int, str)):
            _width(width if isinstance(width, int) else len(width), "indent by")
            lines = str(value).count("\n") + 1
            budget.allow(len(str(value)) + lines * (width if isinstance(width, int) else len(width)), "a string")
    elif name == "wordwrap":
        wrap = argument(2, "wrapstring") or "\n"
        width = argument(0, "width", 79)
        lines = len(str(value)) // max(width if isinstance(width, int) else 1, 1) + str(value).count("\n") + 1
        budget.allow(len(str(value)) + lines * len(str(wrap)), "a string")
    elif name == "replace":
        _replacement(str(value), argument(0, "old"), argument(1, "new"), argument(2, "count", -1))
    elif name == "format":
        _percent_format(budget, str(value), tuple(kwargs.values()) or args)
    elif name == "join":
        value = _materialised(budget, value)
        _joined(budget, argument(0, "d", ""), value)
    elif name == "tojson":
        indent = argument(0, "indent")
        if isinstance(indent, int) and indent > 64:
            raise TemplateTooCostly(f"tojson with an indent of {indent} (at most 64)")
    elif name == "batch":
        _width(argument(0, "linecount"), "batch of")
    elif name == "slice":
        _width(argument(0, "slices"), "slice into")
        budget.spend(argument(0, "slices") if isinstance(argument(0, "slices"), int) else 0)
    return value


def _bounded_filter(environment: BoundedSandbox, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    passes_context = getattr(function, "jinja_pass_arg", None) is not None

    @wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = environment.budget
        budget.step()
        head, (value, *rest) = (args[:1], args[1:]) if passes_context else ((), args)
        value = _filter_guard(budget, name, value, tuple(rest), kwargs)
        return budget.built_value(function(*head, value, *rest, **kwargs))

    return bounded


@jinja2.pass_environment
def _sum(
    environment: BoundedSandbox, iterable: Iterable[Any], attribute: str | int | None = None, start: Any = 0
) -> Any:
    """The `sum` filter; lists and tuples are concatenated in linear time (Python's sum is quadratic on them)."""
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    if not isinstance(start, (list, tuple)):
        return sum(iterable, start)
    total = list(start)
    for item in iterable:
        environment.budget.step()
        if type(item) is not type(start):
            raise TypeError(f'can only concatenate {type(start).__name__} (not "{type(item).__name__}")')
        environment.budget.allow(len(total) + len(item), "a list")
        total.extend(item)
    return type(start)(total)


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 (Jinja's names)
    if n > MAX_LIPSUM_PARAGRAPHS or max > MAX_LIPSUM_WORDS:
        raise TemplateTooCostly(
            f"lipsum of {n} paragraphs of up to {max} words (at most {MAX_LIPSUM_PARAGRAPHS} paragraphs of "
            f"{MAX_LIPSUM_WORDS} words)"
        )
    return generate_lorem_ipsum(n, html, min, max)


class _BoundedFormatter(SandboxedFormatter):
    """`str.format` with bounded widths and precisions (`'{:>1000000000}'.format(1)`) and field text."""

    def __init__(self, environment: BoundedSandbox, **options: Any) -> None:
        super().__init__(environment, **options)
        self.budget = environment.budget

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.budget.step()
        for number in _NUMBER.findall(format_spec):
            _width(int(number), "a format width")
        _check_text(self.budget, (value,))
        return self.budget.built_value(super().format_field(value, format_spec))


class _BoundedEscapeFormatter(_BoundedFormatter, EscapeFormatter):
    """`Markup.format`, escaping its arguments as Jinja's does."""


# --- the environment -------------------------------------------------------------------------------------------


class BoundedSandbox(SandboxedEnvironment):
    """A `SandboxedEnvironment` whose every step is counted and every value built is sized (see the module
    docstring). Call :meth:`begin` before compiling and before each rendering pass."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.budget = Budget(time.monotonic() + MAX_SECONDS)
        self.finalize = self._finalize
        self.filters = {name: _bounded_filter(self, name, f) for name, f in self.filters.items()}
        self.filters["sum"] = _bounded_filter(self, "sum", _sum)
        self.globals["lipsum"] = _lipsum

    def begin(self, deadline: float) -> None:
        """A fresh budget for a rendering pass that must end by `deadline` (time.monotonic())."""
        self.budget = Budget(deadline)

    # every step

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = self.budget
        budget.step()
        numbers = isinstance(left, int) and isinstance(right, int)
        if operator == "**" and numbers and abs(left) > 1 and right > 0:
            if left.bit_length() * right > MAX_INT_BITS:
                raise TemplateTooCostly(f"the template builds an integer of more than {MAX_INT_BITS} bits")
        elif operator == "*" and numbers:
            if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                raise TemplateTooCostly(f"the template builds an integer of more than {MAX_INT_BITS} bits")
        elif operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, _CONTAINERS) and isinstance(times, int):
                    budget.allow(len(sequence) * times, "a repeated sequence")
        elif operator == "+" and isinstance(left, _CONTAINERS) and isinstance(right, _CONTAINERS):
            budget.allow(len(left) + len(right), "a concatenation")
        elif operator == "%" and isinstance(left, str):
            _percent_format(budget, left, right)
        return budget.built_value(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's)
        budget = __self.budget
        budget.step()
        receiver = getattr(__obj, "__self__", None)
        if isinstance(receiver, (str, bytes)):
            args = _text_method(budget, receiver, getattr(__obj, "__name__", ""), args, kwargs)
        if not isinstance(receiver, _MUTABLE):
            return budget.built_value(super().call(__context, __obj, *args, **kwargs))
        before = len(receiver)
        result = super().call(__context, __obj, *args, **kwargs)
        budget.allow(len(receiver), "a collection")  # list.extend, dict.update, ...: the receiver grew
        budget.spend(max(len(receiver) - before, 0) + sum(_length(a) for a in args))
        return budget.built_value(result)

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.step()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.step()
        value = super().getitem(obj, argument)
        return self.budget.built_value(value) if isinstance(argument, slice) else value

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`str.format` / `str.format_map`, as Jinja's sandbox wraps them, with a bounded formatter."""
        if super().wrap_str_format(value) is None:
            return None
        text: str = value.__self__
        is_format_map = value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            if isinstance(text, Markup):
                formatter: _BoundedFormatter = _BoundedEscapeFormatter(self, escape=text.escape)
            else:
                formatter = _BoundedFormatter(self)
            if is_format_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one positional argument")
                mapping: Mapping[str, Any] = args[0]
                return type(text)(formatter.vformat(text, (), mapping))
            return type(text)(formatter.vformat(text, args, kwargs))

        return bounded

    # building text

    def concat(self, parts: Iterable[Any]) -> str:  # Environment.concat is "".join
        """The text of a block (`{% set %}…{% endset %}`, a macro's body): refused before it is joined when too
        long."""
        pieces = parts if isinstance(parts, list) else list(parts)
        self.budget.allow(sum(len(p) for p in pieces), "a block of text")
        text = "".join(pieces)
        self.budget.built_value(text)
        return text

    def join_text(self, parts: tuple[Any, ...]) -> str:
        """`a ~ b ~ c`."""
        budget = self.budget
        budget.step()
        _check_text(budget, parts)
        text = "".join(map(str, parts))
        budget.built_value(text)
        return text

    def iterate(self, iterable: Any) -> Iterator[Any]:
        """The iterable of a `{% for %}`, one step per item."""
        step = self.budget.step
        for item in iterable:
            step()
            yield item

    def _finalize(self, value: Any) -> Any:
        """Every `{{ expression }}`: refused before it is turned into text when that text would be too long."""
        self.budget.step()
        if not isinstance(value, str):
            _check_text(self.budget, (value,))
        return value


class _Bounding(NodeTransformer):
    """Loops iterate through `environment.iterate`; `~` joins through `environment.join_text`."""

    def visit_For(self, node: nodes.For) -> nodes.Node:  # noqa: N802 (the visitor's naming)
        self.generic_visit(node)
        node.iter = _environment_call("iterate", [node.iter], node.lineno)  # type: ignore[list-item]
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:  # noqa: N802
        self.generic_visit(node)
        return _environment_call("join_text", [nodes.Tuple(node.nodes, "load", lineno=node.lineno)], node.lineno)


def bound_template(template: nodes.Template) -> nodes.Template:
    """Rewrite a parsed template so that its loops and `~` go through the environment's budget."""
    bounded: nodes.Template = _Bounding().visit(template)
    return bounded


def _environment_call(method: str, args: list[nodes.Expr], lineno: int) -> nodes.Call:
    return nodes.Call(nodes.EnvironmentAttribute(method, lineno=lineno), args, [], None, None, lineno=lineno)


__all__ = [
    "MAX_BUILT",
    "MAX_GROWTH_BYTES",
    "MAX_INT_BITS",
    "MAX_LENGTH",
    "MAX_SECONDS",
    "MAX_STEPS",
    "BoundedSandbox",
    "Budget",
    "TemplateTooCostly",
    "bound_template",
    "text_size",
]
