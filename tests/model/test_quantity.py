"""Quantities as Kubernetes (apimachinery's `resource.ParseQuantity`) reads and bounds them, cheaply."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from karpenter_policy.model.quantity import MAX_QUANTITY, Quantity, QuantityError, canonical, read_quantity

CAPPED = Decimal(MAX_QUANTITY)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("2k", Decimal(2000)),
        ("500m", Decimal("0.5")),
        ("1.5Gi", Decimal(1610612736)),
        ("1e3", Decimal(1000)),
        ("5E-2", Decimal("0.05")),
        ("1e+16", Decimal(10**16)),
        ("1E", Decimal(10**18)),  # the decimal suffix E, not an exponent
        ("1Ei", Decimal(2**60)),
        ("-1.5", Decimal("-1.5")),
        ("+3", Decimal(3)),
        ("1.", Decimal(1)),
        (".5", Decimal("0.5")),
        ("007", Decimal(7)),
        ("0.1n", Decimal("1e-9")),  # rounded up to nano precision, away from zero
        ("-0.1n", Decimal("-1e-9")),
        ("1.0000000001", Decimal("1.000000001")),
        ("1e-2147483648", Decimal("1e-9")),
        ("9223372036854775807", CAPPED),
        (" 1Gi\n", Decimal(2**30)),  # JSON decoding trims white space
        (1000, Decimal(1000)),
        (0.5, Decimal("0.5")),
        (1e16, Decimal(10**16)),
        ("k", Decimal(0)),  # Go reads no digits as zero
        ("-", Decimal(0)),
        ("0e-10", Decimal(0)),
    ],
)
def test_values_as_kubernetes_reads_them(raw: object, value: Decimal) -> None:
    assert read_quantity(raw) == Quantity(value)


@pytest.mark.parametrize(
    "raw",
    ["1e99999999", "1e2147483647", "9223372036854775808", "8Ei", "-1e30", "1" + "0" * 4400, 2**70, 1e308],
)
def test_beyond_int64_is_capped_and_flagged(raw: object) -> None:
    quantity = read_quantity(raw)
    assert quantity.out_of_range and abs(quantity.value) == CAPPED


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("1e2147483648", "32-bit"),  # Go's exponent is an int32
        ("1e9999999999999", "32-bit"),
        ("", "empty"),
        ("1 cpu", "not a quantity"),
        ("1_000", "not a quantity"),  # Python's Decimal takes underscores, Go does not
        ("NaN", "not a quantity"),
        ("inf", "not a quantity"),
        (float("inf"), "finite"),
        (float("nan"), "finite"),
        ("1e", "unknown suffix"),
        ("1kk", "unknown suffix"),
        ("5i", "unknown suffix"),
        ("1e1.5", "not a quantity"),
        ("Ei", "no digits"),  # Go's exact path needs a digit
        (True, "not a quantity"),
        ([1], "not a quantity"),
    ],
)
def test_what_kubernetes_cannot_read(raw: object, reason: str) -> None:
    with pytest.raises(QuantityError, match=reason):
        read_quantity(raw)


def test_huge_spellings_are_sized_not_computed() -> None:
    """A million digits or an exponent of two billion costs a scan of the text, not a big number."""
    spellings = ["1e2147483647", "9" * 1_000_000, "0." + "0" * 1_000_000 + "1", "1." + "1" * 1_000_000 + "Ei"]
    started = time.perf_counter()
    results = [read_quantity(s) for s in spellings]
    assert time.perf_counter() - started < 5
    assert [r.out_of_range for r in results] == [True, True, False, False]
    assert results[2].value == Decimal("1e-9")


@pytest.mark.parametrize(
    ("value", "binary", "shown"),
    [
        ("1.2", False, "1200m"),
        ("2", False, "2"),
        ("2000", False, "2k"),
        ("1500", False, "1500"),
        ("0", False, "0"),
        ("0.000000001", False, "1n"),
        (str(1536 * 2**20), True, "1536Mi"),
        (str(2**30), True, "1Gi"),
        ("1000", True, "1k"),  # Go writes a binary quantity below 1024 in decimal
        ("1500", True, "1500"),
        ("0.5", True, "500m"),  # a fraction has no binary form: decimal, as Go falls back to
    ],
)
def test_canonical_writes_a_sum_as_quantity_string_does(value: str, binary: bool, shown: str) -> None:
    """apimachinery `Quantity.String()` (resource/quantity.go `CanonicalizeBytes`): the largest suffix with a
    whole mantissa, binary for a quantity that began binary — the form the API server's messages show a sum in."""
    assert canonical(Decimal(value), binary) == shown
