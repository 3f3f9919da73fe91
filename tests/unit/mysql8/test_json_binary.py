"""MySQL binary JSON: the decoder against the spec encoder, python-mysql-replication and MySQL's printing rules.

Documents are made by ``jsonb_encode`` (written from json_binary.cc's layout). The structure the
decoder prints is checked against python-mysql-replication's decoder (an independent reading of
the same format) on 10,000 random documents; the exact text (separators, key order, number
formatting, escapes, opaque values) against the rules of MySQL's ``Json_wrapper::to_string``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import random
import struct
from decimal import Decimal
from typing import Any

import pytest
from pymysqlreplication.json_binary import parse_json as oracle_parse_json

from sparkcdc.capture import jsonbinary as J
from sparkcdc.capture.jsonbinary import JsonBinaryError, decode_json_binary, format_double
from tests.unit.mysql8.jsonb_encode import (
    Opaque,
    UInt,
    decimal_opaque,
    encode,
    packed_datetime,
    packed_time,
)


def text_of(value: Any, *, large: bool = False) -> str:
    return decode_json_binary(encode(value, large=large))


# --------------------------------------------------------------------------------------------
# exact text
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (-1.0, "-1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (1.5, "1.5"),
        (123.456, "123.456"),
        (1e14, "100000000000000.0"),
        (1e15, "1e15"),
        (1e20, "1e20"),
        (1.5e300, "1.5e300"),
        (1234567890123456.7, "1234567890123456.8"),
        (0.0001, "0.0001"),
        (1e-14, "0.00000000000001"),
        (1e-15, "0.000000000000001"),
        (1e-16, "1e-16"),
        (1.25e-7, "0.000000125"),
        (2.5e-17, "2.5e-17"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
        (-2.5e-100, "-2.5e-100"),
        (3.0e10, "30000000000.0"),
    ],
)
def test_doubles_print_as_my_gcvt(value: float, text: str) -> None:
    assert format_double(value) == text
    assert text_of(value) == text
    assert float(text) == value


def test_integers_every_width() -> None:
    values = [0, -1, 32767, -32768, 32768, -32769, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63), 2**64 - 1]
    for v in values:
        assert text_of(v) == str(v)
        assert text_of([v]) == f"[{v}]"
        assert text_of([v], large=True) == f"[{v}]"
    for v in (0, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1):
        assert text_of(UInt(v)) == str(v)
        assert text_of({"u": UInt(v)}) == '{"u": %d}' % v
        assert text_of({"u": UInt(v)}, large=True) == '{"u": %d}' % v


def test_literals_and_separators() -> None:
    assert text_of(None) == "null"
    assert text_of(True) == "true"
    assert text_of(False) == "false"
    assert text_of([]) == "[]"
    assert text_of({}) == "{}"
    assert text_of([1, [2, [3, []]], {}]) == "[1, [2, [3, []]], {}]"
    assert text_of({"a": None, "b": [True, False]}) == '{"a": null, "b": [true, false]}'


def test_keys_in_mysql_order_length_first() -> None:
    doc = {"bb": 1, "a": 2, "b": 3, "aaa": 4, "ab": 5, "é": 6, "z": 7}
    # "é" is 2 bytes in UTF-8: it sorts with the 2-character keys, after them bytewise
    assert text_of(doc) == '{"a": 2, "b": 3, "z": 7, "ab": 5, "bb": 1, "é": 6, "aaa": 4}'


def test_string_escapes_like_double_quote() -> None:
    s = 'q"b\\s/\b\f\n\r\t\x00\x01\x1f\x7f é 中 😀'
    expect = '"q\\"b\\\\s/\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f é 中 😀"'
    assert text_of(s) == expect
    assert text_of({s: s}) == "{%s: %s}" % (expect, expect)
    assert json.loads(expect) == s


def test_utf8_keys_and_long_strings() -> None:
    doc = {"ключ": "значение", "键": "值" * 300, "🔑": "x" * 70000}
    text = text_of(doc)
    assert json.loads(text) == doc
    assert text.startswith('{"键": "值')


def test_temporal_opaques_quoted_with_six_digits() -> None:
    doc = [
        Opaque(J.FT_DATE, packed_datetime(2015, 1, 15)),
        Opaque(J.FT_DATETIME, packed_datetime(2015, 1, 15, 23, 24, 25)),
        Opaque(J.FT_DATETIME, packed_datetime(9999, 12, 31, 23, 59, 59, 999999)),
        Opaque(J.FT_TIMESTAMP, packed_datetime(2038, 1, 19, 3, 14, 7, 120000)),
        Opaque(J.FT_TIME, packed_time(23, 24, 25)),
        Opaque(J.FT_TIME, packed_time(838, 59, 59, 0, negative=True)),
        Opaque(J.FT_TIME, packed_time(0, 0, 1, 500000, negative=True)),
    ]
    assert text_of(doc) == (
        '["2015-01-15", "2015-01-15 23:24:25.000000", "9999-12-31 23:59:59.999999", '
        '"2038-01-19 03:14:07.120000", "23:24:25.000000", "-838:59:59.000000", "-00:00:01.500000"]'
    )


def test_decimal_opaques_keep_their_scale() -> None:
    cases = [
        ("3.14", 3, 2, "3.14"),
        ("0.50", 5, 2, "0.50"),
        ("-0.5", 3, 1, "-0.5"),
        ("12345678901234567890.123456789", 30, 9, "12345678901234567890.123456789"),
        ("-99999999999999999999999999999999999.999999999999999999999999999999", 65, 30, None),
        ("0", 10, 0, "0"),
        ("0.0000000000", 10, 10, "0.0000000000"),
    ]
    for text, p, s, expect in cases:
        got = text_of([decimal_opaque(text, p, s)])
        assert got == f"[{expect or text}]"


def test_other_opaques_as_mysql_base64() -> None:
    blob = bytes(range(256))
    got = text_of(
        {"b": Opaque(252, blob), "bit": Opaque(16, b"\x05"), "s": Opaque(J.FT_VAR_STRING, b"plain")}
    )
    b64 = base64.b64encode(blob).decode()
    lines = "\\n".join(b64[i : i + 76] for i in range(0, len(b64), 76))
    assert got == '{"b": "base64:type252:%s", "s": "plain", "bit": "base64:type16:BQ=="}' % lines
    assert "\n" not in got


def test_large_format_and_big_documents() -> None:
    big = {f"k{i:05d}": [i, str(i) * 3, {"n": i * 1.5}] for i in range(3000)}
    raw = encode(big)
    assert raw[0] == J.LARGE_OBJECT  # over 64 KiB: MySQL switches to 4-byte offsets
    assert json.loads(decode_json_binary(raw)) == big
    arr = list(range(40000))
    raw = encode(arr)
    assert raw[0] == J.LARGE_ARRAY
    assert decode_json_binary(raw) == "[" + ", ".join(map(str, arr)) + "]"
    small = {"a": [1, 2**20, -(2**20), UInt(2**31)], "b": {"c": None}}
    assert decode_json_binary(encode(small, large=True)) == decode_json_binary(encode(small))


def test_deep_nesting_to_mysql_limit() -> None:
    doc: Any = 1
    for i in range(99):
        doc = [doc] if i % 2 else {"k": doc}
    assert json.loads(text_of(doc)) == doc
    too_deep: Any = [doc, doc]
    for _ in range(2):
        too_deep = [too_deep]
    with pytest.raises(JsonBinaryError, match="deeper than 100"):
        text_of(too_deep)


def test_empty_value_is_json_null() -> None:
    assert decode_json_binary(b"") == "null"


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 9, 20])
def test_truncated_documents_raise(cut: int) -> None:
    raw = encode({"key": ["value", 1.5, 70000, {"x": "y" * 30}]})
    with pytest.raises(JsonBinaryError):
        decode_json_binary(raw[:-cut])


def test_unknown_type_is_named() -> None:
    with pytest.raises(JsonBinaryError, match="0x0e"):
        decode_json_binary(b"\x0e\x00")
    with pytest.raises(JsonBinaryError, match="literal 0x07"):
        decode_json_binary(b"\x04\x07")
    with pytest.raises(JsonBinaryError, match="nan"):
        decode_json_binary(b"\x0b" + struct.pack("<d", math.nan))


# --------------------------------------------------------------------------------------------
# 10,000 random documents against python-mysql-replication's decoder
# --------------------------------------------------------------------------------------------

_ALPHABET = 'abcXYZ09 _-"\\/\n\t\x01é中😀'


def _rand_str(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, n)))


def _rand_scalar(rng: random.Random) -> Any:
    k = rng.randrange(12)
    if k == 0:
        return rng.choice([None, True, False])
    if k == 1:
        return rng.randint(-(2**15), 2**15 - 1)
    if k == 2:
        return rng.randint(-(2**31), 2**31 - 1)
    if k == 3:
        return rng.randint(-(2**63), 2**64 - 1)
    if k == 4:
        return UInt(
            rng.choice([rng.randint(0, 2**16 - 1), rng.randint(0, 2**32 - 1), rng.randint(0, 2**64 - 1)])
        )
    if k == 5:
        d = struct.unpack("<d", rng.randbytes(8))[0]
        return d if math.isfinite(d) and rng.random() < 0.3 else rng.uniform(-1e6, 1e6)
    if k == 6:
        return rng.choice([0.1, 1.0, 1e15, 1e-15, 2.5e-7, 123456789.125, -0.0])
    if k == 7:
        p = rng.randint(1, 65)
        s = rng.randint(0, min(p, 30))
        intg = "".join(rng.choice("0123456789") for _ in range(p - s)) or "0"
        frac = "".join(rng.choice("0123456789") for _ in range(s))
        return decimal_opaque(("-" if rng.random() < 0.3 else "") + intg + ("." + frac if s else ""), p, s)
    if k == 8:
        ft = rng.choice([J.FT_DATE, J.FT_DATETIME])
        y, mo, d = rng.randint(1, 9999), rng.randint(1, 12), rng.randint(1, 28)
        if ft == J.FT_DATE:
            return Opaque(ft, packed_datetime(y, mo, d))
        return Opaque(
            ft,
            packed_datetime(
                y, mo, d, rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), rng.randint(0, 999999)
            ),
        )
    if k == 9:
        return Opaque(
            J.FT_TIME,
            packed_time(rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), rng.randint(0, 999999)),
        )
    if k == 10:
        return Opaque(
            rng.choice([15, 16, 249, 252, 254]),
            bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(0, 120))),
        )
    return _rand_str(rng, 30)


def _rand_doc(rng: random.Random, depth: int) -> Any:
    r = rng.random()
    if depth >= 4 or r < 0.35:
        return _rand_scalar(rng)
    n = rng.randint(0, 6)
    if r < 0.65:
        return [_rand_doc(rng, depth + 1) for _ in range(n)]
    return {_rand_str(rng, 8): _rand_doc(rng, depth + 1) for _ in range(n)}


def _from_text(text: str) -> Any:
    return json.loads(
        text, object_pairs_hook=lambda pairs: ("obj", pairs), parse_float=Decimal, parse_int=int
    )


def _same(ours: Any, oracle: Any, source: Any) -> bool:
    """Whether the value parsed from our text is the oracle's value of the same source value."""
    if isinstance(source, dict):
        assert isinstance(ours, tuple) and isinstance(oracle, dict)
        pairs = ours[1]
        okeys = list(oracle)
        if [k for k, _ in pairs] != [k.decode() for k in okeys] or len(pairs) != len(source):
            return False
        return all(_same(v, oracle[ok], source[k]) for (k, v), ok in zip(pairs, okeys, strict=True))
    if isinstance(source, list):
        return len(ours) == len(oracle) == len(source) and all(
            _same(a, b, s) for a, b, s in zip(ours, oracle, source, strict=True)
        )
    if isinstance(source, Opaque):
        if source.ftype == J.FT_NEWDECIMAL:
            # a DECIMAL of scale 0 prints without a point (json.loads reads it as an int)
            return isinstance(ours, (Decimal, int)) and str(ours) == str(oracle)
        if source.ftype == J.FT_TIME:
            return isinstance(oracle, dt.time) and ours == oracle.isoformat(timespec="microseconds")
        if source.ftype == J.FT_DATE:
            return ours == oracle.date().isoformat()
        if source.ftype == J.FT_DATETIME:
            return ours == oracle.isoformat(sep=" ", timespec="microseconds")
        prefix = f"base64:type{source.ftype}:"
        return (
            ours.startswith(prefix)
            and base64.b64decode(ours[len(prefix) :]) == source.data
            and (base64.b64decode(ours[len(prefix) :]).decode(errors="ignore") == oracle)
        )
    if isinstance(source, float):
        return (
            isinstance(ours, Decimal)
            and float(ours) == oracle == source
            and (str(oracle) != "-0.0" or str(ours) == "-0.0")
        )
    if isinstance(source, str):
        return ours == source and oracle == source.encode()
    if isinstance(source, UInt):
        return ours == oracle == source.value
    return ours == oracle == source and type(ours) is type(source)


def test_ten_thousand_random_documents_match_python_mysql_replication() -> None:
    rng = random.Random(20261124)
    large_seen = 0
    for i in range(10_000):
        doc = _rand_doc(rng, 0)
        raw = encode(doc, large=i % 7 == 0)
        large_seen += raw[0] in (J.LARGE_OBJECT, J.LARGE_ARRAY)
        text = decode_json_binary(raw)
        oracle = oracle_parse_json(raw[0], raw[1:])
        assert _same(_from_text(text), oracle, doc), (i, doc, text, oracle)
    assert large_seen > 500


def test_recorded_documents_still_decode_and_encode_the_same() -> None:
    """tests/fixtures/mysql8/json_documents.jsonl pins the bytes of the spec encoder and the decoder's text."""
    from pathlib import Path

    from tests.unit.mysql8.record_fixtures import JSON_DOCUMENTS

    path = Path(__file__).resolve().parents[2] / "fixtures" / "mysql8" / "json_documents.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == len(JSON_DOCUMENTS)
    for rec, doc in zip(lines, JSON_DOCUMENTS, strict=True):
        raw = bytes.fromhex(rec["hex"])
        assert encode(doc) == raw
        assert decode_json_binary(raw) == rec["text"]


# --------------------------------------------------------------------------------------------
# the C decoder (kind K_JSON) against this reference, in row events
# --------------------------------------------------------------------------------------------


def _json_table() -> Any:
    from sparkcdc.capture import tablemap as t
    from sparkcdc.capture.tablemap import TableMap

    return TableMap(
        42, "db", "j", [t.T_LONG, t.T_JSON], [0, 4], [True, True], [False, False], ["id", "doc"],
        [None, None], {}, {}, [0], [t.T_LONG, t.T_JSON],
    )  # fmt: skip


def _rows_body(docs: list[bytes]) -> bytes:
    body = (42).to_bytes(6, "little") + b"\x01\x00" + b"\x02\x03"
    for i, raw in enumerate(docs):
        body += b"\x00" + i.to_bytes(4, "little") + len(raw).to_bytes(4, "little") + raw
    return body


def test_c_decoder_matches_the_reference_on_random_and_corrupt_documents() -> None:
    from sparkcdc.capture.rowcodec import RowDecoder, TimestampRenderer, native_available, rows_event_images
    from sparkcdc.errors import DecodeError

    assert native_available()
    tm = _json_table()
    c_dec = RowDecoder(tm, TimestampRenderer("UTC"), native=True)
    py_dec = RowDecoder(tm, TimestampRenderer("UTC"), native=False)
    rng = random.Random(7)
    docs = [encode(_rand_doc(rng, 0), large=i % 5 == 0) for i in range(4_000)]
    docs += [b"", encode(None), encode(1e20), encode("x" * 300)]
    for k in range(0, len(docs), 500):
        body = _rows_body(docs[k : k + 500])
        got = rows_event_images(c_dec, body, 1, "I")
        assert got == rows_event_images(py_dec, body, 1, "I")
        assert [r[1][1] for r in got] == [decode_json_binary(d) for d in docs[k : k + 500]]
    assert c_dec._layouts[3] is not None
    agree = 0
    for _ in range(2000):
        raw = bytearray(rng.choice(docs[:4_000]) or b"\x04\x00")
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        if rng.random() < 0.2:
            del raw[rng.randrange(len(raw)) :]
        body = _rows_body([bytes(raw)])
        outcome = []
        for dec in (c_dec, py_dec):
            try:
                outcome.append(rows_event_images(dec, body, 1, "I"))
            except DecodeError:
                outcome.append("DecodeError")
        assert outcome[0] == outcome[1], bytes(raw).hex()
        agree += outcome[0] == "DecodeError"
    assert agree > 200


def test_c_doubles_print_as_the_reference() -> None:
    from sparkcdc.capture.rowcodec import RowDecoder, TimestampRenderer, rows_event_images

    rng = random.Random(11)
    values: list[float] = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        1e15,
        1e14,
        1e-15,
        1e-16,
        5e-324,
        1.7976931348623157e308,
    ]
    values += [10.0**e for e in range(-320, 309)] + [-(10.0**e) * 1.5 for e in range(-300, 300)]
    values += [float(rng.randint(-(2**60), 2**60)) for _ in range(2000)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(2000)]
    while len(values) < 20_000:
        d = struct.unpack("<d", rng.randbytes(8))[0]
        if math.isfinite(d):
            values.append(d)
    tm = _json_table()
    c_dec = RowDecoder(tm, TimestampRenderer("UTC"), native=True)
    for k in range(0, len(values), 1000):
        chunk = values[k : k + 1000]
        got = rows_event_images(c_dec, _rows_body([encode([v]) for v in chunk]), 1, "I")
        assert [r[1][1] for r in got] == [f"[{format_double(v)}]" for v in chunk]
