"""Schema generation (spec §2): the example byte for byte, every type in every mode, defaults, names."""

from __future__ import annotations

import io
import json
import struct
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from sparkcdc.codec.avro_schema import (
    build_table_schemas,
    column_block,
    decimal_unscaled_bytes,
    field_block,
    go_json,
    sanitize_name,
    subject_for,
    to_record,
)
from sparkcdc.errors import SinkError
from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo
from tests.unit.avro.tables import ALL_TYPES, all_types_row, all_types_table, person

SPEC_KEY = (
    '{"type":"record","name":"person","namespace":"default.test","fields":'
    '[{"name":"id","type":{"type":"int","connect.parameters":{"tidb_type":"INT"}}}]}'
)
SPEC_VALUE_FIELDS = """
[{"name":"id","type":{"type":"int","connect.parameters":{"tidb_type":"INT"}}},
 {"default":null,"name":"name","type":["null",{"type":"string","connect.parameters":{"tidb_type":"TEXT"}}]},
 {"default":0,"name":"ubig","type":{"type":"long","connect.parameters":{"tidb_type":"BIGINT UNSIGNED"}}},
 {"default":null,"name":"price","type":["null",{"type":"bytes","connect.parameters":{"tidb_type":"DECIMAL"},"logicalType":"decimal","precision":10,"scale":2}]},
 {"default":null,"name":"b","type":["null",{"type":"bytes","connect.parameters":{"length":"8","tidb_type":"BIT"}}]},
 {"default":null,"name":"e","type":["null",{"type":"string","connect.parameters":{"allowed":"a,b,c","tidb_type":"ENUM"}}]},
 {"default":"","name":"_tidb_op","type":"string"},{"default":0,"name":"_tidb_commit_ts","type":"long"},{"default":0,"name":"_tidb_commit_physical_time","type":"long"}]
"""


def _schemas(table: TableInfo, *, ext: bool = True, decimal: str = "precise", bigint: str = "long") -> Any:
    return build_table_schemas(
        table, namespace="default", extension=ext, decimal_mode=decimal, bigint_mode=bigint
    )


def _sorted(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def test_spec_example_key_schema_is_byte_identical() -> None:
    assert _schemas(person()).key_json == SPEC_KEY


def test_spec_example_value_schema_matches_after_sorting_keys() -> None:
    value = json.loads(_schemas(person()).value_json)
    assert (value["type"], value["name"], value["namespace"]) == ("record", "person", "default.test")
    assert _sorted(value["fields"]) == _sorted(json.loads(SPEC_VALUE_FIELDS))
    # Go's json.Marshal order: top-level struct fields, then sorted map keys in each field
    text = _schemas(person()).value_json
    assert text.startswith('{"type":"record","name":"person","namespace":"default.test","fields":[')
    assert (
        '{"default":0,"name":"ubig","type":{"type":"long","connect.parameters":{"tidb_type":"BIGINT UNSIGNED"}}}'
        in text
    )


def test_extension_off_has_no_tidb_fields() -> None:
    names = [f["name"] for f in json.loads(_schemas(person(), ext=False).value_json)["fields"]]
    assert names == ["id", "name", "ubig", "price", "b", "e"]


# name -> (tidb_type, avro type in precise/long mode, extra connect.parameters)
EXPECTED: dict[str, tuple[str, str, dict[str, str]]] = {
    "c_tinyint": ("INT", "int", {}),
    "c_bool": ("INT", "int", {}),
    "c_utinyint": ("INT UNSIGNED", "int", {}),
    "c_smallint": ("INT", "int", {}),
    "c_usmallint": ("INT UNSIGNED", "int", {}),
    "c_mediumint": ("INT", "int", {}),
    "c_umediumint": ("INT UNSIGNED", "int", {}),
    "c_int": ("INT", "int", {}),
    "c_uint": ("INT UNSIGNED", "long", {}),
    "c_bigint": ("BIGINT", "long", {}),
    "c_ubigint": ("BIGINT UNSIGNED", "long", {}),
    "c_float": ("FLOAT", "float", {}),
    "c_double": ("DOUBLE", "double", {}),
    "c_decimal": ("DECIMAL", "bytes", {}),
    "c_decimal_default": ("DECIMAL", "bytes", {}),
    "c_date": ("DATE", "string", {}),
    "c_datetime": ("DATETIME", "string", {}),
    "c_timestamp": ("TIMESTAMP", "string", {}),
    "c_time": ("TIME", "string", {}),
    "c_year": ("YEAR", "int", {}),
    "c_char": ("TEXT", "string", {}),
    "c_varchar": ("TEXT", "string", {}),
    "c_tinytext": ("TEXT", "string", {}),
    "c_text": ("TEXT", "string", {}),
    "c_mediumtext": ("TEXT", "string", {}),
    "c_longtext": ("TEXT", "string", {}),
    "c_binary": ("BLOB", "bytes", {}),
    "c_varbinary": ("BLOB", "bytes", {}),
    "c_tinyblob": ("BLOB", "bytes", {}),
    "c_blob": ("BLOB", "bytes", {}),
    "c_mediumblob": ("BLOB", "bytes", {}),
    "c_longblob": ("BLOB", "bytes", {}),
    "c_enum": ("ENUM", "string", {"allowed": "x,y\\,z,it's"}),
    "c_set": ("SET", "string", {"allowed": "a,b,c"}),
    "c_bit": ("BIT", "bytes", {"length": "12"}),
    "c_bit1": ("BIT", "bytes", {"length": "1"}),
    "c_json": ("JSON", "string", {}),
}


@pytest.mark.parametrize("decimal", ["precise", "string"])
@pytest.mark.parametrize("bigint", ["long", "string"])
@pytest.mark.parametrize("col", [c for c, _ in ALL_TYPES], ids=lambda c: c.name)
def test_every_type_in_every_mode(col: ColumnInfo, decimal: str, bigint: str) -> None:
    tidb, avro_type, extra = EXPECTED[col.name]
    block = column_block(col, decimal, bigint)
    assert block["connect.parameters"] == {"tidb_type": tidb, **extra}
    if col.type == "decimal" and decimal == "precise":
        assert block["type"] == "bytes" and block["logicalType"] == "decimal"
        assert (block["precision"], block["scale"]) == ((20, 4) if col.name == "c_decimal" else (10, 0))
    elif col.type == "decimal":
        assert block["type"] == "string" and "logicalType" not in block
    elif col.name == "c_ubigint" and bigint == "string":
        assert block["type"] == "string"
    else:
        assert block["type"] == avro_type


@pytest.mark.parametrize("decimal", ["precise", "string"])
@pytest.mark.parametrize("bigint", ["long", "string"])
def test_every_value_round_trips_through_fastavro(decimal: str, bigint: str) -> None:
    table = all_types_table()
    schemas = _schemas(table, ext=False, decimal=decimal, bigint=bigint)
    parsed = fastavro.parse_schema(json.loads(schemas.value_json))
    rec = to_record(schemas.value_fields, all_types_row())
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, rec)
    buf.seek(0)
    got = fastavro.schemaless_reader(buf, parsed, None)
    assert isinstance(got, dict)
    expected = dict(zip(table.column_names, all_types_row(), strict=True))
    for name, want in expected.items():
        value = got[name]
        if name == "c_ubigint":
            assert value == ("18446744073709551615" if bigint == "string" else -1)
        elif name == "c_float":
            assert value == struct.unpack("<f", struct.pack("<f", 3.14))[0]
        elif name.startswith("c_decimal"):
            col = table.column(name)
            if decimal == "precise":
                assert value == want and isinstance(value, Decimal)
            else:
                assert value == f"{want:.{col.scale or 0}f}"
        elif name == "c_bit":
            assert value == b"\x01\x41"
        elif name == "c_bit1":
            assert value == b"\x00"
        else:
            assert value == want, name
    # NULLs encode as the null branch
    nulls = to_record(schemas.value_fields, (1,) + (None,) * len(ALL_TYPES))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, nulls)
    buf.seek(0)
    assert fastavro.schemaless_reader(buf, parsed, None) == nulls


def test_decimal_is_minimal_twos_complement_big_endian() -> None:
    assert decimal_unscaled_bytes(Decimal("12.50"), 2) == b"\x04\xe2"
    assert decimal_unscaled_bytes(Decimal("-1.00"), 2) == b"\x9c"
    assert decimal_unscaled_bytes(Decimal("127"), 0) == b"\x7f"
    assert decimal_unscaled_bytes(Decimal("128"), 0) == b"\x00\x80"
    assert decimal_unscaled_bytes(Decimal("-128"), 0) == b"\x80"
    assert decimal_unscaled_bytes(Decimal("0"), 3) == b"\x00"
    with pytest.raises(SinkError, match="more fraction digits"):
        decimal_unscaled_bytes(Decimal("1.234"), 2)


def test_bit_values_are_minimal_big_endian_bytes() -> None:
    t = TableInfo("d", "t", (ColumnInfo("b", "bit", length=64),))
    fields = _schemas(t, ext=False).value_fields
    assert to_record(fields, (65,)) == {"b": b"\x41"}
    assert to_record(fields, (0,)) == {"b": b"\x00"}
    assert to_record(fields, (2**64 - 1,)) == {"b": b"\xff" * 8}


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("1C", "_1C"),
        ("A.B", "A_B"),
        ("x中文", "x__"),
        ("中x", "_x"),
        ("ok_1", "ok_1"),
        ("a-b c", "a_b_c"),
        ("", ""),
    ],
)
def test_sanitize_name(raw: str, clean: str) -> None:
    assert sanitize_name(raw) == clean


def test_names_and_namespace_are_sanitised() -> None:
    t = TableInfo(
        "my-db",
        "1table.x",
        (ColumnInfo("1col", "int", nullable=False), ColumnInfo("列", "int")),
        indexes=(IndexInfo("PRIMARY", ("1col",), unique=True, primary=True),),
    )
    value = json.loads(
        build_table_schemas(
            t, namespace="ns-1", extension=False, decimal_mode="precise", bigint_mode="long"
        ).value_json
    )
    assert (value["name"], value["namespace"]) == ("_1table_x", "ns_1.my_db")
    assert [f["name"] for f in value["fields"]] == ["_1col", "_"]
    fastavro.parse_schema(value)  # a valid Avro schema


def test_sanitised_name_clash_is_refused() -> None:
    t = TableInfo("d", "t", (ColumnInfo("a-b", "int"), ColumnInfo("a_b", "int")))
    with pytest.raises(SinkError, match="both become Avro field 'a_b'"):
        _schemas(t)


def test_extension_name_clash_is_refused() -> None:
    t = TableInfo("d", "t", (ColumnInfo("_tidb_op", "int"),))
    with pytest.raises(SinkError, match="_tidb_op"):
        _schemas(t, ext=True)
    _schemas(t, ext=False)


def test_unsupported_type_names_column_and_fix() -> None:
    t = TableInfo("d", "t", (ColumnInfo("g", "geometry"),))
    with pytest.raises(SinkError, match=r"column 'g' of type 'geometry'.*\[filter\] rules"):
        _schemas(t)


def test_subject_is_topic_with_dots_replaced() -> None:
    assert subject_for("a.b.c", True) == "a_b_c-key"
    assert subject_for("test_person", False) == "test_person-value"


# -- defaults and nullability ---------------------------------------------------------------------------


def _field(col: ColumnInfo, decimal: str = "precise", bigint: str = "long") -> dict[str, Any]:
    return field_block(col, decimal, bigint)


def test_nullable_with_default_puts_type_first() -> None:
    f = _field(ColumnInfo("n", "int", default="5", has_default=True))
    assert f == {
        "default": 5,
        "name": "n",
        "type": [{"type": "int", "connect.parameters": {"tidb_type": "INT"}}, "null"],
    }


def test_nullable_without_default_is_null_first_with_null_default() -> None:
    f = _field(ColumnInfo("n", "varchar", charset="utf8mb4"))
    assert f["type"][0] == "null" and f["default"] is None


def test_not_null_without_default_has_no_default() -> None:
    assert "default" not in _field(ColumnInfo("n", "int", nullable=False))


def test_not_null_with_default() -> None:
    assert (
        _field(ColumnInfo("s", "varchar", nullable=False, default="abc", has_default=True))["default"]
        == "abc"
    )
    assert (
        _field(ColumnInfo("y", "year", nullable=False, default="2024", has_default=True))["default"] == 2024
    )
    assert (
        _field(ColumnInfo("f", "float", nullable=False, default="1.1", has_default=True))["default"]
        == (struct.unpack("<f", struct.pack("<f", 1.1))[0])
    )
    f = _field(
        ColumnInfo(
            "u", "bigint", unsigned=True, nullable=False, default="18446744073709551615", has_default=True
        )
    )
    assert f["default"] == -1
    f = _field(
        ColumnInfo(
            "u", "bigint", unsigned=True, nullable=False, default="18446744073709551615", has_default=True
        ),
        bigint="string",
    )
    assert f["default"] == "18446744073709551615"


def test_decimal_logical_type_never_has_a_default() -> None:
    col = ColumnInfo("d", "decimal", precision=5, scale=2, nullable=False, default="1.50", has_default=True)
    assert "default" not in _field(col)
    assert _field(col, decimal="string")["default"] == "1.50"
    nullable = ColumnInfo("d", "decimal", precision=5, scale=2, default="1.50", has_default=True)
    assert _field(nullable)["default"] is None and _field(nullable)["type"][0] == "null"


def test_bit_and_binary_defaults_are_avro_byte_strings() -> None:
    f = _field(ColumnInfo("b", "bit", length=8, nullable=False, default="b'101'", has_default=True))
    assert f["default"] == "\x05"
    g = _field(ColumnInfo("v", "varbinary", length=4, nullable=False, default="ab", has_default=True))
    assert g["default"] == "ab"
    # the Avro reading of a default string is its code points as bytes: check with Apache Avro's parser
    import avro.schema

    parsed = avro.schema.parse(json.dumps({"type": "record", "name": "r", "fields": [f, g]}))
    assert [fld.default.encode("latin-1") for fld in parsed.fields] == [b"\x05", b"ab"]


def test_expression_defaults() -> None:
    ts = _field(ColumnInfo("t", "timestamp", nullable=False, default="current_timestamp()", has_default=True))
    assert ts["default"] == "CURRENT_TIMESTAMP"
    expr = _field(ColumnInfo("n", "int", nullable=False, default="(1 + 1)", has_default=True))
    assert "default" not in expr


def test_go_json_escapes_html_characters_like_go() -> None:
    assert go_json({"a": "<&>", "b": "é\u2028"}) == '{"a":"\\u003c\\u0026\\u003e","b":"é\\u2028"}'


def test_unique_key_positions_include_pk_and_uk() -> None:
    t = TableInfo(
        "d",
        "t",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("u", "int"), ColumnInfo("v", "int")),
        indexes=(IndexInfo("PRIMARY", ("id",), True, True), IndexInfo("uk", ("u",), unique=True)),
    )
    s = _schemas(t)
    assert s.unique_positions == (0, 1)
    assert [f.name for f in s.key_fields] == ["id"]


def test_key_is_handle_key_columns_in_table_order() -> None:
    t = TableInfo(
        "d",
        "t",
        (
            ColumnInfo("a", "int", nullable=False),
            ColumnInfo("b", "int", nullable=False),
            ColumnInfo("c", "int"),
        ),
        indexes=(IndexInfo("PRIMARY", ("b", "a"), True, True),),
    )
    key = json.loads(_schemas(t).key_json or "")
    assert [f["name"] for f in key["fields"]] == ["a", "b"]


def test_table_without_handle_key_has_no_key_schema() -> None:
    t = TableInfo("d", "t", (ColumnInfo("a", "int"),))
    assert _schemas(t).key_json is None


def test_decimal_65_digits_is_exact() -> None:
    d = Decimal("-99999999999999999999999999999999999.999999999999999999999999999999")
    raw = decimal_unscaled_bytes(d, 30)
    assert int.from_bytes(raw, "big", signed=True) == -(10**65 - 1)
    assert decimal_unscaled_bytes(Decimal("1E+2"), 2) == (10000).to_bytes(2, "big", signed=True)
    t = TableInfo("d", "t", (ColumnInfo("x", "decimal", precision=65, scale=30),))
    for mode in ("precise", "string"):
        s = _schemas(t, ext=False, decimal=mode)
        parsed = fastavro.parse_schema(json.loads(s.value_json))
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, to_record(s.value_fields, (d,)))
        buf.seek(0)
        got = fastavro.schemaless_reader(buf, parsed, None)
        assert got == {"x": d if mode == "precise" else str(d)}
