"""Table shapes of bench/storage's workload, for the benchmarks that build rows without a database."""

from __future__ import annotations

from sparkcdc.model import ColumnInfo, IndexInfo, TableInfo

ORDERS = TableInfo(
    schema="bench",
    table="orders",
    columns=(
        ColumnInfo("id", "int", length=11, nullable=False),
        ColumnInfo("tiny", "tinyint", length=4, nullable=False),
        ColumnInfo("qty", "int", unsigned=True, length=10, nullable=False),
        ColumnInfo("big", "bigint", length=20, nullable=False),
        ColumnInfo("price", "decimal", precision=12, scale=4, nullable=False),
        ColumnInfo("ratio", "double", nullable=False),
        ColumnInfo("name", "varchar", length=64, charset="utf8mb4", nullable=False),
        ColumnInfo("created", "datetime", fsp=6, nullable=False),
        ColumnInfo("updated", "timestamp", fsp=3),
        ColumnInfo("day", "date", nullable=False),
        ColumnInfo("digest", "blob", nullable=False),
        ColumnInfo("state", "enum", elements=("new", "paid", "shipped", "done"), nullable=False),
        ColumnInfo("note", "varchar", length=32, charset="utf8mb4"),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=1,
)

EVENTS = TableInfo(
    schema="bench",
    table="events",
    columns=(
        ColumnInfo("id", "bigint", length=20, nullable=False),
        ColumnInfo("order_id", "int", length=11, nullable=False),
        ColumnInfo("kind", "varchar", length=16, charset="utf8mb4", nullable=False),
        ColumnInfo("payload", "json"),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=1,
)
