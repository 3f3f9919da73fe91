"""Benchmark: rows/s of MySQLApplier into a downstream MariaDB, beside a plain executemany.

    .venv/bin/python bench/mysql/run.py [--rows 100000] [--txn-rows 10] [--max-txn-row 256]
                                        [--uri mysql://root:@127.0.0.1:3306/]

Without ``--uri`` a throw-away MariaDB (no binlog) is started on a free port. The
same generated rows (INT PK, INT, VARCHAR(64), DECIMAL(12,2), DATETIME, DOUBLE,
in upstream transactions of ``--txn-rows`` rows) are loaded:

1. ``applier insert``: MySQLApplier, default settings (INSERT, downstream transactions
   of up to max-txn-row rows, multi-row statements);
2. ``applier safe-mode``: the same rows again as a replay (REPLACE);
3. ``applier mixed``: an UPDATE of every row then a DELETE of every other row;
4. ``executemany``: one PyMySQL connection, ``executemany`` of the same INSERT, one
   commit at the end (PyMySQL packs it into multi-row INSERTs) — the baseline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.sink.mysql import ConnParams, MySQLApplier, parse_mysql_sink

DB = "bench_mysql"
DDL = (
    "CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(64), c DECIMAL(12,2), "
    "d DATETIME, e DOUBLE)"
)
TABLE = TableInfo(
    DB,
    "t",
    (
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("a", "int", nullable=False),
        ColumnInfo("b", "varchar", length=64),
        ColumnInfo("c", "decimal", precision=12, scale=2),
        ColumnInfo("d", "datetime"),
        ColumnInfo("e", "double"),
    ),
    (IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
)


def gen_rows(n: int) -> list[tuple[Any, ...]]:
    """Deterministic row images."""
    return [
        (
            i,
            i * 7 % 1000,
            f"name-{i:08d}-{'x' * (i % 20)}",
            Decimal(i % 100000) / 100,
            f"2024-01-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}",
            i / 3.0,
        )
        for i in range(n)
    ]


def timed(label: str, n: int, fn: Callable[[], object]) -> dict[str, object]:
    """Run fn once and report rows/s."""
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    res = {"case": label, "rows": n, "seconds": round(dt, 3), "rows_per_s": round(n / dt)}
    print(f"{label:<22} {n:>8} rows {dt:8.2f}s {n / dt:>10,.0f} rows/s", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON line of results at the end."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--txn-rows", type=int, default=10, help="rows per upstream transaction")
    ap.add_argument("--max-txn-row", type=int, default=256)
    ap.add_argument("--uri", help="an existing downstream (mysql://user:pass@host:port/); default: start one")
    args = ap.parse_args(argv)

    local: LocalMariaDB | None = None
    if args.uri:
        from sparkcdc.config.replica import ReplicaConfig

        params = parse_mysql_sink(args.uri, ReplicaConfig()).conn
    else:
        local = LocalMariaDB(binlog=False).start()
        params = ConnParams(host=local.host, port=local.port, user=local.user, password=local.password)
    try:
        return run(params, args)
    finally:
        if local is not None:
            local.stop()


def run(params: ConnParams, args: argparse.Namespace) -> int:
    """The measured cases."""
    n = args.rows
    images = gen_rows(n)
    ts0 = 1 << 40
    inserts = [
        (RowChange("I", DB, "t", 0, ts0 + i // args.txn_rows, None, img, seq=i % args.txn_rows), TABLE)
        for i, img in enumerate(images)
    ]
    results = []
    applier = MySQLApplier(params, max_txn_row=args.max_txn_row)

    def reset() -> None:
        applier.apply_ddl(None, f"DROP DATABASE IF EXISTS {DB}")
        applier.apply_ddl(None, f"CREATE DATABASE {DB}")
        applier.apply_ddl(DB, DDL)

    def count() -> int:
        conn = applier.connection()
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {DB}.t")
            row = cur.fetchone()
        conn.commit()
        return int(row[0]) if row else -1

    print(
        f"downstream {params.redacted()}, {n} rows, {args.txn_rows} rows per upstream transaction", flush=True
    )
    reset()
    results.append(timed("applier insert", n, lambda: applier.apply_rows(inserts)))
    assert count() == n
    results.append(timed("applier safe-mode", n, lambda: applier.apply_rows(inserts, replicating_ts=ts0 + n)))
    assert count() == n
    ts1 = ts0 + n
    mixed = [
        (
            RowChange("U", DB, "t", 0, ts1 + i // args.txn_rows, img, (img[0], img[1] + 1, *img[2:]), seq=0),
            TABLE,
        )
        for i, img in enumerate(images)
    ] + [
        (RowChange("D", DB, "t", 0, ts1 + n + i // args.txn_rows, img, None, seq=0), TABLE)
        for i, img in enumerate(images[::2])
    ]
    results.append(timed("applier mixed U+D", len(mixed), lambda: applier.apply_rows(mixed)))
    assert count() == n - len(images[::2])
    stats = applier.stats
    reset()
    applier.close()

    from sparkcdc.sink.mysql.connection import connect

    conn, _ = connect(params)

    def baseline() -> None:
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {DB}.t (id, a, b, c, d, e) VALUES (%s, %s, %s, %s, %s, %s)", images)
        conn.commit()

    results.append(timed("executemany (1 conn)", n, baseline))
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {DB}.t")
        assert cur.fetchone() == (n,)
        cur.execute(f"DROP DATABASE {DB}")
    conn.close()
    print(json.dumps({"results": results, "applier_stats": stats.__dict__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
