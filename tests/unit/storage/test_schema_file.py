"""Schema files: TiCDC's TableDefinition body, checksum (tiflow's test vectors) and inverse."""

from __future__ import annotations

import json
import random

import pytest

from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, TableInfo
from sparkcdc.sink.storage.schema_file import TableCol, TableDefinition, ddl_action_type, go_json


def tiflow_table() -> TableInfo:
    """tiflow pkg/sink/cloudstorage/table_definition_test.go generateTableDef()."""
    return TableInfo(
        schema="schema1",
        table="table1",
        columns=(
            ColumnInfo("Id", "int", nullable=False),
            ColumnInfo("LastName", "varchar", length=128, nullable=False),
            ColumnInfo("FirstName", "varchar", length=64),
            ColumnInfo("Birthday", "datetime"),
        ),
        indexes=(IndexInfo("PRIMARY", ("Id",), unique=True, primary=True),),
        version=100,
    )


def test_tiflow_table_definition_body() -> None:
    d = TableDefinition.from_table_info(tiflow_table(), 100)
    assert json.loads(d.marshal()) == {
        "Table": "table1",
        "Schema": "schema1",
        "Version": 1,
        "TableVersion": 100,
        "Query": "",
        "Type": 0,
        "TableColumns": [
            {
                "ColumnName": "Id",
                "ColumnType": "INT",
                "ColumnPrecision": "11",
                "ColumnNullable": "false",
                "ColumnIsPk": "true",
            },
            {
                "ColumnName": "LastName",
                "ColumnType": "VARCHAR",
                "ColumnPrecision": "128",
                "ColumnNullable": "false",
            },
            {"ColumnName": "FirstName", "ColumnType": "VARCHAR", "ColumnPrecision": "64"},
            {"ColumnName": "Birthday", "ColumnType": "DATETIME"},
        ],
        "TableColumnsTotal": 4,
    }


def test_body_is_go_marshal_indent_with_key_order() -> None:
    d = TableDefinition.from_table_info(tiflow_table(), 100)
    text = d.marshal().decode()
    assert text.startswith('{\n    "Table": "table1",\n    "Schema": "schema1",\n    "Version": 1,\n')
    assert '        {\n            "ColumnName": "Id",\n            "ColumnType": "INT",\n' in text
    assert text.endswith('\n    ],\n    "TableColumnsTotal": 4\n}')


def test_tiflow_schema_file_paths() -> None:
    """tiflow TestTableDefinitionGenFilePath."""
    db = TableDefinition(schema="schema1", table_version=100)
    assert db.path() == "schema1/meta/schema_100_3233644819.json"
    assert json.loads(db.marshal())["TableColumns"] is None
    assert (
        TableDefinition.from_table_info(tiflow_table(), 100).path()
        == "schema1/table1/meta/schema_100_0785427252.json"
    )


def test_tiflow_ddl_schema_file_vector() -> None:
    """tiflow cloud storage DDL sink test: schema_100_4192708364.json for an ADD COLUMN."""
    info = TableInfo(
        "test", "table1", (ColumnInfo("col1", "int"), ColumnInfo("col2", "varchar")), version=100
    )
    ddl = DDLEvent(
        query="alter table test.table1 add col2 varchar(64)",
        schema="test",
        table="table1",
        ddl_type=DDLType.ALTER_TABLE,
        commit_ts=100,
        table_version=100,
        table_info=info,
    )
    d = TableDefinition.from_ddl(ddl, info)
    assert d.path() == "test/table1/meta/schema_100_4192708364.json"
    body = json.loads(d.marshal())
    assert body["Type"] == 5
    assert body["Query"] == "alter table test.table1 add col2 varchar(64)"
    assert body["TableColumns"] == [
        {"ColumnName": "col1", "ColumnType": "INT", "ColumnPrecision": "11"},
        {"ColumnName": "col2", "ColumnType": "VARCHAR", "ColumnPrecision": "5"},
    ]


def test_checksum_ignores_column_order_version_and_query() -> None:
    """tiflow TestTableDefinitionSum32: the checksum is over columns sorted by name."""
    base = TableDefinition.from_table_info(tiflow_table(), 100)
    expected = base.checksum()
    rng = random.Random(7)
    for _ in range(10):
        cols = list(base.columns or [])
        rng.shuffle(cols)
        other = TableDefinition(
            schema="schema1",
            table="table1",
            table_version=999,
            query="x",
            type=5,
            columns=cols,
            total_columns=4,
        )
        assert other.checksum() == expected
    changed = TableDefinition.from_table_info(tiflow_table().renamed("schema1", "table2"), 100)
    assert changed.checksum() != expected


@pytest.mark.parametrize(
    ("col", "expected"),
    [
        (ColumnInfo("c", "time", fsp=5), {"ColumnType": "TIME", "ColumnScale": "5"}),
        (
            ColumnInfo("c", "int", unsigned=True, length=5),
            {"ColumnType": "INT UNSIGNED", "ColumnPrecision": "5"},
        ),
        (ColumnInfo("c", "int", unsigned=True), {"ColumnType": "INT UNSIGNED", "ColumnPrecision": "10"}),
        (
            ColumnInfo("c", "float", precision=12, scale=3),
            {"ColumnType": "FLOAT", "ColumnPrecision": "12", "ColumnScale": "3"},
        ),
        (ColumnInfo("c", "float"), {"ColumnType": "FLOAT", "ColumnPrecision": "12"}),
        (
            ColumnInfo("c", "double", precision=7, scale=3),
            {"ColumnType": "DOUBLE", "ColumnPrecision": "7", "ColumnScale": "3"},
        ),
        (ColumnInfo("c", "double"), {"ColumnType": "DOUBLE", "ColumnPrecision": "22"}),
        (
            ColumnInfo("c", "decimal", precision=10, scale=2),
            {"ColumnType": "DECIMAL", "ColumnPrecision": "10", "ColumnScale": "2"},
        ),
        (ColumnInfo("c", "decimal"), {"ColumnType": "DECIMAL", "ColumnPrecision": "10", "ColumnScale": "0"}),
        (ColumnInfo("c", "tinyint", length=5), {"ColumnType": "TINYINT", "ColumnPrecision": "5"}),
        (ColumnInfo("c", "smallint", length=5), {"ColumnType": "SMALLINT", "ColumnPrecision": "5"}),
        (ColumnInfo("c", "mediumint", length=10), {"ColumnType": "MEDIUMINT", "ColumnPrecision": "10"}),
        (ColumnInfo("c", "int"), {"ColumnType": "INT", "ColumnPrecision": "11"}),
        (ColumnInfo("c", "bigint", length=20), {"ColumnType": "BIGINT", "ColumnPrecision": "20"}),
        (ColumnInfo("c", "bit", length=5), {"ColumnType": "BIT", "ColumnPrecision": "5"}),
        (ColumnInfo("c", "varchar", length=128), {"ColumnType": "VARCHAR", "ColumnPrecision": "128"}),
        (ColumnInfo("c", "char", length=32), {"ColumnType": "CHAR", "ColumnPrecision": "32"}),
        (ColumnInfo("c", "blob", length=100), {"ColumnType": "BLOB", "ColumnPrecision": "100"}),
        (ColumnInfo("c", "text", length=100), {"ColumnType": "TEXT", "ColumnPrecision": "100"}),
        (ColumnInfo("c", "text"), {"ColumnType": "TEXT", "ColumnPrecision": "65535"}),
        (ColumnInfo("c", "tinyblob", length=120), {"ColumnType": "TINYBLOB", "ColumnPrecision": "120"}),
        (ColumnInfo("c", "longblob", length=5), {"ColumnType": "LONGBLOB", "ColumnPrecision": "5"}),
        (ColumnInfo("c", "enum", elements=("a", "b")), {"ColumnType": "ENUM"}),
        (ColumnInfo("c", "set", elements=("a", "b")), {"ColumnType": "SET"}),
        (ColumnInfo("c", "timestamp", fsp=2), {"ColumnType": "TIMESTAMP", "ColumnScale": "2"}),
        (ColumnInfo("c", "timestamp"), {"ColumnType": "TIMESTAMP"}),
        (ColumnInfo("c", "datetime", fsp=2), {"ColumnType": "DATETIME", "ColumnScale": "2"}),
        (ColumnInfo("c", "date"), {"ColumnType": "DATE"}),
        (ColumnInfo("c", "year", length=4), {"ColumnType": "YEAR", "ColumnPrecision": "4"}),
        (ColumnInfo("c", "json"), {"ColumnType": "JSON"}),
        (
            ColumnInfo("c", "varchar", length=8, default="abc", has_default=True),
            {"ColumnType": "VARCHAR", "ColumnDefault": "abc", "ColumnPrecision": "8"},
        ),
    ],
)
def test_table_col_from_column(col: ColumnInfo, expected: dict[str, str]) -> None:
    """tiflow TestTableCol, over sparkcdc's ColumnInfo."""
    assert TableCol.from_column(col, is_pk=False).to_json() == {"ColumnName": "c", **expected}


def test_column_id_only_with_output_column_id() -> None:
    d = TableDefinition.from_table_info(tiflow_table(), 100, output_column_id=True)
    cols = json.loads(d.marshal())["TableColumns"]
    assert [c["ColumnId"] for c in cols] == ["1", "2", "3", "4"]
    assert list(cols[0])[:2] == ["ColumnId", "ColumnName"]


def test_parse_round_trip_and_table_info() -> None:
    d = TableDefinition.from_table_info(tiflow_table(), 100)
    back = TableDefinition.parse(d.marshal())
    assert back == d
    info = back.to_table_info()
    assert info.primary_key == ("Id",)
    assert info.column("LastName").length == 128
    assert info.column("LastName").nullable is False
    assert info.column("FirstName").nullable is True
    # the definition of the parsed TableInfo hashes the same
    assert TableDefinition.from_table_info(info, 100).checksum() == d.checksum()


def test_go_json_escapes_like_encoding_json() -> None:
    assert (
        go_json({"Query": "a<b>&c\u2028\x01\n"}, indent=False)
        == b'{"Query":"a\\u003cb\\u003e\\u0026c\\u2028\\u0001\\n"}'
    )
    assert go_json({"q": "中文"}, indent=False) == '{"q":"中文"}'.encode()


def _ddl(query: str, kind: DDLType, table: str = "t") -> DDLEvent:
    return DDLEvent(query=query, schema="s", table=table, ddl_type=kind, commit_ts=1, table_version=1)


@pytest.mark.parametrize(
    ("query", "kind", "action"),
    [
        ("CREATE DATABASE s", DDLType.CREATE_SCHEMA, 1),
        ("DROP DATABASE s", DDLType.DROP_SCHEMA, 2),
        ("CREATE TABLE t (id int)", DDLType.CREATE_TABLE, 3),
        ("DROP TABLE t", DDLType.DROP_TABLE, 4),
        ("ALTER TABLE t ADD COLUMN c int", DDLType.ALTER_TABLE, 5),
        ("ALTER TABLE `s`.`t` ADD c int", DDLType.ALTER_TABLE, 5),
        ("ALTER TABLE t DROP COLUMN c", DDLType.ALTER_TABLE, 6),
        ("CREATE INDEX i ON t (c)", DDLType.ADD_INDEX, 7),
        ("ALTER TABLE t ADD INDEX i (c)", DDLType.ALTER_TABLE, 7),
        ("DROP INDEX i ON t", DDLType.DROP_INDEX, 8),
        ("TRUNCATE TABLE t", DDLType.TRUNCATE_TABLE, 11),
        ("ALTER TABLE t MODIFY c bigint", DDLType.ALTER_TABLE, 12),
        ("RENAME TABLE t TO u", DDLType.RENAME_TABLE, 14),
        ("RENAME TABLE a TO b, c TO d", DDLType.RENAME_TABLE, 47),
        ("ALTER TABLE t ALTER COLUMN c SET DEFAULT 1", DDLType.ALTER_TABLE, 15),
        ("ALTER TABLE t COMMENT = 'x'", DDLType.ALTER_TABLE, 17),
        ("ALTER TABLE t ADD PRIMARY KEY (id)", DDLType.ALTER_TABLE, 32),
        ("ALTER TABLE t ADD COLUMN a int, ADD COLUMN b decimal(10,2)", DDLType.ALTER_TABLE, 61),
        ("CREATE VIEW v AS SELECT 1", DDLType.CREATE_VIEW, 21),
    ],
)
def test_ddl_action_types(query: str, kind: DDLType, action: int) -> None:
    assert ddl_action_type(_ddl(query, kind)) == action
