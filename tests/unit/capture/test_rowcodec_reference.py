"""The Python reference row decoder on its own.

Values read wherever they sit in a body, hand-checked values per column type, reads past
the end, and no source generated at run time anywhere in ``sparkcdc.capture``. The C
decoder is compared against this reference in ``test_rowdecode_native.py``.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.capture import tablemap as t
from sparkcdc.capture.rowcodec import (
    TimestampRenderer,
    decimal_size,
    decode_decimal,
    read_image,
    read_value,
)
from sparkcdc.capture.tablemap import TableMap

SHAPES = [(1, 0), (4, 4), (9, 0), (9, 9), (10, 2), (12, 4), (18, 9), (19, 0), (20, 10), (38, 6), (65, 30)]
UTF8, LATIN1, BINARY = 45, 8, 63
UTC = TimestampRenderer("UTC")


def one_column(
    real: int,
    meta: int | tuple[int, int] = 0,
    *,
    unsigned: bool = False,
    cs: int | None = None,
    elements: list[str] | None = None,
) -> TableMap:
    """A table map of one column."""
    return TableMap(
        table_id=1,
        schema="db",
        table="t",
        types=[t.T_STRING if real in (t.T_ENUM, t.T_SET) else real],
        meta=[meta],
        nullable=[True],
        unsigned=[unsigned],
        names=["c"],
        charsets=[cs],
        enum_values={0: elements or []} if real == t.T_ENUM else {},
        set_values={0: elements or []} if real == t.T_SET else {},
        real_types=[real],
    )


def value(tm: TableMap, raw: bytes, tsr: TimestampRenderer = UTC) -> Any:
    """The value of ``raw`` (exactly one value) read from the middle of a body."""
    buf = b"\xaa" * 3 + raw + b"\x55" * 2
    got, end = read_value(tm, tsr, 0, buf, 3)
    assert end == 3 + len(raw)
    return got


@pytest.mark.parametrize(("precision", "scale"), SHAPES)
def test_decimal_value_matches_decode_decimal(precision: int, scale: int) -> None:
    rng = random.Random(precision * 100 + scale)
    n = decimal_size(precision, scale)
    tm = one_column(t.T_NEWDECIMAL, (precision, scale))
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(n))
        # the value must not depend on what surrounds it
        assert value(tm, raw) == decode_decimal(raw, precision, scale), raw.hex()
        assert str(value(tm, raw)) == str(decode_decimal(raw, precision, scale))


def test_decimal_examples_of_the_mysql_manual() -> None:
    tm = one_column(t.T_NEWDECIMAL, (14, 4))
    assert repr(value(tm, bytes.fromhex("810DFB38D204D2"))) == repr(Decimal("1234567890.1234"))
    assert repr(value(tm, bytes.fromhex("7EF204C72DFB2D"))) == repr(Decimal("-1234567890.1234"))


def test_integers_signed_and_unsigned() -> None:
    for real, size in ((t.T_TINY, 1), (t.T_SHORT, 2), (t.T_INT24, 3), (t.T_LONG, 4), (t.T_LONGLONG, 8)):
        assert value(one_column(real), b"\xff" * size) == -1
        assert value(one_column(real, unsigned=True), b"\xff" * size) == 256**size - 1
        assert value(one_column(real), b"\x02" + b"\x00" * (size - 1)) == 2
    assert value(one_column(t.T_YEAR, unsigned=True), b"\x00") == 0
    assert value(one_column(t.T_YEAR, unsigned=True), bytes([124])) == 2024


def _datetime2(y: int, mo: int, d: int, h: int, mi: int, s: int) -> bytes:
    packed = ((y * 13 + mo) << 22) | (d << 17) | (h << 12) | (mi << 6) | s
    return (packed + 0x8000000000).to_bytes(5, "big")


def test_temporal_values() -> None:
    date = (2024 * 16 * 32 + 2 * 32 + 29).to_bytes(3, "little")
    assert value(one_column(t.T_DATE), date) == "2024-02-29"
    dt = _datetime2(2024, 2, 29, 13, 45, 7)
    assert value(one_column(t.T_DATETIME2, 0), dt) == "2024-02-29 13:45:07"
    assert (
        value(one_column(t.T_DATETIME2, 6), dt + (123456).to_bytes(3, "big")) == "2024-02-29 13:45:07.123456"
    )
    # fsp 3 and 4: the fraction in units of 100 microseconds
    assert value(one_column(t.T_DATETIME2, 3), dt + (1230).to_bytes(2, "big")) == ("2024-02-29 13:45:07.123")
    time2 = (0x800000 + (12 << 12 | 34 << 6 | 56)).to_bytes(3, "big")
    assert value(one_column(t.T_TIME2, 0), time2) == "12:34:56"
    ts = (1_700_000_000).to_bytes(4, "big") + (500).to_bytes(2, "big")
    assert value(one_column(t.T_TIMESTAMP2, 3), ts) == "2023-11-14 22:13:20.050"
    assert value(one_column(t.T_TIMESTAMP2, 3), ts, TimestampRenderer("+08:00")) == "2023-11-15 06:13:20.050"
    assert value(one_column(t.T_TIMESTAMP2, 3), b"\x00" * 6) == "0000-00-00 00:00:00.000"


def test_strings_enums_sets_and_bits() -> None:
    assert value(one_column(t.T_VARCHAR, 40, cs=LATIN1), b"\x01\xe9") == "é"
    assert value(one_column(t.T_VARCHAR, 1200, cs=UTF8), b"\x02\x00\xc3\xa9") == "é"
    assert value(one_column(t.T_VARCHAR, 40, cs=UTF8), b"\x01\xff") == "\udcff"
    assert value(one_column(t.T_STRING, (t.T_STRING, 4), cs=BINARY), b"\x02ab") == b"ab\x00\x00"
    assert value(one_column(t.T_VARCHAR, 4, cs=BINARY), b"\x02ab") == b"ab"
    assert value(one_column(t.T_BLOB, 2, cs=BINARY), b"\x03\x00xyz") == b"xyz"
    assert value(one_column(t.T_GEOMETRY, 4, cs=UTF8), b"\x01\x00\x00\x00\xff") == b"\xff"
    names = ["a", "b", "c"]
    enum = one_column(t.T_ENUM, (t.T_ENUM, 1), elements=names)
    assert [value(enum, bytes([k])) for k in (0, 1, 3, 4)] == ["", "a", "c", ""]
    assert value(one_column(t.T_SET, (t.T_SET, 1), elements=names), b"\x05") == "a,c"
    assert value(one_column(t.T_BIT, (2, 1)), b"\x02\x01") == 513


def test_image_with_nulls_and_absent_columns() -> None:
    tm = TableMap(
        table_id=1,
        schema="db",
        table="t",
        types=[t.T_LONG, t.T_TINY, t.T_LONG],
        meta=[0, 0, 0],
        nullable=[True] * 3,
        unsigned=[False] * 3,
        names=["a", "b", "c"],
        charsets=[None] * 3,
        real_types=[t.T_LONG, t.T_TINY, t.T_LONG],
    )
    # columns 0 and 2 present; column 2 (bit 1 of the NULL bitmap) is NULL
    row, end = read_image(tm, UTC, (0, 2), b"\x02" + b"\x07\x00\x00\x00", 0)
    assert row == (7, None, None)
    assert end == 5


def test_a_value_past_the_end_raises_index_error() -> None:
    with pytest.raises(IndexError, match="column 0 needs 4 bytes at byte 1"):
        read_value(one_column(t.T_LONG), UTC, 0, b"\x00\x01\x02", 1)
    with pytest.raises(
        IndexError, match="column 0 needs 9 bytes at byte 2 but the event body ends at byte 5"
    ):
        read_value(one_column(t.T_VARCHAR, 40, cs=UTF8), UTC, 0, b"\x00\x09abc", 1)
