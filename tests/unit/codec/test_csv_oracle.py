"""CSV: the per-table row encoders write the oracle's bytes (``csv_oracle``) for every option and value.

Every test runs twice: with the C record renderer (``_canaljson.CsvFields``, the production path)
and with it unset (``csv.NATIVE = None``: the Python reference, one formatter call per value).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import pickle
import random
import struct
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.codec import csv as csv_module
from sparkcdc.codec.csv import CSVEncoder
from sparkcdc.codec.values import split_update_if_key_changed, to_float32
from sparkcdc.config.replica import CSVConfig, ReplicaConfig, SinkConfig
from sparkcdc.errors import DecodeError
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.sink.storage.encoding import RowEncoder, split_update
from tests.unit.codec import csv_oracle
from tests.unit.codec.tables import ALL_TYPES, full_row, null_row, small_row

# ALL_TYPES plus DECIMAL scales 0 and unknown, a second FLOAT and a GEOMETRY (rendered as text).
EXTRA = (
    ColumnInfo("t_dec0", "decimal", precision=20, scale=0),
    ColumnInfo("t_dec_noscale", "decimal"),
    ColumnInfo("t_dec4", "decimal", precision=12, scale=4),
    ColumnInfo("t_float2", "float"),
    ColumnInfo("t_geo", "geometry"),
)
WIDE = dataclasses.replace(ALL_TYPES, columns=ALL_TYPES.columns + EXTRA, _pos={})
# Every column NOT NULL (NULLs still arrive).
NOT_NULL = dataclasses.replace(
    WIDE,
    table="not_null",
    columns=tuple(dataclasses.replace(c, nullable=False) for c in WIDE.columns),
    _pos={},
)
# A composite handle key over text and binary columns, and a table without any key.
COMPOSITE = dataclasses.replace(
    WIDE,
    table="composite",
    indexes=(IndexInfo("uk", ("t_varchar", "t_blob", "t_int"), unique=True),),
    columns=tuple(
        dataclasses.replace(c, nullable=False) if c.name in ("t_varchar", "t_blob", "t_int") else c
        for c in WIDE.columns
    ),
    _pos={},
)
KEYLESS = dataclasses.replace(WIDE, table="keyless", indexes=(), _pos={})
# One-column keys that are not integer types (rendered as a composite key) and a nullable one.
BIT_KEY = dataclasses.replace(
    WIDE, table="bit_key", indexes=(IndexInfo("PRIMARY", ("t_bit",), primary=True),)
)
YEAR_KEY = dataclasses.replace(
    WIDE, table="year_key", indexes=(IndexInfo("PRIMARY", ("t_year",), primary=True),)
)
INT_KEY = dataclasses.replace(
    WIDE, table="int_key", indexes=(IndexInfo("PRIMARY", ("t_tiny",), primary=True),)
)
TABLES = (WIDE, NOT_NULL, COMPOSITE, KEYLESS)


@pytest.fixture(autouse=True, params=["c", "reference"])
def renderer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which record renderer the encoders of the test use."""
    if request.param == "c":
        assert csv_module.NATIVE is not None, "the C extension sparkcdc.codec._canaljson is not built"
    else:
        monkeypatch.setattr(csv_module, "NATIVE", None)
    return str(request.param)


TEXT_ALPHABET = [
    '"', "'", ",", "|", "\\", "\r", "\n", "\t", "N", "a", "0", "=", "-", ".", "+", "/", "[", "*", "]",
    "é", "€", "😀", "中", "\udcff", "\udc80", "{", "}", " ", "b", "\x00", "\u2028",
]  # fmt: skip


def _text(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return rng.choice(["", "\\N", "NULL", "0000-00-00", "-838:59:59.00", '{"k": [1, 2]}', "a,b", "x,z"])
    return "".join(rng.choice(TEXT_ALPHABET) for _ in range(rng.randint(0, 14)))


def _double(rng: random.Random) -> float:
    r = rng.random()
    if r < 0.3:
        return rng.choice(
            [0.0, -0.0, math.nan, math.inf, -math.inf, 1e6, -1e6, 999999.9999999999, 123456.0, 1234567.0,
             1e-4, 0.0001, 1e-05, 0.00011, 1e21, 1e16, 1e15, 5e-324, 1.7976931348623157e308, 0.1, -2.5, 3.0]
        )  # fmt: skip
    if r < 0.6:
        return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]  # any bit pattern
    return rng.uniform(-1, 1) * 10 ** rng.randint(-8, 9)


def _float32(rng: random.Random) -> float:
    r = rng.random()
    if r < 0.3:
        return rng.choice([0.0, -0.0, math.nan, math.inf, -math.inf, 1e6, 3.4028234663852886e38, 1e-45])
    if r < 0.6:
        return struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0]
    return to_float32(rng.uniform(-1, 1) * 10 ** rng.randint(-10, 10))


def _decimal(rng: random.Random) -> Decimal:
    r = rng.random()
    if r < 0.25:
        return Decimal(
            rng.choice(
                ["0", "-0", "0E-30", "-0.00", "1E+5", "1.2E-10", "NaN", "-Infinity", "Infinity", "sNaN",
                 "12.5", "-12345678901234567890123456789012345.123456789012345678901234567890", "1E+70",
                 "0.0000001", "142.8571", "7"]
            )
        )  # fmt: skip
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40)))
    return Decimal(f"{rng.choice(['', '-'])}{digits}E{rng.randint(-40, 10)}")


def _typed(col: ColumnInfo, rng: random.Random) -> Any:
    """A value of the column's documented Python type (often an awkward one)."""
    t = col.type
    if t == "bit":
        return rng.choice([0, 1, 2**64 - 1, rng.getrandbits(64)])
    if t == "year":
        return rng.choice([0, 1901, 2155, rng.randint(1901, 2155)])
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        bits = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}[t]
        if col.unsigned:
            return rng.choice([0, 2**bits - 1, rng.getrandbits(bits)])
        return rng.choice(
            [0, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, rng.getrandbits(bits) - 2 ** (bits - 1)]
        )
    if t == "float":
        return _float32(rng)
    if t == "double":
        return _double(rng)
    if t == "decimal":
        return _decimal(rng)
    if col.is_binary:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 24)))
    return _text(rng)


def _odd(rng: random.Random) -> Any:
    """A value of some other type than the column's: rendered by its own type."""
    return rng.choice(
        [True, False, 7, -1, 2.5, -0.0, math.nan, 1e300, Decimal("1.50"), Decimal("NaN"), b"\x00\xff",
         bytearray(b"ab"), memoryview(b"cd"), "text", 'q"uote', "a\\b,c", ("tuple",)]
    )  # fmt: skip


def _image(table: TableInfo, rng: random.Random) -> tuple[Any, ...]:
    values: list[Any] = []
    for col in table.columns:
        r = rng.random()
        if r < 0.12:
            values.append(None)
        elif r < 0.17:
            values.append(_odd(rng))
        else:
            values.append(_typed(col, rng))
    return tuple(values)


def _row(table: TableInfo, rng: random.Random) -> RowChange:
    op = rng.choice("IUD")
    before = _image(table, rng) if op in "UD" else None
    after = _image(table, rng) if op in "IU" else None
    if op == "U" and rng.random() < 0.1:
        before = None  # an UPDATE without its pre-image
    r = rng.random()
    schema, name = table.schema, table.table
    if r < 0.05:
        schema, name = 'sc"h,|ema', "ta\\ble\n[*]"  # routed under another, awkward name
    ts = rng.choice([0, 1, 2**63 - 1, rng.getrandbits(62)])
    return RowChange(op, schema, name, table.version, ts, before, after)  # type: ignore[arg-type]


@functools.cache
def _pool(table: TableInfo) -> tuple[RowChange, ...]:
    """Random row changes of one table, made once (they do not depend on the options)."""
    rng = random.Random(table.table)
    return tuple(_row(table, rng) for _ in range(400))


@functools.cache
def _fixed_rows(table: TableInfo) -> list[RowChange]:
    """The shared awkward rows, on the wide table's extra columns too."""
    rng = random.Random(5)
    out = []
    for base in (full_row(1), null_row(2), small_row(3)):
        image = base + tuple(_typed(c, rng) for c in EXTRA)
        out += [
            RowChange("I", table.schema, table.table, 7, 1, None, image),
            RowChange("U", table.schema, table.table, 7, 2, image, image),
            RowChange("D", table.schema, table.table, 7, 3, image, None),
        ]
    return out


# (delimiter, quote): quotes that occur in decimal, hex or base64 text, delimiters that do
# (with backslash escaping), multi-character and non-ASCII delimiters.
DELIMITER_QUOTE = [
    (",", '"'),
    ("|", "'"),
    ("\t", '"'),
    ("[*]", ""),
    (",", ""),
    ("|@|", ""),
    ("ab", "="),
    (".", "0"),
    ("\\", '"'),
    ("€", "a"),
    ("|", "-"),
    ("a", ""),
    (".", ""),
    ("0", ""),
    ("=", ""),
    ("\\", ""),
    ("{}", "'"),
    ("{", "}"),
    ("|", "\\"),
]
NULLS = ["\\N", "", "NULL", 'N"U,LL']
TERMINATORS = ["\r\n", "\n", "\r", "||"]
FLAGS = list(itertools.product((False, True), repeat=4))  # include-commit-ts, old value, handle key, header


def _assert_same(enc: CSVEncoder, row: RowChange, table: TableInfo) -> None:
    try:
        want = csv_oracle.encode_row(enc, row, table)
    except Exception as exc:  # the encoder must fail the same way
        with pytest.raises(type(exc)) as got:
            enc.encode_row(row, table)
        assert str(got.value) == str(exc)
        return
    assert enc.encode_row(row, table) == want, (row, enc.csv, enc.terminator)


@pytest.mark.parametrize(("delimiter", "quote"), DELIMITER_QUOTE)
def test_encoder_equals_oracle_for_every_option(delimiter: str, quote: str) -> None:
    rng = random.Random(f"{delimiter}{quote}")
    combos = 0
    for k, ((ts, old, hk, header), binary) in enumerate(itertools.product(FLAGS, ("base64", "hex"))):
        csv = CSVConfig(
            delimiter=delimiter,
            quote=quote,
            null=NULLS[k % len(NULLS)],
            include_commit_ts=ts,
            binary_encoding_method=binary,
            output_old_value=old,
            output_handle_key=hk,
            output_field_header=header,
        )
        enc = CSVEncoder(csv, TERMINATORS[(k // 2) % len(TERMINATORS)])
        for table in TABLES:
            assert enc.header(table) == CSVEncoder(csv, enc.terminator).header(table)
            for row in _fixed_rows(table):
                _assert_same(enc, row, table)
            for row in rng.sample(_pool(table), 16):
                _assert_same(enc, row, table)
        combos += 1
    assert combos == 32


def test_encoder_equals_oracle_on_many_random_rows() -> None:
    rng = random.Random(2024)
    for csv, term in (
        (CSVConfig(), "\r\n"),
        (CSVConfig(quote="", delimiter="|", include_commit_ts=True, output_old_value=True), "\n"),
        (CSVConfig(quote="'", delimiter=";", binary_encoding_method="hex", output_handle_key=True), "\r\n"),
        (CSVConfig(quote="", delimiter="-", output_handle_key=True), "\n"),
        (CSVConfig(quote="1", delimiter=",", output_handle_key=True), "\n"),
    ):
        enc = CSVEncoder(csv, term)
        for _ in range(1500):
            table = rng.choice((*TABLES, BIT_KEY, YEAR_KEY, INT_KEY))
            _assert_same(enc, _row(table, rng), table)


def test_anomalies_like_the_oracle() -> None:
    enc = CSVEncoder(CSVConfig(include_commit_ts=True, output_old_value=True), "\n")
    image = full_row() + tuple(None for _ in EXTRA)
    cases = [
        RowChange("I", "test", "all_types", 7, 1, None, None),  # no image
        RowChange("I", "test", "all_types", 7, 1, None, image[:-1]),  # too short
        RowChange("U", "test", "all_types", 7, 1, image[:-1], image),  # short pre-image
        RowChange("X", "test", "all_types", 7, 1, None, image),  # type: ignore[arg-type]
        RowChange("I", "test", "all_types", 7, True, None, image),  # commit_ts not an int
        RowChange("D", "test", "all_types", 7, 1, image, None),
    ]
    for row in cases:
        _assert_same(enc, row, WIDE)
    no_columns = TableInfo("s", "empty", ())
    _assert_same(enc, RowChange("I", "s", "empty", 0, 1, None, ()), no_columns)


def test_tables_of_one_shape_share_code_but_not_names() -> None:
    enc = CSVEncoder(CSVConfig(), "\n")
    other = dataclasses.replace(WIDE, schema="s2", table="t2", _pos={})
    image = (*small_row(), Decimal(1), Decimal(2), Decimal(3), 1.5, "POINT(1 2)")
    a = enc.encode_row(RowChange("I", WIDE.schema, WIDE.table, 7, 1, None, image), WIDE)
    b = enc.encode_row(RowChange("I", "s2", "t2", 7, 1, None, image), other)
    assert a.startswith(b'"I","all_types","test",') and b.startswith(b'"I","t2","s2",')
    assert a.split(b",", 3)[3] == b.split(b",", 3)[3]
    assert enc.row_encoder(WIDE) is enc.row_encoder(WIDE)
    assert enc.row_encoder(WIDE).__code__ is enc.row_encoder(other).__code__


def test_pickled_encoder_and_row_encoder_match_the_oracle() -> None:
    cfg = ReplicaConfig(sink=SinkConfig(csv=CSVConfig(quote="'", null="NULL"), terminator="\n"))
    rng = random.Random(3)
    rows = [_row(WIDE, rng) for _ in range(200)]
    reference = CSVEncoder.from_config(cfg)
    ok, expected = [], []
    for r in rows:
        try:
            expected.append(csv_oracle.encode_row(reference, r, WIDE))
        except (ValueError, OverflowError):  # e.g. 1e300 in a FLOAT column: no float32 holds it
            continue
        ok.append(r)
    assert len(ok) > 150
    for enc in (CSVEncoder.from_config(cfg), pickle.loads(pickle.dumps(CSVEncoder.from_config(cfg)))):
        assert [enc.encode_row(r, WIDE) for r in ok] == expected
        assert enc.encode_rows(ok, WIDE) == expected
    row_enc = pickle.loads(pickle.dumps(RowEncoder("csv", cfg)))
    assert [row_enc.encode(r, WIDE) for r in ok] == expected
    assert row_enc.encode_many(ok, WIDE) == expected


def test_row_encoder_encode_many_for_canal_json_appends_the_terminator() -> None:
    cfg = ReplicaConfig(sink=SinkConfig(terminator="\n"))
    enc = RowEncoder("canal-json", cfg)
    rows = [
        RowChange("I", "test", "all_types", 7, 1 << 20, None, small_row(i) + (None,) * 5) for i in range(3)
    ]
    out = enc.encode_many(rows, WIDE)
    assert len(out) == 3 and all(o.endswith(b"}\n") for o in out)

    def without_ts(data: bytes) -> dict[str, Any]:  # "ts" is the wall clock at encoding
        msg: dict[str, Any] = json.loads(data)
        msg.pop("ts")
        return msg

    assert [without_ts(o) for o in out] == [without_ts(enc.encode(r, WIDE)) for r in rows]
    assert [without_ts(o)["data"][0]["id"] for o in out] == ["0", "1", "2"]


def test_split_update_matches_the_shared_rule() -> None:
    rng = random.Random(9)
    for table in (WIDE, COMPOSITE, KEYLESS):
        for _ in range(300):
            before = _image(table, rng)
            after = list(before)
            for i in rng.sample(range(len(after)), rng.randint(0, 3)):
                after[i] = rng.choice([_typed(table.columns[i], rng), None, before[i], True, 1])
            for row in (
                RowChange("U", "test", table.table, 7, 1, before, tuple(after)),
                RowChange("U", "test", table.table, 7, 1, None, tuple(after)),
                RowChange("I", "test", table.table, 7, 1, None, tuple(after)),
                RowChange("D", "test", table.table, 7, 1, before, None),
            ):
                assert split_update(row, table) == split_update_if_key_changed(row, table)
    key_change = RowChange("U", "test", "all_types", 7, 1, (1,) + (None,) * 34, (2,) + (None,) * 34)
    assert [r.op for r in split_update(key_change, WIDE)] == ["D", "I"]


def test_a_row_without_its_image_is_refused() -> None:
    for csv in (CSVConfig(), CSVConfig(quote="", output_old_value=True, include_commit_ts=True)):
        enc = CSVEncoder(csv, "\n")
        with pytest.raises(DecodeError, match="has no row image"):
            enc.encode_row(RowChange("I", "test", "all_types", 7, 1, None, None), WIDE)


def test_c_fields_are_built_for_every_column_kind(renderer: str) -> None:
    """With the extension every table gets its C fields; without it none (the reference renders)."""
    from sparkcdc.codec.csv_kinds import column_formatter

    enc = CSVEncoder(CSVConfig(), "\n")
    fields = csv_module.native_fields(enc, WIDE, [column_formatter(c, enc.style) for c in WIDE.columns])
    if renderer == "c":
        assert fields is not None and fields.width == len(WIDE.columns)
    else:
        assert fields is None


def test_undecodable_bytes_that_spell_a_non_ascii_delimiter_are_not_escaped(renderer: str) -> None:
    """With backslash escaping, the reference escapes the delimiter character, not its UTF-8 bytes."""
    table = TableInfo("s", "t", (ColumnInfo("id", "int"), ColumnInfo("v", "varchar", charset="utf8mb4")))
    enc = CSVEncoder(CSVConfig(delimiter="€", quote=""), "\n")
    # the bytes of U+20AC, each one undecodable on its own
    spelled = b"a\xe2\x82\xacb".decode("ascii", "surrogateescape")
    row = RowChange("I", "s", "t", 1, 1, None, (1, spelled))
    assert enc.encode_row(row, table) == "I€t€s€1€".encode() + b"a\xe2\x82\xacb\n"
    row = RowChange("I", "s", "t", 1, 1, None, (1, "a€b\udcff"))
    assert enc.encode_row(row, table) == "I€t€s€1€a\\€b".encode() + b"\xff\n"


def test_an_image_that_is_not_a_tuple_takes_the_reference(renderer: str) -> None:
    table = TableInfo("s", "t", (ColumnInfo("id", "int"), ColumnInfo("v", "varchar", charset="utf8mb4")))
    enc = CSVEncoder(CSVConfig(), "\n")
    as_list = RowChange("I", "s", "t", 1, 1, None, [1, 'x"y'])  # type: ignore[arg-type]
    assert enc.encode_row(as_list, table) == b'"I","t","s",1,"x""y"\n'
