"""Canal-JSON: TiCDC's exact bytes, options, DDL/watermark messages and the decoder."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson
import pytest

from sparkcdc.codec.canal_json import (
    CanalJsonEncoder,
    canal_ddl_type,
    canal_message_to_row_change,
    canal_value_to_model,
    canal_value_to_python,
    decode_canal_json,
    json_str,
)
from sparkcdc.codec.values import to_float32
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo
from tests.unit.codec.tables import ALL_TYPES, TS, delete, full_row, insert, null_row, small_row, update

NOW = 1640007050284

PERSON = TableInfo(
    "test",
    "person",
    (
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("name", "varchar", length=32),
        ColumnInfo("tiny", "tinyint", unsigned=True),
        ColumnInfo("price", "decimal", precision=10, scale=2),
        ColumnInfo("dt", "datetime", fsp=3),
        ColumnInfo("bin", "varbinary", length=8),
        ColumnInfo("e", "enum", elements=("a", "b", "c")),
        ColumnInfo("s", "set", elements=("x", "y")),
        ColumnInfo("b", "bit", length=8),
        ColumnInfo("j", "json"),
        ColumnInfo("f", "float"),
        ColumnInfo("c", "text"),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
)
PERSON_ROW = (
    1,
    "Alice",
    200,
    Decimal("12.50"),
    "2024-01-02 03:04:05.678",
    b"\x01A<",
    "b",
    "x,y",
    5,
    '{"k": [1, 2]}',
    to_float32(3.14),
    None,
)

# The spec's example, verbatim (whitespace between lines removed).
SPEC_INSERT = (
    '{"id":0,"database":"test","table":"person","pkNames":["id"],"isDdl":false,"type":"INSERT",'
    '"es":1640007049196,"ts":1640007050284,"sql":"",'
    '"sqlType":{"id":4,"name":12,"tiny":5,"price":3,"dt":93,"bin":2004,"e":4,"s":-7,"b":-7,"j":12,"f":7,"c":2005},'
    '"mysqlType":{"id":"int","name":"varchar","tiny":"tinyint unsigned","price":"decimal","dt":"datetime",'
    '"bin":"varbinary","e":"enum","s":"set","b":"bit","j":"json","f":"float","c":"text"},'
    '"old":null,"data":[{"id":"1","name":"Alice","tiny":"200","price":"12.50","dt":"2024-01-02 03:04:05.678",'
    '"bin":"\\u0001A\\u003c","e":"2","s":"3","b":"5","j":"{\\"k\\": [1, 2]}","f":"3.14","c":null}],'
    '"_tidb":{"commitTs":429918007904436226}}'
)
SPEC_DDL = (
    '{"id":0,"database":"test","table":"person","pkNames":null,"isDdl":true,"type":"CREATE",'
    '"es":1640007049196,"ts":1640007050284,"sql":"create table test.person(...)","sqlType":null,'
    '"mysqlType":null,"data":null,"old":null,"_tidb":{"commitTs":429918007904436226}}'
)
SPEC_WATERMARK = (
    '{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK",'
    '"es":1640007049196,"ts":1640007050284,"sql":"","sqlType":null,"mysqlType":null,"data":null,'
    '"old":null,"_tidb":{"watermarkTs":429918007904436226}}'
)


def _enc(ext: bool = True, **kw: Any) -> CanalJsonEncoder:
    return CanalJsonEncoder(None, ext, now_ms=lambda: NOW, **kw)


def _keys(b: bytes) -> list[str]:
    return list(json.loads(b).keys())


def test_spec_insert_example_byte_for_byte() -> None:
    out = _enc().encode_row(insert(PERSON_ROW, PERSON), PERSON)
    assert out == SPEC_INSERT.encode()
    assert json.loads(out) == json.loads(SPEC_INSERT)
    assert _keys(out)[-4:] == ["mysqlType", "old", "data", "_tidb"]


def test_spec_ddl_and_watermark_examples_byte_for_byte() -> None:
    enc = _enc()
    ddl = DDLEvent("create table test.person(...)", "test", "person", DDLType.CREATE_TABLE, TS, TS)
    assert enc.encode_ddl(ddl) == SPEC_DDL.encode()
    assert enc.encode_watermark(TS) == SPEC_WATERMARK.encode()
    assert _keys(enc.encode_ddl(ddl))[-3:] == ["data", "old", "_tidb"]


def test_extension_off_has_no_tidb_field_and_no_watermark() -> None:
    enc = _enc(ext=False)
    row = json.loads(enc.encode_row(insert(PERSON_ROW, PERSON), PERSON))
    assert "_tidb" not in row
    assert _keys(enc.encode_row(insert(PERSON_ROW, PERSON), PERSON))[-1] == "data"
    ddl = DDLEvent("drop table t", "test", "t", DDLType.DROP_TABLE, TS, TS)
    assert "_tidb" not in json.loads(enc.encode_ddl(ddl))
    assert enc.encode_watermark(TS) is None


def test_escaping_vector_from_the_docs() -> None:
    table = TableInfo("s", "t", (ColumnInfo("b", "varbinary"),))
    raw = bytes([5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70])
    out = _enc().encode_row(insert((raw,), table), table)
    assert '"b":"\\u0005\\u0007\\n\\u000f$2+cx\\u003c\\u0026ÿþ-7F"'.encode() in out
    msg = decode_canal_json(out)
    assert msg.data is not None
    assert canal_value_to_python(msg.data[0]["b"], msg.mysql_type["b"]) == raw  # type: ignore[index]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", '"plain"'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("\t\n\r", '"\\t\\n\\r"'),
        ("\x08\x0c\x1f\x00", '"\\u0008\\u000c\\u001f\\u0000"'),
        ("<script>&</script>", '"\\u003cscript\\u003e\\u0026\\u003c/script\\u003e"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("\x7f é 😀", '"\x7f é 😀"'),
        ("bad\udcff", '"bad\\ufffd"'),
    ],
)
def test_json_str_escapes_like_easyjson(text: str, expected: str) -> None:
    assert json_str(text) == expected
    if "\udcff" not in text:
        assert json.loads(expected) == text


def test_unsigned_sql_type_promotion_depends_on_the_value() -> None:
    table = TableInfo(
        "s",
        "t",
        (
            ColumnInfo("a", "tinyint", unsigned=True),
            ColumnInfo("b", "smallint", unsigned=True),
            ColumnInfo("c", "int", unsigned=True),
            ColumnInfo("d", "bigint", unsigned=True),
            ColumnInfo("e", "mediumint", unsigned=True),
        ),
    )
    enc = _enc()
    low = json.loads(enc.encode_row(insert((127, 32767, 2147483647, 2**63 - 1, 16777215), table), table))
    high = json.loads(enc.encode_row(insert((128, 32768, 2147483648, 2**63, 16777215), table), table))
    null = json.loads(enc.encode_row(insert((None,) * 5, table), table))
    assert low["sqlType"] == {"a": -6, "b": 5, "c": 4, "d": -5, "e": 4}
    assert high["sqlType"] == {"a": 5, "b": 4, "c": -5, "d": 3, "e": 4}
    assert null["sqlType"] == low["sqlType"]
    assert high["data"][0]["d"] == "9223372036854775808"


def test_every_type_value_and_mysql_type() -> None:
    out = json.loads(_enc().encode_row(insert(full_row()), ALL_TYPES))
    d = out["data"][0]
    assert out["pkNames"] == ["id"]
    assert d["id"] == "18446744073709551614"
    assert d["t_utiny"] == "255"
    assert d["t_float"] == "3.14"
    assert d["t_double"] == "-" + "179769313486231570" + "0" * 291
    assert d["t_dec"] == "-12345678901234567890123456789012345.123456789012345678901234567890"
    assert d["t_date"] == "0000-00-00"
    assert d["t_time"] == "-838:59:59.00"
    assert d["t_year"] == "2155"
    assert d["t_latin1"] == "café naïve"
    assert d["t_varbinary"] == bytes(range(256)).decode("latin-1")
    assert d["t_enum"] == "3"
    assert d["t_set"] == "5"
    assert d["t_bit"] == "18446744073709551615"
    assert d["t_json"] == '{"k": [1, 2], "s": "<a&b>"}'
    assert out["mysqlType"]["t_uint"] == "int unsigned zerofill"
    assert out["mysqlType"]["t_bit"] == "bit"
    assert out["mysqlType"]["t_longtext"] == "longtext"
    assert out["sqlType"]["t_uint"] == -5  # 4294967295 > 2147483647
    assert out["sqlType"]["id"] == 3  # > 2^63-1
    assert list(out["mysqlType"]) == list(ALL_TYPES.column_names)


def test_content_compatible_uses_full_types_and_only_updated_columns() -> None:
    cfg = ReplicaConfig.from_dict({"sink": {"content-compatible": True}})
    enc = CanalJsonEncoder(cfg, True, now_ms=lambda: NOW)
    assert enc.only_output_updated_columns
    before = PERSON_ROW
    after = (1, "Bob", *PERSON_ROW[2:])
    out = json.loads(enc.encode_row(update(before, after, PERSON), PERSON))
    assert out["mysqlType"]["id"] == "int(11)"
    assert out["mysqlType"]["tiny"] == "tinyint(3) unsigned"
    assert out["mysqlType"]["price"] == "decimal(10,2)"
    assert out["mysqlType"]["dt"] == "datetime(3)"
    assert out["mysqlType"]["e"] == "enum('a','b','c')"
    assert out["old"] == [{"name": "Alice"}]
    assert out["data"][0]["name"] == "Bob"


def test_update_old_is_full_pre_image_by_default() -> None:
    before = PERSON_ROW
    after = (1, "Bob", *PERSON_ROW[2:])
    b = _enc().encode_row(update(before, after, PERSON), PERSON)
    out = json.loads(b)
    assert out["type"] == "UPDATE"
    assert out["old"][0]["name"] == "Alice"
    assert set(out["old"][0]) == set(PERSON.column_names)
    assert out["data"][0]["name"] == "Bob"
    assert _keys(b).index("old") < _keys(b).index("data")


def test_only_output_updated_columns() -> None:
    enc = _enc(only_output_updated_columns=True)
    before = PERSON_ROW
    after = (1, "Bob", 201, *PERSON_ROW[3:11], "now set")
    out = json.loads(enc.encode_row(update(before, after, PERSON), PERSON))
    assert out["old"] == [{"name": "Alice", "tiny": "200", "c": None}]
    assert out["mysqlType"]["id"] == "int"


def test_sql_type_follows_new_row_for_update_and_pre_image_for_delete() -> None:
    table = TableInfo("s", "t", (ColumnInfo("a", "tinyint", unsigned=True),))
    enc = _enc()
    up = json.loads(enc.encode_row(update((1,), (200,), table), table))
    assert up["sqlType"] == {"a": 5}
    de = json.loads(enc.encode_row(delete((200,), table), table))
    assert de["sqlType"] == {"a": 5}
    assert de["type"] == "DELETE"
    assert de["old"] is None
    assert de["data"] == [{"a": "200"}]


def test_delete_only_output_handle_key_columns() -> None:
    enc = _enc(delete_only_output_handle_key_columns=True)
    out = json.loads(enc.encode_row(delete(PERSON_ROW, PERSON), PERSON))
    assert out["data"] == [{"id": "1"}]
    assert out["sqlType"] == {"id": 4}
    assert out["mysqlType"] == {"id": "int"}
    assert out["_tidb"] == {"commitTs": TS}
    ins = json.loads(enc.encode_row(insert(PERSON_ROW, PERSON), PERSON))
    assert len(ins["data"][0]) == len(PERSON.columns)


def test_handle_key_only_and_claim_check_messages() -> None:
    enc = _enc()
    hk = enc.encode_row_handle_key_only(insert(PERSON_ROW, PERSON), PERSON)
    out = json.loads(hk)
    assert out["data"] == [{"id": "1"}]
    assert out["_tidb"] == {"commitTs": TS, "onlyHandleKey": True}
    cc = json.loads(enc.encode_row_claim_check(insert(PERSON_ROW, PERSON), PERSON, "s3://b/claim/x.json"))
    assert cc["data"] == [{"id": "1"}]
    assert cc["_tidb"] == {"commitTs": TS, "claimCheckLocation": "s3://b/claim/x.json"}
    msg = decode_canal_json(hk)
    assert msg.only_handle_key and msg.commit_ts == TS
    assert decode_canal_json(orjson.dumps(cc)).claim_check_location == "s3://b/claim/x.json"
    with pytest.raises(ConfigError, match="enable-tidb-extension=true"):
        _enc(ext=False).encode_row_handle_key_only(insert(PERSON_ROW, PERSON), PERSON)


def test_pk_names_empty_list_without_primary_key() -> None:
    table = TableInfo(
        "s",
        "t",
        (ColumnInfo("u", "int", nullable=False), ColumnInfo("v", "int")),
        indexes=(IndexInfo("uk", ("u",), unique=True),),
    )
    out = json.loads(_enc().encode_row(insert((1, 2), table), table))
    assert out["pkNames"] == []
    # the NOT NULL unique key is the handle key for handle-key-only messages
    hk = json.loads(_enc().encode_row_handle_key_only(insert((1, 2), table), table))
    assert hk["data"] == [{"u": "1"}]
    no_key = TableInfo("s", "t", (ColumnInfo("v", "int"),))
    nk = json.loads(_enc().encode_row_handle_key_only(insert((2,), no_key), no_key))
    assert nk["sqlType"] is None and nk["mysqlType"] is None and nk["data"] == [{}]


def test_es_and_injected_ts() -> None:
    out = json.loads(_enc().encode_row(insert(PERSON_ROW, PERSON, ts=(1700000000123 << 18) | 5), PERSON))
    assert out["es"] == 1700000000123
    assert out["ts"] == NOW
    real = json.loads(CanalJsonEncoder(None, True).encode_row(insert(PERSON_ROW, PERSON), PERSON))
    assert real["ts"] > 1_600_000_000_000


@pytest.mark.parametrize(
    ("ddl_type", "canal"),
    [
        (DDLType.CREATE_SCHEMA, "QUERY"),
        (DDLType.DROP_SCHEMA, "QUERY"),
        (DDLType.ALTER_SCHEMA, "QUERY"),
        (DDLType.CREATE_TABLE, "CREATE"),
        (DDLType.DROP_TABLE, "ERASE"),
        (DDLType.TRUNCATE_TABLE, "TRUNCATE"),
        (DDLType.RENAME_TABLE, "RENAME"),
        (DDLType.ALTER_TABLE, "ALTER"),
        (DDLType.ADD_INDEX, "CINDEX"),
        (DDLType.DROP_INDEX, "DINDEX"),
        (DDLType.CREATE_VIEW, "QUERY"),
        (DDLType.DROP_VIEW, "QUERY"),
        (DDLType.OTHER, "QUERY"),
    ],
)
def test_ddl_type_mapping(ddl_type: DDLType, canal: str) -> None:
    assert canal_ddl_type(ddl_type) == canal
    out = decode_canal_json(_enc().encode_ddl(DDLEvent("q", "s", "t", ddl_type, TS, TS)))
    assert out.kind == "ddl" and out.type == canal and out.is_ddl and out.commit_ts == TS


def test_ddl_sql_is_escaped_and_schema_level_table_empty() -> None:
    ddl = DDLEvent("CREATE DATABASE `a<b>` /* é */", "a<b>", "", DDLType.CREATE_SCHEMA, TS, TS)
    b = _enc().encode_ddl(ddl)
    assert b'"sql":"CREATE DATABASE `a\\u003cb\\u003e` /* \xc3\xa9 */"' in b
    msg = decode_canal_json(b)
    assert (msg.database, msg.table, msg.sql, msg.pk_names) == ("a<b>", "", ddl.query, None)


def test_decoder_fields_and_kinds() -> None:
    enc = _enc()
    msg = decode_canal_json(enc.encode_row(insert(PERSON_ROW, PERSON), PERSON))
    assert msg.kind == "dml" and msg.type == "INSERT" and not msg.is_ddl
    assert (msg.database, msg.table, msg.pk_names) == ("test", "person", ["id"])
    assert msg.es == TS >> 18 and msg.ts == NOW and msg.commit_ts == TS
    assert msg.sql == "" and msg.old is None and msg.sql_type is not None and msg.sql_type["f"] == 7
    wm = decode_canal_json(enc.encode_watermark(TS) or b"")
    assert wm.kind == "watermark" and wm.watermark_ts == TS and wm.commit_ts is None
    no_ext = decode_canal_json(_enc(ext=False).encode_row(insert(PERSON_ROW, PERSON), PERSON))
    assert no_ext.commit_ts is None
    with pytest.raises(DecodeError, match="not a canal-json message"):
        decode_canal_json(b"{oops")
    with pytest.raises(DecodeError, match="unknown type 'UPSERT'"):
        decode_canal_json(b'{"isDdl":false,"type":"UPSERT"}')


def test_canal_value_to_python_for_mysql_parameters() -> None:
    e = PERSON.column("e")
    s = PERSON.column("s")
    assert canal_value_to_python(None, "int") is None
    assert canal_value_to_python("\x01A<\xff", "varbinary") == b"\x01A<\xff"
    assert canal_value_to_python("\x00", "binary(4)") == b"\x00"
    assert canal_value_to_python("2", "enum", e) == "b"
    assert canal_value_to_python("2", "enum('a','b','c')") == 2
    assert canal_value_to_python("3", "set", s) == "x,y"
    assert canal_value_to_python("3", "set") == 3
    assert canal_value_to_python("65", "bit") == 65
    assert canal_value_to_python("12.50", "decimal") == "12.50"
    assert canal_value_to_python("caf\u00e9", "varchar") == "café"
    with pytest.raises(DecodeError, match="above U\\+00FF"):
        canal_value_to_python("€", "blob")


@pytest.mark.parametrize("make_row", [full_row, null_row, small_row])
@pytest.mark.parametrize("ext", [True, False])
def test_round_trip_every_type(make_row: Any, ext: bool) -> None:
    enc = _enc(ext=ext)
    row = make_row()
    for change in (insert(row), delete(row), update(small_row(9), row)):
        msg = decode_canal_json(enc.encode_row(change, ALL_TYPES))
        back = canal_message_to_row_change(msg, ALL_TYPES)
        assert back.op == change.op
        assert back.before == change.before
        assert back.after == change.after
        assert back.commit_ts == (TS if ext else 0)
        for col, v in zip(ALL_TYPES.columns, row, strict=True):
            assert type(canal_value_to_model(enc_value(v, col), col)) is type(v), col.name


def enc_value(v: Any, col: ColumnInfo) -> str | None:
    from sparkcdc.codec.values import canal_value

    return canal_value(v, col)


def test_round_trip_only_updated_columns_restores_pre_image() -> None:
    enc = _enc(only_output_updated_columns=True)
    change = update(full_row(), (*full_row()[:5], 1, *full_row()[6:]))
    back = canal_message_to_row_change(decode_canal_json(enc.encode_row(change, ALL_TYPES)), ALL_TYPES)
    assert back.before == change.before and back.after == change.after


def test_row_change_with_missing_image_is_refused() -> None:
    bad = RowChange("I", "test", "all_types", 7, TS, None, None)
    with pytest.raises(DecodeError, match="has no post-image"):
        _enc().encode_row(bad, ALL_TYPES)


def test_unknown_enum_value_is_refused_with_the_value() -> None:
    row = list(full_row())
    row[26] = "nope"
    with pytest.raises(DecodeError, match="'nope' is not an element of ENUM column 't_enum'"):
        _enc().encode_row(insert(tuple(row)), ALL_TYPES)


def test_encoder_is_picklable_and_reuses_plans() -> None:
    import pickle

    enc = _enc()
    first = enc.encode_row(insert(PERSON_ROW, PERSON), PERSON)
    enc2 = pickle.loads(pickle.dumps(CanalJsonEncoder(None, True)))
    enc2._now_ms = lambda: NOW
    assert enc2.encode_row(insert(PERSON_ROW, PERSON), PERSON) == first
    renamed = PERSON.renamed("other", "people")
    out = json.loads(enc.encode_row(RowChange("I", "other", "people", 0, TS, None, PERSON_ROW), renamed))
    assert (out["database"], out["table"]) == ("other", "people")


def test_fast_json_str_path_equals_the_full_escape_table() -> None:
    import random

    from sparkcdc.codec.canal_json.reference import ESCAPES as _ESCAPES

    rng = random.Random(5)
    alphabet = [
        "a",
        "é",
        "😀",
        "<",
        ">",
        "&",
        '"',
        "\\",
        "\n",
        "\r",
        "\t",
        "\x00",
        "\x08",
        "\x0c",
        "\x1f",
        "\x7f",
    ]
    alphabet += ["\u2028", "\u2029", "\udc80", "/", "'"]
    for _ in range(5000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        assert json_str(s) == '"' + s.translate(_ESCAPES) + '"', repr(s)


def test_options_come_from_replica_config() -> None:
    cfg = ReplicaConfig.from_dict(
        {"sink": {"only-output-updated-columns": True, "delete-only-output-handle-key-columns": True}}
    )
    enc = CanalJsonEncoder(cfg, True, now_ms=lambda: NOW)
    assert enc.only_output_updated_columns and enc.delete_only_output_handle_key_columns
    assert not enc.content_compatible
    assert json.loads(enc.encode_row(delete(PERSON_ROW, PERSON), PERSON))["data"] == [{"id": "1"}]
    override = CanalJsonEncoder(cfg, True, only_output_updated_columns=False)
    assert not override.only_output_updated_columns
