"""The FULL row-image check on the layouts a rows event body can have.

The bodies of MariaDB's own events are checked in
``tests/integration/capture/test_row_image_binlog.py``; these cover what MariaDB 10.11 does not
write: version 2 events (MySQL) with extra data, a last bitmap byte with its unused bits set,
long column counts and bodies cut short.
"""

from __future__ import annotations

import time

import pytest

from sparkcdc.capture.row_image import check_full_image
from sparkcdc.errors import DecodeError, UpstreamSetupError


def _packed(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    return b"\xfd" + n.to_bytes(3, "little")


def _body(ncol: int, *bitmaps: int, version: int = 1, extra: bytes = b"", rows: bytes = b"\x00\x01") -> bytes:
    head = (42).to_bytes(6, "little") + b"\x01\x00"
    if version == 2:
        head += (2 + len(extra)).to_bytes(2, "little") + extra
    nb = (ncol + 7) // 8
    return head + _packed(ncol) + b"".join(b.to_bytes(nb, "little") for b in bitmaps) + rows


def _full(n: int) -> int:
    return (1 << n) - 1


def _check(body: bytes, version: int, op: str, count: int) -> None:
    check_full_image(body, version, op, count, table="db.t", where="mysql-bin.000003:1234")


@pytest.mark.parametrize("ncol", [1, 3, 8, 9, 13, 64, 300, 4096])
@pytest.mark.parametrize("version", [1, 2])
def test_full_images_pass(ncol: int, version: int) -> None:
    extra = b"\x00\x02\x00\x01" if version == 2 else b""  # MySQL's extra row info
    for op in ("I", "D"):
        _check(_body(ncol, _full(ncol), version=version, extra=extra), version, op, ncol)
    _check(_body(ncol, _full(ncol), _full(ncol), version=version, extra=extra), version, "U", ncol)


def test_a_last_byte_with_its_unused_bits_set_is_still_full() -> None:
    _check(_body(3, 0xFF), 1, "I", 3)
    _check(_body(13, 0xFFFF, 0xFFFF), 1, "U", 13)


@pytest.mark.parametrize(
    ("op", "bitmaps", "missing"),
    [
        ("I", (0b011,), "row has 2 of 3 columns"),
        ("D", (0b001,), "before image has 1 of 3 columns"),
        ("U", (0b001, 0b111), "before image has 1 of 3 columns"),
        ("U", (0b111, 0b010), "after image has 1 of 3 columns"),
        ("U", (0b011, 0b011), "before image has 2 of 3 columns, after image has 2 of 3 columns"),
    ],
)
def test_a_partial_image_is_refused(op: str, bitmaps: tuple[int, ...], missing: str) -> None:
    with pytest.raises(UpstreamSetupError) as info:
        _check(_body(3, *bitmaps), 1, op, 3)
    msg = str(info.value)
    assert msg.startswith(f"rows event of db.t at mysql-bin.000003:1234 is not a FULL row image ({missing})")
    assert (
        "SET GLOBAL binlog_row_image=FULL" in msg and "binlog_row_image=FULL under [mysqld] in my.cnf" in msg
    )


def test_the_one_missing_column_of_a_wide_table_is_found() -> None:
    ncol = 300
    with pytest.raises(UpstreamSetupError, match=r"after image has 299 of 300 columns"):
        _check(_body(ncol, _full(ncol), _full(ncol) & ~(1 << 257)), 1, "U", ncol)


def test_an_event_with_fewer_columns_than_its_table_map_is_refused() -> None:
    with pytest.raises(UpstreamSetupError, match=r"row has 2 of 3 columns"):
        _check(_body(2, 0b11), 1, "I", 3)


def test_a_truncated_body_is_a_decode_error() -> None:
    body = _body(13, _full(13), _full(13))
    with pytest.raises(
        DecodeError, match=r"db.t at mysql-bin.000003:1234 is truncated inside its column bitmaps"
    ):
        _check(body[:11], 1, "U", 13)
    with pytest.raises(DecodeError, match=r"truncated before its column bitmaps"):
        _check(body[:8], 1, "U", 13)


def test_the_check_is_cheap() -> None:
    """It runs on every rows event: a few microseconds."""
    body = _body(40, _full(40), _full(40), rows=b"\x00" * 4000)
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        check_full_image(body, 1, "U", 40, table="db.t", where="f:4")
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 10e-6, f"{per_call * 1e6:.2f} us per call"
