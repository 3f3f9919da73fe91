"""MariaDB's UUID, INET4 and INET6 columns: the C decoder and the Python reference give the same text.

The binlog logs them as BINARY(16)/BINARY(4) (type STRING, metadata ``0xFE, size``, binary
charset): a 1-byte length, then the value without its trailing zero bytes. Only the tracked
shape says a column is one of them; the decoders then give the text MariaDB prints. The
expected texts below are what ``SELECT CAST(... AS INET6)`` / ``AS UUID`` print on MariaDB 10.11
(the integration tests hold random values against the live server).
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

import pytest

from sparkcdc.capture import tablemap as t
from sparkcdc.capture.rowcodec import (
    RowDecoder,
    TimestampRenderer,
    inet4_text,
    inet6_text,
    plugin_value,
    rows_event_images,
    uuid_text,
)
from sparkcdc.capture.tablemap import TableMap, with_plugin_types
from sparkcdc.errors import DecodeError, SchemaError
from sparkcdc.model import ColumnInfo, TableInfo
from tests.unit.capture.test_rowdecode_native import (
    BINARY,
    UTF8,
    _col,
    assert_same,
    bitmap_pool,
    decode_both,
    make_event,
    make_table,
)

# (text MariaDB 10.11 prints, the address it was cast from)
INET6_CASES = [
    ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),
    ("1::2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),  # one zero group is compressed too
    ("::1.2.3.4", "::1.2.3.4"),  # IPv4-compatible
    ("0:0:1::", "0:0:1::"),  # the longest run wins
    ("1:0:0:2::3", "1:0:0:2:0:0:0:3"),
    ("::102", "::0.0.1.2"),  # seven zero groups: not IPv4-compatible
    ("::ffff:0.0.0.0", "0:0:0:0:0:ffff:0:0"),
    ("::ffff:1:2:3", "::ffff:1:2:3"),
    ("::ffff:0:102:304", "::ffff:0:1.2.3.4"),
    ("abcd::ef", "ABCD::EF"),
    ("::", "::"),
    ("::1", "::1"),
    ("2001:db8::1", "2001:db8::1"),
    ("fe80::1:2:3:4", "fe80::1:2:3:4"),
]


@pytest.mark.parametrize(("text", "address"), INET6_CASES)
def test_inet6_text_is_mariadbs(text: str, address: str) -> None:
    assert inet6_text(ipaddress.IPv6Address(address).packed) == text


def test_uuid_and_inet4_text() -> None:
    raw = bytes.fromhex("6ccd780cbaba102695645b8c656024db")  # a time-based (v1) UUID: no reordering
    assert uuid_text(raw) == "6ccd780c-baba-1026-9564-5b8c656024db"
    assert inet4_text(bytes([10, 0, 0, 1])) == "10.0.0.1"
    # trailing zero bytes are cut in the binlog: '0.0.0.0' is logged as an empty string
    assert plugin_value("inet4", b"") == "0.0.0.0"
    assert plugin_value("inet6", b"") == "::"
    assert plugin_value("uuid", b"\x12") == "12000000-0000-0000-0000-000000000000"
    with pytest.raises(ValueError, match="17 bytes"):
        plugin_value("uuid", bytes(17))


PLUGIN = {"uuid": 16, "inet4": 4, "inet6": 16}


def plugin_table(rng: random.Random, kinds: list[str | None]) -> tuple[TableMap, TableInfo]:
    """A table map with BINARY(n) columns for the plugin kinds (None: a VARCHAR), and its shape."""
    cols = [
        _col(t.T_STRING, (t.T_STRING, PLUGIN[k]), cs=BINARY) if k else _col(t.T_VARCHAR, 40, cs=UTF8)
        for k in kinds
    ]
    tm = make_table(cols, rng)
    info = TableInfo(
        "db",
        tm.table,
        tuple(
            ColumnInfo(f"c{i}", k) if k else ColumnInfo(f"c{i}", "varchar", length=40, charset="utf8mb4")
            for i, k in enumerate(kinds)
        ),
    )
    return tm, info


def _values(images: Any) -> list[Any]:
    return [v for before, after in images for img in (before, after) if img is not None for v in img]


@pytest.mark.parametrize("seed", range(8))
def test_c_and_python_give_the_same_text(seed: int) -> None:
    rng = random.Random(f"plugin-{seed}")
    tsr = TimestampRenderer("UTC")
    for _ in range(6):
        kinds: list[str | None] = [
            rng.choice(["uuid", "inet4", "inet6", None]) for _ in range(rng.randint(1, 9))
        ]
        tm, info = plugin_table(rng, kinds)
        decs = (RowDecoder(tm, tsr, native=True, info=info), RowDecoder(tm, tsr, native=False, info=info))
        pool = bitmap_pool(rng, tm.column_count)
        for _ in range(40):
            op = rng.choice("IUD")
            version = rng.choice([1, 2])
            body = make_event(rng, tm, pool, op, version)
            got, want = decode_both(decs, body, version, op)
            assert not isinstance(want, Exception), want
            assert_same(got, want)
            # every plugin value came out as text, never bytes
            assert not any(isinstance(v, bytes) for v in _values(want))
        # the C decoder was used for every bitmap
        assert all(v is not None for v in decs[0]._layouts.values())


def test_without_the_shape_the_columns_stay_bytes() -> None:
    rng = random.Random(3)
    tm, _info = plugin_table(rng, ["uuid"])
    body = make_event(rng, tm, [1], "I", 2)
    for native in (True, False):
        images = rows_event_images(RowDecoder(tm, TimestampRenderer(), native=native), body, 2, "I")
        assert all(isinstance(v, bytes) and len(v) == 16 for v in _values(images) if v is not None)


def _event(tm: TableMap, values: list[bytes | None]) -> bytes:
    """A v2 WRITE_ROWS body of one row with every column present."""
    n = tm.column_count
    nulls = sum(1 << i for i, v in enumerate(values) if v is None)
    row = nulls.to_bytes((n + 7) // 8, "little") + b"".join(
        bytes([len(v)]) + v for v in values if v is not None
    )
    head = (42).to_bytes(6, "little") + b"\x01\x00" + (2).to_bytes(2, "little") + bytes([n])
    return head + ((1 << n) - 1).to_bytes((n + 7) // 8, "little") + row


def test_known_values_and_null_in_both_decoders() -> None:
    tm, info = plugin_table(random.Random(1), ["uuid", "inet4", "inet6", "inet6"])
    body = _event(
        tm,
        [
            bytes.fromhex("00112233445566778899aabbccddeeff"),
            b"\x0a\x00\x00\x01",
            b"",  # '::' is logged without its 16 zero bytes
            None,
        ],
    )
    want = [(None, ("00112233-4455-6677-8899-aabbccddeeff", "10.0.0.1", "::", None))]
    for native in (True, False):
        assert (
            rows_event_images(RowDecoder(tm, TimestampRenderer(), native=native, info=info), body, 2, "I")
            == want
        )


def test_an_oversized_value_is_a_decode_error_in_both() -> None:
    tm, info = plugin_table(random.Random(2), ["inet4"])
    body = _event(tm, [b"\x01\x02\x03\x04\x05"])
    for native in (True, False):
        with pytest.raises(DecodeError, match="INET4 value of 5 bytes"):
            rows_event_images(RowDecoder(tm, TimestampRenderer(), native=native, info=info), body, 2, "I")


def test_a_shape_that_does_not_fit_the_map_names_the_column() -> None:
    tm, _ = plugin_table(random.Random(4), [None])
    info = TableInfo("db", tm.table, (ColumnInfo("c0", "uuid"),), version=7)
    with pytest.raises(SchemaError, match=r"db\.t\.c0 is UUID .* not BINARY\(16\)"):
        with_plugin_types(tm, info)
