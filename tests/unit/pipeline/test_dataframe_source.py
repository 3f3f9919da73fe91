"""The public source's options and the typed stream's Spark types and columns (no Spark session, no upstream)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from sparkcdc.errors import ConfigError, FilterRuleError, SchemaError
from sparkcdc.model import RowChange
from sparkcdc.model.schema import ColumnInfo, IndexInfo, TableInfo
from sparkcdc.pipeline.dataframe import OPTIONS, SourceOptions, parse_table_name
from sparkcdc.pipeline.dataframe_rows import OP_NAMES
from sparkcdc.pipeline.spark_types import (
    column_signature,
    spark_type,
    split_key_change,
    typed_columns,
    typed_schema,
)

UP = "mysql://cdc:pw@127.0.0.1:3306/"


def _opts(**kw: str) -> SourceOptions:
    return SourceOptions.parse(
        {"upstream-uri": UP, "data-dir": "/d", **{k.replace("_", "-"): v for k, v in kw.items()}}
    )


def test_options_default_and_given() -> None:
    o = _opts()
    assert (o.filter_rules, o.start_ts, o.table) == (["*.*"], None, None)
    o = _opts(filter="shop.*, !shop.tmp", start_ts="42")
    assert (o.filter_rules, o.start_ts) == (["shop.*", "!shop.tmp"], 42)
    o = SourceOptions.parse({"Upstream-URI": UP, "DATA-DIR": "/d", "Table": "shop.orders"})
    assert o.table == ("shop", "orders") and o.filter_rules == ["`shop`.`orders`"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"upstream-uri": UP, "data-dir": "/d", "start_tss": "1"}, "unknown option(s) ['start_tss']"),
        ({"data-dir": "/d"}, "option upstream-uri is required"),
        ({"upstream-uri": UP}, "option data-dir is required"),
        ({"upstream-uri": "http://x/", "data-dir": "/d"}, "invalid upstream URI scheme"),
        ({"upstream-uri": UP, "data-dir": "/d", "start-ts": "-3"}, "start-ts='-3'"),
        ({"upstream-uri": UP, "data-dir": "/d", "table": "orders"}, "table='orders'"),
        (
            {"upstream-uri": UP, "data-dir": "/d", "table": "a.b", "filter": "a.*"},
            "table and filter conflict",
        ),
        ({"upstream-uri": UP, "data-dir": "/d", "filter": " , "}, "give at least one rule"),
        ({"upstream-uri": UP, "data-dir": "/d", "path": "/x"}, "takes no path"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        SourceOptions.parse(options)
    assert message in str(err.value)


def test_unknown_option_lists_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        _opts(mode="rows")
    assert all(k in str(err.value) for k in OPTIONS)


def test_bad_filter_rule_is_refused() -> None:
    with pytest.raises(FilterRuleError):
        _opts(filter="shop.[")


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("shop.orders", ("shop", "orders")),
        ("`my.db`.`t`", ("my.db", "t")),
        ("shop.`a``b.c`", ("shop", "a`b.c")),
    ],
)
def test_table_names(text: str, name: tuple[str, str]) -> None:
    assert parse_table_name(text) == name


@pytest.mark.parametrize("text", ["a.b.c", "`a.b", "`a`x.b", ".b", "a."])
def test_bad_table_names(text: str) -> None:
    with pytest.raises(ConfigError, match="option table="):
        parse_table_name(text)


def _col(name: str, type_: str, **kw: Any) -> ColumnInfo:
    return ColumnInfo(name, type_, **kw)


@pytest.mark.parametrize(
    ("col", "spark"),
    [
        (_col("a", "tinyint"), IntegerType()),
        (_col("a", "tinyint", unsigned=True), IntegerType()),
        (_col("a", "mediumint", unsigned=True), IntegerType()),
        (_col("a", "int"), IntegerType()),
        (_col("a", "int", unsigned=True), LongType()),
        (_col("a", "bigint"), LongType()),
        (_col("a", "bigint", unsigned=True), DecimalType(20, 0)),
        (_col("a", "year"), IntegerType()),
        (_col("a", "bit", length=1), LongType()),
        (_col("a", "bit", length=64), DecimalType(20, 0)),
        (_col("a", "float"), FloatType()),
        (_col("a", "double"), DoubleType()),
        (_col("a", "decimal", precision=10, scale=2), DecimalType(10, 2)),
        (_col("a", "decimal", precision=65, scale=30), StringType()),
        (_col("a", "date"), DateType()),
        (_col("a", "datetime", fsp=3), TimestampNTZType()),
        (_col("a", "timestamp", fsp=6), TimestampType()),
        (_col("a", "time"), StringType()),
        (_col("a", "enum", elements=("x",)), StringType()),
        (_col("a", "set", elements=("x",)), StringType()),
        (_col("a", "json"), StringType()),
        (_col("a", "varchar", length=5), StringType()),
        (_col("a", "blob"), BinaryType()),
        (_col("a", "geometry"), BinaryType()),
    ],
)
def test_every_mysql_type_has_a_lossless_spark_type(col: ColumnInfo, spark: object) -> None:
    assert spark_type(col) == spark


TABLE = TableInfo(
    "shop",
    "orders",
    (
        _col("id", "bigint", unsigned=True),
        _col("big", "decimal", precision=40, scale=3),
        _col("day", "date"),
        _col("at", "datetime", fsp=6),
        _col("paid", "timestamp"),
        _col("note", "varchar", length=9),
    ),
)


def _typed(images: list[tuple[object, ...]], time_zone: str = "UTC") -> list[list[object]]:
    rows = [RowChange("I", "shop", "orders", 0, 7, None, img) for img in images]
    arrays = typed_columns(
        TABLE, rows, to_arrow_schema(typed_schema(TABLE), timezone="UTC"), OP_NAMES, time_zone
    )
    return [a.to_pylist() for a in arrays]


def test_typed_schema_and_values() -> None:
    assert typed_schema(TABLE).fieldNames() == [
        "id",
        "big",
        "day",
        "at",
        "paid",
        "note",
        "_op",
        "_commit_ts",
        "_seq",
    ]
    cols = _typed(
        [
            (
                2**64 - 1,
                Decimal("1.5"),
                "2024-02-29",
                "2024-02-29 23:59:59.000001",
                "2024-07-01 02:00:00",
                "x",
            ),
            (1, None, None, None, None, None),
        ],
        "Europe/Berlin",
    )
    assert cols[0] == [Decimal(2**64 - 1), Decimal(1)]
    assert cols[1] == ["1.500", None]  # DECIMAL(40,3): MySQL prints the scale
    assert cols[2] == [dt.date(2024, 2, 29), None]
    assert cols[3] == [dt.datetime(2024, 2, 29, 23, 59, 59, 1), None]
    assert cols[4] == [dt.datetime(2024, 7, 1, 0, 0, tzinfo=dt.UTC), None]
    assert cols[5:] == [["x", None], ["INSERT", "INSERT"], [7, 7], [0, 0]]


@pytest.mark.parametrize("value", ["0000-00-00", "2024-00-10"])
def test_a_zero_date_is_null_as_in_the_lakehouse_sinks(value: str) -> None:
    assert _typed([(1, None, value, None, None, None)])[2] == [None]


def test_reserved_column_names_and_signatures() -> None:
    clash = TableInfo("s", "t", (_col("_op", "int"),))
    with pytest.raises(SchemaError, match="'_op'"):
        typed_schema(clash)
    wider = TableInfo("shop", "orders", (*TABLE.columns, _col("extra", "int")))
    longer = TableInfo("shop", "orders", (*TABLE.columns[:5], _col("note", "varchar", length=90)))
    assert column_signature(wider) != column_signature(TABLE)
    assert column_signature(longer) == column_signature(TABLE)  # a longer VARCHAR keeps the typed rows


def test_a_key_change_is_a_delete_and_an_insert() -> None:
    keyed = TableInfo(
        "s", "t", (_col("id", "int"), _col("v", "int")), (IndexInfo("PRIMARY", ("id",), True, True),)
    )
    schema = to_arrow_schema(typed_schema(keyed), timezone="UTC")
    moved = RowChange("U", "s", "t", 0, 9, (1, 5), (2, 5), seq=3)
    changed = RowChange("U", "s", "t", 0, 9, (2, 5), (2, 6), seq=4)
    cols = [a.to_pylist() for a in typed_columns(keyed, [moved, changed], schema, OP_NAMES, "UTC")]
    assert cols == [[1, 2, 2], [5, 5, 6], ["DELETE", "INSERT", "UPDATE"], [9, 9, 9], [3, 3, 4]]
    keyless = TableInfo("s", "t", keyed.columns)
    assert split_key_change(moved, keyless.handle_key_index) == [moved]
