"""The C canal-json row renderer writes exactly the reference's bytes.

Randomized rows over an all-types table (and a few awkward shapes), every
combination of the row options, INSERT/UPDATE/DELETE and the large-message
forms: ``CanalJsonEncoder`` and ``ReferenceCanalJsonEncoder`` must return the
same bytes, or raise the same error. Each encoder test runs with the C renderer
(``codec._canaljson``) and with it unset (``native.EXTENSION = None``: the
fallback, rows by the reference).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import pickle
import random
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.codec.canal_json import (
    CanalJsonEncoder,
    ReferenceCanalJsonEncoder,
    decode_canal_json,
    json_str,
)
from sparkcdc.codec.canal_json import native as binding
from sparkcdc.codec.canal_json.native import NativeRows, native_columns
from sparkcdc.codec.canal_json.reference import TableLayout
from sparkcdc.codec.values import to_float32
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo

NOW = 1_700_000_000_123
BASE_TS = 429918007904436226

ALL_TYPES = TableInfo(
    schema="db",
    table="all_types",
    columns=(
        ColumnInfo("id", "bigint", unsigned=True, nullable=False),
        ColumnInfo("k2", "varchar", length=16, charset="utf8mb4", nullable=False),
        ColumnInfo("t_tiny", "tinyint"),
        ColumnInfo("t_utiny", "tinyint", unsigned=True),
        ColumnInfo("t_small", "smallint", zerofill=True),
        ColumnInfo("t_usmall", "smallint", unsigned=True),
        ColumnInfo("t_medium", "mediumint"),
        ColumnInfo("t_umedium", "mediumint", unsigned=True),
        ColumnInfo("t_int", "int", nullable=False),
        ColumnInfo("t_uint", "int", unsigned=True, zerofill=True),
        ColumnInfo("t_big", "bigint"),
        ColumnInfo("t_ubig", "bigint", unsigned=True),
        ColumnInfo("t_float", "float"),
        ColumnInfo("t_double", "double", nullable=False),
        ColumnInfo("t_float_ps", "float", precision=7, scale=3),
        ColumnInfo("t_dec", "decimal", precision=65, scale=30),
        ColumnInfo("t_dec0", "decimal", precision=10, scale=0, nullable=False),
        ColumnInfo("t_dec4", "decimal", precision=12, scale=4),
        ColumnInfo("t_dec_none", "decimal"),
        ColumnInfo("t_date", "date"),
        ColumnInfo("t_datetime", "datetime", fsp=6, nullable=False),
        ColumnInfo("t_ts", "timestamp", fsp=3),
        ColumnInfo("t_time", "time", fsp=2),
        ColumnInfo("t_year", "year"),
        ColumnInfo("t_char", "char", length=10, charset="utf8mb4"),
        ColumnInfo("t_varchar", "varchar", length=64, charset="utf8mb4", nullable=False),
        ColumnInfo("t_tinytext", "tinytext", charset="utf8mb4"),
        ColumnInfo("t_text", "text", charset="utf8mb4"),
        ColumnInfo("t_mediumtext", "mediumtext", charset="utf8mb4"),
        ColumnInfo("t_longtext", "longtext", charset="utf8mb4"),
        ColumnInfo("t_binary", "binary", length=4),
        ColumnInfo("t_varbinary", "varbinary", length=64, nullable=False),
        ColumnInfo("t_tinyblob", "tinyblob"),
        ColumnInfo("t_blob", "blob"),
        ColumnInfo("t_mediumblob", "mediumblob"),
        ColumnInfo("t_longblob", "longblob"),
        ColumnInfo("t_enum", "enum", elements=("a", "b,c", "it's", "")),
        ColumnInfo("t_enum2", "enum", elements=("x", "y"), nullable=False),
        ColumnInfo("t_set", "set", elements=("x", "y", "z")),
        ColumnInfo("t_bit", "bit", length=64),
        ColumnInfo("t_bit1", "bit", length=1),
        ColumnInfo("t_json", "json"),
        ColumnInfo("t_geometry", "geometry"),
        # names the generated code must quote and escape
        ColumnInfo('we{ird} "na\\me" <&>', "varchar", length=8, charset="utf8mb4"),
        ColumnInfo("ünï\u2028cödé", "int"),
    ),
    indexes=(
        IndexInfo("PRIMARY", ("id", "k2"), unique=True, primary=True),
        IndexInfo("uk", ("t_int",), unique=True),
    ),
    version=3,
)

NO_KEY = TableInfo(
    schema="db",
    table="no_key",
    columns=(
        ColumnInfo("a", "int"),
        ColumnInfo("b", "varchar", length=8, charset="utf8mb4"),
        ColumnInfo("c", "blob"),
    ),
)

UK_ONLY = TableInfo(
    schema="d{b}",
    table='t"<x>',
    columns=(
        ColumnInfo("u", "int", unsigned=True, nullable=False),
        ColumnInfo("v", "double"),
        ColumnInfo("w", "text", charset="utf8mb4"),
    ),
    indexes=(IndexInfo("uk", ("u",), unique=True),),
)

_TEXT_CHARS = [
    *"abcxyz019 -_.:,",
    "é",
    "ÿ",
    "中",
    "😀",
    '"',
    "\\",
    "<",
    ">",
    "&",
    "\n",
    "\r",
    "\t",
    "\x00",
    "\x08",
    "\x0c",
    "\x1f",
    "\x7f",
    "\u2028",
    "\u2029",
    "\udc80",
    "\udcff",
    "\ud800",
    "{",
    "}",
    "'",
]


def _text(rnd: random.Random, plain_bias: float = 0.7) -> str:
    n = rnd.choice((0, 1, 3, 8, 20))
    if rnd.random() < plain_bias:
        return "".join(rnd.choice("abcdefghij0123456789 -:.") for _ in range(n))
    return "".join(rnd.choice(_TEXT_CHARS) for _ in range(n))


def _float(rnd: random.Random) -> float:
    return rnd.choice(
        (
            0.0,
            -0.0,
            1.5,
            -2.25,
            3.14,
            1e21,
            1e-7,
            123456789.125,
            5e-324,
            1.7976931348623157e308,
            math.inf,
            -math.inf,
            math.nan,
            rnd.uniform(-1e6, 1e6),
            rnd.uniform(-1, 1) * 10 ** rnd.randint(-30, 30),
        )
    )


def _decimal(rnd: random.Random) -> Decimal:
    return rnd.choice(
        (
            Decimal("12.5"),
            Decimal("-0.00"),
            Decimal("0"),
            Decimal("1E+3"),
            Decimal("1.23E-7"),
            Decimal("99999999.9999"),
            Decimal(rnd.randint(-(10**12), 10**12)).scaleb(-rnd.randint(0, 8)),
            Decimal("12345678901234567890123456789012345.123456789012345678901234567890"),
        )
    )


def _odd(rnd: random.Random) -> Any:
    """A value of a type the column does not document (the reference decides what happens)."""
    return rnd.choice((True, False, 7, -3, 2.5, Decimal("1.5"), "12", b"\x01<", bytearray(b"ab"), "x"))


def _value(col: ColumnInfo, rnd: random.Random) -> Any:
    if col.nullable and rnd.random() < 0.15:
        return None
    if rnd.random() < 0.02:
        return _odd(rnd)
    t = col.type
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        bits = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}[t]
        if col.unsigned:
            return rnd.choice(
                (0, 1, 2 ** (bits - 1) - 1, 2 ** (bits - 1), 2**bits - 1, rnd.randrange(2**bits))
            )
        return rnd.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))
    if t == "float":
        f = _float(rnd)
        return to_float32(f) if not math.isfinite(f) or abs(f) < 3e38 else math.copysign(math.inf, f)
    if t == "double":
        return _float(rnd)
    if t == "decimal":
        return _decimal(rnd)
    if t == "date":
        return rnd.choice(("2024-01-02", "0000-00-00", "9999-12-31"))
    if t in ("datetime", "timestamp"):
        frac = "." + "".join(rnd.choice("0123456789") for _ in range(col.fsp)) if col.fsp else ""
        return rnd.choice(("2024-01-02 03:04:05", "0000-00-00 00:00:00")) + frac
    if t == "time":
        return rnd.choice(("-838:59:59.00", "12:00:00.50", "00:00:00.00"))
    if t == "year":
        return rnd.choice((0, 1901, 2024, 2155))
    if t == "bit":
        return rnd.randrange(2 ** (col.length or 1))
    if t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry"):
        return bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 1, 4, 20))))
    if t == "enum":
        return (
            rnd.choice((*col.elements, "", "not-an-element"))
            if rnd.random() < 0.1
            else rnd.choice(col.elements)
        )
    if t == "set":
        names = [e for e in col.elements if rnd.random() < 0.5]
        if rnd.random() < 0.05:
            names.append("bogus")
        return ",".join(names)
    if t == "json":
        return rnd.choice(('{"k": [1, 2]}', "[]", '"<tag>&"', "null", '{"s": "\\u2028"}'))
    return _text(rnd)


def _image(table: TableInfo, rnd: random.Random) -> tuple[Any, ...]:
    return tuple(_value(c, rnd) for c in table.columns)


def _changed(table: TableInfo, old: tuple[Any, ...], rnd: random.Random) -> tuple[Any, ...]:
    """A post-image: some columns changed, the rest equal (sometimes equal but not identical objects)."""
    out = []
    for c, v in zip(table.columns, old, strict=True):
        r = rnd.random()
        if r < 0.3:
            out.append(_value(c, rnd))
        elif r < 0.4 and isinstance(v, str):
            out.append("".join(v))  # an equal copy
        else:
            out.append(v)
    return tuple(out)


def _rows(table: TableInfo, rnd: random.Random, n: int) -> list[RowChange]:
    rows = []
    for i in range(n):
        ts = BASE_TS + (i << 18) + rnd.randrange(1 << 18)
        op = rnd.choice("IUD")
        img = _image(table, rnd)
        if op == "I":
            rows.append(RowChange("I", table.schema, table.table, table.version, ts, None, img, i))
        elif op == "D":
            rows.append(RowChange("D", table.schema, table.table, table.version, ts, img, None, i))
        else:
            before = None if rnd.random() < 0.03 else img
            rows.append(
                RowChange(
                    "U", table.schema, table.table, table.version, ts, before, _changed(table, img, rnd), i
                )
            )
    return rows


def _now() -> int:
    return NOW


@pytest.fixture(params=["native", "fallback"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which row renderer ``CanalJsonEncoder`` uses: the C extension, or the reference as when it is not built."""
    if request.param == "native":
        if binding.EXTENSION is None:
            pytest.skip("the C canal-json renderer is not built")
    else:
        monkeypatch.setattr(binding, "EXTENSION", None)
    return str(request.param)


def _check_path(new: CanalJsonEncoder, path: str) -> None:
    """Every table of ``new`` uses the renderer the test asked for."""
    assert new._tables
    for rows in new._tables.values():
        assert (rows.native is not None) == (path == "native")


OPTION_SETS = [
    dict(zip(("ext", "only_updated", "content_compatible", "delete_handle_only"), combo, strict=True))
    for combo in itertools.product((False, True), repeat=4)
]


def _encoders(opts: dict[str, bool]) -> tuple[ReferenceCanalJsonEncoder, CanalJsonEncoder]:
    def build(cls: type[ReferenceCanalJsonEncoder]) -> Any:
        return cls(
            None,
            opts["ext"],
            only_output_updated_columns=opts["only_updated"],
            content_compatible=opts["content_compatible"],
            delete_only_output_handle_key_columns=opts["delete_handle_only"],
            now_ms=_now,
        )

    return build(ReferenceCanalJsonEncoder), build(CanalJsonEncoder)


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except Exception as exc:  # the outcome being compared may be an error
        return "error", (type(exc), str(exc))


@pytest.mark.parametrize("opts", OPTION_SETS, ids=lambda o: "-".join(k for k, v in o.items() if v) or "plain")
def test_rows_are_byte_identical_to_the_reference(opts: dict[str, bool], path: str) -> None:
    rnd = random.Random(hash(tuple(opts.values())) & 0xFFFF)
    ref, new = _encoders(opts)
    checked = errors = 0
    for table, n in ((ALL_TYPES, 700), (NO_KEY, 150), (UK_ONLY, 150)):
        for row in _rows(table, rnd, n):
            expected = _outcome(ref.encode_row, row, table)
            assert _outcome(new.encode_row, row, table) == expected, (row, table.table)
            checked += 1
            errors += expected[0] == "error"
            if opts["ext"] and rnd.random() < 0.1:
                for method, extra in (
                    ("encode_row_handle_key_only", ()),
                    ("encode_row_claim_check", ("s3://b/x.json",)),
                ):
                    want = _outcome(getattr(ref, method), row, table, *extra)
                    assert _outcome(getattr(new, method), row, table, *extra) == want, (method, row)
    _check_path(new, path)
    # the randomized set really exercises the fast path: most rows encode, a few hit errors
    assert checked == 1000
    assert 0 < errors < checked // 4


def _runs(rows: list[RowChange], rnd: random.Random) -> list[list[RowChange]]:
    """The rows cut into runs of one commit_ts (a transaction's rows of one table), some with an intruder."""
    runs = []
    i = 0
    while i < len(rows):
        n = rnd.choice((1, 2, 5, 17, 60))
        ts = rows[i].commit_ts
        run = [dataclasses.replace(r, commit_ts=ts) for r in rows[i : i + n]]
        if len(run) > 2 and rnd.random() < 0.1:
            run[1] = dataclasses.replace(run[1], commit_ts=ts + 1)  # another commit_ts: the per-row path
        runs.append(run)
        i += n
    return runs


@pytest.mark.parametrize("opts", OPTION_SETS, ids=lambda o: "-".join(k for k, v in o.items() if v) or "plain")
def test_runs_are_byte_identical_to_the_reference(opts: dict[str, bool], path: str) -> None:
    """``rows_encoder`` (one C call per run) writes the reference's message for every row of a run."""
    rnd = random.Random(7 + (hash(tuple(opts.values())) & 0xFFFF))
    ref, new = _encoders(opts)
    checked = errors = 0
    for table, n in ((ALL_TYPES, 700), (NO_KEY, 150), (UK_ONLY, 150)):
        for run in _runs(_rows(table, rnd, n), rnd):
            want: list[bytes] = []
            failure: tuple[str, Any] | None = None
            for row in run:
                outcome = _outcome(ref.encode_row, row, table)
                if outcome[0] == "error":
                    failure = outcome
                    break
                want.append(outcome[1])
            got = _outcome(new.rows_encoder(run[0], table), run)
            if failure is not None:
                assert got == failure, run
                errors += 1
            else:
                assert got == ("ok", want), run
                checked += len(run)
    _check_path(new, path)
    # most runs encode (a run stops at its first row the reference refuses)
    assert checked > 100
    assert errors > 0


def test_odd_images_are_handled_like_the_reference(path: str) -> None:
    ref, new = _encoders(
        {"ext": True, "only_updated": False, "content_compatible": False, "delete_handle_only": False}
    )
    img = tuple(_value(c, random.Random(1)) for c in NO_KEY.columns)
    odd_rows = [
        RowChange("I", "db", "no_key", 0, BASE_TS, None, (*img, "extra column")),
        RowChange("I", "db", "no_key", 0, BASE_TS, None, img[:2]),
        RowChange("I", "db", "no_key", 0, BASE_TS, None, None),
        RowChange("D", "db", "no_key", 0, BASE_TS, None, img),
        RowChange("U", "db", "no_key", 0, BASE_TS, img[:1], img),
        RowChange("U", "db", "no_key", 0, BASE_TS, (*img, 1), img),
        # the same table under another name (renamed tables share a shape)
        RowChange("I", "other", "name", 0, BASE_TS, None, img),
    ]
    for row in odd_rows:
        assert _outcome(new.encode_row, row, NO_KEY) == _outcome(ref.encode_row, row, NO_KEY), row
    _check_path(new, path)


def test_output_is_the_canal_json_the_decoder_reads(path: str) -> None:
    _, new = _encoders(
        {"ext": True, "only_updated": True, "content_compatible": False, "delete_handle_only": False}
    )
    row = RowChange(
        "U",
        "db",
        "uk_only",
        0,
        BASE_TS,
        (1, 2.5, "a<b"),
        (1, 3.0, "a<b"),
    )
    table = TableInfo(schema="db", table="uk_only", columns=UK_ONLY.columns, indexes=UK_ONLY.indexes)
    msg = decode_canal_json(new.encode_row(row, table))
    assert msg.type == "UPDATE"
    assert msg.data == [{"u": "1", "v": "3", "w": "a<b"}]
    assert msg.old == [{"v": "2.5"}]
    assert msg.commit_ts == BASE_TS


def test_a_pickled_encoder_rebuilds_its_tables(path: str) -> None:
    ref, new = _encoders(
        {"ext": True, "only_updated": False, "content_compatible": True, "delete_handle_only": True}
    )
    rows = _rows(ALL_TYPES, random.Random(5), 50)
    new.encode_row(rows[0], ALL_TYPES)
    copy = pickle.loads(pickle.dumps(new))
    assert copy._tables == {}
    for row in rows:
        assert _outcome(copy.encode_row, row, ALL_TYPES) == _outcome(ref.encode_row, row, ALL_TYPES)


# ------------------------------------------------------------------ the C renderer on its own


def _native() -> Any:
    if binding.EXTENSION is None:
        pytest.skip("the C canal-json renderer is not built")
    return binding.EXTENSION


def test_native_string_escaping_is_json_str() -> None:
    native = _native()
    rnd = random.Random(11)
    specials = [*_TEXT_CHARS, "\ud7ff", "\ue000", "\uffff", "\U0010ffff", "\udbff", "\udfff", "\u0800"]
    samples = ["", "plain", "a" * 5000, ("<&>" * 2000) + "\udc80", "\u00e9" * 3000 + "\u2029"]
    for _ in range(3000):
        n = rnd.choice((1, 2, 5, 17, 64))
        samples.append("".join(rnd.choice(specials) for _ in range(n)))
    samples.extend(chr(c) for c in range(0x3000))
    samples.extend(chr(c) for c in range(0xD700, 0xE100))
    for s in samples:
        assert native.json_str(s) == json_str(s).encode("utf-8", "surrogatepass"), repr(s)


def test_native_bytes_escaping_is_latin1_json_str() -> None:
    native = _native()
    rnd = random.Random(12)
    samples = [b"", bytes(range(256)), bytes(range(256)) * 40]
    samples.extend(bytes(rnd.randrange(256) for _ in range(rnd.choice((1, 3, 20, 300)))) for _ in range(2000))
    for b in samples:
        assert native.json_latin1(b) == json_str(b.decode("latin-1")).encode(), b


def test_native_columns_render_like_the_reference_formatters() -> None:
    """``Columns.render`` of an all-types image: the reference's '"key":token' pieces, joined."""
    native = _native()
    plan = TableLayout(ALL_TYPES, "db", "all_types", False)
    columns = native_columns(plan.cols, ALL_TYPES)
    assert columns.width == len(ALL_TYPES.columns)
    rnd = random.Random(13)
    for _ in range(500):
        img = _image(ALL_TYPES, rnd)
        try:
            want: Any = ",".join(
                c.key + ("null" if img[c.index] is None else c.fmt(img[c.index])) for c in plan.cols
            )
        except Exception as exc:  # the reference formatter refuses the value: so must the renderer
            with pytest.raises(type(exc)):
                columns.render(img)
            continue
        assert columns.render(img) == want.encode(), img
    assert columns.render(img[:-1]) is None
    assert columns.render(list(img)) is None  # type: ignore[arg-type]
    assert native.Columns(0, [], Decimal).render(()) == b""


def test_native_columns_integers_of_any_width() -> None:
    native = _native()
    col = ColumnInfo("n", "bigint")
    plan = TableLayout(TableInfo(schema="d", table="t", columns=(col,)), "d", "t", False)
    columns = native.Columns(1, [(native.R_INT, 0, b'"n":', -1, plan.cols[0].fmt, None)], Decimal)
    for v in (
        0,
        1,
        -1,
        9,
        10,
        -10,
        2**63 - 1,
        -(2**63),
        2**63,
        2**64 - 1,
        2**64,
        -(2**63) - 1,
        10**40,
        -(10**40),
    ):
        assert columns.render((v,)) == f'"n":"{v}"'.encode(), v


def test_native_columns_refuse_bad_specs() -> None:
    native = _native()

    def fmt(v: Any) -> str:
        return '"x"'

    with pytest.raises(ValueError):
        native.Columns(1, [(native.R_INT, 1, b'"a":', -1, fmt, None)], Decimal)
    with pytest.raises(ValueError):
        native.Columns(1, [(99, 0, b'"a":', -1, fmt, None)], Decimal)
    with pytest.raises(ValueError):
        native.Columns(1, [(native.R_ENUM, 0, b'"a":', -1, fmt, None)], Decimal)
    with pytest.raises(TypeError):
        native.Columns(1, [(native.R_INT, 0, "not bytes", -1, fmt, None)], Decimal)
    with pytest.raises(TypeError):
        native.Columns(1, [(native.R_INT, 0, b'"a":', -1, "not callable", None)], Decimal)
    with pytest.raises(TypeError):
        native.Columns(1, [(native.R_INT, 0, b'"a":', -1, fmt, None)], "not a type")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        native.Columns(-1, [], Decimal)
    columns = native.Columns(1, [(native.R_OTHER, 0, b'"a":', -1, lambda v: 5, None)], Decimal)
    with pytest.raises(TypeError):
        columns.render((1,))  # a formatter must return str
    with pytest.raises(TypeError):
        columns.message("p", None, "m", (1,))  # type: ignore[call-arg]


def test_native_message_changed_lists_only_the_changed_columns() -> None:
    native = _native()

    def fmt(v: Any) -> str:
        return json_str(str(v))

    columns = native.Columns(
        3,
        [
            (native.R_INT, 0, b'"a":', -1, fmt, None),
            (native.R_STR, 1, b'"b":', -1, fmt, None),
            (native.R_OTHER, 2, b'"c":', -1, fmt, None),
        ],
        Decimal,
    )
    assert columns.message_changed("P[{", (1, "x", 3), '}],"data":[{', (1, "y", 4), "}]}") == (
        b'P[{"b":"x","c":"3"}],"data":[{"a":"1","b":"y","c":"4"}]}'
    )
    assert columns.message_changed("P[{", (1, "x", None), "|", (1, "x", None), "") == (
        b'P[{|"a":"1","b":"x","c":null'
    )
    # a token that grew past the scratch buffer on the stack
    long = "<" * 5000
    assert columns.message_changed("", (1, long, 3), "|", (1, long + "!", 3), "") == (
        b'"b":' + json_str(long).encode() + b'|"a":"1","b":' + json_str(long + "!").encode() + b',"c":"3"'
    )
    # not handled here: an image that is not a tuple of the table's width
    assert columns.message_changed("P", (1, "x"), "M", (1, "x", 3), "S") is None
    assert columns.message_changed("P", (1, "x", 3), "M", [1, "x", 3], "S") is None  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        columns.message_changed("P", (1, "x", 3), "M", (1, "x", 3))  # type: ignore[call-arg]


def test_native_rows_answer_none_for_images_they_do_not_take() -> None:
    _native()
    layout = TableLayout(NO_KEY, "db", "no_key", False)
    rows = binding.native_rows(layout)
    assert rows is not None
    img = (1, "b", b"c")
    assert rows.all.message("h", None, "", img, "t") == b'h"a":"1","b":"b","c":"c"t'
    assert rows.handle.message("h", None, "", img, "t") == b"ht"  # no handle key
    assert rows.all.message("h", None, "", img[:2], "t") is None
    assert rows.all.message("h", None, "", list(img), "t") is None  # type: ignore[arg-type]
    assert rows.all.message("h", img[:2], "m", img, "t") is None
    assert rows.all.message_changed("h", img[:2], "m", img, "t") is None
    assert rows.all.message_changed("h", img, "m", (*img, 1), "t") is None


def test_a_failure_in_the_native_path_raises() -> None:
    """No fallback on errors: what the C renderer raises reaches the caller."""
    native = _native()
    enc = CanalJsonEncoder(None, True, now_ms=_now)
    row = RowChange("I", "db", "no_key", 0, BASE_TS, None, (1, "b", b"c"))
    enc.encode_row(row, NO_KEY)
    (rows,) = enc._tables.values()

    def broken(v: Any) -> str:
        raise RuntimeError("renderer bug")

    spec = [
        (native.R_OTHER, i, f'"{c.name}":'.encode(), -1, broken, None) for i, c in enumerate(NO_KEY.columns)
    ]
    bad = native.Columns(len(NO_KEY.columns), spec, Decimal)
    rows.native = NativeRows(bad, bad)
    with pytest.raises(RuntimeError, match="renderer bug"):
        enc.encode_row(row, NO_KEY)
    with pytest.raises(RuntimeError, match="renderer bug"):
        enc.row_encoder(row, NO_KEY)(row)


def test_without_the_extension_rows_take_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding, "EXTENSION", None)
    assert binding.native_rows(TableLayout(NO_KEY, "db", "no_key", False)) is None
    ref, new = _encoders(
        {"ext": True, "only_updated": True, "content_compatible": False, "delete_handle_only": False}
    )
    for row in _rows(NO_KEY, random.Random(21), 200):
        assert _outcome(new.encode_row, row, NO_KEY) == _outcome(ref.encode_row, row, NO_KEY), row
    _check_path(new, "fallback")
