"""The C row decoder gives exactly the values of the Python reference (``rowcodec.read_value``).

Random table maps over every supported type and metadata shape, random row images (NULLs,
partial columns-present bitmaps, inserts/updates/deletes, v1 and v2 events), compared value by
value and type by type; cut bodies must raise DecodeError in both decoders.
"""

from __future__ import annotations

import random
import struct
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.capture import rowcodec
from sparkcdc.capture import tablemap as t
from sparkcdc.capture.charsets import codec_of
from sparkcdc.capture.mysqldecimal import _decimal_layout
from sparkcdc.capture.rowcodec import (
    RowDecoder,
    TimestampRenderer,
    decimal_size,
    decode_decimal,
    frac_bytes,
    rows_event_images,
)
from sparkcdc.capture.tablemap import TableMap
from sparkcdc.errors import DecodeError
from tests.unit.mysql8.jsonb_encode import encode as jsonb_encode

Images = list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]]

UTF8, LATIN1, GBK, ASCII, BINARY, BIG5 = 45, 8, 28, 11, 63, 1

DECIMALS = [
    (1, 0),
    (1, 1),
    (4, 4),
    (5, 0),
    (9, 0),
    (9, 9),
    (10, 2),
    (12, 4),
    (18, 9),
    (19, 0),
    (20, 10),
    (38, 6),
    (40, 38),
    (65, 0),
    (65, 30),
]


def _col(
    real: int, meta: int | tuple[int, int] = 0, *, unsigned: bool = False, cs: int | None = None
) -> dict:
    return {"real": real, "meta": meta, "unsigned": unsigned, "cs": cs}


def all_columns() -> list[dict[str, Any]]:
    """One column per supported type/metadata combination."""
    cols: list[dict[str, Any]] = []
    for typ in (t.T_TINY, t.T_SHORT, t.T_INT24, t.T_LONG, t.T_LONGLONG):
        cols += [_col(typ), _col(typ, unsigned=True)]
    cols += [_col(t.T_YEAR, unsigned=True), _col(t.T_FLOAT, 4), _col(t.T_DOUBLE, 8)]
    cols += [_col(t.T_NEWDECIMAL, d, unsigned=u) for d in DECIMALS for u in (False, True)]
    cols += [_col(t.T_DATE), _col(t.T_NEWDATE), _col(t.T_DATETIME), _col(t.T_TIME), _col(t.T_TIMESTAMP)]
    for fsp in range(7):
        cols += [_col(t.T_DATETIME2, fsp), _col(t.T_TIME2, fsp), _col(t.T_TIMESTAMP2, fsp)]
    cols += [_col(t.T_BIT, (1, 0)), _col(t.T_BIT, (2, 1)), _col(t.T_BIT, (0, 8)), _col(t.T_BIT, (7, 3))]
    cols += [_col(t.T_ENUM, (t.T_ENUM, 1)), _col(t.T_ENUM, (t.T_ENUM, 2)), _col(t.T_ENUM, (t.T_ENUM, 1))]
    cols += [_col(t.T_SET, (t.T_SET, n)) for n in (1, 2, 3, 4, 8)]
    for cs in (UTF8, LATIN1, GBK, ASCII, BINARY, BIG5, None):
        cols += [_col(t.T_VARCHAR, 40, cs=cs), _col(t.T_VARCHAR, 1200, cs=cs)]
        cols += [_col(t.T_STRING, (t.T_STRING, 10), cs=cs), _col(t.T_STRING, (t.T_STRING, 765), cs=cs)]
        cols += [_col(t.T_VAR_STRING, 300, cs=cs)]
        cols += [_col(t.T_BLOB, lb, cs=cs) for lb in (1, 2, 3, 4)]
    cols += [
        _col(t.T_STRING, (t.T_STRING, 1), cs=BINARY),
        _col(t.T_GEOMETRY, 4, cs=UTF8),
        _col(t.T_GEOMETRY, 4),
        _col(t.T_JSON, 4),
    ]
    return cols


def make_table(cols: list[dict[str, Any]], rng: random.Random, name: str = "t") -> TableMap:
    n = len(cols)
    real = [c["real"] for c in cols]
    types = [t.T_STRING if r in (t.T_ENUM, t.T_SET) else r for r in real]
    enum_values: dict[int, list[str]] = {}
    set_values: dict[int, list[str]] = {}
    for i, c in enumerate(cols):
        if c["real"] == t.T_ENUM:
            k = rng.choice([0, 1, 3, 20, 300 if c["meta"][1] == 2 else 40])
            enum_values[i] = [f"e{j}-é" for j in range(k)]
        elif c["real"] == t.T_SET:
            k = rng.randint(0, min(64, 8 * c["meta"][1]))
            set_values[i] = [f"s{j}" for j in range(k)]
    return TableMap(
        table_id=42,
        schema="db",
        table=name,
        types=types,
        meta=[c["meta"] for c in cols],
        nullable=[True] * n,
        unsigned=[c["unsigned"] for c in cols],
        names=[f"c{i}" for i in range(n)],
        charsets=[c["cs"] for c in cols],
        enum_values=enum_values,
        set_values=set_values,
        real_types=real,
    )


def encode_decimal(rng: random.Random, precision: int, scale: int) -> bytes:
    """A valid binary DECIMAL (random sign and digits), or now and then random bytes."""
    n = decimal_size(precision, scale)
    if rng.random() < 0.1:
        return rng.randbytes(n)
    ints, fracs = _decimal_layout(precision, scale)
    intg = precision - scale
    idig = "".join(rng.choice("0123456789") for _ in range(intg))
    if rng.random() < 0.3:
        idig = "0" * intg
    fdig = "".join(rng.choice("0123456789") for _ in range(scale))
    out = bytearray()
    k = 0
    for _off, size, digits in ints:
        out += int(idig[k : k + digits]).to_bytes(size, "big")
        k += digits
    k = 0
    for _off, size, digits in fracs:
        out += int(fdig[k : k + digits]).to_bytes(size, "big")
        k += digits
    out[0] ^= 0x80
    neg = rng.random() < 0.4
    if neg:
        out = bytearray(x ^ 0xFF for x in out)
    raw = bytes(out)
    want = Decimal(("-" if neg else "") + (idig or "0") + ("." + fdig if scale else ""))
    assert decode_decimal(raw, precision, scale) == want
    return raw


def text_bytes(rng: random.Random, cs: int | None, maxlen: int) -> bytes:
    n = rng.choice([0, 1, rng.randint(0, maxlen), maxlen])
    kind = rng.random()
    if kind < 0.3:  # arbitrary bytes: invalid text goes through surrogateescape
        return rng.randbytes(n)
    codec = codec_of(cs) if cs is not None else "utf-8"
    codec = "utf-8" if codec == "binary" else codec
    alphabet = "abcXYZ09 ,'\"\\é中文€ß" if codec not in ("ascii", "latin1") else "abcXYZ09 ,'\"\\"
    s = "".join(rng.choices(alphabet, k=n))
    raw = s.encode(codec, "replace")
    while len(raw) > maxlen:
        s = s[:-1]
        raw = s.encode(codec, "replace")
    return raw


def value_bytes(rng: random.Random, tm: TableMap, i: int) -> bytes:
    """The binlog bytes of one random value of column i."""
    real, m = tm.real_types[i], tm.meta[i]

    def rnd(k: int) -> bytes:
        return rng.randbytes(k)

    fixed = {
        t.T_TINY: 1,
        t.T_SHORT: 2,
        t.T_INT24: 3,
        t.T_LONG: 4,
        t.T_LONGLONG: 8,
        t.T_YEAR: 1,
        t.T_FLOAT: 4,
        t.T_DOUBLE: 8,
        t.T_DATE: 3,
        t.T_NEWDATE: 3,
        t.T_DATETIME: 8,
        t.T_TIME: 3,
        t.T_TIMESTAMP: 4,
    }
    if real in fixed:
        size = fixed[real]
        if real in (t.T_FLOAT, t.T_DOUBLE) and rng.random() < 0.5:
            return struct.pack("<f" if size == 4 else "<d", rng.uniform(-1e6, 1e6))
        if real == t.T_DATETIME and rng.random() < 0.5:
            return rng.randrange(10**14).to_bytes(8, "little")
        if real == t.T_TIME and rng.random() < 0.5:
            return rng.randrange(-8385959, 8385960).to_bytes(3, "little", signed=True)
        if real == t.T_TIMESTAMP and rng.random() < 0.2:
            return b"\0\0\0\0"
        return rnd(size)
    if real == t.T_NEWDECIMAL:
        assert isinstance(m, tuple)
        return encode_decimal(rng, *m)
    if real in (t.T_DATETIME2, t.T_TIME2, t.T_TIMESTAMP2):
        assert isinstance(m, int)
        head = {t.T_DATETIME2: 5, t.T_TIME2: 3, t.T_TIMESTAMP2: 4}[real]
        raw = rnd(head + frac_bytes(m))
        if real == t.T_TIMESTAMP2 and rng.random() < 0.1:
            return b"\0" * len(raw) if rng.random() < 0.5 else b"\0\0\0\0" + raw[4:]
        if real != t.T_TIMESTAMP2 and rng.random() < 0.6:
            raw = bytes([0x80 | raw[0] & 0x7F]) + raw[1:]  # mostly in-range values
        return raw
    if real == t.T_BIT:
        assert isinstance(m, tuple)
        return rnd(m[1] + (1 if m[0] else 0))
    if real in (t.T_ENUM, t.T_SET):
        assert isinstance(m, tuple)
        return rnd(m[1])
    cs = tm.charsets[i]
    if real in (t.T_VARCHAR, t.T_VAR_STRING, t.T_STRING):
        maxlen = m[1] if isinstance(m, tuple) else int(m)
        raw = text_bytes(rng, cs, maxlen)
        if real == t.T_STRING and cs == BINARY and rng.random() < 0.5:
            raw = raw.rstrip(b"\0")
        return len(raw).to_bytes(2 if maxlen > 255 else 1, "little") + raw
    if real == t.T_JSON:
        doc = rng.choice([None, 1, -70000, 2.5, "é", [1, {"a": [True, "x"]}], {"k": {"n": 1e20}}])
        raw = jsonb_encode(doc) if rng.random() < 0.9 else b""
        return len(raw).to_bytes(int(m), "little") + raw  # type: ignore[arg-type]
    assert real in (t.T_BLOB, t.T_GEOMETRY)
    lb = int(m)  # type: ignore[arg-type]
    raw = text_bytes(rng, cs, min(300, 256**lb - 1))
    return len(raw).to_bytes(lb, "little") + raw


def row_image(rng: random.Random, tm: TableMap, present: list[int]) -> bytes:
    null_rate = rng.choice([0.0, 0.0, 0.2, 0.9])
    nulls = 0
    out = bytearray()
    for bit, i in enumerate(present):
        if rng.random() < null_rate:
            nulls |= 1 << bit
        else:
            out += value_bytes(rng, tm, i)
    return nulls.to_bytes((len(present) + 7) // 8, "little") + bytes(out)


def bitmap_pool(rng: random.Random, ncol: int) -> list[int]:
    full = (1 << ncol) - 1
    pool = [full, full]
    for _ in range(4):
        pool.append(sum(1 << i for i in range(ncol) if rng.random() < 0.7) or 1)
    return pool


def make_event(rng: random.Random, tm: TableMap, pool: list[int], op: str, version: int) -> bytes:
    ncol = tm.column_count
    nb = (ncol + 7) // 8
    b1, b2 = rng.choice(pool), rng.choice(pool)
    head = bytearray((42).to_bytes(6, "little") + b"\x01\x00")
    if version == 2:
        head += (2).to_bytes(2, "little")
    head += bytes([ncol]) if ncol < 251 else b"\xfc" + ncol.to_bytes(2, "little")
    head += b1.to_bytes(nb, "little")
    if op == "U":
        head += b2.to_bytes(nb, "little")
    p1 = [i for i in range(ncol) if b1 >> i & 1]
    p2 = [i for i in range(ncol) if b2 >> i & 1]
    for _ in range(rng.choice([1, 1, 2, 5, 20])):
        head += row_image(rng, tm, p1)
        if op == "U":
            head += row_image(rng, tm, p2)
    return bytes(head)


def assert_same(got: Any, want: Any, where: str = "") -> None:
    """Equal values of the same types (floats bit for bit, Decimals digit for digit)."""
    assert type(got) is type(want), (where, got, want)
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{k}]")
    elif isinstance(want, float):
        assert struct.pack("<d", got) == struct.pack("<d", want), (where, got, want)
    elif isinstance(want, Decimal):
        assert repr(got) == repr(want), (where, got, want)
    else:
        assert got == want, (where, got, want)


def decoders(tm: TableMap, tsr: TimestampRenderer) -> tuple[RowDecoder, RowDecoder]:
    """(C decoder, Python reference) of one table map."""
    return RowDecoder(tm, tsr, native=True), RowDecoder(tm, tsr, native=False)


def decode_both(decs: tuple[RowDecoder, RowDecoder], body: bytes, version: int, op: str) -> tuple[Any, Any]:
    """(C result, Python result): the images or the DecodeError."""
    results: list[Any] = []
    for dec in decs:
        try:
            results.append(rows_event_images(dec, body, version, op))
        except DecodeError as exc:
            results.append(exc)
    return results[0], results[1]


RENDERERS = ["UTC", "Asia/Shanghai", "-03:30"]


def test_extension_is_built() -> None:
    """The C decoder must be compiled in this install (pip install -e . builds it)."""
    from sparkcdc.capture import _rowdecode

    assert hasattr(_rowdecode, "decode_rows")
    assert rowcodec._native is _rowdecode


@pytest.mark.parametrize("tz", RENDERERS)
def test_all_types_match_python(tz: str) -> None:
    rng = random.Random(f"all-{tz}")
    tsr = TimestampRenderer(tz)
    tm = make_table(all_columns(), rng)
    pool = bitmap_pool(rng, tm.column_count)
    decs = decoders(tm, tsr)
    for k in range(300):
        op = "IUD"[k % 3]
        version = rng.choice([1, 2])
        body = make_event(rng, tm, pool, op, version)
        got, want = decode_both(decs, body, version, op)
        assert not isinstance(want, Exception), want
        assert_same(got, want, f"event {k}")
    # the C decoder was really used, for every bitmap
    assert len(decs[0]._layouts) == len(set(pool))
    assert all(v is not None for v in decs[0]._layouts.values())


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_match_python(seed: int) -> None:
    rng = random.Random(seed)
    tsr = TimestampRenderer(rng.choice(RENDERERS))
    cols = all_columns()
    for _ in range(6):
        picked = [rng.choice(cols) for _ in range(rng.randint(1, 12))]
        tm = make_table(picked, rng, f"t{seed}")
        pool = bitmap_pool(rng, tm.column_count)
        decs = decoders(tm, tsr)
        for _ in range(60):
            op = rng.choice("IUD")
            version = rng.choice([1, 2])
            body = make_event(rng, tm, pool, op, version)
            got, want = decode_both(decs, body, version, op)
            assert not isinstance(want, Exception), want
            assert_same(got, want)


def _error_at(exc: DecodeError) -> tuple[str, int]:
    msg = str(exc)
    head, _, rest = msg.partition(" at byte ")
    return head, int(rest.split(":", 1)[0])


@pytest.mark.parametrize("seed", range(6))
def test_cut_bodies_raise_decode_error_in_both(seed: int) -> None:
    rng = random.Random(100 + seed)
    tsr = TimestampRenderer("UTC")
    cols = all_columns()
    raised = 0
    for _ in range(30):
        picked = [rng.choice(cols) for _ in range(rng.randint(1, 10))]
        tm = make_table(picked, rng, "cut")
        pool = bitmap_pool(rng, tm.column_count)
        op = rng.choice("IUD")
        body = make_event(rng, tm, pool, op, 2)
        decs = decoders(tm, tsr)
        header = 8 + 2 + 1 + ((tm.column_count + 7) // 8) * (2 if op == "U" else 1)
        for cut in sorted(
            {rng.randrange(header + 1, len(body)) for _ in range(8)} if len(body) > header + 1 else []
        ):
            got, want = decode_both(decs, body[:cut], 2, op)
            if isinstance(want, DecodeError) or isinstance(got, DecodeError):
                assert isinstance(got, DecodeError), (cut, got)
                assert isinstance(want, DecodeError), (cut, want)
                assert _error_at(got)[0] == _error_at(want)[0] == "cannot decode a row of db.cut"
                if op != "U":  # an update's cut before image can be reported at the after image by Python
                    assert _error_at(got)[1] == _error_at(want)[1]
                raised += 1
            else:  # cut at a row boundary: a valid, shorter event
                assert_same(got, want)
    assert raised > 20


def test_unsupported_shape_falls_back_to_python() -> None:
    """A column the C decoder does not claim (DATETIME2 with fsp 7 here) is decoded by the Python decoder."""
    rng = random.Random(5)
    tm = make_table([_col(t.T_LONG), _col(t.T_DATETIME2, 7)], rng)
    dec = RowDecoder(tm, TimestampRenderer("UTC"), native=True)
    body = (
        (42).to_bytes(6, "little") + b"\x01\x00" + b"\x02\x03" + b"\x00" + b"\x01\x00\x00\x00" + b"\x99" * 9
    )
    ref = rows_event_images(RowDecoder(tm, TimestampRenderer("UTC"), native=False), body, 1, "I")
    assert_same(rows_event_images(dec, body, 1, "I"), ref)
    assert dec._layouts == {3: None}


def test_json_column_decodes_like_python() -> None:
    """MySQL binary JSON: the C decoder hands the bytes to the one Python JSON decoder."""
    tm = make_table([_col(t.T_LONG), _col(t.T_JSON, 4)], random.Random(1))
    doc = jsonb_encode({"b": [1, 2.0], "a": None})
    body = (
        (42).to_bytes(6, "little")
        + b"\x01\x00"
        + b"\x02\x03"
        + b"\x00"
        + b"\x01\x00\x00\x00"
        + len(doc).to_bytes(4, "little")
        + doc
    )
    for native in (True, False):
        dec = RowDecoder(tm, TimestampRenderer("UTC"), native=native)
        assert rows_event_images(dec, body, 1, "I") == [(None, (1, '{"a": null, "b": [1, 2.0]}'))]
        if native:
            assert dec._layouts[3] is not None
        bad = body[: -len(doc)] + b"\x0e" + doc[1:]
        with pytest.raises(DecodeError, match=r"cannot decode a row of db\.t.*unknown binary JSON type 0x0e"):
            rows_event_images(dec, bad, 1, "I")


def test_reference_decodes_without_the_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    """As when the C decoder is not built: decoders default to the Python reference."""
    tm = make_table([_col(t.T_LONG)], random.Random(1))
    body = (42).to_bytes(6, "little") + b"\x01\x00" + b"\x01\x01" + b"\x00" + b"\x07\x00\x00\x00"
    monkeypatch.setattr(rowcodec, "_native", None)
    dec = RowDecoder(tm, TimestampRenderer("UTC"))
    assert dec.native is False
    assert rows_event_images(dec, body, 1, "I") == [(None, (7,))]
    monkeypatch.undo()
    assert RowDecoder(tm, TimestampRenderer("UTC")).native is True


def test_layout_rejects_bad_specs() -> None:
    from sparkcdc.capture import _rowdecode as n

    def layout(cols: list[tuple[Any, ...]], ncol: int = 3) -> Any:
        return n.Layout("db", "t", ncol, cols, DecodeError, decode_decimal)

    for bad in (
        [(n.K_DATETIME2, 0, 7, 0, None)],
        [(n.K_DECIMAL, 0, 5, 6, None)],
        [(n.K_STRING, 0, 5, 0, None)],
        [(n.K_BIT, 0, 9, 0, None)],
        [(n.K_INT8, 3, 0, 0, None)],
        [(n.K_INT8, 1, 0, 0, None), (n.K_INT8, 0, 0, 0, None)],
        [(999, 0, 0, 0, None)],
    ):
        with pytest.raises(ValueError):
            layout(bad)
    assert layout([(n.K_INT8, 0, 0, 0, None), (n.K_INT32, 2, 0, 0, None)]).npresent == 2


@pytest.mark.parametrize("seed", range(4))
def test_corrupt_bodies_agree(seed: int) -> None:
    """Random bytes overwritten in valid events: the same images, or DecodeError from both."""
    rng = random.Random(200 + seed)
    cols = all_columns()
    for _ in range(25):
        picked = [rng.choice(cols) for _ in range(rng.randint(1, 10))]
        tm = make_table(picked, rng, "bad")
        decs = decoders(tm, TimestampRenderer(rng.choice(RENDERERS)))
        pool = bitmap_pool(rng, tm.column_count)
        for _ in range(10):
            op = rng.choice("IUD")
            body = bytearray(make_event(rng, tm, pool, op, 2))
            header = 8 + 2 + 1 + ((tm.column_count + 7) // 8) * (2 if op == "U" else 1)
            for _ in range(rng.randint(1, 4)):
                body[rng.randrange(header, len(body))] = rng.randrange(256)
            got, want = decode_both(decs, bytes(body), 2, op)
            if isinstance(got, DecodeError) or isinstance(want, DecodeError):
                assert isinstance(got, DecodeError), got
                assert isinstance(want, DecodeError), want
            else:
                assert_same(got, want)


def _reference_row_changes(op: str, version: int, ts: int, images: Any, seq0: int, pos: Any) -> list[Any]:
    saved = rowcodec._ROW_CHANGES
    rowcodec._ROW_CHANGES = None
    try:
        return rowcodec.row_changes(op, "db", "tbl", version, ts, images, seq0, pos)
    finally:
        rowcodec._ROW_CHANGES = saved


@pytest.mark.parametrize("seed", range(4))
def test_row_changes_made_in_c_equal_the_dataclass_ones(seed: int) -> None:
    """``row_changes`` with the extension makes RowChange objects equal, field by field and as
    wholes, to the reference's, for decoded events of every op, and they stay frozen."""
    import dataclasses
    import pickle

    from sparkcdc.model import BinlogPosition, RowChange

    assert rowcodec._ROW_CHANGES is not None  # the C maker is used in this install
    rng = random.Random(seed)
    tsr = TimestampRenderer("UTC")
    tm = make_table(all_columns(), rng)
    pool = bitmap_pool(rng, tm.column_count)
    dec = RowDecoder(tm, tsr, native=True)
    for k in range(60):
        op = "IUD"[k % 3]
        images = rows_event_images(dec, make_event(rng, tm, pool, op, 2), 2, op)
        seq0 = rng.choice([0, 1, 999, 2**40])
        ts = rng.getrandbits(63)
        pos = rng.choice([None, BinlogPosition("mysql-bin.000003", rng.getrandbits(32), "0-1-2")])
        got = rowcodec.row_changes(op, "db", "tbl", 7, ts, images, seq0, pos)
        want = _reference_row_changes(op, 7, ts, images, seq0, pos)
        assert got == want
        for g, w in zip(got, want, strict=True):
            assert type(g) is RowChange
            for f in dataclasses.fields(RowChange):
                assert getattr(g, f.name) == getattr(w, f.name), f.name
            assert g.before is w.before and g.after is w.after and g.position is w.position
            assert hash(g) == hash(w)
            assert pickle.dumps(g) == pickle.dumps(w)  # (NaN values: a round trip is not == itself)
        if got:
            with pytest.raises(dataclasses.FrozenInstanceError):
                got[0].op = "D"  # type: ignore[misc]


def test_row_changes_refuse_a_class_of_other_slots() -> None:
    """The C maker checks the class's slots; the module-level check falls back to Python then."""
    from dataclasses import dataclass

    from sparkcdc.capture import _rowdecode

    @dataclass(frozen=True, slots=True)
    class Other:
        op: str
        schema: str

    with pytest.raises(TypeError, match="slots"):
        _rowdecode.row_changes(Other, "I", "s", "t", 1, 2, [(None, (1,))], 0, None)
    # the real class still works after a refused one
    rows = rowcodec.row_changes("I", "s", "t", 1, 2, [(None, (1,))], 5, None)
    assert [r.seq for r in rows] == [5] and rows[0].after == (1,)
