"""The compiled value readers of the row decoder give exactly what the reference helpers give."""

from __future__ import annotations

import random

import pytest

from sparkcdc.capture.rowcodec import (
    date_lines,
    datetime2_lines,
    decimal_reader,
    decimal_size,
    decode_date,
    decode_datetime2,
    decode_decimal,
    frac_bytes,
    frac_expr,
    read_frac,
)

SHAPES = [(1, 0), (4, 4), (9, 0), (9, 9), (10, 2), (12, 4), (18, 9), (19, 0), (20, 10), (38, 6), (65, 30)]


@pytest.mark.parametrize(("precision", "scale"), SHAPES)
def test_decimal_reader_matches_decode_decimal(precision: int, scale: int) -> None:
    rng = random.Random(precision * 100 + scale)
    n = decimal_size(precision, scale)
    read = decimal_reader(precision, scale)
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(n))
        # the reader must not depend on what surrounds the value
        buf = b"\xaa" * 3 + raw + b"\x55" * 2
        assert read(buf, 3) == decode_decimal(raw, precision, scale), raw.hex()
        assert str(read(buf, 3)) == str(decode_decimal(raw, precision, scale))


def test_decimal_reader_is_cached() -> None:
    assert decimal_reader(12, 4) is decimal_reader(12, 4)


def _compile(lines: list[str]) -> object:
    src = "def f(buf, p):\n" + "".join(f"    {line}\n" for line in lines) + "    return v\n"
    ns: dict[str, object] = {"from_bytes": int.from_bytes}
    exec(src, ns)
    return ns["f"]


@pytest.mark.parametrize("fsp", range(7))
def test_datetime2_inline_matches_helper(fsp: int) -> None:
    rng = random.Random(fsp)
    f = _compile(datetime2_lines("v", fsp))
    size = 5 + frac_bytes(fsp)
    for _ in range(3000):
        raw = bytes([0x80 | rng.randrange(128)]) + bytes(rng.randrange(256) for _ in range(size - 1))
        buf = b"\x01\x02" + raw + b"\x03"
        assert f(buf, 2) == decode_datetime2(buf, 2, fsp), (fsp, raw.hex())  # type: ignore[operator]


@pytest.mark.parametrize("fsp", range(7))
def test_frac_expr_matches_read_frac(fsp: int) -> None:
    rng = random.Random(10 + fsp)
    f = _compile([f"v = {frac_expr(fsp, 'p+1')}"])
    for _ in range(1000):
        buf = bytes(rng.randrange(256) for _ in range(6))
        assert f(buf, 0) == read_frac(buf, 1, fsp)  # type: ignore[operator]


def test_date_inline_matches_helper() -> None:
    f = _compile(date_lines("v"))
    rng = random.Random(7)
    for _ in range(3000):
        buf = bytes(rng.randrange(256) for _ in range(5))
        assert f(buf, 1) == decode_date(buf, 1)  # type: ignore[operator]
