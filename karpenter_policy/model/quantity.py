"""Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`), parsed as apimachinery's `resource.ParseQuantity`
parses them, and bounded as Kubernetes bounds them.

Grammar (Go's `parseQuantityString`, after the surrounding white space JSON decoding trims): a sign, digits with
an optional decimal point, and a suffix: a binary one (`Ki` `Mi` `Gi` `Ti` `Pi` `Ei`), a decimal one (`n` `u`
`m` none `k` `M` `G` `T` `P` `E`), or a decimal exponent (`e`/`E` and a signed integer, `1e3`, `5E-2`). Like Go,
a value is rounded up (away from zero) to nano precision (`0.1n` → `1n`), and digits are optional (`.`, `k`, `-`
are zero, except where Go's exact path refuses them).

Bounds: a quantity holds at most 2^63-1 in magnitude as an integer (`Quantity.Value()`): Go caps a binary-suffixed
value there, and a larger decimal one has no integer value. :func:`read_quantity` never computes beyond that: it
sizes the number from its digit and exponent counts first, and an out-of-range value comes back *capped* at
±(2^63-1) and flagged (:attr:`Quantity.out_of_range`), so no consumer ever works on a huge number. An exponent
that does not fit a 32-bit integer (Go's exponent is an `int32`) is not a quantity at all: :class:`QuantityError`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import ROUND_UP, Context, Decimal

#: The largest magnitude a Kubernetes quantity holds as an integer (Go's int64).
MAX_QUANTITY = 2**63 - 1
_MAX = Decimal(MAX_QUANTITY)
_INT32 = (-(2**31), 2**31 - 1)
_NANO = Decimal("1e-9")

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
#: Go's scanner: sign, digits, an optional fraction, suffix letters, then an optional signed exponent.
_GRAMMAR = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
#: What Go's strings.TrimSpace removes (unicode.IsSpace), which is what `Quantity.UnmarshalJSON` trims.
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(map(chr, range(0x2000, 0x200B)))
_EXAMPLES = "examples: 2, 500m, 1.5Gi, 2k, 1e3"


class QuantityError(ValueError):
    """A value Kubernetes cannot read as a quantity; the message says why."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: `value` is exact (rounded up to nano precision) and within ±(2^63-1);
    `out_of_range` says the value written was larger in magnitude and was capped."""

    value: Decimal
    out_of_range: bool = False


def read_quantity(raw: object) -> Quantity:
    """The quantity `raw` (a string, an int, or a float as JSON carries it). Raises QuantityError."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str, Decimal)):
        raise QuantityError(f"{_show(raw)} is not a quantity ({_EXAMPLES})")
    if isinstance(raw, int):
        if abs(raw) > MAX_QUANTITY:
            return Quantity(_MAX if raw > 0 else -_MAX, True)
        return Quantity(Decimal(raw))
    if isinstance(raw, (float, Decimal)):
        if not (raw.is_finite() if isinstance(raw, Decimal) else math.isfinite(raw)):
            raise QuantityError(f"{_show(raw)} is not a quantity: it is not a finite number")
        text = repr(raw) if isinstance(raw, float) else str(raw)  # Decimal(0.1) would carry binary noise
    else:
        text = raw.strip(_GO_SPACE)
    return _parse(text, raw)


def _parse(text: str, raw: object) -> Quantity:
    if not text:
        raise QuantityError(f"{_show(raw)} is not a quantity: it is empty ({_EXAMPLES})")
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise QuantityError(f"{_show(raw)} is not a quantity ({_EXAMPLES})")
    sign, whole, fraction, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4)
    base, exponent = _suffix(suffix, raw)
    digits = (whole + fraction).lstrip("0")
    if not digits:
        # Go reads a value without digits (or only zeros) as zero, except on its exact path, which needs a digit.
        if not (whole or fraction) and (exponent < -9 or (base == 2 and exponent >= 50)):
            raise QuantityError(f"{_show(raw)} is not a quantity: it has no digits ({_EXAMPLES})")
        return Quantity(Decimal(0))
    # The value is int(digits) * 10**scale * base**exponent; size it by its digit count before computing it:
    # int(digits) * 10**scale lies in [10**(order - 1), 10**order).
    scale = -len(fraction) + (exponent if base == 10 else 0)
    order = len(digits) + scale
    if order >= 20:  # at least 10**19 (times 2**10 for a binary suffix): beyond 2**63 - 1
        return Quantity(-_MAX if sign == "-" else _MAX, True)
    if order <= (-9 if base == 10 else -28):  # below 1e-9 (10**-28 * 2**60 for binary): Go rounds up to 1n
        return Quantity(-_NANO if sign == "-" else _NANO)
    context = Context(prec=len(digits) + 40, Emax=10**9, Emin=-(10**9))
    value = Decimal(f"{digits}E{scale}")
    if base == 2:
        value = context.multiply(value, Decimal(2**exponent))
    value = value.quantize(_NANO, rounding=ROUND_UP, context=context)
    if sign == "-":
        value = -value
    if abs(value) > _MAX:
        return Quantity(-_MAX if sign == "-" else _MAX, True)
    return Quantity(Decimal(int(value)) if value == value.to_integral_value() else value.normalize(context))


def _suffix(suffix: str, raw: object) -> tuple[int, int]:
    """(base, exponent) of a suffix, as Go's `quantitySuffixer.interpret` reads it."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise QuantityError(
            f"{_show(raw)} is not a quantity: unknown suffix {suffix!r} (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, "
            "T, P, E or an exponent such as e3)"
        )
    digits = exponent.group(1).lstrip("+-").lstrip("0")
    if len(digits) > 10 or not _INT32[0] <= int(exponent.group(1)) <= _INT32[1]:
        raise QuantityError(
            f"{_show(raw)} is not a quantity: its exponent is beyond what Kubernetes reads (a 32-bit integer)"
        )
    return 10, int(exponent.group(1))


def canonical(value: Decimal, binary: bool) -> str:
    """`value` as apimachinery's `Quantity.String()` writes it: in `binary` form (a sum that began with a binary
    quantity, a whole value of 1024 or more) the largest of `Ki`…`Ei` that divides it, else the largest decimal
    suffix (`n` `u` `m` none `k` … `E`) whose mantissa is whole (`1200m`, `2k`, `1536Mi`). Exact at nano
    precision."""
    if binary and value == value.to_integral_value() and abs(value) >= 1024:  # Go: below 1024, decimal
        whole = int(value)
        for suffix, shift in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            if whole % (1 << shift) == 0:
                return f"{whole // (1 << shift)}{suffix}"
        return str(whole)
    for suffix, exponent in sorted(_DECIMAL_SUFFIXES.items(), key=lambda item: -item[1]):
        mantissa = value.scaleb(-exponent)
        if mantissa == mantissa.to_integral_value() and (value or not exponent):
            return f"{int(mantissa)}{suffix}"
    return f"{int(value.scaleb(9).to_integral_value(ROUND_UP))}n"


def is_binary(raw: object) -> bool:
    """Whether a quantity is written with a binary suffix (`1Gi`): `Quantity.Format` BinarySI."""
    return isinstance(raw, str) and raw.strip().endswith(tuple(_BINARY_SUFFIXES))


def _show(raw: object) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["MAX_QUANTITY", "Quantity", "QuantityError", "canonical", "is_binary", "read_quantity"]
