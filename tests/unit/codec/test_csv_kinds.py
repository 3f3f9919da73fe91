"""CSV column kinds: one rule per kind gives the encoder's formatter and the upstream's SQL field."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.codec.csv import CSVEncoder
from sparkcdc.codec.csv_kinds import (
    KINDS,
    ColumnKind,
    FieldStyle,
    SQLStyle,
    column_formatter,
    column_kind,
    column_sql,
    sql_string,
)
from sparkcdc.codec.csv_sql import ServerCSV
from sparkcdc.config.replica import CSVConfig
from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo
from sparkcdc.model.schema import ALL_TYPES

# One column and one typical (non-NULL) value of each kind.
SAMPLES: list[tuple[ColumnInfo, Any]] = [
    (ColumnInfo("i", "bigint"), -5),
    (ColumnInfo("b", "bit", length=8), 5),
    (ColumnInfo("y", "year"), 2024),
    (ColumnInfo("f", "float"), 1.5),
    (ColumnInfo("d", "double"), 0.25),
    (ColumnInfo("n", "decimal", precision=10, scale=2), Decimal("10.50")),
    (ColumnInfo("t", "datetime", fsp=6), "2024-01-02 03:04:05.000006"),
    (ColumnInfo("ts", "timestamp"), "2024-01-02 03:04:05"),
    (ColumnInfo("s", "varchar", length=10, charset="utf8mb4"), 'a"b'),
    (ColumnInfo("e", "enum", elements=("x", "y")), "y"),
    (ColumnInfo("j", "json"), "[1]"),
    (ColumnInfo("bl", "blob"), b"\x00\xff"),
    (ColumnInfo("g", "geometry"), "POINT(1 2)"),
]


def test_every_type_has_a_kind_and_every_kind_a_rule() -> None:
    assert set(KINDS) == set(ColumnKind)
    assert {column_kind(ColumnInfo("c", t)) for t in ALL_TYPES} == set(ColumnKind)
    assert column_kind(ColumnInfo("c", "some_future_type")) is ColumnKind.OTHER


@pytest.mark.parametrize(("col", "value"), SAMPLES, ids=lambda x: x.name if isinstance(x, ColumnInfo) else "")
@pytest.mark.parametrize("binary", ["base64", "hex"])
def test_formatter_and_sql_field_agree_on_quoting(col: ColumnInfo, value: Any, binary: str) -> None:
    text = column_formatter(col, FieldStyle('"', ",", "\\N", binary))(value)
    field = column_sql(col, "`c`", SQLStyle('"', binary, utc=True))
    if field is None:  # the upstream's text of this kind is not the encoder's
        assert column_kind(col) in (ColumnKind.FLOAT, ColumnKind.OTHER)
        return
    assert text.startswith('"') == field.value.startswith(sql_string('"'))
    assert column_formatter(col, FieldStyle('"', ",", "NULL", binary))(None) == "NULL"


def test_sql_doubles_the_quote_only_where_the_text_can_hold_it() -> None:
    dec = ColumnInfo("n", "decimal", precision=10, scale=2)
    text = ColumnInfo("s", "varchar", charset="utf8mb4")
    blob = ColumnInfo("bl", "blob")

    def doubled(col: ColumnInfo, quote: str, binary: str = "base64") -> bool:
        field = column_sql(col, "`c`", SQLStyle(quote, binary, utc=True))
        assert field is not None
        return sql_string(quote * 2) in field.value

    assert not doubled(dec, '"') and doubled(dec, "0") and doubled(dec, "-")
    assert doubled(text, '"') and doubled(text, "'")
    assert not doubled(blob, '"') and doubled(blob, "a") and doubled(blob, "=")
    assert not doubled(blob, "=", "hex") and doubled(blob, "a", "hex")
    # and the encoder doubles it there too
    assert column_formatter(dec, FieldStyle("0", ",", "\\N", "base64"))(Decimal("10.50")) == "0100.5000"


def test_upstream_refuses_what_it_cannot_render() -> None:
    server, why = ServerCSV.from_encoder(CSVEncoder(CSVConfig()))
    assert server is not None, why

    def table(*cols: ColumnInfo) -> TableInfo:
        return TableInfo(
            "s",
            "t",
            (ColumnInfo("id", "int", nullable=False), *cols),
            indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
        )

    for col in (
        ColumnInfo("f", "float"),
        ColumnInfo("d2", "double", precision=10, scale=2),
        ColumnInfo("g", "geometry"),
    ):
        rec, why = server.table(table(col), 1, "UTC")
        assert rec is None and f"{col.name!r} ({col.type})" in why
    ts = ColumnInfo("ts", "timestamp")
    assert server.table(table(ts), 1, "UTC")[0] is not None
    rec, why = server.table(table(ts), 1, "Asia/Shanghai")
    assert rec is None and "'ts' (timestamp)" in why
    rec, _ = server.table(table(*(c for c, _ in SAMPLES if c.type not in ("float", "geometry"))), 1, "UTC")
    assert rec is not None and "ABS(`d`) >= 0.0001" in rec.exact
