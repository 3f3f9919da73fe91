"""Encode speed of the canal-json and CSV codecs for a 10-column row (one core).

Run: ``.venv/bin/python -m tests.unit.codec.bench_codecs``
"""

from __future__ import annotations

import time
from decimal import Decimal

from sparkcdc.codec.canal_json import CanalJsonEncoder, decode_canal_json
from sparkcdc.codec.csv import CSVDecoder, CSVEncoder
from sparkcdc.codec.values import to_float32
from sparkcdc.config.replica import CSVConfig
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo

TABLE = TableInfo(
    "bench",
    "orders",
    (
        ColumnInfo("id", "bigint", nullable=False),
        ColumnInfo("customer_id", "int", unsigned=True),
        ColumnInfo("status", "enum", elements=("new", "paid", "shipped")),
        ColumnInfo("amount", "decimal", precision=12, scale=2),
        ColumnInfo("ratio", "float"),
        ColumnInfo("note", "varchar", length=255),
        ColumnInfo("payload", "varbinary", length=64),
        ColumnInfo("created_at", "datetime", fsp=3),
        ColumnInfo("flags", "bit", length=8),
        ColumnInfo("attrs", "json"),
    ),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
)


def _rows(n: int) -> list[RowChange]:
    return [
        RowChange(
            "I",
            "bench",
            "orders",
            0,
            (1700000000000 << 18) + i,
            None,
            (
                i,
                i % 100000,
                "paid",
                Decimal("1234.50"),
                to_float32(0.25 + i % 7),
                f'order note number {i} <fragile> & "quoted"',
                b"\x00\x01binary\xff",
                "2024-05-06 07:08:09.123",
                5,
                '{"k": [1, 2]}',
            ),
        )
        for i in range(n)
    ]


def _rate(label: str, fn: object, rows: list[RowChange]) -> float:
    encode = fn  # type: ignore[assignment]
    start = time.perf_counter()
    for r in rows:
        encode(r, TABLE)  # type: ignore[operator]
    rate = len(rows) / (time.perf_counter() - start)
    print(f"{label:<28}{rate:>12,.0f} msg/s")
    return rate


def main(n: int = 100_000) -> None:
    """Print messages per second for each encoder (and the decoders)."""
    rows = _rows(n)
    canal = CanalJsonEncoder(None, True)
    _rate("canal-json encode", canal.encode_row, rows)
    _rate("csv encode", CSVEncoder(CSVConfig(include_commit_ts=True), "\r\n").encode_row, rows)
    msgs = [canal.encode_row(r, TABLE) for r in rows[:20000]]
    start = time.perf_counter()
    for m in msgs:
        decode_canal_json(m)
    print(f"{'canal-json decode':<28}{len(msgs) / (time.perf_counter() - start):>12,.0f} msg/s")
    csv_enc = CSVEncoder(CSVConfig(include_commit_ts=True), "\r\n")
    data = b"".join(csv_enc.encode_row(r, TABLE) for r in rows[:20000])
    start = time.perf_counter()
    count = sum(1 for _ in CSVDecoder(CSVConfig(include_commit_ts=True), "\r\n").decode(data, TABLE))
    print(f"{'csv decode':<28}{count / (time.perf_counter() - start):>12,.0f} rec/s")


if __name__ == "__main__":
    main()
